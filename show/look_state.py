"""The look in the show: preset recalls with their morph, saves, the crossfade fader, what the
command line pinned and what the performer played, "modified", and the recovery file.

A look is every parameter plus the modulation routes; `Looks` changes the registry's values
and owns the routes. Time is the show's (`show_time`): a morph runs on it, so a render morphs
the same way every run. Main thread only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from swarm_instrument.control.looks.presets import Preset, PresetError, differs, preset_from_show
from swarm_instrument.control.parameters.modulation import Route
from swarm_instrument.control.parameters.morph import Morph, blend_routes, crossfade
from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.show.governor import PARAMS as GOVERNOR_PARAMS

log = logging.getLogger(__name__)
# Parameters that steer the preset machinery itself: recalls and crossfades leave them alone.
# So do the parameters of musical time (a look does not change the tempo or its clock) and
# `post`, whether this machine runs the post chain at all (a look sets how it looks, not that).
CONTROL_ONLY = frozenset({"crossfade", "crossfade_a", "crossfade_b", "bpm", "tempo_source",
                          "quantize", "post"})
# So do the governor's target and pins (show/governor.py): what this machine draws, not a look.
CONTROL_ONLY |= GOVERNOR_PARAMS
SLOTS = range(1, 10)


class Bank(Protocol):
    """The preset slots (control.looks.presets.PresetBank)."""

    def recall(self, slot: int) -> Preset: ...
    def save(self, slot: int, preset: Preset) -> Any: ...


class Recovery(Protocol):
    """The recovery file's writer (control.looks.recovery.RecoveryWriter)."""

    def maybe_save(self, now: float, params: Params, routes: Iterable[Route],
                   extra: dict[str, Any] | None = None) -> str | None: ...
    def close(self) -> None: ...


class Looks:
    def __init__(self, params: Params, routes: Iterable[Route] = (), *, bank: Bank | None = None,
                 preset: Preset | None = None, recovery: Recovery | None = None,
                 pinned: Iterable[str] = (), seed: int = 0,
                 pick_up: Callable[[], None] = lambda: None) -> None:
        self.params = params
        self.routes: list[Route] = list(routes)  # modulation: source -> parameter, amount
        self.bank = bank  # slots 1-9, or None (benchmarks, a render without MIDI)
        self.preset = preset  # the preset last recalled (or started from), for "modified"
        self.recovery = recovery
        self.recorder: Any = None  # --record-control (show.show.Recorder): told of each recall
        self.pinned = set(pinned)  # the command line's, until played live
        self.seed = seed
        self.pick_up = pick_up  # knobs pick up the new values instead of jumping
        # told when the performer plays the look (a played value, a recall): the live
        # autopilot's hand-over (show/autopilot/live_autopilot.py)
        # with the names played (None: the whole look, a recall)
        self.on_played: Callable[[set[str] | None], None] | None = None
        self.morph: Morph | None = None
        # what the autopilot moves inside its look (show/autopilot/evolution.py): the look as
        # chosen, moving, not "modified"
        self.evolving: set[str] = set()
        self._morph_started = 0.0
        self.modified = False  # the live look differs from the recalled preset
        self.problem: str | None = None  # the last bad slot file, for the HUD
        self._crossfade_seen = params["crossfade"]
        self._crossfade_pair: tuple | None = None  # ((slot a, slot b), (preset a, preset b))

    @property
    def kept(self) -> frozenset[str]:
        """What recalls and crossfades leave alone: the preset machinery's own parameters and
        those the command line pinned."""
        return CONTROL_ONLY | frozenset(self.pinned)

    # ---- recall and save --------------------------------------------------------------------

    def recall(self, slot: int, now: float) -> bool:
        """A number key, a program change, OSC: blend to the slot's preset over morph_seconds.
        A bad file or an empty slot is said and the current look stays (False)."""
        if self.bank is None:
            return False
        if slot not in SLOTS:
            log.info(f"preset: no slot {slot} (slots are 1-9)")
            return False
        try:
            preset = self.bank.recall(slot)
        except PresetError as exc:
            self._problem(str(exc))
            return False
        self.go_to(preset, self.params["morph_seconds"], now)
        if self.on_played is not None:
            self.on_played(None)
        log.info(f"preset: slot {slot}, {preset.name}")
        return True

    def go_to(self, preset: Preset, seconds: float, now: float) -> None:
        """Blend to `preset` over `seconds` (0: a cut), as a recall does: the autopilot's
        looks come this way too."""
        self.morph = Morph(self.params.as_dict(), preset, seconds, start_routes=self.routes,
                           keep=self.kept)
        if self.recorder is not None:
            self.recorder.record_preset(now, preset.name, preset.values, preset.routes)
        self._morph_started = now
        self.preset = preset
        self.problem = None
        self._step_morph(now)
        self.pick_up()

    def save(self, slot: int) -> None:
        """Ctrl+number: the current look into the user's slot file (the old one kept)."""
        if self.bank is None:
            return
        name = self.preset.name if self.preset is not None and not self.preset_modified() \
            else f"slot {slot}"
        try:
            path = self.bank.save(slot, preset_from_show(name, self.params, self.routes))
            self.preset = self.bank.recall(slot)
        except PresetError as exc:
            self._problem(str(exc))
            return
        log.info(f"preset: saved '{name}' into slot {slot} ({path})")

    def played(self, names: set[str]) -> None:
        """The performer changed `names` live (a knob, a key, OSC): a morph under way lets go
        of them, and a value the command line pinned is the performer's from now on."""
        if not names:
            return
        if self.on_played is not None:
            self.on_played(set(names))
        if self.morph is not None:
            self.morph.let_go(names)
        self.pinned -= names

    def preset_modified(self) -> bool:
        return self.preset is not None and differs(self.preset, self.params, self.routes,
                                                   keep=self.kept | self.evolving)

    def _problem(self, message: str) -> None:
        self.problem = message[:200]
        log.info(f"preset: {message}; the current look stays")

    # ---- each frame --------------------------------------------------------------------------

    def update(self, show_time: float, now: float) -> None:
        """The morph's step, the crossfade fader, "modified" (compared once a frame; a morph
        is not an edit) and the recovery file (handed over every few seconds, `now`)."""
        if self.morph is not None:
            self._step_morph(show_time)
        self._update_crossfade()
        self.modified = self.morph is None and self.preset_modified()
        if self.recovery is not None:
            self._save_recovery(now)

    def progress(self, show_time: float) -> float | None:
        """The morph's progress 0..1, None when none is under way."""
        if self.morph is None:
            return None
        return self.morph.progress_at(show_time - self._morph_started)

    def _step_morph(self, show_time: float) -> None:
        t = show_time - self._morph_started
        self.params.update(self.morph.values_at(t))
        self.routes = self.morph.routes_at(t)
        if self.morph.progress_at(t) >= 1.0:
            self.morph = None

    def _update_crossfade(self) -> None:
        """A moved `crossfade` (a MIDI fader) blends presets crossfade_a and crossfade_b."""
        x = self.params["crossfade"]
        if x == self._crossfade_seen or self.bank is None:
            return
        self._crossfade_seen = x
        slots = (self.params["crossfade_a"], self.params["crossfade_b"])
        if self._crossfade_pair is None or self._crossfade_pair[0] != slots:
            try:  # read the two files once per pair of slots, not at every fader step
                self._crossfade_pair = (slots, tuple(self.bank.recall(s) for s in slots))
            except PresetError as exc:
                self._problem(str(exc))
                return
        a, b = self._crossfade_pair[1]
        self.morph = None
        self.params.update(crossfade(a, b, x, keep=self.kept))
        self.routes = blend_routes(a.routes, b.routes, x)
        self.preset = b if x >= 0.5 else a

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
            "modified": self.modified, "seed": self.seed})
        if error:
            log.info(f"preset: {error}")

    def status_line(self, show_time: float) -> str:
        name = self.preset.name if self.preset is not None else "(none)"
        progress = self.progress(show_time)
        morph = f"  morph {progress:.0%}" if progress is not None else ""
        return f"{name}{' (modified)' if self.modified else ''}{morph}"

    def telemetry(self, show_time: float) -> dict[str, Any]:
        progress = self.progress(show_time)
        return {"name": self.preset.name if self.preset is not None else None,
                "modified": self.modified,
                "morph": None if progress is None else round(progress, 3)}

    def close(self) -> None:
        if self.recovery is not None:
            self.recovery.close()  # what the writer thread holds reaches the disk
