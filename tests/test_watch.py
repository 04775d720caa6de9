"""Watch mode follows creates, edits, renames, deletes and editors' atomic saves."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from retriever.app import Retriever
from retriever.passage_text import unpack
from retriever.watch import watch_vault


def _paths(app: Retriever) -> set[str]:
    with app.db.connection() as conn:
        rows = conn.execute("SELECT path FROM documents").fetchall()
        conn.commit()
    return {r[0] for r in rows}


def _text_of(app: Retriever, path: str) -> str:
    with app.db.connection() as conn:
        rows = conn.execute(
            "SELECT p.ztext FROM chunks c JOIN documents d ON d.id = c.doc_id "
            "JOIN passages p ON p.hash = c.passage_hash WHERE d.path = %s ORDER BY c.ordinal",
            (path,),
        ).fetchall()
        conn.commit()
    return "\n".join(unpack(r[0]) for r in rows)


def _eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError("the index did not follow the change in time")


def test_watch_follows_changes(make_app, vault_copy: Path) -> None:
    app = make_app(vault_copy)
    stop = threading.Event()
    reports: list[object] = []
    thread = threading.Thread(
        target=watch_vault,
        args=(app,),
        kwargs={"stop": stop, "debounce_ms": 200, "on_report": reports.append},
        daemon=True,
    )
    thread.start()
    try:
        _eventually(lambda: len(reports) >= 1)
        time.sleep(0.3)  # let the watcher settle after the first index

        new = vault_copy / "Watched note.md"
        new.write_text("# Watched note\n\nAxolotl regeneration facts.\n", "utf-8")
        _eventually(lambda: "Watched note.md" in _paths(app))

        new.write_text("# Watched note\n\nCapybara social habits.\n", "utf-8")
        _eventually(lambda: "Capybara" in _text_of(app, "Watched note.md"))

        os.rename(new, vault_copy / "Renamed note.md")
        _eventually(
            lambda: "Renamed note.md" in _paths(app) and "Watched note.md" not in _paths(app)
        )

        # An editor's atomic save: write a temp file, then rename it over the note.
        tmp = vault_copy / ".Renamed note.md.tmp~"
        tmp.write_text("# Renamed note\n\nPangolin scales are keratin.\n", "utf-8")
        os.replace(tmp, vault_copy / "Renamed note.md")
        _eventually(lambda: "Pangolin" in _text_of(app, "Renamed note.md"))

        (vault_copy / "Renamed note.md").unlink()
        _eventually(lambda: "Renamed note.md" not in _paths(app))
    finally:
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive()


def test_ctrl_c_during_the_first_index_ends_the_watch(make_app, tmp_path: Path) -> None:
    import signal

    vault = tmp_path / "big"
    vault.mkdir()
    for i in range(3000):  # an initial index that lasts long enough to be interrupted
        (vault / f"note {i}.md").write_text(f"# Note {i}\n\nabout topic {i % 97}\n", "utf-8")
    app = make_app(vault)
    stop = threading.Event()

    def interrupt_the_index() -> None:
        # Ctrl-C once the indexer holds SIGINT (a fixed delay raced a fast machine: the
        # index could end first, and the watch then ended without an interrupted run).
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            handler = signal.getsignal(signal.SIGINT)
            if type(getattr(handler, "__self__", None)).__name__ == "_StopFlag":
                signal.raise_signal(signal.SIGINT)
                return
            time.sleep(0.002)

    interrupt = threading.Thread(target=interrupt_the_index, daemon=True)
    safety = threading.Timer(60, stop.set)  # without the fix the watch would go on
    reports: list[object] = []
    started = time.monotonic()
    interrupt.start()
    safety.start()
    try:
        watch_vault(app, stop=stop, on_report=reports.append)
    finally:
        interrupt.join(timeout=30)
        safety.cancel()
    assert not stop.is_set(), "Ctrl-C did not end the watch"
    assert time.monotonic() - started < 55
    assert reports and reports[0].interrupted  # type: ignore[attr-defined]
