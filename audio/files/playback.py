"""`--audio-file`: a sound file (WAV, MP3, FLAC, OGG: audio/files/decode.py) played in real time
through the same ring and analysis as the live input, and out of the default output device
unless muted, for rehearsal without a mic.

With an output stream, PortAudio's callback thread runs `_play`: it copies the next block to
the output and into the ring, allocating no arrays and never raising, so what the swarm
follows is what the room hears. Without one (muted, no output device, no PortAudio) the main
thread advances the file by the clock in `update`, every sample that fell due since the last
frame, however long that frame was. Everything else is main thread only.

The file is played in order from its first sample (or from `start_s`: --audio-start, and the
point a supervisor's restart goes on from), never skipping (the ring's `written` counts every
sample played, so the k-th is `mono[(start + k) % len(mono)]`): the level, bands and onsets look
at the newest window, and the beat tracker is fed every sample played, in order, from the
file itself (audio/analysis/beat_feed.py `FileBeatFeed`), whatever the frame rate, so its tempo is
the song's at 10 fps as at 60.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from swarm_instrument.audio.analysis.beat_feed import FileBeatFeed
from swarm_instrument.audio.analysis.beats import BeatInfo
from swarm_instrument.audio.base import AudioFrameSource
from swarm_instrument.audio.files.decode import read_audio
from swarm_instrument.audio.input.devices import (
    AudioProblem,
    close_in_background,
    load_sounddevice,
    skip_portaudio_exit,
)
from swarm_instrument.audio.input.ring import Ring

OUTPUT_LOST_AFTER_S = 0.5


def clock_text(seconds: float) -> str:
    """A point in a song as a performer reads it: 1:30.0."""
    minutes, rest = divmod(max(seconds, 0.0), 60.0)
    return f"{int(minutes)}:{rest:04.1f}"


class AudioFile(AudioFrameSource):
    """Plays a sound file (looping by default) and analyses it as it plays.

    Raises AudioFileError if the file cannot be read; a missing or failing output device only
    makes it silent, with a message. Its beats come from every sample played since the last
    frame (to the output, or by the clock), fed in order from the file.
    """

    tracks_beats = True

    def __init__(self, path: str | Path, *, mute: bool = False, loop: bool = True,
                 sd: Any = None, start_s: float = 0.0) -> None:
        frames, rate = read_audio(path)
        super().__init__(rate, Path(path).name, "file")
        self.path = Path(path)
        self.loop = loop
        self._frames = frames
        self._mono = np.ascontiguousarray(frames.mean(axis=1, dtype=np.float32))
        self._ring = Ring()
        # `start_s` (--audio-start, a supervisor's restart): played from there, looping round
        start = max(int(round(start_s * rate)), 0)
        self._start = start % max(len(self._mono), 1) if loop else min(start, len(self._mono))
        self._pos = self._start  # next frame to play; the output callback owns it then
        self._ended = False
        self._stream: Any = None
        self._sd: Any = None
        self._clock_start: float | None = None  # clock mode: `now` at which _clock_base played
        self._clock_base = 0
        self._seen_blocks = 0
        self._last_block_at: float | None = None
        self._beat_feed: FileBeatFeed | None = None
        if self._start:
            self._say(f"playing '{self.path.name}' from {clock_text(self._start / rate)}")
        if mute:
            self._say(f"playing '{self.path.name}' muted (analysis only)")
        else:
            self._open_output(sd)

    @property
    def duration(self) -> float:
        return len(self._mono) / self.rate

    @property
    def playing_out_loud(self) -> bool:
        return self._stream is not None

    def _open_output(self, sd: Any) -> None:
        where = "the default output"
        try:
            sd = self._sd = sd or load_sounddevice()
            index = sd.default.device[1]
            if not isinstance(index, int) or index < 0:
                raise AudioProblem("file", "no output device")
            info = sd.query_devices(index)
            where = f"'{info['name']}'"
            channels = max(1, min(self._frames.shape[1], int(info["max_output_channels"])))
            stream = sd.OutputStream(device=index, samplerate=self.rate, channels=channels,
                                     dtype="float32", callback=self._play)
            try:
                stream.start()
            except Exception:
                stream.close()
                raise
        except AudioProblem as problem:
            self._say(f"playing '{self.path.name}' silently ({problem}); the analysis runs "
                      "all the same")
            return
        except Exception as exc:  # noqa: BLE001 - PortAudioError: rate, channels, busy device
            self._say(f"cannot play '{self.path.name}' ({self.rate:g} Hz) on {where}: {exc}; "
                      "playing it silently (try resampling it to the device's rate)")
            return
        self._stream = stream
        self.device = f"{self.path.name} -> {info['name']}"

    def _take(self, count: int, out: np.ndarray | None) -> int:
        """Advance `count` frames: copy them to the ring (and to `out`). Returns frames taken;
        fewer than `count` at the end of a file that does not loop. Allocates no arrays."""
        total = len(self._mono)
        done = 0
        while done < count:
            if self._pos >= total:
                if not self.loop:
                    self._ended = True
                    break
                self._pos = 0
            take = min(count - done, total - self._pos)
            end = self._pos + take
            if out is not None:
                np.copyto(out[done:done + take], self._frames[self._pos:end, :out.shape[1]])
            self._ring.write(self._mono[self._pos:end])
            self._pos = end
            done += take
        return done

    def _play(self, outdata: np.ndarray, frames: int, time: Any, status: Any) -> None:
        """PortAudio's thread: the next block to the speakers and the ring. Never raises."""
        try:
            done = self._take(frames, outdata)
            if done < frames:
                outdata[done:] = 0.0
        except Exception:  # noqa: BLE001
            try:
                outdata.fill(0.0)
            except Exception:  # noqa: BLE001
                pass

    def _fill(self, now: float) -> bool:
        if self.state == "closed":
            return False
        if self._stream is not None and not self._watch_output(now):
            self._close_output()
            self._say(f"output {self.device} stopped playing; analysing "
                      f"'{self.path.name}' silently by the clock")
            self.device = self.path.name
        if self._stream is None:
            self._advance_by_clock(now)
        if self._ended:
            self.state = "file ended"
            return False
        self._ring.read_newest(self._window)
        self._has_data = True
        return True

    def _track_beats(self, now: float) -> BeatInfo | None:
        if self.state == "closed" or self._ended:
            return None
        feed = self._beat_feed
        if feed is None or feed.tracker is not self._beats:
            assert self._beats is not None
            feed = self._beat_feed = FileBeatFeed(self._beats, self._mono, offset=self._start,
                                                  listeners=self.sample_listeners)
        return feed.update(self._ring.written, now)

    def _watch_output(self, now: float) -> bool:
        """False when the output stream stopped asking for blocks (device gone)."""
        blocks = self._ring.blocks
        if blocks != self._seen_blocks or self._last_block_at is None:
            self._seen_blocks = blocks
            self._last_block_at = now
            return True
        return self._ended or now - self._last_block_at <= OUTPUT_LOST_AFTER_S

    def _advance_by_clock(self, now: float) -> None:
        """Play every sample that fell due by `now` since the clock started (the analysis
        window takes the newest; the beat tracker all of them)."""
        if self._clock_start is None:
            self._clock_start = now
            self._clock_base = self._ring.written
        due = round((now - self._clock_start) * self.rate) - (self._ring.written - self._clock_base)
        while due > 0 and not self._ended:
            step = min(due, self._ring.max_block)
            taken = self._take(step, None)
            due -= step
            if taken < step:
                break

    @property
    def ring(self) -> Ring:
        return self._ring

    @property
    def position(self) -> float:
        """Seconds into the file of the newest sample played."""
        return self._pos / self.rate

    def counters(self) -> dict[str, int]:
        return {"blocks": self._ring.blocks, "blocks_dropped": self._ring.dropped,
                "overflows": 0}

    def telemetry(self) -> dict[str, Any]:
        return {**super().telemetry(), "position_s": round(self.position, 3)}

    def _close_output(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None and not close_in_background(stream).wait(0.3):
            skip_portaudio_exit(self._sd)  # PortAudio hangs on it; do not hang the exit too

    def close(self) -> None:
        self._close_output()
        self._ended = True
        self._has_data = False
        self.state = "closed"
