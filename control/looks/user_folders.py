"""The user's folders, on every platform (platformdirs): saved presets, the learned MIDI
mapping and the web token in the configuration folder (~/.config/swarm-instrument on Linux,
~/Library/Application Support/swarm-instrument on macOS, %LOCALAPPDATA%\\swarm-instrument on
Windows), the recovery file, crash reports and the supervisor's telemetry in the state folder
(~/.local/state/swarm-instrument on Linux). Environment variables move them, read when asked,
so the environment of the moment counts (tests, a second show on one machine):

    SWARM_PRESETS_DIR    the saved presets (and midi.json, web-token beside them)
    SWARM_STATE_DIR      the state folder
    SWARM_RECOVERY_FILE  the recovery file alone

Nothing is ever written into the installed package. Pure: any thread.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP = "swarm-instrument"
PRESETS_ENV = "SWARM_PRESETS_DIR"
STATE_ENV = "SWARM_STATE_DIR"
RECOVERY_ENV = "SWARM_RECOVERY_FILE"


def _from_env(name: str) -> Path | None:
    value = os.environ.get(name)
    return Path(value).expanduser() if value else None


def presets_dir() -> Path:
    """Where Ctrl+number saves, and where midi.json and the web token are kept."""
    return _from_env(PRESETS_ENV) or platformdirs.user_config_path(APP, appauthor=False) / "presets"


def state_dir() -> Path:
    """Where crash reports, the supervisor's telemetry and the recovery file live."""
    return _from_env(STATE_ENV) or platformdirs.user_state_path(APP, appauthor=False)


def recovery_file() -> Path:
    """Where the live look is saved every few seconds, for --resume."""
    return _from_env(RECOVERY_ENV) or state_dir() / "recovery.json"
