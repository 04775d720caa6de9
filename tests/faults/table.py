"""The table `make faults` prints: one row per fault, whatever tests injected it.

Tests call :func:`record` once per injection; the session prints the rows at the end
(tests/conftest.py's ``pytest_terminal_summary``) and writes them to
``RETRIEVER_FAULTS_TABLE`` when that is set.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class FaultRow:
    fault: str
    runs: int = 0
    converged: int = 0
    lost: int = 0
    wrong: int = 0
    recovery: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


ROWS: dict[str, FaultRow] = {}


def record(
    fault: str,
    *,
    converged: bool,
    lost: int = 0,
    wrong: int = 0,
    recovery_s: float | None = None,
    note: str = "",
) -> None:
    """One injection of ``fault``: did the index converge, notes lost or duplicated, wrong
    answers given meanwhile, seconds until the component answered correctly again."""
    row = ROWS.setdefault(fault, FaultRow(fault))
    row.runs += 1
    row.converged += int(converged)
    row.lost += lost
    row.wrong += wrong
    if recovery_s is not None:
        row.recovery.append(recovery_s)
    if note and note not in row.notes:
        row.notes.append(note)


def render() -> str:
    head = ("fault", "runs", "converged", "lost", "wrong answers", "recovery s (median/max)")
    lines = [head]
    for row in ROWS.values():
        rec = (
            f"{statistics.median(row.recovery):.2f} / {max(row.recovery):.2f}"
            if row.recovery
            else "-"
        )
        name = row.fault + (f" ({'; '.join(row.notes)})" if row.notes else "")
        lines.append(
            (name, str(row.runs), f"{row.converged}/{row.runs}", str(row.lost), str(row.wrong), rec)
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    out = []
    for n, line in enumerate(lines):
        out.append(" | ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip())
        if n == 0:
            out.append("-+-".join("-" * w for w in widths))
    return "\n".join(out)


def write_out() -> None:
    target = os.environ.get("RETRIEVER_FAULTS_TABLE")
    if target and ROWS:
        Path(target).write_text(render() + "\n", encoding="utf-8")
