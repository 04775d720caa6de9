"""The one library API that the CLI, the MCP server, the health check and hooks share."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from retriever import store
from retriever.config import Settings, get_settings
from retriever.db import Database, describe_url, open_database
from retriever.embed import Embedder, EmbedderError, load_embedder
from retriever.index import IndexReport, ProgressFn, changed_files, index_vault

log = logging.getLogger(__name__)

EMBEDDER_RETRY_SECONDS = 60.0


@dataclass(slots=True)
class Status:
    vault: str
    database: str
    notes_on_disk: int
    notes_indexed: int
    notes_changed: int
    notes_deleted: int
    chunks: int
    passages: int
    passages_pending: int
    model: str | None
    model_error: str | None
    last_index: dict[str, Any] | None = None
    stored_models: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}  # type: ignore[attr-defined]


class Retriever:
    """Owns the settings, the database pool and the (optional) embedder."""

    def __init__(self, settings: Settings | None = None, *, db: Database | None = None) -> None:
        self.settings = settings or get_settings()
        self._db = db
        self._embedder: Embedder | None = None
        self._embed_error: str | None = None
        self._embed_checked = 0.0
        self._lock = threading.Lock()

    # -- resources -------------------------------------------------------------------
    @property
    def db(self) -> Database:
        with self._lock:
            if self._db is None:
                self._db = open_database(self.settings.database_url, self.settings.home)
            return self._db

    def embedder(self, *, retry: bool = False) -> tuple[Embedder | None, str | None]:
        """The embedder, or None with the reason. Failed loads are retried at most once a
        minute (or when ``retry``), so a recovered Ollama is picked up without a restart."""
        with self._lock:
            now = time.monotonic()
            due = retry or now - self._embed_checked > EMBEDDER_RETRY_SECONDS
            if self._embedder is None and (
                self._embed_checked == 0.0 or (self._embed_error and due)
            ):
                self._embed_checked = now
                try:
                    self._embedder = load_embedder(
                        self.settings.embed_model,
                        ollama_url=self.settings.ollama_url,
                        timeout=self.settings.ollama_timeout,
                    )
                    self._embed_error = None
                except EmbedderError as exc:
                    self._embedder, self._embed_error = None, str(exc)
                    log.warning("embedder unavailable: %s", exc)
            return self._embedder, self._embed_error

    def embedder_failed(self, reason: str) -> None:
        """Called when a loaded embedder stops answering (e.g. Ollama went away)."""
        with self._lock:
            self._embedder, self._embed_error = None, reason
            self._embed_checked = time.monotonic()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    # -- operations ------------------------------------------------------------------
    def index(
        self,
        *,
        full: bool = False,
        progress: ProgressFn | None = None,
        stop: threading.Event | None = None,
        wait_for_lock: bool = True,
        embed: bool = True,
    ) -> IndexReport:
        embedder, error = self.embedder() if embed else (None, "embedding skipped")
        return index_vault(
            self.db,
            self.settings,
            embedder=embedder,
            embed_error=error,
            full=full,
            progress=progress,
            stop=stop,
            wait_for_lock=wait_for_lock,
        )

    def status(self) -> Status:
        on_disk, changed, deleted = changed_files(self.db, self.settings)
        embedder, error = self.embedder()
        with self.db.connection() as conn:
            counts = conn.execute(
                "SELECT (SELECT count(*) FROM documents), (SELECT count(*) FROM chunks),"
                " (SELECT count(*) FROM passages)"
            ).fetchone()
            assert counts is not None
            model = store.model_row(conn, embedder.fingerprint) if embedder else None
            pending = store.count_pending(conn, model[0] if model else None)
            last = store.get_meta(conn, "last_index")
            models = [r[0] for r in conn.execute("SELECT fingerprint FROM models ORDER BY id")]
            conn.commit()
        return Status(
            vault=str(self.settings.resolved_vault()),
            database=describe_url(self.db.url),
            notes_on_disk=on_disk,
            notes_indexed=on_disk - len(changed),
            notes_changed=len(changed),
            notes_deleted=len(deleted),
            chunks=int(counts[1]),
            passages=int(counts[2]),
            passages_pending=pending,
            model=embedder.model_id if embedder else self.settings.embed_model,
            model_error=error,
            last_index=last if isinstance(last, dict) else None,
            stored_models=models,
        )

    def gc(self) -> dict[str, int]:
        embedder, _ = self.embedder()
        with self.db.connection() as conn, conn.transaction():
            passages = store.gc_passages(conn)
            # Without a working embedder we cannot tell which vectors are current: keep all.
            models = store.gc_embeddings(conn, embedder.fingerprint) if embedder else 0
        return {"passages_removed": passages, "models_removed": models}
