"""MIDI clock in: MidiClock's tempo and beat from synthetic pulse times (steady, jittered, a tempo
change, stop / continue / start, song position, a cable pulled mid-song), the arrival times
MidiInput gives messages read once a frame, Midi routing system messages to its clock, and
the whole path over real JACK MIDI ports with a second client sending clock at 125 BPM.

The JACK test starts its own jackd (tests/midi_jack.py); a missing jackd fails it, as in
test_midi_jack.py.
"""

from __future__ import annotations

import random
import time
import uuid

import pytest
from test_midi_input import NANO, alsa  # noqa: F401 - the fake ALSA fixture

from swarm_instrument.control.midi.midi_in import DEFAULT_MAPPING, Midi
from swarm_instrument.control.midi.ports import MidiInput
from swarm_instrument.control.midi.timeline import PortTimeline
from swarm_instrument.control.musical_time.midi_clock import VANISH_S, MidiClock
from swarm_instrument.control.musical_time.tempo import Tempo, TempoReading
from swarm_instrument.control.parameters.registry import Params

from midi_jack import Sender

FPS = 60.0
CLOCK, START, CONTINUE, STOP = b"\xf8", b"\xfa", b"\xfb", b"\xfc"


def song_position(sixteenths: int) -> bytes:
    return bytes([0xF2, sixteenths & 0x7F, sixteenths >> 7])


def pulse_times(bpm: float, start: float, seconds: float, jitter: float = 0.0,
                seed: int = 0) -> list[float]:
    """A clock's pulses from `start` for `seconds`, each moved up to ±jitter at random."""
    interval, rng = 60.0 / (24 * bpm), random.Random(seed)
    count = int(seconds / interval)
    return [start + i * interval + rng.uniform(-jitter, jitter) for i in range(count)]


class Frames:
    """The show's side: messages handed to the clock as a frame drains them, then one
    reading a frame (at 60 fps), as Midi.update and Tempo.update do."""

    def __init__(self, clock: MidiClock, now: float = 0.0) -> None:
        self.clock, self.now = clock, now
        self.tempo = Tempo([clock])
        self.pending: list[tuple[float, bytes]] = []
        self.readings: list[tuple[float, TempoReading | None]] = []

    def send(self, when: float, message: bytes) -> None:
        self.pending.append((when, message))

    def pulses(self, times: list[float]) -> None:
        self.pending += [(t, CLOCK) for t in times]

    def until(self, end: float) -> list[tuple[float, TempoReading | None]]:
        """Frames up to `end`; the readings they took."""
        self.pending.sort(key=lambda item: item[0])
        taken = []
        while self.now + 1.0 / FPS <= end:
            self.now += 1.0 / FPS
            while self.pending and self.pending[0][0] <= self.now:
                when, message = self.pending.pop(0)
                self.clock.handle(message, when)
            reading = self.clock.reading(self.now)
            self.tempo.update(self.now)
            taken.append((self.now, reading))
        self.readings += taken
        return taken


def beats(readings: list[tuple[float, TempoReading | None]]) -> list[float]:
    return [reading.beat_at(now) for now, reading in readings if reading is not None]


def never_back(values: list[float]) -> bool:
    return all(later >= earlier for earlier, later in zip(values, values[1:]))


# ----- MidiClock, synthetic times -----

def test_a_steady_clock_gives_its_tempo_and_a_beat_each_24_pulses():
    clock = MidiClock()
    assert clock.reading(0.0) is None  # nothing heard
    frames = Frames(clock)
    frames.send(0.5, START)
    frames.pulses(pulse_times(125.0, 0.51, 4.0))
    readings = frames.until(4.0)
    late = [r for now, r in readings if now > 0.75]
    assert all(r.bpm == pytest.approx(125.0, abs=1e-6) for r in late)
    assert all(r.running and r.source == "midi clock" for r in late)
    # beat 0 at the first pulse after start, 1/24 a pulse, between pulses at the tempo
    for now, reading in readings:
        if reading is not None and now > 0.6:
            assert reading.beat_at(now) == pytest.approx((now - 0.51) * 125 / 60, abs=1e-6)
    assert never_back(beats(readings))
    assert frames.tempo.source == "midi clock" and frames.tempo.bpm == pytest.approx(125.0)
    assert clock.state()["running"] and clock.state()["bpm"] == pytest.approx(125.0)


def test_two_ms_of_jitter_costs_less_than_a_fifth_of_a_bpm():
    clock, worst = MidiClock(), 0.0
    frames = Frames(clock)
    frames.pulses(pulse_times(120.0, 0.0, 12.0, jitter=0.002, seed=15))
    for now, reading in frames.until(12.0):
        if now > 2.0:  # four beats in: a full window
            worst = max(worst, abs(reading.bpm - 120.0))
            assert reading.beat_at(now) == pytest.approx(now * 2.0, abs=0.01)  # the phase
    assert worst < 0.2, worst
    assert clock.changes == 0  # jitter is never taken for a tempo change
    assert never_back(beats(frames.readings))


def test_late_pulses_are_outliers_not_a_tempo():
    times = pulse_times(100.0, 0.0, 8.0, jitter=0.001, seed=3)
    times[200] += 0.012  # a pulse 12 ms late
    for i in range(300, 303):  # three held up, arriving together
        times[i] = times[303] - 0.0001 * (303 - i)
    frames = Frames(MidiClock())
    frames.pulses(times)
    late = [r.bpm for now, r in frames.until(8.0) if now > 2.5]
    assert max(abs(bpm - 100.0) for bpm in late) < 0.2


def test_a_tempo_change_is_followed_within_two_beats():
    clock = MidiClock()
    frames = Frames(clock)
    first = pulse_times(120.0, 0.0, 4.0, jitter=0.002, seed=1)
    second = [first[-1] + 60 / (24 * 132) * (i + 1) + random.Random(i).uniform(-0.002, 0.002)
              for i in range(24 * 12)]
    frames.pulses(first + second)
    change = first[-1]
    readings = frames.until(second[-1])
    assert all(abs(r.bpm - 120.0) < 0.2 for now, r in readings if 2.0 < now < change)
    after = [r.bpm for now, r in readings if now > change + 2 * 60 / 132]  # two beats on
    assert max(abs(bpm - 132.0) for bpm in after) < 0.2
    assert all(119.0 < r.bpm < 133.0 for _, r in readings if r is not None)
    assert clock.changes >= 1
    assert never_back(beats(readings))


def test_stop_holds_the_beat_and_the_tempo_continue_goes_on_start_goes_back_to_zero():
    clock = MidiClock()
    frames = Frames(clock)
    frames.send(0.99, START)
    frames.pulses(pulse_times(120.0, 1.0, 9.0))  # the DAW sends clock throughout
    frames.until(3.0)
    frames.send(3.001, STOP)
    stopped = frames.until(4.0)
    held = stopped[-1][1]
    assert not held.running and held.bpm == pytest.approx(120.0)
    assert held.beat == pytest.approx(4.0, abs=1 / 24)  # two seconds at 120
    assert len({r.beat_at(now) for now, r in stopped if now > 3.02}) == 1  # it does not move
    assert frames.tempo.beat == pytest.approx(frames.tempo.beat)  # Tempo holds it too
    frames.send(4.0, CONTINUE)
    resumed = frames.until(5.0)
    assert all(r.running for now, r in resumed)
    assert resumed[-1][1].beat_at(5.0) == pytest.approx(held.beat + 2.0, abs=1 / 24)
    assert never_back(beats(stopped + resumed))
    frames.send(5.5, START)
    restarted = frames.until(6.0)
    assert restarted[-1][1].beat_at(6.0) == pytest.approx(0.98, abs=0.03)  # from the pulse at 5.5+
    assert min(beats(restarted)[-20:]) < 1.0


def test_a_stop_with_the_clock_gone_stays_a_stop():
    frames = Frames(MidiClock())
    frames.pulses(pulse_times(90.0, 0.0, 2.0))
    frames.send(2.0, STOP)
    readings = frames.until(10.0)  # and no pulse after
    assert readings[-1][1] is not None and not readings[-1][1].running
    assert readings[-1][1].bpm == pytest.approx(90.0)


def test_song_position_moves_the_beat_while_stopped():
    clock = MidiClock()
    frames = Frames(clock)
    frames.send(0.0, START)
    times = pulse_times(120.0, 0.01, 2.0)
    frames.pulses(times)
    frames.until(1.0)
    frames.send(1.0, STOP)
    frames.send(1.1, song_position(200))  # 200 sixteenths: beat 50 (two bytes, 7 bits each)
    (now, reading), = frames.until(1.2)[-1:]
    assert not reading.running and reading.beat == 50.0
    frames.send(1.3, CONTINUE)
    frames.until(1.35)
    first = next(t for t in times if t > 1.3)  # the first pulse after continue is beat 50
    assert clock.reading(1.35).beat == pytest.approx(50.0 + (1.35 - first) * 2.0)
    clock.handle(bytes([0xF2, 0x80, 0]), 1.4)  # malformed: ignored
    clock.handle(bytes([0xF2, 1]), 1.4)
    assert clock.reading(1.4).beat > 50.0


def test_a_cable_pulled_mid_song_holds_the_tempo_and_the_count_goes_on():
    clock = MidiClock()
    frames = Frames(clock)
    daw = pulse_times(128.0, 0.0, 12.0, jitter=0.001, seed=7)  # the DAW plays on
    frames.send(0.0, START)
    frames.pulses([t for t in daw if not 5.0 < t < 8.0])  # the cable out for three seconds
    readings = frames.until(12.0)
    gone = [r for now, r in readings if 5.0 + VANISH_S + 0.02 < now < 8.0]
    assert gone and all(r is None for r in gone)  # Tempo holds meanwhile...
    tempo_beats = []
    frames2 = Frames(MidiClock())  # the same, through Tempo: no jump when it comes back
    frames2.send(0.0, START)
    frames2.pulses([t for t in daw if not 5.0 < t < 8.0])
    previous = None
    while frames2.now < 12.0 - 1 / FPS:
        frames2.until(frames2.now + 1 / FPS)
        tempo = frames2.tempo
        if 5.6 < frames2.now < 8.0:
            assert tempo.held and tempo.bpm == pytest.approx(128.0, abs=0.2)
        if previous is not None:
            assert 0.0 <= tempo.beat - previous < 0.1  # never back, never a leap
        previous = tempo.beat
        tempo_beats.append((frames2.now, tempo.beat))
    start_beat = tempo_beats[0][1] - tempo_beats[0][0] * 128 / 60
    now, beat = tempo_beats[-1]
    assert beat - start_beat == pytest.approx(now * 128 / 60, abs=0.05)  # still on the DAW's grid
    assert not frames2.tempo.held and frames2.tempo.source == "midi clock"


def test_other_messages_and_a_flood_cost_little():
    clock = MidiClock()
    for message in (b"", b"\xfe", b"\xff", b"\xf1\x10", b"\xf3\x01", bytes([0xF2])):
        clock.handle(message, 1.0)
    clock.handle(CLOCK, float("nan"))
    assert clock.pulses == 0 and clock.reading(1.0) is None
    began = time.thread_time()  # CPU time: the work, whatever else the machine runs
    for t in pulse_times(140.0, 0.0, 4096 / (24 * 140 / 60)):  # 4096 pulses, one frame's drain
        clock.handle(CLOCK, t)
    clock.reading(30.0)
    assert time.thread_time() - began < 0.5  # about 40 ms here; a bound for slow machines


# ----- arrival times and routing -----

def test_messages_read_once_a_frame_keep_their_spacing():
    """Pulses every 20 ms read once a frame (16.7 ms and a little more, some frames late):
    placed from rtmidi's deltas they keep their spacing once the offset settled (within a
    millisecond of when they came), where the read's own time is up to a frame off."""
    timeline, rng = PortTimeline(), random.Random(5)
    pulses = [1.0 + 0.02 * i for i in range(200)]
    placed, came, read_late, read, last = [], [], [], 1.0, None
    while read < pulses[-1]:
        read += 1 / FPS + rng.uniform(0.0, 0.003) + (0.02 if rng.random() < 0.1 else 0.0)
        batch = [t for t in pulses if (last is None or t > last) and t <= read]
        previous = [last if last is not None else batch[0]] + batch if batch else []
        deltas = [t - before for before, t in zip(previous, batch)]  # the first: 0
        placed += timeline.place(deltas, read)
        came += batch
        read_late += [read - t for t in batch]
        last = batch[-1] if batch else last
    assert len(placed) == len(came) == 200
    spacing = [b - a for a, b in zip(placed, placed[1:])]
    # while the offset settles it only moves down, by less than a frame's jitter at a time
    assert all(0.02 - 0.004 < gap <= 0.02 + 1e-9 for gap in spacing[:50])
    assert sum(abs(gap - 0.02) > 1e-9 for gap in spacing[50:]) <= 3  # the offset settled
    assert all(0.0 <= p - t < 1e-3 for p, t in zip(placed[50:], came[50:]))
    assert max(read_late) > 0.015  # what stamping with the read's time would have cost


def test_a_timeline_that_drifts_is_pulled_back_inside_its_bounds():
    timeline = PortTimeline()
    assert timeline.place([0.0], 10.0) == [10.0]
    # 0.5 s of deltas lost (rtmidi stamped a message we never saw): read at 11.0, the message
    # would be at 10.5, before the read at 10.0 emptied the queue? no: after it, so it stays
    assert timeline.place([0.5], 11.0) == [10.5]
    timeline.place([], 11.5)
    (when,) = timeline.place([0.2], 12.0)  # 10.7 would be before the last read (11.5)
    assert 11.5 <= when <= 12.0


def test_midi_input_times_messages_and_drops_active_sensing(alsa):  # noqa: F811
    alsa.ports = [f"{NANO} 24:0"]
    source = MidiInput(api="alsa", report=lambda text: None)
    port = alsa.listening[f"{NANO} 24:0"]
    port.queue += [([0xF8], 0.0), ([0xFE], 0.1), ([0xF8], 0.2), ([0xB0, 70, 1], 0.05)]
    messages = source.drain()
    assert [m for m, _ in messages] == [CLOCK, CLOCK, bytes([0xB0, 70, 1])]
    times = [when for _, when in messages]
    assert times[1] - times[0] == pytest.approx(0.3)  # active sensing's delta still counts
    assert times[2] - times[1] == pytest.approx(0.05)
    assert times[2] <= time.perf_counter()
    source.close()


class FakeSource:
    def __init__(self) -> None:
        self.queued: list[tuple[bytes, float]] = []

    def poll(self, now: float) -> None:
        pass

    def drain(self) -> list[tuple[bytes, float]]:
        queued, self.queued = self.queued, []
        return queued

    def status(self) -> dict:
        return {"api": "fake", "ports_open": ["fake:out"], "state": "MIDI FAKE: fake:out"}

    def close(self) -> None:
        pass


def test_midi_sends_system_messages_to_its_clock_and_the_rest_to_the_mapping():
    source = FakeSource()
    midi = Midi(Params(), source, mapping_path=DEFAULT_MAPPING, save_path=None,
                report=lambda text: None)
    source.queued = [(START, 0.0)] + [(CLOCK, 0.01 + i / 48) for i in range(48)] + \
        [(bytes([0xB0, 70, 64]), 0.5), (bytes([0xF0, 1, 0xF7]), 0.6)]
    midi.update(1.0)
    state = midi.state()
    assert state["messages"] == 2 and state["last_message"] == "sysex (3 bytes)"
    assert state["clock"]["pulses"] == 48 and state["clock"]["running"]
    assert midi.clock.reading(1.0).bpm == pytest.approx(120.0)


# ----- over JACK -----

class LiveFrames:
    """The show's frame step at 60 fps on the wall clock: Midi.update, then Tempo."""

    def __init__(self, midi: Midi) -> None:
        self.midi, self.tempo = midi, Tempo([midi.clock])
        self.next = time.perf_counter()

    def run(self, seconds: float) -> list[tuple[float, TempoReading | None]]:
        taken, end = [], time.perf_counter() + seconds
        while self.next < end:
            self.next += 1 / FPS
            time.sleep(max(self.next - time.perf_counter(), 0.0))
            now = time.perf_counter()
            self.midi.update(now)
            self.tempo.update(now)
            taken.append((now, self.midi.clock.reading(now)))
        return taken


def test_clock_from_a_second_jack_client_at_125_bpm(jack):
    client = f"inst-{uuid.uuid4().hex[:6]}"
    source = MidiInput(ports=[], virtual="clock", api="jack", client_name=client,
                       report=lambda text: None)
    midi = Midi(Params(), source, mapping_path=DEFAULT_MAPPING, save_path=None,
                report=lambda text: None)
    daw = Sender(f"daw-{uuid.uuid4().hex[:6]}", to=f"{client}:clock")
    frames = LiveFrames(midi)
    try:
        frames.run(0.1)
        daw.send([0xFA])
        daw.clock(125.0)
        began = time.perf_counter()
        playing = frames.run(2.6)
        settled = [(now, r) for now, r in playing if now - began > 2.0]  # four beats heard
        assert settled and all(r is not None and r.running for _, r in settled), midi.state()
        error = max(abs(r.bpm - 125.0) for _, r in settled)
        assert error < 0.2, f"tempo off by {error:.3f} BPM"
        now, reading = settled[-1]
        assert reading.beat_at(now) == pytest.approx((now - began) * 125 / 60, abs=0.1)
        assert frames.tempo.source == "midi clock" and abs(frames.tempo.bpm - 125.0) < 0.2
        assert midi.state()["messages"] == 0  # clock never reached the mapping

        daw.send([0xFC])  # stop: the clock keeps coming, the beat holds
        stopped = frames.run(0.5)[-10:]
        assert all(not r.running for _, r in stopped)
        assert len({r.beat for _, r in stopped}) == 1
        assert abs(stopped[-1][1].bpm - 125.0) < 0.2
        held = stopped[-1][1].beat

        daw.send([0xFB])  # continue: on from there
        resumed = frames.run(0.5)
        now, reading = resumed[-1]
        assert reading.running and reading.beat_at(now) == pytest.approx(
            held + 0.5 * 125 / 60, abs=0.15)
        assert never_back(beats(resumed))

        daw.send([0xFA])  # start: from beat 0
        sent = time.perf_counter()
        now, reading = frames.run(0.3)[-1]
        assert reading.beat_at(now) == pytest.approx((now - sent) * 125 / 60, abs=0.1)

        daw.clock(0)  # the cable pulled: no reading, Tempo holds 125
        gone = frames.run(0.8)
        assert gone[-1][1] is None and frames.tempo.held
        assert abs(frames.tempo.bpm - 125.0) < 0.2
    finally:
        midi.close()
        daw.unplug()
