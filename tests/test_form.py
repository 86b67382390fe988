"""The song's form (audio/form/): sections found offline on the phrase grid and labelled,
live causally one bar after they start; the steady grid; the live frames equal to the
offline ones.

The music is synthesised here in numpy (a kick and hats on a 120 BPM grid, a sustained chord,
a snare roll): seconds of CPU, no FluidSynth. benchmarks/bench_form.py measures the real
thing on rendered General MIDI songs."""

from __future__ import annotations

import numpy as np

from swarm_instrument.audio.form.beat_features import (
    FrameStream,
    beat_features,
    frame_features,
    steady_grid,
)
from swarm_instrument.audio.form.form_live import FormFollower, LiveGrid
from swarm_instrument.audio.form.sections import find_sections

RATE = 16000
BPM = 120.0
BEAT = 60.0 / BPM


def _hit(length: float, freq: float, decay: float, noise: float, rng,
         drop: float = 0.0) -> np.ndarray:
    """A drum: a sine falling from freq * (1 + drop) to freq (a kick's pitch drop) mixed with
    noise (a snare's, a hat's), decaying."""
    t = np.arange(int(length * RATE)) / RATE
    pitch = freq * (1.0 + drop * np.exp(-t / 0.03))
    tone = np.sin(2 * np.pi * np.cumsum(pitch) / RATE) * (1 - noise)
    return (tone + rng.normal(0, 1, len(t)) * noise) * np.exp(-t / decay)


def song(form: list[tuple[str, int]], seed: int = 0) -> np.ndarray:
    """Bars of: "pad" (a chord alone), "groove" (kick, hats, quiet chord), "roll" (a snare
    roll doubling its rate, louder bar by bar), "drop" (kick, snare, hats, loud chord)."""
    rng = np.random.default_rng(seed)
    bars = sum(n for _, n in form)
    out = np.zeros(int(bars * 4 * BEAT * RATE) + RATE)
    kick, hat, snare = (_hit(0.2, 55, 0.08, 0.1, rng, drop=3.0), _hit(0.05, 0, 0.01, 1.0, rng),
                        _hit(0.15, 200, 0.05, 0.7, rng))
    t = np.arange(len(out)) / RATE
    chord = sum(np.sin(2 * np.pi * f * t) for f in (220.0, 277.2, 329.6)) / 3
    bar = 0
    for kind, count in form:
        for k in range(count):
            at = int((bar + k) * 4 * BEAT * RATE)
            span = slice(at, at + int(4 * BEAT * RATE))
            level = {"pad": 0.3, "groove": 0.08, "roll": 0.1, "drop": 0.3}[kind]
            out[span] += level * chord[span]
            hits = []
            if kind in ("groove", "drop"):
                hits += [(b, kick, 0.8) for b in range(4)]
                hits += [(b + 0.5, hat, 0.1) for b in range(4)]
            if kind == "drop":
                hits += [(b, snare, 0.6) for b in (1, 3)] + [(b + 0.25, hat, 0.2)
                                                           for b in np.arange(0, 4, 0.5)]
            if kind == "roll":
                rate = (4, 8, 16, 32)[min(k * 4 // count, 3)]
                hits += [(s * 4 / rate, snare, 0.1 + 0.6 * k / count) for s in range(rate)]
            for beat, sound, gain in hits:
                start = at + int(beat * BEAT * RATE)
                out[start:start + len(sound)] += gain * sound
        bar += count
    return out[:int(bars * 4 * BEAT * RATE)].astype(np.float32)


FORM = [("pad", 8), ("groove", 8), ("roll", 8), ("drop", 8), ("pad", 8), ("drop", 8)]
STARTS = np.cumsum([0] + [n for _, n in FORM[:-1]]) * 4 * BEAT


def test_sections_offline_start_on_the_bars_where_the_music_changes_and_are_named():
    audio = song(FORM)
    duration = len(audio) / RATE
    grid = np.arange(0.0, duration, BEAT) + 0.004  # a tracker's beats, a little late
    times, frames = frame_features(audio, RATE)
    sections = find_sections(grid, beat_features(times, frames, grid), duration)
    found = np.array([s.start for s in sections])
    assert len(found) == len(STARTS), [(s.start, s.label) for s in sections]
    assert np.all(np.abs(found[1:] - STARTS[1:]) < 0.02)
    assert [s.label for s in sections] == ["intro", "groove", "build", "drop", "break", "drop"]


def test_a_grid_stands_on_a_trackers_beats_despite_a_stray_and_a_gap():
    duration = 90.0
    beats = np.arange(0.0, duration, BEAT) + 0.004
    beats = np.delete(np.append(beats, 3.3), np.arange(130, 140))
    grid = steady_grid(beats, duration)
    assert np.allclose(np.diff(grid), BEAT, atol=1e-3) and abs(grid[0] - 0.004) < 1e-3
    assert abs(grid[-1] - (duration - BEAT + 0.004)) < 1e-3


def test_a_grid_stands_on_beats_placed_on_the_trackers_hops_to_the_songs_ends():
    # the tracker places a beat on its hop (512 samples at 48 kHz): at 124 BPM its intervals
    # alternate between 480.0 and 490.7 ms; the commonest of them is not the period, and a
    # grid at that period was half a beat off at a 170 s song's ends
    hop, period, duration = 512 / 48000, 60.0 / 124.0, 170.0
    written = np.arange(0.0, duration, period)
    beats = np.round((written + 0.004) / hop) * hop
    grid = steady_grid(beats, duration)
    assert len(grid) == len(written)
    assert np.max(np.abs(grid - written - 0.004)) < 0.006  # within half a hop everywhere


def test_a_steady_song_is_one_section():
    audio = song([("groove", 24)])
    grid = np.arange(0.0, len(audio) / RATE, BEAT)
    times, frames = frame_features(audio, RATE)
    sections = find_sections(grid, beat_features(times, frames, grid), len(audio) / RATE)
    assert len(sections) == 1


def test_live_frames_are_the_offline_frames_whatever_the_blocks():
    audio = song([("pad", 1), ("groove", 2)])
    times, frames = frame_features(audio, RATE)
    stream = FrameStream(RATE)
    got_t, got_f = [], []
    rng = np.random.default_rng(3)
    at = 0
    while at < len(audio):
        size = int(rng.integers(1, 3000))
        stream.feed(audio[at:at + size])
        at += size
        t, f = stream.take()
        got_t.append(t)
        got_f.append(f)
    assert np.array_equal(np.concatenate(got_t), times)
    assert np.allclose(np.vstack(got_f), frames, atol=1e-9)


def test_live_changes_come_a_bar_after_each_start_on_a_downbeat_and_only_then():
    audio = song(FORM)
    grid = np.arange(0.0, len(audio) / RATE, BEAT)
    times, frames = frame_features(audio, RATE)
    rows = beat_features(times, frames, grid)
    follower = FormFollower()
    changes = [c for start, end, row in zip(grid[:-1], grid[1:], rows)
               if (c := follower.beat(start, end, row)) is not None]
    news = [c for c in changes if not c.relabel]
    assert [round(c.start, 3) for c in news] == list(STARTS[1:]), changes
    for change, start in zip(news, STARTS[1:]):
        assert abs(change.at - (start + 4 * BEAT)) < 1e-6  # heard of on the next downbeat
    assert any(c.relabel and c.label == "build" for c in changes)  # the roll, while it rises
    assert news[0].label == "groove" and news[2].label == "drop" and news[3].label == "break"


def _grid_ticks(reported, until, step=0.02, period=lambda now: BEAT):
    """A LiveGrid told `reported` (time, count, salience) each as it comes (20 ms late), and
    the tracker's period then, every `step` s until `until`: every (time, count) it hands
    out."""
    grid, ticks, pending = LiveGrid(), [], sorted(reported)
    for now in np.arange(0.0, until, step):
        due = [beat for beat in pending if beat[0] + 0.02 <= now]
        pending = pending[len(due):]
        ticks += grid.ticks(float(now), due, period(now))
    return ticks


def test_the_live_grid_holds_through_a_few_beats_the_tracker_places_off_the_music():
    # 16 clear beats, then 5 the tracker places off the music (a build's roll threw it), no
    # beat for two more, then beats on the music again: the grid stays on the music
    on = [(k * BEAT, k + 1, 0.8) for k in range(16)]
    lost = [((16 + k) * BEAT + 0.19, 17 + k, 0.7) for k in range(5)]
    back = [((23 + k) * BEAT, 24 + k, 0.8) for k in range(8)]
    ticks = _grid_ticks(on + lost + back, 31 * BEAT)
    times = np.array([t for t, _ in ticks])
    assert len(times) == 31 and np.allclose(times, np.arange(31) * BEAT, atol=1e-6)
    assert [count for _, count in ticks][-8:] == list(range(24, 32))  # the tracker's counts


def test_the_live_grid_moves_to_a_phase_the_tracker_keeps():
    # the tracker finds the music a third of a beat later and stays there: after RELOCK
    # beats the grid is on it, never handing out two beats less than half a beat apart
    on = [(k * BEAT, k + 1, 0.8) for k in range(16)]
    moved = [((16 + k + 0.33) * BEAT, 17 + k, 0.8) for k in range(16)]
    times = np.array([t for t, _ in _grid_ticks(on + moved, 32 * BEAT)])
    assert np.all(np.diff(times) >= 0.5 * BEAT)
    assert np.allclose(times[-4:], (np.arange(28, 32) + 0.33) * BEAT, atol=1e-6)


def test_before_clear_beats_the_live_grid_is_the_trackers_beats_then_locks_on_the_drums():
    # a pad: beats the tracker places anywhere (salience 0.5) at another tempo; then drums:
    # the grid hands out the pad's beats as they come and is on the drums' after 4 of them
    pad = [(0.1 + k * 0.39, k + 1, 0.5) for k in range(10)]
    drums = [(4.0 + k * BEAT, 11 + k, 0.8) for k in range(12)]

    def tempo(now: float) -> float:  # the tracker's period as it goes
        return 0.39 if now < 4.5 else BEAT

    times = np.array([t for t, _ in _grid_ticks(pad + drums, 10.0, period=tempo)])
    assert np.allclose(times[:10], [t for t, *_ in pad], atol=1e-6)
    assert np.allclose(times[times >= 4.0], 4.0 + np.arange(12) * BEAT, atol=1e-6)


def test_the_live_grid_goes_on_through_a_break_the_tracker_places_no_beat_in():
    on = [(k * BEAT, k + 1, 0.8) for k in range(8)]
    # until half a beat past the 21st: at 20 * BEAT + 0.01 the last look (every 20 ms) fell on
    # the 21st beat itself, which the grid's fitted line may put a rounding after it (numpy
    # 2.5.2 on the H100's machine: 20 beats; 2.4.6 here: 21)
    ticks = _grid_ticks(on, 20.5 * BEAT)
    assert np.allclose([t for t, _ in ticks], np.arange(21) * BEAT, atol=1e-6)
    assert [count for _, count in ticks] == list(range(1, 22))


def test_live_the_first_section_counts_from_the_streams_start_not_the_first_beat():
    # the tracker's first beat comes 1.5 s into the song: the intro's four bars began at 0
    audio = song([("pad", 4), ("groove", 8)])
    grid = np.arange(3 * BEAT, len(audio) / RATE, BEAT)
    times, frames = frame_features(audio, RATE)
    follower = FormFollower()
    changes = [c for start, end, row in zip(grid[:-1], grid[1:],
                                            beat_features(times, frames, grid))
               if (c := follower.beat(start, end, row)) is not None]
    assert [round(c.start, 3) for c in changes] == [16 * BEAT], changes


def test_live_with_the_trackers_bar_the_changes_land_on_its_downbeats():
    # the tracker's downbeat a beat before the song's: the follower takes its bar, so every
    # change is heard on one of its downbeats, four beats or more after the section began
    audio = song(FORM)
    grid = np.arange(0.0, len(audio) / RATE, BEAT)
    times, frames = frame_features(audio, RATE)
    follower = FormFollower()
    changes = [c for k, (start, end, row) in enumerate(zip(grid[:-1], grid[1:],
                                                          beat_features(times, frames, grid)))
               if (c := follower.beat(start, end, row, place=(k + 1) % 4)) is not None]
    news = [c for c in changes if not c.relabel]
    assert len(news) == len(STARTS) - 1, changes
    for change, start in zip(news, STARTS[1:]):
        beats = change.at / BEAT
        assert abs(beats - round(beats)) < 1e-6 and round(beats) % 4 == 3
        assert change.at - change.start >= 4 * BEAT - 1e-6
        assert abs(change.start - start) <= BEAT + 1e-6
