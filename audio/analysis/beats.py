"""Beat tracking: aubio's `tempo` fed every sample of the input, in order, read once a frame.

Main thread only. A source's `update(now)` feeds the samples that arrived since the last frame
(`feed`, or `skip` for samples that were lost) and asks for this frame's `BeatInfo`
(`info(at)`, `at` being the newest sample's time in the caller's clock). Never called from an
audio callback: the callbacks only fill rings (audio/input/ring.py), and aubio's occasional heavier
hop (its tempo estimate, every 1.4 s over the last 5.5 s) lands in a frame, not in the audio
thread. Hops of 256 samples: at 48 kHz aubio's beats then fall within 3 ms of a click track's
clicks, against 17 ms with 512, for 0.1 ms a frame more.

How aubio is read:
- a beat is a change of `get_last()` (the sample where aubio placed its latest beat), not a
  nonzero return of the call: aubio returns the beat's fraction of a hop, which is 0 for a
  beat on a hop boundary, and it moves `get_last()` in silence as well;
- a lone beat more than a quarter beat off a steady grid (aubio now and then places one on an
  off-beat ghost kick) is left out; a second in a row is the grid moving, and taken;
- silence is ours to judge: aubio's own gate (-90 dB) is off, and a beat counts only while the
  input was above SILENCE_DB within the last 1.5 beat periods (or 1 s);
- confidence: aubio's `get_confidence()` (its tempo peak over the sum of its filter output)
  was measured and found no guide: 0 until its context model locks (about 8 s), at its
  no-rhythm floor (0.102, as for noise) for a drum loop under moderate noise that it tracks
  perfectly, and anything (-25 .. 10) for random clicks. It stays readable as
  `aubio_confidence`. `confidence` asks instead whether the beats land on the onsets: the
  strongest rise in hop energy within 2 hops of each beat (`on`) against the mean of the
  strongest around its three quarter points (`off`), averaged over the last ~5 beats:
  salience = on / (on + off) reads 0.5 when beats fall anywhere (noise, a tone, random
  clicks), 0.8 for drums even under noise, 1.0 for clicks; `confidence` =
  clip((salience - 0.5) / 0.25, 0, 1), times the tempo's steadiness (1 while aubio's
  estimate moves less than 1 % from one to the next, 0 at a 4 % move: a wandering tempo or
  an octave jump).

Tempo: aubio prefers tempi near 120 BPM (a Rayleigh prior it does not let Python move) and
halves anything above ~225 BPM. A click track at 174 BPM reads 174; a drum loop at 174 with
its snare on 2 and 4 locks to 87 once the context model takes over (after ~12 s), the beats
then falling on every other click: drum and bass felt in half time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

HOP = 256  # samples between aubio's analyses: 5.3 ms at 48 kHz
WINDOW = 1024  # aubio's FFT: its spectral flux sees 21 ms
SILENCE_DB = -60.0  # a hop quieter than this (RMS, dBFS) is silence
HOLD_S = 2.0  # no beat for this long (or 2.5 beats, if longer) and there is no tempo to tell
SALIENCE_FLOOR = 0.5  # beats that fall anywhere
SALIENCE_FULL = 0.75  # beats on the onsets (drums read 0.8)
STEADY = 0.01  # a tempo estimate that moved less than this fraction is steady
UNSTEADY = 0.04  # ... and one that moved this much is no estimate to trust
SALIENCE_RATE = 0.2  # each beat's weight in the running salience (about the last 5 beats)
STRAY = 0.25  # a beat further than this (in beats) off a steady grid is a stray
FLUX_HOPS = 1024  # onset strengths kept: 5.5 s at hop 256 and 48 kHz
_WRAP = 1 << 32  # aubio counts samples in 32 bits


@dataclass(frozen=True, slots=True)
class BeatInfo:
    """The tracker's view at time `at` (the newest sample's time, in the caller's clock):
    `bpm`; `beat`, the beats counted since the first one at that moment, the fraction being
    the time elapsed since the last beat at this tempo (so `beat % 1` is the phase); and
    `confidence`, 0..1 (see the module's docstring)."""

    bpm: float
    beat: float
    at: float
    confidence: float

    def beat_at(self, now: float) -> float:
        """The beat count at `now`, extrapolated at this tempo."""
        return self.beat + (now - self.at) * self.bpm / 60.0


class BeatTracker:
    """aubio's beat tracker over one stream of mono float32 samples at `rate`.

    Samples are counted from the first one fed; `skip(n)` counts n samples that never reach
    aubio (a stall caught up by skipping, a dropout, the end of a song), so beat times stay
    right after them. `beats` counts every beat since the first, those that silence or a
    dropout hid included (at the tempo of the time), so the grid survives a gap.
    """

    def __init__(self, rate: float, hop: int = HOP, window: int = WINDOW,
                 silence_db: float = SILENCE_DB, hold_s: float = HOLD_S) -> None:
        import aubio  # noqa: PLC0415 - optional: a missing aubio wheel costs only the beat tracker

        self.rate = float(rate)
        self.hop = hop
        self.hold_s = hold_s
        self._tempo = aubio.tempo("default", window, hop, int(round(rate)))
        self._tempo.set_silence(-1000.0)  # silence is judged here (see the docstring)
        self._silence_ms = hop * 10.0 ** (silence_db / 10.0)  # a hop's sum of squares
        self._buffer = np.zeros(hop, np.float32)  # the start of a hop, until it is whole
        self._filled = 0
        self._hopped = 0  # samples aubio has had, in whole hops (unbounded: aubio's wraps)
        self._skipped = 0  # samples counted but not fed
        self._aubio_last = self._tempo.get_last()
        self._loud_at = -math.inf  # the end of the latest hop louder than silence_db
        self.beats = 0  # beats so far
        self.last_beat: float | None = None  # where the latest one fell (samples)
        self._strayed = False  # the beat before was a stray, left out
        self._bpm = 0.0  # aubio's latest estimate ...
        self._steadiness = 0.0  # ... and how little it moved from the one before
        self._reported = -math.inf  # `beat` never goes back (see info)
        self._energy = 0.0  # the last hop's mean square, for the flux
        self._flux = np.zeros(FLUX_HOPS, np.float32)  # energy rises, by aubio's hop count
        self._last_aubio: int | None = None  # the latest beat in aubio's count (its flux)
        self._on = self._off = 0.0  # flux on the beats and between them, averaged
        self.salience = 0.0  # on / (on + off): 0.5 = the beats fall anywhere

    # -- feeding --------------------------------------------------------------------------
    @property
    def position(self) -> int:
        """Samples counted so far (fed or skipped): the newest one's index + 1."""
        return self._hopped + self._filled + self._skipped

    def feed(self, samples: np.ndarray) -> None:
        """Every new sample, in order: any length; a partial hop waits for the next call."""
        samples = np.ascontiguousarray(samples, np.float32)
        hop, count, done = self.hop, len(samples), 0
        if self._filled:
            done = min(hop - self._filled, count)
            self._buffer[self._filled:self._filled + done] = samples[:done]
            self._filled += done
            if self._filled < hop:
                return
            self._filled = 0
            self._step(self._buffer)
        while count - done >= hop:
            self._step(samples[done:done + hop])
            done += hop
        rest = count - done
        if rest:
            self._buffer[:rest] = samples[done:]
            self._filled = rest

    def skip(self, count: int) -> None:
        """Count `count` samples that were lost (not fed); a partial hop is dropped with them,
        so aubio's hops stay whole pieces of sound."""
        if count > 0:
            self._skipped += count + self._filled
            self._filled = 0

    def _step(self, block: np.ndarray) -> None:
        tempo = self._tempo
        tempo(block)
        self._hopped += self.hop
        end = self._hopped + self._skipped
        energy = float(np.dot(block, block))
        if energy > self._silence_ms:
            self._loud_at = end
        # onset strength: the rise in log energy (bels) from the hop before
        rise = math.log10(energy + 1e-9) - math.log10(self._energy + 1e-9)
        self._flux[(self._hopped // self.hop - 1) % FLUX_HOPS] = max(rise, 0.0)
        self._energy = energy
        bpm = float(tempo.get_bpm())
        if bpm != self._bpm:  # aubio's estimate is renewed every 2.7 s
            if self._bpm > 0.0 and bpm > 0.0:
                moved = abs(bpm - self._bpm) / bpm
                self._steadiness = min(max((UNSTEADY - moved) / (UNSTEADY - STEADY), 0.0), 1.0)
            self._bpm = bpm
        last = tempo.get_last()
        if last == self._aubio_last:
            return
        self._aubio_last = last
        at = end - (self._hopped - last) % _WRAP  # within this hop
        if bpm <= 0.0 or end - self._loud_at > self.rate * max(1.0, 90.0 / bpm):
            return  # silence: aubio goes on predicting beats, none of them heard
        beat_hop = (self._hopped - (self._hopped - last) % _WRAP) // self.hop
        if self.last_beat is None:
            self.beats = 1
        else:
            elapsed = (at - self.last_beat) / self.rate * bpm / 60.0
            stray = abs(elapsed - round(elapsed)) > STRAY and self._steadiness > 0.0
            if stray and not self._strayed:  # a lone beat off a steady grid: not a beat
                self._strayed = True
                return
            self._strayed = False  # on the grid, or a second one off it: the grid moved
            self.beats += max(1, round(elapsed))  # beats hidden by silence counted too
            if round(elapsed) == 1 and self._last_aubio is not None:
                self._weigh(self._last_aubio, beat_hop)
        self.last_beat = at
        self._last_aubio = beat_hop

    def _weigh(self, first: int, second: int) -> None:
        """How the onsets fell over the beat from hop `first` to hop `second`: the strongest
        within 2 hops of the first beat against the strongest around its quarters."""
        hops = self._hopped // self.hop
        if not 4 < second - first < FLUX_HOPS - 8 or hops - first > FLUX_HOPS - 4:
            return
        flux = self._flux

        def near(hop: float) -> float:
            centre = int(round(hop))
            return float(max(flux[i % FLUX_HOPS] for i in range(centre - 2, centre + 3)))

        period = second - first
        on = near(first)
        off = (near(first + period / 4) + near(first + period / 2)
               + near(first + 3 * period / 4)) / 3.0
        self._on += (on - self._on) * SALIENCE_RATE
        self._off += (off - self._off) * SALIENCE_RATE
        total = self._on + self._off
        self.salience = self._on / total if total > 0.0 else 0.0

    # -- reading --------------------------------------------------------------------------
    @property
    def bpm(self) -> float:
        return self._bpm

    @property
    def confidence(self) -> float:
        """0..1: how surely the beats land on the onsets, times the tempo's steadiness."""
        mapped = (self.salience - SALIENCE_FLOOR) / (SALIENCE_FULL - SALIENCE_FLOOR)
        return min(max(mapped, 0.0), 1.0) * self._steadiness

    @property
    def aubio_confidence(self) -> float:
        """aubio's own `get_confidence()`, raw (see the module's docstring)."""
        return float(self._tempo.get_confidence())

    def info(self, at: float) -> BeatInfo | None:
        """This frame's view, `at` being the time of the newest sample counted. None when there
        is no tempo to tell: no beat yet, or none for `hold_s` (2.5 beats if longer), which is
        what silence gives; the last tempo is the caller's to hold."""
        bpm, last = self._bpm, self.last_beat
        if last is None or bpm <= 0.0:
            return None
        since = (self.position - last) / self.rate
        if since > max(self.hold_s, 150.0 / bpm):
            return None
        beat = max(self.beats + since * bpm / 60.0, self._reported)
        self._reported = beat  # a beat placed early by aubio must not move the count back
        return BeatInfo(bpm, beat, at, self.confidence)
