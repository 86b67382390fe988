"""The instrument's one entry point to audio: `open_audio` picks the source and never fails.

Main thread only. Every source (live input, file, offline array, silence) has one interface,
`AudioFrameSource`: `update(now)` once a frame, then `has_data`, `rms`, `level`, `peak_db`,
`bands`, `onset`, `onsets`, `state`, `message`, `take_messages()`, `sources()`,
`telemetry()` and `close()`. Call `close()` when the show ends: the live input's worker
process is stopped and its shared memory unlinked there (were it forgotten, both still go
when the source is collected or the interpreter exits, but a killed show leaves the unlinking
to Python's resource tracker). `check_audio_file` checks an --audio-file (or --render song)
cheaply at start; `read_audio` reads any sound file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from swarm_instrument.audio.base import AudioFrameSource, OfflineAudio, Silence
from swarm_instrument.audio.files.decode import (
    AudioFileError,
    AudioFileInfo,
    check_audio_file,
    read_audio,
)
from swarm_instrument.audio.files.playback import AudioFile
from swarm_instrument.audio.input.devices import list_input_devices
from swarm_instrument.audio.input.live_input import START_WAIT_S, AudioInput

__all__ = ["AudioFrameSource", "AudioInput", "AudioFile", "OfflineAudio", "Silence", "open_audio",
           "list_input_devices", "AudioFileError", "AudioFileInfo", "check_audio_file",
           "read_audio"]


def open_audio(device: int | str | None = None, file: str | Path | None = None,
               mute: bool = False, *, loop: bool = True, sd: Any = None,
               start_wait_s: float = START_WAIT_S, start_s: float = 0.0) -> AudioFrameSource:
    """The source the command line asks for: `file` if given, else the input `device`
    (None = the default input). Never raises: whatever fails becomes a source that reads as
    silence, whose `message` says why and what to try. `start_wait_s`: how long the live
    input's opening is awaited here (0: not at all; its frames read silence until the worker
    reports, and what it reports is said then). `start_s`: where the file starts playing."""
    try:
        if file is not None:
            try:
                source: AudioFrameSource = AudioFile(file, mute=mute, loop=loop, sd=sd,
                                                       start_s=start_s)
            except AudioFileError as exc:
                return Silence("no audio file", f"{exc}; running without audio")
            if device is not None:
                source._say(f"--audio-device {device} is not used while --audio-file plays")
            return source
        # PortAudio runs in its worker process
        return AudioInput(device, sd=sd, start_wait_s=start_wait_s)
    except Exception as exc:  # noqa: BLE001 - a bug must not stop the show; say it plainly
        return Silence("audio failed", f"audio could not start ({type(exc).__name__}: {exc}); "
                       "running without audio")
