"""The web remote: a control page served to any browser (a phone, a tablet, another laptop),
its sliders, switches, preset grid and buttons speaking to the show over a WebSocket, and live
meters pushed back a few times a second.

    GET /  /app.js  /style.css    the page (control/web_page/, held in memory from the start)
    GET /ws                       the WebSocket: JSON text messages, each OSC's address and
                                  arguments as an array (control/web_messages.py)
    from the show: {"type": "hello", ...} once (the parameters, their groups and ranges), then
    {"type": "state", ...} every PUSH_SECONDS (meters, the preset slots, the values that
    changed, this connection's refusals).

Threads. websockets' threaded server (`websockets.sync.server`) accepts and answers on its own
threads, never the frame's: one thread accepts, and each connection has threads of its own
that read its frames, check and parse its messages, and push the state back (daemon threads: a
browser left open never holds up the show's end). Each parsed message becomes an `Action`
appended to a bounded list; the
frame thread takes them in `poll()` (at most MAX_ACTIONS_PER_FRAME a frame, like OSC), so the
show carries them out in `Show.act` as it does OSC's. The show hands the meters over in
`publish(now, build)`: at most every PUSH_SECONDS it builds a fresh dict and swaps one
reference, which the connection threads read (never changed after it is handed over).

Security. Every request is hostile until checked. Listening on anything but loopback needs the
token (control/web_token.py: kept beside the saved presets and midi.json, printed in the
page's URL at start): a request or a socket without it, or with a wrong one, gets 403. On
loopback no token is asked, but the Host header must name this machine (a DNS-rebinding page
cannot reach the show). The WebSocket's Origin must be the page's own (a page elsewhere cannot
drive the show from a performer's browser). Messages: at most MAX_MESSAGE characters (a bigger
one is refused; one over TRANSPORT_LIMIT bytes closes the connection, 1009), at most
MESSAGE_RATE a second per connection (a token bucket of MESSAGE_BURST: the rest are refused
unread, counted as dropped; a connection that keeps at it is a flood, see FLOOD_AFTER), at
most QUEUE_LIMIT waiting for the frame, at most MAX_CLIENTS connections and REQUEST_RATE
requests a second. Every refusal is counted and its reason kept (printable ASCII, never the
token), said on the console at most every REPORT_SECONDS; nothing from outside raises into
the show.
"""

from __future__ import annotations

import errno
import hmac
import json
import logging
import math
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from control.actions import Action
from control.files import FileProblem, read_bytes
from control.osc_wire import plain_reason, printable
from control.web_address import DEFAULT_HOST, is_loopback, local_addresses
from control.web_messages import MAX_MESSAGE, WebError, describe_params, parse_message

log = logging.getLogger(__name__)

PAGE_DIR = Path(__file__).resolve().parent / "web_page"
PAGE_FILES = {"/": ("index.html", "text/html; charset=utf-8"),
              "/index.html": ("index.html", "text/html; charset=utf-8"),
              "/app.js": ("app.js", "text/javascript; charset=utf-8"),
              "/style.css": ("style.css", "text/css; charset=utf-8")}
SOCKET_PATH = "/ws"
QUERY_MARK = "__QUERY__"  # where index.html's links to app.js and style.css take the token
# The page loads nothing but its own files and speaks only to its own server; no framing.
CONTENT_POLICY = ("default-src 'self'; connect-src 'self'; img-src 'self' data:; "
                  "frame-ancestors 'none'; base-uri 'none'; form-action 'none'")

TRANSPORT_LIMIT = 1 << 16  # bytes: websockets closes the connection (1009) beyond this
MESSAGE_RATE = 120.0  # messages a second per connection: four sliders dragged at 30 Hz
MESSAGE_BURST = 60.0
# A connection that keeps sending past its rate (FLOOD_AFTER refusals within about a second) is
# flooding: everything it sends is refused until it pauses (no message for FLOOD_QUIET),
# and its messages are read no faster than FLOOD_DRAIN_RATE a second, all flooding connections
# together, so that counting a flood costs a few percent of a core, whatever it sends; the rest
# waits in its socket (TCP holds the sender back).
FLOOD_AFTER = 60
FLOOD_DRAIN_RATE = 2000.0
FLOOD_QUIET = 0.5  # seconds without a message: the flood is over
QUEUE_LIMIT = 512  # actions waiting for the frame, all connections together
MAX_ACTIONS_PER_FRAME = 256  # as OSC: a frame's work stays bounded
MAX_CLIENTS = 16  # WebSocket connections at once (each has two threads)
REQUEST_RATE = 50.0  # HTTP requests a second (a page load is three), burst REQUEST_BURST
REQUEST_BURST = 100.0
PUSH_SECONDS = 0.15  # meters a few times a second (the page smooths between them)
REPORT_SECONDS = 5.0
OPEN_TIMEOUT = 5.0  # seconds a connection may take to send its request


class WebProblem(RuntimeError):
    """The web remote cannot start; the message says which address and what to do."""


# ---- the server ------------------------------------------------------------------------------

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


@dataclass
class _Peer:
    """One WebSocket connection's state, on its own thread."""

    bucket: Bucket = field(default_factory=lambda: Bucket(MESSAGE_RATE, MESSAGE_BURST))
    refused: int = 0  # since the last push: its page shows them
    reason: str | None = None
    over: float = 0.0  # over-rate refusals, forgotten over a second
    over_at: float = 0.0
    flooding: bool = False
    heard_at: float = 0.0  # when its last message was read


class _Quiet(logging.Handler):
    """websockets' own log: what outside input caused (a port scanner's garbage, a handshake
    cut off) counted and kept as a reason, never printed with its traceback; what our own code
    raised said in one line (a bug, not input)."""

    OURS = ("process_request failed", "process_response failed", "connection handler failed")

    def __init__(self, remote: WebRemote) -> None:
        super().__init__(logging.ERROR)
        self.remote = remote

    def emit(self, record: logging.LogRecord) -> None:
        exc = record.exc_info[1] if record.exc_info else None
        message = record.getMessage()
        if message in self.OURS:
            log.warning(f"web: internal error ({message}): {exc!r}")
        self.remote._refuse_request(message + (f" ({type(exc).__name__})" if exc else ""))


class WebRemote:
    """The page's server on its own threads; `poll()` hands the frame its Actions, `publish()`
    takes the frame's meters. `token`: required of every request and socket (None: none, for
    loopback). Main-thread methods: poll, publish, state, close."""

    def __init__(self, host: str = DEFAULT_HOST, port: int = 8080, *, token: str | None = None,
                 page_dir: Path = PAGE_DIR) -> None:
        from websockets.sync.server import serve

        self.host = host
        self.token = token
        self._lock = threading.Lock()
        self._pending: list[Action] = []
        self._snapshot: tuple[int, dict[str, Any]] = (0, {})
        self._published_at = -math.inf
        self.requests = 0  # HTTP requests and WebSocket handshakes answered
        self.forbidden = 0  # of those refused: no or wrong token, wrong origin or host, ...
        self.received = 0  # WebSocket messages read
        self.rejected = 0  # messages refused, for any reason (dropped ones included)
        self.dropped = 0  # of those, refused for the rate (a flood) or a full queue
        self.applied = 0  # actions handed to the frame
        self.floods = 0  # connections caught flooding
        self.clients = 0
        self.last_error: str | None = None
        self.last_address: str | None = None
        self._said = 0
        self._next_report = 0.0
        self._requests = Bucket(REQUEST_RATE, REQUEST_BURST)
        self._drain = Bucket(FLOOD_DRAIN_RATE, FLOOD_DRAIN_RATE / 100)  # under _lock
        self._hello = json.dumps({"type": "hello", **describe_params(),
                                  "limits": {"message": MAX_MESSAGE, "rate": MESSAGE_RATE}})
        self._files = self._read_page(page_dir)
        wire = logging.getLogger(f"{__name__}.wire.{id(self)}")
        wire.propagate = False
        wire.setLevel(logging.ERROR)
        wire.addHandler(_Quiet(self))
        self._wire_log = wire
        try:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            both = host == "::" and socket.has_dualstack_ipv6()  # "::": IPv4 too
            self._server = serve(self._handle, host, port, process_request=self._request,
                                 compression=None, max_size=TRANSPORT_LIMIT, max_queue=16,
                                 open_timeout=OPEN_TIMEOUT, ping_interval=20, ping_timeout=20,
                                 close_timeout=1, logger=wire, server_header=None,
                                 family=family, dualstack_ipv6=both)
        except (OSError, OverflowError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            hint = ("another program holds the port: choose another with --web PORT"
                    if getattr(exc, "errno", None) == errno.EADDRINUSE else
                    "check the address (one of this machine's, or 0.0.0.0 for all)")
            raise WebProblem(f"web: cannot listen on {host}:{port} ({reason}); {hint}, or drop "
                             "--web") from None
        self.port = self._server.socket.getsockname()[1]
        # A daemon thread: the connection threads it starts are daemons too, so a show that
        # ends without close() never waits at exit for a browser left open.
        self._thread = threading.Thread(target=self._server.serve_forever, name="web-remote",
                                        daemon=True)
        self._thread.start()

    # ---- what the show calls (main thread) --------------------------------------------------

    @property
    def url(self) -> str:
        """The page's address as printed at start (with the token when one is needed)."""
        return self.urls[0]

    @property
    def urls(self) -> list[str]:
        """The page's addresses: listening on every interface, one a network address of this
        machine (what a phone types), else the one listened on."""
        hosts = [self.host]
        if self.host in ("0.0.0.0", "::"):
            hosts = local_addresses() or ["127.0.0.1"]
        return [self.url_for(f"[{host}]" if ":" in host else host) for host in hosts]

    def url_for(self, host: str) -> str:
        query = f"?token={self.token}" if self.token else ""
        return f"http://{host}:{self.port}/{query}"

    def poll(self) -> list[Action]:
        """The frame's Actions, in arrival order, at most MAX_ACTIONS_PER_FRAME (the rest wait
        for the next frame); refusals said on the console at most every REPORT_SECONDS."""
        with self._lock:
            if len(self._pending) <= MAX_ACTIONS_PER_FRAME:
                actions, self._pending = self._pending, []
            else:
                actions = self._pending[:MAX_ACTIONS_PER_FRAME]
                del self._pending[:MAX_ACTIONS_PER_FRAME]
            self.applied += len(actions)
            refused = self.rejected + self.forbidden
        if refused > self._said:
            now = time.monotonic()
            if now >= self._next_report:
                self._next_report = now + REPORT_SECONDS
                log.info(f"web: {refused - self._said} message(s) or request(s) refused, "
                         f"latest: {self.last_error}")
                self._said = refused
        return actions

    def publish(self, now: float, build: Callable[[], dict[str, Any]]) -> None:
        """The frame's meters, at most every PUSH_SECONDS of the loop's time: `build()` makes a
        fresh dict that nobody changes afterwards, handed over by swapping one reference."""
        if self.clients == 0 or 0.0 <= now - self._published_at < PUSH_SECONDS:
            return
        self._published_at = now
        self._snapshot = (self._snapshot[0] + 1, build())

    def state(self) -> dict[str, Any]:
        """Telemetry's `web` object (the token itself is never in it)."""
        return {"listening": f"{self.host}:{self.port}", "token": self.token is not None,
                "clients": self.clients, "requests": self.requests,
                "forbidden": self.forbidden, "received": self.received,
                "applied": self.applied, "rejected": self.rejected, "dropped": self.dropped,
                "floods": self.floods, "last_error": self.last_error,
                "last_address": self.last_address}

    def close(self) -> None:
        """Stop listening and close the pages' connections (1001); bounded, so a connection
        that never finished its request cannot hold up the show's end (the threads are
        daemons: what is left ends with the process)."""
        closer = threading.Thread(target=self._server.shutdown, name="web-remote-close",
                                  daemon=True)
        closer.start()
        closer.join(timeout=2.0)
        self._thread.join(timeout=0.5)
        for handler in list(self._wire_log.handlers):
            self._wire_log.removeHandler(handler)

    # ---- HTTP (the server's threads) -------------------------------------------------------

    @staticmethod
    def _read_page(folder: Path) -> dict[str, bytes]:
        files = {}
        for name, _ in PAGE_FILES.values():
            try:
                files[name] = read_bytes(folder / name, 1 << 20, "page file")
            except FileProblem as exc:
                raise WebProblem(f"web: the page is missing ({exc}); reinstall the "
                                 "instrument") from None
        return files

    def _refuse_request(self, reason: str) -> None:
        with self._lock:
            self.forbidden += 1
            self.last_error = plain_reason(reason)

    @staticmethod
    def _response(status: int, body: bytes | str,
                  content_type: str = "text/plain; charset=utf-8") -> Any:
        """An HTTP answer with the headers every answer carries: no caching, no Referer (the
        token never leaves in one), no sniffing, no framing, nothing but this page's own."""
        from http import HTTPStatus

        from websockets.datastructures import Headers
        from websockets.http11 import Response

        data = body.encode() if isinstance(body, str) else body
        headers = Headers([
            ("Connection", "close"),
            ("Content-Length", str(len(data))),
            ("Content-Type", content_type),
            ("Cache-Control", "no-store"),
            ("Referrer-Policy", "no-referrer"),
            ("X-Content-Type-Options", "nosniff"),
            ("Content-Security-Policy", CONTENT_POLICY),
        ])
        return Response(status, HTTPStatus(status).phrase, headers, data)

    def _refuse(self, connection: Any, status: int, reason: str, said: str) -> Any:
        self._refuse_request(reason)
        return self._response(status, said + "\n")

    def _request(self, connection: Any, request: Any) -> Any:
        """Every HTTP request and WebSocket handshake: None lets a WebSocket open, anything
        else is the answer. Checks, in order: the request rate, the Host (on loopback), the
        token, the path, and for the socket its Origin and the number of connections."""
        with self._lock:
            self.requests += 1
        try:
            target = urlsplit(request.path)
            query = parse_qs(target.query, max_num_fields=8)
        except ValueError:
            return self._refuse(connection, 400, f"GET {printable(request.path, 40)}: not a "
                                "path", "bad request")
        where = f"GET {printable(target.path, 40)}"
        with self._lock:
            within = self._requests.take(time.monotonic())
        if not within:
            return self._refuse(connection, 429, f"{where}: more than {REQUEST_RATE:g} "
                                "requests a second", "too many requests")
        hosts = request.headers.get_all("Host")
        host = hosts[0] if len(hosts) == 1 else ""
        if self.token is None and not self._local_host(host):
            return self._refuse(connection, 403, f"{where}: Host {printable(host, 60)!r} is not "
                                "this machine (DNS rebinding?)", "forbidden: unknown host")
        if self.token is not None:
            given = query.get("token", [])
            if len(given) != 1 or not hmac.compare_digest(given[0].encode("utf-8", "replace"),
                                                          self.token.encode()):
                problem = "no token" if not given else "a wrong token"
                return self._refuse(connection, 403, f"{where}: {problem}",
                                    "forbidden: open the link the instrument printed at start")
        if target.path == SOCKET_PATH:
            origins = request.headers.get_all("Origin")
            origin = origins[0] if len(origins) == 1 else ""
            if not host or origin.lower() not in (f"http://{host}".lower(),
                                                  f"https://{host}".lower()):
                return self._refuse(connection, 403, f"{where}: Origin "
                                    f"{printable(origin, 60)!r} is not this page's",
                                    "forbidden: wrong origin")
            if self.clients >= MAX_CLIENTS:
                return self._refuse(connection, 503, f"{where}: {MAX_CLIENTS} connections "
                                    "already", "too many connections")
            return None  # websockets answers 426 to a plain GET here
        page = PAGE_FILES.get(target.path)
        if page is None:
            return self._refuse(connection, 404, f"{where}: no such page", "not found")
        name, content_type = page
        body = self._files[name]
        if name == "index.html":
            query = f"?token={self.token}" if self.token else ""
            body = body.replace(QUERY_MARK.encode(), query.encode())
        return self._response(200, body, content_type)

    def _local_host(self, host: str) -> bool:
        """A Host header that names this machine: a loopback address or localhost, with our
        port (or none, for port 80)."""
        match = re.fullmatch(r"(\[[0-9A-Fa-f:.]*\]|[^:\[\]]*)(?::(\d{1,5}))?", host)
        if match is None or (match.group(2) or "80") != str(self.port):
            return False
        name = match.group(1).strip("[]").lower()
        return name == "localhost" or name == self.host or is_loopback(name)

    # ---- the socket (one thread per connection) -------------------------------------------------

    def _handle(self, connection: Any) -> None:
        from websockets.exceptions import ConnectionClosed, ConnectionClosedError

        with self._lock:
            self.clients += 1
        peer = _Peer()
        sent_values: dict[str, Any] | None = None
        sent_seq = -1
        next_push = time.monotonic()
        try:
            connection.send(self._hello)
            while True:
                now = time.monotonic()
                if now >= next_push:
                    next_push = max(next_push + PUSH_SECONDS, now)
                    seq, snapshot = self._snapshot
                    if snapshot and (seq != sent_seq or peer.refused):
                        sent_seq = seq
                        sent_values = self._push(connection, snapshot, sent_values, peer)
                    continue
                if peer.flooding:
                    with self._lock:
                        wait = self._drain.wait(now)
                    if wait > 0.0:
                        time.sleep(min(wait, next_push - now))
                        continue
                try:
                    message = connection.recv(timeout=next_push - now)
                except TimeoutError:
                    if peer.flooding and now - peer.heard_at >= FLOOD_QUIET:
                        peer.flooding = False  # it paused: its messages count again
                    continue
                self._take(message, peer)
        except ConnectionClosedError as exc:
            sent = exc.sent.code if exc.sent is not None else None
            if sent in (1007, 1009, 1002):
                what = {1007: "a message that is not UTF-8 text",
                        1009: f"a message of more than {TRANSPORT_LIMIT} bytes",
                        1002: "a broken WebSocket frame"}[sent]
                self._count_refusal(f"{what}: the connection was closed ({sent})", peer)
        except ConnectionClosed:
            pass
        finally:
            with self._lock:
                self.clients -= 1

    def _push(self, connection: Any, snapshot: dict[str, Any],
              sent_values: dict[str, Any] | None, peer: _Peer) -> dict[str, Any] | None:
        """One state message: the snapshot, its values only when they changed for this
        connection, and this connection's refusals. Returns the values now on that page."""
        values = snapshot.get("values")
        message = {key: value for key, value in snapshot.items() if key != "values"}
        if values is not None and values != sent_values:
            message["values"] = values
            sent_values = values
        message["type"] = "state"
        message["refused"] = {"refused": peer.refused, "reason": peer.reason}
        peer.refused = 0
        connection.send(json.dumps(message, separators=(",", ":")))
        return sent_values

    def _take(self, message: str | bytes, peer: _Peer) -> None:
        """One message from a page: within the rate, parsed, queued for the frame."""
        with self._lock:
            self.received += 1
        now = peer.heard_at = time.monotonic()
        if peer.flooding:  # refused unread until it pauses
            self._count_refusal(f"a flood: more than {MESSAGE_RATE:g} messages a second, "
                                "all refused until the sender pauses", peer, dropped=True)
            return
        if not peer.bucket.take(now):
            peer.over = max(0.0, peer.over - (now - peer.over_at) * FLOOD_AFTER) + 1.0
            peer.over_at = now
            if peer.over >= FLOOD_AFTER:
                peer.flooding = True
                with self._lock:
                    self.floods += 1
            self._count_refusal(f"over {MESSAGE_RATE:g} messages a second", peer, dropped=True)
            return
        try:
            action = parse_message(message)
        except WebError as exc:
            self._count_refusal(str(exc), peer)
            return
        with self._lock:
            full = len(self._pending) >= QUEUE_LIMIT
            if not full:
                self._pending.append(action)
                if isinstance(message, str):
                    self.last_address = printable(message.split(",", 1)[0].strip('["]'), 60)
        if full:
            self._count_refusal(f"{QUEUE_LIMIT} messages already wait for the show", peer,
                                dropped=True)

    def _count_refusal(self, reason: str, peer: _Peer, dropped: bool = False) -> None:
        with self._lock:
            self.rejected += 1
            if dropped:
                self.dropped += 1
            self.last_error = plain_reason(reason)
        peer.refused += 1
        peer.reason = plain_reason(reason, 120)
