"""The control window's look: today's dark style on imgui (flat, the colours of
control_layout.py), at a scale for high-DPI screens, and its fonts: DejaVu Sans
where the system has it (as the pyglet window before), else the Roboto that imgui-bundle ships
in its wheel on every platform. Main thread only, with the window's imgui context current.
"""

from __future__ import annotations

from pathlib import Path

import imgui_bundle
from imgui_bundle import imgui

from swarm_instrument.visual.ui.control_window.control_layout import (
    BACKGROUND,
    DIM,
    FILL,
    HOVER,
    PANEL,
    TEXT,
    TRACK,
    rgbf,
)

FONT_SIZE = 13.0  # pixels at 96 dpi
FONTS = {  # DejaVu Sans where the system has it, else the Roboto that imgui-bundle ships
    "regular": ("DejaVuSans.ttf", "Roboto/Roboto-Regular.ttf"),
    "bold": ("DejaVuSans-Bold.ttf", "Roboto/Roboto-Bold.ttf"),
}
FONT_FOLDERS = ("/usr/share/fonts/truetype/dejavu", "/usr/share/fonts/TTF",
                "/usr/share/fonts/dejavu", "/usr/local/share/fonts", "/Library/Fonts",
                str(Path.home() / "Library/Fonts"), "C:/Windows/Fonts")


def font_file(names: tuple[str, str]) -> str | None:
    """The system's DejaVu Sans (or Bold), else imgui-bundle's Roboto, else None."""
    for folder in FONT_FOLDERS:
        path = Path(folder) / names[0]
        if path.is_file():
            return str(path)

    bundled = Path(imgui_bundle.__file__).parent / "assets" / "fonts" / names[1]
    return str(bundled) if bundled.is_file() else None


def load_fonts() -> dict[str, imgui.ImFont]:
    """The regular and bold fonts into the current context's atlas (imgui's own where
    neither DejaVu nor Roboto is found)."""
    io = imgui.get_io()
    io.fonts.flags |= imgui.ImFontAtlasFlags_.no_baked_lines  # the atlas is sampled nearest
    fonts = {}
    for name, names in FONTS.items():
        path = font_file(names)
        fonts[name] = io.fonts.add_font_from_file_ttf(path, FONT_SIZE) if path else \
            io.fonts.add_font_default()
    return fonts


def apply_theme(scale: float) -> None:
    """Today's dark style, flat, at `scale` (sizes and fonts)."""
    style = imgui.get_style()
    colors = {
        imgui.Col_.window_bg: BACKGROUND, imgui.Col_.child_bg: BACKGROUND,
        imgui.Col_.text: TEXT, imgui.Col_.text_disabled: DIM, imgui.Col_.border: TRACK,
        imgui.Col_.frame_bg: TRACK, imgui.Col_.frame_bg_hovered: HOVER,
        imgui.Col_.frame_bg_active: HOVER, imgui.Col_.button: TRACK,
        imgui.Col_.button_hovered: HOVER, imgui.Col_.button_active: FILL,
        imgui.Col_.scrollbar_bg: PANEL, imgui.Col_.scrollbar_grab: TRACK,
        imgui.Col_.scrollbar_grab_hovered: HOVER, imgui.Col_.scrollbar_grab_active: FILL,
        imgui.Col_.nav_cursor: (255, 255, 255), imgui.Col_.input_text_cursor: TEXT,
    }
    for index, color in colors.items():
        style.set_color_(index, imgui.ImVec4(*rgbf(color)))
    style.set_color_(imgui.Col_.text_selected_bg, imgui.ImVec4(*rgbf(FILL, 0.6)))
    for name, value in (("frame_padding", (4, 2)), ("item_spacing", (4, 2)),
                        ("item_inner_spacing", (4, 2)), ("window_padding", (0, 0))):
        setattr(style, name, imgui.ImVec2(value[0] * scale, value[1] * scale))
    style.frame_rounding = style.grab_rounding = style.scrollbar_rounding = 2 * scale
    style.window_rounding = style.child_rounding = 0.0
    style.window_border_size = style.child_border_size = style.frame_border_size = 0.0
    style.scrollbar_size = 10 * scale
    style.anti_aliased_fill = False  # rectangles on pixels: no fringes to shade
    style.font_size_base = FONT_SIZE
    style.font_scale_dpi = scale
