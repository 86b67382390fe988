"""The show: one frame of the instrument, shared by the window, headless runs and benchmarks.

    update    inputs -> parameters; lure / influencer motion
    simulate  one swarm step (the frame's time, clamped to 1/30 s, or the fixed --dt)
    draw      cull + indirect draw into a framebuffer (the renderer); the HUD is the window's

`Show` owns the swarm, the renderer and the camera, and knows the frame's figures for the HUD
and telemetry. Main thread only; nothing here reads agent data back.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import moderngl
import numpy as np

from control.midi_controller import Action
from control.params import Params
from control.text import printable
from visual.camera import OrbitCamera
from visual.gl import GpuTimer, ShaderError, ShaderWatch
from visual.lure import Lure
from visual.renderer import Renderer
from visual.swarm import MAX_DT, Swarm, spawn_state


BURST_SECONDS = 0.6
SLOW_MS = 50.0  # a frame this long shows on stage
# Parameters that steer the preset machinery itself: recalls and crossfades leave them alone.
CONTROL_ONLY = frozenset({"crossfade", "crossfade_a", "crossfade_b"})


@dataclass
class ShowOptions:
    neighbors: str = "grid"
    seed: int = 0
    fixed_dt: float | None = None  # --dt: exactly this step each frame
    obstacles: Sequence[Sequence[float]] = ()
    position: np.ndarray | None = None  # --state-in
    velocity: np.ndarray | None = None
    # Same input, same frames: the renderer's counts (which the camera follows) are read a
    # fixed two frames late, waiting for the GPU if need be (--dt and --render). A live show
    # reads them when the GPU is done instead, never waiting.
    reproducible: bool = False
    # Parameters the command line set (--count): preset recalls and crossfades leave them as
    # they are until the performer changes them live.
    pinned: frozenset[str] = frozenset()
    # The most agents a live change (a knob, OSC, a recall) may ask for on this machine
    # (visual/limits.py): more would freeze the show; None: the registry's limit.
    count_limit: int | None = None
    # A live show says its slow frames; an offline render (no audience, no clock) does not.
    live: bool = True


@dataclass
class FrameClock:
    """Frames per second and frame time over the last second of frames (wall clock), and the
    slow frames: longer than SLOW_MS and three times the recent median (a hitch, not a slow
    machine). A slow frame is counted and logged, never fatal."""

    times: deque = field(default_factory=lambda: deque(maxlen=240))
    slow_frames: int = 0
    last_slow_ms: float | None = None

    def tick(self, now: float) -> bool:
        """Record a frame; True when it was a slow one."""
        self.times.append(now)
        if len(self.times) < 30:
            return False
        gaps = np.diff(np.fromiter(self.times, float))
        frame_ms = gaps[-1] * 1000.0
        if frame_ms > SLOW_MS and frame_ms > 3.0 * float(np.median(gaps)) * 1000.0:
            self.slow_frames += 1
            self.last_slow_ms = frame_ms
            return True
        return False

    @property
    def frame_ms(self) -> float | None:
        if len(self.times) < 2:
            return None
        return (self.times[-1] - self.times[-2]) * 1000.0

    @property
    def fps(self) -> float | None:
        if len(self.times) < 2:
            return None
        recent = [t for t in self.times if t >= self.times[-1] - 1.0]
        if len(recent) < 2:
            return 1000.0 / self.frame_ms if self.frame_ms else None
        return (len(recent) - 1) / (recent[-1] - recent[0])


class Show:
    def __init__(self, ctx: moderngl.Context, params: Params, options: ShowOptions, *,
                 audio: Any = None, routes: Sequence[Any] = (), midi: Any = None,
                 presets: Any = None, preset: Any = None, recovery: Any = None,
                 osc: Any = None, say: Callable[[str], None] = print) -> None:
        from audio.base import Silence

        self.ctx = ctx
        self.params = params
        self.options = options
        self.audio = audio if audio is not None else Silence()
        self.routes = list(routes)  # audio modulation: source -> parameter, amount
        self.midi = midi  # control.midi.Midi, or None
        self.osc = osc  # control.osc.OscInput, or None
        self._osc_rejected_said = 0
        self._next_osc_note = 0.0
        self.say = say
        self.bank = presets  # control.presets.PresetBank: slots 1-9, or None
        self.preset = preset  # the preset last recalled (or started from), for "modified"
        self.morph = None  # control.presets.Morph in progress
        self._morph_started = 0.0
        self.recovery = recovery  # control.presets.RecoveryWriter, or None
        self.recorder = None  # control.control_track.ControlRecorder (--record-control)
        self.modified = False  # the live look differs from the recalled preset
        self._crossfade_seen = params["crossfade"]
        self._crossfade_pair = None  # ((slot a, slot b), (preset a, preset b))
        self.selected = 0  # the HUD's chosen parameter: keys change it, L learns it
        self.pinned = set(options.pinned)  # the command line's, until played live
        self._before_inputs: dict[str, Any] | None = None  # the values before this frame's
        # knobs and OSC (after any recall they made): what they change is the performer's
        self._shader_watch = ShaderWatch()
        self.shader_error: str | None = None
        self._burst = (0.0, -math.inf)  # separation burst: strength, start (show time)
        self.swarm = Swarm(ctx, params, neighbors=options.neighbors, seed=options.seed,
                           position=options.position, velocity=options.velocity)
        if options.obstacles:
            self.swarm.set_obstacles(options.obstacles)
        self.renderer = Renderer(ctx, params)
        self.renderer.fixed_lag = options.reproducible
        self.camera = OrbitCamera()
        self.lure = Lure(params["contain_radius"], flat=params["dimensions"] == 2)
        self._sim_timer = GpuTimer(ctx)
        if not self.renderer.has_fences:
            say("GL fences unavailable: counts and GPU times are read two frames late, which "
                "waits whenever the GPU is further behind")
        self.clock = FrameClock()
        self.paused = False
        self.frame = 0
        self.sim_time = 0.0  # simulated seconds: the lure wanders on this clock
        self.show_time = 0.0  # seconds of show: the camera orbits on this clock
        self.respawns = 0
        self.values: dict[str, Any] = {}  # modulated parameter values for this frame
        self.speed_scale = 1.0  # the audio boost: 1 + level * audio_speed_boost
        self.status: dict[str, str] = {}  # one line each for the HUD: audio, midi, preset, ...
        self._next_slow_note = 0.0
        self._next_cap_note = 0.0

    # ---- update -----------------------------------------------------------------------------

    def update(self, now: float) -> None:
        """Inputs -> this frame's values: audio analysis, its speed boost and modulation."""
        from audio.analysis import speed_scale
        from audio.modulation import modulate

        self.poll_shaders(now)
        self.audio.update(now)
        for message in self.audio.take_messages():
            self.say(f"audio: {message}")
        self._before_inputs = self.params.as_dict()
        if self.midi is not None:
            for action in self.midi.update(now):
                self.act(action)
            self.status["midi"] = self._midi_line()
        if self.osc is not None:
            self._apply_osc(self.osc.poll())
        before, self._before_inputs = self._before_inputs, None
        self.played({name for name, value in self.params.as_dict().items()
                     if before[name] != value})
        self._update_presets(now)
        if self.recorder is not None:  # on the show's clock, as an offline render replays it
            self.recorder.capture(self, self.show_time)
        self.speed_scale = speed_scale(self.audio.level, self.params["audio_speed_boost"])
        self.values = modulate(self.routes, self.audio.sources(), self.params.as_dict())
        self._apply_burst()
        self.status["audio"] = self._audio_line()

    # ---- presets ---------------------------------------------------------------------------------

    def recall_slot(self, slot: int) -> None:
        """Number key / program change: blend to the slot's preset over morph_seconds. A bad
        file is shown in the HUD and the current look stays."""
        from control.presets import Morph, PresetError

        if self.bank is None:
            return
        try:
            preset = self.bank.recall(slot)
        except PresetError as exc:
            self._preset_problem(str(exc))
            return
        self.morph = Morph(self.params.as_dict(), preset, self.params["morph_seconds"],
                           start_routes=self.routes, keep=self.kept)
        if self.recorder is not None:
            self.recorder.record_preset(self.show_time, preset.name, preset.values,
                                        preset.routes)
        self._morph_started = self.show_time
        self.preset = preset
        self.status.pop("preset error", None)
        self._step_morph()
        if self._before_inputs is not None:  # recalled by a program change or OSC: what the
            self._before_inputs = self.params.as_dict()  # recall set is not the performer's
        if self.midi is not None:
            self.midi.preset_recalled()  # knobs pick up the new values instead of jumping
        self.say(f"preset: slot {slot}, {preset.name}")

    @property
    def kept(self) -> frozenset[str]:
        """What recalls and crossfades leave alone: the preset machinery's own parameters and
        those the command line pinned."""
        return CONTROL_ONLY | frozenset(self.pinned)

    def played(self, names: set[str]) -> None:
        """The performer changed `names` live (a knob, a key, OSC): a morph under way lets go
        of them, and a value the command line pinned is the performer's from now on."""
        if not names:
            return
        if self.morph is not None:
            self.morph.let_go(names)
        self.pinned -= names

    def save_slot(self, slot: int) -> None:
        """Ctrl+number: the current look into the user's slot file (the old one kept)."""
        from control.presets import PresetError, preset_from_show

        if self.bank is None:
            return
        name = self.preset.name if self.preset is not None and not self.preset_modified() \
            else f"slot {slot}"
        try:
            path = self.bank.save(slot, preset_from_show(name, self.params, self.routes))
        except PresetError as exc:
            self._preset_problem(str(exc))
            return
        self.preset = self.bank.recall(slot)
        self.say(f"preset: saved '{name}' into slot {slot} ({path})")

    def recall_preset(self, index: int) -> None:
        """A MIDI program change (0-based) recalls slot index + 1."""
        from control.presets import slot_for_program

        slot = slot_for_program(index)
        if slot is None:
            self.say(f"midi: program change {index}: no slot {index + 1} (slots are 1-9)")
        else:
            self.recall_slot(slot)

    def preset_modified(self) -> bool:
        from control.presets import differs

        return self.preset is not None and differs(self.preset, self.params, self.routes,
                                                   keep=self.kept)

    def _preset_problem(self, message: str) -> None:
        self.status["preset error"] = message[:200]
        self.say(f"preset: {message}; the current look stays")

    def _step_morph(self) -> None:
        t = self.show_time - self._morph_started
        self.params.update(self.morph.values_at(t))
        self.routes = self.morph.routes_at(t)
        if self.morph.progress_at(t) >= 1.0:
            self.morph = None

    def _update_presets(self, now: float) -> None:
        if self.morph is not None:
            self._step_morph()
        self._update_crossfade()
        # Compared once a frame; telemetry reads the result. A morph is not an edit.
        self.modified = self.morph is None and self.preset_modified()
        if self.recovery is not None:
            self._save_recovery(now)
        name = self.preset.name if self.preset is not None else "(none)"
        morph = f"  morph {self.morph.progress_at(self.show_time - self._morph_started):.0%}" \
            if self.morph is not None else ""
        self.status["preset"] = f"{name}{' (modified)' if self.modified else ''}{morph}"

    def _save_recovery(self, now: float) -> None:
        """Hand the look to the recovery writer (it writes every few seconds, on its thread).
        Mid-morph that is the look the show is heading to, the preset's target, never a blend
        under the preset's name; a look changed since its recall is marked modified."""
        look, routes = self.params, self.routes
        if self.morph is not None:
            look = Params({**self.params.as_dict(), **self.morph.target})
            routes = self.morph.target_routes
        error = self.recovery.maybe_save(now, look, routes, {
            "preset": self.preset.name if self.preset else None,
            "modified": self.modified, "seed": self.options.seed})
        if error:
            self.say(f"preset: {error}")

    def _update_crossfade(self) -> None:
        """A moved `crossfade` (a MIDI fader) blends presets crossfade_a and crossfade_b."""
        from control.presets import PresetError, blend_routes, crossfade

        x = self.params["crossfade"]
        if x == self._crossfade_seen or self.bank is None:
            return
        self._crossfade_seen = x
        slots = (self.params["crossfade_a"], self.params["crossfade_b"])
        if self._crossfade_pair is None or self._crossfade_pair[0] != slots:
            try:  # read the two files once per pair of slots, not at every fader step
                self._crossfade_pair = (slots, tuple(self.bank.recall(s) for s in slots))
            except PresetError as exc:
                self._preset_problem(str(exc))
                return
        a, b = self._crossfade_pair[1]
        self.morph = None
        self.params.update(crossfade(a, b, x, keep=self.kept))
        self.routes = blend_routes(a.routes, b.routes, x)
        self.preset = b if x >= 0.5 else a

    def poll_shaders(self, now: float) -> None:
        """Shader hot reload: an edited file under shaders/ is recompiled; a file that fails
        shows its error (file and line) in the HUD and the last good programs keep running."""
        if not self._shader_watch.changed(now):
            return
        errors = []
        for owner in (self.swarm, self.renderer):
            try:
                owner.reload_shaders()
            except ShaderError as exc:
                errors.append(str(exc))
        if errors:
            error = " | ".join(line.strip() for text in errors for line in text.splitlines()
                               if ":" in line and "error" in line.lower())[:300]
            self.shader_error = error or errors[0][:300]
            self.status["shaders"] = f"ERROR, last good shaders running: {self.shader_error}"
            self.say(f"shaders: {errors[0]}")
        else:
            self.shader_error = None
            self.status["shaders"] = "reloaded"
            self.say("shaders: reloaded")

    # ---- MIDI actions, learn -------------------------------------------------------------------

    def act(self, action: Any) -> None:
        """A note or program change's action (control.midi_controller.Action)."""
        if self.recorder is not None:
            self.recorder.record_action(self.show_time, action.kind, action.value)
        if action.kind == "respawn":
            self.respawn()
        elif action.kind == "separation_burst":
            self._burst = (max(float(action.value or 127), 1.0) / 127.0, self.show_time)
        elif action.kind == "recall_preset":
            self.recall_preset(int(action.value))
        elif action.kind == "learned":
            self.say(f"midi: learned {action.param}")

    def _apply_burst(self) -> None:
        """A separation burst: separation_weight up by 3 x velocity, fading over 0.6 s."""
        strength, start = self._burst
        age = self.show_time - start
        if not 0.0 <= age < BURST_SECONDS:
            return
        from control.params import param

        base = self.values.get("separation_weight", self.params["separation_weight"])
        spec = param("separation_weight")
        boosted = base + 3.0 * strength * (1.0 - age / BURST_SECONDS)
        self.values["separation_weight"] = min(max(boosted, spec.lo), spec.hi)

    def learnable(self) -> list[str]:
        """Parameters a knob can drive (colours cannot), in registry order."""
        from control.params import REGISTRY

        return [p.name for p in REGISTRY if p.kind != "color"]

    @property
    def selected_param(self) -> str:
        names = self.learnable()
        return names[self.selected % len(names)]

    def select(self, step: int) -> None:
        self.selected = (self.selected + step) % len(self.learnable())

    def nudge(self, steps: float) -> None:
        """Left/Right: move the chosen parameter by `steps` of its performance range (the
        window uses NUDGE_FINE, with Shift NUDGE_COARSE); a switch flips, a choice steps.
        Knobs then pick up the new value, as after OSC or a recall."""
        from control.params import param

        name = self.selected_param
        value = param(name).nudge(self.params[name], steps)
        if value == self.params[name]:
            return
        self.params[name] = value
        self.played({name})
        if self.midi is not None:
            self.midi.preset_recalled()

    def toggle_learn(self) -> None:
        """L: learn the selected parameter (the next knob turned binds), or cancel."""
        if self.midi is None:
            self.status["midi"] = "off: no knob to learn (MIDI was not opened)"
            self.say("midi: MIDI is off (--no-midi, safe mode or no MIDI system); no knob to "
                     "learn: Left/Right change the chosen parameter")
            return
        if self.midi.controller.learning:
            self.midi.cancel_learn()
        else:
            self.midi.start_learn(self.selected_param)

    # ---- OSC --------------------------------------------------------------------------------

    def _apply_osc(self, commands: list) -> None:
        """The frame's OSC commands, in order. Rejected messages are counted by the input; the
        console gets the latest reason at most every 5 s (a flood must not flood the log)."""
        touched = False
        for command in commands:
            if command.kind == "set":
                self.params.update(command.values)
                touched = True
            elif command.kind == "preset":
                self.recall_slot(command.slot)
            elif command.kind == "respawn":  # as the pads do, so --record-control keeps it
                self.act(Action("respawn"))
            elif command.kind == "burst":
                self.act(Action("separation_burst", max(1, round(command.strength * 127))))
        if touched and self.midi is not None:
            self.midi.preset_recalled()  # knobs pick up the new values instead of jumping
        osc = self.osc
        if osc.rejected > self._osc_rejected_said and time.perf_counter() >= self._next_osc_note:
            self._next_osc_note = time.perf_counter() + 5.0
            self.say(f"osc: {osc.rejected - self._osc_rejected_said} message(s) refused, "
                     f"latest: {osc.last_error}")
            self._osc_rejected_said = osc.rejected
        line = f"{osc.host}:{osc.port}  {osc.applied} applied"
        if osc.dropped:
            line += f"  {osc.dropped} over the frame's budget"
        if osc.rejected:
            reason = osc.last_error or ""
            reason = reason if len(reason) <= 70 else reason[:67] + "..."
            line += f"  {osc.rejected} refused (latest: {reason})"
        self.status["osc"] = line

    def _midi_line(self) -> str:
        state = self.midi.state()
        line = state.get("state") or "MIDI"
        if len(line) > 90:  # the full reason went to the console once; the HUD gets its start
            line = line[:87] + "..."
        learn = state["learn"]
        if learn["active"]:
            line += f"  LEARN: turn a knob for {learn['param']} (L cancels)"
        waiting = state["pickup"]
        if waiting:
            shown = ", ".join(f"{name} knob {info['knob']:.3g}" for name, info
                              in list(waiting.items())[:3])
            line += f"  pickup: {shown}"
        return line

    def _audio_line(self) -> str:
        """State and device, a level meter, the bands and the onsets (a * on an onset)."""
        audio, bands = self.audio, self.audio.bands
        meter = "#" * round(audio.level * 10)
        source = f"{audio.state} ({audio.device})" if audio.device else audio.state
        return (f"{source}  [{meter:<10}] {audio.level:4.2f}  low {bands.low:4.2f} "
                f"mid {bands.mid:4.2f} high {bands.high:4.2f}  onsets {audio.onsets}"
                f"{' *' if audio.onset else ''}")

    def frame_dt(self, wall_dt: float) -> float:
        """This frame's step: the fixed --dt, else the wall time since the last frame."""
        if self.options.fixed_dt is not None:
            return self.options.fixed_dt
        return min(max(wall_dt, 0.0), MAX_DT)

    def toggle_pause(self) -> None:
        self.paused = not self.paused

    def respawn(self) -> None:
        """A fresh spawn (a new seed each time, so R gives a new start)."""
        self.respawns += 1
        position, velocity = spawn_state(self.params["count"], self.params,
                                         self.options.seed + self.respawns)
        self.swarm.set_state(position, velocity)

    def move_lure(self, point: Sequence[float]) -> None:
        self.lure.move_to(point, self.sim_time)

    def lure_position(self) -> np.ndarray:
        self.lure.radius = self.params["contain_radius"]
        self.lure.flat = self.params["dimensions"] == 2
        return self.lure.position(self.sim_time)

    # ---- one frame ----------------------------------------------------------------------------

    def advance(self, dt: float) -> None:
        """Simulate one step of `dt` (unless paused); the camera's clock moves either way."""
        if self.swarm.count != self.params["count"]:
            self._cap_count()
            self.swarm.resize(self.params["count"])  # on the GPU: no stalled frame
        self.show_time += dt
        self.camera.time = self.show_time
        self.camera.follow(self.renderer.swarm_radius, dt, self.renderer.swarm_center)
        if self.paused:
            return
        with self._sim_timer:
            self.swarm.step(dt, target=self.lure_position(), speed_scale=self.speed_scale,
                            values=self.values)
        self.sim_time += min(dt, MAX_DT)

    def _cap_count(self) -> None:
        """A count this machine cannot hold live is capped, and said (at most every 10 s)."""
        limit = self.options.count_limit
        asked = self.params["count"]
        if limit is None or asked <= limit:
            return
        self.params["count"] = limit
        now = time.perf_counter()
        if now >= self._next_cap_note:
            self._next_cap_note = now + 10.0
            self.say(f"count {asked:,}: more than this machine holds live; capped at {limit:,}")
        self.status["count"] = f"capped at {limit:,} (asked {asked:,})"

    def draw(self, framebuffer: moderngl.Framebuffer, size: tuple[int, int] | None = None
             ) -> None:
        """Cull and draw into `framebuffer`, `size` pixels (default: its own size)."""
        self.renderer.render(self.swarm, self.camera, framebuffer, lure=self.lure_position(),
                             time=self.show_time, values=self.values,
                             show_lure=not self.lure.wandering, size=size)
        self.frame += 1
        if self.clock.tick(time.perf_counter()) and self.options.live and \
                time.perf_counter() >= self._next_slow_note:
            self._next_slow_note = time.perf_counter() + 10.0  # at most a line every 10 s
            self.say(f"slow frame: {self.clock.last_slow_ms:.0f} ms at frame {self.frame} "
                     f"({self.clock.slow_frames} so far)")

    # ---- what the HUD and telemetry show --------------------------------------------------------

    @property
    def gpu_ms(self) -> dict[str, float | None]:
        return {"simulate": self._sim_timer.last_ms, **self.renderer.gpu_ms}

    def telemetry(self) -> dict[str, Any]:
        params = {k: (list(v) if isinstance(v, tuple) else v)
                  for k, v in self.params.as_dict().items()}
        return {
            "time": time.time(),
            "pid": os.getpid(),
            "frame": self.frame,
            "fps": _round(self.clock.fps),
            "frame_ms": _round(self.clock.frame_ms),
            "slow_frames": self.clock.slow_frames,
            "gpu_ms": {k: _round(v) for k, v in self.gpu_ms.items()},
            "agents": self.swarm.count,
            "visible": self.renderer.visible,
            "near_lure": self.renderer.near_lure,
            "counts_lag": (None if self.renderer.counts_frame is None
                           else self.renderer.frames - 1 - self.renderer.counts_frame),
            "readback": self.renderer.readback,
            "paused": self.paused,
            "params": params,
            "audio": self.audio.telemetry(),
            "midi": self.midi.state() if self.midi is not None else None,
            "osc": self.osc.state() if self.osc is not None else None,
            "preset": {
                "name": self.preset.name if self.preset is not None else None,
                "modified": self.modified,
                "morph": (None if self.morph is None else
                          _round(self.morph.progress_at(self.show_time - self._morph_started))),
            },
            "modulated": {k: _round(v) for k, v in self.values.items()},
            "speed_scale": _round(self.speed_scale),
            "frame_size": list(self.renderer.last_size) if self.renderer.last_size else None,
            "lure": {"held": not self.lure.wandering,
                     "position": [_round(v) for v in self.lure_position()]},
            "selected": self.selected_param,
        }

    def hud_lines(self) -> list[str]:
        fps = self.clock.fps
        frame_ms = self.clock.frame_ms
        gpu = self.gpu_ms

        def ms(value: float | None) -> str:
            return "n/a" if value is None else f"{value:.2f}"

        visible = self.renderer.visible
        lines = [
            f"{fps:5.1f} fps  {frame_ms:6.2f} ms a frame" if fps and frame_ms else "-- fps",
            f"GPU ms: simulate {ms(gpu['simulate'])}  cull {ms(gpu['cull'])}  "
            f"draw {ms(gpu['draw'])}",
            f"agents {self.swarm.count:,}  visible {'-' if visible is None else f'{visible:,}'}"
            f"  near lure {'-' if self.renderer.near_lure is None else self.renderer.near_lure}",
            f"{self.swarm.neighbors} neighbours  {'PAUSED' if self.paused else ''}".rstrip(),
        ]
        lines += [f"{key}: {value}" for key, value in self.status.items()]
        name = self.selected_param
        value = self.params[name]
        shown = f"{value:.4g}" if isinstance(value, float) else str(value)
        modulated = self.values.get(name)
        if modulated is not None and modulated != value:
            shown += f" (now {modulated:.4g})"
        if self.midi is not None:
            knob = self.midi.state()["pickup"].get(name)
            if knob:
                shown += f"  knob at {knob['knob']:.4g}: turn it past the value to pick up"
        learn = "L: MIDI learn" if self.midi is not None else "MIDI off"
        lines.append(f"param [Up/Down, Left/Right]: {name} = {shown}   {learn}")
        return [printable(line, 240) for line in lines]  # names and reasons from outside

    def release(self) -> None:
        self.audio.close()
        if self.midi is not None:
            self.midi.close()
        if self.osc is not None:
            self.osc.close()
        if self.recovery is not None:
            self.recovery.close()  # what the writer thread holds reaches the disk
        self._sim_timer.release()
        self.renderer.release()
        self.swarm.release()


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None or not math.isfinite(value) else round(value, digits)


class LatestRecord:
    """The newest telemetry record, replaced whole about once a second (a temporary file and a
    rename): what the supervisor puts in a crash report. Failures are silent: it is a log."""

    def __init__(self, path: str | os.PathLike, interval: float = 1.0) -> None:
        self.path = os.fspath(path)
        self.interval = interval
        self._last = -math.inf

    def maybe_write(self, now: float, record_of: Callable[[], dict]) -> None:
        if now - self._last < self.interval:
            return
        self._last = now
        temporary = f"{self.path}.tmp"
        try:
            with open(temporary, "w", encoding="utf-8") as stream:
                stream.write(json.dumps(record_of()))
            os.replace(temporary, self.path)
        except (OSError, ValueError):
            pass


class Telemetry:
    """Appends one JSON object a line to a file: once a second and once at exit.

    A write that fails is reported once and telemetry stops; the show goes on.
    """

    def __init__(self, path: str | os.PathLike, interval: float = 1.0) -> None:
        self.path = path
        self.interval = interval
        self._last = -math.inf
        self.error: str | None = None
        try:
            self._stream = open(path, "a", encoding="utf-8", buffering=1)
        except OSError as exc:
            raise OSError(f"{path}: cannot open the telemetry file ({exc.strerror})") from None

    def maybe_write(self, now: float, record_of: Callable[[], dict]) -> bool:
        """Write `record_of()` if a second has passed (the record is only built then)."""
        if now - self._last < self.interval:
            return False
        self._last = now
        return self.write(record_of())

    def write(self, record: dict) -> bool:
        if self._stream is None:
            return False
        try:
            self._stream.write(json.dumps(record) + "\n")
            return True
        except (OSError, ValueError) as exc:
            self.error = f"telemetry stopped: {self.path}: {exc}"
            self.close()
            return False

    def close(self) -> None:
        if getattr(self, "_stream", None) is not None:
            try:
                self._stream.close()
            except OSError:
                pass
            self._stream = None
