"""The outputs only some systems have: Syphon (macOS, syphon-python: a Metal texture other
apps on the Mac read), Spout (Windows, SpoutGL: a shared DirectX texture) and a virtual camera
(pyvirtualcam: v4l2loopback on Linux, OBS's virtual camera on macOS and Windows), for video
calls and anything that takes a webcam.

Elsewhere each says so once (OutputUnavailable) and the show goes on. Each is given RGBA frames
top row first, on the output's thread (visual/output/frame_output.py); Syphon and Spout keep the
alpha, a camera has none. Each library is imported when the output opens, not before.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from typing import Any

import numpy as np

from swarm_instrument.visual.output.frame_output import OutputFailed, OutputUnavailable


def _library(module: str, package: str) -> Any:
    importlib.invalidate_caches()
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise OutputFailed(f"{package} is not installed or does not load ({exc}); "
                           f"pip install {package}") from None


class SyphonBackend:
    """A Syphon server named `name` (macOS 11+): each frame copied into a Metal texture and
    published."""

    kind = "syphon"
    carries_alpha = True
    even_size = False

    def __init__(self, name: str, platform: str | None = None) -> None:
        self.target = name
        self.platform = platform or sys.platform
        self._server: Any = None
        self._texture: Any = None
        self._copy: Any = None

    def open(self, size: tuple[int, int], rate: float) -> None:
        if self.platform != "darwin":
            raise OutputUnavailable("Syphon is macOS only (on this system: --out-ndi NAME)")
        syphon = _library("syphon", "syphon-python")
        from syphon.utils.numpy import copy_image_to_mtl_texture  # noqa: PLC0415 - platform: Syphon is macOS's
        from syphon.utils.raw import create_mtl_texture  # noqa: PLC0415 - platform: Syphon is macOS's

        self._server = syphon.SyphonMetalServer(self.target)
        self._texture = create_mtl_texture(self._server.device, int(size[0]), int(size[1]))
        self._copy = copy_image_to_mtl_texture

    def send(self, frame: np.ndarray, seconds: float) -> None:
        self._copy(frame, self._texture)  # Metal textures are top row first, as the frame
        self._server.publish_frame_texture(self._texture, is_flipped=False)

    def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            with contextlib.suppress(Exception):  # closing never fails the show
                server.stop()

    def detail(self) -> str | None:
        try:
            return "a client" if self._server is not None and self._server.has_clients \
                else None
        except Exception:  # noqa: BLE001
            return None


class SpoutBackend:
    """A Spout sender named `name` (Windows): each frame uploaded with sendImage (Spout makes
    its own hidden GL context on this thread), top row first, so not inverted."""

    kind = "spout"
    carries_alpha = True
    even_size = False

    def __init__(self, name: str, platform: str | None = None) -> None:
        self.target = name
        self.platform = platform or sys.platform
        self._sender: Any = None
        self._format = 0x1908  # GL_RGBA
        self._size = (0, 0)

    def open(self, size: tuple[int, int], rate: float) -> None:
        if self.platform != "win32":
            raise OutputUnavailable("Spout is Windows only (on this system: --out-ndi NAME)")
        spout = _library("SpoutGL", "SpoutGL")
        enums = getattr(spout, "enums", None)
        self._format = getattr(enums, "GL_RGBA", self._format)
        sender = spout.SpoutSender()
        sender.setSenderName(self.target)
        self._sender = sender
        self._size = (int(size[0]), int(size[1]))

    def send(self, frame: np.ndarray, seconds: float) -> None:
        width, height = self._size
        if not self._sender.sendImage(frame, width, height, self._format, False, 0):
            raise OutputFailed("Spout refused the frame (sendImage failed)")
        self._sender.setFrameSync(self.target)

    def close(self) -> None:
        sender, self._sender = self._sender, None
        if sender is not None:
            with contextlib.suppress(Exception):
                sender.releaseSender()

    def detail(self) -> str | None:
        return None


class VirtualCamBackend:
    """A virtual camera through pyvirtualcam: `device` (None: the first there is) on `backend`
    (None: every one pyvirtualcam knows here). No alpha: cameras send RGB."""

    kind = "virtualcam"
    carries_alpha = False
    even_size = True  # cameras and the apps reading them expect 4:2:0-friendly sizes

    def __init__(self, device: str | None = None, backend: str | None = None) -> None:
        self.device = device
        self.backend = backend
        self.target = device or "camera"
        self._camera: Any = None
        self._rgb: np.ndarray | None = None

    def open(self, size: tuple[int, int], rate: float) -> None:
        pyvirtualcam = _library("pyvirtualcam", "pyvirtualcam")
        try:
            self._camera = pyvirtualcam.Camera(int(size[0]), int(size[1]), float(rate),
                                               fmt=pyvirtualcam.PixelFormat.RGB,
                                               device=self.device, backend=self.backend)
        except Exception as exc:  # noqa: BLE001 - pyvirtualcam says which backends failed
            reason = " / ".join(line.strip() for line in str(exc).splitlines() if line.strip())
            if "v4l2 loopback device" in reason.lower():
                raise OutputFailed("no virtual camera: no v4l2loopback device (/dev/video*); "
                                   "load the module: sudo modprobe v4l2loopback "
                                   "exclusive_caps=1") from None
            hint = ("" if sys.platform.startswith("linux") else
                    "; install OBS Studio and start its virtual camera once")
            raise OutputFailed(f"no virtual camera ({reason[:160]}){hint}") from None
        self.target = self.device or str(self._camera.device)

    def send(self, frame: np.ndarray, seconds: float) -> None:
        if self._rgb is None or self._rgb.shape[:2] != frame.shape[:2]:
            self._rgb = np.empty((*frame.shape[:2], 3), np.uint8)
        np.copyto(self._rgb, frame[..., :3])
        self._camera.send(self._rgb)

    def close(self) -> None:
        camera, self._camera = self._camera, None
        if camera is not None:
            with contextlib.suppress(Exception):
                camera.close()

    def detail(self) -> str | None:
        return None
