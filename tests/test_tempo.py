"""Musical time: tap tempo, one clock at a time by priority (or the performer's choice), the
grid held when every clock falls silent, beat-synced modulation and quantised actions."""

from __future__ import annotations

import pytest

from swarm_instrument.control.actions import Action
from swarm_instrument.control.musical_time.tempo import TapTempo, Tempo, TempoReading
from swarm_instrument.control.osc.osc_input import interpret
from swarm_instrument.control.parameters.modulation import (
    Route,
    RouteError,
    lfo,
    modulate,
    routes_from_json,
    tempo_sources,
)
from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.show.cli.options import ShowOptions
from swarm_instrument.show.inputs.keys import key_action
from swarm_instrument.show.show import Show


class Fixed:
    """A clock at a steady tempo from beat 0 at time `start`, until it falls silent."""

    def __init__(self, name: str, bpm: float, start: float = 0.0, until: float = 1e9,
                 bars: bool = False) -> None:
        self.name, self.bpm, self.start, self.until = name, bpm, start, until
        self.bars = bars

    def reading(self, now: float) -> TempoReading | None:
        if not self.start <= now < self.until:
            return None
        return TempoReading(self.bpm, (now - self.start) * self.bpm / 60.0, now, self.name,
                            bars=self.bars)


def test_four_taps_500_ms_apart_give_120_bpm_and_the_phase():
    tap = TapTempo()
    tempo = Tempo([tap])
    for now in (10.0, 10.5, 11.0, 11.5):
        tap.tap(now)
        tempo.update(now)
    assert tempo.bpm == pytest.approx(120.0) and tempo.source == "tap"
    assert tempo.phase == pytest.approx(0.0)  # the last tap is a beat
    tempo.update(11.75)
    assert tempo.phase == pytest.approx(0.5)
    tap.tap(20.0)  # a pause longer than two seconds starts a new series
    assert tap.taps == 1 and tempo.bpm == pytest.approx(120.0)


def test_one_clock_at_a_time_by_priority_or_choice_and_held_when_silent():
    link = Fixed("link", 100.0, until=10.0)
    midi = Fixed("midi clock", 125.0)
    tempo = Tempo([Fixed("audio", 90.0), midi, link])
    tempo.update(1.0)
    assert (tempo.source, tempo.bpm) == ("link", 100.0)  # Link first
    tempo.chosen = "audio"
    tempo.update(2.0)
    assert (tempo.source, tempo.bpm) == ("audio", 90.0)  # the performer's choice
    tempo.chosen = None
    tempo.update(9.0)
    before = tempo.beat
    tempo.update(10.5)  # Link went away: MIDI clock leads, the count goes on, not back
    assert (tempo.source, tempo.bpm) == ("midi clock", 125.0) and tempo.beat > before
    assert tempo.phase == pytest.approx(midi.reading(10.5).beat % 1.0)  # on its grid
    silent = Tempo([Fixed("tap", 140.0, until=5.0)])
    silent.update(4.0)
    beat = silent.beat
    silent.update(6.0)  # nobody speaks: the last tempo and grid go on
    assert silent.held and silent.bpm == 140.0
    assert silent.beat == pytest.approx(beat + 2.0 * 140 / 60)


def test_beats_bars_and_the_downbeat():
    tempo = Tempo([Fixed("tap", 120.0)])
    crossings = []
    for frame in range(1, 121):  # 2 s at 60 fps: 4 beats, one bar
        tempo.update(frame / 60)
        crossings.append((tempo.crossed_beat, tempo.crossed_bar))
    assert sum(b for b, _ in crossings) == 4 and sum(b for _, b in crossings) == 1
    tempo.update(2.5)  # beat 5: mark it as the bar's first
    tempo.downbeat()
    assert tempo.bar_phase == pytest.approx(0.0)


def test_a_clock_that_knows_the_bar_sets_it_and_a_jump_never_runs_the_count_back():
    tap = Fixed("tap", 120.0)
    tempo = Tempo([tap])
    for frame in range(1, 200):  # 3.3 s of tap tempo, the performer's downbeat on beat 3
        tempo.update(frame / 60)
        if frame == 90:
            tempo.downbeat()
    assert not tempo.bar_from_clock
    daw = Fixed("midi clock", 120.0, start=3.4, bars=True)  # a DAW presses play: beat 0, bar 1
    tempo.add(daw)
    beats = []
    for frame in range(200, 600):
        now = frame / 60
        tempo.update(now)
        beats.append(tempo.beat)
        if now >= 3.4:
            theirs = daw.reading(now).beat
            assert tempo.phase == pytest.approx(theirs % 1.0, abs=1e-9)
            assert tempo.bar_phase == pytest.approx(theirs / 4 % 1.0, abs=1e-9)  # its bar
    assert tempo.bar_from_clock and tempo.state()["bar_from_clock"] is True
    assert all(b <= a for b, a in zip(beats, beats[1:]))  # never back
    tempo.downbeat()  # the clock knows better: its bar comes back at the next reading
    tempo.update(10.0)
    assert tempo.bar_phase == pytest.approx(daw.reading(10.0).beat / 4 % 1.0)
    daw.start = 10.05  # play pressed again mid-bar: a jump back to beat 0
    previous = tempo.beat
    tempo.update(10.1)
    assert tempo.beat >= previous and tempo.crossed_beat and tempo.crossed_bar
    assert tempo.phase == pytest.approx(daw.reading(10.1).beat % 1.0, abs=1e-9)
    assert tempo.bar_phase == pytest.approx(daw.reading(10.1).beat / 4 % 1.0, abs=1e-9)


def test_beat_synced_sources_and_lfos():
    assert tempo_sources(3.25, 0.5) == {"beat": 0.75, "bar": 0.5, "phase": 0.25}
    assert lfo("sine", 0.0, 1.0) == pytest.approx(0.0) and lfo("sine", 0.5, 1.0) == 1.0
    assert lfo("triangle", 1.0, 4.0) == pytest.approx(0.5)
    assert lfo("saw", 3.0, 4.0) == pytest.approx(0.75)
    assert (lfo("square", 0.25, 1.0), lfo("square", 0.75, 1.0)) == (1.0, 0.0)
    held = {lfo("random", b / 10, 2.0) for b in range(40)}  # two periods: two values
    assert len(held) == 2 and lfo("random", 7.0, 2.0) == lfo("random", 7.0, 2.0)
    route = Route("sine", "cohesion_weight", 2.0, beats=4)
    assert routes_from_json([route.to_dict()]) == [route]
    base = Params().as_dict()
    values = modulate([route], {}, base, beat=2.0)  # half way through four beats: the top
    assert values["cohesion_weight"] == pytest.approx(base["cohesion_weight"] + 2.0)
    with pytest.raises(RouteError, match="'beats'"):
        routes_from_json([{"source": "saw", "param": "trail", "amount": 1, "beats": 0}])


def test_keys_and_osc_tap_and_mark_the_downbeat():
    assert key_action("T", now=12.5) == Action("tap", 12.5)
    assert key_action("D") == Action("downbeat")
    assert interpret("/swarm/tap", []) == Action("tap")
    assert interpret("/swarm/downbeat", []) == Action("downbeat")


def test_quantised_actions_wait_for_the_beat(ctx):
    params = Params({"count": 200, "quantize": "beat", "morph_seconds": 0.0})
    show = Show(ctx, params, ShowOptions())
    try:
        for now in (0.0, 0.5, 1.0, 1.5):  # 120 BPM, a beat on each tap
            show.act(Action("tap", now))
        show.update(1.6)
        show.act(Action("respawn"))
        show.update(1.7)
        assert show.respawns == 0 and "1 waiting for the beat" in "\n".join(show.hud_lines())
        show.update(2.05)  # the beat at 2.0 has passed
        assert show.respawns == 1
        params["quantize"] = "off"
        show.act(Action("respawn"))
        assert show.respawns == 2  # at once
        assert show.telemetry()["tempo"]["source"] == "tap"
    finally:
        show.release()
