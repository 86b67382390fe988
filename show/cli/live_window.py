"""The live show in a window: full-screen (or windowed) under pyglet, with the control window
where asked (--output-screen, --control-screen). The show is a `LiveShow`
(show/cli/live_show.py), the window's frames its `Loop.frame`. Main thread only.
"""

from __future__ import annotations

import logging

import pyglet

from swarm_instrument.show.cli.live_show import LiveShow
from swarm_instrument.show.cli.screen_plan import ScreenPlan, plan_screens
from swarm_instrument.show.inputs.control_surface import (
    ControlSurface,
    FrameTakers,
    ThumbnailJob,
    layout_groups,
)
from swarm_instrument.visual.ui.control_window.preview import Preview
from swarm_instrument.visual.ui.screens import ScreenArea, side_by_side
from swarm_instrument.visual.ui.window import (
    LiveWindow,
    open_control_window,
    open_window,
    screens_or_error,
)

log = logging.getLogger(__name__)


def run_window(live: LiveShow) -> None:
    """The show full-screen (or windowed) under pyglet, with the control window where asked
    (--output-screen, --control-screen); WindowError if no window opens."""
    args = live.args
    screens = screens_or_error()
    plan = plan_screens([f"{s.width}x{s.height}" for s in screens], args.screen,
                        getattr(args, "output_screen", None),
                        getattr(args, "control_screen", None))
    for note in plan.notes:
        log.info(note)
    beside = None  # one screen for both: the picture and the control window side by side
    if plan.control is not None and not plan.separate:
        where = screens[plan.output]
        beside = side_by_side(ScreenArea(where.x, where.y, where.width, where.height),
                              args.size)
    window = open_window(plan.output, fullscreen=not (args.windowed or args.size or beside),
                         size=(beside[0].width, beside[0].height) if beside else args.size,
                         gl=args.gl, screens=screens)
    if beside:
        window.set_location(beside[0].x, beside[0].y)
    screen = LiveWindow(window, fps=args.fps, overlay=not plan.separate)
    show = live.build(screen.ctx, tuple(window.get_framebuffer_size()), rate=screen.fps)
    show.governor.display_fps = screen.fps
    show.late_keys = screen.take_keys  # keys at the late latch too, as MIDI and OSC
    if plan.control is not None:
        open_control(live, screen, screens[plan.control], plan, beside[1] if beside else None)
    width, height = window.get_framebuffer_size()
    log.info(f"window: {show.swarm.count} agents on screen {plan.output}, {width}x{height}"
             f"{' full-screen' if window.fullscreen else ''}, {screen.fps:g} fps cap, "
             f"{screen.ctx.info['GL_RENDERER']}. Keys: F full-screen, H HUD, Space pause, "
             "R respawn, Esc twice to quit")
    screen.run(live)
    # pyglet's loop may have drawn the control window last: the output's context again, for the
    # screenshot and every GPU object the show releases (framebuffers, vertex arrays: its own)
    window.switch_to()
    image = screen.last_image
    if args.screenshot and image is None:
        image = screen.read_screen()
    live.finish(image)
    window.close()


def open_control(live: LiveShow, screen, where, plan: ScreenPlan,
                 area: ScreenArea | None = None) -> None:
    """The control window on screen `where` (covering it when it is a screen of its own and
    not --windowed; at `area` beside the picture when they share one), wired as one more
    input of the show; the output window's context is current again afterwards. A control
    window that cannot open is said and the show plays on without it."""
    from swarm_instrument.visual.ui.control_window.control_window import ControlWindow  # noqa: PLC0415 - display: pyglet.window

    show, args = live.show, live.args
    version = (4, 3) if screen.ctx.version_code >= 430 else (4, 1)  # as the output's
    try:
        window = open_control_window(where, fullscreen=plan.separate and not args.windowed,
                                     size=(area.width, area.height) if area else None,
                                     version=version)
        if area is not None:
            window.set_location(area.x, area.y)
    except (pyglet.window.WindowException, pyglet.window.NoSuchConfigException,
            pyglet.gl.ContextException) as exc:
        screen.window.switch_to()
        log.info(f"control window: cannot open it ({exc}); the show goes on without it")
        return
    control = ControlWindow(window, layout_groups(), on_key=screen.on_key_press)
    control.escape = screen.escape
    screen.window.switch_to()  # moderngl draws with the output's context
    preview = Preview(screen.ctx)
    thumbnails = ThumbnailJob(screen.ctx, show.looks.bank)
    surface = ControlSurface(control, preview, thumbnails,
                             where=f"control on screen {plan.control}, output on screen "
                                   f"{plan.output}" + ("" if plan.separate else " (one screen)"))
    show.surfaces.append(surface)
    live.loop.outputs = FrameTakers([live.loop.outputs, preview])  # before the HUD
    log.info(f"control window: screen {plan.control}, {window.width}x{window.height}: the "
             "preview, every parameter, the preset slots (click: recall, SAVE then a slot: "
             "save), meters")
