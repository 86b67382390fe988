"""Ableton Link (control/musical_time/link.py): the clock's arithmetic against a stand-in for the
`link` module, and a real session of two peers.

Link multicasts on every network interface, so a real session runs only in a network namespace
of its own that has nothing but loopback (`unshare -n`, which needs root, as the tests have here
and on CI): `python tests/test_link.py scenario` is that session, started by
test_session_in_a_private_network, and refuses to run where it sees another interface. A test
that cannot make the namespace fails; it never skips.
"""

from __future__ import annotations

import math
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from swarm_instrument.control.musical_time.link import LinkClock, LinkUnavailable
from swarm_instrument.control.musical_time.tempo import Tempo

ROOT = Path(__file__).resolve().parent.parent


class FakeState:
    def __init__(self, link: FakeLink) -> None:
        self.link = link
        self.bpm = link.bpm

    def tempo(self) -> float:
        return self.bpm

    def setTempo(self, bpm: float, micros: int) -> None:  # noqa: N802 - the binding's name
        self.bpm = bpm

    def beatAtTime(self, micros: int, quantum: float) -> float:  # noqa: N802
        self.link.asked.append(micros)
        return micros / 1e6 * self.bpm / 60.0


class FakeClock:
    OFFSET_S = 1234.5  # Link's clock runs this far ahead of perf_counter's

    def micros(self) -> int:
        return int((time.perf_counter() + self.OFFSET_S) * 1e6)


class FakeLink:
    """Stands in for link.Link: no network, no thread."""

    def __init__(self, bpm: float = 120.0, peers: int = 1) -> None:
        self.bpm, self.peers, self.enabled = bpm, peers, True
        self.commits: list[float] = []
        self.asked: list[int] = []

    def numPeers(self) -> int:  # noqa: N802
        return self.peers

    def clock(self) -> FakeClock:
        return FakeClock()

    def captureAppSessionState(self) -> FakeState:  # noqa: N802
        return FakeState(self)

    def commitAppSessionState(self, state: FakeState) -> None:  # noqa: N802
        self.bpm = state.bpm
        self.commits.append(state.bpm)


def test_unavailable_without_the_module(monkeypatch):
    monkeypatch.setitem(sys.modules, "link", None)
    with pytest.raises(LinkUnavailable) as caught:
        LinkClock.open(bpm=120.0)
    message = str(caught.value)
    assert "link module is not installed" in message and "LinkPython-extern" in message
    assert "\n" not in message


def test_unavailable_when_link_does_not_start(monkeypatch):
    class Broken:
        def __init__(self, bpm: float) -> None:
            raise RuntimeError("no sockets")

    monkeypatch.setitem(sys.modules, "link", type(sys)("link"))
    sys.modules["link"].Link = Broken
    with pytest.raises(LinkUnavailable, match="Ableton Link could not start: no sockets"):
        LinkClock.open(bpm=120.0)


def test_propose_ignores_what_is_no_tempo():
    fake = FakeLink(bpm=120.0)
    clock = LinkClock(fake)
    for bpm in (math.nan, math.inf, -math.inf, 0, 1000, 19.9, 400.1, True, "130", None):
        clock.propose(bpm)
    assert fake.commits == [] and fake.bpm == 120.0
    clock.propose(130)
    clock.propose(20.0)
    clock.propose(400.0)
    assert fake.commits == [130.0, 20.0, 400.0]


def test_reading_maps_the_loop_clock_to_links():
    fake = FakeLink(bpm=100.0)
    clock = LinkClock(fake)
    now = time.perf_counter() - 0.25  # a frame's time, a little in the past
    reading = clock.reading(now)
    assert reading.source == "link" and reading.bpm == 100.0 and reading.at == now
    assert reading.confidence == 1.0 and reading.running
    assert abs(fake.asked[-1] - (now + FakeClock.OFFSET_S) * 1e6) < 50  # microseconds
    assert reading.beat == pytest.approx(fake.asked[-1] / 1e6 * 100.0 / 60.0)
    assert clock.state() == {"peers": 1, "bpm": 100.0, "enabled": True}


def test_alone_in_the_session_it_gives_no_reading():
    fake = FakeLink(peers=0)
    clock = LinkClock(fake)
    assert clock.reading(time.perf_counter()) is None and clock.peers == 0
    tempo = Tempo([clock])
    tempo.update(time.perf_counter())
    assert tempo.held and tempo.source == "none"


def test_close_never_raises_and_silences_it():
    class Stubborn(FakeLink):
        def __setattr__(self, name, value):
            if name == "enabled" and value is False:
                raise RuntimeError("cannot")
            super().__setattr__(name, value)

    clock = LinkClock(Stubborn())
    clock.close()
    clock.close()
    assert clock.reading(time.perf_counter()) is None
    assert clock.state() == {"peers": 0, "bpm": None, "enabled": False}
    clock.propose(130)  # closed: nothing


def in_private_network(name: str, tmp_path: Path | None = None) -> None:
    """Run this file's scenario `name` in a network namespace of its own (only loopback)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    command = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$0" "$@"',
               sys.executable, str(Path(__file__).resolve()), name,
               *([str(tmp_path)] if tmp_path else [])]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT,
                            env=env)
    output = result.stdout + result.stderr
    print(output)
    if "scenario: start" not in result.stdout:
        pytest.fail("could not make a private network namespace for the Link session (unshare "
                    f"-n needs root or CAP_SYS_ADMIN, and `ip`):\n{output}")
    assert result.returncode == 0, f"the Link session failed:\n{output}"


@pytest.mark.netns
@pytest.mark.root
def test_session_in_a_private_network():
    """Two Link peers in a namespace of their own: see scenario()."""
    in_private_network("scenario")


@pytest.mark.netns
@pytest.mark.root
@pytest.mark.posix  # Ctrl+C (SIGINT) to the show's process group
def test_the_instrument_follows_a_session_as_the_performer_starts_it(tmp_path):
    """`instrument.py --link` beside a peer, in a namespace of its own: see instrument()."""
    in_private_network("instrument", tmp_path)


FRAME_S = 1 / 60


class Failed(Exception):
    pass


def scenario() -> None:
    """A peer at 100 BPM, then the instrument's LinkClock opened at 120 BPM, with Tempo updated
    at 60 frames a second: once they see each other the instrument follows the peer's 100 BPM
    within 1 s, on the peer's grid within 10 ms; its proposal of 130 BPM reaches the peer
    within 1 s; the peer leaves and Tempo holds 130 BPM. Prints the figures measured on the way."""
    import link

    peer = link.Link(100.0)
    peer.enabled = True
    peer_clock = peer.clock()
    # the peer's session is older than ours by more than Link's 0.5 s margin, so ours joins it
    # (sessions met within 0.5 s of each other's start: either may win)
    time.sleep(1.0)
    start = time.perf_counter()
    ours = LinkClock.open(bpm=120.0)
    tempo = Tempo([ours])

    def frames(seconds: float, done=lambda now: False, step: float = FRAME_S) -> float | None:
        """Frames every `step` until `done(now)`: how long that took; None after `seconds`
        (a step shorter than a frame times what happens between frames)."""
        begin = time.perf_counter()
        while True:
            now = time.perf_counter()
            tempo.update(now)
            if done(now):
                return now - begin
            if now - begin > seconds:
                return None
            time.sleep(step)

    try:
        # 1. the instrument follows the session: joining it (the older session's tempo wins),
        # and a tempo the peer commits once they see each other (which also settles a machine
        # so loaded that the two sessions' starts came within Link's 0.5 s margin)
        def following(now: float) -> bool:
            reading = ours.reading(now)
            return reading is not None and abs(reading.bpm - 100.0) <= 0.01 \
                and tempo.source == "link" and abs(tempo.bpm - 100.0) <= 0.01
        if frames(10.0, lambda now: ours.peers == 1 and peer.numPeers() == 1) is None:
            raise Failed(f"the two peers did not find each other within 10 s: {ours.state()}")
        joined_s = time.perf_counter() - start
        state = peer.captureAppSessionState()
        state.setTempo(100.0, peer_clock.micros())
        peer.commitAppSessionState(state)
        committed = time.perf_counter()
        if frames(1.0, following) is None:
            raise Failed(f"not following the peer's 100 BPM 1 s after it set it: "
                         f"{ours.state()}, tempo {tempo.state()}")
        follow_s = time.perf_counter() - committed
        state = ours.state()
        if state["peers"] != 1 or not state["enabled"] or state["bpm"] != 100.0:
            raise Failed(f"state() says {state}")

        # 2. on the peer's grid: the beat agrees in the bar (quantum 4), Tempo's in the beat
        errors, tempo_errors, bar_errors = [], [], []
        for _ in range(60):
            before = time.perf_counter()
            micros = peer_clock.micros()
            after = time.perf_counter()
            now = (before + after) / 2.0
            theirs = peer.captureAppSessionState().beatAtTime(micros, 4.0)
            tempo.update(now)
            mine = ours.reading(now).beat_at(now)
            errors.append(((mine - theirs + 2.0) % 4.0 - 2.0) * 60.0 / 100.0 * 1000.0)
            tempo_errors.append(((tempo.beat - theirs + 0.5) % 1.0 - 0.5) * 600.0)
            bar_errors.append(((tempo.bar_phase * 4.0 - theirs + 2.0) % 4.0 - 2.0) * 600.0)
            time.sleep(FRAME_S)
        worst = max(abs(e) for e in errors)
        worst_tempo = max(abs(e) for e in tempo_errors)
        worst_bar = max(abs(e) for e in bar_errors)
        if worst > 10.0 or worst_tempo > 10.0 or worst_bar > 10.0 or not tempo.bar_from_clock:
            raise Failed(f"off the peer's grid: {worst:.3f} ms in the bar, Tempo's beat "
                         f"{worst_tempo:.3f} ms, Tempo's bar {worst_bar:.3f} ms "
                         f"(from the clock: {tempo.bar_from_clock})")

        # 3. a tempo proposed here reaches the peer; what is no tempo does not
        proposed = time.perf_counter()
        ours.propose(130.0)
        if frames(1.0, lambda now: abs(peer.captureAppSessionState().tempo() - 130.0) <= 0.01,
                  step=0.001) is None:
            raise Failed(f"the peer did not take 130 BPM within 1 s: "
                         f"{peer.captureAppSessionState().tempo()}")
        propose_ms = (time.perf_counter() - proposed) * 1000.0
        for bpm in (math.nan, 0.0, 1000.0):
            ours.propose(bpm)
        frames(0.3)
        if abs(peer.captureAppSessionState().tempo() - 130.0) > 0.01 \
                or abs(tempo.bpm - 130.0) > 0.01:
            raise Failed(f"nan/0/1000 moved the session: peer "
                         f"{peer.captureAppSessionState().tempo()}, tempo {tempo.state()}")

        # 4. the peer leaves (it says goodbye): no reading, Tempo holds 130 BPM and runs on
        peer.enabled = False
        left = frames(10.0, lambda now: ours.reading(now) is None, step=0.001)
        if left is None:
            raise Failed(f"the peer's leaving not seen within 10 s: {ours.state()}")
        beat = tempo.beat
        held_for = frames(0.5)  # None: ran the whole 0.5 s
        ran = tempo.beat - beat
        if held_for is not None or not tempo.held or abs(tempo.bpm - 130.0) > 0.01 \
                or not 0.9 < ran / (0.5 * 130.0 / 60.0) < 1.2:
            raise Failed(f"Tempo did not hold 130 BPM: {tempo.state()}, {ran:.3f} beats in "
                         "0.5 s")
        print(f"link: joined the peer {joined_s:.3f} s after opening, followed its 100 BPM "
              f"{follow_s * 1000.0:.1f} ms after it set it; "
              f"phase error {statistics(errors)} over {len(errors)} frames (Tempo's beat: "
              f"at most {worst_tempo:.3f} ms, its bar {worst_bar:.3f} ms); the peer took 130 "
              f"BPM in {propose_ms:.1f} ms; "
              f"the peer's leaving seen in {left * 1000.0:.1f} ms")
    finally:
        ours.close()
        ours.close()
        peer.enabled = False


def instrument(folder: Path) -> None:
    """A peer at 100 BPM; the instrument started headless with --link as a performer would (the
    supervisor, telemetry each second); its telemetry follows the session's tempo and bar from
    Link; the peer changes to 140 BPM and the show follows; the peer leaves and the tempo holds
    at 140, said to come from Link's last tempo; Ctrl+C (SIGINT) ends the show cleanly."""
    import json
    import signal

    import link

    peer = link.Link(100.0)
    peer.enabled = True
    peer_clock = peer.clock()
    telemetry = folder / "telemetry.jsonl"
    log_path = folder / "instrument.log"
    command = [sys.executable, str(ROOT / "instrument.py"), "--headless", "--link",
               "--count", "256", "--size", "320x180", "--no-midi",
               "--telemetry", str(telemetry)]
    env = dict(os.environ, SWARM_STATE_DIR=str(folder / "state"),
               SWARM_PRESETS_DIR=str(folder / "presets"))
    with open(log_path, "w") as log_file:
        show = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, cwd=ROOT,
                                env=env, start_new_session=True)

    def records() -> list[dict]:
        if not telemetry.exists():
            return []
        lines = telemetry.read_text().splitlines()
        return [json.loads(line) for line in lines[:-1] if line]  # the last may be half written

    def wait_for(what: str, check, seconds: float) -> dict:
        begin = time.monotonic()
        while time.monotonic() - begin < seconds:
            if show.poll() is not None:
                raise Failed(f"the show ended ({show.returncode}) waiting for {what}:\n"
                             f"{log_path.read_text()}")
            for record in reversed(records()[-3:]):
                if check(record["tempo"]):
                    return record
            time.sleep(0.1)
        raise Failed(f"no telemetry record with {what} within {seconds} s: "
                     f"{[r['tempo'] for r in records()[-3:]]}\n{log_path.read_text()}")

    def link_peers(record: dict) -> int:
        return (record.get("link") or {}).get("peers", 0)

    try:
        begin = time.monotonic()  # the show joins the session: the peer's older one
        while not any(link_peers(r) >= 1 for r in records()[-3:]):
            if show.poll() is not None or time.monotonic() - begin > 60.0:
                raise Failed(f"the show never saw the peer: {records()[-1:]}\n"
                             f"{log_path.read_text()}")
            time.sleep(0.1)
        state = peer.captureAppSessionState()  # and, however loaded the machine, 100 BPM
        state.setTempo(100.0, peer_clock.micros())
        peer.commitAppSessionState(state)
        following = wait_for("Link at 100 BPM", lambda t: t["source"] == "link"
                             and abs(t["bpm"] - 100.0) < 0.01 and t["bar_from_clock"], 10.0)
        # the record's bar phase against the peer's when the show read it: the record's
        # wall-clock time less the tempo's age (read at the frame's start, written after it)
        state = peer.captureAppSessionState()
        age = time.time() - following["time"] + following["frame_age_ms"] / 1e3
        theirs = state.phaseAtTime(peer_clock.micros() - round(age * 1e6), 4.0)
        error = ((following["tempo"]["bar_phase"] * 4.0 - theirs + 2.0) % 4.0 - 2.0) * 600.0
        if abs(error) > 30.0:  # Link's clocks agree within a millisecond; its stamps, a few
            raise Failed(f"the show's bar is {error:.1f} ms off the session's (read "
                         f"{following['frame_age_ms']} ms before its record's stamp)")
        state.setTempo(140.0, peer_clock.micros())
        peer.commitAppSessionState(state)
        changed = time.monotonic()
        wait_for("140 BPM", lambda t: t["source"] == "link" and abs(t["bpm"] - 140.0) < 0.01,
                 10.0)
        follow_s = time.monotonic() - changed
        peer.enabled = False  # the peer leaves
        wait_for("the tempo held at 140", lambda t: t["held"] and abs(t["bpm"] - 140.0) < 0.01,
                 15.0)
        os.killpg(show.pid, signal.SIGINT)
        code = show.wait(timeout=30)
        said = log_path.read_text()
        if code != 0 or "link: joined the session" not in said or "Traceback" in said:
            raise Failed(f"exit {code} after Ctrl+C:\n{said}")
        print(f"instrument: on the session's bar within {abs(error):.1f} ms (telemetry's "
              f"stamp), followed 140 BPM within {follow_s:.2f} s (telemetry once a second), "
              "held it when the peer left, exit 0 on Ctrl+C")
    finally:
        if show.poll() is None:
            os.killpg(show.pid, signal.SIGKILL)
            show.wait()
        peer.enabled = False


def statistics(errors: list[float]) -> str:
    mean = sum(abs(e) for e in errors) / len(errors)
    return f"at most {max(abs(e) for e in errors):.3f} ms (mean {mean:.3f} ms)"


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("scenario", "instrument"):
        print("usage: python tests/test_link.py scenario | instrument FOLDER  (inside "
              "`unshare -n`; see the module's docstring)", file=sys.stderr)
        return 2
    print("scenario: start", flush=True)
    interfaces = [name for _, name in socket.if_nameindex()]
    if interfaces != ["lo"]:
        print(f"scenario: refusing to run Link with network interfaces {interfaces}: run it "
              "inside `unshare -n` (only loopback)", file=sys.stderr)
        return 2
    try:
        if argv[0] == "scenario":
            scenario()
        else:
            instrument(Path(argv[1]))
    except Failed as exc:
        print(f"scenario: FAILED: {exc}", file=sys.stderr)
        return 1
    print("scenario: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
