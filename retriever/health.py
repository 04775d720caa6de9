"""The checks behind ``retriever health``, the MCP ``health`` tool and the SessionStart hook.

Verdicts (and exit codes):

* ``healthy`` (0): database, schema, embedder and index are all in order: hybrid search.
* ``degraded`` (1): search works, but not fully: lexical only (embedder down, no vectors
  for the current model), vectors pending, notes changed since the last index run, or an
  empty index. Results may be incomplete and the report says why.
  When the database is unreachable but the vault is readable, search scans the files
  themselves (``files`` mode: keyword-only, slower): that is degraded too, not down.
* ``down`` (2): no search is possible: the database is unreachable and the vault
  unreadable, or the schema is missing or from another version.

Each check answers with ok/warn/fail, what it saw and what to do next. A component that
could not be checked is reported as failed, never silently left out, so that a dead
database can never pass for an empty vault. The checks are read-only (no migrations, no
indexing) and bounded by ``timeout``: a hung Ollama is reported after ``timeout``
seconds instead of stalling the caller.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from retriever.db import revision_of
from retriever.embed.base import InvalidVectorError, validate_vectors

if TYPE_CHECKING:
    import psycopg

    from retriever.app import Retriever
    from retriever.embed import Embedder
    from retriever.tiers import Tier

log = logging.getLogger(__name__)

Status = Literal["ok", "warn", "fail"]
Verdict = Literal["healthy", "degraded", "down"]
SearchMode = Literal["hybrid", "lexical", "files", "none"]
EXIT_CODES: dict[str, int] = {"healthy": 0, "degraded": 1, "down": 2}
# Common words, so that even a small-vocabulary static model gives a non-zero vector.
PROBE_TEXT = "retriever health probe: search the notes"
OPTIONAL_EXTENSION = "intarray"  # faster BM25 when present (migration 0004)
REQUIRED_EXTENSIONS = ("vector",)  # unaccent is installed but unused: folding is in Python


@dataclass(slots=True)
class Check:
    name: str
    status: Status
    detail: str
    hint: str | None = None
    # A failed critical check means no search at all (verdict "down").
    critical: bool = False
    ms: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "detail": self.detail,
            "hint": self.hint,
            "critical": self.critical,
            "ms": round(self.ms, 1),
        }


@dataclass(slots=True)
class HealthReport:
    checks: list[Check]
    search_mode: SearchMode
    seconds: float = 0.0
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def verdict(self) -> Verdict:
        if any(c.status == "fail" and c.critical for c in self.checks):
            return "degraded" if self.search_mode == "files" else "down"
        if any(c.status != "ok" for c in self.checks):
            return "degraded"
        return "healthy"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    @property
    def problems(self) -> list[Check]:
        order = {"fail": 0, "warn": 1, "ok": 2}
        return sorted((c for c in self.checks if c.status != "ok"), key=lambda c: order[c.status])

    def check(self, name: str) -> Check | None:
        return next((c for c in self.checks if c.name == name), None)

    def summary(self) -> str:
        """One paragraph: the verdict, the search mode and what is wrong."""
        mode = {
            "hybrid": "hybrid search (keywords + meaning)",
            "lexical": "keyword-only search (no semantic matching)",
            "files": "keyword-only search over the files themselves (no database)",
            "none": "no search possible",
        }[self.search_mode]
        text = f"retriever is {self.verdict}: {mode}."
        notes = self.facts.get("notes_indexed")
        if notes is not None and self.search_mode not in ("none", "files"):
            text += f" {notes} notes indexed."
        for c in self.problems:
            text += f" {c.name}: {c.detail}."
            if c.hint:
                text += f" ({c.hint})"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "ok": self.verdict == "healthy",
            "exit_code": self.exit_code,
            "search_mode": self.search_mode,
            "summary": self.summary(),
            "seconds": round(self.seconds, 3),
            "checks": [c.to_dict() for c in self.checks],
            **({"facts": self.facts} if self.facts else {}),
        }


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0].strip() if text else type(exc).__name__


class _Timer:
    def __init__(self) -> None:
        self.start = time.perf_counter()

    @property
    def ms(self) -> float:
        return (time.perf_counter() - self.start) * 1000


# --------------------------------------------------------------------------- embedder probe


@dataclass(slots=True)
class _Probe:
    embedder: Embedder | None = None
    error: str | None = None
    probe_error: str | None = None
    dim: int | None = None
    ms: float = 0.0
    done: threading.Event = field(default_factory=threading.Event)


def _start_probe(load: Callable[[], tuple[Embedder | None, str | None]]) -> _Probe:
    """Load an embedder and embed a probe text on a daemon thread.

    A daemon thread, not an executor: a hung Ollama must not keep the process alive
    after the report is printed.
    """
    probe = _Probe()

    def run() -> None:
        timer = _Timer()
        try:
            embedder, error = load()
            probe.embedder, probe.error = embedder, error
            if embedder is not None:
                probe.dim = int(embedder.dimension)
                validate_vectors(embedder.embed([PROBE_TEXT]), 1, probe.dim)
        except InvalidVectorError as exc:
            probe.probe_error = f"probe vector refused: {exc}"
        except Exception as exc:  # a crashing probe is a failed embedder, not a crash
            probe.probe_error = f"{type(exc).__name__}: {_first_line(exc)}"
        finally:
            probe.ms = timer.ms
            probe.done.set()

    threading.Thread(target=run, name="retriever-health-probe", daemon=True).start()
    return probe


def _embedder_check(app: Retriever, probe: _Probe, timeout: float) -> Check:
    model = app.settings.embed_model
    if not probe.done.wait(timeout):
        return Check(
            "embedder",
            "fail",
            f"{model} did not answer within {timeout:g} s",
            "check that the model server (Ollama) is running and not overloaded; "
            "search is keyword-only meanwhile",
            ms=timeout * 1000,
        )
    if probe.embedder is None:
        reason = probe.error or probe.probe_error or "unknown error"
        if model.strip().lower() in {"none", "off", "lexical"}:
            hint = "set RETRIEVER_EMBED_MODEL to a Model2Vec model or ollama:<model>"
        elif model.startswith("ollama:"):
            hint = f"start Ollama and run `ollama pull {model.removeprefix('ollama:')}`"
        else:
            hint = "set RETRIEVER_EMBED_MODEL to a Model2Vec model id or an existing folder"
        return Check(
            "embedder",
            "fail",
            f"unavailable: {reason}",
            hint + "; search is keyword-only",
            ms=probe.ms,
        )
    if probe.probe_error:
        # Loaded once but no longer answers sensibly: search must not use it.
        app.embedder_failed(f"health probe failed: {probe.probe_error}")
        return Check(
            "embedder",
            "fail",
            f"{probe.embedder.model_id} loaded but the probe failed: {probe.probe_error}",
            "restart the model server or choose another model; search is keyword-only",
            ms=probe.ms,
        )
    return Check(
        "embedder",
        "ok",
        f"{probe.embedder.model_id} answers (dimension {probe.dim}, {probe.ms:.0f} ms)",
        ms=probe.ms,
    )


# --------------------------------------------------------------------------- database


def database_url(app: Retriever) -> str:
    """The URL the app uses: an open pool's, else DATABASE_URL, else the embedded server."""
    from retriever.db import resolve_url

    pool = getattr(app, "_db", None)  # already open (MCP server, tests): same database
    if pool is not None:
        return str(pool.url)
    return resolve_url(app.settings.database_url, app.settings.home, app.settings.resolved_vault())


def _connect(app: Retriever, timeout: float) -> tuple[psycopg.Connection | None, Check, bool]:
    """The connection (None: no database) and its check, and whether a search would scan
    the files instead: not when a setting is wrong (RETRIEVER_HOME cannot hold the
    database): a search says so and fails."""
    import psycopg

    from retriever.db import describe_url
    from retriever.errors import InputError

    timer = _Timer()
    try:
        url = database_url(app)
    except Exception as exc:  # embedded server failed to start
        return None, _start_failed(exc, timer), not isinstance(exc, InputError)
    where = describe_url(url)
    try:
        conn = psycopg.connect(
            url,
            autocommit=True,
            # libpq counts whole seconds and treats 1 as 2
            connect_timeout=max(2, math.ceil(timeout)),
            application_name="retriever-health",
        )
        conn.execute(f"SET statement_timeout = {int(timeout * 1000)}")
        row = conn.execute("SHOW server_version").fetchone()
    except Exception as exc:
        return (
            None,
            Check(
                "database",
                "fail",
                f"cannot connect to {where}: {_first_line(exc)}",
                "start PostgreSQL or fix DATABASE_URL; until it answers, search scans the"
                " files (keyword-only, slower)",
                critical=True,
                ms=timer.ms,
            ),
            True,
        )
    version = row[0].split()[0] if row else "?"
    ok = Check(
        "database", "ok", f"{where} answers (PostgreSQL {version})", critical=True, ms=timer.ms
    )
    return conn, ok, True


def _start_failed(exc: BaseException, timer: _Timer) -> Check:
    return Check(
        "database",
        "fail",
        _first_line(exc),
        "check RETRIEVER_HOME is writable, or set DATABASE_URL to a running PostgreSQL",
        critical=True,
        ms=timer.ms,
    )


def _extensions_check(conn: psycopg.Connection) -> Check:
    timer = _Timer()
    rows = conn.execute(
        "SELECT extname, extversion FROM pg_extension WHERE extname = ANY(%s)"
        # intarray counts only where BM25 may use it (lexical._POSITION_SQL's test)
        " AND (extname <> %s OR has_schema_privilege(extnamespace, 'USAGE'))",
        ([*REQUIRED_EXTENSIONS, OPTIONAL_EXTENSION], OPTIONAL_EXTENSION),
    ).fetchall()
    have = {r[0]: r[1] for r in rows}
    missing = [e for e in REQUIRED_EXTENSIONS if e not in have]
    if missing:
        available = {
            r[0]
            for r in conn.execute(
                "SELECT name FROM pg_available_extensions WHERE name = ANY(%s)", (missing,)
            )
        }
        not_installed = [e for e in missing if e not in available]
        hint = "run `retriever db upgrade`"
        if not_installed:
            hint = (
                f"install {', '.join(not_installed)} on the server (pgvector image or "
                "postgresql-contrib), then run `retriever db upgrade`"
            )
        return Check(
            "extensions",
            "fail",
            f"missing: {', '.join(missing)}",
            hint,
            critical=True,
            ms=timer.ms,
        )
    detail = ", ".join(f"{name} {have[name]}" for name in REQUIRED_EXTENSIONS)
    if OPTIONAL_EXTENSION in have:
        detail += f", {OPTIONAL_EXTENSION} {have[OPTIONAL_EXTENSION]} (BM25 term lookups)"
    else:
        detail += (
            f"; {OPTIONAL_EXTENSION} not installed (or its schema not usable): BM25 uses "
            "array_position, about half as fast on common words (install "
            "postgresql-contrib, then `retriever db upgrade`)"
        )
    return Check("extensions", "ok", detail, critical=True, ms=timer.ms)


def _schema_check(conn: psycopg.Connection) -> Check:
    from retriever.migrate import head_revision

    timer = _Timer()
    head = head_revision()
    current = revision_of(conn)
    if current is None:
        return Check(
            "schema",
            "fail",
            "no retriever schema in this database",
            "run `retriever db upgrade` (or `retriever index`, which migrates first)",
            critical=True,
            ms=timer.ms,
        )
    if current != head:
        return Check(
            "schema",
            "fail",
            f"database schema is at revision {current}, this program expects {head}",
            "run `retriever db upgrade`; if the database is newer, upgrade retriever",
            critical=True,
            ms=timer.ms,
        )
    return Check("schema", "ok", f"migrations at head ({head})", critical=True, ms=timer.ms)


# --------------------------------------------------------------------------- index


def _age(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min ago"
    if seconds < 172800:
        return f"{seconds / 3600:.0f} h ago"
    return f"{seconds / 86400:.0f} days ago"


def _model_check(
    conn: psycopg.Connection, embedder: Embedder | None, facts: dict[str, Any]
) -> tuple[Check, int | None]:
    """Do the stored vectors belong to the configured model? Returns the model row id."""
    timer = _Timer()
    models = conn.execute(
        "SELECT id, fingerprint, model_id, dim FROM models ORDER BY id"
    ).fetchall()
    passages_row = conn.execute("SELECT count(*) FROM passages").fetchone()
    passages = int(passages_row[0]) if passages_row else 0
    facts["passages"] = passages
    stored = ", ".join(f"{m[2]} (dim {m[3]})" for m in models) or "none"
    if embedder is None:
        return Check(
            "model",
            "warn",
            f"not compared (no embedder); stored vectors: {stored}",
            "fix the embedder first",
            ms=timer.ms,
        ), None
    current = next((m for m in models if m[1] == embedder.fingerprint), None)
    if current is None:
        if passages == 0:
            return Check("model", "ok", "no passages to embed yet", ms=timer.ms), None
        other = f"; stored vectors belong to {stored}" if models else ""
        return Check(
            "model",
            "warn",
            f"no vectors for the configured model {embedder.model_id}{other}",
            "run `retriever index` to embed with the configured model "
            "(search is keyword-only until then)",
            ms=timer.ms,
        ), None
    if int(current[3]) != embedder.dimension:
        return Check(
            "model",
            "fail",
            f"stored dimension {current[3]} differs from the model's {embedder.dimension}",
            "run `retriever gc` then `retriever index` to re-embed",
            ms=timer.ms,
        ), None
    extra = f" (also stored: {len(models) - 1} other model(s), see `retriever gc`)"
    return Check(
        "model",
        "ok",
        f"stored vectors match {embedder.model_id}" + (extra if len(models) > 1 else ""),
        ms=timer.ms,
    ), int(current[0])


def _coverage_check(
    app: Retriever,
    conn: psycopg.Connection,
    model_row: int | None,
    vault_ok: bool,
    facts: dict[str, Any],
) -> Check:
    """N of M notes indexed, files changed since the last run, passages pending vectors.

    The same comparison as ``retriever status`` (size + mtime per file), on the
    health check's own connection.
    """
    from retriever import store
    from retriever.index import compare_with_disk, pipeline_behind

    timer = _Timer()
    states = store.load_stamps(conn)
    last = store.get_meta(conn, "last_index")
    problems: list[str] = []
    hints: list[str] = []
    if vault_ok:
        on_disk, changed_files, deleted_paths = compare_with_disk(states, app.settings)
        changed, deleted = len(changed_files), len(deleted_paths)
        detail = f"{on_disk - changed} of {on_disk} notes indexed"
        facts.update(notes_on_disk=on_disk, notes_changed=changed, notes_deleted=deleted)
        if not on_disk:
            problems.append("the vault has no markdown notes")
            hints.append("check RETRIEVER_VAULT points at your notes")
        elif not states:
            problems.append("nothing is indexed yet")
            hints.append("run `retriever index`")
        elif changed or deleted:
            problems.append(f"{changed} changed and {deleted} deleted since the last index run")
            hints.append("run `retriever index` (results may be out of date)")
    else:
        detail = f"{len(states)} notes indexed (vault folder not readable)"
    facts["notes_indexed"] = len(states)
    facts["pipeline_behind"] = pipeline_behind(conn, len(states))
    if facts["pipeline_behind"]:
        problems.append("the notes were derived by another indexing pipeline")
        hints.append(
            "run `retriever index` (it reads every note again and rewrites those whose"
            " stored form moved: a new redactor's redactions reach the stored text)"
        )
    if isinstance(last, dict) and isinstance(last.get("at"), int | float):
        facts["last_index_at"] = last["at"]
        detail += f", last run {_age(max(0.0, time.time() - float(last['at'])))}"
    if model_row is not None:
        pending = store.count_pending(conn, model_row)
        facts["passages_pending"] = pending
        detail += f", {pending} passages pending vectors"
        if pending:
            problems.append(f"{pending} passages have no vector yet")
            hints.append("run `retriever index` to embed them (they are found by keywords only)")
    status: Status = "warn" if problems else "ok"
    if problems:
        detail += " — " + "; ".join(problems)
    return Check("index", status, detail, "; ".join(dict.fromkeys(hints)) or None, ms=timer.ms)


# --------------------------------------------------------------------------- tiers


def _tier_probes(app: Retriever, retry: bool) -> dict[str, _Probe]:
    """One probe per tier; the primary's is the embedder check's."""
    probes = {app.tiers.primary.name: _start_probe(lambda: app.embedder(retry=retry))}
    for tier in app.tiers.tiers[1:]:

        def load(tier: Tier = tier) -> tuple[Embedder | None, str | None]:
            if retry:
                tier.probe(force=True)
            embedder = tier.get(block=True)
            return embedder, tier.error

        probes[tier.name] = _start_probe(load)
    return probes


def _tiers_check(
    app: Retriever,
    conn: psycopg.Connection,
    probes: dict[str, _Probe],
    timeout: float,
    facts: dict[str, Any],
) -> tuple[Check, bool]:
    """Every tier: up or down, its share of the passages' vectors, its last probe. Also
    whether search has a tier with vectors (hybrid) at all."""
    from retriever import store

    timer = _Timer()
    total = store.count_pending(conn, None)
    rows: list[dict[str, Any]] = []
    serving: str | None = None
    for tier in app.tiers.tiers:
        probe = probes.get(tier.name)
        answered = probe is not None and probe.done.wait(max(0.05, timeout - timer.ms / 1000))
        info = tier.state()
        up = answered and probe is not None and probe.embedder is not None and not probe.probe_error
        vectors = None
        if up and probe is not None and probe.embedder is not None:
            model = store.model_row(conn, probe.embedder.fingerprint)
            vectors = total - store.count_pending(conn, model[0]) if model else 0
        info.update(
            state="off" if tier.off else ("up" if up else "down"),
            passages=total,
            vectors=vectors,
            error=None if up else (info["error"] or (probe.probe_error if probe else None)),
        )
        if not answered and not tier.off:
            info["error"] = f"no answer within {timeout:g} s"
        rows.append(info)
        if serving is None and up and total and vectors == total:
            serving = tier.name
    partial = next((r["tier"] for r in rows if r["state"] == "up" and r["vectors"]), None)
    if not total:  # nothing to embed yet: any tier that is up will search
        partial = next((r["tier"] for r in rows if r["state"] == "up"), None)
    facts["tiers"] = rows
    facts["tier_serving"] = serving or partial
    detail = "; ".join(_tier_line(r) for r in rows)
    first = next((r["tier"] for r in rows if r["state"] != "off"), None)
    if len(rows) == 1 or (serving is not None and serving == first):
        return Check("tiers", "ok", detail, ms=timer.ms), bool(serving or partial)
    if serving or partial:
        return Check(
            "tiers",
            "warn",
            f"search answers from the {serving or partial} tier: {detail}",
            "start the primary model server (or let the indexer finish embedding); search "
            "returns to it by itself",
            ms=timer.ms,
        ), True
    return Check(
        "tiers",
        "fail",
        f"no tier has vectors to search with: {detail}",
        "run `retriever index` once a model is available; search is keyword-only",
        ms=timer.ms,
    ), False


def _tier_line(row: dict[str, Any]) -> str:
    from retriever.tiers import display_name

    text = f"{row['tier']} {display_name(row['model'])}: {row['state']}"
    if row["vectors"] is not None:
        text += f", {row['vectors']}/{row['passages']} vectors"
    if row["state"] == "down" and row.get("error"):
        text += f" ({_first_line(Exception(row['error']))})"
    if row.get("last_probe"):
        text += f", probed {time.strftime('%H:%M:%S', time.localtime(row['last_probe']))}"
    return text


LANGUAGE_SAMPLE = 400  # passages read to guess the vault's language
LANGUAGE_MAJORITY = 0.5


def _language_check(app: Retriever, conn: psycopg.Connection, facts: dict[str, Any]) -> Check:
    """Warn when most of the vault is in a language a configured model does not read
    (known models only: see retriever.languages)."""
    from retriever import languages
    from retriever.passage_text import unpack

    timer = _Timer()
    rows = conn.execute(
        "SELECT ztext FROM passages ORDER BY hash LIMIT %s", (LANGUAGE_SAMPLE,)
    ).fetchall()
    lang, share, counted = languages.dominant(unpack(r[0]) for r in rows)
    if lang is None or share < LANGUAGE_MAJORITY:
        return Check("language", "ok", "no dominant language detected", ms=timer.ms)
    name = languages.NAMES[lang]
    facts["vault_language"] = {"language": lang, "share": round(share, 3), "passages": counted}
    settings = {"primary": "RETRIEVER_EMBED_MODEL", "fallback": "RETRIEVER_FALLBACK_MODEL"}
    blind = [
        t
        for t in app.tiers.tiers
        if not t.off and languages.covers(languages.model_languages(t.model), lang) is False
    ]
    detail = f"{share:.0%} of sampled passages are in {name}"
    if not blind:
        return Check("language", "ok", detail, ms=timer.ms)
    which = ", ".join(f"{t.label} ({settings.get(t.name, t.name)})" for t in blind)
    return Check(
        "language",
        "warn",
        f"{detail}; {which} only read{'s' if len(blind) == 1 else ''} English",
        f"set {' and '.join(settings.get(t.name, t.name) for t in blind)} to a multilingual "
        "model (e.g. ollama:bge-m3:567m, or minishlab/potion-multilingual-128M for Model2Vec)",
        ms=timer.ms,
    )


# --------------------------------------------------------------------------- entry point


def _ranking_check(
    conn: psycopg.Connection, embedder: Embedder | None, facts: dict[str, Any]
) -> Check:
    """Which ranking searches use: calibrated for this vault and model, or the defaults.
    Never a problem by itself (the defaults work); the hint says how to calibrate."""
    from retriever.calibration_store import LEXICAL_KEY, load_result, summary

    timer = _Timer()
    found = load_result(conn, embedder.fingerprint) if embedder is not None else None
    found = found or load_result(conn, LEXICAL_KEY)
    facts["calibration"] = info = summary(found)
    if info["state"] != "calibrated":
        return Check(
            "ranking",
            "ok",
            f"default ranking ({info['reason']})",
            "run `retriever calibrate` once the vault has 30 notes or more",
            ms=timer.ms,
        )
    rates = info.get("absence_report") or {}
    chosen = not str(info.get("ranking_source") or "").startswith("default")
    what = (
        "calibrated" if chosen else "default ranking (too few pseudo-queries), absence calibrated"
    )
    detail = (
        f"{what} {str(info['created_at'])[:10]}: {info['ranking']}, "
        f"pseudo-query nDCG@10 {info['ndcg_report']:.3f}"
    )
    if rates:
        detail += (
            f"; absence flags {rates['absent_flagged']:.0%} of left-out,"
            f" {rates['answerable_flagged']:.0%} of answerable pseudo-queries"
        )
    stale = embedder is not None and info.get("model") is None
    hint = "the current model has no calibration yet: run `retriever calibrate`" if stale else None
    return Check("ranking", "ok", detail, hint, ms=timer.ms)


def _safely(name: str, fn: Callable[[], Check], *, critical: bool = False) -> Check:
    try:
        return fn()
    except Exception as exc:  # one broken check must not hide the others
        log.debug("health check %s crashed", name, exc_info=True)
        return Check(
            name,
            "fail",
            f"check failed: {type(exc).__name__}: {_first_line(exc)}",
            critical=critical,
        )


def run_health(
    app: Retriever, *, timeout: float = 3.0, retry_embedder: bool = False
) -> HealthReport:
    """Run every check; ``timeout`` bounds the database connection and the embedder probe."""
    started = time.perf_counter()

    def remaining() -> float:
        return max(0.1, timeout - (time.perf_counter() - started))

    facts: dict[str, Any] = {}
    # The embedders load while the database is checked: they are independent.
    probes = _tier_probes(app, retry_embedder)
    probe = probes[app.tiers.primary.name]
    checks = [_vault_check(app)]
    vault_ok = checks[0].status == "ok"
    conn, db_check, files_ok = _connect(app, timeout)
    checks.append(db_check)
    has_vectors = False
    try:
        schema_checks, schema_ok = _schema_checks(conn)
        checks += schema_checks
        emb_check = _embedder_check(app, probe, remaining())
        checks.append(emb_check)
        embedder = probe.embedder if emb_check.status == "ok" else None
        if conn is not None and schema_ok:
            index_checks, has_vectors = _index_checks(
                app, conn, probes, embedder, remaining(), vault_ok, facts
            )
            checks += index_checks
        else:
            why = "the database is unreachable" if conn is None else "the schema is not usable"
            checks += [Check(name, "fail", f"not checked: {why}") for name in ("model", "index")]
    finally:
        if conn is not None:
            conn.close()
    report = HealthReport(checks=checks, search_mode="hybrid", facts=facts)
    report.search_mode = _search_mode(report, conn is not None, vault_ok and files_ok, has_vectors)
    report.seconds = time.perf_counter() - started
    return report


def _vault_check(app: Retriever) -> Check:
    vault = app.settings.resolved_vault()
    if vault.is_dir():
        return Check("vault", "ok", f"{vault} is readable")
    return Check(
        "vault",
        "fail",
        f"vault folder not found: {vault}",
        "set RETRIEVER_VAULT or pass --vault; search still serves the existing index",
    )


def _schema_checks(conn: psycopg.Connection | None) -> tuple[list[Check], bool]:
    """The extensions and schema checks, and whether both passed."""
    if conn is None:
        why = "not checked: the database is unreachable"
        return [Check(name, "fail", why, critical=True) for name in ("extensions", "schema")], False
    ext = _safely("extensions", lambda: _extensions_check(conn), critical=True)
    schema = _safely("schema", lambda: _schema_check(conn), critical=True)
    return [ext, schema], ext.status == "ok" and schema.status == "ok"


def _index_checks(
    app: Retriever,
    conn: psycopg.Connection,
    probes: dict[str, _Probe],
    embedder: Embedder | None,
    timeout: float,
    vault_ok: bool,
    facts: dict[str, Any],
) -> tuple[list[Check], bool]:
    """Tiers, model, index coverage, ranking and language; and whether vectors exist."""
    tiers, has_vectors = _tiers_check(app, conn, probes, timeout, facts)
    model_id: list[int | None] = [None]

    def model() -> Check:
        check, model_id[0] = _model_check(conn, embedder, facts)
        return check

    checks = [tiers, _safely("model", model)]
    checks.append(
        _safely("index", lambda: _coverage_check(app, conn, model_id[0], vault_ok, facts))
    )
    checks.append(_safely("ranking", lambda: _ranking_check(conn, embedder, facts)))
    checks.append(_safely("language", lambda: _language_check(app, conn, facts)))
    return checks, has_vectors


def _search_mode(
    report: HealthReport, db_up: bool, vault_ok: bool, has_vectors: bool
) -> SearchMode:
    """What a search would do now: hybrid, lexical, files (no database) or none."""
    if not db_up and vault_ok:
        return "files"  # the search path without a database
    if report.verdict == "down":
        return "none"
    return "hybrid" if has_vectors else "lexical"
