"""The autopilot live (`--autopilot` without --render): the form followed as the sound plays,
and the performer's hand taking over.

Main thread only (a live input's listeners hear on its beat tracker's thread: what they
found is read holding the source's `beat_lock`). The audio source hands every sample to the
follower (`LiveForm`, a sample listener: audio/form/form_live.py), which reads the beats of
the source's own beat tracker (no second tracker runs) and announces a new section about a
bar after it began, on a downbeat; the look it gets is chosen as a render's (choreography.py)
and played when the show's clock reaches that downbeat. Nothing is known ahead, so a build's
morph runs over four bars and the first section is an intro.

Hand-over: whatever the performer does to the look (a knob, a key, a recall, OSC, the web
page, the control window: the looks tell it, `Looks.on_played`) takes over at once (a morph under
way lets go of what the hand touched: show/look_state.py) and the autopilot holds off for
`resume_s` seconds from the last touch, following the form all the while; it then plays the
next change, or at once when asked (`Action("autopilot_resume")`: "resume now" on the web
page and in the control window, /swarm/autopilot/resume), which plays a look for the section
heard now over a bar. `Action("autopilot")` switches it off and on (the A key,
/swarm/autopilot, a MIDI note, the switch on the web page and in the control window); a show
started without --autopilot says on its HUD how to have one (`act_on_autopilot`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from typing import Any

from swarm_instrument.audio.form.form_live import Change, LiveForm
from swarm_instrument.control.actions import Action
from swarm_instrument.control.looks.preset_bank import BUNDLED_DIR, user_presets_dir
from swarm_instrument.control.looks.presets import Preset
from swarm_instrument.show.autopilot.autopilot import autopilot_looks
from swarm_instrument.show.autopilot.choreography import PHRASE_BARS, Choreographer, Cue, Look
from swarm_instrument.show.autopilot.evolution import Evolution

log = logging.getLogger(__name__)
NO_AUTOPILOT = "off: start the show with --autopilot to use it"
RESUME_S = 30.0  # the performer's touch holds the autopilot off this long (--autopilot-resume)
BAR_S = 2.0  # a bar's length before the tempo is known


class LiveAutopilot:
    """Follows the live sound's form and plays a look for each section (see the module)."""

    def __init__(self, audio: Any, presets: Iterable[Preset], seed: int = 0,
                 resume_s: float = RESUME_S, rate: str = "section") -> None:
        self.presets = {preset.name: preset for preset in presets}
        self.choreographer = Choreographer([Look(p.name, p.tags)
                                            for p in self.presets.values()], seed, rate)
        self._phrases = 0  # phrases of the section played
        self._now = 0.0  # the latest frame's time
        self.audio = audio
        with audio.beat_lock:  # a live input's listeners hear on the beat tracker's thread
            self.form = LiveForm(audio.rate, audio.beat_tracker)
            audio.sample_listeners.append(self.form.feed)
        self.resume_s = resume_s
        self.on = True
        self.held_until = -math.inf  # the show's time the performer's hold ends
        self.waiting: list[Cue] = []  # chosen, waiting for their downbeat (show's time)
        self.look: str | None = None
        self.section = "intro"
        self.section_start: float | None = None
        self.bar_seconds = BAR_S
        self._offset: float | None = None  # show's time - stream's time
        self.evolution = Evolution(seed)  # the look moving inside its section

    def attach(self, show: Any) -> LiveAutopilot:
        """Become `show`'s autopilot, told by its looks when the performer plays them."""
        show.autopilot = self
        show.looks.on_played = self.touched
        return self

    def update(self, show: Any, now: float) -> None:
        """Once a frame, after the audio's update: the changes found, the cues due."""
        self._now = now
        with self.audio.beat_lock:  # the form heard on the beat tracker's thread, if any
            offset = now - self.form.heard / self.form.rate
            self.form.follow(self.audio.beat_tracker)
            changes = self.form.update()
        # the earliest estimate over time: a block heard soon after it arrived
        self._offset = offset if self._offset is None else min(self._offset, offset)
        for change in changes:
            self._plan(change)
        if self.form.grid.period:
            self.bar_seconds = 4 * self.form.grid.period
        phrase = self._next_phrase()
        if phrase is not None and now >= phrase:  # a phrase inside the section
            self._phrases += 1
            cue = self.choreographer.phrase_cue(phrase, self.section, self.bar_seconds)
            if cue is not None and self.on and not self.waiting:
                self.waiting.append(cue)
        while self.waiting and self.waiting[0].t <= now + 1e-9:
            self._play(show, self.waiting.pop(0), now)
        looks = show.looks
        looks.evolving = (self.evolution.step(show.params, now, looks.morph is not None,
                                              looks.kept) if self.on else set())

    def _next_phrase(self) -> float | None:
        """When the section's next phrase begins (the show's time); None before a section."""
        if self.section_start is None:
            return None
        return self.section_start + (self._phrases + 1) * PHRASE_BARS * self.bar_seconds

    def _plan(self, change: Change) -> None:
        at = change.at + (self._offset or 0.0)
        self.section = change.label
        self.section_start = change.start + (self._offset or 0.0)
        self._phrases = 0
        if not self.on:
            return
        cue = self.choreographer.cue(at, None, change.label, self.bar_seconds)
        if cue is None:  # the rate "rarely": the look playing suits this section too
            return
        self.waiting = [c for c in self.waiting if c.t < at] + [cue]
        heard = self.form.heard / self.form.rate
        log.info(f"autopilot: {change.label}{' (it rises)' if change.relabel else ''}, begun "
                 f"{heard - change.start:.1f} s ago: {cue.look} on the downbeat in "
                 f"{max(change.at - heard, 0.0):.1f} s")

    def _play(self, show: Any, cue: Cue, now: float) -> None:
        if now < self.held_until or not self.on:
            return  # the performer has it: the form is followed, the look left alone
        show.looks.go_to(self.presets[cue.look], cue.morph, show.show_time)
        if cue.burst:
            show.act(Action("separation_burst", 1.0))
        self.look, self.section = cue.look, cue.section
        self._evolve(self.presets[cue.look].values, cue.t)
        recorder = getattr(show, "recorder", None)
        if recorder is not None and hasattr(recorder, "record_autopilot"):
            recorder.record_autopilot(show.show_time, cue.section, cue.look)
        log.info(f"autopilot: {cue.section}: {cue.look}")

    def _evolve(self, values: Any, at: float) -> None:
        """The look `values` drifts from now on, phrase by phrase of its section."""
        start = self.section_start if self.section_start is not None else at
        self.evolution.new_look(values, start, PHRASE_BARS * self.bar_seconds, self.section)

    def touched(self, names: set[str] | None = None, now: float | None = None) -> None:
        """The performer played the look (`names`, None: all of it, a recall): theirs for
        `resume_s` from now (default: the latest frame's time), and what they touched no
        longer drifts until the next look."""
        self.evolution.release(names)
        if self.on:
            self.held_until = (self._now if now is None else now) + self.resume_s

    def resume(self, show: Any, now: float) -> None:
        """"Resume now": the performer's hold over (the autopilot on if it was off), and a
        look for the section heard now played over a bar (no cut, no burst: the section is
        under way)."""
        self.on, self.held_until = True, -math.inf
        look = self.choreographer.choose(self.section)
        log.info(f"autopilot: resumed ({self.section})")
        self._play(show, Cue(now, self.section, look, self.bar_seconds, False), now)

    def switch(self, action: Action, now: float, show: Any = None) -> None:
        """Off and on (value None: the other way; 0 off, else on). Off, the look stays where
        it is; on, the look playing (`show`'s) starts to drift at once."""
        was = self.on
        self.on = (not self.on) if action.value is None else bool(action.value)
        self.held_until = -math.inf
        if not self.on:
            self.waiting = []
            self.evolution.stop()
        elif not was and show is not None:
            self._evolve(show.params, now)
        log.info(f"autopilot {'on' if self.on else 'off'}")

    def telemetry(self, now: float) -> dict[str, Any]:
        """As a render's (show/autopilot/autopilot.py), with who is in control and when the
        autopilot takes the look back."""
        control = ("off" if not self.on else "performer" if now < self.held_until
                   else "autopilot")
        upcoming = self.waiting[0] if self.waiting else None
        phrase_at = self._next_phrase()
        if (upcoming is None and self.on and phrase_at is not None
                and self.choreographer.rate == "phrase" and self.section != "build"):
            # the next phrase's change: another look of the section's kind, chosen then
            upcoming = Cue(phrase_at, self.section, "", 0.0, False, phrase=True)
        phrase = None
        if self.section_start is not None and self.bar_seconds > 0:
            beats = (now - self.section_start) / (self.bar_seconds / 4)
            phrase = {"bar": int(math.floor(beats / 4)) % 4 + 1,
                      "beat": round(beats % 4 + 1, 3)}
        return {"on": self.on, "section": self.section,
                "section_start": None if self.section_start is None
                else round(self.section_start, 3),
                "phrase": phrase, "look": self.look, "control": control,
                "resumes_at": (round(self.held_until, 3) if control == "performer" else None),
                "next": None if upcoming is None else {
                    "t": round(upcoming.t, 3), "section": upcoming.section,
                    "look": upcoming.look or None}}


def act_on_autopilot(show: Any, action: Action) -> None:
    """The switch (`Action("autopilot")`: the A key, OSC, a MIDI note, the web page, the
    control window) and "resume now" (`Action("autopilot_resume")`), carried out by the live
    autopilot; a show without one (started without --autopilot, or a render's, which plays
    its plan) says on its HUD how to have one, never nothing at all."""
    pilot = show.autopilot
    if action.kind == "autopilot" and hasattr(pilot, "switch"):
        pilot.switch(action, show.now, show)
    elif action.kind == "autopilot_resume" and hasattr(pilot, "resume"):
        pilot.resume(show, show.now)
    else:
        show.status["autopilot"] = NO_AUTOPILOT


def open_autopilot(args: Any, show: Any, seed: int) -> LiveAutopilot | None:
    """The live autopilot `--autopilot` asks for, attached to `show` (None without it, or
    with no tagged look, said)."""
    if not getattr(args, "autopilot", False):
        return None
    presets = autopilot_looks([BUNDLED_DIR, user_presets_dir()])
    if not presets:
        log.info("autopilot: no preset has tags (calm, groove, build, peak) to choose looks "
                 f"by; tag some in {user_presets_dir()}; the show goes on without it")
        return None
    log.info(f"autopilot: on, {len(presets)} looks; A or /swarm/autopilot switches it off "
             "and on")
    return LiveAutopilot(show.audio, presets, seed, getattr(args, "autopilot_resume", RESUME_S),
                         getattr(args, "autopilot_rate", "section")).attach(show)
