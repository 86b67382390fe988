"""The preset slots 1-9 for the number keys and MIDI program changes, and preset names: bundled
presets fill slots by their file name, the user's saves fill them instead, and `--preset NAME`
finds a preset by name or slot. A file in the folder that cannot be read spoils only itself.
Main thread only."""

from __future__ import annotations

import os
import re
from importlib.resources import files
from pathlib import Path

from swarm_instrument.control.looks.atomic import remove_stale_temporaries
from swarm_instrument.control.looks.files import FileProblem, read_json
from swarm_instrument.control.looks.presets import (
    SLOT_FILE,
    Preset,
    PresetError,
    did_you_mean,
    load_preset,
    name_from_file,
    save_preset,
)
from swarm_instrument.control.looks.user_folders import PRESETS_ENV, presets_dir

SLOTS = range(1, 10)  # number keys 1-9; MIDI program change p recalls slot p + 1


BUNDLED_DIR = Path(str(files("swarm_instrument").joinpath("presets")))  # package data


_MAPPING_FILE = re.compile(r"^midi(-.+)?\.json$")  # presets/midi.json, midi-default.json


def user_presets_dir() -> Path:
    """Where Ctrl+number saves (control/looks/user_folders.py)."""
    return presets_dir()


class PresetBank:
    """Slots 1-9 for the number keys and MIDI program changes.

    Bundled presets fill the slots by their file name's prefix (`presets/1-calm-school.json`
    is slot 1). A save (Ctrl+number) writes `slot-N.json` in the user's folder, never a
    bundled file, and that file then fills slot N instead of the bundled one. Files are read
    at each recall, so what is on disk is what plays.
    """

    def __init__(self, user_folder: str | os.PathLike | None = None,
                 bundled_folder: str | os.PathLike = BUNDLED_DIR) -> None:
        self.user_folder = Path(user_folder) if user_folder is not None else user_presets_dir()
        self.bundled_folder = Path(bundled_folder)
        # Temporaries a killed save left (only of the files written here: the folder may be
        # one the user shares with other things).
        remove_stale_temporaries(self.user_folder,
                                 names=[f"slot-{slot}.json" for slot in SLOTS] + ["midi.json"])

    def slot_path(self, slot: int) -> Path | None:
        """The file that fills `slot` (the user's first), or None for an empty slot. Anything
        named slot-N.json fills it, a FIFO or a dangling link included, so that a recall says
        what is wrong with it instead of silently playing the bundled preset."""
        _check_slot(slot)
        user = self.user_folder / f"slot-{slot}.json"
        if os.path.lexists(user):
            return user
        for path in preset_files(self.bundled_folder):
            match = SLOT_FILE.match(path.name)
            if match and int(match.group(1)) == slot:
                return path
        return None

    def recall(self, slot: int) -> Preset:
        """The preset in `slot`, checked whole; PresetError for an empty slot or a bad file."""
        path = self.slot_path(slot)
        if path is None:
            raise PresetError(f"slot {slot} is empty; Ctrl+{slot} saves the current look there "
                              f"(into {self.user_folder})")
        return load_preset(path)

    def save(self, slot: int, preset: Preset) -> Path:
        """Save into the user's `slot-N.json` (the previous one kept as .bak); creates the
        folder. Raises PresetError naming the file."""
        _check_slot(slot)
        path = self.user_folder / f"slot-{slot}.json"
        try:
            self.user_folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise PresetError(f"{path}: cannot create the folder {self.user_folder} "
                              f"({exc.strerror}); set {PRESETS_ENV} to a writable folder") \
                from None
        return save_preset(path, preset)

    def names(self) -> dict[int, str]:
        """Slot -> preset name for the filled slots (the HUD's list); a file that cannot be
        read shows its file name. Never raises."""
        names = {}
        for slot in SLOTS:
            path = self.slot_path(slot)
            if path is not None:
                names[slot] = _peek_name(path)
        return names

    def available(self) -> dict[str, Path]:
        """Every preset by name, the user's folder first: what `--preset NAME` accepts. Never
        raises: a file that cannot be read is listed by its file name only, so one bad file
        spoils only itself."""
        found: dict[str, Path] = {}
        for folder in (self.user_folder, self.bundled_folder):
            for path in preset_files(folder):
                for name in (_peek_name(path), name_from_file(path)):
                    found.setdefault(name.lower(), path)
        return found

    def resolve(self, name_or_path: str) -> Path:
        """`--preset NAME|PATH|SLOT`: an existing file or anything ending in .json is a path;
        a digit 1-9 is that slot; otherwise a preset's name (or file name), any case."""
        text = name_or_path.strip()
        candidate = Path(text).expanduser()
        if candidate.is_file() or (os.path.lexists(candidate) and not candidate.is_dir()):
            return candidate  # a FIFO or a device too: load_preset says what it is
        if text.lower().endswith(".json"):
            for folder in (self.user_folder, self.bundled_folder):  # "1-calm-school.json"
                if candidate.name == text and (folder / text).is_file():
                    return folder / text
            return candidate  # a path: load_preset says it is missing
        if text.isdigit() and int(text) in SLOTS:
            path = self.slot_path(int(text))
            if path is None:
                raise PresetError(f"--preset {text}: slot {text} is empty; "
                                  f"filled slots: {self._slot_list()}")
            return path
        found = self.available()
        if text.lower() in found:
            return found[text.lower()]
        names = sorted({_peek_name(path) for path in found.values()})
        raise PresetError(f"--preset {text}: no preset of that name{did_you_mean(text, names)}"
                          f"; known: {', '.join(names) or 'none'} (in {self.user_folder} and "
                          f"{self.bundled_folder}), or give a path to a .json file")

    def _slot_list(self) -> str:
        return ", ".join(f"{slot} {name}" for slot, name in self.names().items()) or "none"


def preset_files(folder: Path) -> list[Path]:
    """The preset files in a folder, sorted: *.json except the MIDI mappings (midi.json,
    midi-*.json, which live beside the presets) and hidden files."""
    try:
        return sorted(path for path in folder.glob("*.json") if path.is_file()
                      and not path.name.startswith(".") and not _MAPPING_FILE.match(path.name))
    except OSError:
        return []


def _peek_name(path: Path) -> str:
    """A file's "name", without checking the rest. Never raises (listing names must not
    fail): a file that cannot be read, through the same safe reader as a recall, gives its
    file name."""
    try:
        data = read_json(path)
    except FileProblem:
        return name_from_file(path)
    name = data.get("name") if isinstance(data, dict) else None
    if isinstance(name, str) and name.strip():
        return name.strip()
    return name_from_file(path)


def _check_slot(slot: int) -> None:
    if isinstance(slot, bool) or not isinstance(slot, int) or slot not in SLOTS:
        raise PresetError(f"slot {slot!r}: slots are 1 to 9")
