"""The web remote's front door (control/web/web_remote.py's server): one thread accepts every
connection, reads its request head itself under small limits and a deadline, and asks the remote
what to answer, before a thread, a library buffer or the performer's request budget is spent on it.

    accept -> read the head (at most MAX_HEAD bytes, control/web/web_http.py) within HEAD_SECONDS
           -> answer(head, peer):
                bytes      written back from here, then the connection is closed
                HandOver   a WebSocket the remote lets in: handed to websockets' threaded
                           server with the head already read (FedConnection feeds it in),
                           its `release` called once when the socket closes

At most MAX_PENDING connections are in the gate at once; one more drops the oldest. A browser
sends its request with its first packet, so only a connection that hoards grows old here: a
pile of them cannot keep the performer's page out (as a cap that turned newcomers away would),
and what they hold is MAX_PENDING * MAX_HEAD bytes at most, with no thread of their own.
A connection that sent nothing (a browser's spare, opened ahead of need) leaves silently; one
cut or dropped halfway through its head is counted as a refusal.
"""

from __future__ import annotations

import errno
import logging
import selectors
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from websockets.sync.server import ServerConnection

from swarm_instrument.control.web.web_http import (
    END,
    MAX_HEAD,
    Head,
    HeadError,
    parse_head,
    response,
)

log = logging.getLogger(__name__)

MAX_PENDING = 64  # connections in the gate at once (reading a head or writing an answer)
HEAD_SECONDS = 5.0  # from accept to the head read and the answer written (module-level: tests)
ACCEPTS_PER_ROUND = 64  # then the heads already there are read before more are accepted


@dataclass
class HandOver:
    """The remote's answer for a WebSocket it lets in: `release` runs once when it closes."""

    release: Callable[[], None] | None = None


Answer = Callable[[Head, str], "bytes | HandOver"]


@dataclass(eq=False)
class _Visit:
    """One connection in the gate: its head so far, then its answer being written."""

    sock: socket.socket
    address: Any
    deadline: float
    data: bytearray = field(default_factory=bytearray)
    out: memoryview | None = None  # the answer still to write
    answered: bool = False  # written and our side shut: waiting for the peer to close


class Gate:
    """Accepts on `listener`, reads heads, answers through `answer`, says refusals of its own
    (a head too large or malformed, cut off, dropped for newer ones or out of time) through
    `refused`. `handoff` is what websockets' server takes for its listening socket."""

    def __init__(self, listener: socket.socket, answer: Answer,
                 refused: Callable[[str], None]) -> None:
        self._listener = listener
        self._answer = answer
        self._refused = refused
        self.handoff = Handoff(listener)
        self._visits: dict[socket.socket, _Visit] = {}  # in arrival order: the oldest first
        self._selector = selectors.DefaultSelector()
        self._wake, self._waker = socket.socketpair()
        self._wake.setblocking(False)
        listener.setblocking(False)
        self._selector.register(listener, selectors.EVENT_READ)
        self._selector.register(self._wake, selectors.EVENT_READ)
        self._running = True
        self._thread = threading.Thread(target=self._run, name="web-gate", daemon=True)
        self._thread.start()

    @property
    def pending(self) -> int:
        """Connections in the gate now (any thread may read it)."""
        return len(self._visits)

    def close(self) -> None:
        """Stop accepting and drop every connection still in the gate; bounded."""
        self._running = False
        try:
            self._waker.send(b"\0")
        except OSError:
            pass
        self._thread.join(timeout=2.0)

    # ---- the gate's thread ----------------------------------------------------------------

    def _run(self) -> None:
        try:
            while self._running:
                oldest = next(iter(self._visits.values()), None)
                wait = None if oldest is None else max(0.0, oldest.deadline - time.monotonic())
                for key, _ in self._selector.select(wait):
                    try:
                        if key.fileobj is self._listener:
                            self._accept()
                        elif key.fileobj is self._wake:
                            self._wake.recv(64)
                        else:
                            self._step(key.data)
                    except Exception as exc:  # noqa: BLE001 - a bug must not shut the door
                        log.warning(f"web: the request gate failed ({exc!r}); please report "
                                    "it")
                        if isinstance(key.data, _Visit):
                            self._drop(key.data, None)
                self._expire(time.monotonic())
        finally:
            for visit in list(self._visits.values()):
                self._drop(visit, None)
            for sock in (self._listener, self._wake, self._waker):
                sock.close()
            self._selector.close()

    def _accept(self) -> None:
        for _ in range(ACCEPTS_PER_ROUND):
            try:
                sock, address = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of file descriptors: free one, try again later
                oldest = next(iter(self._visits.values()), None)
                if oldest is not None:
                    self._drop(oldest, "too many open files: the oldest unfinished "
                               "connection was dropped")
                elif exc.errno in (errno.EMFILE, errno.ENFILE):
                    time.sleep(0.05)
                return
            if len(self._visits) >= MAX_PENDING:
                self._drop(next(iter(self._visits.values())),
                           f"more than {MAX_PENDING} unfinished connections: the oldest "
                           "was dropped")
            sock.setblocking(False)
            visit = _Visit(sock, address, time.monotonic() + HEAD_SECONDS)
            self._visits[sock] = visit
            self._selector.register(sock, selectors.EVENT_READ, visit)

    def _step(self, visit: _Visit) -> None:
        if visit.out is not None:
            self._send(visit)
        elif visit.answered:
            self._linger(visit)
        else:
            self._read(visit)

    def _read(self, visit: _Visit) -> None:
        try:
            chunk = visit.sock.recv(MAX_HEAD + 1 - len(visit.data))
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._drop(visit, f"a request cut off after {len(visit.data)} bytes"
                       if visit.data else None)
            return
        visit.data += chunk
        end = visit.data.find(END)
        if end < 0:
            if len(visit.data) > MAX_HEAD:
                self._refuse(visit, HeadError(431, f"a request head of more than {MAX_HEAD} "
                                                   "bytes"))
            return
        head = bytes(visit.data[:end + len(END)])
        try:
            parsed = parse_head(head, len(visit.data) - len(head))
        except HeadError as exc:
            self._refuse(visit, exc)
            return
        answer = self._answer(parsed, _peer(visit.address))
        if isinstance(answer, HandOver):
            self._hand_over(visit, head, answer.release)
        else:
            self._write(visit, answer)

    def _refuse(self, visit: _Visit, problem: HeadError) -> None:
        self._refused(str(problem))
        self._write(visit, response(problem.status, str(problem) + "\n"))

    def _write(self, visit: _Visit, data: bytes) -> None:
        if not data:  # closed unanswered
            self._drop(visit, None)
            return
        visit.out = memoryview(data)
        self._selector.modify(visit.sock, selectors.EVENT_WRITE, visit)
        self._send(visit)

    def _send(self, visit: _Visit) -> None:
        assert visit.out is not None
        try:
            sent = visit.sock.send(visit.out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(visit, None)
            return
        visit.out = visit.out[sent:]
        if len(visit.out):
            return
        # All written: our side is shut and what the peer still sends is read and dropped
        # until it closes (closing at once with its bytes unread would reset the connection
        # and could lose the answer on its way).
        visit.out, visit.answered = None, True
        try:
            visit.sock.shutdown(socket.SHUT_WR)
        except OSError:
            self._drop(visit, None)
            return
        self._selector.modify(visit.sock, selectors.EVENT_READ, visit)

    def _linger(self, visit: _Visit) -> None:
        try:
            chunk = visit.sock.recv(MAX_HEAD)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._drop(visit, None)

    def _hand_over(self, visit: _Visit, head: bytes,
                   release: Callable[[], None] | None) -> None:
        self._selector.unregister(visit.sock)
        del self._visits[visit.sock]
        try:
            handed = _Handed(visit.sock, head, release)
        except OSError:
            visit.sock.close()
            if release is not None:
                release()
            return
        self.handoff.put(handed, visit.address)

    def _expire(self, now: float) -> None:
        while self._visits:
            oldest = next(iter(self._visits.values()))
            if oldest.deadline > now:
                return
            unfinished = oldest.data and not oldest.answered and oldest.out is None
            self._drop(oldest, f"no whole request within {HEAD_SECONDS:g} s "
                               f"({len(oldest.data)} bytes)" if unfinished else None)

    def _drop(self, visit: _Visit, reason: str | None) -> None:
        """Close a connection in the gate; `reason`: counted as a refusal when it had sent
        part of a request and had no answer yet (None, or nothing sent: silent)."""
        if self._visits.pop(visit.sock, None) is None:
            return
        try:
            self._selector.unregister(visit.sock)
        except (KeyError, ValueError):
            pass
        visit.sock.close()
        if reason is not None and visit.data and not visit.answered:
            self._refused(reason)


def _peer(address: Any) -> str:
    return str(address[0]) if isinstance(address, tuple) and address else "?"


class _Handed(socket.socket):
    """A connection handed to websockets: the head the gate read (FedConnection feeds it to
    the protocol first) and `release`, called once when the socket is closed, whoever closes
    it (websockets after the connection, or the handoff at shutdown)."""

    def __init__(self, sock: socket.socket, head: bytes,
                 release: Callable[[], None] | None) -> None:
        super().__init__(sock.family, sock.type, sock.proto, fileno=sock.detach())
        self.setblocking(True)
        self.head = head
        self._release = release
        self._release_lock = threading.Lock()

    def close(self) -> None:
        with self._release_lock:
            release, self._release = self._release, None
        try:
            super().close()
        finally:
            if release is not None:
                release()


class Handoff:
    """What websockets' server takes for its listening socket (serve(sock=...)): `accept()`
    gives it the connections the gate handed over, one wake-up byte each on a socket pair
    (what its serve_forever selects on); its address is the real listener's."""

    def __init__(self, listener: socket.socket) -> None:
        self._listener = listener
        self._ready, self._notify = socket.socketpair()
        self._queue: deque[tuple[socket.socket, Any]] = deque()
        self._lock = threading.Lock()
        self._closed = False
        self.family = listener.family
        self._name = listener.getsockname()

    def getsockname(self) -> Any:
        return self._name

    def fileno(self) -> int:
        return self._ready.fileno()

    def put(self, sock: socket.socket, address: Any) -> None:
        with self._lock:
            closed = self._closed
            if not closed:
                self._queue.append((sock, address))
        if closed:
            sock.close()
            return
        try:
            self._notify.send(b"\0")  # at most MAX_CLIENTS wait: each holds a client slot
        except OSError:
            pass

    def accept(self) -> tuple[socket.socket, Any]:
        """The next handed-over connection; OSError once closed (serve_forever then ends)."""
        try:
            self._ready.recv(1)
        except OSError:
            pass
        with self._lock:
            if self._closed or not self._queue:
                raise OSError(errno.EBADF, "the web remote is closed")
            return self._queue.popleft()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            left = list(self._queue)
            self._queue.clear()
        for sock, _ in left:
            sock.close()
        self._ready.close()
        self._notify.close()


class FedConnection(ServerConnection):
    """websockets' server connection (serve(create_connection=...)) for a socket the gate
    handed over: the request head the gate read is fed to the protocol before anything else
    is read from the socket, as its own reading thread does with what it receives."""

    def recv_events(self) -> None:
        head = getattr(self.socket, "head", b"")
        if head:
            with self.protocol_mutex:
                self.protocol.receive_data(head)
                events = self.protocol.events_received()
                try:
                    self.send_data()  # nothing for a good head; a refusal's end otherwise
                except OSError as exc:
                    self.set_connection_exc(exc)
            for event in events:
                self.process_event(event)
        super().recv_events()
