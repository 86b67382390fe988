"""The performer's user interface: the control window (Dear ImGui through imgui-bundle, drawn
with moderngl in a pyglet window)."""
