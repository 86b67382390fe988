"""HTTP as the web remote's front door speaks it (control/web/web_gate.py reads,
control/web/web_remote.py decides): a request head parsed strictly from the bytes the gate read, and
an answer written whole, with the headers every answer carries. Pure functions, any thread.

A head is the request line and the header lines up to the blank line, at most MAX_HEAD bytes
and MAX_HEADER_LINES lines (websockets alone would take 128 lines of 8 KiB each, a megabyte a
connection; a browser's head for this page is well under a kilobyte: no cookies are set).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from http import HTTPStatus

MAX_HEAD = 8192  # bytes, request line and headers, up to and with the blank line
MAX_HEADER_LINES = 64
END = b"\r\n\r\n"
# The page loads nothing but its own files and speaks only to its own server; no framing.
CONTENT_POLICY = ("default-src 'self'; connect-src 'self'; img-src 'self' data:; "
                  "frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
# Every answer: closed after it, never cached, no Referer (the token never leaves in one), no
# sniffing, nothing loaded or framed but this page's own.
EVERY_ANSWER = (("Connection", "close"), ("Cache-Control", "no-store"),
                ("Referrer-Policy", "no-referrer"), ("X-Content-Type-Options", "nosniff"),
                ("Content-Security-Policy", CONTENT_POLICY))

_METHOD = re.compile(rb"[A-Z]{1,16}")
_TARGET = re.compile(rb"[!-~]{1,4096}")  # printable ASCII, no space
_NAME = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}")
_VALUE = re.compile(rb"[\t -~\x80-\xff]*")  # no control characters (CR, LF, NUL, ESC ...)


class HeadError(ValueError):
    """A head that cannot be answered as a request: the status to answer and why."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


@dataclass(frozen=True)
class Head:
    """One request's head. `headers`: (lower-case name, value) in order; `extra`: bytes that
    came after the blank line (a body, or data sent before the answer)."""

    method: str
    target: str
    headers: tuple[tuple[str, str], ...]
    extra: int = 0

    def values(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key == name]

    def value(self, name: str) -> str:
        """The header's one value; "" when it is absent or given more than once."""
        found = self.values(name)
        return found[0] if len(found) == 1 else ""

    @property
    def has_body(self) -> bool:
        length = self.values("content-length")
        return bool(self.extra or self.values("transfer-encoding")
                    or any(value.strip() != "0" for value in length))


def parse_head(data: bytes, extra: int = 0) -> Head:
    """The head in `data` (ending with the blank line's CRLF CRLF). HeadError: 400 for a
    malformed one, 431 for too many header lines, 505 for a version other than HTTP/1.x."""
    lines = data[:-len(END)].split(b"\r\n") if data.endswith(END) else []
    if not lines:
        raise HeadError(400, "a request head that does not end in a blank line")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not _METHOD.fullmatch(parts[0]) or not _TARGET.fullmatch(parts[1]):
        raise HeadError(400, "not an HTTP request line")
    if parts[2] not in (b"HTTP/1.1", b"HTTP/1.0"):
        raise HeadError(505, "not HTTP/1.1 or HTTP/1.0")
    if len(lines) - 1 > MAX_HEADER_LINES:
        raise HeadError(431, f"{len(lines) - 1} header lines; at most {MAX_HEADER_LINES}")
    headers = []
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not _NAME.fullmatch(name) or not _VALUE.fullmatch(value):
            raise HeadError(400, "a malformed header line")
        headers.append((name.decode("ascii").lower(), value.strip(b" \t").decode("latin-1")))
    return Head(parts[0].decode("ascii"), parts[1].decode("ascii"), tuple(headers), extra)


def response(status: int, body: bytes | str = b"",
             content_type: str = "text/plain; charset=utf-8", *, head_only: bool = False,
             headers: tuple[tuple[str, str], ...] = ()) -> bytes:
    """A whole answer: status line, EVERY_ANSWER's headers and `headers`, then `body` (none
    after a HEAD, whose Content-Length still says what a GET would get)."""
    data = body.encode() if isinstance(body, str) else body
    lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}",
             f"Content-Length: {len(data)}", f"Content-Type: {content_type}",
             *(f"{name}: {value}" for name, value in EVERY_ANSWER + headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (b"" if head_only else data)
