"""General MIDI songs whose beats are known: the beat-accuracy benchmark's music.

Each song is written here note by note (drums on channel 10, bass, chords) in one of the
styles a performer plays (hip-hop, house, techno, rock, pop, drum and bass, swing, a ballad,
punk), some with a tempo change, a quiet intro or a break, and written out as a MIDI file
(mido) that Debian's FluidSynth renders with its General MIDI sound font. The true beats are
the MIDI file's own: each beat's time from its tempo map, so nothing is estimated.

Timing is humanised for the played styles (a drummer's few milliseconds, seeded, the same
every run); the programmed styles (house, techno, drum and bass) are on the grid.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import mido
import numpy as np

TICKS = 480  # a beat
SOUND_FONT = Path("/usr/share/sounds/sf2/FluidR3_GM.sf2")
KICK, SNARE, CLAP, HAT, PEDAL, OPEN, CRASH, RIDE, RIM, SHAKER = \
    36, 38, 39, 42, 44, 46, 49, 51, 37, 70
DRUMS = 9  # channel 10


@dataclass
class Song:
    """Notes in beats (`add`), a tempo map (beat, bpm) and what the benchmark needs to judge
    a tracker: the tempo levels a performer accepts (`levels`: 1 = the written beat, 2 = half
    time) and `anchor`, the moment the tracker must lock after (the drums coming in, a tempo
    change, the drums back after a break)."""

    name: str
    style: str
    tempo: list[tuple[float, float]]
    beats: int
    levels: tuple[int, ...] = (1,)
    anchor_beat: float = 0.0
    notes: list[tuple[float, int, int, int, float]] = field(default_factory=list)
    programs: dict[int, int] = field(default_factory=dict)
    jitter_s: float = 0.0
    seed: int = 0

    def add(self, beat: float, channel: int, note: int, velocity: int,
            length: float = 0.25) -> None:
        self.notes.append((beat, channel, note, int(np.clip(velocity, 1, 127)), length))

    def seconds(self, beat: float | np.ndarray) -> np.ndarray:
        """The time (s) of a beat position, through the tempo map."""
        beat = np.asarray(beat, float)
        out = np.zeros_like(beat)
        start_s = 0.0
        for k, (at, bpm) in enumerate(self.tempo):
            end = self.tempo[k + 1][0] if k + 1 < len(self.tempo) else np.inf
            inside = (beat >= at) & (beat < end)
            out[inside] = start_s + (beat[inside] - at) * 60.0 / bpm
            if np.isfinite(end):
                start_s += (end - at) * 60.0 / bpm
        return out

    @property
    def beat_times(self) -> np.ndarray:
        return self.seconds(np.arange(self.beats, dtype=float))

    @property
    def anchor(self) -> float:
        return float(self.seconds(self.anchor_beat))

    def midi(self) -> mido.MidiFile:
        rng = np.random.default_rng(self.seed)
        events: list[tuple[int, int, mido.Message]] = []
        for beat, bpm in self.tempo:
            events.append((round(beat * TICKS), 0, mido.MetaMessage(
                "set_tempo", tempo=mido.bpm2tempo(bpm))))
        for channel, program in self.programs.items():
            events.append((0, 1, mido.Message("program_change", channel=channel,
                                              program=program)))
        for beat, channel, note, velocity, length in self.notes:
            bpm = self._bpm_at(beat)
            shift = rng.normal(0.0, self.jitter_s) * bpm / 60.0 if self.jitter_s else 0.0
            on = max(0, round((beat + shift) * TICKS))
            events.append((on, 2, mido.Message("note_on", channel=channel, note=note,
                                               velocity=velocity)))
            events.append((on + max(1, round(length * TICKS)), 1, mido.Message(
                "note_off", channel=channel, note=note, velocity=0)))
        return midi_file(events)

    def _bpm_at(self, beat: float) -> float:
        return [bpm for at, bpm in self.tempo if at <= beat][-1]

    def render(self, folder: Path, rate: int = 48000) -> Path:
        return render_midi(self.midi(), self.name, folder, rate)


def midi_file(events: list[tuple[int, int, mido.Message]]) -> mido.MidiFile:
    """(tick, order, message) events, offs before ons at a tick, as a one-track MIDI file."""
    events.sort(key=lambda e: (e[0], e[1]))
    track, now = mido.MidiTrack(), 0
    for tick, _, message in events:
        track.append(message.copy(time=tick - now))
        now = tick
    song = mido.MidiFile(ticks_per_beat=TICKS)
    song.tracks.append(track)
    return song


def render_midi(song: mido.MidiFile, name: str, folder: Path, rate: int = 48000) -> Path:
    """A song as a WAV through FluidSynth (kept: rendered again only when it changed)."""
    folder.mkdir(parents=True, exist_ok=True)
    midi_path = folder / f"{name}.mid"
    wav = folder / f"{name}.wav"
    song.save(midi_path)
    stamp = folder / f"{name}.stamp"
    key = midi_path.read_bytes()
    if wav.exists() and stamp.exists() and stamp.read_bytes() == key:
        return wav
    subprocess.run(["fluidsynth", "-ni", "-q", "-g", "0.6", "-r", str(rate), "-F", str(wav),
                    str(SOUND_FONT), str(midi_path)], check=True, capture_output=True)
    stamp.write_bytes(key)
    return wav


# -- parts ------------------------------------------------------------------------------------

def drum_bar(song: Song, bar: int, steps: dict[int, tuple[int, ...]], swing: float = 0.5,
             accent: int = 100, rng: np.random.Generator | None = None) -> None:
    """One 4/4 bar of drums on a 16-step grid: `steps` maps a note to its steps; `swing` is
    where the second eighth of a beat falls (0.5 straight, 2/3 a triplet swing)."""
    rng = rng or np.random.default_rng(bar)
    for note, where in steps.items():
        for step in where:
            beat, sixteenth = divmod(step, 4)
            offset = {0: 0.0, 1: swing / 2, 2: swing, 3: (1 + swing) / 2}[sixteenth]
            velocity = accent - (0 if sixteenth == 0 else 20 if sixteenth == 2 else 35)
            if note in (HAT, SHAKER, RIDE, PEDAL):
                velocity -= 15
            song.add(bar * 4 + beat + offset, DRUMS, note, velocity + rng.integers(-8, 9))


def chord_bar(song: Song, bar: int, channel: int, chord: tuple[int, ...],
              hits: tuple[float, ...], length: float, velocity: int) -> None:
    for hit in hits:
        for note in chord:
            song.add(bar * 4 + hit, channel, note, velocity, length)


def bass_bar(song: Song, bar: int, channel: int, root: int, hits: tuple[float, ...],
             length: float, velocity: int) -> None:
    for hit in hits:
        song.add(bar * 4 + hit, channel, root, velocity, length)


PROGRESSION = [(57, (57, 60, 64)), (53, (53, 57, 60)), (48, (55, 60, 64)), (55, (55, 59, 62))]


def band(song: Song, bars: range, drums: dict[int, tuple[int, ...]],
         bass_hits: tuple[float, ...], chord_hits: tuple[float, ...], chord_length: float,
         swing: float = 0.5, crash_every: int = 4, bass_length: float = 0.4,
         chord_velocity: int = 70) -> None:
    """Drums, bass (channel 1) and chords (channel 2) over `bars`, four chords round."""
    rng = np.random.default_rng(song.seed + bars.start)
    for bar in bars:
        root, chord = PROGRESSION[bar % 4]
        steps = dict(drums)
        if crash_every and bar % crash_every == 0:
            steps[CRASH] = (0,)
        drum_bar(song, bar, steps, swing, rng=rng)
        bass_bar(song, bar, 1, root - 24 + 12, bass_hits, bass_length, 95)
        chord_bar(song, bar, 2, chord, chord_hits, chord_length, chord_velocity)


def pad(song: Song, bars: range, velocity: int = 60) -> None:
    """Sustained chords on channel 3, a bar each."""
    for bar in bars:
        _, chord = PROGRESSION[bar % 4]
        chord_bar(song, bar, 3, chord, (0.0,), 3.9, velocity)


def eighths(n: int, swing: float = 0.5) -> tuple[float, ...]:
    return tuple(b + o for b in range(n) for o in (0.0, swing))


# -- the songs --------------------------------------------------------------------------------

def hiphop() -> Song:
    s = Song("hiphop-90", "hip-hop", [(0, 90.0)], 48, jitter_s=0.006, seed=1,
             programs={1: 33, 2: 4})
    band(s, range(12), {KICK: (0, 7, 10), SNARE: (4, 12), HAT: tuple(range(0, 16, 2))},
         (0.0, 1.75, 2.5), (0.0, 2.5), 1.4, swing=0.56)
    return s


def house() -> Song:
    s = Song("house-124", "house", [(0, 124.0)], 64, seed=2, programs={1: 38, 2: 16})
    band(s, range(16), {KICK: (0, 4, 8, 12), CLAP: (4, 12), OPEN: (2, 6, 10, 14),
                        HAT: tuple(range(16))}, (0.5, 1.5, 2.5, 3.5), (0.75, 2.5), 0.2)
    return s


def techno() -> Song:
    s = Song("techno-132", "techno", [(0, 132.0)], 64, seed=3, programs={1: 38, 3: 89})
    band(s, range(16), {KICK: (0, 4, 8, 12), OPEN: (2, 6, 10, 14), HAT: tuple(range(16)),
                        RIM: (3, 11, 14)},
         tuple(b + o for b in range(4) for o in (0.25, 0.5, 0.75)), (), 0.2, bass_length=0.2)
    pad(s, range(16), 45)
    return s


def rock(bpm: float = 120.0, name: str = "rock-120", seed: int = 4) -> Song:
    s = Song(name, "rock", [(0, bpm)], 64, jitter_s=0.005, seed=seed, programs={1: 34, 2: 30})
    band(s, range(16), {KICK: (0, 8, 10), SNARE: (4, 12), HAT: tuple(range(0, 16, 2))},
         eighths(4), eighths(4), 0.4, chord_velocity=60)
    return s


def pop(bpm: float = 100.0, name: str = "pop-100", seed: int = 5, start: int = 0) -> Song:
    s = Song(name, "pop", [(0, bpm)], 4 * (12 + start), jitter_s=0.005, seed=seed,
             programs={1: 33, 2: 0, 3: 48})
    band(s, range(start, start + 12), {KICK: (0, 6, 8), SNARE: (4, 12),
                                       HAT: tuple(range(0, 16, 2))},
         (0.0, 2.0, 3.5), (0.0, 1.0, 2.0, 3.0), 0.9)
    pad(s, range(start, start + 12), 40)
    return s


def drum_and_bass() -> Song:
    s = Song("dnb-174", "drum and bass", [(0, 174.0)], 88, levels=(1, 2), seed=6,
             programs={1: 38, 3: 89})
    band(s, range(22), {KICK: (0, 10), SNARE: (4, 12), HAT: tuple(range(0, 16, 2)),
                        SHAKER: tuple(range(1, 16, 2))}, (0.0, 2.5), (), 0.2, bass_length=1.5)
    pad(s, range(22), 50)
    return s


def swing() -> Song:
    """A jazz trio at 140: ride 'ding, ding-a-ding', hi-hat on 2 and 4, a feathered kick,
    walking bass on every beat, piano comping off the beat; eighths swung to 2/3."""
    s = Song("swing-140", "swing", [(0, 140.0)], 72, jitter_s=0.006, seed=7,
             programs={1: 32, 2: 0})
    rng = np.random.default_rng(7)
    for bar in range(18):
        drum_bar(s, bar, {RIDE: (0, 4, 6, 8, 12, 14), PEDAL: (4, 12), KICK: (0, 4, 8, 12)},
                 swing=2 / 3, accent=70, rng=rng)
        root, chord = PROGRESSION[bar % 4]
        for beat in range(4):
            s.add(bar * 4 + beat, 1, root - 12 + (0, 4, 7, 5)[beat], 100, 0.9)
        chord_bar(s, bar, 2, chord, (1 + 2 / 3, 3.0) if bar % 2 else (0.0, 2 + 2 / 3), 0.5, 55)
    return s


def ballad() -> Song:
    s = Song("ballad-72", "ballad", [(0, 72.0)], 36, jitter_s=0.008, seed=8,
             programs={1: 33, 2: 4, 3: 48})
    band(s, range(9), {KICK: (0, 7, 10), SNARE: (4, 12), HAT: tuple(range(16))},
         (0.0, 1.75, 2.5), (0.0, 2.0), 1.9)
    pad(s, range(9), 45)
    return s


def punk() -> Song:
    s = Song("punk-180", "punk", [(0, 180.0)], 96, jitter_s=0.004, seed=9,
             programs={1: 34, 2: 30})
    band(s, range(24), {KICK: (0, 8), SNARE: (4, 12), CRASH: (0, 4, 8, 12)},
         eighths(4), eighths(4), 0.4, chord_velocity=60)
    return s


def tempo_change() -> Song:
    s = rock(120.0, "change-120-132", 10)
    s.style = "tempo change"
    s.tempo = [(0, 120.0), (32, 132.0)]
    s.beats = 68
    s.notes = [n for n in s.notes if n[0] < 32]
    band(s, range(8, 17), {KICK: (0, 8, 10), SNARE: (4, 12), HAT: tuple(range(0, 16, 2))},
         eighths(4), eighths(4), 0.4, chord_velocity=60)
    s.anchor_beat = 32
    return s


def quiet_intro() -> Song:
    """Four bars of soft piano eighths (the left hand on 1 and 3), then the band."""
    s = pop(100.0, "intro-100", 11, start=4)
    for bar in range(4):
        root, chord = PROGRESSION[bar % 4]
        for k, at in enumerate(eighths(4)):
            s.add(bar * 4 + at, 2, chord[k % 3] + 12, 38, 0.45)
        chord_bar(s, bar, 2, (root - 12,), (0.0, 2.0), 1.9, 45)
    s.style = "quiet intro"
    s.anchor_beat = 16
    return s


def with_break() -> Song:
    """House: eight bars, four bars of pad and piano alone (no drums, no bass), six bars."""
    s = Song("break-124", "break", [(0, 124.0)], 72, seed=12, programs={1: 38, 2: 16, 3: 89})
    drums = {KICK: (0, 4, 8, 12), CLAP: (4, 12), OPEN: (2, 6, 10, 14), HAT: tuple(range(16))}
    band(s, range(8), drums, (0.5, 1.5, 2.5, 3.5), (0.75, 2.5), 0.2)
    pad(s, range(8, 12), 55)
    for bar in range(8, 12):
        chord_bar(s, bar, 2, PROGRESSION[bar % 4][1], (0.0, 2.0), 1.5, 45)
    band(s, range(12, 18), drums, (0.5, 1.5, 2.5, 3.5), (0.75, 2.5), 0.2)
    s.anchor_beat = 48
    return s


SONGS: dict[str, Callable[[], Song]] = {
    f.__name__: f for f in (hiphop, house, techno, rock, pop, drum_and_bass, swing, ballad,
                            punk, tempo_change, quiet_intro, with_break)}
