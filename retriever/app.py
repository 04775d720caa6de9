"""The one library API that the CLI, the MCP server, the health check and hooks share."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import psycopg

from retriever import store
from retriever.config import Settings, get_settings
from retriever.db import Database, describe_url, open_database
from retriever.embed import Embedder, EmbedderError, load_embedder
from retriever.index import IndexReport, ProgressFn, changed_files, index_vault
from retriever.lexical import BM25Params
from retriever.search import (
    Searcher,
    SearchOptions,
    SearchResult,
    parse_modified_after,
    validate_queries,
)

log = logging.getLogger(__name__)

EMBEDDER_RETRY_SECONDS = 60.0
FRESH_EMBED_LIMIT = 128  # passages a pre-search freshness pass may embed


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
        self._searcher = Searcher()
        self._last_fresh = 0.0

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
        allow_full: bool = True,
        embed_limit: int | None = None,
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
            allow_full=allow_full,
            embed_limit=embed_limit,
        )

    def refresh(self) -> int:
        """Cheap freshness pass before a search: re-index changed files (bounded).

        Returns how many files were re-indexed. Skipped when another indexer holds the
        lock, when too many files changed (a full `retriever index` is due), or when the
        last pass is younger than ``fresh_interval`` seconds."""
        now = time.monotonic()
        if now - self._last_fresh < self.settings.fresh_interval:
            return 0
        self._last_fresh = now
        try:
            _, changed, deleted = changed_files(self.db, self.settings)
        except FileNotFoundError:
            return 0
        if not changed and not deleted:
            return 0
        if len(changed) + len(deleted) > self.settings.fresh_max_files:
            log.warning("%d files changed: run `retriever index` to catch up", len(changed))
            return 0
        # Bounded: never a full rebuild, and only a small share of any embedding backlog
        # (the rest is `retriever index`'s or the watcher's job).
        report = self.index(wait_for_lock=False, allow_full=False, embed_limit=FRESH_EMBED_LIMIT)
        return report.files_changed + report.files_deleted

    def search(
        self,
        queries: str | list[str],
        *,
        budget_tokens: int | None = None,
        mode: str | None = None,
        folder: str | None = None,
        tags: list[str] | None = None,
        note_type: str | None = None,
        modified_after: object = None,
        fusion: str | None = None,
        graph: bool | None = None,
        limit: int = 30,
        fresh: bool | None = None,
    ) -> SearchResult:
        """Search the vault. Raises SearchInputError (a ValueError) for unusable input."""
        cleaned = validate_queries(queries)
        opts = SearchOptions(
            budget_tokens=self.settings.budget_tokens if budget_tokens is None else budget_tokens,
            mode=mode or "hybrid",
            fusion=fusion or self.settings.fusion,
            graph=self.settings.graph if graph is None else graph,
            folder=folder,
            tags=tags,
            note_type=note_type,
            modified_after=parse_modified_after(modified_after),  # type: ignore[arg-type]
            limit=limit,
            bm25=BM25Params(self.settings.bm25_k1, self.settings.bm25_b),
            doc_weight=self.settings.doc_weight,
            semantic_weight=self.settings.semantic_weight,
            absent_coverage=self.settings.absent_coverage,
            absent_cosine=self.settings.absent_cosine,
            graph_weight=self.settings.graph_weight,
        )
        refreshed = 0
        if self.settings.fresh_search if fresh is None else fresh:
            try:
                refreshed = self.refresh()
            except (OSError, psycopg.Error) as exc:  # stale beats nothing; `stale` flags say it
                log.warning("freshness pass failed (%s); searching the index as it is", exc)
        embedder, error = (None, None) if opts.mode == "lexical" else self.embedder()
        with self.db.connection() as conn:
            result, failure = self._searcher.search(
                conn, cleaned, opts, vault=self.settings.resolved_vault(),
                embedder=embedder, embed_error=error,
            )  # fmt: skip
            conn.commit()
        if failure:
            self.embedder_failed(failure)
        result.refreshed_files = refreshed
        return result

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
