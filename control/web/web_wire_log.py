"""websockets' own log, quieted: what a peer caused is a counted refusal with a plain reason, what
our own code raised is one line on the console. Runs on the server's threads.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from swarm_instrument.control.web.web_remote import WebRemote

log = logging.getLogger("swarm_instrument.control.web.web_remote")


class QuietWire(logging.Handler):
    """websockets' own log, for the connections the gate handed it: what a peer caused (a
    connection cut in the middle of something, which its safety net calls an "unexpected
    internal error") is counted as a refusal with a plain reason, never printed with its
    traceback; what our own handler raised is said in one line (a bug, not input)."""

    OURS = ("process_request failed", "process_response failed", "connection handler failed")
    PLAIN: ClassVar[dict[str, str]] = {
        "unexpected internal error": "a connection that ended while it was read or written",
        "opening handshake failed": "a WebSocket handshake that could not be answered",
        "keepalive ping failed": "a page that stopped answering pings",
        "parser failed": "a frame that could not be read"}

    def __init__(self, remote: WebRemote) -> None:
        super().__init__(logging.ERROR)
        self.remote = remote

    def emit(self, record: logging.LogRecord) -> None:
        exc = record.exc_info[1] if record.exc_info else None
        message = record.getMessage()
        kind = f" ({type(exc).__name__})" if exc else ""
        if message in self.OURS:
            log.warning(f"web: the web remote's own code failed ({message}): {exc!r}; "
                        "please report it")
        self.remote.refuse_request(self.PLAIN.get(message, "a connection websockets gave "
                                                   "up on") + kind)
