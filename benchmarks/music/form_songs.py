"""General MIDI songs whose form is known: the form benchmark's music (benchmarks/bench_form.py).

Each song is a list of sections (intro, groove, build, drop, break, outro) of whole bars at one
tempo, written note by note (drums on channel 10, bass, chords, a pad, a lead) in a style
(house, trance, hip-hop, rock, drum and bass), written out with mido and rendered by Debian's
FluidSynth with its General MIDI sound font (fluid-soundfont-gm). The true section starts are
the MIDI file's own bars: nothing is estimated. The Song class and the rendering follow the
beat-accuracy benchmark's (issue 30's benchmarks/gm_songs.py), copied, not imported.

What each section plays:
- intro: a pad and soft piano (a rock intro: the guitar alone);
- groove: drums, bass and chords at a moderate level (a verse);
- build: no kick; a snare roll doubling its rate every two bars, louder bar by bar, over the
  pad, with a rising lead;
- drop: the full kit with a crash each bar, bass, chords and a lead, loud (a chorus);
- break: pad and piano, no drums, no bass;
- outro: kick and hats thinning out under the pad, quieter bar by bar.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import mido
import numpy as np

from benchmarks.music.gm_songs import DRUMS, PROGRESSION, TICKS, midi_file, render_midi

KICK, SNARE, CLAP, HAT, OPEN, CRASH, RIDE = 36, 38, 39, 42, 46, 49, 51
BASS, CHORDS, PAD, LEAD = 1, 2, 3, 4


@dataclass
class Style:
    """A style's drum grooves on a 16-step grid and its instruments (GM programs)."""

    groove: dict[int, tuple[int, ...]]
    drop: dict[int, tuple[int, ...]]
    programs: dict[int, int]
    bass_hits: tuple[float, ...] = (0.0, 1.5, 2.5)
    chord_hits: tuple[float, ...] = (0.0, 2.0)


STYLES = {
    "house": Style({KICK: (0, 4, 8, 12), CLAP: (4, 12), HAT: (2, 6, 10, 14)},
                   {KICK: (0, 4, 8, 12), CLAP: (4, 12), OPEN: (2, 6, 10, 14),
                    HAT: tuple(range(16))}, {BASS: 38, CHORDS: 16, PAD: 89, LEAD: 81},
                   (0.5, 1.5, 2.5, 3.5), (0.75, 2.5)),
    "trance": Style({KICK: (0, 4, 8, 12), HAT: (2, 6, 10, 14)},
                    {KICK: (0, 4, 8, 12), CLAP: (4, 12), OPEN: (2, 6, 10, 14),
                     HAT: tuple(range(16))}, {BASS: 38, CHORDS: 81, PAD: 91, LEAD: 80},
                    tuple(b + 0.5 for b in range(4)), (0.0, 0.75, 1.5, 2.25, 3.0)),
    "hiphop": Style({KICK: (0, 7, 10), SNARE: (4, 12), HAT: tuple(range(0, 16, 2))},
                    {KICK: (0, 7, 10, 11), SNARE: (4, 12), CLAP: (4, 12),
                     HAT: tuple(range(16))}, {BASS: 33, CHORDS: 4, PAD: 89, LEAD: 80},
                    (0.0, 1.75, 2.5), (0.0, 2.5)),
    "rock": Style({KICK: (0, 8, 10), SNARE: (4, 12), HAT: tuple(range(0, 16, 2))},
                  {KICK: (0, 6, 8, 10), SNARE: (4, 12), RIDE: tuple(range(0, 16, 2))},
                  {BASS: 34, CHORDS: 29, PAD: 48, LEAD: 30},
                  tuple(b / 2 for b in range(8)), tuple(b / 2 for b in range(8))),
    "dnb": Style({KICK: (0, 10), SNARE: (4, 12), HAT: tuple(range(0, 16, 2))},
                 {KICK: (0, 10), SNARE: (4, 12), HAT: tuple(range(16)), OPEN: (14,)},
                 {BASS: 38, CHORDS: 89, PAD: 89, LEAD: 81}, (0.0, 2.5), (0.0,)),
}


@dataclass
class Song:
    """A song in sections: (label, bars) in order, at `bpm` in 4/4, in `style`."""

    name: str
    style: str
    bpm: float
    form: list[tuple[str, int]]
    seed: int = 0
    notes: list[tuple[float, int, int, int, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        rng = np.random.default_rng(self.seed)
        bar = 0
        for label, bars in self.form:
            WRITERS[label](self, range(bar, bar + bars), rng)
            bar += bars

    @property
    def bars(self) -> int:
        return sum(bars for _, bars in self.form)

    @property
    def duration(self) -> float:
        return self.bars * 4 * 60.0 / self.bpm

    @property
    def starts(self) -> np.ndarray:
        """Each section's start in seconds (the first at 0)."""
        bars = np.cumsum([0] + [bars for _, bars in self.form[:-1]])
        return bars * 4 * 60.0 / self.bpm

    @property
    def labels(self) -> list[str]:
        return [label for label, _ in self.form]

    @property
    def downbeats(self) -> np.ndarray:
        return np.arange(self.bars) * 4 * 60.0 / self.bpm

    def add(self, beat: float, channel: int, note: int, velocity: float,
            length: float = 0.25) -> None:
        self.notes.append((beat, channel, note, int(np.clip(velocity, 1, 127)), length))

    def midi(self) -> mido.MidiFile:
        events: list[tuple[int, int, mido.Message]] = [
            (0, 0, mido.MetaMessage("set_tempo", tempo=mido.bpm2tempo(self.bpm)))]
        for channel, program in STYLES[self.style].programs.items():
            events.append((0, 1, mido.Message("program_change", channel=channel,
                                              program=program)))
        for beat, channel, note, velocity, length in self.notes:
            on = round(beat * TICKS)
            events.append((on, 2, mido.Message("note_on", channel=channel, note=note,
                                               velocity=velocity)))
            events.append((on + max(1, round(length * TICKS)), 1, mido.Message(
                "note_off", channel=channel, note=note, velocity=0)))
        return midi_file(events)

    def render(self, folder: Path, rate: int = 48000) -> Path:
        return render_midi(self.midi(), self.name, folder, rate)


# -- parts ------------------------------------------------------------------------------------

def drums(song: Song, bar: int, steps: dict[int, tuple[int, ...]], accent: float,
          rng: np.random.Generator) -> None:
    for note, where in steps.items():
        for step in where:
            velocity = accent - (0 if step % 4 == 0 else 15) - (15 if note in (HAT, RIDE) else 0)
            song.add(bar * 4 + step / 4, DRUMS, note, velocity + rng.integers(-6, 7), 0.1)


def harmony(song: Song, bar: int, hits: tuple[float, ...], velocity: float,
            length: float = 0.4, bass: bool = True) -> None:
    root, chord = PROGRESSION[bar % 4]
    style = STYLES[song.style]
    for hit in hits:
        for note in chord:
            song.add(bar * 4 + hit, CHORDS, note, velocity, length)
    if bass:
        for hit in style.bass_hits:
            song.add(bar * 4 + hit, BASS, root - 24, velocity + 20, 0.4)


def pad(song: Song, bar: int, velocity: float) -> None:
    for note in PROGRESSION[bar % 4][1]:
        song.add(bar * 4, PAD, note, velocity, 3.9)


def piano(song: Song, bar: int, velocity: float) -> None:
    _, chord = PROGRESSION[bar % 4]
    for k in range(4):
        song.add(bar * 4 + k, CHORDS, chord[k % 3] + 12, velocity, 0.9)


def lead(song: Song, bar: int, velocity: float, rise: int = 0) -> None:
    root, chord = PROGRESSION[bar % 4]
    for k, at in enumerate((0.0, 0.75, 1.5, 2.0, 3.0)):
        song.add(bar * 4 + at, LEAD, chord[k % 3] + 12 + rise, velocity, 0.5)


def intro(song: Song, bars: range, rng: np.random.Generator) -> None:
    for bar in bars:
        if song.style == "rock":
            harmony(song, bar, STYLES["rock"].chord_hits, 55, bass=False)
        else:
            pad(song, bar, 55)
            piano(song, bar, 40)


def groove(song: Song, bars: range, rng: np.random.Generator) -> None:
    style = STYLES[song.style]
    for bar in bars:
        drums(song, bar, style.groove, 85, rng)
        harmony(song, bar, style.chord_hits, 55)


def build(song: Song, bars: range, rng: np.random.Generator) -> None:
    for k, bar in enumerate(bars):
        rate = (4, 8, 16, 32)[min(k * 4 // len(bars), 3)]  # notes a bar, doubling
        velocity = 50 + 70 * k / max(len(bars) - 1, 1)
        for step in range(rate):
            song.add(bar * 4 + step * 4 / rate, DRUMS, SNARE, velocity + rng.integers(-5, 6),
                     0.05)
        pad(song, bar, 45 + 4 * k)
        lead(song, bar, velocity * 0.7, rise=k)


def drop(song: Song, bars: range, rng: np.random.Generator) -> None:
    style = STYLES[song.style]
    for bar in bars:
        drums(song, bar, {**style.drop, CRASH: (0,)}, 115, rng)
        harmony(song, bar, style.chord_hits, 80)
        lead(song, bar, 95)


def pause(song: Song, bars: range, rng: np.random.Generator) -> None:
    for bar in bars:
        pad(song, bar, 60)
        piano(song, bar, 45)


def outro(song: Song, bars: range, rng: np.random.Generator) -> None:
    for k, bar in enumerate(bars):
        fade = 1.0 - 0.6 * k / max(len(bars) - 1, 1)
        drums(song, bar, {KICK: (0, 8), HAT: (4, 12)}, 80 * fade, rng)
        pad(song, bar, 50 * fade)


WRITERS = {"intro": intro, "groove": groove, "build": build, "drop": drop, "break": pause,
           "outro": outro}

SONGS = {
    "house-124": lambda: Song("house-124", "house", 124.0, [
        ("intro", 8), ("groove", 16), ("build", 8), ("drop", 16), ("break", 8), ("build", 8),
        ("drop", 16), ("outro", 8)], seed=1),
    "trance-138": lambda: Song("trance-138", "trance", 138.0, [
        ("intro", 16), ("build", 8), ("drop", 16), ("break", 16), ("build", 8), ("drop", 16),
        ("outro", 8)], seed=2),
    "hiphop-92": lambda: Song("hiphop-92", "hiphop", 92.0, [
        ("intro", 4), ("groove", 16), ("drop", 8), ("groove", 16), ("drop", 8), ("break", 4),
        ("drop", 8), ("outro", 4)], seed=3),
    "rock-120": lambda: Song("rock-120", "rock", 120.0, [
        ("intro", 4), ("groove", 8), ("drop", 8), ("groove", 8), ("drop", 8), ("break", 8),
        ("drop", 8), ("outro", 4)], seed=4),
    "short-128": lambda: Song("short-128", "house", 128.0, [
        ("intro", 4), ("groove", 4), ("build", 4), ("drop", 4), ("break", 4), ("drop", 4)],
        seed=7),
    "dnb-172": lambda: Song("dnb-172", "dnb", 172.0, [
        ("intro", 16), ("build", 8), ("drop", 16), ("break", 8), ("build", 8), ("drop", 16),
        ("outro", 8)], seed=5),
}
