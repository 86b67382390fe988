"""Hostile files: everything a user, a crash or a full disk can put where the instrument reads
or writes (issue 13).

Every read and write of a user file must end, quickly and within bounded memory, with either
the file used or one line (a FileProblem: PresetError, MappingError) that names the file; a
read changes nothing on disk, and a failed write leaves no temporary file and writes nowhere
outside our folders. Each call runs under `bounded` (tests/bounded.py): a hang (a FIFO opened
for reading) fails the test after a few seconds, an endless read (/dev/zero) fails it at half a
gigabyte. FIFOs, devices and symbolic links are POSIX's (`posix`); a full disk is a tmpfs
mounted by root (`root`).

The exhaustive families (every truncation point of every bundled file) run in full with
`pytest --slow`; by default a fixed sample of each.
"""

from __future__ import annotations

import errno
import hashlib
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from bounded import bounded

import swarm_instrument.control.looks.atomic as atomic
from swarm_instrument.control.looks.atomic import atomic_write_text, remove_stale_temporaries
from swarm_instrument.control.looks.files import MAX_DEPTH, FileProblem, read_json
from swarm_instrument.control.looks.preset_bank import BUNDLED_DIR, PresetBank
from swarm_instrument.control.looks.presets import (
    PresetError,
    load_preset,
    preset_from_show,
    save_preset,
)
from swarm_instrument.control.looks.recovery import (
    RecoveryDamaged,
    RecoveryWriter,
    load_recovery,
    recovery_path,
)
from swarm_instrument.control.looks.swarm_state import load_state, save_state
from swarm_instrument.control.midi.mapping import MidiMapping
from swarm_instrument.control.midi.mapping_file import load_mapping, save_mapping
from swarm_instrument.control.parameters.registry import Params

from conftest import run_instrument

BUNDLED_PRESETS = sorted(BUNDLED_DIR.glob("[1-9]-*.json"))
BUNDLED_MAPPING = BUNDLED_DIR / "midi-default.json"
SAMPLE = 40  # truncation points a file by default; --slow takes them all


# ---- helpers -----------------------------------------------------------------------------------

@contextmanager
def opened() -> Iterator[list[tuple[str, int]]]:
    """The paths this process opens meanwhile, with the flags (the `open` audit event: open()
    and os.open())."""
    paths: list[tuple[str, int]] = []
    watching = [True]

    def hook(event: str, args: tuple) -> None:
        if watching[0] and event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
            paths.append((os.fsdecode(args[0]), args[2] if isinstance(args[2], int) else -1))

    sys.addaudithook(hook)  # hooks cannot be removed: this one stops listening at the end
    try:
        yield paths
    finally:
        watching[0] = False


def refused(call: Callable[[], Any], path: Path | str,
            kind: type[Exception] = FileProblem) -> str:
    """Run `call` bounded; it must raise `kind` with one printable line naming `path`."""
    with bounded():
        with pytest.raises(kind) as caught:
            call()
    message = str(caught.value)
    assert str(path) in message, message
    assert "\n" not in message and "\r" not in message, message
    assert "Traceback" not in message, message
    message.encode("utf-8")  # printable: no lone surrogate in the message itself
    return message


def snapshot(*folders: Path) -> dict[str, str]:
    """Every entry below the folders: a regular file by its hash, anything else by its kind
    (a link by its target), so a test can say "nothing on disk changed"."""
    found = {}
    for folder in folders:
        for root, dirs, files in os.walk(folder):
            for name in dirs + files:
                path = Path(root) / name
                if path.is_symlink():
                    found[str(path)] = "link -> " + os.readlink(path)
                elif path.is_file():
                    found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
                else:
                    found[str(path)] = "dir" if path.is_dir() else "special"
    return found


def truncation_points(size: int, slow: bool) -> list[int]:
    """Every length shorter than the file with --slow; else SAMPLE of them, spread evenly and
    including the first and the last few."""
    if slow or size <= SAMPLE:
        return list(range(size))
    return sorted({0, 1, size - 1, size - 2} | {round(k * size / SAMPLE) for k in range(SAMPLE)})


@pytest.fixture
def slow(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--slow"))


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A user preset folder of the test's own, with one good saved preset in slot 1."""
    user = tmp_path / "user"
    user.mkdir()
    save_preset(user / "slot-1.json", preset_from_show("mine", Params({"trail": 0.5}), []))
    return user


def hostile_json() -> dict[str, tuple[bytes, str]]:
    """name -> (file content, what the one line must say)."""
    deep = b"[" * 100_000 + b"]" * 100_000
    deep_object = b'{"a": ' * 100_000 + b"1" + b"}" * 100_000
    digits = "1" + "0" * 399
    return {
        "deep-list": (deep, f"nested more than {MAX_DEPTH} levels"),
        "deep-object": (deep_object, f"nested more than {MAX_DEPTH} levels"),
        "deep-unclosed": (b"[" * 1_000_000, f"nested more than {MAX_DEPTH} levels"),
        "huge-int": (f'{{"params": {{"count": {digits}}}}}'.encode(),
                     "key 'params.count': the number"),
        "huge-negative": (f'{{"bindings": [{{"channel": -{digits}}}]}}'.encode(), "400 digits"),
        "huge-float": (b'{"params": {"trail": 1e999}}', "key 'params.trail': the number 1e999"),
        "long-fraction": (b'{"params": {"trail": 0.' + b"5" * 40 + b"}}", "41 digits"),
        "nan": (b'{"params": {"trail": NaN}}', "key 'params.trail': NaN is not a number"),
        "infinity": (b'{"params": {"max_speed": Infinity}}', "Infinity is not a number"),
        "minus-infinity": (b'{"routes": [{"amount": -Infinity}]}', "key 'routes[0].amount'"),
        "lone-surrogate-name": (b'{"name": "\\ud800"}', "key 'name': holds a lone surrogate"),
        "lone-low-surrogate": (b'{"about": "a\\udc00b"}', "key 'about': holds a lone"),
        "surrogate-in-key": (b'{"params": {"tr\\udfffail": 1}}', "the key 'params.tr"),
        "surrogate-in-list": (b'{"routes": [{"source": "\\ud83d"}]}', "routes[0].source"),
        "newline-in-key": (b'{"params": {"tr\\nail": 1}}',
                           "the key 'params.tr\\x0aail' holds a control character (U+000A)"),
        "bell-in-name": (b'{"name": "a\\u0007b"}', "key 'name': holds a control character"),
        "line-separator": (b'{"about": "a\\u2028b"}', "key 'about': holds a control"),
        "invalid-utf8": (b'{"name": "\xff\xfe"}', "not UTF-8 text (byte 10, line 1)"),
        "overlong-utf8": (b'{"name": "\xc0\xaf"}', "not UTF-8 text"),
        "encoded-surrogate": (b'{"name": "\xed\xa0\x80"}', "not UTF-8 text"),
        "nul-bytes": (b"\x00" * 64, "not valid JSON"),
        "only-whitespace": (b" \n\t\n", "the file is empty"),
        "duplicate-key": (b'{"name": "a", "name": "b"}', "key 'name' appears twice"),
        "too-big": (b'{"about": "' + b"x" * (1 << 20) + b'"}', "more than a JSON file can be"),
    }


HOSTILE = hostile_json()


# ---- truncation and random bytes ---------------------------------------------------------------

@pytest.mark.parametrize("source", BUNDLED_PRESETS + [BUNDLED_MAPPING], ids=lambda p: p.name)
def test_every_truncation_of_a_bundled_file_is_one_line(tmp_path, source, slow):
    """A crash or a full disk cuts a file anywhere: each cut says "ends early" (or "empty"),
    naming the file, unless only trailing whitespace was lost; a recall of the cut file from a
    slot raises PresetError and the slot list still lists it."""
    whole = source.read_bytes()
    is_mapping = source == BUNDLED_MAPPING
    load = load_mapping if is_mapping else load_preset
    expected = load(source)
    user = tmp_path / "user"
    user.mkdir()
    path = user / ("midi.json" if is_mapping else "slot-4.json")
    bank = PresetBank(user)
    for size in truncation_points(len(whole), slow):
        path.write_bytes(whole[:size])
        before = snapshot(tmp_path)
        if not whole[size:].strip():  # only whitespace cut off: still the whole document
            with bounded():
                loaded = load(path)
            assert loaded == expected if is_mapping else loaded.values == expected.values
            continue
        message = refused(lambda: load(path), path)
        assert "ends early" in message or "the file is empty" in message, (size, message)
        if not is_mapping:
            refused(lambda: bank.recall(4), path, PresetError)
            with bounded():
                assert bank.names()[4] == "slot-4"  # listed by its file name
        assert snapshot(tmp_path) == before, size


def mutations(whole: bytes, count: int, rng: random.Random) -> Iterator[bytes]:
    """`count` variants of a file: random bytes overwritten, JSON punctuation sprinkled in,
    spans deleted or duplicated."""
    alphabet = b'{}[]",:-+.eE0123456789 \\utrfalsn\n'
    for _ in range(count):
        data = bytearray(whole)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(data))
            choice = rng.randrange(4)
            if choice == 0:
                data[at] = rng.randrange(256)
            elif choice == 1:
                data[at] = rng.choice(alphabet)
            elif choice == 2:
                del data[at:at + rng.randint(1, 40)]
            else:
                data[at:at] = data[at:at + rng.randint(1, 40)]
        yield bytes(data)


def test_random_bytes_and_mutated_files_are_used_or_refused_in_one_line(tmp_path, slow):
    """Random bytes, random JSON punctuation and mutated bundled files: each either loads (a
    mutation can leave a valid file) or is refused in one line naming it; never anything else
    (a RecursionError, an OverflowError, a UnicodeError, a hang)."""
    rng = random.Random(13)  # issue 13: fixed, so a failure repeats
    count = 400 if slow else 40
    blobs = [rng.randbytes(rng.randint(1, 4096)) for _ in range(count)]
    blobs += [bytes(rng.choice(b'{}[]",:-.e0123456789 \\u') for _ in range(rng.randint(1, 300)))
              for _ in range(count)]
    for source in BUNDLED_PRESETS[:2] + [BUNDLED_MAPPING]:
        blobs += list(mutations(source.read_bytes(), count, rng))
    path = tmp_path / "random.json"
    for number, blob in enumerate(blobs):
        path.write_bytes(blob)
        for load in (load_preset, load_mapping):
            try:
                with bounded():
                    load(path)
            except FileProblem as exc:
                message = str(exc)
                assert str(path) in message and "\n" not in message, (number, message)
                message.encode("utf-8")
        assert path.read_bytes() == blob


# ---- hostile JSON ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_json_is_refused_naming_the_file(tmp_path, name):
    content, expected = HOSTILE[name]
    path = tmp_path / f"{name}.json"
    path.write_bytes(content)
    before = snapshot(tmp_path)
    for load in (load_preset, load_mapping, read_json):
        message = refused(lambda load=load: load(path), path)
        assert expected in message, message
    assert snapshot(tmp_path) == before


def test_nesting_limit_is_exact(tmp_path):
    """MAX_DEPTH levels parse (and then are refused as not a preset); one more is refused
    before the parser runs."""
    path = tmp_path / "nest.json"
    path.write_text("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    assert "a preset is a JSON object" in refused(lambda: load_preset(path), path)
    path.write_text("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    assert "nested more than" in refused(lambda: load_preset(path), path)
    path.write_text('{"about": "' + "[" * 1000 + '"}')  # brackets inside a string: not nesting
    assert read_json(path) == {"about": "[" * 1000}


def test_numbers_and_text_that_are_fine_still_load(tmp_path):
    """The limits refuse only what no preset holds: 30 digits, tiny floats, real Unicode (a
    surrogate pair is one character) all read."""
    path = tmp_path / "fine.json"
    path.write_text('{"name": "\\ud83d\\ude00 caf\\u00e9", "about": "\u00e9t\u00e9", '
                    '"params": {"trail": 0.31830988618379070, "max_force": 1e-999}, '
                    '"state": {"seed": 123456789012345678901234567890}}')
    preset = load_preset(path)
    assert preset.name == "\U0001F600 caf\u00e9" and preset.about == "\u00e9t\u00e9"
    assert preset.values["max_force"] == 0.0
    assert preset.state["seed"] == 123456789012345678901234567890


# ---- one bad file spoils only itself -----------------------------------------------------------

@pytest.mark.parametrize("name", ["deep-list", "huge-int", "nan", "lone-surrogate-name",
                                  "invalid-utf8", "too-big"])
def test_a_bad_file_in_the_user_folder_spoils_only_itself(folder, name):
    content, expected = HOSTILE[name]
    bad = folder / f"{name}.json"
    bad.write_bytes(content)
    (folder / "slot-2.json").write_bytes(content)
    bank = PresetBank(folder)
    before = snapshot(folder)
    with bounded():
        found = bank.available()
        names = bank.names()
        assert found[name] == bad and found["mine"] == folder / "slot-1.json"
        assert bank.resolve("calm-school") == BUNDLED_DIR / "1-calm-school.json"
        assert load_preset(bank.resolve("calm-school")).name == "calm-school"
        assert names[1] == "mine" and names[2] == "slot-2"
    assert expected in refused(lambda: bank.recall(2), folder / "slot-2.json", PresetError)
    assert expected in refused(lambda: load_preset(bank.resolve(name)), bad, PresetError)
    assert snapshot(folder) == before


# ---- FIFOs, devices, folders -------------------------------------------------------------------

def readers() -> dict[str, Callable[[Path], Any]]:
    return {"preset": load_preset, "mapping": load_mapping, "state": load_state,
            "recovery": lambda path: load_recovery(path)}


@pytest.mark.parametrize("reader", readers())
@pytest.mark.posix  # a FIFO
def test_fifo_is_refused_at_once(tmp_path, reader):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    before = snapshot(tmp_path)
    with opened() as opens:
        message = refused(lambda: readers()[reader](fifo), fifo)
    # Refused from what it is: never opened in a way that waits for a writer (an ordinary
    # open of a FIFO blocks until one comes; O_NONBLOCK returns at once).
    flags = [f for path, f in opens if path == str(fifo)]
    assert all(f != -1 and f & os.O_NONBLOCK for f in flags), flags
    assert "is a FIFO (named pipe), not a file" in message
    if reader != "recovery":
        assert snapshot(tmp_path) == before


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/null"])
@pytest.mark.parametrize("reader", ["preset", "mapping", "state"])
@pytest.mark.posix  # /dev/zero, /dev/urandom, /dev/null
def test_device_is_refused_without_reading_it(device, reader):
    assert "is a device, not a file" in refused(lambda: readers()[reader](Path(device)), device)


@pytest.mark.parametrize("reader", ["preset", "mapping", "state"])
def test_folder_given_as_a_file(tmp_path, reader):
    assert "is a folder, not a file" in refused(lambda: readers()[reader](tmp_path), tmp_path)


@pytest.mark.posix  # links to devices, a FIFO
def test_special_files_in_the_user_folder_are_named_on_recall(folder):
    """slot-2.json a link to /dev/zero, slot-3.json a FIFO, slot-5.json a folder, a .json link
    to /dev/urandom: listing never blocks or reads them; recalling one says what it is."""
    (folder / "slot-2.json").symlink_to("/dev/zero")
    os.mkfifo(folder / "slot-3.json")
    (folder / "slot-5.json").mkdir()
    (folder / "noise.json").symlink_to("/dev/urandom")
    bank = PresetBank(folder)
    with bounded():
        names = bank.names()
        assert bank.resolve("calm-school") == BUNDLED_DIR / "1-calm-school.json"
        assert "noise" not in bank.available()
        noise = bank.resolve(str(folder / "noise.json"))  # a path, though not a regular file
    assert names[2] == "slot-2" and names[3] == "slot-3" and names[5] == "slot-5"
    assert "is a device" in refused(lambda: bank.recall(2), folder / "slot-2.json", PresetError)
    assert "is a FIFO" in refused(lambda: bank.recall(3), folder / "slot-3.json", PresetError)
    assert "is a folder" in refused(lambda: bank.recall(5), folder / "slot-5.json", PresetError)
    assert "is a FIFO" in refused(lambda: bank.save(3, preset_from_show("x", Params(), [])),
                                  folder / "slot-3.json", PresetError)
    assert (folder / "slot-3.json").is_fifo()
    assert "is a device" in refused(lambda: load_preset(noise), folder / "noise.json")


def test_zip_bomb_state_is_refused_from_its_header(tmp_path):
    """A compressed .npz whose header claims far more agents than the instrument takes is
    refused before its data is inflated."""
    import io
    import zipfile

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f4", "fortran_order": False, "shape": (1 << 30, 3)})
    path = tmp_path / "bomb.npz"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for key in ("position", "velocity"):
            with archive.open(f"{key}.npy", "w", force_zip64=True) as member:
                member.write(header.getvalue())
                for _ in range(16):  # 16 MiB of zeros, 16 kilobytes compressed
                    member.write(bytes(1 << 20))
    assert path.stat().st_size < 1 << 20
    assert "1073741824 agents" in refused(lambda: load_state(path), path)


def test_truncated_and_damaged_state_files(tmp_path):
    good = tmp_path / "good.npz"
    save_state(good, np.ones((500, 3), np.float32), np.zeros((500, 3), np.float32))
    whole = good.read_bytes()
    path = tmp_path / "cut.npz"
    for size in truncation_points(len(whole), slow=False):
        path.write_bytes(whole[:size])
        refused(lambda: load_state(path), path)
    path.write_bytes(whole[:200] + bytes(len(whole) - 200))
    refused(lambda: load_state(path), path)


# ---- writes: symbolic links, folders, full disks, stale temporaries ----------------------------

@pytest.mark.posix  # a symbolic link
def test_symlinked_slot_is_refused_and_the_target_untouched(tmp_path, folder):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    target = outside / "precious.txt"
    target.write_text("not a preset\n")
    (folder / "slot-3.json").symlink_to(target)
    bank = PresetBank(folder)
    before = snapshot(tmp_path)
    message = refused(lambda: bank.save(3, preset_from_show("x", Params(), [])),
                      folder / "slot-3.json", PresetError)
    assert "is a symbolic link; refusing to write through it" in message
    assert snapshot(tmp_path) == before  # nothing written, renamed or backed up anywhere
    assert not (outside / "precious.txt.bak").exists()


@pytest.mark.posix  # a symbolic link
def test_symlinked_backup_is_refused_too(tmp_path, folder):
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    (folder / "slot-1.json.bak").symlink_to(target)
    before = snapshot(tmp_path)
    message = refused(lambda: PresetBank(folder).save(1, preset_from_show("x", Params(), [])),
                      folder / "slot-1.json.bak", PresetError)
    assert "symbolic link" in message
    assert snapshot(tmp_path) == before


@pytest.mark.posix  # symbolic links
def test_every_writer_refuses_a_symlink(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    links = tmp_path / "links"
    links.mkdir()
    for name in ("recovery.json", "midi.json", "state.npz", "look.json"):
        (links / name).symlink_to(target)
    before = snapshot(tmp_path)
    writer = RecoveryWriter(links / "recovery.json")
    with bounded():
        error = writer.save(Params(), [])
    writer.close()
    assert error and "recovery.json is a symbolic link" in error and "\n" not in error
    refused(lambda: save_mapping(links / "midi.json", MidiMapping()), links / "midi.json")
    refused(lambda: save_state(links / "state.npz", np.zeros((2, 3)), np.zeros((2, 3))),
            links / "state.npz")
    refused(lambda: atomic_write_text(links / "look.json", "x", backup=False),
            links / "look.json")
    assert snapshot(tmp_path) == before


@pytest.mark.posix  # a symbolic link
def test_a_folder_reached_through_a_link_is_fine(tmp_path):
    """Only the file's own name is checked: ~/.config may well be a link."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "config").symlink_to(real)
    bank = PresetBank(tmp_path / "config" / "presets")
    path = bank.save(1, preset_from_show("linked", Params(), []))
    assert (real / "presets" / "slot-1.json").is_file() and bank.recall(1).name == "linked"
    assert path == tmp_path / "config" / "presets" / "slot-1.json"


@pytest.mark.posix  # a FIFO
def test_a_folder_or_fifo_where_the_file_should_be_is_left_alone(tmp_path):
    (tmp_path / "look.json").mkdir()
    (tmp_path / "look.json" / "inside").write_text("mine")
    os.mkfifo(tmp_path / "pipe.json")
    before = snapshot(tmp_path)
    assert "is a folder" in refused(lambda: atomic_write_text(tmp_path / "look.json", "x"),
                                    tmp_path / "look.json")
    refused(lambda: atomic_write_text(tmp_path / "pipe.json", "x"), tmp_path / "pipe.json")
    assert snapshot(tmp_path) == before


@contextmanager
def small_disk(folder: Path, size: str = "64k") -> Iterator[Path]:
    """A tmpfs of `size` mounted on `folder` (root, as here and on CI). A refused mount fails
    the test: the full-disk behaviour is not to be skipped silently."""
    folder.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                            capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        pytest.fail(f"cannot mount a {size} tmpfs on {folder} to test a full disk (the tests "
                    f"need root, as on CI): {result.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], capture_output=True, timeout=30, check=True)


@pytest.mark.root  # mounts a tmpfs
@pytest.mark.linux
def test_full_disk_saves_are_one_line_and_leave_no_temporary(tmp_path):
    with small_disk(tmp_path / "disk") as disk:
        bank = PresetBank(disk)
        first = bank.save(3, preset_from_show("small", Params(), []))
        save_mapping(disk / "midi.json", MidiMapping())
        writer = RecoveryWriter(disk / "recovery.json")
        assert writer.save(Params(), []) is None
        descriptor = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
        try:  # fill the disk to the last block
            while True:
                os.write(descriptor, bytes(4096))
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
        finally:
            os.close(descriptor)
        before = snapshot(disk)
        big = preset_from_show("x" * 100_000, Params(), [])
        message = refused(lambda: bank.save(3, big), first, PresetError)
        assert "No space left on device" in message
        refused(lambda: save_mapping(disk / "midi.json", MidiMapping(about="y" * 100_000)),
                disk / "midi.json")
        refused(lambda: save_state(disk / "s.npz", np.ones((5000, 3)), np.ones((5000, 3))),
                disk / "s.npz")
        with bounded():
            error = writer.save(Params({"trail": 0.9}), [], {"note": "z" * 100_000})
        writer.close()
        assert error and "recovery.json" in error and "No space left" in error
        assert snapshot(disk) == before  # old files whole, no .tmp, no .bak changed
        assert bank.recall(3).name == "small"


@pytest.mark.parametrize("failing", ["write", "fsync", "close"])
def test_a_failure_at_any_system_call_is_one_line_and_leaves_nothing(tmp_path, monkeypatch,
                                                                      failing):
    """ENOSPC from write, fsync or the close of the temporary (NFS reports a full disk at
    close): FileProblem only, the old file whole, no temporary left."""
    path = tmp_path / "look.json"
    atomic_write_text(path, "old\n")
    real = getattr(os, failing)
    descriptors: list[int] = []
    real_create = atomic._create_beside

    def create(target: Path) -> tuple[Path, int]:
        temporary, descriptor = real_create(target)
        descriptors.append(descriptor)
        return temporary, descriptor

    def fail(descriptor: int, *args: Any) -> Any:
        if descriptor in descriptors:
            if failing == "close":
                real(descriptor)  # the descriptor is gone, as after a failed close(2)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(descriptor, *args)

    monkeypatch.setattr(atomic, "_create_beside", create)
    monkeypatch.setattr(atomic.os, failing, fail)
    message = refused(lambda: atomic_write_text(path, "new\n"), path)
    monkeypatch.undo()
    assert "No space left on device" in message
    assert path.read_text() == "old\n" and sorted(os.listdir(tmp_path)) == ["look.json"]


@pytest.mark.posix  # a symbolic link
def test_stale_temporaries_are_removed_and_nothing_else(tmp_path, folder):
    old = time.time() - 3600
    outside = tmp_path / "outside.json"
    outside.write_text("keep")
    names = {
        ".slot-3.json.0123abcd.tmp": True,  # ours, old: removed
        ".slot-3.json.bak.89abcdef.tmp": True,
        ".midi.json.deadbeef.tmp": True,
        ".slot-4.json.fedcba98.tmp": False,  # ours but young (set below): a write under way
        ".slot-3.json.0123ABCD.tmp": False,  # not our pattern (upper-case hex)
        ".slot-3.json.0123abc.tmp": False,
        "slot-3.json.0123abcd.tmp": False,  # not hidden
        ".slot-3.json.0123abcd.tmp.keep": False,
        ".notes.txt.0123abcd.tmp": False,  # our pattern, but not a file the instrument writes
        "notes.tmp": False,
    }
    for name in names:
        (folder / name).write_text("x")
        if name != ".slot-4.json.fedcba98.tmp":
            os.utime(folder / name, (old, old))
    (folder / ".link.json.00000000.tmp").symlink_to(outside)
    os.utime(folder / ".link.json.00000000.tmp", (old, old), follow_symlinks=False)
    (folder / ".dir.json.11111111.tmp").mkdir()
    os.utime(folder / ".dir.json.11111111.tmp", (old, old))
    PresetBank(folder)
    left = set(os.listdir(folder))
    for name, removed in names.items():
        assert (name not in left) == removed, name
    assert {".link.json.00000000.tmp", ".dir.json.11111111.tmp", "slot-1.json"} <= left
    assert outside.read_text() == "keep"
    assert remove_stale_temporaries(tmp_path / "no-such-folder") == []
    removed = remove_stale_temporaries(folder, older_than_s=0)  # any name, any age
    assert sorted(path.name for path in removed) == [".notes.txt.0123abcd.tmp",
                                                     ".slot-4.json.fedcba98.tmp"]
    assert {".link.json.00000000.tmp", ".dir.json.11111111.tmp"} <= set(os.listdir(folder))


def test_recovery_writer_removes_only_its_own_stale_temporaries(tmp_path):
    old = time.time() - 3600
    for name in (".recovery.json.0123abcd.tmp", ".recovery.json.bak.0123abcd.tmp",
                 ".other.json.0123abcd.tmp"):
        (tmp_path / name).write_text("x")
        os.utime(tmp_path / name, (old, old))
    RecoveryWriter(tmp_path / "recovery.json")
    assert os.listdir(tmp_path) == [".other.json.0123abcd.tmp"]


# ---- the recovery file -------------------------------------------------------------------------

def test_recovery_path_follows_the_environment(tmp_path, monkeypatch):
    for name in ("SWARM_RECOVERY_FILE", "SWARM_STATE_DIR", "XDG_STATE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert recovery_path() == tmp_path / "home/.local/state/swarm-instrument/recovery.json"
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert recovery_path() == tmp_path / "xdg/swarm-instrument/recovery.json"
    monkeypatch.setenv("SWARM_STATE_DIR", str(tmp_path / "state"))
    assert recovery_path() == tmp_path / "state/recovery.json"
    monkeypatch.setenv("SWARM_RECOVERY_FILE", str(tmp_path / "r.json"))
    assert recovery_path() == tmp_path / "r.json"
    assert RecoveryWriter().path == tmp_path / "r.json"


@pytest.mark.parametrize("name", ["deep-list", "huge-int", "lone-surrogate-name",
                                  pytest.param("fifo", marks=pytest.mark.posix), "truncated"])
def test_a_damaged_recovery_file_is_set_aside_once(tmp_path, name):
    path = tmp_path / "recovery.json"
    if name == "fifo":
        os.mkfifo(path)
    elif name == "truncated":
        path.write_bytes(BUNDLED_PRESETS[0].read_bytes()[:100])
    else:
        path.write_bytes(HOSTILE[name][0])
    before = snapshot(tmp_path)[str(path)]
    with bounded():
        with pytest.raises(RecoveryDamaged) as caught:
            load_recovery(path)
    message, aside = str(caught.value), caught.value.set_aside
    assert isinstance(caught.value, PresetError) and "\n" not in message
    assert message.startswith(str(path)) and message.endswith(f"; set aside as {aside}")
    assert aside.parent == tmp_path and aside.name.startswith("recovery.json.damaged-2")
    assert not os.path.lexists(path)
    assert snapshot(tmp_path)[str(aside)] == before  # the same bytes, kept for a post-mortem
    with pytest.raises(PresetError) as again:  # the next start: nothing to resume, said once
        load_recovery(path)
    assert not isinstance(again.value, RecoveryDamaged) and "no recovery file" in str(again.value)


def test_two_damaged_files_in_the_same_second_keep_both(tmp_path):
    path = tmp_path / "recovery.json"
    asides = []
    for content in (b"{", b"["):
        path.write_bytes(content)
        with pytest.raises(RecoveryDamaged) as caught:
            load_recovery(path)
        asides.append(caught.value.set_aside)
    assert len(set(asides)) == 2 and all(aside.exists() for aside in asides)


def test_a_good_recovery_file_is_not_touched(tmp_path):
    path = tmp_path / "recovery.json"
    RecoveryWriter(path).save(Params({"trail": 0.25}), [])
    before = snapshot(tmp_path)
    assert load_recovery(path).values["trail"] == 0.25
    assert snapshot(tmp_path) == before


# ---- the real command --------------------------------------------------------------------------

TINY = ("--headless", "--frames", "2", "--count", "64", "--size", "64x64")


def instrument(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    result = run_instrument(*TINY, *args, env=env, timeout=60)  # a hang fails at the timeout
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    return result


@pytest.mark.posix  # a FIFO, /dev/zero
def test_the_command_refuses_hostile_files_in_one_line(tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    deep = tmp_path / "deep.json"
    deep.write_bytes(HOSTILE["deep-list"][0])
    for args, path, expected in ((("--preset", str(fifo)), fifo, "is a FIFO"),
                                 (("--midi-map", str(fifo)), fifo, "is a FIFO"),
                                 (("--preset", str(deep)), deep, "nested more than"),
                                 (("--state-in", "/dev/zero"), "/dev/zero", "is a device")):
        result = instrument(*args)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2, (args, result.stderr)
        assert len(lines) == 1 and str(path) in lines[0] and expected in lines[0], lines


@pytest.mark.posix  # a FIFO
def test_the_command_plays_a_bundled_preset_beside_a_hostile_user_file(tmp_path):
    """One deep file in the user folder does not stop --preset calm-school."""
    user = tmp_path / "user"
    user.mkdir()
    (user / "deep.json").write_bytes(HOSTILE["deep-list"][0])
    os.mkfifo(user / "slot-2.json")
    env = {**os.environ, "SWARM_PRESETS_DIR": str(user)}
    result = instrument("--preset", "calm-school", env=env)
    assert result.returncode == 0, result.stderr


@pytest.mark.slow  # the command, played
def test_the_command_sets_a_damaged_recovery_file_aside(tmp_path):
    recovery = tmp_path / "recovery.json"
    recovery.write_bytes(HOSTILE["huge-int"][0])
    env = {**os.environ, "SWARM_RECOVERY_FILE": str(recovery)}
    result = instrument("--resume", env=env)
    assert result.returncode == 0, result.stderr
    said = [line for line in result.stdout.splitlines() if str(recovery) in line]
    assert len(said) == 1 and "cannot resume" in said[0] and "set aside as" in said[0], said
    assert not recovery.exists()
    assert [p.name[:len("recovery.json.damaged-")] for p in tmp_path.iterdir()] == \
        ["recovery.json.damaged-"]
