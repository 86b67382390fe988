"""`--audio-file`: WAV files of every common kind read by FFmpeg (through
audio/files/decode.py) to the samples they hold, and one played in real time through the ring
and analysis, by the clock (muted) or by a (fake) output device. Other sound files and bad
paths: test_audio_decode.py."""

from __future__ import annotations

import struct
from types import SimpleNamespace

import numpy as np
import pytest
from test_audio_beats import CountingTracker  # a tracker that keeps what it is fed

from swarm_instrument.audio.files.decode import AudioFileError, check_audio_file, read_audio
from swarm_instrument.audio.files.playback import AudioFile
from swarm_instrument.audio.files.wav_writer import write_wav

RATE = 48000
FPS = 60


def riff(fmt: bytes, data: bytes, extra: bytes = b"", data_size: int | None = None) -> bytes:
    chunks = b"fmt " + struct.pack("<I", len(fmt)) + fmt + extra
    chunks += b"data" + struct.pack("<I", len(data) if data_size is None else data_size) + data
    return b"RIFF" + struct.pack("<I", 4 + len(chunks)) + b"WAVE" + chunks


def fmt_chunk(tag: int, channels: int, bits: int, rate: int = RATE) -> bytes:
    align = channels * bits // 8
    return struct.pack("<HHIIHH", tag, channels, rate, rate * align, align, bits)


def extensible_fmt(channels: int, bits: int, mask: int, sub_format: int) -> bytes:
    """WAVE_FORMAT_EXTENSIBLE: the real format in the sub-format GUID, the speakers in a mask."""
    fmt = fmt_chunk(0xFFFE, channels, bits)[:14] + struct.pack("<HHHIH", bits, 22, bits, mask,
                                                                sub_format)
    return fmt + b"\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71"


EXPECTED = np.array([[0.0, -0.5], [0.25, 0.75], [-1.0, 0.5]])


@pytest.mark.parametrize("bits, encode, tolerance", [
    (8, lambda x: (np.round(x * 127) + 128).astype(np.uint8).tobytes(), 1 / 64),
    (16, lambda x: np.round(x * 32767).astype("<i2").tobytes(), 1e-4),
    (24, lambda x: b"".join(int(v).to_bytes(3, "little", signed=True)
                            for v in np.round(x.ravel() * 8388607)), 1e-6),
    (32, lambda x: np.round(x * 2147483647).astype("<i4").tobytes(), 1e-8),
])
def test_reads_integer_pcm(tmp_path, bits, encode, tolerance):
    path = tmp_path / f"pcm{bits}.wav"
    path.write_bytes(riff(fmt_chunk(1, 2, bits), encode(EXPECTED)))
    samples, rate = read_audio(path)
    assert rate == RATE and samples.dtype == np.float32 and samples.shape == (3, 2)
    np.testing.assert_allclose(samples, EXPECTED, atol=tolerance)
    info = check_audio_file(path)
    assert (info.kind, info.rate, info.channels) == ("wav", RATE, 2)
    assert info.duration == pytest.approx(3 / RATE, abs=1e-6)


@pytest.mark.parametrize("bits, dtype", [(32, "<f4"), (64, "<f8")])
def test_reads_float_and_extensible_wav(tmp_path, bits, dtype):
    plain = tmp_path / "float.wav"
    plain.write_bytes(riff(fmt_chunk(3, 2, bits), EXPECTED.astype(dtype).tobytes()))
    np.testing.assert_allclose(read_audio(plain)[0], EXPECTED, atol=1e-7)
    extensible = tmp_path / "extensible.wav"
    # an odd-sized LIST chunk (a one-letter title) before the data: its pad byte is skipped
    extra = b"LIST" + struct.pack("<I", 13) + b"INFOINAM" + struct.pack("<I", 1) + b"a\x00"
    extensible.write_bytes(riff(extensible_fmt(2, bits, 0b11, 3),
                                EXPECTED.astype(dtype).tobytes(), extra))
    np.testing.assert_allclose(read_audio(extensible)[0], EXPECTED, atol=1e-7)


def test_reads_extensible_pcm(tmp_path):
    """24-bit PCM in WAVE_FORMAT_EXTENSIBLE (as DAWs write it)."""
    ints = np.round(EXPECTED * 8388607).astype(np.int64).ravel()
    path = tmp_path / "pcm24.wav"
    path.write_bytes(riff(extensible_fmt(2, 24, 0b11, 1), b"".join(
        int(v).to_bytes(3, "little", signed=True) for v in ints)))
    np.testing.assert_allclose(read_audio(path)[0], EXPECTED, atol=1e-6)


def test_a_big_endian_wav_is_refused_not_played_as_noise(tmp_path):
    """RIFX (`sox -B`): FFmpeg reads its header but decodes its samples as little-endian."""
    data = np.round(EXPECTED * 32767).astype(">i2").tobytes()
    fmt = struct.pack(">HHIIHH", 1, 2, RATE, RATE * 4, 4, 16)
    chunks = b"fmt " + struct.pack(">I", 16) + fmt + b"data" + struct.pack(">I", len(data)) + data
    path = tmp_path / "rifx.wav"
    path.write_bytes(b"RIFX" + struct.pack(">I", 4 + len(chunks)) + b"WAVE" + chunks)
    for read in (read_audio, check_audio_file):
        with pytest.raises(AudioFileError, match="big-endian WAV .RIFX. is not supported; "
                                                 "export it again as PCM or float WAV"):
            read(path)


def test_reads_a_streamed_wav_whose_data_size_is_unknown(tmp_path):
    path = tmp_path / "streamed.wav"
    data = np.round(EXPECTED * 32767).astype("<i2").tobytes()
    path.write_bytes(riff(fmt_chunk(1, 2, 16), data, data_size=0xFFFFFFFF))
    np.testing.assert_allclose(read_audio(path)[0], EXPECTED, atol=1e-4)


def test_surround_is_mixed_down_and_a_multitrack_plays_its_first_two_channels(tmp_path):
    """5.1 (named speakers): FFmpeg's downmix to stereo, the centre in both sides. 32 unnamed
    channels (a mixer's multitrack recording, which FFmpeg's downmix refuses): the first two,
    as a sound card with two outputs plays them."""
    surround = np.zeros((4, 6), np.float32)
    surround[:, 2] = 0.5  # front centre only
    path = tmp_path / "surround.wav"
    path.write_bytes(riff(extensible_fmt(6, 32, 0x3F, 3), surround.tobytes()))
    samples, _ = read_audio(path)
    assert samples.shape == (4, 2)
    np.testing.assert_allclose(samples, 0.5 / np.sqrt(2), atol=1e-6)  # -3 dB each side
    tracks = np.tile(np.linspace(-0.9, 0.9, 32, dtype=np.float32), (4, 1))
    path = tmp_path / "multitrack.wav"
    path.write_bytes(riff(fmt_chunk(3, 32, 32), tracks.tobytes()))
    samples, _ = read_audio(path)
    np.testing.assert_array_equal(samples, tracks[:, :2])
    assert check_audio_file(path).channels == 2


def test_not_a_number_in_a_float_wav_reads_as_silence(tmp_path):
    """A float file's NaN or infinity would reach the sound card and the analysis."""
    path = tmp_path / "nan.wav"
    x = np.array([[0.5, np.nan], [np.inf, -np.inf], [-0.25, 0.125]], "<f4")
    path.write_bytes(riff(fmt_chunk(3, 2, 32), x.tobytes()))
    np.testing.assert_array_equal(read_audio(path)[0], [[0.5, 0], [0, 0], [-0.25, 0.125]])


def test_write_wav_round_trips(tmp_path):
    path = tmp_path / "tone.wav"
    x = 0.5 * np.sin(np.arange(1000) / 10)
    write_wav(path, x, 44100)
    samples, rate = read_audio(path)
    assert rate == 44100 and samples.shape == (1000, 1)
    np.testing.assert_allclose(samples[:, 0], x, atol=1e-7)  # float32: no quantization
    stereo = tmp_path / "stereo.wav"
    write_wav(stereo, np.stack([x, 3 * x], axis=1), 48000)  # too loud: clipped, as played
    samples, rate = read_audio(stereo)
    assert rate == 48000 and samples.shape == (1000, 2)
    np.testing.assert_allclose(samples, np.stack([x, np.clip(3 * x, -1, 1)], axis=1), atol=1e-7)
    with pytest.raises(ValueError, match="1 or 2"):
        write_wav(tmp_path / "six.wav", np.zeros((10, 6)), 48000)


@pytest.mark.parametrize("content, message", [
    (b"ID3\x03\x00 an mp3 file", "not a sound file this can read"),
    (riff(fmt_chunk(0x1234, 1, 16), b"\x00" * 64), "in a format FFmpeg does not decode"),
    (riff(fmt_chunk(1, 0, 16), b"\x00" * 8), "a broken WAV file"),
    (riff(fmt_chunk(1, 1, 16), b""), "holds no samples"),
    (b"RIFF\x04\x00\x00\x00WAVE", "a broken WAV file"),
])
def test_bad_files_say_what_is_wrong_and_what_to_try(tmp_path, content, message):
    path = tmp_path / "bad.mp3"
    path.write_bytes(content)
    for read in (read_audio, check_audio_file):
        with pytest.raises(AudioFileError, match=message) as error:
            read(path)
        assert str(error.value).startswith(f"{path}: ") and "\n" not in str(error.value)
        # the hint never suggests writing beside the input (a system or read-only folder)
        assert "bad.wav" not in str(error.value) and str(error.value).count(str(tmp_path)) == 1
        if message != "holds no samples":
            assert "MP3, FLAC or OGG" in str(error.value)


def burst_file(tmp_path, seconds: float = 1.0, channels: int = 2):
    t = np.arange(int(seconds * RATE)) / RATE
    left = 0.5 * np.sin(2 * np.pi * 300 * t)
    x = np.stack([left, 0.5 * left], axis=1) if channels == 2 else left
    path = tmp_path / "tone.wav"
    write_wav(path, x, RATE)
    return path, read_audio(path)[0]


def test_muted_file_plays_by_the_clock(tmp_path):
    path, frames = burst_file(tmp_path, channels=1)
    source = AudioFile(path, mute=True)
    assert "muted" in source.take_messages()[0]
    source.update(10.0)  # the first frame starts the clock
    for i in range(1, 31):
        source.update(10.0 + i / FPS)
        assert source.ring.written == round(i / FPS * RATE)  # real time, to the sample
    assert source.level > 0.9 and source.has_data and source.state == "file"
    window = np.empty(1024, np.float32)
    source.ring.read_newest(window)
    np.testing.assert_array_equal(window, frames[int(0.5 * RATE) - 1024:int(0.5 * RATE), 0])
    source.update(11.25)  # looping: 1.25 s into a 1 s file
    assert source.position == pytest.approx(0.25, abs=1 / RATE) and source.has_data


def test_a_file_that_does_not_loop_ends_quietly(tmp_path):
    path, _ = burst_file(tmp_path, seconds=0.5)
    source = AudioFile(path, mute=True, loop=False)
    for i in range(91):
        source.update(i / FPS)
    assert source.state == "file ended" and not source.has_data
    assert source.level < 0.05  # fell smoothly after the end


class FakeOutput:
    def __init__(self, **kwargs) -> None:
        self.kwargs = kwargs
        self.closed = False

    def start(self) -> None:
        pass

    def abort(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def pull(self, frames: int) -> np.ndarray:
        out = np.full((frames, self.kwargs["channels"]), 9.0, np.float32)  # garbage to overwrite
        self.kwargs["callback"](out, frames, None, None)
        return out


class FakeSD:
    def __init__(self, output: int = 0, rate_error: bool = False) -> None:
        self.default = SimpleNamespace(device=[-1, output])
        self.rate_error = rate_error
        self.streams: list[FakeOutput] = []

    def query_devices(self, index: int):
        return {"name": "Speakers", "max_output_channels": 2}

    def OutputStream(self, **kwargs) -> FakeOutput:  # noqa: N802 - sounddevice's name
        if self.rate_error:
            raise RuntimeError("Error opening OutputStream: Invalid sample rate")
        self.streams.append(FakeOutput(**kwargs))
        return self.streams[-1]


def test_file_plays_out_of_the_output_and_into_the_analysis(tmp_path):
    path, frames = burst_file(tmp_path)
    sd = FakeSD()
    source = AudioFile(path, sd=sd)
    assert source.playing_out_loud and source.device == "tone.wav -> Speakers"
    stream = sd.streams[0]
    assert stream.kwargs["samplerate"] == RATE and stream.kwargs["channels"] == 2
    played = np.concatenate([stream.pull(256) for _ in range(200)])  # 51,200: past the loop
    expected = np.concatenate([frames, frames])[:len(played)]
    np.testing.assert_array_equal(played, expected)
    mono = np.empty(1024, np.float32)
    source.ring.read_newest(mono)
    np.testing.assert_allclose(mono, expected[-1024:].mean(axis=1), atol=1e-7)
    source.update(1.0)
    assert source.has_data and source.state == "file"
    source.close()
    assert stream.closed and source.state == "closed"


def test_file_falls_back_to_the_clock_when_the_output_fails(tmp_path):
    path, _ = burst_file(tmp_path)
    source = AudioFile(path, sd=FakeSD(rate_error=True))
    assert not source.playing_out_loud
    [message] = source.take_messages()
    assert "Invalid sample rate" in message and "48000 Hz" in message and "silently" in message
    assert "no output device" in AudioFile(path, sd=FakeSD(output=-1)).take_messages()[0]

    sd = FakeSD()
    source = AudioFile(path, sd=sd)
    for i in range(10):
        sd.streams[0].pull(800)
        source.update(i / FPS)
    for i in range(10, 60):  # the output stopped asking for blocks: unplugged
        source.update(i / FPS)
    assert not source.playing_out_loud and sd.streams[0].closed
    assert "stopped playing" in source.take_messages()[0]
    assert source.has_data and source.level > 0.9  # it carries on by the clock


def test_every_sample_of_a_muted_file_reaches_the_beat_tracker_in_order(tmp_path):
    """Frames of 1/7 s, then one of 4 s (longer than the ring holds): the tracker still gets
    the file from its first sample, looping, none skipped, none twice."""
    path = tmp_path / "ramp.wav"
    write_wav(path, np.linspace(-0.9, 0.9, RATE // 2), RATE)  # a ramp: order shows
    mono = read_audio(path)[0][:, 0]
    source = AudioFile(path, mute=True)
    source._beats = tracker = CountingTracker()
    frames = [i / 7 for i in range(15)] + [2.0 + 4.0, 6.1]
    for now in frames:
        source.update(100.0 + now)
    fed = np.concatenate(tracker.fed)
    played = round(6.1 * RATE)
    assert source.ring.written == len(fed) == played and tracker.skipped == 0
    np.testing.assert_array_equal(fed, np.resize(mono, played))


def test_a_file_started_part_way_plays_and_tracks_from_there(tmp_path):
    """--audio-start (and a supervisor's restart): the file plays from that sample, looping
    round, and the beat tracker is fed the same samples in the same order."""
    path = tmp_path / "ramp.wav"
    write_wav(path, np.linspace(-0.9, 0.9, RATE // 2), RATE)  # half a second: order shows
    mono = read_audio(path)[0][:, 0]
    source = AudioFile(path, mute=True, start_s=0.35)
    assert source.position == pytest.approx(0.35)
    assert "from 0:00.3" in source.take_messages()[0]
    source._beats = tracker = CountingTracker()
    for now in (0.0, 0.1, 0.3):
        source.update(50.0 + now)
    fed = np.concatenate(tracker.fed)
    start = round(0.35 * RATE)
    assert len(fed) == round(0.3 * RATE)
    np.testing.assert_array_equal(fed, np.resize(np.roll(mono, -start), len(fed)))
    assert source.position == pytest.approx((0.35 + 0.3) % 0.5)
    assert source.telemetry()["position_s"] == pytest.approx(0.15, abs=1e-3)
    assert AudioFile(path, mute=True, start_s=7.2).position == pytest.approx(0.2)  # looped
    assert AudioFile(path, mute=True, start_s=7.2, loop=False).position == pytest.approx(0.5)


def test_a_muted_files_tempo_is_the_same_at_any_frame_rate(tmp_path):
    """A 100 BPM drum loop played muted, frames of 1/10, 1/15, 1/20 and 1/60 s of the (fake)
    clock: the tracker hears the song as it is, the same tempo at each. Before every sample went to
    it, 10, 15 and 20 fps read 117.2, 78.1 and 117.2 BPM (the samples of a frame longer than
    the analysis window were skipped, unheard)."""
    from swarm_instrument.audio.synth import drum_loop

    path = tmp_path / "loop.wav"
    write_wav(path, drum_loop(100.0, 12.0, RATE), RATE)
    tempi = {}
    for fps in (10, 15, 20, 60):
        source = AudioFile(path, mute=True)
        for i in range(16 * fps + 1):
            source.update(50.0 + i / fps)
        assert source.beat_info is not None, f"no tempo at {fps} fps"
        tempi[fps] = source.beat_info.bpm
    assert max(tempi.values()) - min(tempi.values()) <= 0.5, tempi
    assert all(abs(bpm - 100.0) <= 0.5 for bpm in tempi.values()), tempi
