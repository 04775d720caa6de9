"""Watch mode: keep the index fresh as notes change (used by the compose indexer).

watchfiles (Rust `notify`, inotify on Linux) blocks in the kernel while nothing happens,
so an idle watcher costs next to no CPU. Changes are debounced and each batch triggers one
incremental index run, which re-checks size/mtime itself: editors' atomic saves (write a
temp file, rename over the note) simply show up as a changed note. While an embedding tier
is down with passages to embed (the Ollama model still being pulled), it also re-indexes
every RETRY_SECONDS, which fills that tier once it answers.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

import psycopg
from watchfiles import Change, DefaultFilter, watch

from retriever.app import Retriever
from retriever.db import DatabaseError
from retriever.index import IndexReport
from retriever.scan import ALWAYS_EXCLUDED_DIRS

log = logging.getLogger(__name__)

RETRY_SECONDS = 30


class NoteFilter(DefaultFilter):
    """Markdown files and folders (a moved folder moves notes), never excluded folders."""

    def __init__(self) -> None:
        super().__init__(ignore_dirs=tuple(ALWAYS_EXCLUDED_DIRS))

    def __call__(self, change: Change, path: str) -> bool:
        if not super().__call__(change, path):
            return False
        name = Path(path).name
        return name.lower().endswith(".md") or name == ".indexignore" or "." not in name


def watch_vault(
    app: Retriever,
    *,
    stop: threading.Event | None = None,
    debounce_ms: int = 800,
    on_report: Callable[[IndexReport], None] | None = None,
) -> None:
    """Index once, then re-index after every debounced batch of changes until ``stop``."""
    vault = app.settings.resolved_vault()
    report = app.index()
    if on_report:
        on_report(report)
    if report.interrupted:  # Ctrl-C landed during the run (the indexer took it): stop here
        return
    log.info("watching %s", vault)
    failed = False
    waiting = _waiting_for_tier(report)
    for changes in watch(
        vault,
        watch_filter=NoteFilter(),
        debounce=debounce_ms,
        step=100,
        stop_event=stop,
        rust_timeout=RETRY_SECONDS * 1000,
        yield_on_timeout=True,  # wakes up (rarely) so a failed run is retried
        raise_interrupt=False,
    ):
        if not changes and not failed and not waiting:
            continue
        if changes:
            log.info("%d change(s) seen; re-indexing", len(changes))
        try:
            report = app.index()
        except (DatabaseError, psycopg.Error, OSError) as exc:
            # A restarting database must not end the watcher: retry on the next change or
            # within RETRY_SECONDS.
            failed = True
            log.error("index run failed (%s); retrying", exc)
            continue
        failed = False
        waiting = _waiting_for_tier(report)
        if on_report and (changes or not _idle(report)):
            on_report(report)
        if report.interrupted:
            return


def _waiting_for_tier(report: IndexReport) -> bool:
    """Whether an embedding tier was down with passages still to embed (an Ollama model
    still being pulled, a restarting server): the watcher then retries every RETRY_SECONDS
    so the tier is filled once it is back, with no note changed."""
    return any(t.pending and t.error and not _turned_off(t.error) for t in report.tiers)


def _turned_off(error: str | None) -> bool:
    return bool(error) and "turned off" in str(error)


def _idle(report: IndexReport) -> bool:
    """A retry that changed nothing (the tier is still down): not worth a report line."""
    return not (report.files_changed or report.files_deleted or report.errors) and not any(
        t.embedded for t in report.tiers
    )
