"""The show's inputs read: MIDI, OSC, the web remote and the control surfaces, their actions
carried out by `Show.act`. Twice a frame (show/show.py): at the update, for what the simulation
steps with, and again just before the draw (late latching: a knob turned, a pad hit or a
message sent while the simulation stepped reaches this frame's picture, not the next). The
show's state goes the other way, to the web page and the control window, once a frame is
shown (`publish_state`, from Show.publish in the live run's idle): outside the frame, whose
inputs it does not touch. Main thread only.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from swarm_instrument.show.show import Show

log = logging.getLogger(__name__)


def read_inputs(show: Show, now: float) -> bool:
    """Every input's new messages carried out. True when anything came."""
    came = False
    midi = show.midi
    if midi is not None:
        params = show.params
        before = params.as_dict()
        actions = midi.update(now)  # knobs set their parameters as they turn
        turned = {name for name, value in params.as_dict().items() if before[name] != value}
        if turned:
            show.played(turned)
        for action in actions:
            show.act(action)
        came = bool(turned or actions)
    osc = show.osc
    if osc is not None:
        for action in osc.poll():
            show.act(action)
            came = True
        say_osc_refusals(show)
    web = show.web
    if web is not None:  # the web remote
        for action in web.poll():
            show.act(action)
            came = True
    for surface in show.surfaces:
        for action in surface.poll(show.params.as_dict()):
            show.act(action)
            came = True
    return came


def publish_state(show: Show, now: float) -> None:
    """The web page and the control surfaces handed the show's state (meters, values, the
    HUD's lines; each at its own rate), and a control window's thumbnails and preview."""
    if show.web is not None:
        show.web.publish(show, now)
    for surface in show.surfaces:
        surface.publish(show, now)


def say_osc_refusals(show: Show) -> None:
    """OSC messages refused since the last note, said at most every 5 s."""
    osc = show.osc
    if osc.rejected > show.osc_said and show.note("osc", 5.0):
        log.info(f"osc: {osc.rejected - show.osc_said} message(s) refused, latest: "
                 f"{osc.last_error}")
        show.osc_said = osc.rejected
