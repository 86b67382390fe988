"""Beat tracking: every sample of the input, in order, turned into a tempo, a beat count and the
bar's first beat, read once a frame. Causal: a beat is placed before it sounds.

Main thread only. A source's `update(now)` feeds the samples that arrived since the last frame
(`feed`, or `skip` for samples that were lost) and asks for this frame's `BeatInfo`
(`info(at)`, `at` being the newest sample's time in the caller's clock). Never called from an
audio callback: the callbacks only fill rings (audio/input/ring.py).

The pipeline, hop by hop (about 10 ms; each step chosen on benchmarks/bench_beat_accuracy.py):
- onset_flux.py: the spectral flux of 24 log-spaced bands (the tempo is read from it) and the
  parts that place the beat, over their running means: the kick (20-70 Hz), the bands above
  2 kHz (snare, claps, hats);
- tempo_estimate.py, every ESTIMATE_S over the last WINDOW_S: the tempo's family (a Fourier
  tempogram; from FIRST_S after the first sound until EARLY_S, and while the beats land
  anywhere (salience under RELOCK_SALIENCE: a beatless pad, then drums), the high bands'
  folded autocorrelation), its level in the tempo range (`set_range`, default 70-180 BPM) by
  the accents and how loud every other pulse is (`_loudness`), the period to a fraction of a
  hop; an estimate near the tempo moves it smoothly, another must be found twice in a row;
- beat_phase.py: a comb over the last beats' onsets (all of them in the first seconds) that
  places the next beat, asked again each hop until it comes; when a first (or new) tempo is
  found the onsets heard are weighed again over the means of now (`_renormalise`);
- tempo_drift.py: onsets that drift against the beats, more each beat: the period takes the
  step at once and the estimates read only the beats since.
Silence is ours to judge: a beat counts only while the input was above SILENCE_DB within the
last 1.5 periods (or 1 s); beats hidden by silence are counted when the sound comes back, so
the grid survives a break. The bar's first beat is the beat of the four whose low band (kick,
bass) has been strongest over the last bars (`bar_start`), once it stands out.

Confidence asks whether the beats land on the onsets: the onset strength within 2 hops of each
beat (`on`) against the mean of the strongest around its three quarter points (`off`), over
the last ~5 beats: salience = on / (on + off) reads 0.5 when beats fall anywhere (noise, a
tone), near 0.8 for drums; confidence = clip((salience - 0.5) / 0.25, 0, 1), times the
tempo's steadiness (1 while the period moves less than 1 % from one estimate to the next, 0 at
a 4 % move: a wandering tempo, a change of level).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from swarm_instrument.audio.analysis.beat_phase import BeatPhase, History
from swarm_instrument.audio.analysis.onset_flux import OnsetFlux
from swarm_instrument.audio.analysis.tempo_drift import TempoDrift
from swarm_instrument.audio.analysis.tempo_estimate import TempoEstimator

SILENCE_DB = -60.0  # a hop quieter than this (RMS, dBFS) is silence
HOLD_S = 2.0  # no beat for this long (or 2.5 beats, if longer) and there is no tempo to tell
TEMPO_RANGE = (70.0, 180.0)  # BPM: the default tempo range preference
KICK_WEIGHT = 8.0  # the kick's part in the onset strength the tempo is read from
FULL_PART = 0.3  # every band's part there: a click or a piano with no kick nor hats
LEVEL_S = 4.0  # the running means that weigh the kick and the high bands alike
WINDOW_S = 6.0  # onset strength the tempo is estimated from
FIRST_S = 1.0  # ... at least this much heard before the first estimate
EARLY_S = 4.0  # ... and until this much, the tempo's family from the high bands' pulse
ESTIMATE_S = 0.17  # between estimates
QUIET_S = 0.3  # silence this long, then sound: its first FRESH_HOPS are no accent (for the
# tempo; the beat keeps them)
FRESH_HOPS = 3
FOLLOWED_BEATS = 4  # after the drift moved the tempo, estimates read only what came since,
# once this many beats of it have come (the window still holds the old tempo)
RELOCK_SALIENCE = 0.6  # beats landing on the onsets less well than this: read the tempo anew
CLOSE = 0.02  # an estimate within this fraction of the period moves it smoothly
SMOOTHING = 0.3  # ... by this much of the difference
CONFIRM = 2  # another tempo must be found this many times in a row
SALIENCE_FLOOR, SALIENCE_FULL, SALIENCE_RATE = 0.5, 0.75, 0.2
STEADY, UNSTEADY = 0.01, 0.04
BAR_RATE = 0.3  # each bar's weight in the strength of the bar's four beats
BAR_CLEAR = 1.25  # the strongest of the four over the mean of the others: the bar's start
OFFSET_HOPS = -0.8  # where in its hop an onset's flux peaks (calibrated on click tracks)


@dataclass(frozen=True, slots=True)
class BeatInfo:
    """The tracker's view at time `at` (the newest sample's time, in the caller's clock):
    `bpm`; `beat`, the beats counted since the first one at that moment (`beat % 1` is the
    phase); `confidence`, 0..1 (see the module's docstring); `bar_start`, a beat count
    (whole) on which a bar starts, from the kick and bass, or None while unclear."""

    bpm: float
    beat: float
    at: float
    confidence: float
    bar_start: int | None = None

    def beat_at(self, now: float) -> float:
        """The beat count at `now`, extrapolated at this tempo."""
        return self.beat + (now - self.at) * self.bpm / 60.0


class BeatTracker:
    """The beat tracker over one stream of mono float32 samples at `rate`.

    Samples are counted from the first one fed; `skip(n)` counts n samples that never reach
    the analysis (a stall caught up by skipping, a dropout, the end of a song), so beat times
    stay right after them. `beats` counts every beat since the first, those that silence or a
    dropout hid included (at the tempo of the time), so the grid survives a gap.
    """

    def __init__(self, rate: float, silence_db: float = SILENCE_DB, hold_s: float = HOLD_S,
                 tempo_range: tuple[float, float] = TEMPO_RANGE) -> None:
        self.rate = float(rate)
        self.hold_s = hold_s
        self._flux = OnsetFlux(rate)
        self.hop = self._flux.hop
        self.fps = self._flux.fps
        self._estimator = TempoEstimator(self.fps, int(WINDOW_S * self.fps))
        self._phase = BeatPhase()
        self._onsets = History()  # every band: the tempo's level
        self._tempo_line = History()  # every band and the kick: the tempo's family
        self._beatline = History()  # kick and high bands: where the beat falls
        self._low = History()  # the kick: where the bar starts
        self._high = History()  # the high bands: the pulse of the first seconds
        self._kicks = History()  # the kick and every band as heard (none left out): the
        self._fulls = History()  # onsets that place the beat, weighed again (`_renormalise`)
        self._loudness = History()  # each hop's level (dB): which pulses are the beat's
        self._means = np.full(3, 1e-3)  # running means of the kick, high and all bands
        self._silence = 10.0 ** (silence_db / 10.0)  # a hop's mean square
        self._silence_db = silence_db
        self.tempo_range = tempo_range
        self._hops = 0  # hops analysed (or passed in a gap)
        self._shift = 0.0  # samples: hop k ends at (k + 1) * hop + shift
        self._skipped = 0
        self._fed = 0
        self._loud_hop = -math.inf  # the latest hop louder than silence
        self._heard = 0  # loud hops so far
        self._first_heard = 0  # the first loud hop: the first estimate waits FIRST_S after it
        self._fresh = 0  # hops left of a sound's start after silence
        self._candidate: tuple[float, int] | None = None  # (period, times found)
        self._estimate_due = False  # the range changed: estimate at the next hop
        self._steadiness = 0.0
        self._next: float | None = None  # the next beat (hop index, fractional)
        self._grid: float | None = None  # the last beat of the grid, heard or not (hop)
        self._moving = 0  # hops the comb has placed the next beat off the grid
        self._drift = TempoDrift()  # the onsets' offsets from the beats
        self._followed = -(1 << 30)  # the hop at which the drift last moved the tempo
        self.beats = 0
        self.last_beat: float | None = None  # where the latest counted beat fell (samples)
        self._last_beat_hop: float | None = None
        self._reported = -math.inf
        self._on = self._off = 0.0
        self.salience = 0.0
        self._bar = np.zeros(4)  # low-band strength of the bar's four beats (count % 4)
        self._bars_seen = 0

    # -- settings -------------------------------------------------------------------------
    def set_range(self, low: float, high: float) -> None:
        """The tempo range preference (BPM): the beat is chosen among the tempo's binary
        levels (x 2, / 2) inside it; the next estimate (within ESTIMATE_S) applies it."""
        low, high = sorted((float(low), float(high)))
        if (low, high) != self.tempo_range:
            self.tempo_range = (low, high)
            self._candidate = None
            self._estimate_due = True

    # -- feeding --------------------------------------------------------------------------
    @property
    def position(self) -> int:
        """Samples counted so far (fed or skipped): the newest one's index + 1."""
        return self._fed + self._skipped

    def feed(self, samples: np.ndarray) -> None:
        """Every new sample, in order: any length; a partial hop waits for the next call."""
        samples = np.asarray(samples, np.float32)
        self._fed += len(samples)
        full, high, kick, energy = self._flux.push(samples)
        for k in range(len(full)):
            self._hop(float(full[k]), float(high[k]), float(kick[k]), float(energy[k]))

    def skip(self, count: int) -> None:
        """Count `count` samples that were lost (not fed); a partial hop goes with them."""
        if count <= 0:
            return
        lost = count + self._flux.pending
        self._fed -= self._flux.pending
        self._skipped += lost
        self._flux.reset_window()
        hops, rest = divmod(lost, self.hop)
        self._shift += rest
        for _ in range(min(hops, 2 * self._onsets.size)):
            self._hop(0.0, 0.0, 0.0, 0.0)
        self._hops += max(0, hops - 2 * self._onsets.size)  # a long gap: the history is empty

    def _hop(self, full: float, high: float, kick: float, energy: float) -> None:
        index = self._hops
        self._hops += 1
        if energy > self._silence:
            if index - self._loud_hop > QUIET_S * self.fps:
                self._fresh = FRESH_HOPS  # sound after silence: its first rise is no accent
            self._loud_hop = index
            self._heard += 1  # the means run from the first hop heard, then over LEVEL_S
            if self._heard == 1:
                self._first_heard = index
            rate = max(1.0 / (LEVEL_S * self.fps), 1.0 / self._heard)
            self._means += (np.array((kick, high, full)) - self._means) * rate
        self._kicks.push(kick)
        self._fulls.push(full)
        beat = self._beat_strength(kick, high, full)
        if self._fresh:  # every band rises from nothing: left out of the tempo's view (not
            self._fresh -= 1  # the beat's: a song's first hit is on a beat, often the first)
            full = kick = 0.0
        self._onsets.push(full)
        self._loudness.push(10.0 * math.log10(max(energy, self._silence)))
        self._tempo_line.push(full + kick / self._means[0] * KICK_WEIGHT)
        self._low.push(kick)
        self._high.push(high)
        self._beatline.push(beat)
        self._phase.push(beat)
        if self._heard and index - self._first_heard >= FIRST_S * self.fps and (
                self._estimate_due or index % max(1, round(ESTIMATE_S * self.fps)) == 0):
            self._estimate_due = False
            self._estimate()
        period = self._phase.period
        if period <= 0.0:
            return
        if self._next is not None and index >= self._next:
            self._beat(self._next)
        ahead = self._phase.predict(self._grid)
        if ahead is None:
            return
        if self._grid is not None:
            expected = self._grid + period
            if abs(ahead - expected) > period / 8:  # the grid moves only when the comb has
                self._moving += 1  # said so for half a period, and by half a period at most
                if self._moving < period / 2:
                    ahead = expected
            else:
                self._moving = 0
            ahead = min(max(ahead, self._grid + 0.5 * period), self._grid + 1.5 * period)
        self._next = ahead

    def _estimate(self) -> None:
        if self._hops - 1 - self._loud_hop > self.fps:  # a second of silence: hold
            return
        size = min(self._onsets.count, int(WINDOW_S * self.fps))
        since = self._hops - self._followed  # the drift moved the tempo this many hops ago
        if since < size:
            if since < FOLLOWED_BEATS * self._phase.period:
                return
            size = since
        current = self._phase.period or None
        first_seconds = self._hops - self._first_heard < EARLY_S * self.fps
        pulse = first_seconds or self.salience < RELOCK_SALIENCE  # the high bands' pulse
        tempo, onsets, loudness, high = (history.last(size).astype(np.float64) for history in
                                         (self._tempo_line, self._onsets, self._loudness,
                                          self._high))
        found = self._estimator.estimate(tempo, onsets, *self.tempo_range, current, loudness,
                                         self._silence_db, high if pulse else None, first_seconds)
        if found is None:
            return
        period = found[0]
        if current is not None and abs(period - current) <= CLOSE * current:
            self._candidate = None
            self._set_period(current + SMOOTHING * (period - current))
            return
        if self._candidate is not None and abs(self._candidate[0] - period) <= CLOSE * period:
            self._candidate = (period, self._candidate[1] + 1)
        else:
            self._candidate = (period, 1)
        if current is None or self._candidate[1] >= CONFIRM:
            self._candidate = None
            self._drift.clear()  # the onsets' drift is judged on one tempo's beats
            if self.salience < RELOCK_SALIENCE:  # a new tempo for beats that fell anywhere
                self._renormalise()  # (drums after a pad): the next beat placed afresh
                self._grid = None
            self._set_period(period)

    def _beat_strength(self, kick: float | np.ndarray, high: float | np.ndarray,
                       full: float | np.ndarray) -> float | np.ndarray:
        """The onset strength that places the beats (of a hop, or of lines of them): the kick,
        the high bands and every band over their running means (each part counts alike)."""
        return kick / self._means[0] + high / self._means[1] + FULL_PART * full / self._means[2]

    def _renormalise(self) -> None:
        """The first tempo found, or a new one for beats that fell anywhere: the onset
        strength heard so far taken again over the means of now (each hop was over the means
        up to it: a song's first hits, over their own, counted for little; drums after a
        beatless pad, over the pad's, for everything)."""
        count = min(self._hops - self._first_heard, self._onsets.size)
        if count <= 0:
            return
        beat = self._beat_strength(self._kicks.last(count), self._high.last(count),
                                   self._fulls.last(count))
        self._beatline.rewrite(beat)
        self._phase.onsets.rewrite(beat)

    def _set_period(self, period: float) -> None:
        old = self._phase.period
        if old <= 0.0:
            self._renormalise()
        else:
            moved = abs(period - old) / old
            self._steadiness = min(max((UNSTEADY - moved) / (UNSTEADY - STEADY), 0.0), 1.0)
        self._phase.set_period(period)

    def _position(self, hop: float) -> float:
        """A hop index (fractional) as a sample position in the stream."""
        return (hop + OFFSET_HOPS) * self.hop + self._shift

    def _beat(self, hop: float) -> None:
        """The grid's beat at `hop` has come: counted if the input was heard lately."""
        self._grid, self._next = hop, None
        period = self._phase.period
        recent = max(1.0 * self.fps, 1.5 * period)
        if hop - self._loud_hop > recent:
            return  # silence: the grid goes on, no beat heard
        if self._last_beat_hop is None:
            self.beats = 1
        else:
            elapsed = (hop - self._last_beat_hop) / period
            self.beats += max(1, round(elapsed))
            if round(elapsed) == 1:
                self._weigh(self._last_beat_hop, period)
        self._last_beat_hop = hop
        self.last_beat = self._position(hop)

    def _weigh(self, beat: float, period: float) -> None:
        """The previous beat's onsets (now all heard): its salience, and its low band for the
        bar's start."""
        onsets, low = self._beatline, self._low

        def near(history: History, hop: float) -> float:
            centre = int(round(hop))
            return max(history.at(i) for i in range(centre - 2, centre + 3))

        on = near(onsets, beat)
        off = sum(near(onsets, beat + period * q) for q in (0.25, 0.5, 0.75)) / 3.0
        self._on += (on - self._on) * SALIENCE_RATE
        self._off += (off - self._off) * SALIENCE_RATE
        total = self._on + self._off
        self.salience = self._on / total if total > 0.0 else 0.0
        step = self._drift.step(onsets, beat, period, self._on)
        if step is not None:  # a tempo that moves: the period takes the step at once
            self._set_period(period + step)
            self._candidate = None
            self._followed = self._hops  # the tempogram still sees the old tempo: let it be
            self._moving = int(period)  # the next beat may move to the onsets at once
        slot = (self.beats - 2) % 4  # the previous beat (count beats - 1): its place
        self._bar[slot] += (near(low, beat) - self._bar[slot]) * BAR_RATE
        if slot == 3:
            self._bars_seen += 1

    # -- reading --------------------------------------------------------------------------
    @property
    def bpm(self) -> float:
        period = self._phase.period
        return 60.0 * self.fps / period if period > 0.0 else 0.0

    @property
    def confidence(self) -> float:
        """0..1: how surely the beats land on the onsets, times the tempo's steadiness."""
        mapped = (self.salience - SALIENCE_FLOOR) / (SALIENCE_FULL - SALIENCE_FLOOR)
        return min(max(mapped, 0.0), 1.0) * self._steadiness

    @property
    def bar_start(self) -> int | None:
        """A beat count on which a bar starts (the latest such beat), or None while the
        low band does not single one of the four out."""
        if self._bars_seen < 2:
            return None
        strongest = int(np.argmax(self._bar))
        others = (self._bar.sum() - self._bar[strongest]) / 3.0
        if self._bar[strongest] <= BAR_CLEAR * others:
            return None
        return self.beats - ((self.beats - 1 - strongest) % 4)

    def info(self, at: float) -> BeatInfo | None:
        """This frame's view, `at` being the time of the newest sample counted. None when there
        is no tempo to tell: no tempo and first beat placed yet, or no beat for `hold_s` (2.5
        beats if longer), which is what silence gives; the last tempo is the caller's to hold.
        Before the first beat the count rises from 0 towards it."""
        bpm, last = self.bpm, self.last_beat
        if bpm <= 0.0:
            return None
        if last is None:
            return self._before_first(at, bpm)
        since = (self.position - last) / self.rate
        if since > max(self.hold_s, 150.0 / bpm):
            return None
        if self._next is not None and self._last_beat_hop == self._grid:
            # towards the predicted beat: the count is whole when it is due, not a hop later
            span = (self._next - self._grid) * self.hop / self.rate
            fraction = min(since / max(span, 1e-3), 1.25)
        else:  # the next beat not placed yet: the count waits for it short of whole
            fraction = min(since * bpm / 60.0, 0.999)
        beat = max(self.beats + fraction, self._reported)
        self._reported = beat  # the count never moves back
        return BeatInfo(bpm, beat, at, self.confidence, self.bar_start)

    def _before_first(self, at: float, bpm: float) -> BeatInfo | None:
        """A tempo and the first beat placed, not come yet: the count rises from 0 towards
        it, so the show pulses on the first beat too (and has the tempo a beat sooner)."""
        if self._next is None or self._hops - 1 - self._loud_hop > self.fps:
            return None
        to_next = (self._position(self._next) - self.position) / self.rate
        beat = max(min(1.0 - to_next * bpm / 60.0, 0.999), 0.0, self._reported)
        self._reported = beat
        return BeatInfo(bpm, beat, at, self.confidence, None)
