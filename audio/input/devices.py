"""Finding PortAudio and its input devices: `--list-devices` and `--audio-device`.

Main thread only. sounddevice is imported here lazily, so a machine without PortAudio (the
GPU box, a CI runner) still runs the instrument, silent. A device is chosen by index or by a
name substring, as sounddevice's own examples do, and reopened later by its name, since
indices shift when devices come and go.
"""

from __future__ import annotations

import atexit
import os
import re
import threading
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

PORTAUDIO_HELP = ("install PortAudio (Debian/Ubuntu: apt-get install libportaudio2; macOS: "
                  "brew install portaudio) and sounddevice (pip install sounddevice), or "
                  "rehearse with --audio-file PATH.wav")
PICK_HELP = "pick one with --audio-device INDEX|NAME (see --list-devices)"


class AudioProblem(Exception):
    """Audio that cannot start; `state` is the HUD's word for it, str() says what to do."""

    def __init__(self, state: str, message: str) -> None:
        super().__init__(message)
        self.state = state


def load_sounddevice() -> ModuleType:
    """Import sounddevice, or raise AudioProblem("no PortAudio") saying how to get it."""
    # PortAudio's JACK backend would otherwise try to spawn a JACK server of its own when none
    # runs: on stage that is a surprise process grabbing the sound card. Never start one.
    os.environ.setdefault("JACK_NO_START_SERVER", "1")
    try:
        import sounddevice  # noqa: PLC0415 - optional: without PortAudio the show plays with no audio input
    except (OSError, ImportError) as exc:  # sounddevice raises OSError when libportaudio is absent
        raise AudioProblem("no PortAudio", f"no audio: cannot load PortAudio ({exc}); "
                           f"{PORTAUDIO_HELP}") from None
    return sounddevice


def rescan(sd: Any) -> None:
    """Make PortAudio enumerate devices again: it only looks once, at initialisation, so a
    device plugged in later (or a JACK server started later) is invisible until this runs.
    Closes every stream of this process."""
    terminate, initialize = getattr(sd, "_terminate", None), getattr(sd, "_initialize", None)
    if terminate is None or initialize is None:
        return
    try:
        terminate()
    except Exception:  # noqa: BLE001 - already terminated or a dead host API: start anew
        pass
    initialize()


def close_in_background(stream: Any) -> threading.Event:
    """Abort and close a stream on a helper thread; the event is set once it has closed.

    An event that stays unset means PortAudio hangs on the stream: with a JACK server that
    quit, PortAudio 19.6 blocks for good in abort, close and terminate alike. The helper is
    then left behind (cffi released the GIL), and nobody may call PortAudio again."""
    done = threading.Event()

    def close() -> None:
        for action in ("abort", "close"):
            try:
                getattr(stream, action)()
            except Exception:  # noqa: BLE001 - a vanished device may refuse either
                pass
        done.set()

    threading.Thread(target=close, name="audio-stream-close", daemon=True).start()
    return done


def skip_portaudio_exit(sd: Any) -> None:
    """After PortAudio hung, keep sounddevice's exit handler (Pa_Terminate) from hanging the
    instrument's exit too."""
    handler = getattr(sd, "_exit_handler", None)
    if handler is not None:
        atexit.unregister(handler)


def stable_name(name: str) -> str:
    """A device name without ALSA's card numbers "(hw:1,0)", which change on replugging."""
    return re.sub(r"\s*\((hw|plughw):[^)]*\)\s*$", "", name).strip()


def input_devices(sd: Any) -> list[dict[str, Any]]:
    """Every device with input channels, as dicts with 'index', 'name', 'hostapi_name'..."""
    found = []
    apis = sd.query_hostapis()
    for index, info in enumerate(sd.query_devices()):
        if info.get("max_input_channels", 0) > 0:
            device = dict(info)
            device["index"] = info.get("index", index)
            api = device.get("hostapi")
            device["hostapi_name"] = (apis[api]["name"]
                                      if isinstance(api, int) and 0 <= api < len(apis) else "")
            found.append(device)
    return found


def default_input_index(sd: Any) -> int | None:
    try:
        index = sd.default.device[0]
    except Exception:  # noqa: BLE001
        return None
    return index if isinstance(index, int) and index >= 0 else None


def _describe(devices: Sequence[Mapping[str, Any]]) -> str:
    if not devices:
        return "none found"
    return ", ".join(f"{d['index']} '{d['name']}'" for d in devices)


def resolve_input_device(devices: Sequence[Mapping[str, Any]], default: int | None,
                         spec: int | str | None) -> Mapping[str, Any]:
    """Pick the input device that `spec` names: None = the default, an index, or a
    case-insensitive name substring (an exact name wins). Raises AudioProblem."""
    by_index = {device["index"]: device for device in devices}
    if spec is None:
        if default in by_index:
            return by_index[default]
        raise AudioProblem("no input device",
                           f"no default audio input ({'inputs: ' + _describe(devices)}); "
                           f"{PICK_HELP}, or rehearse with --audio-file PATH.wav")
    if isinstance(spec, int) or (isinstance(spec, str) and spec.strip().isdigit()):
        index = int(spec)
        if index in by_index:
            return by_index[index]
        raise AudioProblem("no input device",
                           f"--audio-device {index}: no input device has that index "
                           f"(inputs: {_describe(devices)}); {PICK_HELP}")
    wanted = spec.strip().lower()
    for device in devices:  # an exact name, or the same card under a new ALSA number
        if device["name"].lower() == wanted or stable_name(device["name"]).lower() == \
                stable_name(spec).lower():
            return device
    matches = [d for d in devices if wanted in d["name"].lower()]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise AudioProblem("no input device",
                           f"--audio-device '{spec}': no input device's name contains it "
                           f"(inputs: {_describe(devices)}); {PICK_HELP}")
    raise AudioProblem("no input device",
                       f"--audio-device '{spec}' matches {len(matches)} inputs "
                       f"({_describe(matches)}); give more of the name, or the index")


def list_input_devices(sd: Any = None) -> str:
    """The text `--list-devices` prints: each input, its host API, channels and rate."""
    try:
        sd = sd or load_sounddevice()
        devices = input_devices(sd)
    except AudioProblem as problem:
        return str(problem)
    except Exception as exc:  # noqa: BLE001 - PortAudio errors while listing
        return f"cannot list audio devices: {exc}"
    if not devices:
        return ("no audio inputs found; plug one in (or start JACK), or rehearse with "
                "--audio-file PATH.wav")
    default = default_input_index(sd)
    lines = ["audio inputs (--audio-device takes the index or part of the name):"]
    for d in devices:
        mark = ">" if d["index"] == default else " "
        api = f", {d['hostapi_name']}" if d["hostapi_name"] else ""
        lines.append(f"{mark} {d['index']:3d} {d['name']}{api} "
                     f"({d['max_input_channels']} in, {d.get('default_samplerate', 0):g} Hz)")
    return "\n".join(lines)
