"""Text from outside made safe to print: a preset's name, an OSC address, a file name or a
library's message can hold terminal escape sequences (`ESC ] 0 ; TITLE BEL` retitles the
performer's terminal, `ESC [ 2 J` clears it) or a lone surrogate that makes a UTF-8 console
raise UnicodeEncodeError. Pure functions, any thread.
"""

from __future__ import annotations

import unicodedata


def printable(text: object, limit: int | None = None, one_line: bool = False) -> str:
    """`text` with every control, format or unpaired-surrogate character shown as an escape
    (`\\x1b`, `\\u202e`, `\\ud800`) instead of sent; newlines and tabs kept unless
    `one_line` (a name quoted in a one-line message). `limit` cuts a long text to that many
    characters with '...'."""
    text = text if isinstance(text, str) else str(text)
    if limit is not None and len(text) > limit:
        text = text[:max(limit - 3, 0)] + "..."
    if text.isprintable():  # the common case: nothing to escape
        return text
    keep = "" if one_line else "\n\t"
    out = []
    for char in text:
        if char in keep or (char.isprintable() and unicodedata.category(char) != "Cs"):
            out.append(char)
        else:
            code = ord(char)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000
                       else f"\\U{code:08x}")
    return "".join(out)
