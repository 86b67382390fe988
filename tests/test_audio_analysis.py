"""Audio analysis on synthetic signals, no device: levels, auto-gain, bands, onsets, the ring
buffer, modulation routes and the speed formula."""

from __future__ import annotations

import json
import math
import tracemalloc

import numpy as np
import pytest

from swarm_instrument.audio.analysis.features import (
    Analyzer,
    LevelSettings,
    LevelTracker,
    speed_scale,
)
from swarm_instrument.audio.analysis.window_measure import (
    DB_FLOOR,
    BandAnalyzer,
    peak_db,
    rms,
    rms_db,
)
from swarm_instrument.audio.base import OfflineAudio
from swarm_instrument.audio.input.ring import Ring
from swarm_instrument.control.parameters.modulation import (
    Route,
    RouteError,
    modulate,
    routes_from_json,
    routes_to_json,
)
from swarm_instrument.control.parameters.registry import Params

RATE = 48000
FPS = 60


def tone(freq: float, seconds: float, amplitude: float = 0.5, rate: int = RATE) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (amplitude * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def run_frames(source: OfflineAudio, seconds: float, start: float = 0.05) -> list:
    """Update once a frame at 60 fps; returns each frame's features. The default start leaves
    out the first 43 ms, whose window still holds the silence before the signal began."""
    frames = []
    for i in range(1, int(seconds * FPS) + 1):
        frames.append(source.update(start + i / FPS))
    return frames


# -- levels ----------------------------------------------------------------------------------

def test_rms_and_peak_of_a_sine():
    x = tone(375.0, 1024 / RATE)  # exactly 8 periods
    assert rms(x) == pytest.approx(0.5 / math.sqrt(2), rel=1e-5)
    assert rms_db(x) == pytest.approx(20 * math.log10(0.5 / math.sqrt(2)), abs=1e-3)
    assert peak_db(x) == pytest.approx(20 * math.log10(0.5), abs=1e-3)
    assert rms_db(np.ones(64, np.float32)) == pytest.approx(0.0, abs=1e-9)
    assert rms_db(np.zeros(64, np.float32)) == DB_FLOOR
    assert peak_db(np.zeros(0, np.float32)) == DB_FLOOR


def test_speed_formula_is_the_seeds():
    """max_speed * (1 + level * audio_speed_boost), as `speed *= 1 + rms * audioSpeedBoost`."""
    assert speed_scale(0.0, 2.0) == 1.0
    assert speed_scale(0.5, 2.0) == 2.0
    assert speed_scale(1.0, 2.0) == 3.0
    assert speed_scale(1.0, 0.0) == 1.0
    params = Params()
    source = OfflineAudio(tone(375.0, 1.0), RATE)
    run_frames(source, 0.5)
    speed = params["max_speed"] * speed_scale(source.level, params["audio_speed_boost"])
    assert source.level > 0.99
    assert speed == pytest.approx(8.0 * (1 + source.level * 2.0))


def test_level_maps_the_dynamic_range_below_the_tracked_peak():
    settings = LevelSettings(dynamic_range_db=24.0, attack_s=0.0, release_s=0.0)
    tracker = LevelTracker(settings)
    tracker.update(-10.0, 1 / FPS)
    assert tracker.value == 1.0  # at the peak
    assert tracker.update(-22.0, 1 / FPS) == pytest.approx(0.5, abs=0.01)  # 12 dB below
    assert tracker.update(-40.0, 1 / FPS) == 0.0  # below the range


def test_auto_gain_makes_a_quiet_room_and_a_loud_club_alike():
    levels = {}
    for name, amplitude in (("room", 10 ** (-45 / 20)), ("club", 10 ** (-3 / 20))):
        # a beat: 0.25 s loud, 0.25 s at -12 dB, so the level has to swing
        beat = np.concatenate([tone(200.0, 0.25, amplitude), tone(200.0, 0.25, amplitude / 4)])
        source = OfflineAudio(np.tile(beat, 6), RATE)
        frames = run_frames(source, 3.0)
        levels[name] = [f.level for f in frames[-30:]]
    for name in levels:
        assert max(levels[name]) > 0.95, name
        # 12 dB down is 0.5 of the 24 dB range; the 0.25 s release keeps it above that
        assert 0.5 < min(levels[name]) < 0.8, name
    np.testing.assert_allclose(levels["room"], levels["club"], atol=0.02)


def test_auto_gain_settles_after_a_loud_passage():
    """After a loud burst, a quieter passage first reads low, then the tracked peak falls at
    peak_fall_db_per_s and the level settles back to full."""
    settings = LevelSettings(dynamic_range_db=24.0, peak_fall_db_per_s=2.0, release_s=0.0)
    tracker = LevelTracker(settings)
    for _ in range(FPS):
        tracker.update(-6.0, 1 / FPS)
    trace = [tracker.update(-26.0, 1 / FPS) for _ in range(15 * FPS)]
    assert trace[5] < 0.25  # 20 dB below the peak: near the bottom of the range
    after_1s = trace[FPS - 1]
    assert after_1s == pytest.approx((-26 - (-8 - 24)) / 24, abs=0.03)  # the peak fell 2 dB
    assert tracker.peak_db == pytest.approx(-26.0, abs=1e-6)  # caught up after 10 s
    assert trace[-1] == pytest.approx(1.0, abs=1e-3)
    assert all(b >= a - 1e-9 for a, b in zip(trace[5:], trace[6:]))  # rises without wobble


def test_attack_is_fast_and_release_smooth():
    tracker = LevelTracker(LevelSettings(attack_s=0.005, release_s=0.25))
    top = tracker.update(-10.0, 1 / FPS)
    assert top > 0.95  # within one frame
    fall = [tracker.update(DB_FLOOR, 1 / FPS) for _ in range(FPS)]
    assert fall[14] == pytest.approx(top * math.exp(-1), rel=1e-6)  # e^-1 after release_s
    assert fall[-1] < 0.02


def test_silence_reads_zero_and_noise_floor_stays_low():
    source = OfflineAudio(np.zeros(RATE, np.float32), RATE)
    frames = run_frames(source, 0.9)
    assert all(f.level == 0.0 and f.onsets == 0 for f in frames)
    noise = np.random.default_rng(1).normal(0, 10 ** (-75 / 20), RATE).astype(np.float32)
    frames = run_frames(OfflineAudio(noise, RATE), 0.9)
    assert frames[-1].level < 0.2  # room noise far below the auto-gain's floor


# -- bands -----------------------------------------------------------------------------------

def test_band_energy_reads_a_sines_rms():
    bands = BandAnalyzer(RATE, 2048)
    x = tone(1000.0, 0.1, 0.5)
    low, mid, high = bands.band_db(bands.spectrum(x))
    assert mid == pytest.approx(rms_db(x), abs=0.5)
    assert low < mid - 60 and high < mid - 60


@pytest.mark.parametrize("freq, loud", [(80.0, 0), (1000.0, 1), (6000.0, 2)])
def test_bands_separate_low_mid_and_high_tones(freq, loud):
    source = OfflineAudio(tone(freq, 1.0), RATE)
    frames = run_frames(source, 0.9)
    bands = frames[-1].bands
    assert bands[loud] > 0.95
    for i in range(3):
        if i != loud:
            assert bands[i] < 0.1, (freq, bands)


def test_two_tones_light_two_bands():
    mix = tone(80.0, 1.0, 0.3) + tone(6000.0, 1.0, 0.3)
    bands = run_frames(OfflineAudio(mix, RATE), 0.9)[-1].bands
    assert bands.low > 0.9 and bands.high > 0.9 and bands.mid < 0.1


# -- onsets ----------------------------------------------------------------------------------

def click_track(clicks: int, interval: float, amplitude: float, noise_db: float = -70.0,
                seed: int = 2) -> tuple[np.ndarray, list[float]]:
    rng = np.random.default_rng(seed)
    seconds = 0.3 + interval * clicks  # a lead-in while the adaptive threshold warms up
    x = rng.normal(0, 10 ** (noise_db / 20), int(seconds * RATE)).astype(np.float32)
    times = [0.3 + interval * i for i in range(clicks)]
    for t in times:
        at = int(t * RATE)
        x[at:at + 48] += amplitude * np.hanning(48).astype(np.float32)  # a 1 ms click
    return x, times


@pytest.mark.parametrize("interval", [0.31, 0.2777])  # clicks fall at every phase of a frame
@pytest.mark.parametrize("amplitude", [0.8, 0.005])  # a club, and a quiet room 24 dB over noise
def test_onsets_found_on_a_click_track(amplitude, interval):
    x, times = click_track(10, interval, amplitude)
    source = OfflineAudio(x, RATE)
    frames = run_frames(source, len(x) / RATE - 0.05)
    onset_times = [0.05 + (i + 1) / FPS for i, f in enumerate(frames) if f.onset]
    assert frames[-1].onsets == len(times) == len(onset_times)
    for click, found in zip(times, onset_times):
        assert 0 <= found - click <= 2 / FPS  # the frame that holds the click, or the next


@pytest.mark.parametrize("noise", [0.0, 0.005, 0.15])
def test_no_onsets_on_a_steady_tone(noise):
    x = tone(440.0, 3.0, 0.5) + np.random.default_rng(3).normal(0, noise, 3 * RATE)
    frames = run_frames(OfflineAudio(x.astype(np.float32), RATE), 2.9)
    assert frames[-1].onsets == 0
    assert frames[-1].level > 0.9  # it is loud, just steady


def test_no_onsets_on_tremolo_or_vibrato():
    t = np.arange(3 * RATE) / RATE
    tremolo = tone(440.0, 3.0) * (1 + 0.5 * np.sin(2 * np.pi * 4 * t))  # +-6 dB at 4 Hz
    vibrato = 0.5 * np.sin(2 * np.pi * 440 * t + 3 * np.sin(2 * np.pi * 5 * t))
    for x in (tremolo, vibrato):
        assert run_frames(OfflineAudio(x.astype(np.float32), RATE), 2.9)[-1].onsets == 0


def test_onset_envelope_jumps_to_one_and_fades_in_a_quarter_second():
    x, times = click_track(1, 1.0, 0.8)
    frames = run_frames(OfflineAudio(x, RATE), len(x) / RATE - 0.05)
    hit = next(i for i, f in enumerate(frames) if f.onset)
    assert frames[hit].onset_envelope == 1.0
    assert frames[hit].sources()["onset"] == 1.0
    assert frames[hit + 6].onset_envelope == pytest.approx(1 - 6 / FPS / 0.25, abs=1e-6)
    assert frames[hit + 15].onset_envelope == 0.0
    assert frames[hit - 1].onset_envelope == 0.0


def test_nan_and_huge_samples_do_not_poison_the_analysis():
    analyzer = Analyzer(RATE)
    bad = tone(440.0, 2048 / RATE)
    bad[::7] = np.nan
    bad[::11] = np.inf
    features = analyzer.process(bad, 1 / FPS)
    assert all(math.isfinite(v) for v in (features.rms, features.level, *features.bands))
    features = analyzer.process(tone(440.0, 2048 / RATE), 1 / FPS)
    assert math.isfinite(features.level) and features.level > 0.5


@pytest.mark.parametrize("delta", [0.03, -0.01])
def test_a_silent_frame_is_analysed_as_a_window_of_zeros(delta):
    """A source with no samples this frame (silence, a lost input) skips the arithmetic on
    zeros: the same features, frame by frame, as analysing them, from a click track's decay
    to the onsets' history (a threshold below zero finds onsets in silence too)."""
    x, _ = click_track(2, 0.25, 0.5)
    window, silence = 2048, np.zeros(2048, np.float32)
    analysed, skipped = Analyzer(RATE), Analyzer(RATE)
    for analyzer in (analysed, skipped):
        analyzer.onset_settings.delta = delta
    rng = np.random.default_rng(3)
    for end in range(window, len(x), 800):
        dt = float(rng.uniform(0.0, 1 / 30))
        assert analysed.process(x[end - window:end], dt) == skipped.process(
            x[end - window:end], dt)
    for frame in range(90):
        dt = 0.0 if frame % 7 == 3 else float(rng.uniform(0.0, 1 / 30))
        expected, got = analysed.process(silence, dt), skipped.silent(dt)
        assert got == expected, frame
    assert got.level < 0.01 and got.rms_db == DB_FLOOR  # fallen through the release
    assert (skipped.onsets.count > 2) == (delta < 0)
    features = [a.process(x[-window:], 1 / 60) for a in (analysed, skipped)]
    assert features[0] == features[1]  # and the sound after it alike


def test_offline_audio_gives_the_same_features_when_replayed():
    x, _ = click_track(3, 0.3, 0.5)
    source = OfflineAudio(np.stack([x, x], axis=1), RATE)  # stereo is mixed to mono
    first = run_frames(source, 1.0)
    second = run_frames(source, 1.0)  # going back to the start resets the analysis
    assert first == second
    assert source.duration == pytest.approx(len(x) / RATE)


# -- ring buffer ------------------------------------------------------------------------------

def test_ring_returns_the_newest_samples_across_the_wrap():
    ring = Ring(capacity=1024, max_read=256)
    stream = np.arange(6000, dtype=np.float32)
    at = 0
    out = np.empty(256, np.float32)
    for size in [100, 7, 333, 1, 600, 512, 129] * 3:
        ring.write(stream[at:at + size])
        at += size
        ring.read_newest(out)
        expected = stream[max(at - 256, 0):at]
        np.testing.assert_array_equal(out[256 - len(expected):], expected)
        assert not out[:256 - len(expected)].any()  # zeros before the first sample
    assert ring.written == at and ring.dropped == 0


def test_ring_mixes_channels_to_mono():
    ring = Ring(capacity=1024, max_read=64)
    block = np.stack([np.full(64, 0.5), np.full(64, -0.1)], axis=1).astype(np.float32)
    ring.write(block)
    out = np.empty(64, np.float32)
    ring.read_newest(out)
    np.testing.assert_allclose(out, 0.2, rtol=1e-6)


def test_ring_write_allocates_no_arrays():
    """The callback path must not allocate: a block this big would show any copy."""
    ring = Ring(capacity=1 << 17, max_read=4096)
    stereo = np.ones((40000, 2), np.float32)
    mono = np.ones(40000, np.float32)
    ring.write(stereo)  # warm up
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        for _ in range(5):  # crosses the wrap more than once
            ring.write(stereo)
            ring.write(mono)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak - before < 16_000  # one copy of a block would be 160,000 bytes or more
    assert ring.blocks == 11 and ring.dropped == 0


# -- modulation -------------------------------------------------------------------------------

def test_modulation_adds_amount_times_source_and_clamps():
    params = Params()
    routes = [Route("onset", "separation_weight", 3.0), Route("low", "cohesion_weight", -2.0),
              Route("high", "cohesion_weight", 0.5), Route("level", "max_speed", 1e9)]
    sources = {"level": 0.5, "low": 1.0, "mid": 0.0, "high": 0.4, "onset": 0.5}
    before = params.as_dict()
    values = modulate(routes, sources, params.as_dict())
    assert values == {
        "separation_weight": pytest.approx(1.5 + 3.0 * 0.5),
        "cohesion_weight": 0.0,  # 0.8 - 2 + 0.2 clamps at the bottom of the range
        "max_speed": 10000.0,  # clamped at the top
    }
    assert params.as_dict() == before  # the registry is never touched
    assert modulate([], sources, params.as_dict()) == {}
    assert modulate(routes[:1], {"onset": float("nan")}, params.as_dict()) == {
        "separation_weight": 1.5}


def test_routes_round_trip_through_json():
    routes = [Route("onset", "separation_weight", 3.0), Route("mid", "alignment_weight", -0.5)]
    text = json.dumps(routes_to_json(routes))
    assert routes_from_json(json.loads(text)) == routes


@pytest.mark.parametrize("data, named", [
    ({"source": "onset", "param": "separation_weight", "amount": 1, "gain": 2}, "'gain'"),
    ({"source": "onset", "param": "separation_weight"}, "'amount'"),
    ({"source": "kick", "param": "separation_weight", "amount": 1}, "'source'"),
    ({"source": "onset", "param": "separation", "amount": 1}, "'param'"),
    ({"source": "onset", "param": "sepration_weight", "amount": 1}, "sepration_weight"),
    ({"source": "onset", "param": "count", "amount": 1}, "'count'"),
    ({"source": "onset", "param": "max_speed", "amount": float("inf")}, "'amount'"),
    ({"source": "onset", "param": "max_speed", "amount": "2"}, "'amount'"),
    (["onset", "max_speed", 1], "a route is an object"),
])
def test_bad_routes_name_the_bad_key(data, named):
    with pytest.raises(RouteError) as error:
        routes_from_json([{"source": "level", "param": "max_speed", "amount": 1}, data])
    assert named in str(error.value)
    assert "routes[1]" in str(error.value)
