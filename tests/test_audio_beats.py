"""Beat tracking (audio/analysis/beats.py): synthesised click tracks and drum loops at 90, 120, 128
and 174 BPM, through a real JACK port into the live input's worker process and offline, frame by
frame, as a render reads a song.

Through JACK: one player client (tests/jackd.py's SignalPlayer) plays four recordings at once
(the click tracks, then the drum loops), each into its own AudioInput (its own worker process
and ring), while a 60 fps loop updates all four, the server cycling every 2048 frames (see
JACK_PERIOD: the dummy server's clock must keep time with ours for the clicks' times to be
right; a run whose server clock slips more than 0.3 % is played again); the tempo must be within 1
BPM after 8 s and the beats within 30 ms of the clicks (of the grid at the level read). At 174
both 174 and 87 are accepted (drum and bass in half time: the beats on every other click). The
90 BPM drum loop, whose eighth hats are as loud on the off-beat as on the beat (in onset strength),
must read 90: its off-beat hats are 12-13 dB under the kick and snare (tempo_estimate.alternation).
The module starts its own JACK server and fails, never skips, without jackd.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from swarm_instrument.audio.analysis.beat_feed import RingBeatFeed
from swarm_instrument.audio.analysis.beats import BeatInfo, BeatTracker
from swarm_instrument.audio.base import OfflineAudio, Silence
from swarm_instrument.audio.input.live_input import AudioInput
from swarm_instrument.audio.input.ring import Ring

from jackd import RATE, SignalPlayer

ROOT = Path(__file__).resolve().parent.parent
FRAME = 1 / 60
TEMPI = (90.0, 120.0, 128.0, 174.0)
START = 0.25  # the first beat, seconds into a recording


# -- synthesised music ------------------------------------------------------------------------

def _place(x: np.ndarray, at: float, sound: np.ndarray) -> None:
    start = int(round(at * RATE))
    if start < len(x):
        end = min(len(x), start + len(sound))
        x[start:end] += sound[:end - start]


def click_track(bpm: float, seconds: float) -> tuple[np.ndarray, np.ndarray]:
    """A metronome: a 1 kHz click (5 ms decay) on every beat from START; the clicks' first
    samples with it."""
    t = np.arange(int(0.03 * RATE)) / RATE
    click = (0.8 * np.sin(2 * np.pi * 1000 * t) * np.exp(-t / 0.005)).astype(np.float32)
    x = np.zeros(int(seconds * RATE), np.float32)
    beats = np.arange(START, seconds - 0.03, 60.0 / bpm)
    for at in beats:
        _place(x, at, click)
    return x, np.round(beats * RATE).astype(np.int64)


def drum_loop(bpm: float, seconds: float, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Kick on 1 and 3 (and a ghost kick before 4), snare on 2 and 4, hats on the eighths;
    the beats' first samples with it."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(0.25 * RATE)) / RATE
    kick = (0.9 * np.sin(2 * np.pi * (50 * t + 1.8 * (1 - np.exp(-t / 0.03))))
            * np.exp(-t / 0.12)).astype(np.float32)
    ts = t[:int(0.2 * RATE)]
    snare = (0.5 * rng.standard_normal(len(ts)) * np.exp(-ts / 0.06)
             + 0.3 * np.sin(2 * np.pi * 190 * ts) * np.exp(-ts / 0.05)).astype(np.float32)
    th = t[:int(0.05 * RATE)]
    hat = (0.15 * np.diff(rng.standard_normal(len(th) + 1)) * np.exp(-th / 0.012)
           ).astype(np.float32)
    x = np.zeros(int(seconds * RATE), np.float32)
    period = 60.0 / bpm
    beats = np.arange(START, seconds, period)
    for k, at in enumerate(beats):
        _place(x, at, kick if k % 2 == 0 else snare)
        if k % 4 == 2:
            _place(x, at + 0.75 * period, 0.6 * kick)
        _place(x, at, hat)
        _place(x, at + period / 2, hat)
    return x, np.round(beats * RATE).astype(np.int64)


def accepted_bpm(bpm: float) -> set[float]:
    """The tempo levels accepted: 174 or 87 at 174 (drum and bass), the tempo itself else."""
    return {bpm, bpm / 2} if bpm == 174.0 else {bpm}


def beat_events(infos: list[tuple[float, BeatInfo | None]]) -> list[tuple[float, float]]:
    """(frame time, beat time) of each frame whose count passed a whole beat: the beat's time
    is where the count was whole, at this frame's tempo."""
    events, previous = [], None
    for now, info in infos:
        if info is not None and previous is not None and \
                math.floor(info.beat) > math.floor(previous.beat):
            events.append((now, info.at - (info.beat % 1.0) * 60.0 / info.bpm))
        previous = info
    return events


def nearest(times: np.ndarray, at: float) -> tuple[int, float]:
    i = int(np.argmin(np.abs(times - at)))
    return i, at - float(times[i])


# -- through a real JACK port -----------------------------------------------------------------

# Cycles of 2048 frames (43 ms): at 256 the dummy server's clock fell behind ours by 0.5-7 %
# on two cores with the player and the inputs' workers each taking a cycle (its cycles ran late
# and were never made up, so the clicks went out later than their samples say); at 2048 it
# kept time within 0.01 %. The inputs then get 43 ms blocks, as a large audio buffer gives.
JACK_PERIOD = 2048


@pytest.fixture(scope="module")
def jack_period() -> int:
    """The module's JACK server (the `jack` fixture) runs cycles of JACK_PERIOD."""
    return JACK_PERIOD


MAX_CLOCK_SLIP = 0.003  # the dummy server's cycles against time.monotonic(): 0.3 %
ATTEMPTS = 3


def server_slip(player: SignalPlayer) -> float:
    """How far the JACK server's cycles ran slower than their nominal period, as a fraction:
    the line through the earliest cycles of each second (callbacks run late, never early)."""
    times = player.cycle_times
    played = np.flatnonzero(~np.isnan(times))
    period = player.period / player.rate
    per_second = max(1, round(1.0 / period))
    lows = [(k[np.argmin(times[k] - k * period)]) for k in
            np.array_split(played, max(1, len(played) // per_second))]
    lows = np.array(lows)
    slope = np.polyfit(lows, times[lows], 1)[0]
    return slope / period - 1.0


def play_through_jack(jack: str, recordings: list[np.ndarray]):
    """The recordings played at once, each into its own AudioInput (its own worker process
    and ring), updated at 60 fps: (the player, what each source's beat_info was each frame,
    the cost of an update, blocks dropped). A run in which the dummy server's clock fell
    behind time.monotonic() (its cycles late, a loaded machine: the clicks' times would be
    wrong, not the tracker) is played again, up to ATTEMPTS times."""
    for attempt in range(ATTEMPTS):
        sources: list[AudioInput] = []
        try:
            with SignalPlayer(jack, recordings) as player:
                for index in range(len(recordings)):
                    before = set(player.input_ports())
                    source = AudioInput(None)
                    sources.append(source)
                    assert source.state == "ok", source.message
                    ports = sorted(set(player.input_ports()) - before)
                    assert len(ports) == 2, ports  # the worker's stream: two channels
                    for port in ports:
                        player.connect(index, port)
                infos: list[list[tuple[float, BeatInfo | None]]] = [[] for _ in recordings]
                costs = []
                player.play()
                deadline = time.monotonic()
                while not player.done:
                    deadline += FRAME
                    time.sleep(max(0.0, deadline - time.monotonic()))
                    now = time.monotonic()
                    for source, seen in zip(sources, infos):
                        source.update(now)
                        seen.append((now, source.beat_info))
                    costs.append((time.monotonic() - now) / len(sources))
                dropped = [s.telemetry()["blocks_dropped"] for s in sources]
        finally:
            for source in sources:
                source.close()
        slip = server_slip(player)
        if abs(slip) <= MAX_CLOCK_SLIP:
            return player, infos, costs, dropped
        print(f"the JACK dummy server's clock slipped {slip:+.2%} against ours: "
              "played again")
    pytest.fail(f"the JACK dummy server's clock slipped {slip:+.2%} against time.monotonic() "
                f"in {ATTEMPTS} runs: the machine is too loaded to time the beats")


def judge(kind: str, bpm: float, beats: np.ndarray, seen, player: SignalPlayer
          ) -> tuple[str, list[str]]:
    """One recording's line of figures, and what is wrong with it (nothing: [])."""
    started = player.heard_at(0)
    clicks = player.heard_at(beats)
    targets = accepted_bpm(bpm)
    late = [info for now, info in seen if now - started >= 8.0]
    tempi = [info.bpm for info in late if info is not None]
    level = min(targets, key=lambda t: abs(t - statistics.median(tempi or [bpm])))
    errors, spans = [], []
    last_click = None
    for _, at in beat_events(seen):
        if at - started < 6.5:
            continue  # the first estimates settle by 4 s, the phase by 6.5: beats are
            # judged from there, the tempo at 8 s
        click, error = nearest(clicks, at)
        errors.append(error * 1000.0)
        if last_click is not None:
            spans.append(click - last_click)
        last_click = click
    line = (f"{kind} {bpm:g} BPM: {min(tempi):.2f}..{max(tempi):.2f} BPM after 8 s "
            f"(read at {level:g}); beats - clicks: mean "
            f"{statistics.mean(errors):+.1f} ms, {min(errors):+.1f}..{max(errors):+.1f} ms "
            f"over {len(errors)} beats; confidence {late[-1].confidence:.2f}")
    failures = []
    if len(tempi) != len(late) or not all(abs(b - level) <= 1.0 for b in tempi):
        failures.append(f"{kind} {bpm:g}: tempo {tempi[:3]}..{tempi[-3:]} of {len(late)}")
    step = max(1, round(bpm / level))  # clicks (of the grid) from one beat to the next
    if len(errors) < 4 or max(abs(e) for e in errors) > 30.0 or not set(spans) <= {step}:
        failures.append(f"{kind} {bpm:g}: beat errors {errors}, clicks apart {spans}")
    return line, failures


def test_beats_through_jack_within_1_bpm_and_30_ms(jack, monkeypatch):
    """Each group of four is played (and judged) up to ATTEMPTS times: a VM's scheduler now
    and then stalls the dummy server and the 60 fps loop together for tens of milliseconds,
    which moves one beat of every recording playing at the time (3 of 4 drum loops a beat
    30.3-30.6 ms early in one CI-like run, where the rest of their beats were within 15 ms); a
    tracker that is wrong is wrong every time. Replays are said."""
    seconds = 10.5
    fed_from: set[str] = set()
    feed = BeatTracker.feed

    def watched(self: BeatTracker, samples: np.ndarray) -> None:
        fed_from.add(threading.current_thread().name)
        feed(self, samples)

    monkeypatch.setattr(BeatTracker, "feed", watched)
    lines, failures, costs = [], [], []
    for kind in ("clicks", "drums"):  # four inputs at a time: what two cores keep in time
        group = [(kind, bpm) for bpm in TEMPI]
        made = [(click_track if kind == "clicks" else drum_loop)(bpm, seconds)
                for _, bpm in group]
        for attempt in range(ATTEMPTS):
            player, seen, cost, lost = play_through_jack(jack, [x for x, _ in made])
            assert lost == [0] * len(group)
            judged = [judge(kind, bpm, beats, infos, player)
                      for (_, bpm), (_, beats), infos in zip(group, made, seen)]
            wrong = [f for _, found in judged for f in found]
            if not wrong:
                break
            print(f"{kind}, attempt {attempt + 1}: {wrong}; played again")
        lines += [line for line, _ in judged]
        failures += wrong
        costs += cost
    assert fed_from == {threading.main_thread().name}
    print(f"\nbeats through JACK, four inputs at once, 60 fps: update() median "
          f"{statistics.median(costs) * 1000:.2f} ms, max {max(costs) * 1000:.2f} ms a "
          "source\n" + "\n".join(lines))
    assert not failures, failures


# -- offline, as a render reads a song --------------------------------------------------------

def run_offline(samples: np.ndarray, fps: float) -> list[tuple[float, BeatInfo | None]]:
    audio = OfflineAudio(samples, RATE, "song")
    seen = []
    for index in range(int(len(samples) / RATE * fps)):
        t = index / fps
        audio.update(t)
        seen.append((t, audio.beat_info))
    return seen


def test_offline_beats_land_on_the_song_and_repeat_exactly():
    """A render's tracker over a 128 BPM drum loop: on tempo and on the beats in song time,
    the same at every frame rate (the tracker's hops do not depend on how the samples came)
    and in every run."""
    samples, beats = drum_loop(128.0, 12.0)
    at_60, at_30 = run_offline(samples, 60.0), run_offline(samples, 30.0)
    assert at_60 == run_offline(samples, 60.0)  # deterministic: BeatInfo compares by value
    common = dict(at_60)
    # the same beats at 30 fps: the count moves towards the predicted beat, held where a
    # prediction moved back, so frames see it within a hundredth of a beat (the tempo to
    # float32 rounding: a frame's hops are analysed in one batch)
    assert all(abs(info.beat - common[t].beat) < 0.01 and abs(info.bpm - common[t].bpm) < 1e-3
               for t, info in at_30 if t in common and info is not None)
    late = [info for t, info in at_60 if t >= 8.0]
    assert late and all(info is not None and abs(info.bpm - 128.0) <= 1.0 for info in late)
    clicks = beats / RATE
    errors = [nearest(clicks, at)[1] for _, at in beat_events(at_60) if at >= 4.0]
    assert len(errors) >= 15 and max(abs(e) for e in errors) < 0.030, errors


def test_silence_gives_no_beats_and_the_tempo_holds():
    from swarm_instrument.control.musical_time.tempo import Tempo
    from swarm_instrument.show.inputs.beat_clock import AudioTempo

    clicks, _ = click_track(120.0, 8.0)
    samples = np.concatenate([clicks, np.zeros(4 * RATE, np.float32)])
    audio = OfflineAudio(samples, RATE, "song")
    tempo = Tempo([AudioTempo(audio)])
    seen = []
    for index in range(int(12.0 * 30)):
        t = index / 30
        audio.update(t)
        tempo.update(t)
        seen.append((t, audio.beat_info, tempo.bpm, tempo.source, tempo.held))
    assert all(info is not None for t, info, *_ in seen if 6.0 <= t < 8.0)
    # the last click at 7.75 s, beats heard for 1 s after the sound, none for 2 s: gone by 11
    assert all(info is None for t, info, *_ in seen if t >= 11.0)
    t, _, bpm, source, held = seen[-1]
    assert abs(bpm - 120.0) <= 1.0 and held, seen[-1]  # the last tempo holds, said as held
    assert Silence().beat_info is None
    Silence().update(1.0)


# -- the feed: every sample in order, never a stalled frame -----------------------------------

class CountingTracker:
    """A tracker that only counts: what the feed gave and what it skipped."""

    rate = float(RATE)

    def __init__(self) -> None:
        self.fed: list[np.ndarray] = []
        self.skipped = 0

    def feed(self, samples: np.ndarray) -> None:
        self.fed.append(samples.copy())

    def skip(self, count: int) -> None:
        self.skipped += count

    def info(self, at: float) -> None:
        return None


def test_the_feed_reads_every_sample_once_in_order():
    ring, tracker = Ring(1 << 15), CountingTracker()
    feed = RingBeatFeed(tracker)
    signal = np.arange(20000, dtype=np.float32)
    now = 0.0
    for start in range(0, len(signal), 480):  # 10 ms blocks, a frame every other block
        ring.write(signal[start:start + 480, None])
        if (start // 480) % 2:
            now += 0.02
            feed.update(ring, now)
    feed.update(ring, now + 0.02)
    assert np.array_equal(np.concatenate(tracker.fed), signal) and tracker.skipped == 0


def test_a_stalled_frame_skips_ahead_instead_of_catching_up_for_seconds():
    ring, tracker = Ring(1 << 18), CountingTracker()
    feed = RingBeatFeed(tracker, max_s=1.0)
    ring.write(np.ones((480, 1), np.float32))
    feed.update(ring, 0.01)
    for _ in range(400):  # 4 s of blocks while the frame loop hangs
        ring.write(np.full((480, 1), 2.0, np.float32))
    feed.update(ring, 4.01)
    fed = sum(len(chunk) for chunk in tracker.fed)
    assert fed == 480 + RATE  # the newest second only
    assert tracker.skipped == 400 * 480 - RATE == feed.skipped
    assert 480 + 400 * 480 == fed + tracker.skipped  # the count of samples stays right


def test_samples_overwritten_before_the_read_are_skipped_not_trusted():
    ring, tracker = Ring(1 << 14, max_read=1024), CountingTracker()
    feed = RingBeatFeed(tracker, max_s=10.0)  # the ring, not the stall cap, runs out
    feed.update(ring, 0.0)
    for i in range(100):  # 48,000 samples into a ring of 16,384
        ring.write(np.full((480, 1), float(i), np.float32))
    feed.update(ring, 0.001)
    fed = np.concatenate(tracker.fed)
    assert len(fed) + tracker.skipped == 48000
    assert len(fed) <= (1 << 14) and fed[-1] == 99.0
    # what was fed is the ring's newest, unbroken: blocks in order, none half overwritten
    assert np.all(np.diff(fed) >= 0)
    assert np.all(np.bincount(fed.astype(int))[int(fed[0]) + 1:] == 480)


def test_time_without_samples_counts_as_a_gap():
    """A worker restarted after a second: the samples that never came are counted, so the
    beats after the gap keep their time."""
    ring, tracker = Ring(1 << 16), CountingTracker()
    feed = RingBeatFeed(tracker)
    now = 0.0
    for _ in range(50):  # 0.5 s of audio, read each 10 ms as it comes
        ring.write(np.zeros((480, 1), np.float32))
        now += 0.01
        feed.update(ring, now)
    now += 1.0  # nothing arrives for a second
    for _ in range(50):
        ring.write(np.zeros((480, 1), np.float32))
        now += 0.01
        feed.update(ring, now)
    assert tracker.skipped == pytest.approx(RATE, abs=2 * 480)


# -- a render in time -------------------------------------------------------------------------

@pytest.mark.slow  # a song rendered
def test_a_render_pulses_on_the_songs_beats(tmp_path):
    """--render over a 128 BPM drum loop with a `beat` route: from 6 s on, the routed
    parameter peaks on the frame of each beat of the song, within one frame, and the tempo
    comes from the audio."""
    import io

    from swarm_instrument import instrument
    from swarm_instrument.audio.files.wav_writer import write_wav
    from swarm_instrument.control.parameters.modulation import Route
    from swarm_instrument.show.cli.options import options_from_args
    from swarm_instrument.show.offline.offline_render import render
    from swarm_instrument.show.offline.progress import Progress
    from swarm_instrument.show.offline.render_job import plan_render

    fps, seconds = 30, 10.0
    samples, beats = drum_loop(128.0, seconds)
    song = tmp_path / "song.wav"
    write_wav(song, np.stack([samples, samples], axis=1), RATE)
    args = instrument.build_parser().parse_args([
        "--render", str(song), "--out", str(tmp_path / "out.mp4"), "--fps", str(fps),
        "--size", "96x54", "--count", "500"])
    params, _, *_ = instrument.build_params(args)
    job, _ = plan_render(args, params, [])
    seen = []

    def observe(show, index, t):
        seen.append((t, show.modulated["cohesion_weight"] - show.params["cohesion_weight"],
                     show.tempo.source, show.tempo.bpm))

    render(job, params, options_from_args(args, params, render=True),
           [Route("beat", "cohesion_weight", 0.5)], observe=observe,
           progress=Progress(job.frames, io.StringIO()))
    late = [s for s in seen if s[0] >= 6.0]
    assert all(source == "audio" and abs(bpm - 128.0) <= 1.0 for _, _, source, bpm in late)
    times = np.array([t for t, *_ in late])
    pulse = np.array([p for _, p, *_ in late])
    period = 60.0 / 128.0
    offsets = []
    for click in beats / RATE:
        window = (times > click - period / 2) & (times <= click + period / 2)
        if times[0] <= click - period / 2 and click + period / 2 <= times[-1]:
            peak = times[window][np.argmax(pulse[window])]
            offsets.append(peak - click)
    print(f"\nbeat pulse peaks - clicks: {[round(o * 1000) for o in offsets]} ms")
    assert len(offsets) >= 7 and all(abs(o) < 1.0 / fps for o in offsets), offsets


def test_the_beats_benchmark_runs(tmp_path):
    import json
    import subprocess
    import sys

    out = tmp_path / "beats.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_beats.py"), "--seconds",
                           "12", "--json", str(out)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert result["frames"] == pytest.approx(12 * 60, abs=2)
    assert abs(result["bpm"] - 128.0) <= 1.0 and 0 < result["median_ms"] <= result["max_ms"]
    assert "beat tracking" in done.stdout
