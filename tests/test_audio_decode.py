"""`read_audio` and `check_audio_file`: --audio-file reads what --render reads (WAV, MP3,
FLAC, OGG, all through PyAV's FFmpeg), and a path that is no sound file (a FIFO, a device, a folder,
nothing, a file too large or too long) is refused at once with one line, never a hang."""

from __future__ import annotations

import os
import struct
import threading

import av
import numpy as np
import pytest

from swarm_instrument.audio.files import decode
from swarm_instrument.audio.files.decode import AudioFileError, check_audio_file, read_audio
from swarm_instrument.audio.files.playback import AudioFile
from swarm_instrument.audio.files.wav_writer import write_wav
from swarm_instrument.audio.source import open_audio

RATE = 48000
FPS = 60


def tone(seconds: float = 1.0, frequency: float = 440.0) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    return (0.5 * np.sin(2 * np.pi * frequency * t)).astype(np.float32)


def encode(path, codec: str, samples: np.ndarray, layout: str = "stereo") -> None:
    """A real compressed file, written by FFmpeg's encoder through PyAV."""
    channels = 2 if layout == "stereo" else 1
    planar = np.repeat(samples[None, :], channels, axis=0)
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=RATE, layout=layout)
        fmt = stream.codec_context.format
        step = stream.codec_context.frame_size or 1024
        for at in range(0, planar.shape[1], step):
            block = planar[:, at:at + step]
            if fmt.name.startswith("s16"):
                block = (block * 32767).astype(np.int16)
            elif fmt.name.startswith("s32"):
                block = (block * 2147483000).astype(np.int32)
            if not fmt.is_planar:
                block = block.T.reshape(1, -1)
            frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(block), format=fmt.name,
                                               layout=layout)
            frame.sample_rate, frame.pts = RATE, at
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)


def level_at(samples: np.ndarray, frequency: float) -> float:
    """Amplitude of one frequency in the first channel (a lossy codec keeps it)."""
    x = samples[:, 0].astype(np.float64)
    t = np.arange(len(x)) / RATE
    return 2 * abs(np.dot(x, np.exp(-2j * np.pi * frequency * t))) / len(x)


@pytest.mark.parametrize("name, codec", [("song.mp3", "libmp3lame"), ("song.flac", "flac"),
                                         ("song.ogg", "libopus"), ("song.m4a", "aac")])
def test_compressed_songs_are_read(tmp_path, name, codec):
    path = tmp_path / name
    encode(path, codec, tone())
    info = check_audio_file(path)
    assert info.rate == RATE and info.channels == 2 and info.kind != "wav"
    assert info.duration == pytest.approx(1.0, abs=0.1)
    samples, rate = read_audio(path)
    assert rate == RATE and samples.dtype == np.float32 and samples.shape[1] == 2
    assert len(samples) == pytest.approx(RATE, abs=0.1 * RATE)
    assert level_at(samples, 440.0) == pytest.approx(0.5, abs=0.05)
    assert level_at(samples, 1000.0) < 0.01


def test_a_flac_decodes_to_the_same_samples(tmp_path):
    path = tmp_path / "mono.flac"
    encode(path, "flac", tone(0.5), layout="mono")
    samples, rate = read_audio(path)
    assert rate == RATE and samples.shape == (RATE // 2, 1)
    np.testing.assert_allclose(samples[:, 0], tone(0.5), atol=1e-4)


def test_a_wav_is_read_and_checked_through_ffmpeg(tmp_path):
    path = tmp_path / "tone.wav"
    x = np.stack([tone(), -tone()], axis=1)
    write_wav(path, x, RATE)
    samples, rate = read_audio(path)
    assert rate == RATE and samples.shape == (RATE, 2)
    np.testing.assert_array_equal(samples, x)  # float32 WAV: the very samples
    info = check_audio_file(path)
    assert (info.kind, info.rate, info.channels, info.duration) == ("wav", RATE, 2, 1.0)


@pytest.mark.parametrize("codec, options, head", [
    ("pcm_alaw", {}, b"RIFF"),  # A-law (format 6): telephone and field recorders
    ("adpcm_ms", {}, b"RIFF"),  # Microsoft ADPCM (format 2): old games and samplers
    ("adpcm_ima_wav", {}, b"RIFF"),  # IMA ADPCM (format 0x11)
    ("pcm_s16le", {"rf64": "always"}, b"RF64"),  # RF64: the WAV for files over 4 GiB
])
def test_wavs_the_old_reader_refused_play(tmp_path, codec, options, head):
    """WAV kinds the hand-written reader FFmpeg replaced refused, written by FFmpeg."""
    path = tmp_path / f"{codec}.wav"
    x = (tone()[None, :] * 32767).astype(np.int16)
    with av.open(str(path), "w", format="wav", options=options) as container:
        stream = container.add_stream(codec, rate=RATE, layout="mono")
        step = stream.codec_context.frame_size or 1024
        for at in range(0, x.shape[1], step):
            frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(x[:, at:at + step]),
                                               format="s16", layout="mono")
            frame.sample_rate, frame.pts = RATE, at
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    assert path.read_bytes()[:4] == head
    samples, rate = read_audio(path)
    assert rate == RATE and samples.shape[1] == 1
    assert len(samples) == pytest.approx(RATE, abs=0.03 * RATE)  # ADPCM pads its last block
    assert level_at(samples, 440.0) == pytest.approx(0.5, abs=0.02)
    assert check_audio_file(path).kind == "wav"  # FFmpeg's name for the container


def test_audio_file_plays_an_mp3(tmp_path):
    path = tmp_path / "song.mp3"
    encode(path, "libmp3lame", tone())
    source = open_audio(file=path, mute=True)
    assert isinstance(source, AudioFile) and source.device == "song.mp3"
    for i in range(31):
        source.update(i / FPS)
    assert source.level > 0.9 and source.bands.mid > 0.5 and source.has_data
    source.close()


@pytest.mark.posix  # a FIFO, /dev/zero
def test_paths_that_are_no_sound_file_are_refused_without_hanging(tmp_path):
    fifo = tmp_path / "song.mp3"
    os.mkfifo(fifo)
    folder = tmp_path / "songs"
    folder.mkdir()
    (tmp_path / "empty.wav").write_bytes(b"")
    cases = [(fifo, "is a pipe (FIFO)"), ("/dev/zero", "is a device"), (folder, "is a folder"),
             (tmp_path / "missing.mp3", "no such file"), (tmp_path / "empty.wav", "is empty")]
    for path, reason in cases:
        for read in (read_audio, check_audio_file):
            result: list = []
            worker = threading.Thread(target=lambda out=result, read=read, path=path:
                                      out.append(_error(read, path)), daemon=True)
            worker.start()
            worker.join(5.0)
            assert result, f"{read.__name__}({path}) hung"
            [message] = result
            assert message.startswith(f"{path}: {reason}"), message
            assert "\n" not in message
    missing = open_audio(file=tmp_path / "missing.mp3")
    assert missing.state == "no audio file" and "no such file" in missing.take_messages()[0]


def _error(read, path) -> str:
    try:
        read(path)
    except AudioFileError as exc:
        return str(exc)
    return "no error"


@pytest.mark.parametrize("content, expected", [
    (b"hello, not audio", "not a sound file this can read"),
    (bytes(np.random.default_rng(0).integers(0, 256, 4000, np.uint8)),
     "not a sound file this can read"),
])
def test_files_that_are_not_sound_say_so(tmp_path, content, expected):
    for name, message in (("noise.mp3", expected), ("text.wav", "not a WAV file")):
        path = tmp_path / name
        path.write_bytes(content)
        for read in (read_audio, check_audio_file):
            with pytest.raises(AudioFileError, match=message) as error:
                read(path)
            assert str(error.value).startswith(f"{path}: ") and "WAV, MP3, FLAC or OGG" in \
                str(error.value)


def test_a_picture_holds_no_audio(tmp_path):
    path = tmp_path / "cover.png"
    with av.open(str(path), "w", format="image2") as container:
        stream = container.add_stream("png", rate=1)
        stream.width, stream.height, stream.pix_fmt = 16, 16, "rgb24"
        frame = av.VideoFrame.from_ndarray(np.zeros((16, 16, 3), np.uint8), format="rgb24")
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            container.mux(packet)
    with pytest.raises(AudioFileError, match="cover.png: holds no audio"):
        read_audio(path)


def test_too_large_and_too_long_are_refused_before_reading(tmp_path):
    huge = tmp_path / "huge.flac"
    with open(huge, "wb") as file:  # sparse: no disk used
        file.truncate(decode.MAX_FILE_BYTES + 1)
    for read in (read_audio, check_audio_file):
        with pytest.raises(AudioFileError, match=r"huge.flac: 2.0 GiB is too large"):
            read(huge)
    # 8-bit mono at 8 kHz whose data runs 100 MB: 3.5 hours, refused from its header
    long = tmp_path / "long.wav"
    fmt = struct.pack("<HHIIHH", 1, 1, 8000, 8000, 1, 8)
    with open(long, "wb") as file:
        file.write(b"RIFF" + struct.pack("<I", 0xFFFFFFFF) + b"WAVE" + b"fmt " +
                   struct.pack("<I", 16) + fmt + b"data" + struct.pack("<I", 0xFFFFFFFF))
        file.truncate(100_000_000)
    for read in (read_audio, check_audio_file):
        with pytest.raises(AudioFileError, match=r"long.wav: lasts 3.5 hours .* trim it"):
            read(long)


def test_a_compressed_song_too_long_is_refused(tmp_path, monkeypatch):
    """By the length FFmpeg finds in the container (or, where it says none, while decoding)."""
    path = tmp_path / "song.mp3"
    encode(path, "libmp3lame", tone(2.0))
    monkeypatch.setattr(decode, "MAX_SECONDS", 1.0)
    for read in (read_audio, check_audio_file):
        with pytest.raises(AudioFileError, match=r"song.mp3: lasts .* longer than the"):
            read(path)


def test_a_song_whose_header_gives_no_length_is_refused_while_decoding(tmp_path, monkeypatch):
    """A FLAC whose STREAMINFO leaves the length unknown (0 samples, as a streamed FLAC has):
    the check passes, the decoding stops once the song runs past the limit, before the rest
    is held in memory."""
    path = tmp_path / "streamed.flac"
    encode(path, "flac", tone(3.0), layout="mono")
    data = bytearray(path.read_bytes())
    assert data[:4] == b"fLaC" and data[4] & 0x7F == 0  # STREAMINFO first
    data[8 + 13] &= 0xF0  # its 36-bit total of samples: 0, unknown
    data[8 + 14:8 + 18] = bytes(4)
    path.write_bytes(bytes(data))
    monkeypatch.setattr(decode, "MAX_SECONDS", 1.0)
    assert check_audio_file(path).duration is None
    with pytest.raises(AudioFileError, match=r"streamed.flac: lasts .* or more, longer than"):
        read_audio(path)
    monkeypatch.setattr(decode, "MAX_SECONDS", 4.0)
    assert len(read_audio(path)[0]) == 3 * RATE


def test_a_damaged_packet_is_skipped(tmp_path):
    """Two MP3 files joined end to end: the second's header frame does not decode; the rest
    of the sound does, as with the ffmpeg command."""
    first, second, joined = tmp_path / "a.mp3", tmp_path / "b.mp3", tmp_path / "ab.mp3"
    encode(first, "libmp3lame", tone(1.0))
    encode(second, "libmp3lame", tone(1.0, 880.0))
    joined.write_bytes(first.read_bytes() + second.read_bytes())
    samples, _ = read_audio(joined)
    assert len(samples) == pytest.approx(2 * RATE, abs=0.1 * RATE)
    assert level_at(samples[RATE + RATE // 10:], 880.0) == pytest.approx(0.5, abs=0.05)
