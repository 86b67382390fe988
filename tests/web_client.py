"""A WebSocket client written from RFC 6455 for the web remote's tests, independent of the
websockets library the instrument serves with (as python-osc is for OSC): a handshake with any
headers a test chooses (a wrong token, a foreign Origin, no Origin), masked frames of any kind
and size (text, binary, oversized, broken UTF-8), sent as one buffer for a flood, and the
server's messages read back; and plain HTTP requests through http.client. The test's thread
only (each RawSocket)."""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket
import struct
import time

import numpy as np


def request(port: int, path: str, method: str = "GET",
            host: str | None = None) -> tuple[int, str, dict]:
    """A plain HTTP request (http.client, not the server's library): status, body, headers."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request(method, path, headers={"Host": f"127.0.0.1:{port}" if host is None
                                                  else host})
        response = connection.getresponse()
        return response.status, response.read().decode(errors="replace"), dict(
            response.getheaders())
    finally:
        connection.close()


def get(port: int, path: str, host: str | None = None) -> tuple[int, str, dict]:
    return request(port, path, "GET", host)


def wait_until(condition, timeout: float = 5.0) -> bool:
    """Polls `condition` until it holds (True) or `timeout` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def frame(payload: bytes | str, opcode: int = 1) -> bytes:
    """One final, masked client frame (opcode 1 text, 2 binary, 8 close)."""
    data = payload.encode() if isinstance(payload, str) else bytes(payload)
    size = len(data)
    if size < 126:
        header = struct.pack("!BB", 0x80 | opcode, 0x80 | size)
    elif size < 1 << 16:
        header = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, size)
    else:
        header = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, size)
    mask = os.urandom(4)
    keys = np.frombuffer((mask * (size // 4 + 1))[:size], np.uint8)
    masked = (np.frombuffer(data, np.uint8) ^ keys).tobytes()
    return header + mask + masked


class Refused(Exception):
    """The handshake was answered with something other than 101: `status`, `body`."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body.strip()}")
        self.status, self.body = status, body


class RawSocket:
    """A WebSocket connection made by hand. `origin=None` sends no Origin header."""

    def __init__(self, port: int, path: str = "/ws", *, host: str = "127.0.0.1",
                 origin: str | None = "same", host_header: str | None = None,
                 timeout: float = 5.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self._buffer = b""
        host_header = host_header or f"{host}:{port}"
        lines = [f"GET {path} HTTP/1.1", f"Host: {host_header}", "Upgrade: websocket",
                 "Connection: Upgrade", "Sec-WebSocket-Version: 13",
                 f"Sec-WebSocket-Key: {base64.b64encode(os.urandom(16)).decode()}"]
        if origin is not None:
            lines.append(f"Origin: {'http://' + host_header if origin == 'same' else origin}")
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        head = self._read_until(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        if status != 101:
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            body = self._read_exactly(length).decode(errors="replace")
            self.sock.close()
            raise Refused(status, body)

    def _read_until(self, marker: bytes) -> bytes:
        while marker not in self._buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed during the handshake")
            self._buffer += chunk
        head, _, self._buffer = self._buffer.partition(marker)
        return head

    def _read_exactly(self, size: int) -> bytes:
        while len(self._buffer) < size:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self._buffer += chunk
        data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data

    def send(self, payload: bytes | str, opcode: int = 1) -> None:
        self.sock.sendall(frame(payload, opcode))

    def send_all(self, frames: bytes) -> None:
        self.sock.sendall(frames)

    def receive(self) -> tuple[int, bytes]:
        """The next frame from the server: (opcode, payload); a close frame's payload holds
        its code first."""
        first, second = self._read_exactly(2)
        size = second & 0x7F
        if size == 126:
            size = struct.unpack("!H", self._read_exactly(2))[0]
        elif size == 127:
            size = struct.unpack("!Q", self._read_exactly(8))[0]
        return first & 0x0F, self._read_exactly(size)

    def message(self) -> dict:
        """The next text message, decoded (pings and pongs skipped)."""
        while True:
            opcode, payload = self.receive()
            if opcode == 1:
                return json.loads(payload)
            if opcode == 8:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
                raise ConnectionError(f"closed by the server ({code})")

    def close_code(self) -> int | None:
        """Read until the server's close frame; its code."""
        while True:
            opcode, payload = self.receive()
            if opcode == 8:
                return struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None

    def close(self) -> None:
        try:
            self.sock.sendall(frame(struct.pack("!H", 1000), 8))
        except OSError:
            pass
        self.sock.close()
