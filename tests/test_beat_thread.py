"""The live input's beat tracker fed on a thread of its own (audio/analysis/beat_thread.py):
the same beats as fed on the frame, from the same samples in the same order, the frame's CPU
only the copy out of the ring, an error on the thread said on the frame, and a live show's
input and the live autopilot using it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np
import pytest
from test_audio_faults import BLOCK as BLOCK_FAKE
from test_audio_faults import Clock, FakeSoundDevice, mic
from test_autopilot import LIVE_FORM, LOOKS, LiveShow
from test_form import RATE as FORM_RATE
from test_form import song

from benchmarks.probes.latency_devices import ClockedDevice
from swarm_instrument.audio.analysis.beat_feed import RingBeatFeed
from swarm_instrument.audio.analysis.beat_thread import ThreadedRingFeed
from swarm_instrument.audio.analysis.beats import BeatTracker
from swarm_instrument.audio.base import AudioFrameSource
from swarm_instrument.audio.input.live_input import AudioInput
from swarm_instrument.audio.input.ring import Ring
from swarm_instrument.control.looks.presets import Preset
from swarm_instrument.show.autopilot.live_autopilot import LiveAutopilot

RATE = 48000
BLOCK = 256  # the sound card's block
FRAME_BLOCKS = 3  # blocks a frame: 16 ms, a 60 fps frame


def drum_track(bpm: float, seconds: float) -> np.ndarray:
    """Kicks on the beats, a noise hat between them: something with a tempo to find."""
    rng = np.random.default_rng(5)
    t = np.arange(int(0.2 * RATE)) / RATE
    kick = (0.9 * np.sin(2 * np.pi * 55 * t) * np.exp(-t / 0.08)).astype(np.float32)
    hat = (0.2 * rng.standard_normal(int(0.03 * RATE)) *
           np.exp(-np.arange(int(0.03 * RATE)) / (0.008 * RATE))).astype(np.float32)
    x = np.zeros(int(seconds * RATE), np.float32)
    period = 60.0 / bpm
    for k, at in enumerate(np.arange(0.25, seconds - 0.3, period / 2)):
        start = int(at * RATE)
        sound = kick if k % 2 == 0 else hat
        x[start:start + len(sound)] += sound
    return x


class Heard:
    """A sample listener (the live form's place): everything it was handed, in order."""

    def __init__(self) -> None:
        self.chunks: list[np.ndarray] = []

    def __call__(self, samples: np.ndarray) -> None:
        self.chunks.append(samples.copy())

    @property
    def samples(self) -> np.ndarray:
        return np.concatenate(self.chunks)


def play(feed: RingBeatFeed, song: np.ndarray,
         between: Callable[[], None] | None = None) -> tuple[list, float]:
    """The song into a ring block by block, the feed updated once a frame as the show does:
    (each frame's BeatInfo, the CPU the updates took on this thread). `between`: called
    after each frame, outside what is timed (frames here follow one another at once, where a
    show's come 16 ms apart)."""
    ring, infos, cpu = Ring(1 << 16), [], 0.0
    for frame, start in enumerate(range(0, len(song) - BLOCK, BLOCK * FRAME_BLOCKS)):
        for block in range(FRAME_BLOCKS):
            at = start + block * BLOCK
            ring.write(song[at:at + BLOCK, None])
        clock = time.thread_time()
        infos.append(feed.update(ring, 1.0 + frame * FRAME_BLOCKS * BLOCK / RATE))
        cpu += time.thread_time() - clock
        if between is not None:
            between()
    return infos, cpu


def drained(feed: ThreadedRingFeed, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while feed.pending and time.monotonic() < end:
        time.sleep(0.0005)
    assert not feed.pending, "the beat thread did not catch up"


def test_the_thread_finds_the_same_beats_from_the_same_samples_off_the_frame():
    song = drum_track(124.0, 12.0)
    ears = Heard(), Heard()
    here = RingBeatFeed(BeatTracker(RATE), listeners=[ears[0]])
    _, cpu_here = play(here, song)
    threaded = ThreadedRingFeed(BeatTracker(RATE), listeners=[ears[1]])
    try:
        # Each frame's samples done before the next frame, as a thread keeping up with a
        # show's 16 ms frames is (back to back on a busy machine, it would fall behind and
        # the frames find fewer beats: the timing of this machine, not the feed's).
        infos, cpu_frame = play(threaded, song, between=lambda: drained(threaded))
    finally:
        threaded.close()
    ours, theirs = here.tracker, threaded.tracker
    assert ours.bpm == pytest.approx(124.0, abs=1.0)  # the song has a tempo to find
    assert (theirs.bpm, theirs.beats, theirs.last_beat, theirs.position) == (
        ours.bpm, ours.beats, ours.last_beat, ours.position)
    assert np.array_equal(ears[0].samples, ears[1].samples)  # every sample, in order
    assert threaded.fed_on_thread == len(ears[1].samples) and threaded.skipped == 0
    assert sum(info is not None for info in infos) > len(infos) // 2  # the frames had beats
    # the frames' CPU: the copies out of the ring, not the tracker's work
    assert cpu_frame < 0.5 * cpu_here, (cpu_frame, cpu_here)


def test_an_error_on_the_thread_is_raised_on_the_frame_after():
    def deaf(_samples: np.ndarray) -> None:
        raise RuntimeError("a listener broke")

    feed = ThreadedRingFeed(BeatTracker(RATE), listeners=[deaf])
    ring = Ring(1 << 14)
    try:
        ring.write(np.zeros((BLOCK, 1), np.float32))
        feed.update(ring, 0.0)
        end = time.monotonic() + 10.0
        while feed._error is None and time.monotonic() < end:
            time.sleep(0.01)
        with pytest.raises(RuntimeError, match="a listener broke"):
            feed.update(ring, 0.1)
    finally:
        feed.close()
    assert not feed._thread.is_alive()


def test_a_live_shows_input_feeds_its_tracker_on_the_thread_and_stops_it_at_close():
    """The live input (in this process, through a stand-in sound card) of a live show: its
    feed is threaded, the tempo range is set under its lock, close() stops the thread."""
    source = AudioInput(sd=ClockedDevice(drum_track(124.0, 6.0)), start_wait_s=5.0)
    try:
        assert source.beats_on_thread()
        end = time.monotonic() + 20.0
        while time.monotonic() < end and source.beat_info is None:
            source.update(time.perf_counter())
            time.sleep(1 / 60)
        feed = source._ring_feed
        assert isinstance(feed, ThreadedRingFeed) and feed.fed_on_thread > 0
        assert source.beat_info is not None and source.beat_info.bpm == pytest.approx(
            124.0, abs=1.0)
        source.set_tempo_range(70.0, 140.0)
        assert source.beat_tracker.tempo_range == (70.0, 140.0)
    finally:
        source.close()
    assert not feed._thread.is_alive() and source._ring_feed is None


class RingSource(AudioFrameSource):
    """A live input without a device: its ring written by the test, its beats fed from the
    ring (on the thread, once `beats_on_thread`), as the live input's are."""

    tracks_beats = threads_beats = True

    def __init__(self, rate: float) -> None:
        super().__init__(rate, "ring", "ok")
        self.ring = Ring(1 << 17)

    def _fill(self, now: float) -> bool:
        self.ring.read_newest(self._window)
        return True

    def _track_beats(self, now: float):
        return self._track_ring(self.ring, now)


def live_looks(samples: np.ndarray, threaded: bool) -> list:
    """The live autopilot following a ring source at 30 fps (the samples up to each frame's
    end written, then the source and the autopilot updated, the thread caught up between):
    the looks it played, when."""
    source = RingSource(FORM_RATE)
    if threaded:
        source.beats_on_thread()
    presets = [Preset(look.name, {}, tags=look.tags) for look in LOOKS]
    pilot = LiveAutopilot(source, presets, seed=1, resume_s=10.0)
    show = LiveShow()
    written = 0
    try:
        for frame in range(round(len(samples) / FORM_RATE * 30)):
            end = min(round((frame + 1) / 30 * FORM_RATE), len(samples))
            source.ring.write(samples[written:end, None])
            written = end
            source.update((frame + 1) / 30)
            if threaded:
                drained(source._ring_feed)
            show.show_time = frame / 30
            pilot.update(show, frame / 30)
    finally:
        source._stop_feed()
    return show.looks.went


def test_the_live_autopilot_follows_a_tracker_fed_on_the_thread_as_one_fed_on_the_frame():
    """Its form hears on the tracker's thread and is read under the lock: the same looks at
    the same times as where the frame feeds them (issue 29's live song, three sections)."""
    samples = song(LIVE_FORM)
    here, threaded = live_looks(samples, False), live_looks(samples, True)
    assert len(here) == 3 and threaded == here


def beat_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "beat tracker" and t.is_alive()]


def test_a_lost_and_reopened_input_keeps_its_one_beat_thread_and_close_ends_it():
    """The watchdog's loss and reopening (a new stream, a new ring) under a threaded feed:
    one thread all along, fed from the reopened stream, gone at close."""
    before = len(beat_threads())
    sd = FakeSoundDevice([mic()])
    source = AudioInput(sd=sd)
    try:
        assert source.beats_on_thread()
        clock = Clock(source, sd)
        clock.frames(30, feed=True)
        feed = source._ring_feed
        assert isinstance(feed, ThreadedRingFeed) and len(beat_threads()) == before + 1
        clock.run_until(1.2, feed=False)  # lost, reopened, silent until blocks come
        assert source.opens == 2
        drained(feed)
        heard = feed.fed_on_thread
        clock.frames(30, feed=True)  # blocks from the reopened stream
        assert source.state == "ok" and source._ring_feed is feed
        drained(feed)
        assert feed.fed_on_thread >= heard + 30 * 3 * BLOCK_FAKE
        assert len(beat_threads()) == before + 1
    finally:
        source.close()
    assert len(beat_threads()) == before
