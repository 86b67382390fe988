"""An action carried out on the show: what a key, MIDI, OSC, the web page, the control window or
a recorded track asked for (control/actions.py), one branch a kind. Main thread only.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from swarm_instrument.control.actions import Action
from swarm_instrument.show.autopilot.live_autopilot import act_on_autopilot
from swarm_instrument.show.inputs.beat_clock import move_tempo_range
from swarm_instrument.show.video_outputs import switch_outputs

if TYPE_CHECKING:
    from swarm_instrument.show.show import Show

log = logging.getLogger(__name__)


def carry_out(show: Show, action: Action) -> None:
    """Carry out one action at once, whatever asked for it (`Show.act` waits for a beat or bar
    first where `quantize` says so; a replay carries out what was recorded)."""
    kind = action.kind
    if show.recorder is not None:
        show.recorder.record_action(show.show_time, kind, action.value, action.values)
    if kind == "set":
        show.params.update(action.values)
        show.played(set(action.values))
        show.pick_up()
    elif kind == "tap":
        show.tap.tap(show.now if action.value is None else float(action.value))
        if show.tap.taps == 4:
            propose = getattr(show.tempo.sources.get("link"), "propose", None)
            reading = show.tap.reading(show.now)
            if propose is not None and reading is not None:
                propose(reading.bpm)
    elif kind == "downbeat":
        show.tempo.downbeat()
    elif kind in ("tempo_half", "tempo_double"):
        log.info(move_tempo_range(show.params, 0.5 if kind == "tempo_half" else 2.0))
        show.played({"tempo_min", "tempo_max"})
    elif kind == "respawn":
        show.respawn()
    elif kind == "separation_burst":
        show.burst.trigger(1.0 if action.value is None else action.value, show.show_time)
    elif kind == "recall_preset":
        show.looks.recall(int(action.value), show.show_time)
    elif kind == "save_preset":
        show.looks.save(int(action.value))
    elif kind == "learned":
        log.info(f"midi: learned {action.param}")
    elif kind == "select":
        show.selection.choose(action)
    elif kind == "nudge":
        show.nudge(float(action.value))
    elif kind == "learn":
        if action.param is not None:
            show.selection.choose(action)
        show.selection.toggle_learn(show.midi, show.status, action.param)
    elif kind == "pause":
        show.paused = not show.paused
    elif kind == "lure":
        show.lure.move_to(action.values["point"], show.now)  # idle on the clock
    elif kind in ("autopilot", "autopilot_resume"):  # the switch, "resume now"
        act_on_autopilot(show, action)
    elif kind == "outputs":
        switch_outputs(show.outputs, action, show.status)
