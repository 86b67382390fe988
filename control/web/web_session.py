"""One page's WebSocket connection, on the thread websockets' server gives it
(control/web/web_remote.py hands each connection to `PageSession.run`): the hello, then the state
pushed every PUSH_SECONDS (with the values in the first push and whenever one changed), and the
page's messages read within their rate, parsed (control/web/web_messages.py) and queued for the
frame.

A connection that keeps sending past its rate (FLOOD_AFTER refusals within about a second) is
flooding: everything it sends is refused until it pauses (no message for FLOOD_QUIET), and its
messages are read no faster than FLOOD_DRAIN_RATE a second, all flooding connections together,
so that counting a flood costs a few percent of a core, whatever it sends; the rest waits in
its socket (TCP holds the sender back). What all pages share (the queue for the frame, the
counts, the snapshot, the drain's budget) is the remote's, under its lock.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from websockets.exceptions import ConnectionClosed, ConnectionClosedError

from swarm_instrument.control.osc.osc_wire import plain_reason, printable
from swarm_instrument.control.web.web_messages import WebError, parse_message

if TYPE_CHECKING:
    from swarm_instrument.control.web.web_remote import WebRemote

TRANSPORT_LIMIT = 1 << 16  # bytes: websockets closes the connection (1009) beyond this
MESSAGE_RATE = 120.0  # messages a second per connection: four sliders dragged at 30 Hz
MESSAGE_BURST = 60.0
FLOOD_AFTER = 60
FLOOD_DRAIN_RATE = 2000.0
FLOOD_QUIET = 0.5  # seconds without a message: the flood is over
PUSH_SECONDS = 0.15  # meters a few times a second (the page smooths between them)


@dataclass
class Bucket:
    """A token bucket: `rate` a second, at most `burst` at once. One thread uses each."""

    rate: float
    burst: float
    tokens: float = 0.0
    at: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self.tokens = self.burst

    def take(self, now: float) -> bool:
        return self.wait(now) == 0.0

    def wait(self, now: float) -> float:
        """0 when a token was taken, else the seconds until one will be there."""
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate


class PageSession:
    """One connection's loop and state, on its own thread."""

    def __init__(self, remote: WebRemote, connection: Any) -> None:
        self.remote = remote
        self.connection = connection
        self.bucket = Bucket(MESSAGE_RATE, MESSAGE_BURST)
        self.refused = 0  # since the last push: its page shows them
        self.reason: str | None = None
        self.over = 0.0  # over-rate refusals, forgotten over a second
        self.over_at = 0.0
        self.flooding = False
        self.heard_at = 0.0  # when its last message was read
        self.sent_values: dict[str, Any] | None = None  # the values now on that page

    def run(self) -> None:
        """Until the connection closes: pushes on time, messages in between."""
        remote, connection = self.remote, self.connection
        sent_seq = -1
        next_push = time.monotonic()
        try:
            connection.send(remote.hello)
            while True:
                now = time.monotonic()
                if now >= next_push:
                    next_push = max(next_push + PUSH_SECONDS, now)
                    seq, snapshot = remote.snapshot
                    if snapshot and (seq != sent_seq or self.refused):
                        sent_seq = seq
                        self._push(snapshot)
                    continue
                if self.flooding:
                    wait = remote.drain_wait(now)
                    if wait > 0.0:
                        time.sleep(min(wait, next_push - now))
                        continue
                try:
                    message = connection.recv(timeout=next_push - now)
                except TimeoutError:
                    if self.flooding and now - self.heard_at >= FLOOD_QUIET:
                        self.flooding = False  # it paused: its messages count again
                    continue
                self._take(message)
        except ConnectionClosedError as exc:
            sent = exc.sent.code if exc.sent is not None else None
            if sent in (1007, 1009, 1002):
                what = {1007: "a message that is not UTF-8 text",
                        1009: f"a message of more than {TRANSPORT_LIMIT} bytes",
                        1002: "a broken WebSocket frame"}[sent]
                self._refuse(f"{what}: the connection was closed ({sent})")
        except ConnectionClosed:
            pass

    def _push(self, snapshot: dict[str, Any]) -> None:
        """One state message: the snapshot, its values only when they changed for this
        page, and this connection's refusals."""
        values = snapshot.get("values")
        message = {key: value for key, value in snapshot.items() if key != "values"}
        if values is not None and values != self.sent_values:
            message["values"] = self.sent_values = values
        message["type"] = "state"
        message["refused"] = {"refused": self.refused, "reason": self.reason}
        self.refused = 0
        self.connection.send(json.dumps(message, separators=(",", ":")))

    def _take(self, message: str | bytes) -> None:
        """One message from the page: within the rate, parsed, queued for the frame."""
        self.remote.count_message()
        now = self.heard_at = time.monotonic()
        if self.flooding:  # refused unread until it pauses
            self._refuse(f"a flood: more than {MESSAGE_RATE:g} messages a second, all refused "
                         "until the sender pauses", dropped=True)
            return
        if not self.bucket.take(now):
            self.over = max(0.0, self.over - (now - self.over_at) * FLOOD_AFTER) + 1.0
            self.over_at = now
            if self.over >= FLOOD_AFTER:
                self.flooding = True
                self.remote.count_flood()
            self._refuse(f"over {MESSAGE_RATE:g} messages a second", dropped=True)
            return
        try:
            action = parse_message(message)
        except WebError as exc:
            self._refuse(str(exc))
            return
        address = (printable(message.split(",", 1)[0].strip('["]'), 60)
                   if isinstance(message, str) else None)
        problem = self.remote.enqueue(action, address)
        if problem is not None:
            self._refuse(problem, dropped=True)

    def _refuse(self, reason: str, dropped: bool = False) -> None:
        self.remote.count_refusal(reason, dropped)
        self.refused += 1
        self.reason = plain_reason(reason, 120)
