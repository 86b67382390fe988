"""The web remote's token: the secret in the page's link that every request and socket from
the network must carry (control/web/web_remote.py checks it). Made once, kept beside the saved
presets and midi.json so a bookmarked link keeps working; readable by its owner only. Any thread.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

from swarm_instrument.control.looks.files import FileProblem, read_bytes
from swarm_instrument.control.looks.preset_bank import user_presets_dir

TOKEN_FILE = "web-token"
TOKEN_PATTERN = re.compile(r"^[A-Za-z0-9_-]{16,128}$")


def token_path() -> Path:
    """Where the token is kept: beside the saved presets and midi.json ($SWARM_PRESETS_DIR
    moves all three). Looked up when needed, so the environment of the moment counts."""
    return user_presets_dir() / TOKEN_FILE


def load_or_create_token(path: Path | None = None) -> tuple[str, str]:
    """The stored token, or a new one stored there (owner-only, written whole then renamed);
    also a note for the console. A token that cannot be stored still serves this show."""
    path = path or token_path()
    try:
        text = read_bytes(path, 1024, "token file").decode("ascii", "replace").strip()
    except FileProblem as exc:
        if os.path.lexists(path):
            note = f"{exc}; a new token was made"
        else:
            note = f"a new token was made and kept in {path}"
    else:
        if TOKEN_PATTERN.match(text):
            return text, f"token from {path} (delete the file for a new link)"
        note = f"{path}: not a token; a new one was made"
    token = secrets.token_urlsafe(18)
    try:
        write_token(path, token)
    except OSError as exc:
        note = (f"cannot keep the token in {path} ({exc.strerror or exc}): this link works "
                "until the show ends")
    return token, note


def write_token(path: Path, token: str) -> None:
    """The token into `path`, readable by its owner only, through a temporary file and one
    rename (a link at `path` is replaced, never written through)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
    descriptor = os.open(temporary, flags, 0o600)
    try:
        os.write(descriptor, (token + "\n").encode("ascii"))
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    try:
        os.replace(temporary, path)
    except OSError:
        os.unlink(temporary)
        raise
