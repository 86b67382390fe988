"""The control window as one of the show's inputs (visual/ui/control_window/ draws it): its
gestures become the frame's actions through the same checks as OSC and the web remote
(control/osc/osc_input.py `interpret`), and the show's state goes back to it every frame or two.

    poll()               once a frame, beside OSC and the web remote (show/show.py): the
                         window's messages -> Actions (at most 256 a frame, as OSC)
    publish(show, now)   once the frame is shown (Show.publish, in the live run's idle),
                         the window's state at most every PUSH_SECONDS: each parameter's
                         position on its slider and its text (`Rows`: made again only for
                         the values that changed), the knobs waiting for pickup,
                         the learn, the slots and the one playing, the meters
                         (show/inputs/web_input.py's ShowView, as the web page reads them), the
                         autopilot, MIDI and OSC activity, the HUD's lines; and one step of the
                         thumbnails

The pictures are GPU copies in the output's context (visual/ui/control_window/preview.py): the
preview is a frame taker of the one loop, filled each frame before the HUD; the thumbnails are
each slot's preset played offscreen as the contact sheet plays a look
(show/offline/contact_sheet.py `LookRun`), a few frames of it per show frame so the show never
stalls, then copied into the slot's texture; again when a slot's file changes (a save). Main
thread only.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

from swarm_instrument.audio.synth import drum_loop
from swarm_instrument.control.actions import Action
from swarm_instrument.control.looks.presets import PresetError, load_preset
from swarm_instrument.control.osc.osc_input import interpret
from swarm_instrument.control.osc.osc_wire import OscError
from swarm_instrument.control.parameters.groups import grouped
from swarm_instrument.control.parameters.registry import REGISTRY, param
from swarm_instrument.show.inputs.web_input import ShowView
from swarm_instrument.show.offline.contact_sheet import (
    AUDIO_RATE,
    SHEET_BPM,
    LookRun,
    SheetSettings,
)
from swarm_instrument.visual.gpu.context import is_software
from swarm_instrument.visual.ui.control_window.preview import Preview, Thumbnails

if TYPE_CHECKING:
    from swarm_instrument.show.show import Show

log = logging.getLogger(__name__)

PUSH_SECONDS = 1 / 30
ACTIVE_SECONDS = 0.3  # MIDI or OSC lit this long after a message
THUMBNAIL_SIZE = (192, 108)
SLOTS_CHECK_SECONDS = 1.0  # how often the slot files are looked at for a save
BUTTON_ADDRESSES = {"tap": "/swarm/tap", "downbeat": "/swarm/downbeat",
                    "half": "/swarm/tempo/half", "double": "/swarm/tempo/double",
                    "respawn": "/swarm/respawn", "burst": "/swarm/burst",
                    "resume": "/swarm/autopilot/resume"}


def layout_groups() -> list[tuple[str, list[dict[str, Any]]]]:
    """The registry in its groups (control/parameters/groups.py) as the window lays it out."""
    specs = {p.name: p for p in REGISTRY}
    return [(group, [{"name": name, "kind": specs[name].kind,
                      "choices": [str(c) for c in specs[name].choices]} for name in names])
            for group, names in grouped()]


def shown(value: Any) -> str:
    """A value as the slider's text says it."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, (tuple, list)):
        return "#" + "".join(f"{round(min(max(c, 0.0), 1.0) * 255):02x}" for c in value)
    return str(value)


def to_action(message: tuple, values: dict[str, Any]) -> Action:
    """A window message (visual/ui/control_window/control_window.py) -> the Action it asks
    for, through OSC's checks; OscError (or ValueError for a malformed one) says why not.
    `values`: the parameters now (a nudge moves from them)."""
    kind, *rest = message
    if kind == "norm":
        name, x = rest
        return interpret(f"/swarm/{name}/norm", [float(x)])
    if kind == "set":
        name, value = rest
        return interpret(f"/swarm/{name}", list(value) if isinstance(value, (tuple, list))
                         else [value])
    if kind == "nudge":
        name, steps = rest
        if name not in values:
            raise OscError(f"{name}: no such parameter")
        value = param(name).nudge(values[name], float(steps))
        return interpret(f"/swarm/{name}", [value])
    if kind in ("select", "learn"):
        (name,) = rest
        if name not in values:
            raise OscError(f"{name}: no such parameter")
        return Action(kind, param=name)
    if kind == "preset":
        return interpret("/swarm/preset", [int(rest[0])])
    if kind == "save":
        slot = int(rest[0])
        if not 1 <= slot <= 9:
            raise OscError(f"save: slots are 1-9, got {slot}")
        return Action("save_preset", slot)
    if kind == "autopilot":  # the switch: 0 off, 1 on
        return interpret("/swarm/autopilot", [int(rest[0])])
    if kind == "action" and rest[0] in BUTTON_ADDRESSES:
        return interpret(BUTTON_ADDRESSES[rest[0]], [])
    raise OscError(f"{kind}: not a control window message")


class Activity:
    """Whether a counter moved within ACTIVE_SECONDS: an input's lamp."""

    def __init__(self) -> None:
        self.count: int | None = None
        self.moved_at = -1e9

    def lit(self, count: int | None, now: float) -> bool:
        if count is not None and self.count is not None and count != self.count:
            self.moved_at = now
        self.count = count
        return now - self.moved_at < ACTIVE_SECONDS


class ThumbnailJob:
    """Each slot's look played offscreen (the contact sheet's LookRun) and copied into its
    texture: one slot at a time, `frames_per_step` frames a show frame; a slot whose file
    changed (a save) is played again."""

    def __init__(self, ctx, bank, settings=None, frames_per_step: int | None = None) -> None:
        software = is_software(ctx)
        self.ctx = ctx
        self.bank = bank
        # A look settles in a few seconds; a thumbnail needs no more agents than it has
        # pixels to show them. Software GL plays one thumbnail frame a show frame (about a
        # third of a frame's time there), a GPU a few (well under a millisecond each).
        self.settings = settings or SheetSettings(
            size=THUMBNAIL_SIZE, seconds=2.0 if software else 3.0, fps=30.0,
            count_cap=2048 if software else 65536)
        self.frames_per_step = frames_per_step or (1 if software else 4)
        self.song = drum_loop(SHEET_BPM, self.settings.seconds + 1.0, AUDIO_RATE)
        self.images = Thumbnails(ctx, self.settings.size)
        self.signatures: dict[int, Any] = {}  # slot -> the file it was rendered from
        self.ready: set[int] = set()
        self.queue: list[int] = []
        self.run: Any = None
        self.running: int | None = None
        self.rendered = 0
        self._next_check = -1e9

    def _signature(self, slot: int) -> Any:
        path = self.bank.slot_path(slot) if self.bank is not None else None
        if path is None:
            return None
        try:
            stat = os.stat(path)
        except OSError:
            return (str(path), None)
        return (str(path), stat.st_mtime_ns, stat.st_size)

    def check(self, now: float) -> None:
        """Queue the slots whose file is new or changed (at most every SLOTS_CHECK_SECONDS)."""
        if now < self._next_check:
            return
        self._next_check = now + SLOTS_CHECK_SECONDS
        for slot in range(1, 10):
            signature = self._signature(slot)
            if signature != self.signatures.get(slot):
                self.signatures[slot] = signature
                if slot == self.running:
                    self._drop_run()
                if slot not in self.queue:
                    self.queue.append(slot)

    def step(self) -> int | None:
        """Play a few frames of the slot in hand (starting the next one when none is); the
        slot whose thumbnail was just finished, else None."""
        if self.run is None:
            while self.queue and self.run is None:
                slot = self.queue.pop(0)
                path = self.bank.slot_path(slot) if self.bank is not None else None
                if path is None:
                    self.ready.discard(slot)
                    continue
                try:
                    preset = load_preset(path)
                except PresetError as exc:
                    log.info(f"control: slot {slot}'s thumbnail: {exc}")
                    self.ready.discard(slot)
                    continue
                frame_log = logging.getLogger("swarm_instrument.show.show")
                level = frame_log.level
                frame_log.setLevel(logging.WARNING)  # not "GL 4.3 backend" once a thumbnail
                try:
                    run = LookRun(self.ctx, preset, self.settings, self.song)
                finally:
                    frame_log.setLevel(level)
                self.run, self.running = run, slot
            if self.run is None:
                return None
        self.run.step(self.frames_per_step)
        if not self.run.done:
            return None
        slot = self.running
        self.images.fill(slot, self.run.framebuffer)
        self._drop_run()
        self.ready.add(slot)
        self.rendered += 1
        return slot

    def _drop_run(self) -> None:
        if self.run is not None:
            self.run.release()
        self.run, self.running = None, None

    def release(self) -> None:
        self._drop_run()
        self.images.release()


class Rows:
    """Each parameter's row as the window draws it: (position on its bar, its text, a
    colour's channels), made again only for the values that changed since the last push."""

    def __init__(self) -> None:
        self._made: dict[str, tuple[Any, tuple]] = {}  # name -> (value, row)

    def rows(self, values: dict[str, Any]) -> dict[str, tuple]:
        made, rows = self._made, {}
        for spec in REGISTRY:
            name = spec.name
            value = values[name]
            known = made.get(name)
            if known is None or known[0] != value:
                known = made[name] = (value, row(spec, value))
            rows[name] = known[1]
        return rows


def row(spec: Any, value: Any) -> tuple:
    """One parameter's row: (position on its bar, its text, a colour's channels)."""
    if spec.kind == "color":
        return (None, shown(value), tuple(float(c) for c in value))
    return (spec.to_norm(value), shown(value), None)


class FrameTakers:
    """Several frame takers of the one loop as one (the video outputs, the preview)."""

    def __init__(self, takers: list) -> None:
        self.takers = [taker for taker in takers if taker is not None]

    def take(self, framebuffer, size: tuple[int, int], now: float) -> None:
        for taker in self.takers:
            taker.take(framebuffer, size, now)


class ControlSurface:
    """The show's side of the control window: messages in, state (and pictures) out."""

    def __init__(self, window, preview: Preview, thumbnails: ThumbnailJob | None,
                 where: str = "") -> None:
        self.window = window
        self.preview = preview
        self.thumbnails = thumbnails
        self.where = where
        self.view = ShowView()
        self.applied = 0
        self.rejected = 0
        self.last_error: str | None = None
        self._next_push = -1e9
        self._midi = Activity()
        self._osc = Activity()
        self._rows = Rows()

    # ---- in ---------------------------------------------------------------------------------

    def poll(self, values: dict[str, Any] | None = None) -> list[Action]:
        actions = []
        values = values if values is not None else {}
        for message in self.window.take_messages():
            try:
                actions.append(to_action(message, values))
            except (OscError, ValueError, TypeError) as exc:
                self.rejected += 1
                self.last_error = str(exc)[:200]
                self.window.say(f"refused: {self.last_error}")
        self.applied += len(actions)
        return actions

    # ---- out --------------------------------------------------------------------------------

    def publish(self, show: Show, now: float) -> None:
        thumbnails = self.thumbnails
        if thumbnails is not None:
            thumbnails.check(now)
            slot = thumbnails.step()
            if slot is not None:
                image = thumbnails.images.images[slot]
                self.window.show_image(slot, image.glo, image.size)
        image = self.preview.image
        if image is not None:
            self.window.show_image("preview", image.glo, image.size)
        if now < self._next_push:
            return
        self._next_push = now + PUSH_SECONDS
        self.window.update(self.state_for_window(show, now))

    def state_for_window(self, show: Show, now: float) -> dict[str, Any]:
        view = self.view
        view.update_slots(show)
        params = show.params
        rows = self._rows.rows(params.as_dict())
        ghost, learning, midi_count = {}, None, None
        if show.midi is not None:
            midi = show.midi.state()
            for name, knob in midi["pickup"].items():
                try:
                    ghost[name] = param(name).to_norm(knob["knob"])
                except (KeyError, TypeError, ValueError):
                    continue
            if midi["learn"]["active"]:
                learning = midi["learn"]["param"]
            midi_count = midi.get("messages")
        meters = view.meters(show)
        osc_count = show.osc.state().get("applied") if show.osc is not None else None
        web = getattr(show, "web", None)
        web_count = web.state().get("applied") if web is not None else None
        meters.update(self._meter_texts(show, meters, midi_count, osc_count, web_count, now))
        looks = show.looks.telemetry(show.show_time)
        slots = dict(view.slot_names)
        fade = (params["crossfade_a"], params["crossfade_b"], params["crossfade"])
        status = f"{self.where}  |  {looks['name'] or 'no preset'}"
        if looks["modified"]:
            status += " (modified)"
        return {"rows": rows, "ghost": ghost, "selected": show.selected_param,
                "learning": learning, "slots": slots, "active": view.active,
                "morph": looks["morph"], "crossfade": fade, "meters": meters,
                "status": status, "notice": show.looks.problem or "",
                "autopilot": view.autopilot(show),
                "hud": show.hud_lines()}

    def _meter_texts(self, show: Show, meters: dict[str, Any], midi: int | None,
                     osc: int | None, web: int | None, now: float) -> dict[str, Any]:
        bpm = meters["bpm"]
        tempo = (f"{bpm:.1f} BPM  {meters['tempo_source']}{'  held' if meters['held'] else ''}"
                 if bpm else "tempo: none yet (T taps it)")
        beat_in_bar = int(meters["bar_phase"] * 4) % 4 if bpm and meters["bar_phase"] \
            is not None else None
        frame = (f"{meters['frame_ms']:.1f} ms a frame  {meters['fps']:.0f} fps"
                 if meters["frame_ms"] and meters["fps"] else "frame: --")
        agents = f"{meters['agents']:,} agents{'  PAUSED' if meters['paused'] else ''}"
        return {
            "tempo_text": tempo, "beats_text": "beat", "beat_in_bar": beat_in_bar,
            "midi_text": "MIDI off" if midi is None else f"MIDI  {midi:,} messages",
            "midi_active": self._midi.lit(midi, now),
            "osc_text": ("OSC off" if osc is None else f"OSC  {osc:,} applied")
            + ("" if web is None else f"   web {web:,}"),
            "osc_active": self._osc.lit(None if osc is None and web is None
                                        else (osc or 0) + (web or 0), now),
            "frame_text": frame, "agents_text": agents,
        }

    def state(self) -> dict[str, Any]:
        """Telemetry's `control` object."""
        thumbnails = self.thumbnails
        return {"window": self.where, "applied": self.applied, "rejected": self.rejected,
                "last_error": self.last_error, "preview_frames": self.preview.frames,
                "thumbnails": sorted(thumbnails.ready) if thumbnails is not None else [],
                "thumbnails_rendered": thumbnails.rendered if thumbnails is not None else 0,
                "draws": self.window.draws, "focused": self.window.focused,
                "editing": self.window.editing, "notice": self.window.notice_shown,
                "hud": list(self.window.hud),
                "autopilot": list(self.window.autopilot_shown),
                "widgets": dict(self.window.widgets)}

    def close(self) -> None:
        """The textures and framebuffers (the output's context is current: Show.release),
        then the window that borrowed the textures, never drawn again."""
        if self.thumbnails is not None:
            self.thumbnails.release()
        self.preview.release()
        self.window.close()
