"""Stream out: the show as H.264 in MPEG-TS for OBS's media source, VLC, ffplay or another
machine (PyAV, which bundles FFmpeg), and, where GStreamer is installed, as raw RGBA frames in
its shared memory (shmsink, for a gst pipeline or a plugin on this machine) or as the same
MPEG-TS over SRT (srtsink). GStreamer runs as a subprocess (`gst-launch-1.0`) fed through a
pipe.

    udp://HOST:PORT   MPEG-TS datagrams of 1316 bytes (7 TS packets); no receiver needed
    tcp://HOST:PORT   connects to a receiver listening there (`?listen=1`: listens instead);
                      a receiver that stops reading for 2 s is dropped and connected again
    srt://HOST:PORT   MPEG-TS through GStreamer's srtsink (its URI options pass through)
    shm:///PATH       raw RGBA frames through GStreamer's shmsink on the socket PATH; read
                      them with `shmsrc socket-path=PATH ! video/x-raw,format=RGBA,...`

Every call runs on the output's thread (visual/output/frame_output.py). H.264 has no alpha: the
streams drop it; shm keeps it.
"""

from __future__ import annotations

import collections
import contextlib
import os
import shutil
import subprocess
import threading
from fractions import Fraction
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np

from swarm_instrument.visual.output.frame_output import OutputFailed
from swarm_instrument.visual.output.video_files import PIXEL_FORMAT, choose_codec, fps_fraction

STREAM_SCHEMES = ("udp", "tcp", "srt", "shm")
UDP_PACKET = 1316  # 7 MPEG-TS packets: what a UDP receiver expects
TCP_STALL_US = 2_000_000  # a TCP receiver that takes nothing for this long is dropped
GST_LAUNCH = "gst-launch-1.0"
GST_PACKAGES = "gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-bad"


def check_stream_url(url: str) -> str | None:
    """Why `url` cannot be a stream (None when it can): a scheme we send to and a place."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in STREAM_SCHEMES:
        return (f"{url!r}: a stream goes to udp://HOST:PORT, tcp://HOST:PORT, "
                "srt://HOST:PORT or shm:///SOCKET-PATH")
    if scheme == "shm":
        path = parts.path if not parts.netloc else f"/{parts.netloc}{parts.path}"
        if not path or path == "/":
            return f"{url!r}: shm:// needs the socket's path, e.g. shm:///tmp/swarm.sock"
        return None
    try:
        port = parts.port
    except ValueError:
        port = None
    if not parts.hostname and not (scheme in ("tcp", "srt") and _listening(parts.query)):
        return f"{url!r}: give the receiver's host, e.g. {scheme}://127.0.0.1:9000"
    if port is None:
        return f"{url!r}: give a port, e.g. {scheme}://{parts.hostname or '0.0.0.0'}:9000"
    return None


def _listening(query: str) -> bool:
    values = dict(parse_qsl(query))
    return values.get("listen") in ("1", "2") or values.get("mode") == "listener"


def stream_backend(url: str, bitrate: int | None = None) -> Any:
    """The backend for a stream URL (checked with check_stream_url first)."""
    scheme = urlsplit(url).scheme.lower()
    if scheme == "shm":
        return GstShmBackend(url)
    if scheme == "srt":
        return GstSrtBackend(url, bitrate)
    return TransportStreamBackend(url, bitrate)


def ffmpeg_url(url: str) -> str:
    """The URL as FFmpeg gets it: UDP datagrams of 1316 bytes, a TCP write timeout."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    if parts.scheme.lower() == "udp":
        query.setdefault("pkt_size", str(UDP_PACKET))
    elif parts.scheme.lower() == "tcp":
        query.setdefault("timeout", str(TCP_STALL_US))
        if _listening(parts.query):
            query.setdefault("listen_timeout", "2000")  # ms: a retry says we still wait
    return urlunsplit(parts._replace(query=urlencode(query)))


def bit_rate_for(size: tuple[int, int], rate: float) -> int:
    """About 0.08 bits a pixel: 10 Mbit/s for 1080p at 60 fps, at least 1 Mbit/s."""
    return int(min(max(size[0] * size[1] * rate * 0.08, 1_000_000), 40_000_000))


class H264Writer:
    """RGBA frames -> H.264 (yuv420p, BT.709, a key frame a second, no B-frames) in MPEG-TS,
    into an FFmpeg URL or a file object. PyAV opens the URL at the first frame."""

    def __init__(self, target: Any, size: tuple[int, int], rate: float,
                 bitrate: int | None = None) -> None:
        import av  # noqa: PLC0415 - PyAV takes about a second to import: only when a file is coded
        self.size = (int(size[0]), int(size[1]))
        self.rate = fps_fraction(rate)
        codec, _ = choose_codec()
        self.container = av.open(target, mode="w", format="mpegts")
        try:
            stream = self.container.add_stream(codec, rate=self.rate)
            stream.width, stream.height = self.size
            stream.pix_fmt = PIXEL_FORMAT
            bits = int(bitrate or bit_rate_for(self.size, float(self.rate)))
            stream.bit_rate = bits
            context = stream.codec_context
            context.colorspace = context.color_primaries = context.color_trc = 1  # BT.709
            context.color_range = 1
            context.thread_count = max(1, min(4, (os.cpu_count() or 2) // 2))
            keyframes = str(max(round(float(self.rate)), 1))
            options = {"g": keyframes, "bf": "0", "maxrate": str(bits),
                       "bufsize": str(bits // 2)}
            if context.name == "libx264":
                options.update({"preset": "veryfast", "tune": "zerolatency"})
            stream.options = options
            self.stream = stream
            self.container.start_encoding()  # connects now: a refusal is said at open
        except Exception:
            self.container.close()
            raise
        self._pts = -1

    def write(self, frame: np.ndarray, seconds: float) -> None:
        import av  # noqa: PLC0415 - PyAV takes about a second to import: only when a file is coded
        video = av.VideoFrame.from_ndarray(frame, format="rgba")
        video = video.reformat(format=PIXEL_FORMAT, dst_colorspace="ITU709")
        self._pts = max(round(seconds * float(self.rate)), self._pts + 1)
        video.pts = self._pts
        self.container.mux(self.stream.encode(video))

    def close(self, flush: bool = True) -> None:
        """Finish the stream; `flush=False` (the receiver failed) sends nothing more than
        the container's own trailer."""
        if flush:
            with contextlib.suppress(Exception):  # a receiver gone: nothing more to send
                self.container.mux(self.stream.encode(None))
        with contextlib.suppress(Exception):
            self.container.close()


class TransportStreamBackend:
    """H.264 in MPEG-TS over UDP or TCP, through FFmpeg's own network protocols."""

    kind = "stream"
    carries_alpha = False
    even_size = True

    def __init__(self, url: str, bitrate: int | None = None) -> None:
        self.target = url
        self.bitrate = bitrate
        self._writer: H264Writer | None = None
        self._failed = False

    def open(self, size: tuple[int, int], rate: float) -> None:
        try:
            self._writer = H264Writer(ffmpeg_url(self.target), size, rate, self.bitrate)
        except Exception as exc:  # noqa: BLE001
            raise OutputFailed(_network_reason(exc, self.target)) from None

    def send(self, frame: np.ndarray, seconds: float) -> None:
        try:
            self._writer.write(frame, seconds)
        except Exception as exc:  # noqa: BLE001
            self._failed = True
            raise OutputFailed(_network_reason(exc, self.target)) from None

    def close(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close(flush=not self._failed)
        self._failed = False

    def detail(self) -> str | None:
        return None


def _network_reason(exc: BaseException, url: str) -> str:
    """Why a stream failed, in words (the output's label already names the URL)."""
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    if isinstance(exc, ConnectionRefusedError):
        return "no receiver listening there (connection refused)"
    if isinstance(exc, TimeoutError) or "timed out" in text.lower():
        if _listening(urlsplit(url).query):
            return "waiting for a receiver to connect"
        return "the receiver stopped taking frames (timed out)"
    if isinstance(exc, (BrokenPipeError, ConnectionResetError)):
        return f"the receiver went away ({text})"
    if "address already in use" in text.lower():
        return f"the port is taken ({text})"
    return text


# ---- GStreamer --------------------------------------------------------------------------------


def gstreamer_available() -> str | None:
    """None where gst-launch-1.0 is on the PATH, else what to install."""
    if shutil.which(GST_LAUNCH) is None:
        return f"GStreamer is not installed ({GST_LAUNCH} not found; Debian: {GST_PACKAGES})"
    return None


def _gst_string(text: str) -> str:
    """A property value gst-launch reads back whole (it re-splits its arguments on spaces)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class GstPipe:
    """`gst-launch-1.0 -q fdsrc fd=0 ! ...`: bytes written here go into the pipeline; its last
    lines of stderr are kept to say why it stopped."""

    def __init__(self, elements: list[str]) -> None:
        problem = gstreamer_available()
        if problem:
            raise OutputFailed(problem)
        self.args = [GST_LAUNCH, "-q", "fdsrc", "fd=0", "!", *elements]
        try:
            self.process = subprocess.Popen(self.args, stdin=subprocess.PIPE,
                                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                            start_new_session=True)
        except OSError as exc:
            raise OutputFailed(f"{GST_LAUNCH} did not start ({exc.strerror})") from None
        self.errors: collections.deque[str] = collections.deque(maxlen=5)
        self._reader = threading.Thread(target=self._read_errors, daemon=True,
                                        name="gst stderr")
        self._reader.start()

    def _read_errors(self) -> None:
        for line in self.process.stderr:
            text = line.decode("utf-8", "replace").strip()
            if text:
                self.errors.append(text)

    def reason(self) -> str:
        self.process.poll()
        said = next((line for line in reversed(self.errors) if "ERROR" in line.upper()),
                    self.errors[-1] if self.errors else "")
        code = self.process.returncode
        return (f"{GST_LAUNCH} stopped" + (f" (exit {code})" if code is not None else "")
                + (f": {said[:160]}" if said else ""))

    def check_running(self) -> None:
        if self.process.poll() is not None:
            self._reader.join(0.5)
            raise OutputFailed(self.reason())

    def write(self, data: Any) -> None:
        try:
            self.process.stdin.write(data)
            self.process.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            self._reader.join(0.5)
            raise OutputFailed(self.reason()) from None

    def close(self) -> None:
        try:
            self.process.stdin.close()
        except OSError:
            pass
        try:
            self.process.wait(2.0)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class GstShmBackend:
    """Raw RGBA frames into GStreamer's shared memory (shmsink), alpha kept. With no reader
    shmsink throws frames away; a slow reader loses frames in a leaky queue, never blocking
    the pipe."""

    kind = "shm"
    carries_alpha = True
    even_size = False

    def __init__(self, url: str) -> None:
        self.target = url
        parts = urlsplit(url)
        self.path = parts.path if not parts.netloc else f"/{parts.netloc}{parts.path}"
        self._pipe: GstPipe | None = None

    def open(self, size: tuple[int, int], rate: float) -> None:
        width, height = int(size[0]), int(size[1])
        frame_bytes = width * height * 4
        rate_fraction = Fraction(fps_fraction(rate))
        self._pipe = GstPipe([
            "rawvideoparse", f"width={width}", f"height={height}", "format=rgba",
            f"framerate={rate_fraction.numerator}/{rate_fraction.denominator}", "!",
            "queue", "leaky=downstream", "max-size-buffers=2", "max-size-bytes=0",
            "max-size-time=0", "!",
            "shmsink", f"socket-path={_gst_string(self.path)}",
            f"shm-size={frame_bytes * 6}", "wait-for-connection=false", "sync=false"])

    def send(self, frame: np.ndarray, seconds: float) -> None:
        pipe = self._pipe
        pipe.check_running()
        pipe.write(memoryview(np.ascontiguousarray(frame)).cast("B"))

    def close(self) -> None:
        pipe, self._pipe = self._pipe, None
        if pipe is not None:
            pipe.close()

    def detail(self) -> str | None:
        return None


class GstSrtBackend:
    """H.264 in MPEG-TS (PyAV) piped into GStreamer's srtsink (FFmpeg in PyAV has no SRT)."""

    kind = "srt"
    carries_alpha = False
    even_size = True

    def __init__(self, url: str, bitrate: int | None = None) -> None:
        self.target = url
        self.bitrate = bitrate
        self._pipe: GstPipe | None = None
        self._writer: H264Writer | None = None

    def open(self, size: tuple[int, int], rate: float) -> None:
        self._pipe = GstPipe(["tsparse", "alignment=7", "!", "srtsink",
                              f"uri={_gst_string(self.target)}", "wait-for-connection=false",
                              "sync=false"])
        self._writer = H264Writer(self._pipe.process.stdin, size, rate, self.bitrate)

    def send(self, frame: np.ndarray, seconds: float) -> None:
        self._pipe.check_running()
        try:
            self._writer.write(frame, seconds)
        except OutputFailed:
            raise
        except Exception:  # noqa: BLE001 - the pipe broke: gst said why
            raise OutputFailed(self._pipe.reason()) from None

    def close(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
        pipe, self._pipe = self._pipe, None
        if pipe is not None:
            pipe.close()

    def detail(self) -> str | None:
        return None
