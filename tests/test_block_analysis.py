"""The live input's analysis per block, off the frame (audio/input/block_analysis.py): each
block that lands in the ring is measured on the block analysis' thread (the worker process's,
here the show's for a stand-in device), and the frame only tracks and judges what it
published. The picture must not tell: the same levels and bands as measuring in the frame,
every click an onset within two frames, the performer's settings obeyed, and an analysis that
breaks costs nothing but the frame measuring for itself again."""

from __future__ import annotations

import math
import sys
import threading

import numpy as np
import pytest
from block_device import BlockDevice

from swarm_instrument.audio.analysis.features import Analyzer
from swarm_instrument.audio.analysis.window_measure import Measures, WindowMeasure
from swarm_instrument.audio.input import block_analysis
from swarm_instrument.audio.input.block_analysis import FAILED, RUNNING, FeatureSlot
from swarm_instrument.audio.input.live_input import AudioInput

RATE = 48000
FPS = 60
PER_FRAME = RATE // FPS  # 800 samples: a frame's worth
BLOCK = 256


def click_track(clicks: int = 10, interval: float = 0.31, amplitude: float = 0.8,
                seed: int = 2) -> tuple[np.ndarray, list[float]]:
    """Clicks of 1 ms over noise at -70 dBFS, after a lead-in while the threshold warms."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 10 ** (-70 / 20), int((0.3 + interval * clicks) * RATE)).astype(np.float32)
    times = [0.3 + interval * i for i in range(clicks)]
    for t in times:
        at = int(t * RATE)
        x[at:at + 48] += amplitude * np.hanning(48).astype(np.float32)
    return x, times


def music(seconds: float, seed: int = 5) -> np.ndarray:
    """A bass tone, a melody line that changes every 0.15 s and hats of noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * RATE)) / RATE
    notes = 440.0 * 2.0 ** (rng.integers(0, 12, int(seconds / 0.15) + 1) / 12)
    melody = 0.2 * np.sin(2 * np.pi * notes[(t / 0.15).astype(int)] * t)
    hats = rng.normal(0, 0.05, t.size) * (np.sin(2 * np.pi * 4 * t) > 0.7)
    return (0.3 * np.sin(2 * np.pi * 55 * t) + melody + hats).astype(np.float32)


class Frames:
    """A live input fed as a stream would be (whole blocks, a frame's worth before each
    frame) and updated at 60 fps."""

    def __init__(self, samples: np.ndarray, wait_s: float = 5.0, fps: float = FPS,
                 block: int = BLOCK) -> None:
        self.fps, self.block = fps, block
        self.device = BlockDevice(RATE)
        self.source = AudioInput(sd=self.device, start_wait_s=5.0, analysis_wait_s=wait_s)
        assert self.source.state == "ok", self.source.message
        self.samples = samples
        self.fed = 0
        self.frame = 0

    def next(self):
        self.frame += 1
        until = int(self.frame * RATE / self.fps) // self.block * self.block  # blocks done
        self.device.feed_samples(self.samples[self.fed:until], self.block)
        self.fed = max(self.fed, until)
        return self.source.update(self.frame / self.fps)

    def window(self) -> np.ndarray:
        """The newest samples the input has had, as the frame would have read them."""
        size = self.source.analyzer.window_size
        out = np.zeros(size, np.float32)
        got = self.samples[max(0, self.fed - size):self.fed]
        out[size - len(got):] = got
        return out

    def close(self) -> None:
        self.source.close()


@pytest.fixture
def measured_on(monkeypatch):
    """(the thread's name, the WindowMeasure) of each window measured."""
    names = []
    measure = WindowMeasure.measure

    def recorded(self, *args, **kwargs):
        names.append((threading.current_thread().name, self))
        return measure(self, *args, **kwargs)

    monkeypatch.setattr(WindowMeasure, "measure", recorded)
    return names


def test_windows_are_measured_off_the_frame_and_read_the_same(measured_on):
    """The block analysis' measures track into the very levels and bands the frame's own
    measuring of the same window gives, and no window is measured on the frame's thread."""
    frames = Frames(music(2.0))
    alone = Analyzer(RATE)  # the frame measuring for itself, beside it
    try:
        for _ in range(100):
            live = frames.next()
            own = alone.process(frames.window(), 1 / FPS)
            assert live.rms_db == pytest.approx(own.rms_db, abs=1e-9)
            assert live.peak_db == pytest.approx(own.peak_db, abs=1e-9)
            assert live.level == pytest.approx(own.level, abs=1e-9)
            assert live.bands == pytest.approx(own.bands, abs=1e-9)
        assert frames.source.ring.features.count >= 100
        live_threads = [name for name, by in measured_on if by is not alone.measure]
        assert set(live_threads) == {"block analysis"} and len(live_threads) >= 100
        assert 0.3 < live.level <= 1.0 and min(live.bands) > 0.0  # music, not silence
    finally:
        frames.close()


def onset_times(frames: Frames, count: int) -> list[float]:
    return [(i + 1) / FPS for i in range(count) if frames.next().onset]


def test_every_click_is_an_onset_within_two_frames():
    x, times = click_track()
    frames = Frames(x)
    try:
        found = onset_times(frames, len(x) // PER_FRAME)
    finally:
        frames.close()
    assert len(found) == len(times)
    for click, at in zip(times, found):
        assert 0 <= at - click <= 2 / FPS  # the frame that holds the click's block, or the next


def test_the_onsets_compression_reaches_the_analysis():
    """Compression 0 flattens every spectrum to nothing: no click stands out (the setting is
    the performer's, applied on the analysis' thread)."""
    x, _ = click_track()
    frames = Frames(x)
    try:
        frames.source.analyzer.onset_settings.compression = 0.0
        found = onset_times(frames, len(x) // PER_FRAME)
        assert frames.source.ring.features.settings()[1] == 0.0
    finally:
        frames.close()
    assert found == []


def test_a_frame_with_no_new_block_judges_nothing_again():
    """Frames faster than blocks (a 240 Hz display, 1024-sample blocks: a block every five
    frames): a block's flux is judged once, not again each frame until the next block comes:
    with no minimum interval between onsets, a click is an onset in its block's frame (or
    the next block's too), never in the frames between."""
    x, times = click_track(clicks=4)
    frames = Frames(x, fps=240, block=1024)
    try:
        frames.source.analyzer.onset_settings.min_interval_s = 0.0
        blocks, onsets = [], []
        for _ in range(len(x) * 240 // RATE):
            onsets.append(frames.next().onset)
            blocks.append(frames.source.ring.blocks)
    finally:
        frames.close()
    assert blocks[-1] < len(blocks) / 4  # most frames had no new block
    new = [i == 0 or blocks[i] != blocks[i - 1] for i in range(len(blocks))]
    assert all(new[i] for i, onset in enumerate(onsets) if onset)
    assert len(times) <= sum(onsets) <= 2 * len(times)  # a click's block, or the next too


def test_an_analysis_that_breaks_leaves_the_frame_measuring(monkeypatch, capfd):
    """A bug on the analysis' thread: said on stderr with its traceback, the slot marked
    failed, and the frame measures the windows itself, reading the levels right."""
    measure = WindowMeasure.measure

    def broken(self, *args, **kwargs):
        if threading.current_thread().name == "block analysis":
            raise ZeroDivisionError("a bug in the block analysis")
        return measure(self, *args, **kwargs)

    monkeypatch.setattr(WindowMeasure, "measure", broken)
    frames = Frames(music(1.0))
    alone = Analyzer(RATE)
    try:
        for _ in range(40):
            live = frames.next()
            own = alone.process(frames.window(), 1 / FPS)
            assert live.level == pytest.approx(own.level, abs=1e-9)
        assert frames.source.ring.features.state == FAILED
        assert live.level > 0.3
    finally:
        frames.close()
    err = capfd.readouterr().err
    assert "ZeroDivisionError: a bug in the block analysis" in err
    assert "Traceback" in err


def test_a_slow_analysis_leaves_the_frame_the_newest_measures_there_are(monkeypatch):
    """An analysis that cannot keep up: the frame waits `analysis_wait_s` for the newest
    block's measures, then takes the newest there are (an earlier block's), and goes on."""
    measure = WindowMeasure.measure
    gate = threading.Event()

    def stuck(self, *args, **kwargs):
        at = args[-1]
        if threading.current_thread().name == "block analysis" and at * RATE > 4 * BLOCK:
            gate.wait(10.0)
        return measure(self, *args, **kwargs)

    monkeypatch.setattr(WindowMeasure, "measure", stuck)
    frames = Frames(music(1.0), wait_s=0.05)
    try:
        frames.next()  # 768 samples
        live = frames.next()  # 1536: the analysis is stuck on them; 50 ms, then older ones
        slot = frames.source.ring.features
        assert slot.state == RUNNING and slot.read()[0] <= 4 * BLOCK < frames.fed
        assert live.rms_db > -60.0 and frames.source.state == "ok"
    finally:
        gate.set()
        frames.close()


def test_a_reader_never_sees_half_a_window(monkeypatch):
    """The slot's sequence lock: a reader racing the writer gets each window's measures
    whole (every field the same number here), never a mix of two."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads swap between nearly every bytecode
    slot = FeatureSlot(bytearray(FeatureSlot.nbytes), 0)
    stop = threading.Event()

    def write() -> None:
        i = 1
        while not stop.is_set():
            v = float(i)
            slot.publish(i, Measures(v, v, v, (v, v, v), v))
            i += 1

    writer = threading.Thread(target=write)
    writer.start()
    reads = 0
    try:
        for _ in range(20000):
            got = slot.read()
            if got is None:
                continue
            end, m = got
            assert {m.rms, m.rms_db, m.peak_db, *m.bands_db, m.flux} == {float(end)}
            reads += 1
    finally:
        stop.set()
        writer.join()
        sys.setswitchinterval(old)
    assert reads > 1000 and slot.count > 1000


def test_the_slot_reads_nothing_until_measured_and_after_a_clear():
    slot = FeatureSlot(bytearray(FeatureSlot.nbytes), 0)
    assert slot.read() is None and slot.state == block_analysis.NONE
    assert slot.settings()[3:] == (2048, 1024)  # the analysis' defaults until the frame's
    slot.publish(512, Measures(0.5, -6.0, -3.0, (-10.0, -20.0, -30.0), math.nan))
    end, m = slot.read()
    assert end == 512 and m.bands_db == (-10.0, -20.0, -30.0) and math.isnan(m.flux)
    slot.clear()
    assert slot.read() is None and slot.count == 0
