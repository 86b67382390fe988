"""The performer's user interface: the output window and its HUD, the screens, and the control
window (control_window/: Dear ImGui through imgui-bundle, drawn with moderngl in a pyglet
window).

pyglet checks every GL call it makes with a `glGetError` unless told otherwise (its
`debug_gl` option, on by default; pyglet's documentation: "this will severely impact
performance"): a show's HUD and window make some forty such calls a frame. It is set off here,
before any part of this package imports `pyglet.gl` (which reads it once), unless the
environment asks for it (`PYGLET_DEBUG_GL=1`, to debug a GL error of pyglet's own)."""

import os

import pyglet

if "PYGLET_DEBUG_GL" not in os.environ:
    pyglet.options["debug_gl"] = False
