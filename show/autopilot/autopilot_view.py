"""What a control surface shows of the autopilot (the web page, the control window): the
section and where in its phrase, the look, the next planned change, who is in control and
when the autopilot takes the look back, in the same words on both, and whether there is an
autopilot to switch at all.

Pure: made from telemetry's `autopilot` object (show/autopilot/live_autopilot.py, or None for
a show started without --autopilot) and the show's time; any thread.
"""

from __future__ import annotations

import math
from typing import Any

NOT_RUNNING = "not running: start the show with --autopilot to use it"


def _seconds(value: float) -> str:
    return f"{max(math.ceil(value - 1e-6), 0):.0f} s"


def autopilot_view(state: dict[str, Any] | None, now: float, note: str | None = None
                   ) -> dict[str, Any]:
    """The autopilot as a surface shows it: `available` (an autopilot to switch), `on`,
    `control` ("autopilot", "performer", "off"), `section`, `look`, `resumes_in` and
    `next_in` (seconds, or None), `said` (the switch was pressed on a show without one: the
    show's `note`, to be shown, not kept quiet) and `lines`: where the song is, the next
    change, who is in control."""
    if state is None or "control" not in state:
        return {"available": False, "on": False, "control": "off", "section": None,
                "look": None, "resumes_in": None, "next_in": None, "said": bool(note),
                "lines": ["", "", NOT_RUNNING]}
    control = state.get("control", "off")
    section, look = state.get("section"), state.get("look")
    phrase = state.get("phrase")
    where = (section or "listening").upper()
    if phrase:
        where += f"  bar {phrase['bar']} of 4"
    where += f"  |  {look}" if look else "  |  no look chosen yet"
    resumes_in = (None if state.get("resumes_at") is None
                  else max(float(state["resumes_at"]) - now, 0.0))
    upcoming = state.get("next")
    next_in = None if upcoming is None else max(float(upcoming["t"]) - now, 0.0)
    if not state.get("on"):
        coming = "next: nothing (switched off)"
    elif upcoming is None:
        coming = "next: when the music moves to another section"
    elif upcoming.get("look"):
        coming = f"next: {upcoming['section']} in {_seconds(next_in)}: {upcoming['look']}"
    else:  # the next phrase's change, its look chosen then
        coming = f"next: another {upcoming['section']} look in {_seconds(next_in)}"
    if next_in is not None and resumes_in is not None and next_in < resumes_in:
        coming += " (left to you)"  # the performer will still have the look then
    who = {"autopilot": "autopilot in control", "off": "autopilot off",
           "performer": "performer in control"}.get(control, str(control))
    if resumes_in is not None:
        who += f": autopilot back in {_seconds(resumes_in)}"
    return {"available": True, "on": bool(state.get("on")), "control": control,
            "section": section, "look": look,
            "resumes_in": None if resumes_in is None else round(resumes_in, 2),
            "next_in": None if next_in is None else round(next_in, 2), "said": False,
            "lines": [where, coming, who]}
