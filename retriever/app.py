"""The one library API that the CLI, the MCP server, the health check and hooks share."""

from __future__ import annotations

import logging
import multiprocessing
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any, cast

import psycopg

from retriever import calibration_store, store
from retriever.calibration_store import LEXICAL_KEY
from retriever.config import Settings, get_settings
from retriever.db import (
    Database,
    DatabaseConfigError,
    DatabaseError,
    DatabaseUnreachable,
    describe_url,
    open_database,
)
from retriever.embed import Embedder, EmbedderError
from retriever.errors import VaultError
from retriever.feedback import Policy
from retriever.index import (
    LOCK_BUSY,
    PIPELINE_CHANGED,
    IndexReport,
    ProgressFn,
    TierJob,
    changed_files,
    index_vault,
    pipeline_behind,
    scan_changes,
    touched_changes,
    warm_link_resolver,
)
from retriever.lexical import BM25Params
from retriever.query_input import (
    SearchInputError,
    check_mode,
    parse_modified_after,
    validate_queries,
)
from retriever.query_words import QueryWords
from retriever.ranking import FUSION_CHOICES, Fusion, Ranking
from retriever.scan import ScanReport
from retriever.search import Searcher, SearchOptions, SearchResult, Spare, check_options
from retriever.tiers import PRIMARY, Choice, Tier, Tiers, unchanged_model
from retriever.vault_watch import VaultWatch

log = logging.getLogger(__name__)

DATABASE_RETRY_SECONDS = 10.0
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
    calibration: dict[str, Any] = field(default_factory=dict)
    tiers: list[dict[str, Any]] = field(default_factory=list)  # every embedding tier
    vaults: list[dict[str, Any]] = field(default_factory=list)  # every vault on this server
    # Derived by another indexing pipeline (a new redactor, say): `retriever index` is due.
    pipeline_behind: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


UNGUARDED_SCRIPT = (
    "retriever: an index worker is re-running the script that started it: put the script's "
    'code under `if __name__ == "__main__":` (worker processes import the main module)'
)


def _refuse_in_a_bootstrapping_worker() -> None:
    """An index run parses notes in worker processes, which import the caller's main
    module first. A script without the ``__main__`` guard would build an app there and
    start an index run that waits forever for the lock its parent holds; fail instead."""
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise RuntimeError(UNGUARDED_SCRIPT)


class Retriever:
    """Owns the settings, the database pool and the embedding tiers."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        db: Database | None = None,
        tiers: Tiers | None = None,
    ) -> None:
        _refuse_in_a_bootstrapping_worker()
        self.settings = settings or get_settings()
        self._db = db
        self.tiers = tiers or Tiers(self.settings)
        self._lock = threading.Lock()
        self._searcher = Searcher()
        self._last_fresh = 0.0
        self._db_failure: tuple[float, str] | None = None
        self.shared = False  # held warm by the resident service: close() leaves it open
        self.long_lived = False  # the resident service or an MCP server: may watch the vault
        self._watch: VaultWatch | None = None
        self._watch_tried = False
        self._links_warming: threading.Thread | None = None
        self._closed = False

    # -- resources -------------------------------------------------------------------
    @property
    def db(self) -> Database:
        """The database, started or joined on first use. A failure is remembered for a
        few seconds, so a warm service answering from the files does not retry each call."""
        with self._lock:
            if self._db is None:
                failed = self._db_failure
                if failed and time.monotonic() - failed[0] < DATABASE_RETRY_SECONDS:
                    raise DatabaseError(failed[1])
                try:
                    self._db = open_database(
                        self.settings.database_url,
                        self.settings.home,
                        vault=self.settings.resolved_vault(),
                    )
                except DatabaseConfigError:
                    raise
                except DatabaseError as exc:
                    self._db_failure = (time.monotonic(), str(exc))
                    raise
                self._db_failure = None
            return self._db

    def database_failed(self, exc: Exception) -> None:
        """The server went away mid-session: drop the pool; the next call reconnects."""
        with self._lock:
            db, self._db = self._db, None
            self._db_failure = (time.monotonic(), f"database unavailable: {exc}")
        if db is not None:
            db.close()

    def embedder(self, *, retry: bool = False) -> tuple[Embedder | None, str | None]:
        """The primary tier's embedder, or None with the reason. A tier that is down is
        probed again in the background (short timeout, growing pauses), or now when
        ``retry``, so a recovered Ollama is picked up without a restart."""
        tier = self.tiers.primary
        if retry:
            tier.probe(force=True)
        embedder = tier.get()
        return embedder, None if embedder is not None else tier.error

    def warm_models(self) -> None:
        """Load every tier's model in the background: a long-lived process should not make
        its first search, or its first edit, wait for it (index runs with nothing to embed
        no longer load it)."""

        def load() -> None:
            for tier in self.tiers.tiers:
                if self._closed:  # an evicted service app
                    return
                tier.get()
            if self._closed:  # closed while loading: let go of what was loaded
                self.tiers.close()

        threading.Thread(target=load, name="retriever-models", daemon=True).start()

    def embedder_failed(self, reason: str) -> None:
        """Called when the loaded primary model stops answering (e.g. Ollama went away)."""
        self.tiers.primary.failed(reason)

    def close(self, *, force: bool = False) -> None:
        if self.shared and not force:
            return
        self._closed = True
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._watch is not None:
            self._watch.close()
            self._watch = None
        self.tiers.close()  # e.g. the Ollama HTTP clients

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
        calibrate: bool = True,
        force: bool = False,
        scan: ScanReport | None = None,
        touched: set[str] | None = None,
    ) -> IndexReport:
        """Bring the index in line with the vault, filling every embedding tier that is
        up, then calibrate the ranking when due (never from the bounded freshness pass:
        ``embed_limit`` set, which also never waits for a tier's probe). ``scan`` or
        ``touched``: what the caller's pass found (the walk, or the paths the watch
        named); the vault watch is asked otherwise."""
        given = scan is not None or touched is not None
        watch = self._vault_watch() if not given and not full else None
        if watch is not None:
            watch.quiet()  # the barrier: every change made before this run is in
            touched = watch.begin_walk()
        jobs = (
            self._tier_jobs(block=embed_limit is None)
            if embed
            else [TierJob(self.tiers.primary.name, None, "embedding skipped")]
        )
        caught_up = False
        try:
            report = index_vault(
                self.db,
                self.settings,
                full=full,
                progress=progress,
                stop=stop,
                wait_for_lock=wait_for_lock,
                allow_full=allow_full,
                embed_limit=embed_limit,
                force=force,
                tiers=jobs,
                scan=scan,
                touched=touched,
            )
            caught_up = in_line(report)
        finally:
            if watch is not None and not caught_up:
                watch.mark_changed()  # the next pass walks the vault
        for job, done in zip(jobs, report.tiers, strict=False):
            tier = self.tiers.get(job.tier)
            if tier is not None and job.embedder is not None and done.error:
                tier.failed(done.error, job.embedder)  # went away mid-run
        due = calibrate and self.settings.calibrate and embed_limit is None
        if due and not (report.interrupted or report.refused) and LOCK_BUSY not in report.warnings:
            # Tiers this run left with a vector for every passage: not counted again.
            complete = {t.tier for t in report.tiers if not t.pending}
            try:
                report.calibration = self.calibrate(force=False, complete=complete)
            except (psycopg.Error, EmbedderError, DatabaseUnreachable) as exc:
                report.warnings.append(f"calibration failed: {exc}")
        if self.long_lived and not (report.errors or report.refused):
            self._warm_links()
        return report

    def _warm_links(self) -> None:
        """Build the link resolver the next edit's run needs, in the background
        (``index.warm_link_resolver``); one warm-up at a time."""
        if self._links_warming is not None and self._links_warming.is_alive():
            return
        db = self.db

        def warm() -> None:
            try:
                warm_link_resolver(db)
            except Exception as exc:  # the edit's own run builds it then, as before
                log.debug("link resolver warm-up: %s", exc)

        self._links_warming = threading.Thread(target=warm, name="retriever-links", daemon=True)
        self._links_warming.start()

    def _tier_jobs(self, *, block: bool) -> list[TierJob]:
        """Every tier's job; a tier not loaded yet is loaded by the run only if it has
        something to embed (``TierJob.load``)."""
        jobs = []
        for tier in self.tiers.tiers:
            embedder = tier.loaded()
            if embedder is None and not tier.off:
                expected = self.settings.embed_dim if tier.name == PRIMARY else None
                load = _loader(tier, block)
                jobs.append(TierJob(tier.name, None, None, tier.model, load, expected))
                continue
            embedder = embedder or tier.get(block=block)
            error = None if embedder is not None else tier.error
            jobs.append(TierJob(tier.name, embedder, error, None if tier.off else tier.model))
        return jobs

    def refresh(self) -> int:
        """Cheap freshness pass before a search: re-index changed files (bounded).

        Returns how many files were re-indexed. Skipped when another indexer holds the
        lock, when too many files changed (a full `retriever index` is due), or when the
        last pass is younger than ``fresh_interval`` seconds. A long-lived app watching the
        vault (see ``vault_watch``) skips the walk when nothing changed, and needs no
        interval: it walks exactly when something did."""
        watch = self._vault_watch()
        if watch is not None and watch.quiet():
            return 0
        now = time.monotonic()
        if watch is None and now - self._last_fresh < self.settings.fresh_interval:
            return 0
        self._last_fresh = now
        touched = watch.begin_walk() if watch is not None else None
        refreshed, caught_up = 0, False
        try:
            refreshed, caught_up = self._refresh_walk(touched)
        finally:
            if watch is not None and not caught_up:
                watch.mark_changed()  # the next pass walks again
        return refreshed

    def _refresh_walk(self, touched: set[str] | None) -> tuple[int, bool]:
        """(files re-indexed, whether the index now matches the vault). ``touched``: the
        only paths that may have changed (from the vault watch); None: walk the vault."""
        scan = None
        try:
            if touched is None:
                scan, changed, deleted = scan_changes(self.db, self.settings)
            else:  # the watch names what changed: look at that alone
                changed, deleted = touched_changes(self.db, self.settings, touched)
        except FileNotFoundError:
            return 0, False
        if not changed and not deleted:
            return 0, True
        if len(changed) + len(deleted) > self.settings.fresh_max_files:
            log.warning("%d files changed: run `retriever index` to catch up", len(changed))
            return 0, False
        # Bounded: never a full rebuild, and only a small share of any embedding backlog
        # (the rest is `retriever index`'s or the watcher's job).
        report = self.index(
            wait_for_lock=False,
            allow_full=False,
            embed_limit=FRESH_EMBED_LIMIT,
            scan=scan,
            touched=touched,
        )
        return report.files_changed + report.files_deleted, in_line(report)

    def _check_indexed_vault(self, conn: psycopg.Connection, indexed: str | None) -> None:
        """A database holding another vault's index (one DATABASE_URL for two vaults) does
        not answer for this one: its hits would cite notes this vault does not have. A
        vault moved or renamed holds the indexed notes: it is answered for."""
        vault = self.settings.resolved_vault()
        mine = str(vault)
        if indexed is None or indexed == mine:
            return
        sample = [r[0] for r in conn.execute("SELECT path FROM documents ORDER BY id LIMIT 8")]
        if sample and sum((vault / p).is_file() for p in sample) * 2 < len(sample):
            raise VaultError(
                f"this index holds {indexed}, not {mine}: give each vault its own"
                " DATABASE_URL (or RETRIEVER_HOME), or run `retriever index --force` to"
                " replace it"
            )

    def _vault_watch(self) -> VaultWatch | None:
        """The vault's watch, started on the first pass of a long-lived app (None: walk)."""
        if not (self.long_lived and self.settings.fresh_watch):
            return None
        with self._lock:
            if not self._watch_tried:
                self._watch_tried = True
                self._watch = VaultWatch.start(self.settings.resolved_vault())
            return self._watch

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
        ranking: Ranking | None = None,
        overrides: dict[str, Any] | None = None,
        feedback: Policy | None = None,
    ) -> SearchResult:
        """Search the vault. Raises SearchInputError (a ValueError) for unusable input.
        ``feedback``: query feedback for this search (None: as the settings say)."""
        cleaned = validate_queries(queries)
        opts = SearchOptions.from_settings(
            self.settings,
            budget_tokens=budget_tokens,
            mode=check_mode(mode),
            ranking=ranking,
            overrides={**self._ranking_overrides(fusion, graph), **(overrides or {})},
            folder=self._folder_filter(folder),
            tags=tags,
            note_type=note_type,
            modified_after=parse_modified_after(modified_after),  # type: ignore[arg-type]
            limit=limit,
            feedback=feedback,
        )
        check_options(opts)
        try:
            db = self.db
        except DatabaseConfigError:
            raise  # a wrong setting is said, not papered over
        except DatabaseError as exc:
            return self._search_files(cleaned, opts, str(exc))
        try:
            return self._search_index(db, cleaned, opts, fresh)
        except (psycopg.OperationalError, DatabaseUnreachable) as exc:  # the server went away
            self.database_failed(exc)
            return self._search_files(cleaned, opts, f"database unavailable: {exc}")

    def _folder_filter(self, folder: str | None) -> str | None:
        """A folder filter as every front end takes it: vault-relative, normalised ("./x/"
        is "x"); one that climbs out, is absolute or names no indexable folder of the
        vault is refused (NotePathError), never an empty answer that reads as "not in
        the vault"."""
        from retriever.notes import folder_filter

        return folder_filter(self, folder)

    def _search_index(
        self, db: Database, cleaned: list[str], opts: SearchOptions, fresh: bool | None
    ) -> SearchResult:
        refreshed = 0
        if self.settings.fresh_search if fresh is None else fresh:
            try:
                refreshed = self.refresh()
            except (OSError, psycopg.Error, DatabaseUnreachable) as exc:  # stale beats nothing
                log.warning("freshness pass failed (%s); searching the index as it is", exc)
        with db.connection() as conn:
            gen = self._searcher.begin(conn)  # one snapshot for the search's statements
            self._check_indexed_vault(conn, gen.vault)
            result = self._search_tiers(conn, cleaned, opts, db.spare, gen)
            conn.commit()
        self._searcher.warm_titles(db.spare, eager=self.long_lived)
        result.refreshed_files = refreshed
        return result

    def _search_tiers(
        self,
        conn: psycopg.Connection,
        cleaned: list[str],
        opts: SearchOptions,
        spare: Spare,
        gen: store.Generation,
    ) -> SearchResult:
        """Search with the best embedding tier that can answer. A tier that fails while
        embedding the query is marked down and the next one answers the same search: no
        answer is lost to a tier switch."""
        vault = self.settings.resolved_vault()
        if opts.mode == "lexical":
            result, _ = self._searcher.search(
                conn, cleaned, opts, vault=vault, embedder=None, embed_error=None, gen=gen
            )
            return result
        skip: dict[str, str] = {}
        kept: Choice | None = None  # a tier with no valid query vector, if no other answers
        for _ in range(len(self.tiers.tiers) + 1):
            choice = self.tiers.choose(
                lambda e: self._searcher.pending_vectors(conn, e, gen), skip=skip
            )
            if choice.embedder is None or choice.tier is None:
                choice = kept or choice
                break
            try:
                words = self._searcher.query_words(conn, opts, choice.embedder, gen)
                vectors = self._searcher.query_vectors(choice.embedder, cleaned, words)
            except EmbedderError as exc:
                choice.tier.failed(str(exc), choice.embedder)
                continue
            if vectors:
                break
            # No valid vector for these queries (unknown words, or a model returning NaN):
            # another tier may do better; if none does, this one still answers.
            kept = kept or choice
            skip[choice.tier.name] = f"{choice.tier.label} gave no valid vector for this query"
        result, failure = self._searcher.search(
            conn,
            cleaned,
            opts,
            vault=vault,
            embedder=choice.embedder,
            embed_error=choice.error,
            spare=spare,
            gen=gen,
        )
        if failure and choice.tier is not None:
            choice.tier.failed(failure, choice.embedder)
        if result.mode != "lexical" and choice.tier is not None:
            result.tier = choice.tier.name
            result.degraded_reason = _joined(choice.note, result.degraded_reason)
        return result

    def _search_files(self, cleaned: list[str], opts: SearchOptions, why: str) -> SearchResult:
        """No database: BM25 over the files themselves, said in the answer."""
        from retriever.files_search import FilesQuery, files_result, search_files

        log.info("%s: searching the files directly", why)  # the answer says it too
        started = time.perf_counter()
        s = self.settings
        query = FilesQuery(
            cleaned,
            opts.budget_tokens,
            opts.limit,
            opts.folder,
            opts.tags,
            opts.note_type,
            opts.modified_after,
            opts.bm25,
        )
        answer = search_files(
            s.resolved_vault(),
            query,
            include=s.include,
            exclude=s.exclude,
            max_bytes=s.max_file_bytes,
            min_chars=s.chunk_min_chars,
            max_chars=s.chunk_max_chars,
            time_limit=s.files_time_limit,
        )
        took = (time.perf_counter() - started) * 1000
        return files_result(
            answer, query, why=why, absent_coverage=opts.absent_coverage, took_ms=took
        )

    def bm25(self) -> BM25Params:
        return BM25Params(self.settings.bm25_k1, self.settings.bm25_b)

    def _ranking_overrides(self, fusion: str | None, graph: bool | None) -> dict[str, object]:
        """The ranking choices set explicitly (settings, then this call's flags), which
        calibration must not change."""
        if fusion is not None and fusion not in FUSION_CHOICES:
            raise SearchInputError(f"fusion must be one of {', '.join(FUSION_CHOICES)}")
        out: dict[str, object] = dict(FUSION_CHOICES[self.settings.fusion])
        for name in (
            "semantic_weight",
            "graph_weight",
            "title_weight",
            "rrf_k",
            "identifier_lean",
            "link_prior",
        ):
            value = getattr(self.settings, name)
            if value is not None:
                out[name] = value
        if self.settings.query_words != "auto":
            out["query_words"] = self.settings.query_words
        if not self.settings.graph:
            out["graph_weight"] = 0.0
        out.update(FUSION_CHOICES[cast(Fusion, fusion or "auto")])
        if graph is False:
            out["graph_weight"] = 0.0
        elif graph:
            if out.get("graph_weight") == 0.0:
                del out["graph_weight"]
            out["graph"] = True
        return out

    # -- calibration -----------------------------------------------------------------
    def calibrate(self, *, force: bool = True, complete: Collection[str] = ()) -> dict[str, Any]:
        """Choose the ranking and absence model for this vault and every tier's model
        (those with a vector for every passage: partial vectors would skew the choice).
        Without ``force``, only when due (no calibration yet, or the vault changed).
        ``complete``: tiers an index run has just found with every passage's vector."""
        with self.db.connection() as conn:
            current = None if force else self._current_without_loading(conn, complete)
            conn.commit()
        if current is not None:
            return current
        with self.db.connection() as conn:
            ready = [
                (tier, embedder)
                for tier, embedder in self.tiers.for_index(block=False)
                if embedder is not None and self._searcher.pending_vectors(conn, embedder) == 0
            ]
            conn.commit()
        results = [(t.name, self._calibrate_one(e, force)) for t, e in ready]
        if not results:
            return self._calibrate_one(None, force)
        first = results[0][1]
        if len(self.tiers.tiers) > 1:
            first = {
                **first,
                "tiers": [
                    {"tier": name, "model": r.get("model"), "status": r.get("status")}
                    for name, r in results
                ],
            }
        return first

    def _current_without_loading(
        self, conn: psycopg.Connection, complete: Collection[str] = ()
    ) -> dict[str, Any] | None:
        """The "current" answer when every tier's model is unloaded, unchanged, has every
        passage's vector and a calibration that is not due; else None (load and look)."""
        keys: list[tuple[str, str]] = []
        n_docs = store.count_documents(conn)
        for tier in self.tiers.tiers:
            if tier.off:
                continue
            expected = self.settings.embed_dim if tier.name == PRIMARY else None
            known = None if tier.loaded() else unchanged_model(conn, tier.model, expected)
            if known is None or (tier.name not in complete and store.count_pending(conn, known[0])):
                return None
            if self._calibration_due(conn, known[1], n_docs):
                return None
            keys.append((tier.name, known[1]))
        if not keys:
            return None
        first: dict[str, Any] = {"status": "current", "model": keys[0][1]}
        if len(self.tiers.tiers) > 1:
            first["tiers"] = [{"tier": n, "model": k, "status": "current"} for n, k in keys]
        return first

    def _forced_query_words(self) -> QueryWords | None:
        words = self.settings.query_words
        return None if words == "auto" else words

    def _calibration_due(self, conn: psycopg.Connection, key: str, n_docs: int) -> bool:
        """The model or the vault changed, or the query words the stored thresholds were
        fitted on are not the ones searches will embed: the setting imposes other words,
        or it imposed them then and calibration may now choose."""
        drift = self.settings.calibrate_drift
        if calibration_store.needs_calibration(conn, key, n_docs, drift=drift):
            return True
        if key == LEXICAL_KEY:
            return False
        stored = (calibration_store.load_result(conn, key) or {}).get("query_words") or {}
        forced = self._forced_query_words()
        if forced is None:
            return bool(stored.get("set"))
        return stored.get("chosen", "all") != forced

    def _calibrate_one(self, embedder: Embedder | None, force: bool) -> dict[str, Any]:
        with self.db.connection() as conn:
            model = store.model_row(conn, embedder.fingerprint) if embedder else None
            key = embedder.fingerprint if (embedder and model) else LEXICAL_KEY
            n_docs = store.count_documents(conn)
            due = force or self._calibration_due(conn, key, n_docs)
            if not due:
                conn.commit()
                return {"status": "current", "model": key or None}
            from retriever.calibrate import calibrate

            conn.commit()  # a transaction of its own, not a savepoint: it exports a snapshot
            with conn.transaction():
                result = calibrate(
                    conn,
                    self._searcher,
                    embedder=embedder if model else None,
                    model=model,
                    bm25=self.bm25(),
                    absent_coverage=self.settings.absent_coverage,
                    absent_quantile=self.settings.absent_quantile,
                    spare=self.db.spare,
                    query_words=self._forced_query_words(),
                )
        return result

    def calibration(self) -> dict[str, Any] | None:
        """The stored calibration report for the model searches use now."""
        with self.db.connection() as conn:
            embedder = self.tiers.choose(lambda e: self._searcher.pending_vectors(conn, e)).embedder
            found = None
            if embedder is not None:
                found = calibration_store.load_result(conn, embedder.fingerprint)
            found = found or calibration_store.load_result(conn, LEXICAL_KEY)
            conn.commit()
        return found

    def status(self) -> Status:
        on_disk, changed, deleted = changed_files(self.db, self.settings)
        embedder, error = self.embedder()
        with self.db.connection() as conn:
            counts = conn.execute(
                "SELECT (SELECT count(*) FROM documents), (SELECT count(*) FROM chunks),"
                " (SELECT count(*) FROM passages)"
            ).fetchone()
            assert counts is not None
            if embedder is not None:
                model = store.model_row(conn, embedder.fingerprint)
            else:  # away: count against its last stored vectors
                model = store.model_row_of(conn, self.settings.embed_model)
            pending = store.count_pending(conn, model[0] if model else None)
            last = store.get_meta(conn, "last_index")
            models = [r[0] for r in conn.execute("SELECT fingerprint FROM models ORDER BY id")]
            tiers = self._tier_states(conn)
            behind = pipeline_behind(conn, int(counts[0]))
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
            calibration=calibration_store.summary(self.calibration()),
            vaults=self._indexed_vaults(),
            tiers=tiers,
            pipeline_behind=behind,
        )

    def _tier_states(self, conn: psycopg.Connection) -> list[dict[str, Any]]:
        """Every tier: state, last probe, and how many passages have its vector."""
        total = store.count_pending(conn, None)
        out = []
        for tier in self.tiers.tiers:
            embedder = tier.get()  # a first load, else what the last probe found
            info = tier.state()
            if embedder is not None:
                model = store.model_row(conn, embedder.fingerprint)
            else:  # away: its last stored vectors
                model = None if tier.off else store.model_row_of(conn, tier.model)
            pending = store.count_pending(conn, model[0]) if model else total
            info.update(passages=total, vectors=total - pending)
            out.append(info)
        return out

    def _indexed_vaults(self) -> list[dict[str, Any]]:
        """The vaults the embedded server holds (with DATABASE_URL: this one only)."""
        if self.settings.database_url:
            return []
        from retriever.db import indexed_vaults, start_embedded

        try:
            return indexed_vaults(start_embedded(self.settings.home))
        except psycopg.Error as exc:
            log.info("could not list the indexed vaults: %s", exc)
            return []

    def gc(self) -> dict[str, int]:
        loaded = [t.get(block=True) for t in self.tiers.tiers if not t.off]
        # Unless every configured tier's model answers, we cannot tell which vectors are
        # current: keep them all.
        known = bool(loaded) and all(e is not None for e in loaded)
        keep = [e.fingerprint for e in loaded if e is not None]
        with self.db.connection() as conn, conn.transaction():
            passages = store.gc_passages(conn)
            models = store.gc_embeddings(conn, keep) if known else 0
            calibrations = calibration_store.gc(conn) if known else 0
        return {
            "passages_removed": passages,
            "models_removed": models,
            "calibrations_removed": calibrations,
        }


def in_line(report: IndexReport) -> bool:
    """Whether a run left the index in line with the vault it saw: not stopped by another
    indexer, a changed pipeline it may not rebuild, a refusal, an error or an interruption
    (a vault watch trusts the index only then)."""
    stalled = LOCK_BUSY in report.warnings or PIPELINE_CHANGED in report.warnings
    return not (stalled or report.errors or report.refused or report.interrupted)


class AppPool:
    """The resident service's warm apps, one per distinct settings (most recent kept)."""

    def __init__(self, limit: int = 8) -> None:
        self._apps: dict[str, Retriever] = {}
        self._limit = limit
        self._lock = threading.Lock()

    def get(self, settings: Settings) -> Retriever:
        key = settings.model_dump_json()
        with self._lock:
            app = self._apps.pop(key, None)
            if app is None:
                app = Retriever(settings)
                app.shared = True
                app.long_lived = True
                app.warm_models()
            self._apps[key] = app  # most recently used last
            evicted = list(self._apps.values())[: -self._limit]
            for old in evicted:
                del self._apps[old.settings.model_dump_json()]
        for old in evicted:
            old.close(force=True)
        return app

    def vaults(self) -> list[str]:
        with self._lock:
            return sorted({str(a.settings.resolved_vault()) for a in self._apps.values()})

    def close_all(self) -> None:
        with self._lock:
            apps, self._apps = list(self._apps.values()), {}
        for app in apps:
            app.close(force=True)


_pool: AppPool | None = None


def use_pool(pool: AppPool | None) -> None:
    """The resident service installs its pool; every edge then gets warm apps from it."""
    global _pool
    _pool = pool


def open_app(settings: Settings) -> Retriever:
    """The app for ``settings``: warm from the service's pool, or a new one."""
    return _pool.get(settings) if _pool is not None else Retriever(settings)


def _joined(*parts: str | None) -> str | None:
    found = [p for p in parts if p]
    return "; ".join(found) if found else None


def _loader(tier: Tier, block: bool) -> Callable[[], tuple[Embedder | None, str | None]]:
    """Loads ``tier``'s model when an index run needs it (``block``: probe a tier that is
    down now, not in the background)."""

    def load() -> tuple[Embedder | None, str | None]:
        embedder = tier.get(block=block)
        return embedder, None if embedder is not None else tier.error

    return load
