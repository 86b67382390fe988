"""The performer's user interface: the output window and its HUD, the screens, and the control
window (control_window/: Dear ImGui through imgui-bundle, drawn with moderngl in a pyglet
window)."""
