"""Where the picture and the control window go: --screen, --output-screen and
--control-screen against the screens there are. Pure: the screens' sizes in, a plan out
(show/cli/live_show.py opens the windows). Main thread.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ScreenPlan:
    """Where the picture and the control window go: `output` and `control` are screen
    numbers (control None: no control window); `separate`: on screens of their own, so the
    picture has nothing over it. `notes`: what to tell the performer, one line each."""

    output: int
    control: int | None
    separate: bool
    notes: tuple[str, ...] = ()


def plan_screens(sizes: list[str], screen: int, output_screen: int | None,
                 control_screen: int | None) -> ScreenPlan:
    """--screen, --output-screen and --control-screen against the screens there are
    (`sizes`: their descriptions, in order). A number that names no screen is said and set
    aside, never fatal: the picture falls back to --screen, the control window to another
    screen, or to a window beside the picture (which keeps its HUD) when there is one."""
    count = len(sizes)
    listed = ", ".join(f"{i}: {size}" for i, size in enumerate(sizes))
    notes = []
    output = screen
    if output_screen is not None:
        if 0 <= output_screen < count:
            output = output_screen
        else:
            notes.append(f"--output-screen {output_screen}: no such screen (screens: {listed});"
                         f" the picture plays on screen {screen}")
    if output_screen is None and control_screen is None:
        return ScreenPlan(output, None, False, tuple(notes))
    control = None
    if control_screen is not None:
        if 0 <= control_screen < count:
            control = control_screen
        else:
            notes.append(f"--control-screen {control_screen}: no such screen (screens: "
                         f"{listed}); the control window goes "
                         + ("on another screen" if count > 1 else "in a window"))
    if control is None:
        control = next((i for i in range(count) if i != output), output)
    separate = control != output
    if separate:
        notes.append(f"screens: the picture on screen {output} ({sizes[output]}) with nothing "
                     f"over it, the control window on screen {control} ({sizes[control]})")
    else:
        notes.append("one screen for both: the picture and the control window side by side, "
                     "neither over the other; the picture keeps its HUD (H toggles it)")
    return ScreenPlan(output, control, separate, tuple(notes))
