"""The user's folders (control/looks/user_folders.py): the platform's own through platformdirs,
moved by the SWARM_* variables, looked up when asked; the presets, recovery file and crash
reports follow them."""

from __future__ import annotations

from pathlib import Path

from swarm_instrument.control.looks.preset_bank import user_presets_dir
from swarm_instrument.control.looks.recovery import recovery_path
from swarm_instrument.control.looks.user_folders import presets_dir, recovery_file, state_dir
from swarm_instrument.show.supervision.supervisor import default_state_dir


def test_the_platforms_folders_by_default(monkeypatch, tmp_path):
    for name in ("SWARM_PRESETS_DIR", "SWARM_STATE_DIR", "SWARM_RECOVERY_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert presets_dir() == tmp_path / "config" / "swarm-instrument" / "presets"
    assert state_dir() == tmp_path / "state" / "swarm-instrument"
    assert recovery_file() == state_dir() / "recovery.json"
    # every user of a folder asks this module, so all of them move together
    assert user_presets_dir() == presets_dir()
    assert recovery_path() == recovery_file()
    assert default_state_dir() == state_dir()


def test_the_variables_move_them_when_asked(monkeypatch, tmp_path):
    monkeypatch.setenv("SWARM_PRESETS_DIR", str(tmp_path / "mine"))
    monkeypatch.setenv("SWARM_STATE_DIR", "~/show-state")
    monkeypatch.delenv("SWARM_RECOVERY_FILE", raising=False)
    assert presets_dir() == tmp_path / "mine"
    assert state_dir() == Path.home() / "show-state"
    assert recovery_file() == Path.home() / "show-state" / "recovery.json"
    monkeypatch.setenv("SWARM_RECOVERY_FILE", str(tmp_path / "r.json"))
    assert recovery_file() == tmp_path / "r.json"


def test_no_module_builds_a_user_folder_itself():
    """XDG's variables are platformdirs' to read: a path built from them by hand is Linux's
    on a Mac too."""
    root = Path(__file__).resolve().parent.parent
    for package in ("audio", "control", "show", "visual"):
        for path in (root / package).rglob("*.py"):
            if path.name == "user_folders.py":
                continue
            text = path.read_text()
            assert "XDG_" not in text and ".local/state" not in text, path
