"""How a health report is shown: one line per check for people, JSON for programs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TextIO

from retriever.health import HealthReport, run_health

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
