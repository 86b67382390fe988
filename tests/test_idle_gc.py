"""Steady frames (issue 31): no garbage collection inside a frame. The live show freezes what
it built, turns automatic collection off and collects after each frame is shown
(show/idle_gc.py); these check that garbage made during a frame waits for that moment, is
collected then, and that a live run really runs that way."""

from __future__ import annotations

import gc
import json
import weakref

from swarm_instrument.show.idle_gc import IdleCollector

from conftest import run_instrument


class Node:
    def __init__(self) -> None:
        self.other = self  # a cycle: only the collector frees it


def test_garbage_made_in_a_frame_is_collected_after_it_not_during_it():
    collections = []

    def note(phase, info):
        if phase == "start":
            collections.append(info["generation"])

    collector = IdleCollector(threshold=100)
    collector.start()
    gc.callbacks.append(note)
    try:
        assert not gc.isenabled() and gc.get_freeze_count() > 0
        first = Node()
        alive = weakref.ref(first)
        del first
        for _ in range(5000):  # a frame's garbage, far past the threshold
            Node()
        assert collections == [] and alive() is not None  # nothing collected in the frame
        collector.idle()  # the frame is shown
        assert collections == [0] and alive() is None
        assert collector.state()["idle_collections"] == 1
        collector.idle()  # nothing made since: nothing to do
        assert collections == [0]
    finally:
        gc.callbacks.remove(note)
        collector.stop()
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_live_show_collects_only_between_frames(tmp_path):
    telemetry = tmp_path / "t.jsonl"
    result = run_instrument("--headless", "--frames", "40", "--size", "96x54", "--count",
                            "300", "--no-midi", "--telemetry", str(telemetry))
    assert result.returncode == 0, result.stderr
    record = json.loads(telemetry.read_text().splitlines()[-1])
    assert record["gc"]["frozen"] > 1000  # the show's objects frozen once it was built
    assert record["gc"]["longest_ms"] >= 0.0
