"""The web remote: a control page served to any browser (a phone, a tablet, another laptop),
its sliders, switches, preset grid and buttons speaking to the show over a WebSocket, and live
meters and values pushed back a few times a second.

    GET /  /app.js  /autopilot.js  /style.css
                                  the page (control/web/page/, held in memory from the start)
    GET /ws                       the WebSocket: JSON text messages, each OSC's address and
                                  arguments as an array (control/web/web_messages.py)
    from the show: {"type": "hello", ...} once (the parameters, their groups and ranges), then
    {"type": "state", ...} every PUSH_SECONDS (meters, the preset slots, this connection's
    refusals, and the values: in a connection's first push, then whenever one changed).

Threads. Every connection comes in through the gate (control/web/web_gate.py): one thread that
reads each request's head under small limits and asks `_answer` what to do, so that nothing
but that thread is spent on a request until it has shown the token. The page's files are
answered from there; a WebSocket with the token goes on to websockets' threaded server
(`websockets.sync.server`), where each connection has threads of its own (daemons: a browser
left open never holds up the show's end) running a PageSession (control/web/web_session.py): its
pushes, and its messages read within their rate and queued as `Action`s. The frame thread
takes them in `poll()` (at most MAX_ACTIONS_PER_FRAME a frame, like OSC), so the show carries
them out in `Show.act` as it does OSC's; it hands the meters over in `publish(now, build)`: at
most every PUSH_SECONDS a fresh dict, handed over by swapping one reference.

Security. Every request is hostile until checked, and checked before anything is spent on it.
Listening on anything but loopback needs the token (control/web/web_token.py: printed in the
page's URL at start): a request or a socket without it, or with a wrong one, gets 403. On
loopback no token is asked, but the Host header must name this machine (a DNS-rebinding page
cannot reach the show). Requests refused for those reasons spend a budget of their own
(STRANGER_RATE a second; beyond it they are closed unanswered), never the performer's
(REQUEST_RATE). Then: GET and HEAD only (405), no body, the page's own paths (404). The
WebSocket's Origin must be the page's own (a page elsewhere cannot drive the show from a
performer's browser), and at most MAX_CLIENTS are open: a slot taken under the lock when the
handshake is answered, given back when its socket closes. Messages: their size, rate and
floods are the session's to refuse; at most QUEUE_LIMIT wait for the frame. Every refusal is
counted and its reason kept (printable ASCII, never the token), said on the console at most
every REPORT_SECONDS; nothing from outside raises into the show.
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
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from websockets.sync.server import serve

from swarm_instrument.control.actions import Action
from swarm_instrument.control.looks.files import FileProblem, read_bytes
from swarm_instrument.control.osc.osc_wire import plain_reason, printable
from swarm_instrument.control.web.web_address import DEFAULT_HOST, is_loopback, local_addresses
from swarm_instrument.control.web.web_gate import FedConnection, Gate, HandOver
from swarm_instrument.control.web.web_http import Head, response
from swarm_instrument.control.web.web_messages import MAX_MESSAGE, describe_params
from swarm_instrument.control.web.web_session import (
    FLOOD_DRAIN_RATE,
    MESSAGE_RATE,
    PUSH_SECONDS,
    TRANSPORT_LIMIT,
    Bucket,
    PageSession,
)
from swarm_instrument.control.web.web_wire_log import QuietWire

if TYPE_CHECKING:
    from swarm_instrument.control.web.web_gate import HandOver

log = logging.getLogger(__name__)

PAGE_DIR = Path(str(files("swarm_instrument.control.web").joinpath("page")))  # package data
PAGE_FILES = {"/": ("index.html", "text/html; charset=utf-8"),
              "/index.html": ("index.html", "text/html; charset=utf-8"),
              "/app.js": ("app.js", "text/javascript; charset=utf-8"),
              "/autopilot.js": ("autopilot.js", "text/javascript; charset=utf-8"),
              "/style.css": ("style.css", "text/css; charset=utf-8")}
SOCKET_PATH = "/ws"
QUERY_MARK = "__QUERY__"  # where index.html's links to its scripts and style.css take the token

QUEUE_LIMIT = 512  # actions waiting for the frame, all connections together
MAX_ACTIONS_PER_FRAME = 256  # as OSC: a frame's work stays bounded
MAX_CLIENTS = 16  # WebSocket connections at once (each has two threads)
REQUEST_RATE = 50.0  # requests a second with the token (a page load is four), burst below
REQUEST_BURST = 100.0
STRANGER_RATE = 50.0  # requests a second refused for no token or a foreign Host: answered
STRANGER_BURST = 100.0  # 403 within this budget, closed unanswered beyond it
REPORT_SECONDS = 5.0
OPEN_TIMEOUT = 5.0  # seconds websockets allows a handed-over handshake (its head is read)


class WebProblem(RuntimeError):
    """The web remote cannot start; the message says which address and what to do."""


class WebRemote:
    """The page's server on its own threads; `poll()` hands the frame its Actions, `publish()`
    takes the frame's meters. `token`: required of every request and socket (None: none, for
    loopback). Main-thread methods: poll, publish, state, close."""

    def __init__(self, host: str = DEFAULT_HOST, port: int = 8080, *, token: str | None = None,
                 page_dir: Path = PAGE_DIR) -> None:
        # websockets (80 ms to import) only when a show serves the page: imported here, late


        self.host = host
        self.token = token
        self._lock = threading.Lock()
        self._pending: list[Action] = []
        # (a sequence number, the latest state publish() handed over; {}: none yet), read by
        # the pages' threads, swapped whole
        self.snapshot: tuple[int, dict[str, Any]] = (0, {})
        self._published_at = -math.inf
        self.requests = 0  # HTTP requests and WebSocket handshakes seen
        self.forbidden = 0  # of those refused: no or wrong token, wrong origin or host, ...
        self.received = 0  # WebSocket messages read
        self.rejected = 0  # messages refused, for any reason (dropped ones included)
        self.dropped = 0  # of those, refused for the rate (a flood) or a full queue
        self.applied = 0  # actions handed to the frame
        self.floods = 0  # connections caught flooding
        self.clients = 0  # WebSocket slots taken (handshakes answered, sockets not closed)
        self.last_error: str | None = None
        self.last_address: str | None = None
        self._said = 0
        self._next_report = 0.0
        self._requests = Bucket(REQUEST_RATE, REQUEST_BURST)  # the gate's thread only
        self._strangers = Bucket(STRANGER_RATE, STRANGER_BURST)  # the gate's thread only
        self._drain = Bucket(FLOOD_DRAIN_RATE, FLOOD_DRAIN_RATE / 100)  # under _lock: all floods
        self.hello = json.dumps({"type": "hello", **describe_params(),  # every page's first
                                 "limits": {"message": MAX_MESSAGE, "rate": MESSAGE_RATE}})
        self._files = self._read_page(page_dir)
        wire = logging.getLogger(f"{__name__}.wire.{id(self)}")
        wire.propagate = False
        wire.setLevel(logging.ERROR)
        wire.addHandler(QuietWire(self))
        self._wire_log = wire
        try:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            both = host == "::" and socket.has_dualstack_ipv6()  # "::": IPv4 too
            listener = socket.create_server((host, port), family=family, dualstack_ipv6=both)
        except (OSError, OverflowError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            hint = ("another program holds the port: choose another with --web PORT"
                    if getattr(exc, "errno", None) == errno.EADDRINUSE else
                    "check the address (one of this machine's, or 0.0.0.0 for all)")
            raise WebProblem(f"web: cannot listen on {host}:{port} ({reason}); {hint}, or drop "
                             "--web") from None
        self.port = listener.getsockname()[1]
        self._handover = HandOver(self._release_client)
        self._gate = Gate(listener, self._answer, self.refuse_request)
        self._server = serve(self._handle, sock=self._gate.handoff,  # type: ignore[arg-type]
                             create_connection=FedConnection, compression=None,
                             max_size=TRANSPORT_LIMIT, max_queue=16, open_timeout=OPEN_TIMEOUT,
                             ping_interval=20, ping_timeout=20, close_timeout=1, logger=wire,
                             server_header=None)
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
        self.snapshot = (self.snapshot[0] + 1, build())

    def state(self) -> dict[str, Any]:
        """Telemetry's `web` object (the token itself is never in it)."""
        return {"listening": f"{self.host}:{self.port}", "token": self.token is not None,
                "clients": self.clients, "pending": self._gate.pending,
                "requests": self.requests, "forbidden": self.forbidden,
                "received": self.received, "applied": self.applied, "rejected": self.rejected,
                "dropped": self.dropped, "floods": self.floods, "last_error": self.last_error,
                "last_address": self.last_address}

    def close(self) -> None:
        """Stop listening, drop the requests still coming in and close the pages'
        connections (1001); bounded, so a connection that never finished its request cannot
        hold up the show's end (the threads are daemons: what is left ends with the
        process)."""
        self._gate.close()
        closer = threading.Thread(target=self._server.shutdown, name="web-remote-close",
                                  daemon=True)
        closer.start()
        closer.join(timeout=2.0)
        self._thread.join(timeout=0.5)
        for handler in list(self._wire_log.handlers):
            self._wire_log.removeHandler(handler)

    # ---- requests (the gate's thread) --------------------------------------------------------

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

    def refuse_request(self, reason: str) -> None:
        """One request or connection refused (the gate's own refusals come here too)."""
        with self._lock:
            self.forbidden += 1
            self.last_error = plain_reason(reason)

    def _refuse(self, status: int, reason: str, said: str, head: Head,
                headers: tuple[tuple[str, str], ...] = ()) -> bytes:
        self.refuse_request(reason)
        return response(status, said + "\n", head_only=head.method == "HEAD", headers=headers)

    def _answer(self, head: Head, peer: str) -> bytes | HandOver:
        """Every request the gate read: the answer's bytes, or a HandOver that lets a
        WebSocket open. Checks, in order: the Host (on loopback) or the token, on the
        strangers' budget; then on the performer's: the request rate, the method, no body,
        the path, and for the socket its upgrade, its Origin and a free slot."""
        with self._lock:
            self.requests += 1
        try:
            target = urlsplit(head.target)
            query = parse_qs(target.query, max_num_fields=8)
        except ValueError:
            target, query = urlsplit(""), {}
        where = f"{head.method} {printable(target.path, 40)}"
        host = head.value("host")
        stranger = None
        if self.token is None and not self._local_host(host):
            stranger = (f"Host {printable(host, 60)!r} is not this machine (DNS rebinding?)",
                        "forbidden: unknown host")
        elif self.token is not None:
            given = query.get("token", [])
            if len(given) != 1 or not hmac.compare_digest(given[0].encode("utf-8", "replace"),
                                                          self.token.encode()):
                stranger = ("no token" if not given else "a wrong token",
                            "forbidden: open the link the instrument printed at start")
        if stranger is not None:
            if not self._strangers.take(time.monotonic()):
                self.refuse_request(f"{where}: {stranger[0]} (more than {STRANGER_RATE:g} "
                                     "a second: closed unanswered)")
                return b""
            return self._refuse(403, f"{where}: {stranger[0]}", stranger[1], head)
        if not self._requests.take(time.monotonic()):
            return self._refuse(429, f"{where}: more than {REQUEST_RATE:g} requests a second",
                                "too many requests", head)
        if head.method not in ("GET", "HEAD"):
            return self._refuse(405, f"{where}: only GET and HEAD are answered",
                                "method not allowed", head, (("Allow", "GET, HEAD"),))
        if head.has_body:
            return self._refuse(400, f"{where}: a request with a body", "bad request", head)
        if target.path == SOCKET_PATH:
            return self._open_socket(head, where, host) or self._handover
        page = PAGE_FILES.get(target.path)
        if page is None:
            return self._refuse(404, f"{where}: no such page", "not found", head)
        name, content_type = page
        body = self._files[name]
        if name == "index.html":
            mark = f"?token={self.token}" if self.token else ""
            body = body.replace(QUERY_MARK.encode(), mark.encode())
        return response(200, body, content_type, head_only=head.method == "HEAD")

    def _open_socket(self, head: Head, where: str, host: str) -> bytes | None:
        """None when a WebSocket may open here (its slot then taken), else the refusal."""
        if head.method != "GET" or "websocket" not in head.value("upgrade").lower():
            return self._refuse(426, f"{where}: not a WebSocket handshake",
                                "this address takes a WebSocket", head,
                                (("Upgrade", "websocket"),))
        origin = head.value("origin")
        if not host or origin.lower() not in (f"http://{host}".lower(),
                                              f"https://{host}".lower()):
            return self._refuse(403, f"{where}: Origin {printable(origin, 60)!r} is not this "
                                "page's", "forbidden: wrong origin", head)
        with self._lock:
            full = self.clients >= MAX_CLIENTS
            if not full:
                self.clients += 1
        if full:
            return self._refuse(503, f"{where}: {MAX_CLIENTS} connections already",
                                "too many connections", head)
        return None

    def _release_client(self) -> None:
        """A WebSocket's socket closed: its slot is free. With the last one gone the snapshot
        is forgotten, so the next page's first push is a fresh one, not what the show was when
        the last page left."""
        with self._lock:
            self.clients -= 1
            if self.clients == 0:
                self.snapshot = (self.snapshot[0] + 1, {})

    def _local_host(self, host: str) -> bool:
        """A Host header that names this machine: a loopback address or localhost, with our
        port (or none, for port 80)."""
        match = re.fullmatch(r"(\[[0-9A-Fa-f:.]*\]|[^:\[\]]*)(?::(\d{1,5}))?", host)
        if match is None or (match.group(2) or "80") != str(self.port):
            return False
        name = match.group(1).strip("[]").lower()
        return name == "localhost" or name == self.host or is_loopback(name)

    # ---- the pages' sockets (their sessions' threads) ----------------------------------------

    def _handle(self, connection: Any) -> None:
        PageSession(self, connection).run()

    def drain_wait(self, now: float) -> float:
        """For a flooding page: 0 when it may read one more message, else how long to wait."""
        with self._lock:
            return self._drain.wait(now)

    def count_message(self) -> None:
        with self._lock:
            self.received += 1

    def count_flood(self) -> None:
        with self._lock:
            self.floods += 1

    def count_refusal(self, reason: str, dropped: bool) -> None:
        with self._lock:
            self.rejected += 1
            if dropped:
                self.dropped += 1
            self.last_error = plain_reason(reason)

    def enqueue(self, action: Action, address: str | None) -> str | None:
        """The action queued for the frame; or why not (the queue is full)."""
        with self._lock:
            if len(self._pending) >= QUEUE_LIMIT:
                return f"{QUEUE_LIMIT} messages already wait for the show"
            self._pending.append(action)
            if address is not None:
                self.last_address = address
        return None
