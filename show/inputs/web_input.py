"""The web remote as one of the show's inputs (control/web/web_remote.py's server): its messages
become the frame's actions, and the show's state goes back to the page a few times a second.

`WebInput.poll()` is read once a frame next to OSC (show/show.py); `publish(show, now)`, once
the frame is shown (Show.publish, in the live run's idle), hands the server a fresh snapshot
(the meters and slots read by `ShowView`, which the control window reads too:
show/inputs/control_surface.py) at most every PUSH_SECONDS
(control/web/web_session.py): the meters (level, bands, onset, tempo and beat, frame time), the
preset slots with their names, the preset playing and its morph, the autopilot (its section, next
change and who is in control), and every parameter's value.
Building it costs a few tens of microseconds; the slot names (nine small files read) only when the
preset changes (a recall, a save). Main thread only; the server reads the snapshot on its threads
and never changes it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from swarm_instrument.control.actions import Action
from swarm_instrument.control.web.web_address import is_loopback
from swarm_instrument.control.web.web_messages import plain_value
from swarm_instrument.control.web.web_remote import WebProblem, WebRemote
from swarm_instrument.control.web.web_token import load_or_create_token
from swarm_instrument.show.autopilot.autopilot_view import autopilot_view

if TYPE_CHECKING:
    from swarm_instrument.show.show import Show

log = logging.getLogger(__name__)


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(float(value), digits)


class ShowView:
    """What a control surface shows of the show, read the same way for each of them (the web
    page, the control window): the meters and the preset slots. The slot names (nine small
    files read) are read again only when the preset changes (a recall or a save makes a new
    Preset)."""

    def __init__(self) -> None:
        self._slots_key: object = None
        self.slot_names: dict[int, str] = {}
        self.active: int | None = None

    def meters(self, show: Show) -> dict[str, Any]:
        """Level, bands, onsets, tempo and beat, frame time, agents: plain JSON values."""
        audio, tempo, clock = show.audio, show.tempo, show.clock
        bands = audio.bands
        onset = audio.sources().get("onset", 0.0)
        return {
            "level": _r(audio.level), "low": _r(bands.low), "mid": _r(bands.mid),
            "high": _r(bands.high), "onset": _r(onset), "onsets": audio.onsets,
            "audio": str(audio.state),
            "bpm": _r(tempo.bpm, 2), "beat": _r(tempo.beat, 4),
            "bar_phase": _r(tempo.bar_phase, 4), "tempo_source": str(tempo.source),
            "held": bool(tempo.held),
            "frame_ms": _r(clock.frame_ms, 2), "fps": _r(clock.fps, 1),
            "agents": show.swarm.count, "paused": show.paused,
        }

    def autopilot(self, show: Show) -> dict[str, Any]:
        """The autopilot's section, next change and who is in control
        (show/autopilot/autopilot_view.py); a show without one says how to have one."""
        pilot = getattr(show, "autopilot", None)
        return autopilot_view(None if pilot is None else pilot.telemetry(show.now), show.now,
                              show.status.get("autopilot"))

    def update_slots(self, show: Show) -> bool:
        """The slots' names and which one is playing, read again only when the preset
        changed; True when they were read again."""
        looks = show.looks
        key = (looks.preset, looks.problem)
        if key == self._slots_key:
            return False
        self._slots_key = key
        bank = looks.bank
        names = getattr(bank, "names", None)
        self.slot_names = dict(names()) if names else {}
        self.active = None
        path = getattr(looks.preset, "path", None)
        slot_path = getattr(bank, "slot_path", None)
        if path is not None and slot_path is not None:
            for slot in self.slot_names:
                if slot_path(int(slot)) == path:
                    self.active = int(slot)
        return True


class WebInput:
    """The show's side of the web remote: actions in, snapshots out."""

    def __init__(self, remote: WebRemote) -> None:
        self.remote = remote
        self.view = ShowView()

    @property
    def rejected(self) -> int:
        return self.remote.rejected

    @property
    def last_error(self) -> str | None:
        return self.remote.last_error

    def poll(self) -> list[Action]:
        return self.remote.poll()

    def publish(self, show: Show, now: float) -> None:
        self.remote.publish(now, lambda: self.snapshot(show, now))

    def snapshot(self, show: Show, now: float) -> dict[str, Any]:
        """What the page shows, as plain JSON values (colours "#rrggbb")."""
        view = self.view
        preset = show.looks.telemetry(show.show_time)
        view.update_slots(show)
        preset["slot"] = view.active
        return {
            "t": round(now, 3),
            "meters": view.meters(show),
            "preset": preset,
            "slots": {str(slot): name for slot, name in view.slot_names.items()},
            "outputs": outputs_state(show),
            "autopilot": view.autopilot(show),
            "values": {name: plain_value(value) for name, value in show.params.items()},
        }

    def state(self) -> dict[str, Any]:
        return self.remote.state()

    def close(self) -> None:
        self.remote.close()


def outputs_state(show: Show) -> list[dict[str, Any]]:
    """The video outputs as the page lists them: on air or not, and how they do."""
    outputs = getattr(show, "outputs", None)
    if not outputs:
        return []
    return [{"label": output.label, "live": output.live, "state": output.state,
             "sent": output.sent, "dropped": output.dropped} for output in outputs.outputs]


def open_web(endpoint: tuple[str, int] | None) -> WebInput | None:
    """The web remote --web asks for, or None; an address that cannot be listened on is said
    in one line and the show goes on without it. Anything but loopback needs the token, kept
    with the user's settings and printed in the page's address."""
    if not endpoint:
        return None
    host, port = endpoint
    token = None
    if not is_loopback(host):
        token, note = load_or_create_token()
        log.info(f"web: {note}")
    try:
        remote = WebRemote(host, port, token=token)
    except WebProblem as exc:
        log.info(f"{exc}; the show goes on without the web remote")
        return None
    urls = remote.urls
    log.info(f"web: control page at {urls[0]}")
    for url in urls[1:]:
        log.info(f"web: also at {url}")
    if token is None:
        log.info("web: this machine only; --web 0.0.0.0:PORT for a phone or tablet on the "
                 "network (a link with a token)")
    return WebInput(remote)
