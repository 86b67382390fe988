"""The governor: real time on any GPU. It holds the target frame rate on a GPU too slow for the
look by lowering, in this order, the render scale, the post chain, the count and the
neighbours, and raises them back (in the reverse order) when there is room; the HUD and
telemetry say what is lowered, and a performer can pin any of the four (the registry's
pin_render_scale, pin_post, pin_count, pin_neighbors; its target_fps, 0: the display's rate, 30
on software GL). Main thread only.

    render_scale  the picture drawn at SCALES of the window's size and scaled up
    post          the post chain (bloom, feedback) held off where it would run
    count         the agents halved, at most COUNT_STEPS times (never below MIN_AGENTS)
    neighbors     the candidates an agent examines capped at NEIGHBOR_CAP (the registry's
                  neighbor_cap, where it is 0 or more): the last resort of a crowd, whose
                  work grows with the count squared, so that even a sixteenth of it can
                  stall (16,384 agents all within each other's radius: 268 million pairs
                  a step); capped, the work grows with the count alone

Whoever paces the frames (the window, visual/ui/window.py; a headless show at its cap,
show/loop.py) reports each frame's interval and work (the CPU's and the GPU's, up to the
GPU's finish, without the wait for the display). Once the frames since the last change span
SETTLE_S (and MIN_FRAMES):

- the last change is judged first: a lever raised that left the frames too slow goes back
  down and rests from raising (HOLD_S, doubling up to HOLD_MAX_S); a render scale or post
  chain lowered that did not lighten the work (by NO_HELP) goes back up and rests from
  lowering (it is not what makes the frame slow: the count will be);
- too slow (the median interval over SLOW times the target's): the first lever in order that
  can go lower goes lower, as far as the frames are too slow (the render scale by the square
  root of the ratio, the count by its powers of two), by one step at least;
- stalled (every frame since the last change over STALL times the target's: a look that
  crowds its space, a count far over what the GPU holds): judged after two frames, not
  MIN_FRAMES (one frame's hitch is no stall), and the count goes first (STALL_ORDER): no
  render scale or post chain lightens a frame that much. Seen on software GL: a look made a
  crowd (its space 5 wide, its neighbours 12) played at 0.3 fps for 51 s while the render
  scale was lowered, judged no help and lowered again, four frames of 3.3 s a judgement;
  now the count is down after two frames (6 s there), then the neighbours where the count's
  floor still stalls. A frame whose own work is over STALL_ALONE_S is judged alone, at once:
  no hitch on stage lasts that long, and a crowd far past what the GPU holds (65,536 agents
  all within each other's radius on software GL: 47 s frames) would stay dark for another;
- room: the last lever in order that is lowered and fits goes up one step. It fits where the
  work it will add stays under FIT of the budget (its cost is learnt from how the work moved
  when it last moved) or, its cost unknown, where the median work is under ROOM of the budget
  (and every PROBE_S while there is that much room, whatever its cost said: costs change).
  The neighbours never probe: uncapped again in the crowd that stalled they would stall the
  show again for two frames of seconds. Their cost, learnt when they were capped, is scaled
  by how crowded the swarm is now against then (`crowd`: the count squared times the share
  of its space a neighbourhood covers), so they come back when the performer thins the crowd
  (a smaller radius, a wider space, fewer agents), not before.

The show never plays in slow motion because frames are slow: live, a slow frame steps the
time it took (show/loop.py WallClock); renders and --dt keep their fixed step and nobody
reports their frames here, so every lever stays up and runs repeat.
"""

from __future__ import annotations

import logging
import math
import statistics
from collections import deque
from collections.abc import Mapping
from typing import Any

log = logging.getLogger(__name__)

LEVERS = ("render_scale", "post", "count", "neighbors")
PINS = {"render_scale": "pin_render_scale", "post": "pin_post", "count": "pin_count",
        "neighbors": "pin_neighbors"}
PARAMS = frozenset({"target_fps", *PINS.values()})  # machine settings, kept out of recalls
SCALES = (1.0, 0.85, 0.7, 0.6, 0.5)  # the render scale's steps: 100, 72, 49, 36, 25 % pixels
COUNT_STEPS = 4  # the count is halved at most this often: a sixteenth of the performer's
MIN_AGENTS = 512
NEIGHBOR_CAP = 64  # candidates an agent examines where the neighbours are capped
SOFTWARE_FPS = 30.0  # software GL's default target
SLOW = 1.1  # frames this much slower than the target's are too slow
ROOM = 0.7  # work under this share of the budget: room to raise a lever of unknown cost
FIT = 0.9  # a lever whose cost is known comes back when the work then stays under this share
PROBE_S = 10.0  # one whose cost says no is tried anyway this often where there is ROOM
NO_HELP = 0.95  # a lowering that left the work above this share of before did not help
STALL = 8.0  # frames this many times the target's are a stall: see the module
STALL_ORDER = ("count", "neighbors", "render_scale", "post")
# Levers whose cost follows the crowd (`crowd`): theirs is scaled by it, and they never probe
CROWDED = frozenset({"neighbors"})
STALL_ALONE_S = 2.0  # a frame of this much work (and a stall's) is judged alone
SETTLE_S = 0.5  # after a change, frames are watched this long (and MIN_FRAMES) first
MIN_FRAMES = 4
HOLD_S = 2.0  # a lever that failed rests this long, doubling each time, up to HOLD_MAX_S
HOLD_MAX_S = 60.0


class Governor:
    """The levels of the three levers (0: as the performer set it) and how they move."""

    def __init__(self, software: bool = False) -> None:
        self.software = software
        self.display_fps = 60.0  # the pacer's (the window's refresh rate or --fps)
        self.level = dict.fromkeys(LEVERS, 0)
        self.active = False  # frames are reported: a live, paced show
        self.changes = 0
        self.last_change = ""  # what the last change did, for telemetry
        self._frames: deque[tuple[float, float]] = deque(maxlen=240)  # (interval, work)
        self._since: float | None = None  # when the frames watched started
        self._rest_lower = dict.fromkeys(LEVERS, -math.inf)
        self._rest_raise = dict.fromkeys(LEVERS, -math.inf)
        self._hold = dict.fromkeys(LEVERS, HOLD_S)
        # The last change, judged by the frames after it: (lever, its level before, the work
        # before, raised)
        self._trial: tuple[str, int, float, bool] | None = None
        # What a lever costs, learnt from the changes: seconds of work per unit of `_share`
        self._cost: dict[str, float | None] = dict.fromkeys(LEVERS)
        self._probe_at = dict.fromkeys(LEVERS, -math.inf)
        self._learnt_in = dict.fromkeys(LEVERS, 1.0)  # `_context` when each cost was learnt

    # ---- what the frame uses --------------------------------------------------------------

    def target_fps(self, params: Mapping[str, Any]) -> float:
        """The frame rate held: target_fps, or the display's (software GL: at most 30)."""
        asked = float(params["target_fps"])
        if asked > 0.0:
            return asked
        return min(self.display_fps, SOFTWARE_FPS) if self.software else self.display_fps

    def render_scale(self, params: Mapping[str, Any]) -> float:
        return 1.0 if params["pin_render_scale"] else SCALES[self.level["render_scale"]]

    def post_held(self, params: Mapping[str, Any]) -> bool:
        """The post chain held off (where `post` would run it)."""
        return bool(self.level["post"]) and not params["pin_post"]

    @staticmethod
    def cap(params: Any, limit: int | None) -> int | None:
        """A count asked over `limit`, what this machine holds live (show/cli/live_show.py),
        set to it; returns the count asked where it was, else None."""
        asked = params["count"]
        if limit is None or asked <= limit:
            return None
        params["count"] = limit
        return asked

    def count(self, params: Mapping[str, Any]) -> int:
        asked = int(params["count"])
        if params["pin_count"]:
            return asked
        return max(asked >> self.level["count"], min(asked, MIN_AGENTS))

    def neighbor_cap(self, params: Mapping[str, Any]) -> int:
        """The candidates an agent examines (0: all): neighbor_cap, or NEIGHBOR_CAP where the
        neighbours are lowered and it asks for more."""
        asked = int(params["neighbor_cap"])
        if not self.level["neighbors"] or params["pin_neighbors"]:
            return asked
        return NEIGHBOR_CAP if asked == 0 else min(asked, NEIGHBOR_CAP)

    def governed(self, values: dict[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
        """This frame's values for the swarm's step: `values` itself unless the neighbours
        are capped, else a copy with the cap."""
        if not self.level["neighbors"]:
            return values
        return {**values, "neighbor_cap": self.neighbor_cap(params)}

    def crowd(self, params: Mapping[str, Any]) -> float:
        """How crowded the swarm is, up to a factor: the pairs of agents a step examines were
        they spread evenly, the count squared times the share of the space (a sphere of
        contain_radius, a disc where flat) one agent's neighbourhood covers, at most all."""
        reach = float(params["neighbor_radius"]) / max(float(params["contain_radius"]), 1e-6)
        covered = min(1.0, reach ** (2 if params["dimensions"] == 2 else 3))
        return float(self.count(params)) ** 2 * covered

    def _context(self, lever: str, params: Mapping[str, Any]) -> float:
        """What a lever's cost is in proportion to, beside its share: the crowd for CROWDED
        levers, nothing (1) for the others."""
        return self.crowd(params) if lever in CROWDED else 1.0

    # ---- frames -------------------------------------------------------------------------------

    def observe(self, now: float, interval: float, work: float, params: Mapping[str, Any],
                post_runs: bool) -> str | None:
        """One paced frame: `interval` seconds since the last, `work` of its own; `post_runs`:
        whether the post chain runs now (or would, were it not held). Returns what changed
        (also logged), or None. One change at most a decision, each judged by the frames
        after it (`_trial`)."""
        self.active = True
        for lever in LEVERS:  # a pin takes the lever back to the performer's at once
            if params[PINS[lever]] and self.level[lever]:
                self._trial = None
                return self._set(now, lever, 0, f"{lever} pinned")
        if self._since is None:
            self._since = now
        self._frames.append((interval, work))
        budget = 1.0 / self.target_fps(params)
        if work > max(STALL * budget, STALL_ALONE_S):  # judged alone, at once
            self._frames = deque([(interval, work)], maxlen=240)
        else:
            if now - self._since < SETTLE_S:
                return None
            if len(self._frames) < MIN_FRAMES and (  # a stall is judged after two frames
                    len(self._frames) < 2
                    or min(f[0] for f in self._frames) <= STALL * budget):
                return None
        intervals = statistics.median(frame[0] for frame in self._frames)
        works = statistics.median(frame[1] for frame in self._frames)
        ratio = intervals / budget
        slow = ratio > SLOW
        trial, self._trial = self._trial, None
        if trial is not None:
            lever, before, work_before, raised = trial
            moved = self._share(lever, before) - self._share(lever, self.level[lever])
            if moved:  # what the lever's change did to the work: its cost
                self._cost[lever] = max((work_before - works) / moved, 0.0)
                self._learnt_in[lever] = self._context(lever, params)
            if raised and slow:  # the raise did not fit: back down, and rest from raising
                self._rest(self._rest_raise, lever, now)
                return self._set(now, lever, before, f"frames {ratio:.1f}x the target's "
                                                     "after it came back")
            if not raised and lever != "count" and works > NO_HELP * work_before:
                self._rest(self._rest_lower, lever, now)  # not what makes the frame slow
                return self._set(now, lever, before, "lowering it did not lighten the frame")
        if slow:
            for lever in STALL_ORDER if ratio > STALL else LEVERS:
                if params[PINS[lever]] or now < self._rest_lower[lever]:
                    continue
                level = self._lower_to(lever, ratio, params, post_runs)
                if level is not None:
                    self._trial = (lever, self.level[lever], works, False)
                    return self._set(now, lever, level, f"frames {ratio:.1f}x the target's")
        else:
            for lever in reversed(LEVERS):
                level = self.level[lever]
                if not level or params[PINS[lever]] or now < self._rest_raise[lever]:
                    continue
                cost = self._cost[lever]
                room = works < ROOM * budget
                fits = room  # its cost unknown: back where there is room, and see
                if cost is not None:  # its cost learnt: back if the work it adds still fits
                    grows = cost * (self._share(lever, level - 1) - self._share(lever, level))
                    grows *= self._context(lever, params) / max(self._learnt_in[lever], 1e-9)
                    fits = works + grows < FIT * budget
                    if not fits and room and now >= self._probe_at[lever] \
                            and lever not in CROWDED:
                        fits = True  # the cost may have changed (a calmer passage): try
                        self._probe_at[lever] = now + PROBE_S
                if fits:
                    self._trial = (lever, level, works, True)
                    return self._set(now, lever, level - 1,
                                     f"room: {works * 1000:.1f} ms of work in a "
                                     f"{budget * 1000:.1f} ms frame")
        self._since, self._frames = now, deque(maxlen=240)  # nothing to do: watch afresh
        return None

    @staticmethod
    def _share(lever: str, level: int) -> float:
        """How much of a lever's cost a level keeps: the count's fraction, the render scale's
        pixels, the post chain's and the neighbours' all or nothing."""
        if lever == "count":
            return 1.0 / (1 << level)
        if lever == "render_scale":
            return SCALES[level] ** 2
        return 1.0 - level

    def _lower_to(self, lever: str, ratio: float, params: Mapping[str, Any],
                  post_runs: bool) -> int | None:
        """The level `lever` goes down to for frames `ratio` times too slow, or None where it
        cannot go lower (or lowering it would change nothing)."""
        level = self.level[lever]
        if lever == "post":
            return 1 if level == 0 and post_runs else None
        if lever == "neighbors":
            asked = int(params["neighbor_cap"])
            return 1 if level == 0 and (asked == 0 or asked > NEIGHBOR_CAP) else None
        if lever == "count":
            if level >= COUNT_STEPS or self.count(params) <= MIN_AGENTS:
                return None
            return min(level + max(1, round(math.log2(ratio))), COUNT_STEPS)
        steps = list(range(level + 1, len(SCALES)))
        if not steps:
            return None
        wanted = SCALES[level] / math.sqrt(ratio)
        return next((k for k in steps if SCALES[k] <= wanted), steps[-1]) \
            if SCALES[steps[0]] > wanted else steps[0]

    def _rest(self, rests: dict[str, float], lever: str, now: float) -> None:
        rests[lever] = now + self._hold[lever]
        self._hold[lever] = min(self._hold[lever] * 2.0, HOLD_MAX_S)

    def _set(self, now: float, lever: str, level: int, why: str) -> str:
        self.level[lever] = level
        self.changes += 1
        self._since, self._frames = now, deque(maxlen=240)
        what = {"render_scale": f"render scale {SCALES[level]:g}",
                "post": "post chain " + ("held off" if level else "back"),
                "count": f"count 1/{1 << level}" if level else "count back",
                "neighbors": (f"neighbours capped at {NEIGHBOR_CAP}" if level
                              else "neighbours back")}[lever]
        self.last_change = f"{what} ({why})"
        log.info(f"governor: {self.last_change}")
        return self.last_change

    # ---- what the HUD and telemetry say ---------------------------------------------------

    def state(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Telemetry's `governor` object."""
        return {"active": self.active, "target_fps": round(self.target_fps(params), 3),
                "render_scale": self.render_scale(params), "post_held": self.post_held(params),
                "count": self.count(params), "count_asked": int(params["count"]),
                "neighbor_cap": self.neighbor_cap(params),
                "lowered": [lever for lever in LEVERS if self.level[lever]],
                "pinned": [lever for lever in LEVERS if params[PINS[lever]]],
                "changes": self.changes, "last_change": self.last_change}

    def hud_line(self, params: Mapping[str, Any]) -> str | None:
        """What is lowered to hold the frame rate (None: nothing is)."""
        parts = []
        if self.render_scale(params) < 1.0:
            parts.append(f"render scale {self.render_scale(params):g}")
        if self.post_held(params):
            parts.append("post held off")
        if self.count(params) < int(params["count"]):
            parts.append(f"count {self.count(params):,} of {int(params['count']):,}")
        if self.neighbor_cap(params) != int(params["neighbor_cap"]):
            parts.append(f"neighbours capped at {self.neighbor_cap(params)}")
        if not parts:
            return None
        pinned = [lever for lever in LEVERS if params[PINS[lever]]]
        return (f"governor ({self.target_fps(params):g} fps): " + ", ".join(parts)
                + (f"  pinned: {', '.join(pinned)}" if pinned else ""))
