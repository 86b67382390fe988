"""The web remote: a control page served to any browser (a phone, a tablet, another laptop),
its sliders, switches, preset grid and buttons speaking to the show over a WebSocket, and live
meters pushed back a few times a second.

    GET /  /app.js  /style.css    the page (control/web/page/, held in memory from the start)
    GET /ws                       the WebSocket: JSON text messages, each OSC's address and
                                  arguments as an array, the same meaning and the same checks
                                  as OSC (control/osc/osc_input.py `interpret`):
        ["/swarm/max_speed/norm", 0.5]   a slider over the performance range, on its curve
        ["/swarm/separation", false]     a value in the parameter's units (a switch, a choice,
        ["/swarm/fast_color", "#ff8800"] a colour, a number)
        ["/swarm/preset", 3]             recall slot 3 with the morph
        ["/swarm/tap"]  ["/swarm/downbeat"]  ["/swarm/respawn"]  ["/swarm/burst", 1]
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
token (generated once, kept in `web-token` beside the saved presets and midi.json, printed in
the page's URL at start): a request or a socket without it, or with a wrong one, gets 403. On
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
import ipaddress
import json
import logging
import math
import os
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from control.actions import Action
from control.looks.files import FileProblem, read_bytes
from control.osc.osc_input import interpret, MAX_TEXT
from control.osc.osc_wire import MAX_ARGUMENTS, OscError, plain_reason, printable
from control.parameters.groups import grouped
from control.parameters.registry import REGISTRY
from control.looks.preset_bank import user_presets_dir

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"  # this machine only, unless told otherwise
PAGE_DIR = Path(__file__).resolve().parent / "page"
PAGE_FILES = {"/": ("index.html", "text/html; charset=utf-8"),
              "/index.html": ("index.html", "text/html; charset=utf-8"),
              "/app.js": ("app.js", "text/javascript; charset=utf-8"),
              "/style.css": ("style.css", "text/css; charset=utf-8")}
SOCKET_PATH = "/ws"
QUERY_MARK = "__QUERY__"  # where index.html's links to app.js and style.css take the token
TOKEN_FILE = "web-token"
# The page loads nothing but its own files and speaks only to its own server; no framing.
CONTENT_POLICY = ("default-src 'self'; connect-src 'self'; img-src 'self' data:; "
                  "frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
TOKEN_PATTERN = re.compile(r"^[A-Za-z0-9_-]{16,128}$")

MAX_MESSAGE = 1024  # characters: the longest message the page sends is ~60
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


class WebError(ValueError):
    """A refused message or request; the message says why (printable, never the token)."""


# ---- the command line (pure) ---------------------------------------------------------------

def parse_endpoint(text: str) -> tuple[str, int]:
    """`PORT`, `HOST:PORT` or `[IPV6]:PORT` (the command line's --web) -> (host, port);
    ValueError says why. No host: 127.0.0.1, this machine only."""
    text = text.strip()
    if text.startswith("["):
        host, _, port = text[1:].partition("]")
        if not port.startswith(":"):
            raise ValueError(f"--web {text!r}: expected [IPV6]:PORT, e.g. [::1]:8080")
        port = port[1:]
    else:
        host, _, port = text.rpartition(":")
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"--web {text!r}: expected PORT or HOST:PORT, e.g. 8080 or "
                         "0.0.0.0:8080") from None
    if not 1 <= number <= 65535:
        raise ValueError(f"--web {text!r}: the port must be 1-65535")
    if host and not re.fullmatch(r"[A-Za-z0-9.:_-]{1,253}", host):
        raise ValueError(f"--web {text!r}: not a host name or address")
    return (host or DEFAULT_HOST), number


def is_loopback(host: str) -> bool:
    """True for an address only this machine reaches (127.0.0.0/8, ::1, localhost): the one
    case that needs no token."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


# ---- the token (stored with the user's settings) -------------------------------------------

def token_path() -> Path:
    """Where the token is kept: beside the saved presets and midi.json ($SWARM_PRESETS_DIR
    moves all three). Looked up when needed, so the environment of the moment counts."""
    return user_presets_dir() / TOKEN_FILE


def load_or_create_token(path: Path | None = None) -> tuple[str, str]:
    """The stored token, or a new one stored there (owner-only, written whole then renamed);
    also a note for the console. A token that cannot be stored still serves this show."""
    path = path or token_path()
    try:
        text = read_bytes(path, 1024, "token file").decode("ascii", "replace").strip()
    except FileProblem as exc:
        if os.path.lexists(path):
            note = f"{exc}; a new token was made"
        else:
            note = f"a new token was made and kept in {path}"
        text = None
    else:
        if TOKEN_PATTERN.match(text):
            return text, f"token from {path} (delete the file for a new link)"
        note = f"{path}: not a token; a new one was made"
        text = None
    token = secrets.token_urlsafe(18)
    try:
        write_token(path, token)
    except OSError as exc:
        note = (f"cannot keep the token in {path} ({exc.strerror or exc}): this link works "
                "until the show ends")
    return token, note


def write_token(path: Path, token: str) -> None:
    """The token into `path`, readable by its owner only, through a temporary file and one
    rename (a link at `path` is replaced, never written through)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
    descriptor = os.open(temporary, flags, 0o600)
    try:
        os.write(descriptor, (token + "\n").encode("ascii"))
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    try:
        os.replace(temporary, path)
    except OSError:
        os.unlink(temporary)
        raise


# ---- messages (pure) -------------------------------------------------------------------------

def _refuse_constant(name: str) -> Any:
    raise WebError(f"{name} is not a number; send a finite number")


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > 30:  # no parameter needs more digits; int() would be costly
        raise WebError(f"a number of {len(text)} digits; no value needs more than 30")
    return int(text)


def parse_message(data: str | bytes) -> Action:
    """The Action a text message asks for: a JSON array [address, arguments...] read as OSC
    reads a message. WebError says why not, quoting the message only through printable()."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        raise WebError(f"a binary message of {len(data)} bytes; send JSON text")
    if len(data) > MAX_MESSAGE:
        raise WebError(f"a message of {len(data)} characters; at most {MAX_MESSAGE}")
    try:
        message = json.loads(data, parse_constant=_refuse_constant, parse_int=_integer)
    except WebError:
        raise
    except (ValueError, RecursionError) as exc:
        raise WebError(f"not JSON ({printable(str(exc), 60)}): {printable(data)}") from None
    if not isinstance(message, list) or not message or not isinstance(message[0], str):
        raise WebError(f"expected [\"/swarm/...\", arguments...], got {printable(data)}")
    address, args = message[0], message[1:]
    if len(args) > MAX_ARGUMENTS:
        raise WebError(f"{printable(address)}: {len(args)} arguments; at most {MAX_ARGUMENTS}")
    for number, value in enumerate(args, 1):
        if isinstance(value, float) and not math.isfinite(value):
            raise WebError(f"{printable(address)}: argument {number} is not finite")
        if isinstance(value, str) and len(value) > MAX_TEXT:
            raise WebError(f"{printable(address)}: argument {number} is a string of "
                           f"{len(value)} characters; no value is longer than {MAX_TEXT}")
        if not isinstance(value, (bool, int, float, str)):
            kind = "null" if value is None else type(value).__name__
            raise WebError(f"{printable(address)}: argument {number} is {kind}, not a value "
                           "(a number, true/false or a string)")
    try:
        return interpret(address, args)
    except OscError as exc:
        raise WebError(str(exc)) from None


def describe_params() -> dict[str, Any]:
    """What the page builds itself from: every parameter with its kind, group, range,
    performance range, curve, choices and meaning, in groups (control/parameters/groups.py)."""
    by_name = {p.name: p for p in REGISTRY}
    params = []
    groups = []
    for group, names in grouped():
        groups.append({"name": group, "params": names})
        for name in names:
            spec = by_name[name]
            entry: dict[str, Any] = {"name": name, "kind": spec.kind, "group": group,
                                     "description": spec.description,
                                     "default": plain_value(spec.default)}
            if spec.kind in ("float", "int"):
                low, high = spec.play_range
                entry.update(lo=spec.lo, hi=spec.hi, play=[low, high], curve=spec.curve)
            if spec.kind == "choice":
                entry["choices"] = list(spec.choices)
            params.append(entry)
    return {"groups": groups, "params": params}


def plain_value(value: Any) -> Any:
    """A parameter's value as the page shows it: a colour as "#rrggbb"."""
    if isinstance(value, tuple) and len(value) == 3:
        return "#" + "".join(f"{round(min(max(c, 0.0), 1.0) * 255):02x}" for c in value)
    return value


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


def local_addresses() -> list[str]:
    """This machine's IPv4 addresses other than loopback (what a phone on the same network
    types), read from the interfaces without sending anything; [] when none can be read."""
    found: list[str] = []
    try:
        import fcntl
        import struct

        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            for _, name in socket.if_nameindex():
                try:
                    packed = fcntl.ioctl(probe.fileno(), 0x8915,  # SIOCGIFADDR
                                         struct.pack("256s", name.encode()[:15]))
                except OSError:
                    continue
                address = socket.inet_ntoa(packed[20:24])
                if not ipaddress.ip_address(address).is_loopback and address not in found:
                    found.append(address)
        finally:
            probe.close()
    except (ImportError, OSError):
        pass
    return found


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
