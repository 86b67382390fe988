"""The show's frame: where audio, control and the picture meet.

    update    (now)   audio analysis; MIDI and OSC turned into actions and carried out; the
                      look (morph, crossfade, recovery); this frame's values (modulation, the
                      audio speed boost, a burst)
    advance   (dt)    one swarm step (unless paused); the camera follows the swarm
    latch     (now)   late latching: the audio and messages that came meanwhile, and the
                      values again, so this frame's picture answers them
    draw      (target) cull and indirect draw into a framebuffer, bloom and feedback, then
                      the display pass (live, those waited for and the inputs read once
                      more before it: show/loop.py latches_twice)

`Show` owns the swarm, the renderer, the camera and the lure, holds the inputs, and carries out
every `Action` (control/actions.py) in `act`, whatever it came from: a key, MIDI, OSC, a
recorded track. It never reads a clock: the loop (show/loop.py) gives it the time. `visual/`
gets plain numbers (this frame's values), never the registry. Main thread only; nothing here
reads agent data back.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import moderngl
import numpy as np

from swarm_instrument.audio.analysis.features import speed_scale
from swarm_instrument.audio.base import AudioFrameSource, Silence
from swarm_instrument.control.actions import QUANTIZABLE, Action
from swarm_instrument.control.looks.files import FileProblem
from swarm_instrument.control.looks.presets import Preset
from swarm_instrument.control.musical_time.tempo import TapTempo, Tempo
from swarm_instrument.control.parameters.modulation import Burst, Route, modulate, tempo_sources
from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.show.cli.options import ShowOptions
from swarm_instrument.show.frame_cpu import FrameCpu
from swarm_instrument.show.governor import Governor
from swarm_instrument.show.inputs.beat_clock import AudioTempo
from swarm_instrument.show.inputs.carry_out import carry_out
from swarm_instrument.show.inputs.input_poll import publish_state, read_inputs
from swarm_instrument.show.inputs.input_roles import MidiIn, OscIn, Recorder, WebIn
from swarm_instrument.show.inputs.selection import Selection
from swarm_instrument.show.look_state import Bank, Looks, Recovery
from swarm_instrument.show.pace import Pace
from swarm_instrument.show.report import FrameClock, hud_lines, telemetry
from swarm_instrument.show.shader_reload import ShaderReload
from swarm_instrument.visual.backends import RendererRole, SwarmRole, backend_classes
from swarm_instrument.visual.gpu.context import pick_backend
from swarm_instrument.visual.gpu.fence import GpuWait
from swarm_instrument.visual.gpu.shaders import resolve_shader_dir
from swarm_instrument.visual.gpu.timers import GpuTimer
from swarm_instrument.visual.render.camera import OrbitCamera
from swarm_instrument.visual.sim.agents import MAX_DT, spawn_state
from swarm_instrument.visual.sim.lure import Lure

log = logging.getLogger(__name__)


class Show:
    def __init__(self, ctx: moderngl.Context, params: Params, options: ShowOptions, *,
                 audio: AudioFrameSource | None = None, routes: Iterable[Route] = (),
                 midi: MidiIn | None = None, presets: Bank | None = None,
                 preset: Preset | None = None, recovery: Recovery | None = None,
                 osc: OscIn | None = None, web: WebIn | None = None) -> None:
        self.ctx = ctx
        self.params = params
        self.options = options
        self.audio = audio if audio is not None else Silence()
        self.audio.analysis_at_latch = self.audio.refreshes and options.live  # one a frame
        if options.live:  # the live input's beat tracker off the frame, on a thread
            self.audio.beats_on_thread()
        self.midi = midi
        self.osc = osc
        self.web = web
        self.looks = Looks(params, routes, bank=presets, preset=preset, recovery=recovery,
                           pinned=options.pinned, seed=options.seed, pick_up=self.pick_up)
        self._recorder: Recorder | None = None  # --record-control
        self.selection = Selection()  # the HUD's chosen parameter: keys change it, L learns it
        shaders = resolve_shader_dir(options.shader_dir)  # fixed for the show, reloads too
        self._shaders = ShaderReload(shaders)
        self.burst = Burst()  # a separation burst, on the show's time
        values = params.as_dict()
        # Chosen by what the context offers, never by trying a compute compile: a failed one
        # leaves a GL error behind that breaks pyglet's next call.
        try:
            self.backend, self.backend_why = pick_backend(ctx, options.gl)
        except ValueError as exc:
            raise FileProblem(str(exc)) from None
        swarm_class, renderer_class = backend_classes(self.backend)
        log.info(f"GL {self.backend} backend: {self.backend_why}")
        self.swarm: SwarmRole = swarm_class(ctx, values, neighbors=options.neighbors,
                                            seed=options.seed, shader_dir=shaders,
                                            position=options.position, velocity=options.velocity)
        self.swarm.fixed_lag = options.reproducible  # its lanes from the crowd, a fixed step late
        if options.obstacles:
            self.swarm.set_obstacles(options.obstacles)
        self.renderer: RendererRole = renderer_class(ctx, shader_dir=shaders)
        self.renderer.fixed_lag = options.reproducible
        self.renderer.stable_order = options.reproducible  # lists in agent order: same frames
        # Real time on any GPU (fed by whoever paces the frames: a live, paced show only).
        self.governor = Governor(software=self.renderer.software)
        # The late latch's wait for the scene's passes (draw): sleeps, never spins a core
        self.scene_wait = GpuWait(ctx, software=self.renderer.software)
        self.camera = OrbitCamera()
        self.lure = Lure(params["contain_radius"], flat=params["dimensions"] == 2)
        self._sim_timer = GpuTimer(ctx)
        if not self.renderer.has_fences:
            log.info("GL fences unavailable: counts and GPU times are read two frames late, which "
                "waits whenever the GPU is further behind")
        self.clock = FrameClock()  # ticked by the loop, read by the HUD and telemetry
        self.pace = Pace()  # the show's time against the clock's: ticked by the loop too
        self.cpu = FrameCpu()  # the CPU time of each stage of the frame: stamped by the loop
        self.paused = False
        self.frame = 0
        self.now = 0.0  # the loop's time at the last update
        self.sim_time = 0.0  # simulated seconds: the influencer wanders on this clock
        self.show_time = 0.0  # seconds of show: the camera orbits and morphs run on it
        self.frame_dt = 0.0  # seconds this frame moved the show on (its steps together)
        self.respawns = 0
        self.values: dict[str, Any] = {}  # this frame's values: the registry, modulated
        self.modulated: dict[str, Any] = {}  # those modulation and bursts moved this frame
        self.speed_scale = 1.0  # the audio boost: 1 + level * audio_speed_boost
        self.status: dict[str, str] = {}  # extra HUD lines: shaders, a capped count, ...
        self.autopilot: Any = None  # --autopilot (show/autopilot/autopilot.py), set by a render
        self.outputs: Any = None  # video out (show/video_outputs.py): the live run opens, ends it
        self.collector: Any = None  # the live run's garbage collector (show/idle_gc.py)
        # More control surfaces (the control window, show/inputs/control_surface.py), read and
        # closed beside OSC and the web. `late_keys`: the window's keys taken again at the latch.
        self.surfaces: list[Any] = []
        self.late_keys: Callable[[], bool] | None = None
        # Musical time: tap tempo and the audio's beats here; the live run adds MIDI clock and
        # Link (show/cli/live_show.py). Quantised actions wait in `_waiting` for a beat or bar.
        self.tap = TapTempo()
        self.tempo = Tempo([self.tap, AudioTempo(self.audio)])
        self._waiting: list[Action] = []  # the HUD reads it too
        self.osc_said = 0  # refusals already said on the console
        self._notes: dict[str, float] = {}  # when each rate-limited note may be said again

    @property
    def routes(self) -> list[Route]:
        return self.looks.routes

    @property
    def recorder(self) -> Recorder | None:
        """--record-control's recorder: every frame's values, every action and recall."""
        return self._recorder

    @recorder.setter
    def recorder(self, recorder: Recorder | None) -> None:
        self._recorder = self.looks.recorder = recorder

    # ---- update -----------------------------------------------------------------------------

    def update(self, now: float) -> None:
        """Inputs -> this frame's values. `now` is the loop's time in seconds (the wall clock
        live, the song's in a render)."""
        self.now = now
        self.frame_dt = 0.0  # what advance() steps this frame: the feedback follows it
        self.poll_shaders(now)
        self.audio.set_tempo_range(self.params["tempo_min"], self.params["tempo_max"])
        self.audio.update(now)
        for message in self.audio.take_messages():
            log.info(f"audio: {message}")
        read_inputs(self, now)
        self._update_tempo(now)
        if self.autopilot is not None:  # the song's form: a look's change due this frame
            self.autopilot.update(self, now)
        self.looks.update(self.show_time, now)
        if self.recorder is not None:  # on the show's clock, as an offline render replays it
            self.recorder.capture(self, self.show_time)
        self.speed_scale = speed_scale(self.audio.level, self.params["audio_speed_boost"])
        self._values_now()

    def latch(self, now: float) -> None:
        """Late latching, just before the draw: the audio blocks, messages and keys that came
        while the simulation stepped are read, and this frame's values made again from them:
        the picture answers them in this frame (the simulation stepped with the update's)."""
        self.now = now
        fresh = self.audio.refresh(now) | bool(self.late_keys and self.late_keys())
        if read_inputs(self, now) or fresh:
            self._values_now()

    def publish(self) -> None:
        """Once a frame is shown, outside it (the live run's idle): the web page and the
        control surfaces are handed the show's state as this frame left it."""
        publish_state(self, self.now)

    def _values_now(self) -> None:
        """This frame's values: the registry's, modulated (audio, tempo), with any burst."""
        base = self.params.as_dict()
        sources = {**self.audio.sources(),
                   **tempo_sources(self.tempo.beat, self.tempo.bar_phase)}
        self.modulated = modulate(self.looks.routes, sources, base, self.tempo.beat)
        self.burst.apply(self.modulated, base, self.show_time)
        self.values = {**base, **self.modulated}

    def _update_tempo(self, now: float) -> None:
        """Musical time moves on; on a beat (or a bar) the actions waiting for it go."""
        choice = self.params["tempo_source"]
        self.tempo.chosen = None if choice == "auto" else choice
        self.tempo.update(now)
        quantize = self.params["quantize"]
        due = (quantize == "off" or (quantize == "beat" and self.tempo.crossed_beat)
               or (quantize == "bar" and self.tempo.crossed_bar))
        if self._waiting and due:
            waiting, self._waiting = self._waiting, []
            for action in waiting:
                self.carry_out(action)

    def played(self, names: set[str]) -> None:
        """The performer changed `names` live: the look lets go of them; a played `bpm` is a
        tempo to propose (tap tempo takes it; a Link session is asked for it)."""
        self.looks.played(names)
        if "bpm" in names:
            self.tap.set_tempo(self.params["bpm"], self.now)
            propose = getattr(self.tempo.sources.get("link"), "propose", None)
            if propose is not None:
                propose(self.params["bpm"])

    def note(self, key: str, every: float) -> bool:
        """True when the note `key` may be said now (at most once every `every` seconds of
        the loop's time): a flood must not flood the console."""
        if self.now < self._notes.get(key, -math.inf):
            return False
        self._notes[key] = self.now + every
        return True

    def poll_shaders(self, now: float) -> None:
        """Shader hot reload (show/shader_reload.py): swarm and renderer, all or none."""
        self._shaders.poll(now, (self.swarm, self.renderer), self.status)

    @property
    def shader_error(self) -> str | None:
        """The last reload's error (file and line); None while the shaders compile."""
        return self._shaders.error

    # ---- actions ----------------------------------------------------------------------------

    def act(self, action: Action) -> None:
        """Carry out one action, whatever asked for it (a key, MIDI, OSC); with `quantize` on, a
        recall, respawn or burst waits for a beat or bar (`carry_out`: at once, as a replay)."""
        if action.kind in QUANTIZABLE and self.params["quantize"] != "off":
            self._waiting.append(action)
            return
        self.carry_out(action)

    def carry_out(self, action: Action) -> None:
        """Carry out `action` now (show/inputs/carry_out.py)."""
        carry_out(self, action)

    def pick_up(self) -> None:
        """Knobs pick up values set another way (a recall, OSC, a key) instead of jumping."""
        if self.midi is not None:
            self.midi.preset_recalled()

    @property
    def selected_param(self) -> str:
        """The parameter the HUD marks (show/inputs/selection.py)."""
        return self.selection.name

    def nudge(self, steps: float) -> None:
        """Left/Right: the chosen parameter moved. The performer played it: a morph lets go,
        knobs pick up."""
        values = self.selection.nudged(self.params, steps)
        if values is not None:
            self.act(Action("set", values=values))

    def respawn(self) -> None:
        """A fresh spawn (a new seed each time, so R gives a new start)."""
        self.respawns += 1
        position, velocity = spawn_state(self.governor.count(self.params),
                                         self.params.as_dict(), self.options.seed + self.respawns)
        self.swarm.set_state(position, velocity)

    def move_lure(self, point: Sequence[float]) -> None:
        self.act(Action("lure", values={"point": tuple(float(v) for v in point)}))

    def lure_position(self) -> np.ndarray:
        self.lure.radius = self.params["contain_radius"]
        self.lure.flat = self.params["dimensions"] == 2
        return self.lure.position(self.now, self.sim_time)

    # ---- advance and draw ------------------------------------------------------------------

    def advance(self, dt: float) -> None:
        """Simulate one step of `dt` (unless paused); the camera's clock moves either way."""
        count = self.governor.count(self.params)
        if self.swarm.count != count:
            asked = self.governor.cap(self.params, self.options.count_limit)
            if asked is not None:  # said at most every 10 s
                limit = self.params["count"]
                self.status["count"] = f"capped at {limit:,} (asked {asked:,})"
                if self.note("count", 10.0):
                    log.info(f"count {asked:,}: more than this machine holds live; capped at "
                             f"{limit:,}")
            count = self.governor.count(self.params)
            self.swarm.resize(count, self.params.as_dict())  # no stalled frame
        self.show_time += dt
        self.frame_dt += dt
        values = self.governor.governed(self.values or self.params.as_dict(), self.params)
        camera = self.camera
        camera.mode = values["camera"]
        camera.distance_scale = float(values["camera_distance"])
        camera.time += dt * float(values["orbit_speed"])  # the orbit's clock: its pace played
        camera.follow(self.renderer.swarm_radius, dt, self.renderer.swarm_center)
        if self.paused:
            return
        with self._sim_timer:
            self.swarm.step(dt, values, target=self.lure_position(),
                            speed_scale=self.speed_scale)
        self.sim_time += min(dt, MAX_DT)

    def draw(self, framebuffer: moderngl.Framebuffer, size: tuple[int, int] | None = None,
             late: Callable[[], float] | None = None) -> None:
        """Cull and draw into `framebuffer`, `size` pixels (default: its own), bloom and feedback
        with them. `late` (the loop's clock, show/loop.py latches_twice): once the GPU has
        done those, the inputs are read again and the display pass (exposure, tone map, dither)
        takes them: they show in this frame, and what follows their latch is that one pass.
        Bloom and feedback take them in the next frame."""
        values = self.values or self.params.as_dict()
        renderer, governor = self.renderer, self.governor
        renderer.post_held = governor.post_held(self.params)
        renderer.draw_scene(self.swarm, self.camera, tuple(size or framebuffer.size), values,
                            lure=self.lure_position(), time=self.show_time,
                            show_lure=not self.lure.wandering,
                            scale=governor.render_scale(self.params), dt=self.frame_dt)
        if late is not None:
            # The scene drawn (on a GPU the frame sleeps meanwhile; the GIL released, so a web
            # gesture that comes now is queued for the latch): from the latch to the picture
            # is the display pass alone.
            self.scene_wait.wait()
            self.latch(late())
        renderer.present(framebuffer, self.values or values)
        self.frame += 1

    # ---- what the HUD and telemetry show ----------------------------------------------------

    @property
    def gpu_ms(self) -> dict[str, float | None]:
        return {"simulate": self._sim_timer.last_ms, **self.renderer.gpu_ms}

    def telemetry(self) -> dict[str, Any]:
        return telemetry(self)

    def hud_lines(self, compact: bool = False) -> list[str]:
        return hud_lines(self, compact)

    def release(self) -> None:
        self.audio.close()
        if self.midi is not None:
            self.midi.close()
        if self.osc is not None:
            self.osc.close()
        if self.web is not None:
            self.web.close()
        for surface in self.surfaces:
            surface.close()
        self.surfaces = []
        self.looks.close()
        for source in self.tempo.sources.values():  # a Link session left, ...
            close = getattr(source, "close", None)
            if close is not None:
                close()
        self._sim_timer.release()
        self.renderer.release()
        self.swarm.release()
