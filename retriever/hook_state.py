"""Per-session state the hooks share: the user's last prompt (saved by the prompt hook, read
by the post-tool hook to score long output against the task) and what was already shown."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from retriever.config import Settings

log = logging.getLogger(__name__)

STATE_MAX_AGE_S = 3 * 24 * 3600
MAX_TASK_CHARS = 2_000


def state_dir(settings: Settings | None) -> Path:
    """RETRIEVER_HOME/hook-state when writable, else a per-user folder in the temp dir."""
    candidates = [settings.home / "hook-state"] if settings is not None else []
    candidates.append(Path(tempfile.gettempdir()) / f"retriever-hook-state-{os.getuid()}")
    for folder in candidates:
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            if os.access(folder, os.W_OK):
                return folder
        except OSError:
            continue
    raise OSError("no writable folder for the hook state")


def _state_file(folder: Path, session_id: str) -> Path:
    digest = hashlib.sha256(session_id.encode("utf-8", "replace")).hexdigest()[:24]
    return folder / f"{digest}.json"


def load_state(folder: Path, session_id: str) -> dict[str, Any]:
    try:
        data = json.loads(_state_file(folder, session_id).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_state(folder: Path, session_id: str, state: dict[str, Any]) -> None:
    """Atomic write (hooks of one session may run in parallel); old sessions pruned."""
    target = _state_file(folder, session_id)
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(state, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, target)
    cutoff = time.time() - STATE_MAX_AGE_S
    for old in folder.glob("*.json"):
        try:
            if old.stat().st_mtime < cutoff:
                old.unlink()
        except OSError:
            continue


def remember_prompt(settings: Settings, session_id: object, prompt: str) -> None:
    """Called by the prompt hook: the post-tool hook scores output against this prompt."""
    if not isinstance(session_id, str) or not session_id:
        return
    try:
        folder = state_dir(settings)
        state = load_state(folder, session_id)
        state["prompt"] = prompt[:MAX_TASK_CHARS]
        save_state(folder, session_id, state)
    except OSError as exc:
        log.info("hook state not saved: %s", type(exc).__name__)
