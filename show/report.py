"""What the show tells: the HUD's lines, the telemetry record, the files telemetry goes to, and
the frame rate. Reads the show, changes nothing in it. Main thread only.
"""

from __future__ import annotations

import math
import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from swarm_instrument.control.text import printable

if TYPE_CHECKING:
    from swarm_instrument.show.show import Show

SLOW_MS = 50.0  # a frame this long shows on stage
READOUT_S = 0.25  # the HUD's frame and GPU figures change four times a second, as a meter's


@dataclass
class FrameClock:
    """Frames per second and frame time over the last second of frames (wall clock), and the
    slow frames: longer than SLOW_MS and three times the recent median (a hitch, not a slow
    machine). A slow frame is counted and logged, never fatal. The loop ticks it."""

    times: deque = field(default_factory=lambda: deque(maxlen=240))
    slow_frames: int = 0
    last_slow_ms: float | None = None
    _held: dict = field(default_factory=dict)  # readout's texts: key -> (made at, text)

    def readout(self, key: str, make: Callable[[], str]) -> str:
        """`make()`'s text, made again once READOUT_S of frames have passed: figures that are
        read, not watched (digits changing each frame cannot be), and each HUD line that
        changes is laid out again (about a millisecond of CPU a line on a slow machine)."""
        now = self.times[-1] if self.times else 0.0
        held = self._held.get(key)
        if held is None or not 0.0 <= now - held[0] < READOUT_S:
            held = self._held[key] = (now, make())
        return held[1]

    def tick(self, now: float) -> bool:
        """Record a frame; True when it was a slow one. The median of the recent frames is
        worked out only for a frame over SLOW_MS (numpy on 240 numbers every frame is not
        free)."""
        times = self.times
        times.append(now)
        if len(times) < 30 or (now - times[-2]) * 1000.0 <= SLOW_MS:
            return False
        gaps = np.diff(np.fromiter(times, float))
        frame_ms = gaps[-1] * 1000.0
        if frame_ms > 3.0 * float(np.median(gaps)) * 1000.0:
            self.slow_frames += 1
            self.last_slow_ms = frame_ms
            return True
        return False

    @property
    def frame_ms(self) -> float | None:
        times = self.times
        return None if len(times) < 2 else (times[-1] - times[-2]) * 1000.0

    @property
    def fps(self) -> float | None:
        times = self.times
        if len(times) < 2:
            return None
        last = times[-1]
        first, frames = last, 0
        for when in reversed(times):  # the frames of the last second
            if when < last - 1.0:
                break
            first, frames = when, frames + 1
        if frames < 2:
            return 1000.0 / self.frame_ms if self.frame_ms else None
        return (frames - 1) / (last - first)


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None or not math.isfinite(value) else round(value, digits)


def _age_ms(then: float | None) -> float | None:
    """How long ago `then` (perf_counter's) was, in ms."""
    return None if then is None else round((time.perf_counter() - then) * 1e3, 1)


def telemetry(show: Show) -> dict[str, Any]:
    """The telemetry record: one JSON object, as `--telemetry` writes it once a second."""
    renderer = show.renderer
    params = {k: (list(v) if isinstance(v, tuple) else v)
              for k, v in show.params.as_dict().items()}
    return {
        "pid": os.getpid(),
        "frame": show.frame,
        # live: how long before the record's `time` this frame began (its values are as of
        # then: the tempo's beat and phases, the inputs); None in a render (song time)
        "frame_age_ms": _age_ms(show.tempo.read_at) if show.options.live else None,
        "fps": _round(show.clock.fps),
        "frame_ms": _round(show.clock.frame_ms),
        "slow_frames": show.clock.slow_frames,
        "real_time": show.pace.state(),
        "governor": show.governor.state(show.params),
        "gpu_ms": {k: _round(v) for k, v in show.gpu_ms.items()},
        "cpu_ms": show.cpu.medians(),  # the main thread's, by stage (show/frame_cpu.py)
        "agents": show.swarm.count,
        "backend": {"gl": show.backend, "why": show.backend_why,
                    "context": show.ctx.info.get("GL_VERSION", "")},
        "visible": renderer.visible,
        "near_lure": renderer.near_lure,
        "counts_lag": (None if renderer.counts_frame is None
                       else renderer.frames - 1 - renderer.counts_frame),
        "readback": renderer.readback,
        "grid": {"neighbors": show.swarm.neighbors, "lanes": show.swarm.lanes,
                 "mean_candidates": _round(show.swarm.mean_candidates)},
        "far_draw": renderer.far_draw,
        "paused": show.paused,
        "params": params,
        "audio": show.audio.telemetry(),
        "midi": show.midi.state() if show.midi is not None else None,
        "osc": show.osc.state() if show.osc is not None else None,
        "web": show.web.state() if getattr(show, "web", None) is not None else None,
        "control": ([surface.state() for surface in show.surfaces]
                    if getattr(show, "surfaces", None) else None),
        "preset": show.looks.telemetry(show.show_time),
        "tempo": show.tempo.state() | {"range": [show.params["tempo_min"],
                                               show.params["tempo_max"]]},
        "link": link_state(show),
        "look": look_state(show),
        "outputs": show.outputs.telemetry() if getattr(show, "outputs", None) else None,
        "gc": show.collector.state() if getattr(show, "collector", None) else None,
        "modulated": {k: _round(v) for k, v in show.modulated.items()},
        "speed_scale": _round(show.speed_scale),
        "autopilot": (show.autopilot.telemetry(show.now)
                      if getattr(show, "autopilot", None) is not None else {"on": False}),
        "frame_size": list(renderer.last_size) if renderer.last_size else None,
        "lure": {"held": not show.lure.wandering,
                 "position": [_round(v) for v in show.lure_position()]},
        "selected": show.selected_param,
    }


def hud_lines(show: Show, compact: bool = False) -> list[str]:
    """The HUD: frame rate and GPU times, agents, the state of every input, the chosen
    parameter. Names and reasons from outside are made printable. `compact` (a small window,
    visual/ui/hud.py): without the GPU times, the neighbour search and the look's details."""
    clock, gpu = show.clock, show.gpu_ms

    def ms(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.2f}"

    renderer = show.renderer
    visible = renderer.visible

    def gpu_line() -> str:
        cpu = show.cpu.medians()
        return (f"GPU ms: simulate {ms(gpu['simulate'])}  cull {ms(gpu['cull'])}  draw "
                f"{ms(gpu['draw'])}  post {ms(gpu.get('post'))}  CPU ms "
                f"{ms(cpu and cpu['frame'])}")

    technical = [  # what a small window leaves out
        clock.readout("gpu", gpu_line),
        f"{show.swarm.neighbors} neighbours  GL {show.backend} "
        f"({'compute' if show.backend == '4.3' else 'transform feedback'})",
        f"look: {look_line(show)}",
    ]
    rate = clock.readout("rate", lambda: f"{clock.fps:5.1f} fps  {clock.frame_ms:6.2f} ms a "
                         "frame" if clock.fps and clock.frame_ms else "-- fps")
    behind = show.pace.hud_line()  # on the frame rate's line: it is about the frame rate
    lines = [
        f"{rate}  {behind}" if behind else rate,
        technical[0],
        # the counts change every frame as the swarm moves: read four times a second
        clock.readout("agents", lambda: f"agents {show.swarm.count:,}  visible "
                      f"{'-' if visible is None else f'{visible:,}'}  near lure "
                      f"{'-' if renderer.near_lure is None else renderer.near_lure}")
        + ("  PAUSED" if show.paused else ""),
        technical[1],
        f"audio: {audio_line(show.audio, clock)}",
        f"tempo: {tempo_line(show)}",
        technical[2],
    ]
    if compact:
        lines = [line for line in lines if line not in technical]
    if show.midi is not None:
        lines.append(f"midi: {midi_line(show.midi.state())}")
    if show.osc is not None:
        lines.append(f"osc: {osc_line(show.osc)}")
    if getattr(show, "web", None) is not None:
        lines.append(f"web: {web_line(show.web.state())}")
    lines.append(f"preset: {show.looks.status_line(show.show_time)}")
    if getattr(show, "autopilot", None) is not None:
        lines.append(f"autopilot: {autopilot_line(show.autopilot.telemetry(show.now), show.now)}")
    if show.looks.problem:
        lines.append(f"preset error: {show.looks.problem}")
    governed = show.governor.hud_line(show.params)
    if governed:  # what is lowered to hold the frame rate
        lines.append(governed)
    if getattr(show, "outputs", None):  # video out: each output's state, sent and dropped
        lines.append(f"outputs: {show.outputs.hud_line()}")
    lines += [f"{key}: {value}" for key, value in show.status.items()]
    lines.append(chosen_line(show))
    return [printable(line, 240) for line in lines]


def chosen_line(show: Show) -> str:
    name = show.selected_param
    value = show.params[name]
    shown = f"{value:.4g}" if isinstance(value, float) else str(value)
    modulated = show.modulated.get(name)
    if modulated is not None and modulated != value:
        shown += f" (now {modulated:.4g})"
    if show.midi is not None:
        knob = show.midi.state()["pickup"].get(name)
        if knob:
            shown += f"  knob at {knob['knob']:.4g}: turn it past the value to pick up"
    learn = "L: MIDI learn" if show.midi is not None else "MIDI off"
    return f"param [Up/Down, Left/Right]: {name} = {shown}   {learn}"


def tempo_line(show: Show) -> str:
    """BPM, where it comes from (held: no clock speaks; for the audio, how sure its tracker
    is), the beat in the bar ([#...]) and the tempo range the audio's tempo is read in."""
    tempo = show.tempo
    step = int(tempo.bar_phase * 4) % 4
    meter = "".join("#" if k == step else "." for k in range(4))
    source = f"{tempo.source}, held" if tempo.held else tempo.source
    waiting = f"  {len(show._waiting)} waiting for the {show.params['quantize']}" \
        if show._waiting else ""
    link = link_state(show)
    peers = "" if link is None else \
        f"  link: {link['peers']} peer{'' if link['peers'] == 1 else 's'}"
    sure = f" {tempo.confidence:.0%} sure" if tempo.source == "audio" and not tempo.held else ""
    span = f"  range {show.params['tempo_min']:g}-{show.params['tempo_max']:g}"
    return (f"{tempo.bpm:6.1f} BPM ({source}{sure})  [{meter}]  beat {tempo.beats}{span}"
            f"{waiting}{peers}")


def look_line(show: Show) -> str:
    """The agents' look and whether the post chain (bloom, feedback) runs."""
    v = show.values or show.params.as_dict()
    return (f"{v['shape']} {v['blend']}, palette {v['palette']} by {v['color_by']}, camera "
            f"{v['camera']}; post {show.renderer.post_state}")


def look_state(show: Show) -> dict[str, Any]:
    """Telemetry's `look` object."""
    v = show.values or show.params.as_dict()
    return {"post": show.renderer.post_state, "post_on": show.renderer.post_on,
            "software_gl": show.renderer.software,
            **{name: v[name] for name in ("shape", "blend", "palette", "color_by", "camera",
                                          "tonemap")}}


def link_state(show: Show) -> dict[str, Any] | None:
    """The Link session's state (peers, its tempo), None without --link."""
    link = show.tempo.sources.get("link")
    state = getattr(link, "state", None)
    return state() if state is not None else None


def audio_line(audio: Any, clock: FrameClock | None = None) -> str:
    """State and device, a level meter (each frame: the HUD draws it as a bar), the level,
    bands and onsets (with `clock`, its readout's, four times a second: not laid out anew)."""

    def figures() -> str:
        bands = audio.bands
        return (f"{audio.level:4.2f}  low {bands.low:4.2f} mid {bands.mid:4.2f} high "
                f"{bands.high:4.2f}  onsets {audio.onsets}")
    source = f"{audio.state} ({audio.device})" if audio.device else audio.state
    return (f"{source}  [{'#' * round(audio.level * 10):<10}] "
            f"{figures() if clock is None else clock.readout('audio', figures)}")


def midi_line(state: dict[str, Any]) -> str:
    line = state.get("state") or "MIDI"
    if len(line) > 90:  # the full reason went to the console once; the HUD gets its start
        line = line[:87] + "..."
    learn = state["learn"]
    if learn["active"]:
        line += f"  LEARN: turn a knob for {learn['param']} (L cancels)"
    waiting = state["pickup"]
    if waiting:
        shown = ", ".join(f"{name} knob {info['knob']:.3g}" for name, info
                          in list(waiting.items())[:3])
        line += f"  pickup: {shown}"
    return line


def osc_line(osc: Any) -> str:
    line = f"{osc.host}:{osc.port}  {osc.applied} applied"
    if osc.dropped:
        line += f"  {osc.dropped} over the frame's budget"
    if osc.rejected:
        reason = osc.last_error or ""
        reason = reason if len(reason) <= 70 else reason[:67] + "..."
        line += f"  {osc.rejected} refused (latest: {reason})"
    return line


def web_line(state: dict[str, Any]) -> str:
    """The web remote: where it listens, pages connected, what it applied and refused."""
    clients = state["clients"]
    line = (f"{state['listening']}{' (token)' if state['token'] else ''}  {clients} "
            f"page{'' if clients == 1 else 's'}  {state['applied']} applied")
    if state["dropped"]:
        line += f"  {state['dropped']} over the rate"
    refused = state["rejected"] + state["forbidden"]
    if refused:
        reason = state["last_error"] or ""
        reason = reason if len(reason) <= 70 else reason[:67] + "..."
        line += f"  {refused} refused (latest: {reason})"
    return line


def autopilot_line(state: dict[str, Any], now: float) -> str:
    """The autopilot on the HUD: the section and where in its phrase, the look, the next
    change and who has the look, in seconds from `now` (the show's clock: a live show's is
    the machine's, whose absolute seconds the HUD once showed)."""
    if not state.get("on"):
        return "off (A: on)"
    phrase = state.get("phrase")
    where = f" bar {phrase['bar']}" if phrase else ""
    upcoming = state.get("next")
    after = (f"  next: {upcoming['section']} in {max(upcoming['t'] - now, 0.0):.1f} s"
             if upcoming else "")
    who = (f"  performer for {max(state['resumes_at'] - now, 0.0):.1f} s"
           if state.get("control") == "performer" and state.get("resumes_at") is not None
           else "")
    return f"{state.get('section')}{where}  {state.get('look') or '-'}{after}{who}"
