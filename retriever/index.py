"""Incremental indexing: scan, prepare changed notes, write them atomically, embed.

Files are the truth. A run compares size and mtime_ns with the database, re-reads only
changed files, skips those whose bytes hash the same, replaces each note's rows in one
transaction, removes deleted files, garbage-collects orphan passages and embeds passages
that have no vector for the current model. Any interruption (Ctrl-C, kill -9) leaves a
state the next run converges from.

Big runs prepare notes in worker processes (forkserver): like any multiprocessing code,
a script that calls the library must guard its entry point with
``if __name__ == "__main__":`` (the ``retriever`` command does).
"""

from __future__ import annotations

import contextvars
import ctypes
import logging
import multiprocessing
import os
import signal
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

import psycopg

from retriever import store
from retriever.calibration_store import note_vault_change
from retriever.chunk import CHUNKER_VERSION, Link
from retriever.config import Settings
from retriever.db import INDEX_LOCK_KEY, Database, relation_exists
from retriever.embed import Embedder
from retriever.embed_pool import EncoderPool, workers_for
from retriever.encode import Encoded, Rows, encode_batch
from retriever.lexical import NORMALISER_VERSION
from retriever.lifeline import bind_to_owner, start_fork_server
from retriever.links import LinkResolver, lookups
from retriever.planner_stats import (
    NOTE_TABLES,
    analyze_vectors,
    flush_gin_pending,
    keep_statistics,
)
from retriever.prepare import (
    Kept,
    PreparedDoc,
    PrepareJob,
    PrepareResult,
    Unchanged,
    run_job,
    run_jobs,
)
from retriever.redact import REDACTOR_VERSION
from retriever.scan import FileInfo, ScanReport, decodable, rescan_paths, scan_vault
from retriever.tiers import unchanged_model

log = logging.getLogger(__name__)

PIPELINE_VERSION = f"c{CHUNKER_VERSION}-n{NORMALISER_VERSION}-r{REDACTOR_VERSION}"
WRITE_BATCH = 200  # notes per transaction in big runs (each note stays atomic)
# ... or fewer, once they hold this many chunks: a run of huge notes (tables of thousands of
# rows) held 100 MB in one batch, and the process keeps that memory for the rest of the run.
WRITE_BATCH_CHUNKS = 2000
PARALLEL_THRESHOLD = 300  # below this many changed files, workers cost more than they save
HNSW_THRESHOLD = 20_000  # exact cosine search is fast enough below this many vectors
# pgvector's default graph (m 16, ef_construction 64) gave recall@30 0.973-0.982 against
# exact search on win32-17k, build to build (the parallel build is not deterministic);
# ef_construction 128 gave 0.983-0.989 in seven builds out of eight (one, during a full
# index, 0.968), and faster queries, for about ten more seconds of build on 87k vectors.
# Same size (69 MiB).
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 128
# A first index of at least this many notes loads without secondary indexes and counts term
# frequencies once at the end (store.begin_bulk): far less work than row-by-row upkeep.
BULK_THRESHOLD = 1_000


@dataclass(slots=True)
class IndexReport:
    vault: str
    full: bool = False
    files_seen: int = 0
    files_changed: int = 0
    files_unchanged: int = 0
    files_touched: int = 0
    files_deleted: int = 0
    chunks_added: int = 0
    chunks_removed: int = 0
    passages_collected: int = 0
    passages_embedded: int = 0
    passages_pending: int = 0
    vectors_refused: int = 0
    links_resolved: int = 0
    links_unresolved: int = 0
    redactions: dict[str, int] = field(default_factory=dict)
    model: str | None = None
    embed_error: str | None = None
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    interrupted: bool = False
    seconds: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)  # seconds per stage
    calibration: dict[str, object] | None = None  # set when the run recalibrated
    refused: str | None = None  # why nothing was done (see wipe_refusal)
    # Every embedding tier's share of the run; the model/passages_*/embed_error fields
    # above are the primary tier's.
    tiers: list[TierReport] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(slots=True)
class TierJob:
    """One embedding tier to fill: its embedder, or why it has none this run."""

    tier: str
    embedder: Embedder | None
    error: str | None = None
    setting: str | None = None  # the configured model (counts its vectors while it is away)
    # Loads the embedder, (embedder, why not), when the run has something to embed; a
    # run whose passages all have vectors of the unchanged model never loads it.
    load: Callable[[], tuple[Embedder | None, str | None]] | None = None
    expected_dim: int | None = None  # RETRIEVER_EMBED_DIM for the primary tier
    current: bool = False  # its vectors were complete and its model unchanged: not loaded
    # A load started in the background once the run wrote passages the model must embed.
    loading: tuple[threading.Thread, list[tuple[Embedder | None, str | None]]] | None = None
    # Or, when those passages all had vectors: its stored model, (id, model, dimension).
    complete: tuple[int, str, int] | None = None

    def start_loading(self) -> None:
        """Load the embedder in a thread of its own (``loaded`` joins it). The thread runs
        in a copy of this context: the command's log memory (a reason said once) and, in
        the resident service, the request's environment. A daemon: a run stopped by
        Ctrl-C, which never joins it, does not wait for a model it will not use."""
        if self.load is None or self.embedder is not None or self.loading is not None:
            return
        load, result = self.load, []

        def run() -> None:
            try:
                result.append(load())
            except Exception as exc:  # said once, where the run asks for the embedder
                result.append((None, f"{type(exc).__name__}: {exc}"))

        context = contextvars.copy_context()
        thread = threading.Thread(target=context.run, args=(run,), name=f"load-{self.tier}")
        thread.daemon = True
        thread.start()
        self.loading = (thread, result)

    def loaded(self) -> tuple[Embedder | None, str | None]:
        """The embedder (or why there is none): the background load's, or loaded now."""
        assert self.load is not None
        if self.loading is None:
            return self.load()
        thread, result = self.loading
        thread.join()
        self.loading = None
        return result[0] if result else (None, "the model's load stopped")


@dataclass(slots=True)
class TierReport:
    tier: str
    model: str | None
    embedded: int = 0
    pending: int = 0
    refused: int = 0
    error: str | None = None
    seconds: float = 0.0


ProgressFn = Callable[[str, int, int], None]
LOCK_BUSY = "another indexer is running; skipped"
PIPELINE_CHANGED = "the indexing pipeline changed: run `retriever index`"
PIPELINE_BEHIND = "derived by another indexing pipeline: run `retriever index`"
LOCK_WAIT = "another indexer is running on this index: waiting for it to finish"


def pipeline_behind(conn: psycopg.Connection, n_indexed: int) -> bool:
    """Whether the ``n_indexed`` notes were derived by another indexing pipeline (chunker,
    normaliser, redactor) than this one, or by a run that never recorded its own: the next
    `retriever index` reads them all again, and until then the stored text is that
    pipeline's (a search never re-derives)."""
    return _rederive_due(store.get_meta(conn, "pipeline_version"), n_indexed)


def _rederive_due(stored_version: object, n_indexed: int) -> bool:
    return stored_version != PIPELINE_VERSION and n_indexed > 0


class _StopFlag:
    """Ctrl-C finishes the current batch, commits, and ends with a summary."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self._previous: object = None

    def __enter__(self) -> _StopFlag:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum: int, frame: object) -> None:
        if self.event.is_set():  # second Ctrl-C: give up at once
            raise KeyboardInterrupt
        log.warning("interrupted: finishing the current notes, then stopping")
        self.event.set()

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)  # type: ignore[arg-type]


JOBS_PER_TASK = 32  # notes per worker task: amortises pickling, keeps tasks short
TASKS_IN_FLIGHT = 8  # per worker: workers never wait while the parent writes a batch


def _prepared(jobs: list[PrepareJob]) -> Iterator[PrepareResult]:
    if len(jobs) < PARALLEL_THRESHOLD or (os.cpu_count() or 1) < 2:
        for job in jobs:
            yield run_job(job)
        return
    workers = min(os.cpu_count() or 2, 4)
    ctx = multiprocessing.get_context("forkserver")
    # Preload only our pure module: the default would re-import the caller's __main__,
    # which runs any unguarded script a second time inside the fork server.
    start_fork_server(["retriever.prepare", "retriever.lifeline"])
    tasks = [jobs[i : i + JOBS_PER_TASK] for i in range(0, len(jobs), JOBS_PER_TASK)]
    # Workers ignore Ctrl-C (we stop the pool) and exit when this process dies (kill -9).
    with ProcessPoolExecutor(
        workers, mp_context=ctx, initializer=bind_to_owner, initargs=(os.getpid(),)
    ) as pool:
        # A bounded window of tasks, not pool.map: map submits every note at once, and
        # prepared notes then pile up in the parent whenever writing lags behind parsing.
        window: deque[Future[list[PrepareResult]]] = deque()
        pending = iter(tasks)
        for task in islice(pending, workers * TASKS_IN_FLIGHT):
            window.append(pool.submit(run_jobs, task))
        while window:
            done = window.popleft().result()
            for task in islice(pending, 1):
                window.append(pool.submit(run_jobs, task))
            yield from done


WIPE_MIN_NOTES = 10  # losing fewer notes than this at once is never questioned
WIPE_SHARE = 0.5  # losing more than this share of the notes at once needs --force


RELEASE_AFTER_VECTORS = 5000  # an embedding pass this big frees its batches' pages


def release_memory() -> None:
    """Hand the heap's free pages back to the system (glibc only; elsewhere a no-op). A big
    run's parsed notes and rows are freed by then, but the allocator keeps their pages:
    the process would carry the write phase's peak into the embedding and calibration."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        pass


def wipe_refusal(vault: Path, indexed_vault: object, n_indexed: int, n_gone: int) -> str | None:
    """Why this run must not go ahead without --force, or None.

    The database is derived, but rebuilding a big index (and its vectors) costs minutes:
    another vault's index, or most notes gone at once (an unmounted disk, a moved vault,
    the wrong folder), is not replaced silently."""
    if not n_indexed:
        return None
    if isinstance(indexed_vault, str) and indexed_vault != str(vault):
        return (
            f"this index holds {indexed_vault} ({n_indexed} notes); indexing {vault} would "
            "replace it: give each vault its own RETRIEVER_HOME (or DATABASE_URL), or pass "
            "--force to replace it"
        )
    if n_gone > max(WIPE_MIN_NOTES, WIPE_SHARE * n_indexed):
        return (
            f"{n_gone} of {n_indexed} indexed notes are gone from {vault}; not removing "
            "them without --force (is the vault moved or unmounted?)"
        )
    return None


def index_vault(
    db: Database,
    settings: Settings,
    *,
    embedder: Embedder | None = None,
    embed_error: str | None = None,
    full: bool = False,
    progress: ProgressFn | None = None,
    stop: threading.Event | None = None,
    wait_for_lock: bool = True,
    allow_full: bool = True,
    embed_limit: int | None = None,
    force: bool = False,
    tiers: Sequence[TierJob] | None = None,
    scan: ScanReport | None = None,
    touched: Iterable[str] | None = None,
) -> IndexReport:
    """Bring the index in line with the vault. Returns what was done.

    ``tiers``: every embedding tier to fill, best first (default: ``embedder`` alone).

    Without ``force`` it refuses to replace another vault's index, or to drop most of the
    notes at once (an unmounted or moved vault looks empty): it says so in ``errors``.

    ``allow_full=False`` and ``embed_limit`` bound the work for the freshness pass that
    runs before a search: it never turns into a full rebuild or a long embedding backlog.
    ``scan``: a scan of the vault the caller has just taken (it is not walked again).
    ``touched``: the only paths that may have changed since the index was last in line
    (the vault watch names them): those are looked at, not the whole vault.
    """
    started = time.perf_counter()
    vault = settings.resolved_vault()
    report = IndexReport(vault=str(vault), full=full)
    with db.connection() as lock_conn:
        lock_conn.autocommit = True
        row = lock_conn.execute("SELECT pg_try_advisory_lock(%s)", (INDEX_LOCK_KEY,)).fetchone()
        if not row or not row[0]:
            if not wait_for_lock:
                lock_conn.autocommit = False
                report.warnings.append(LOCK_BUSY)
                return report
            log.warning(LOCK_WAIT)  # say why nothing happens for a while
            lock_conn.execute("SELECT pg_advisory_lock(%s)", (INDEX_LOCK_KEY,))
        try:
            with _StopFlag() as flag:
                halt = stop or flag.event
                if stop is not None:
                    flag.event = stop
                jobs = (
                    list(tiers)
                    if tiers is not None
                    else [TierJob("primary", embedder, embed_error)]
                )
                run = _Run(
                    db,
                    settings,
                    vault,
                    report,
                    jobs,
                    progress,
                    halt,
                    embed_limit,
                    scan=scan,
                    touched=frozenset(touched) if touched is not None else None,
                )
                _run(run, full, allow_full, force)
        finally:
            lock_conn.execute("SELECT pg_advisory_unlock(%s)", (INDEX_LOCK_KEY,))
            lock_conn.autocommit = False
    report.seconds = round(time.perf_counter() - started, 3)
    return report


@dataclass
class _Run:
    """One index run: what it works on, what it reports, and its phase clock."""

    db: Database
    settings: Settings
    vault: Path
    report: IndexReport
    tiers: list[TierJob]
    progress: ProgressFn | None
    halt: threading.Event
    embed_limit: int | None
    clock: float = field(default_factory=time.perf_counter)
    dropped: set[bytes] = field(default_factory=set)  # passages deleted chunks referred to
    full_gc: bool = False  # an earlier run wrote and died before its GC: collect everywhere
    scan: ScanReport | None = None  # the caller's scan of the vault, taken just before
    touched: frozenset[str] | None = None  # else, when set: the only paths that may differ
    # Notes a full re-derive could not reach (in folders it could not read): their stamps
    # are forgotten, so that they are derived again once they can be read.
    unreached: list[str] = field(default_factory=list)
    # A changed pipeline's re-derive is still due after this run (a bounded freshness pass
    # indexed only the notes that changed): the stored pipeline version stays the old one.
    rederive_due: bool = False

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        phases = self.report.phases
        phases[name] = round(phases.get(name, 0.0) + now - self.clock, 3)
        self.clock = now


@dataclass(frozen=True)
class _Plan:
    """What a run changes: notes to prepare, paths gone, and how to write them."""

    jobs: list[PrepareJob]
    deleted: list[str]
    structure_changed: bool  # notes added or removed: any link's target may move
    bulk: bool  # a first full load: indexes built once after it


def _run(run: _Run, full: bool, allow_full: bool = True, force: bool = False) -> None:
    plan = _plan(run, full, allow_full, force)
    if plan is None:
        return
    with run.db.connection() as conn:
        written = _apply(run, conn, plan)
        _record(run, conn, plan, written)
        _embed_into_report(run, conn, written)
    run.report.interrupted = run.halt.is_set()


def _plan(run: _Run, full: bool, allow_full: bool, force: bool) -> _Plan | None:
    """Compare the vault with the index; None when the run must not go on (said why)."""
    report, settings = run.report, run.settings
    with run.db.connection() as conn:
        version = store.get_meta(conn, "pipeline_version")
        last = store.get_meta(conn, "last_index")
        n_indexed = store.count_documents(conn)
        rebuild = _rederive_due(version, n_indexed)
        # A rebuild re-derives every note: from a walk, never from the index's own list.
        touched = None if full or rebuild or run.scan is not None else run.touched
        if touched is not None:  # only these may differ: the rest is as the index has it
            states, scan = _look_at(conn, settings, touched)
        else:
            states = store.load_stamps(conn)
            conn.commit()  # no transaction held open through the walk
            scan = run.scan or _scan(settings)
        changed, deleted = _compare(states, scan)
        known = store.known_hashes(
            conn, [f.path for f in changed] if n_indexed and not full else []
        )
        # A new pipeline re-derives every note but rewrites only those whose output moved
        # (--full rewrites them all, whatever the index holds).
        derived = store.derived_digests(conn) if rebuild and allow_full and not full else {}
        conn.commit()
    report.skipped = scan.skipped_too_large + scan.skipped_escaping_links + scan.skipped_bad_names
    for rel in scan.skipped_too_large:
        report.warnings.append(f"{rel}: skipped, over {settings.max_file_bytes} bytes")
    for rel in scan.skipped_bad_names:
        report.errors.append(f"{rel}: skipped, its name is not valid UTF-8 (rename it to index it)")
    for folder, why in scan.unreadable_dirs:
        report.errors.append(
            f"{folder or '.'}/: cannot read the folder ({why}); its indexed notes are kept as they were"
        )
    new = sum(1 for f in scan.files if f.path not in states)
    report.files_seen = len(scan.files) if touched is None else n_indexed - len(deleted) + new
    if rebuild and not allow_full:
        # Not here (a search's bounded pass): the notes that changed are indexed all the
        # same, or a search would never find a new note until someone runs the full index;
        # as many as a bounded pass takes (this walk is the whole vault's, not the watch's).
        report.warnings.append(PIPELINE_CHANGED)
        if len(changed) + len(deleted) > settings.fresh_max_files:
            return None
        run.rederive_due = True
    elif rebuild:
        full = report.full = True  # chunking/normalisation/redaction changed: re-derive all
        known = {}
    indexed_vault = last.get("vault") if isinstance(last, dict) else None
    refusal = None if force else wipe_refusal(run.vault, indexed_vault, n_indexed, len(deleted))
    if refusal:
        report.errors.append(refusal)
        report.refused = refusal
        return None
    if full and scan.unreadable_dirs:
        run.unreached = [p for p in states if scan.hides(p)]
    todo = [
        _job(run, f, known.get(f.path), derived.get(f.path), states.get(f.path))
        for f in (scan.files if full else changed)
    ]
    report.files_unchanged = report.files_seen - len(todo)
    added = any(j.path not in states for j in todo)
    return _Plan(
        todo, deleted, bool(deleted) or added, not n_indexed and len(todo) >= BULK_THRESHOLD
    )


def _job(
    run: _Run,
    found: FileInfo,
    known: bytes | None,
    derived: bytes | None = None,
    stamp: tuple[int, int] | None = None,
) -> PrepareJob:
    """The prepare job of one note; a known hash lets an untouched body skip re-chunking,
    a known digest (a re-derivation) lets an unchanged output skip its write."""
    chunking = (run.settings.chunk_min_chars, run.settings.chunk_max_chars)
    if derived is None:
        return PrepareJob(str(run.vault), found.path, *chunking, known)
    return PrepareJob(str(run.vault), found.path, *chunking, None, derived, stamp)


def _apply(run: _Run, conn: psycopg.Connection, plan: _Plan) -> list[str]:
    """Delete, prepare and write, resolve links; returns the paths written."""
    report = run.report
    if store.bulk_pending(conn):  # a bulk load died: its indexes and counts come back
        store.finish_bulk(conn)
    # A run that died after writing notes left this set: its links need resolving.
    died_writing = bool(store.get_meta(conn, "links_pending", False))
    resolve_all = plan.structure_changed or died_writing
    run.full_gc = died_writing or bool(store.get_meta(conn, "gc_pending", False))
    conn.commit()
    if plan.bulk:
        store.begin_bulk(conn)
    if plan.deleted:
        with conn.transaction():
            report.chunks_removed += store.delete_documents(conn, plan.deleted, run.dropped)
            store.set_meta(conn, "links_pending", True)
            store.set_meta(conn, "gc_pending", True)
        report.files_deleted = len(plan.deleted)
    run.lap("scan")
    written, aliases_changed, unread = _write_changes(
        conn, plan.jobs, report, run.progress, run.halt, plan.bulk, run.dropped
    )
    # A note this run could not read keeps its rows; a full or re-deriving run would leave
    # its stamp as the file's, so no later run would read it again (a chmod keeps mtime).
    run.unreached.extend(unread)
    run.lap("prepare_write")
    if written and not run.halt.is_set():
        _start_loads(conn, run.tiers)
    if plan.bulk:
        store.finish_bulk(conn)
        run.lap("bulk_indexes")
    if not run.halt.is_set() and (resolve_all or aliases_changed or written):
        # Renames, deletions and alias edits can change any link's target; an edit
        # alone only changes the edited notes' own links.
        _resolve_links(
            conn, report, None if resolve_all or aliases_changed else written, run.db.url
        )
    if plan.bulk:
        # Every lexicon and links row was updated once (counts, targets): rewrite both
        # without the dead versions, and give the planner statistics for the new data.
        store.compact(conn, ["links", "lexicon"])
        conn.execute("ANALYZE chunks, passages, documents")
        conn.commit()
    elif (written or plan.deleted) and not run.halt.is_set():
        changed = report.chunks_added + report.chunks_removed
        flush_gin_pending(conn)
        keep_statistics(conn, "chunks", changed, NOTE_TABLES)
    run.lap("links")
    if len(written) >= PARALLEL_THRESHOLD:  # a big run; a small one has little to hand back
        release_memory()
    return written


def _record(run: _Run, conn: psycopg.Connection, plan: _Plan, written: list[str]) -> None:
    """Drop orphaned passages and record the run (pipeline version, vault, drift)."""
    report = run.report
    with conn.transaction():
        if written or plan.deleted or run.full_gc:  # only then can a passage be orphaned
            # Only this run's dropped passages can be new orphans, unless an earlier run
            # wrote and died before its GC (gc_pending was set): then look at all.
            among = None if run.full_gc else run.dropped
            report.passages_collected = store.gc_passages(conn, among)
            store.set_meta(conn, "gc_pending", False)
        if not run.halt.is_set() and not run.rederive_due:
            store.set_meta(conn, "pipeline_version", PIPELINE_VERSION)
        if run.unreached:
            store.forget_stamps(conn, run.unreached)
        store.set_meta(conn, "last_index", {"at": time.time(), "vault": str(run.vault)})
        note_vault_change(conn, report.files_changed + report.files_deleted)
    conn.commit()
    run.lap("gc")


def _embed_into_report(run: _Run, conn: psycopg.Connection, written: list[str]) -> None:
    report, tiers = run.report, run.tiers
    report.tiers = _embed_tiers(
        conn, tiers, report, run.progress, run.halt, run.settings, run.embed_limit, written
    )
    primary = report.tiers[0]
    # The model that embedded this run (None when it could not load; the tier says
    # which model is configured).
    loaded = tiers and (tiers[0].embedder is not None or tiers[0].current)
    report.model = primary.model if loaded else None
    report.embed_error = primary.error
    report.passages_embedded, report.passages_pending = primary.embedded, primary.pending
    report.vectors_refused = primary.refused
    conn.commit()
    run.lap("embed")
    if report.passages_embedded >= RELEASE_AFTER_VECTORS:
        release_memory()


def _embed_tiers(
    conn: psycopg.Connection,
    tiers: list[TierJob],
    report: IndexReport,
    progress: ProgressFn | None,
    halt: threading.Event,
    settings: Settings,
    limit: int | None,
    written: Sequence[str] = (),
) -> list[TierReport]:
    """Fill every tier that has an embedder. The last tier (the cheap static one) goes
    first, so search has complete vectors within seconds while the primary fills.
    ``written``: the notes this run wrote (where new passages most likely are)."""
    out = {job.tier: _tier_report(job) for job in tiers}
    for job in reversed(tiers):
        tier, started = out[job.tier], time.perf_counter()
        if job.load is not None and not halt.is_set():
            _load_when_needed(conn, job, tier)
        if job.embedder is not None and not halt.is_set():
            tier.pending = _embed_pending(
                conn,
                job.embedder,
                tier,
                report,
                progress,
                halt,
                settings.embed_batch,
                limit,
                written,
            )
        elif not job.current:  # a current tier has nothing pending
            if job.embedder is not None:
                model = store.model_row(conn, job.embedder.fingerprint)
            else:  # away: count against its last stored vectors
                model = store.model_row_of(conn, job.setting) if job.setting else None
            tier.pending = store.count_pending(conn, model[0] if model else None)
        tier.seconds = round(time.perf_counter() - started, 3)
        conn.commit()
    return [out[job.tier] for job in tiers]


def _start_loads(conn: psycopg.Connection, tiers: Sequence[TierJob]) -> None:
    """Start loading each lazily given tier that the passages just written leave without
    vectors: its model loads (0.2-0.3 s for Model2Vec, most of it imports) while the run
    resolves links and collects orphans instead of after."""
    for job in tiers:
        if job.load is not None and job.embedder is None:
            job.complete = _current_model(conn, job)  # deletions and GC cannot undo it
            if job.complete is None:
                job.start_loading()
    conn.commit()


def _current_model(conn: psycopg.Connection, job: TierJob) -> tuple[int, str, int] | None:
    """The tier's unchanged stored model, (id, model, dimension), when it has a vector for
    every passage; None when its model must be loaded."""
    known = unchanged_model(conn, job.setting, job.expected_dim) if job.setting else None
    return known if known is not None and not store.count_pending(conn, known[0]) else None


def _load_when_needed(conn: psycopg.Connection, job: TierJob, tier: TierReport) -> None:
    """Load a lazily given tier's embedder unless its unchanged model has a vector for
    every passage (then the run counts its vectors against the stored model). What
    ``_start_loads`` found stands: a load it started, or a model it found complete."""
    assert job.load is not None
    known = job.complete or (None if job.loading is not None else _current_model(conn, job))
    if known is not None:
        conn.commit()
        job.current = True
        # An earlier run may have stopped before building the HNSW index (Ctrl-C, kill),
        # or an older version left the vectors without statistics: catalog lookups.
        analyze_vectors(conn, 0)
        _ensure_vector_index(conn, known[0], known[2])
        return
    conn.commit()
    job.embedder, job.error = job.loaded()
    tier.error = job.error
    if job.embedder is not None:
        tier.model = job.embedder.model_id


def _tier_report(job: TierJob) -> TierReport:
    """A tier's report before its run: the model it loaded (or the one configured)."""
    model = job.embedder.model_id if job.embedder else job.setting
    return TierReport(job.tier, model, error=job.error)


def _write_changes(
    conn: psycopg.Connection,
    jobs: list[PrepareJob],
    report: IndexReport,
    progress: ProgressFn | None,
    halt: threading.Event,
    bulk: bool = False,
    dropped: set[bytes] | None = None,
) -> tuple[list[str], bool, list[str]]:
    """Prepare and write changed notes; returns (paths written, whether aliases changed,
    paths that could not be read). The passages replaced chunks referred to join
    ``dropped``."""
    redactions: Counter[str] = Counter()
    batch: list[PreparedDoc] = []
    touched: list[tuple[str, int, int]] = []
    unread: list[str] = []
    done = 0
    chunks_held = 0

    written: list[str] = []
    aliases_changed = False

    def flush() -> None:
        nonlocal aliases_changed, chunks_held
        chunks_held = 0
        if not batch and not touched:
            return
        with conn.transaction():
            # Writers of this run are serialised by the advisory lock; async commit is safe
            # because files are the truth: a lost commit is simply re-indexed next run.
            conn.execute("SET LOCAL synchronous_commit = off")
            if not bulk:  # a bulk load replaces no note
                aliases_changed |= store.aliases_differ(conn, batch)
            added, removed = store.write_documents(conn, batch, bulk=bulk, dropped=dropped)
            written.extend(d.path for d in batch)
            store.touch_documents(conn, touched)
            if batch:
                store.set_meta(conn, "links_pending", True)
                store.set_meta(conn, "gc_pending", True)  # cleared by this run's GC
        report.chunks_added += added
        report.chunks_removed += removed
        report.files_changed += len(batch)
        report.files_touched += len(touched)
        batch.clear()
        touched.clear()

    for result in _prepared(jobs):
        done += 1
        if isinstance(result, PreparedDoc):
            batch.append(result)
            chunks_held += len(result.chunks)
            redactions.update(result.redactions)
            report.warnings.extend(result.warnings)
            for kind, count in result.redactions.items():
                log.warning("redacted %d %s credential(s) in %s", count, kind, result.path)
        elif isinstance(result, Unchanged):
            touched.append((result.path, result.size, result.mtime_ns))
        elif isinstance(result, Kept):
            report.files_unchanged += 1
        else:
            report.errors.append(f"{result.path}: cannot read ({result.reason})")
            unread.append(result.path)
        full = len(batch) >= WRITE_BATCH or chunks_held >= WRITE_BATCH_CHUNKS
        if full or len(touched) >= 5 * WRITE_BATCH:
            flush()
        if progress:
            progress("index", done, len(jobs))
        if halt.is_set():
            break
    flush()
    report.redactions = dict(sorted(redactions.items()))
    return written, aliases_changed, unread


@dataclass(frozen=True, slots=True)
class _Notes:
    """The indexed notes as link resolution needs them, and the stamp they were read at."""

    stamp: tuple[int, ...]
    resolver: LinkResolver
    paths: dict[int, str]  # id -> path
    ids: dict[str, int]  # path -> id


# Per database: the last run's resolver. An edit that adds, removes or renames no note
# reuses it (building one over 17,000 notes took longer than the rest of the run).
_RESOLVERS: dict[str, _Notes] = {}


def _notes(conn: psycopg.Connection, database: str) -> _Notes:
    stamp = store.notes_stamp(conn)  # a resolver built at the same stamp resolves alike
    cached = _RESOLVERS.get(database)
    if cached is not None and cached.stamp == stamp:
        return cached
    docs = conn.execute("SELECT id, path, aliases FROM documents").fetchall()
    resolver = LinkResolver([d[1] for d in docs], {d[1]: d[2] for d in docs if d[2]})
    notes = _Notes(stamp, resolver, {d[0]: d[1] for d in docs}, {d[1]: d[0] for d in docs})
    _RESOLVERS[database] = notes
    return notes


def warm_link_resolver(db: Database) -> None:
    """Build the link resolver an edit's run will ask for: a long-lived process does it in
    the background after an index run, so its first edit does not (on win32-17k 0.17 s of
    that edit's 0.33 s). Once one is held, nothing: each run checks it is current, and a
    run that changes the notes builds the next itself (no spare connection taken beside
    the searches that follow a freshness pass)."""
    if db.url in _RESOLVERS:
        return
    with db.spare() as conn:  # handed back rolled back
        if conn is not None:
            _notes(conn, db.url)


LINKS_QUERY = "SELECT ctid::text, doc_id, target, anchor, alias, kind, line, resolved FROM links"
# An edit of up to this many notes resolves its links against only the notes they can
# name (``_scoped_notes``); reading every note's path and aliases took 0.1-0.2 s of a
# one-note edit on win32-17k, in a process that had no resolver yet.
SCOPED_LINKS_NOTES = 100


def _resolve_links(
    conn: psycopg.Connection, report: IndexReport, only_paths: list[str] | None, database: str
) -> None:
    """Resolve links the way Obsidian does, against the current set of notes and aliases:
    every link, or only those of ``only_paths`` (notes whose text changed)."""
    # An edit in a process that never built the whole vault's resolver (a one-off command)
    # reads only the notes its links can name; a long-lived process rebuilds its stale
    # resolver once and keeps it for the edits that follow.
    few = only_paths is not None and len(only_paths) <= SCOPED_LINKS_NOTES
    scoped = _scoped_notes(conn, only_paths or []) if few and database not in _RESOLVERS else None
    updates: list[tuple[str, int | None]] = []
    resolved = unresolved = 0

    def resolve(rows: Iterable[tuple[Any, ...]]) -> None:
        nonlocal resolved, unresolved
        for row in rows:
            if _resolve_one(notes, row, updates):
                resolved += 1
            else:
                unresolved += 1

    if scoped is not None:
        notes, rows = scoped
        resolve(rows)
    else:
        notes = _notes(conn, database)
        query: str = LINKS_QUERY
        params: tuple[object, ...] = ()
        if only_paths is not None:
            query += " WHERE doc_id = ANY(%s)"
            params = ([notes.ids[p] for p in only_paths if p in notes.ids],)
        # Streamed from a server-side cursor: a vault's every link at once was the largest
        # thing a full index held in memory (87 MB of rows on win32-17k).
        with conn.cursor(name="links_to_resolve") as cursor:
            cursor.itersize = 5000
            cursor.execute(query, params)
            resolve(cursor)
    with conn.transaction():
        if updates:
            conn.execute(
                """
                UPDATE links l SET resolved = u.resolved
                FROM unnest(%s::text[], %s::int[]) AS u(ctid, resolved)
                WHERE l.ctid = u.ctid::tid
                """,
                ([u[0] for u in updates], [u[1] for u in updates]),
            )
        store.set_meta(conn, "links_pending", False)
    report.links_resolved = resolved
    report.links_unresolved = unresolved


def _scoped_notes(
    conn: psycopg.Connection, only_paths: list[str]
) -> tuple[_Notes, list[tuple[Any, ...]]] | None:
    """The links of ``only_paths`` and the notes they can resolve to: those whose path,
    name or alias matches a key ``links.lookups`` says resolving them may look up (plus
    the notes themselves). Keys are folded in Python (NFC, lower case); the database folds
    ASCII alike (COLLATE "C"), so a note with a non-ASCII path or alias (more bytes than
    characters in UTF-8) is always read and the resolver compares its keys itself. Aliases
    are stored stripped (``chunk._strings``), as the resolver strips them. None in a
    database not in UTF-8 (the whole vault's resolver then)."""
    if conn.info.parameter_status("server_encoding") != "UTF8":
        return None
    sources: dict[int, str] = dict(
        conn.execute("SELECT id, path FROM documents WHERE path = ANY(%s)", (only_paths,))
    )
    rows = conn.execute(LINKS_QUERY + " WHERE doc_id = ANY(%s)", (list(sources),)).fetchall()
    if not rows:  # nothing to resolve
        return _Notes((), LinkResolver([]), sources, {p: i for i, p in sources.items()}), rows
    paths, names, aliases = lookups(
        (Link(target=r[2], kind=r[5], line=r[6], anchor=r[3], alias=r[4]), sources[r[1]])
        for r in rows
    )
    docs = conn.execute(
        r"""
        SELECT id, path, aliases
        FROM (SELECT id, path, aliases, lower(path COLLATE "C") AS k FROM documents) AS d,
             LATERAL (SELECT CASE WHEN k LIKE '%%.md' THEN left(k, -3) ELSE k END AS stem) AS s
        WHERE id = ANY(%(sources)s) OR octet_length(path) <> char_length(path)
           OR k = ANY(%(paths)s) OR stem = ANY(%(paths)s)
           OR reverse(split_part(reverse(stem), '/', 1)) = ANY(%(names)s)  -- 13 rejects -1
           OR aliases <> '{}' AND EXISTS (
                SELECT 1 FROM unnest(aliases) AS a
                WHERE octet_length(a) <> char_length(a) OR lower(a COLLATE "C") = ANY(%(aliases)s))
        """,
        {
            "sources": list(sources),
            "paths": sorted(paths),
            "names": sorted(names),
            "aliases": sorted(aliases),
        },
    ).fetchall()
    resolver = LinkResolver([d[1] for d in docs], {d[1]: d[2] for d in docs if d[2]})
    ids = {d[1]: d[0] for d in docs}
    return _Notes((), resolver, {d[0]: d[1] for d in docs}, ids), rows


def _resolve_one(
    notes: _Notes, row: tuple[Any, ...], updates: list[tuple[str, int | None]]
) -> bool:
    """Resolve one links row; a target that moved joins ``updates``. True when it resolves."""
    ctid, doc_id, target, anchor, alias, kind, line, current = row
    link = Link(target=target, kind=kind, line=line, anchor=anchor, alias=alias)
    found = notes.resolver.resolve(link, notes.paths[doc_id])
    new = notes.ids.get(found) if found else None
    if new != current:
        updates.append((ctid, new))
    return new is not None


SCOPED_PENDING_MAX = 1000  # notes written: up to this, look for new passages among theirs


def _pending(conn: psycopg.Connection, model: int, written: Sequence[str]) -> list[bytes]:
    """Passages without a vector for ``model``. Most runs embed nothing, or only what the
    notes they wrote hold: two counts say so, and a lookup among those notes' passages is
    enough when it finds as many as the counts (it cannot find passages that are not
    pending). Else, or for a big run, one anti-join over every passage."""
    n = store.count_pending(conn, model)
    if not n:
        return []
    if 0 < len(written) <= SCOPED_PENDING_MAX:
        found = store.pending_hashes(conn, model, among_paths=written)
        if len(found) == n:
            return found
    return store.pending_hashes(conn, model)


def _embed_pending(
    conn: psycopg.Connection,
    embedder: Embedder,
    tier: TierReport,
    report: IndexReport,
    progress: ProgressFn | None,
    halt: threading.Event,
    batch_size: int,
    limit: int | None = None,
    written: Sequence[str] = (),
) -> int:
    """Embed passages that have no vector for this model (at most ``limit``); returns how
    many still lack one. Refused vectors and a failing embedder are noted in ``tier``."""
    with conn.transaction():
        model = store.ensure_model(
            conn, embedder.fingerprint, embedder.model_id, embedder.dimension
        )
        about = {"fingerprint": embedder.fingerprint, "model_id": embedder.model_id}
        store.set_meta(conn, "model", {**about, "dim": embedder.dimension})
    pending = _pending(conn, model, written)
    conn.commit()
    total = len(pending)
    if limit is not None:
        pending = pending[:limit]
    refused: list[bytes] = []
    done = 0
    for rows, found in _encoded(conn, embedder, pending, batch_size, halt):
        refused += found.refused
        report.warnings += found.warnings
        tier.error = tier.error or found.error
        if found.keys:  # what was embedded before any failure is kept
            with conn.transaction():
                conn.execute("SET LOCAL synchronous_commit = off")
                store.store_embeddings(conn, model, found.keys, found.vectors)
                store.note_vectors_stored(conn)
            tier.embedded += sum(1 for _, part in found.keys if part == 0)
        if tier.error:  # the embedder went away or broke: the rest stays pending
            break
        done += len(rows)
        if progress:
            progress("embed" if tier.tier == "primary" else f"embed-{tier.tier}", done, total)
        if halt.is_set():  # the batch in hand is stored; the rest stays pending
            break
    tier.refused = len(refused)
    if not halt.is_set():  # an interrupted run must end promptly, not start an index build
        analyze_vectors(conn, tier.embedded)
        _ensure_vector_index(conn, model, embedder.dimension)
    return total - tier.embedded


def _encoded(
    conn: psycopg.Connection,
    embedder: Embedder,
    pending: list[bytes],
    batch_size: int,
    halt: threading.Event,
) -> Iterator[tuple[Rows, Encoded]]:
    """Each batch of ``pending`` passages with its vectors, in order: encoded here, or in
    worker processes for a big run of a Model2Vec model (``embed_pool``)."""

    def batches() -> Iterator[Rows]:
        for start in range(0, len(pending), batch_size):
            if halt.is_set():
                return
            rows = store.passage_inputs(conn, pending[start : start + batch_size])
            conn.commit()
            if rows:
                yield rows

    workers = workers_for(embedder, len(pending))
    pool = None
    if workers:
        try:
            pool = EncoderPool(embedder, workers, encode_batch)
        except Exception as exc:  # no fork server, no process: encode here
            log.warning("encoding in this process: %s", exc)
    if pool is None:
        for rows in batches():
            yield rows, encode_batch(embedder, rows)
        return
    with pool:
        yield from pool.encoded(batches())


def _ensure_vector_index(conn: psycopg.Connection, model: int, dim: int) -> None:
    """HNSW index for this model once exact search would cost more than the index."""
    name = f"embeddings_hnsw_m{model}"
    if relation_exists(conn, name):  # a catalog lookup: no need to count the vectors
        conn.commit()
        return
    row = conn.execute(
        "SELECT count(*) FROM embeddings WHERE model = %s AND part = 0", (model,)
    ).fetchone()
    if not row or row[0] < HNSW_THRESHOLD:
        conn.commit()
        return
    log.info("building the HNSW index for %d vectors", row[0])
    conn.commit()  # so the block below is a real transaction (a savepoint keeps SET LOCAL)
    with conn.transaction():
        conn.execute("SET LOCAL maintenance_work_mem = '512MB'")  # not leaked to the pool
        conn.execute(
            f"CREATE INDEX IF NOT EXISTS {name} ON embeddings USING hnsw "
            f"((vec::halfvec({int(dim)})) halfvec_cosine_ops)"
            f" WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION})"
            f" WHERE model = {int(model)} AND part = 0"  # windows are rescored, not searched
        )


def changed_files(db: Database, settings: Settings) -> tuple[int, list[FileInfo], list[str]]:
    """(notes on disk, files whose size/mtime differ from the index, indexed paths gone)."""
    scan, changed, deleted = scan_changes(db, settings)
    return len(scan.files), changed, deleted


def scan_changes(db: Database, settings: Settings) -> tuple[ScanReport, list[FileInfo], list[str]]:
    """The vault's scan, the files whose size/mtime differ from the index, and the indexed
    paths gone from disk. An index run given this scan does not walk the vault again."""
    with db.connection() as conn:
        states = store.load_stamps(conn)
        conn.commit()
    scan = _scan(settings)
    return scan, *_compare(states, scan)


def touched_changes(
    db: Database, settings: Settings, touched: Collection[str]
) -> tuple[list[FileInfo], list[str]]:
    """``scan_changes`` when only ``touched`` (vault-relative paths, from the vault watch)
    may have changed: those paths' stamps and a look at those paths, nothing else."""
    with db.connection() as conn:
        states, scan = _look_at(conn, settings, touched)
        conn.commit()
    return _compare(states, scan)


def _look_at(
    conn: psycopg.Connection, settings: Settings, touched: Collection[str]
) -> tuple[dict[str, store.FileStamp], ScanReport]:
    """The index's stamps of the ``touched`` paths, and what a walk would find of them."""
    stored = [p for p in touched if decodable(p)]  # no index holds an undecodable path
    states = store.load_stamps(conn, stored) if stored else {}
    scan = rescan_paths(
        settings.resolved_vault(),
        states,
        touched,
        include=settings.include,
        exclude=settings.exclude,
        max_bytes=settings.max_file_bytes,
    )
    return states, scan


def compare_with_disk(
    states: Mapping[str, store.FileStamp], settings: Settings
) -> tuple[int, list[FileInfo], list[str]]:
    """The vault on disk against the indexed states (size and mtime per file)."""
    scan = _scan(settings)
    return len(scan.files), *_compare(states, scan)


def _compare(
    states: Mapping[str, store.FileStamp], scan: ScanReport
) -> tuple[list[FileInfo], list[str]]:
    """(files whose size or mtime differ from the index, indexed paths gone from disk)."""
    changed = [f for f in scan.files if _differs(states.get(f.path), f)]
    gone = set(states) - {f.path for f in scan.files}
    deleted = sorted(p for p in gone if not scan.hides(p))
    return changed, deleted


def _scan(settings: Settings) -> ScanReport:
    """A walk of the vault."""
    return scan_vault(
        settings.resolved_vault(),
        include=settings.include,
        exclude=settings.exclude,
        max_bytes=settings.max_file_bytes,
    )


def _differs(state: store.FileStamp | None, found: FileInfo) -> bool:
    return state != (found.size, found.mtime_ns)
