"""Reading and writing the files a user hands the instrument: presets, MIDI mappings, the
recovery file and swarm state.

Every user file is read through one function, `read_bytes`, because a path on the command line
or in a preset folder can be anything: a FIFO (an ordinary open would wait forever for a
writer), a device such as /dev/zero (an endless read), a folder, or a file far too big. It opens
without blocking, refuses whatever is not a regular file and reads at most a size cap. JSON then
goes through `read_json`, which also bounds what the parser can be made to do: nesting depth
(checked by a cheap scan first, so Python's recursion limit is never reached), digits in a
number, NaN and Infinity, and text that is not one line of Unicode (lone surrogate escapes,
control characters).

Every failure is a `FileProblem` whose message is one line that names the file and, where it
can, the key, and says what to do; nothing here leaves a half-written file behind.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from swarm_instrument.control.text import printable

# Presets, mappings and the recovery file are a few kilobytes; a megabyte is plenty of room and
# bounds the time and memory a hostile file can cost.
JSON_LIMIT = 1 << 20
MAX_DEPTH = 64  # a preset nests 3 levels, a mapping 3: anything deeper is not ours
MAX_DIGITS = 30  # a float's repr has at most 17 significant digits and a 3-digit exponent

_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


class FileProblem(ValueError):
    """A file that cannot be used: the message names it and says why."""


def read_bytes(path: str | os.PathLike, limit: int, what: str = "file") -> bytes:
    """The whole content of a regular file of at most `limit` bytes, or FileProblem.

    Opened with O_NONBLOCK, so a FIFO opens at once (and is then refused) instead of waiting
    for a writer; fstat on the open descriptor decides, so what is read is what was checked.
    At most limit + 1 bytes are read, so a file that grows, or lies about its size (/proc),
    still costs no more than that. `what` names the kind of file in the size message.
    """
    try:
        descriptor = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        raise FileProblem(f"{path}: no such file") from None
    except OSError as exc:
        raise FileProblem(f"{path}: {_open_failure(path, exc)}") from None
    except ValueError:  # a NUL byte in the path
        raise FileProblem(f"{str(path)!r}: not a usable path (it holds a NUL byte)") from None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise FileProblem(f"{path}: {_not_a_file(info.st_mode)}")
        if info.st_size > limit:
            raise FileProblem(_too_big(path, f"{info.st_size:,} bytes", limit, what))
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(descriptor, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:
            raise FileProblem(_too_big(path, "larger when read than its size said", limit, what))
        return b"".join(chunks)
    except OSError as exc:
        raise FileProblem(f"{path}: cannot read it ({exc.strerror or exc})") from None
    finally:
        os.close(descriptor)


def file_kind(mode: int) -> str:
    """What a path that is not a regular file is, for a message: "a FIFO (named pipe)"..."""
    return ("a folder" if stat.S_ISDIR(mode) else "a FIFO (named pipe)" if stat.S_ISFIFO(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "a symbolic link" if stat.S_ISLNK(mode)
            else "not a regular file")


def _not_a_file(mode: int) -> str:
    return f"is {file_kind(mode)}, not a file; give the path of a file"


def _open_failure(path: str | os.PathLike, exc: OSError) -> str:
    """Why an open failed; a socket (ENXIO) or similar is named for what it is."""
    try:
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
            return _not_a_file(mode)
    except OSError:
        pass
    if isinstance(exc, PermissionError):
        return "cannot read it (permission denied); check its permissions"
    return f"cannot open it ({exc.strerror or exc})"


def _too_big(path: str | os.PathLike, size: str, limit: int, what: str) -> str:
    return (f"{path}: {size}, more than a {what} can be (at most {limit:,} bytes); is it the "
            "right file?")


def read_json(path: str | os.PathLike, limit: int = JSON_LIMIT) -> Any:
    """A JSON file's content, or FileProblem saying what is wrong and what to try: a file cut
    off (a crash mid-write, a full disk) says so and points at PATH.bak when there is one; a
    key given twice is refused rather than silently taking the last; so are nesting deeper than
    MAX_DEPTH, numbers of more than MAX_DIGITS digits or beyond a float, NaN and Infinity, and
    strings (and keys) that are not one line of Unicode text: a lone surrogate such as \\ud800
    would later fail wherever the text is printed, a control character would break a message
    or the HUD in two."""
    path = Path(path)
    data = read_bytes(path, limit, "JSON file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise FileProblem(f"{path}: not UTF-8 text (byte {exc.start}, line {line}); save it "
                          "as UTF-8") from None
    backup = path.with_name(path.name + ".bak")
    restore = f"; the previous version is in {backup}" if backup.is_file() else ""
    if not text.strip():
        raise FileProblem(f"{path}: the file is empty{restore}")
    too_deep_at, ends_early = _scan(text)
    if too_deep_at is not None:
        raise FileProblem(f"{path}: nested more than {MAX_DEPTH} levels deep at line "
                          f"{too_deep_at}; this is not a preset, mapping or recovery file")
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates, parse_int=_parse_int,
                           parse_float=_parse_float, parse_constant=_refuse_constant)
    except _DuplicateKey as exc:
        raise FileProblem(f"{path}: key '{_printable(exc.key)}' appears twice; keep one") \
            from None
    except json.JSONDecodeError as exc:
        if ends_early:
            raise FileProblem(f"{path}: the file ends early at line {exc.lineno} (truncated, "
                              f"perhaps by a crash or a full disk){restore}") from None
        raise FileProblem(f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno}: "
                          f"{exc.msg}") from None
    problem = _refused_value(value)
    if problem is not None:
        raise FileProblem(f"{path}: {problem}")
    return value


# A string (escapes included, newlines too: the parser refuses those later), a quote that never
# closes (the rest of the file is inside it), or a bracket. Unrolled, so matching is linear.
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|"|[\[\]{}]', re.DOTALL)


def _scan(text: str) -> tuple[int | None, bool]:
    """(the line where nesting first passes MAX_DEPTH or None, whether the text stops inside a
    string or with brackets left open: a cut-off file, not a typo). Stops at the first level too
    deep, so a file of a million '[' costs 65 steps."""
    depth = 0
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in "{[":
            depth += 1
            if depth > MAX_DEPTH:
                return text.count("\n", 0, match.start()) + 1, True
        elif token in "}]":
            depth -= 1
        elif token == '"':  # no closing quote anywhere after it
            return None, True
    return None, depth > 0


class _Refused:
    """Stands in for a number the file may not hold, so that the walk after parsing can name
    its key (a parse hook does not know where it is)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _shown(literal: str) -> str:
    return literal if len(literal) <= 24 else f"{literal[:12]}...{literal[-6:]}"


def _too_many_digits(literal: str) -> _Refused | None:
    count = sum(char.isdigit() for char in literal)
    if count > MAX_DIGITS:
        return _Refused(f"the number {_shown(literal)} has {count} digits (at most "
                        f"{MAX_DIGITS}); write a smaller number")
    return None


def _parse_int(literal: str) -> int | _Refused:
    return _too_many_digits(literal) or int(literal)


def _parse_float(literal: str) -> float | _Refused:
    refused = _too_many_digits(literal)
    if refused is not None:
        return refused
    value = float(literal)
    if value in (float("inf"), float("-inf")):
        return _Refused(f"the number {_shown(literal)} is beyond what a number here can be; "
                        "write a smaller one")
    return value


def _refuse_constant(literal: str) -> _Refused:
    return _Refused(f"{literal} is not a number a file may hold (NaN and Infinity are "
                    "refused); write a finite number")


# What a name or text in our files never holds: control characters and line separators (a
# message or HUD line would break in two) and lone surrogates (not Unicode: printing fails).
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def _printable(text: str, limit: int = 60) -> str:
    """Text safe to show on one line whatever it holds (\\n, \\ud800 as escapes), cut to
    `limit` characters."""
    return printable(text, limit, one_line=True)


def _text_problem(text: str) -> str | None:
    """Why a string may not be in a file (see _UNPRINTABLE), or None."""
    match = _UNPRINTABLE.search(text)
    if match is None:
        return None
    if "\ud800" <= match.group() <= "\udfff":
        return ("holds a lone surrogate escape (\\ud800-\\udfff alone), which is not Unicode "
                "text; retype that text")
    return (f"holds a control character (U+{ord(match.group()):04X}); keep names and text on "
            "one printable line")


def _refused_value(value: Any) -> str | None:
    """What is wrong with the first refused number or string (or key: see _text_problem) found
    in a decoded document, with its key as "key 'params.trail'"; None when there is none. The
    document is at most MAX_DEPTH deep, but the walk keeps its own stack anyway."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, where = stack.pop()
        at = f"key '{where}'" if where else "the top level"
        if isinstance(item, _Refused):
            return f"{at}: {item.reason}"
        if isinstance(item, str):
            problem = _text_problem(item)
            if problem is not None:
                return f"{at}: {problem}"
        elif isinstance(item, dict):
            for key, child in item.items():
                inner = f"{where}.{_printable(key)}" if where else _printable(key)
                problem = _text_problem(key)
                if problem is not None:
                    return f"the key '{inner}' {problem}"
                stack.append((child, inner))
        elif isinstance(item, list):
            stack.extend((child, f"{where}[{number}]") for number, child in enumerate(item))
    return None


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


