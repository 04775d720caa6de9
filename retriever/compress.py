"""Focused extracts of long tool output: pure Python, no database, no model.

``compress(text, task)`` splits the output into passages (log records, paragraphs with their
indented continuation lines, JSON items), scores them against the task with the same
normaliser and a BM25 weighting as search, and keeps the best within a token budget, in
original order, each line under its line number. Lines that look like errors are always
kept first; runs of similar lines collapse into one line and a count. The last line says
what was dropped. The output depends only on the input: same text and task, same bytes.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from retriever.budget import estimate_tokens
from retriever.lexical import idf, query_terms, tokenize

DEFAULT_BUDGET = 800
MAX_INPUT_CHARS = 4_000_000  # bounded work on pathological output
MAX_LINE_CHARS = 400
MAX_RECORD_LINES = 12
SHORT_BLOCK = 6  # blocks up to this many lines stay whole
COMMON_SHARE = 0.5  # terms in more lines than this share do not discriminate
MAX_RUN_SHOWN = 4  # matching lines shown inside a collapsed run
MIN_RUN = 3
SIMILARITY = 0.5  # word-set Jaccard for "similar" lines
REST_SHARE = 0.25  # a non-error passage must score at least this share of the best
K1, B = 1.2, 0.75

# Error-looking lines, kept whatever the task: keywords (not flags like -Wno-error), exception
# class names, pytest's "E   " detail lines and Go/Rust panics.
_ERROR_WORD = re.compile(
    r"(?<![\w-])(?:errors?|fail(?:ed|ure|ures|s)?|fatal|panic(?:ked)?|exception|traceback|"
    r"assert(?:ion)?|segmentation fault|abort(?:ed)?|critical)(?![\w-])",
    re.IGNORECASE,
)
_ERROR_CLASS = re.compile(r"\b[A-Z]\w*(?:Error|Exception|Failure)\b|^E\s{2,}\S|^FAIL\b")
_SHAPE_WORD = re.compile(r"[^\W\d_]+|\d+")
_CONTINUES = re.compile(r"^(?:\s+\S|\s*\.\.\.\s|Caused by|During handling|The above exception)")


def is_error_line(line: str) -> bool:
    return bool(_ERROR_WORD.search(line) or _ERROR_CLASS.search(line))


@dataclass(slots=True)
class Unit:
    """A passage: consecutive lines kept or dropped together (or a run of similar lines)."""

    rows: list[int]  # indexes into the line list
    run: bool = False  # a collapsed run of similar single lines
    error: bool = False
    score: float = 0.0
    line_scores: dict[int, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Extract:
    text: str
    kept_lines: int
    total_lines: int
    tokens_before: int
    tokens_after: int


# --------------------------------------------------------------------------- splitting


def _json_lines(text: str) -> tuple[list[str], list[str]] | None:
    """JSON output as one compact line per item, labelled by its path (``data[3]``)."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{":
        return None
    try:
        data = json.loads(stripped)
    except ValueError:
        return None
    lines: list[str] = []
    labels: list[str] = []

    def add(label: str, value: object) -> None:
        labels.append(label)
        lines.append(json.dumps(value, ensure_ascii=False, separators=(",", ":")))

    if isinstance(data, list):
        for i, item in enumerate(data):
            add(f"[{i}]", item)
    elif isinstance(data, dict):
        for key, value in data.items():
            if isinstance(value, list) and len(value) > 1:
                for i, item in enumerate(value):
                    add(f"{key}[{i}]", item)
            else:
                add(str(key), value)
    else:
        return None
    return lines, labels


def split_lines(text: str) -> tuple[list[str], list[str], bool]:
    """(lines, labels, is_json): labels are 1-based line numbers, or JSON item paths."""
    found = _json_lines(text)
    if found is not None:
        return found[0], found[1], True
    lines = text.splitlines()
    return lines, [str(i) for i in range(1, len(lines) + 1)], False


def _blocks(lines: Sequence[str]) -> list[list[int]]:
    """Maximal runs of non-blank lines; an indented block joins the one before it (a git
    commit's message, a traceback after a blank line)."""
    blocks: list[list[int]] = []
    current: list[int] = []
    for i, line in enumerate(lines):
        if line.strip():
            current.append(i)
            continue
        if current:
            blocks.append(current)
            current = []
    if current:
        blocks.append(current)
    merged: list[list[int]] = []
    for block in blocks:
        indented = lines[block[0]][:1].isspace()
        if merged and indented and len(merged[-1]) + len(block) <= MAX_RECORD_LINES:
            merged[-1].extend(block)
        else:
            merged.append(block)
    return merged


def group_records(lines: Sequence[str]) -> list[list[int]]:
    """Passages: a short block (a paragraph, a git commit, a test's failure detail) whole;
    in a long block, each line with its indented continuation lines (at most
    MAX_RECORD_LINES)."""
    records: list[list[int]] = []
    for block in _blocks(lines):
        if len(block) <= SHORT_BLOCK:
            records.append(block)
            continue
        current: list[int] = []
        for i in block:
            if current and _CONTINUES.match(lines[i]) and len(current) < MAX_RECORD_LINES:
                current.append(i)
                continue
            if current:
                records.append(current)
            current = [i]
        records.append(current)
    return records


def _shape(line: str) -> frozenset[str]:
    return frozenset("0" if w.isdigit() else w.lower() for w in _SHAPE_WORD.findall(line))


def _similar(a: frozenset[str], b: frozenset[str]) -> bool:
    if not a or not b:
        return a == b
    return len(a & b) / len(a | b) >= SIMILARITY


def collapse_runs(lines: Sequence[str], records: list[list[int]]) -> list[Unit]:
    """Runs of at least MIN_RUN similar single-line records (same error-ness) become one unit."""
    units: list[Unit] = []
    pending: list[list[int]] = []
    first_shape: frozenset[str] = frozenset()

    def flush() -> None:
        if len(pending) >= MIN_RUN:
            rows = [r[0] for r in pending]
            units.append(Unit(rows, run=True, error=is_error_line(lines[rows[0]])))
        else:
            units.extend(Unit(r, error=any(is_error_line(lines[i]) for i in r)) for r in pending)
        pending.clear()

    for record in records:
        if len(record) > 1:
            flush()
            units.append(Unit(record, error=any(is_error_line(lines[i]) for i in record)))
            continue
        shape = _shape(lines[record[0]])
        same_kind = pending and is_error_line(lines[pending[0][0]]) == is_error_line(
            lines[record[0]]
        )
        if pending and same_kind and _similar(first_shape, shape):
            pending.append(record)
            continue
        flush()
        pending.append(record)
        first_shape = shape
    flush()
    return units


# --------------------------------------------------------------------------- scoring


def task_terms(task: str, context: str = "") -> Counter[str]:
    """Query weights: the task (the user's request) counts double the tool input."""
    terms: Counter[str] = Counter()
    for term, n in query_terms(task).items():
        terms[term] += 2 * n
    for term, n in query_terms(context).items():
        terms[term] += n
    return terms


def score_lines(lines: Sequence[str], terms: Counter[str]) -> dict[int, float]:
    """BM25 of every line that holds a query term (lines are the documents)."""
    if not terms:
        return {}
    tokens = [tokenize(line[:MAX_LINE_CHARS]) for line in lines]
    n = len(tokens) or 1
    avg = (sum(len(t) for t in tokens) / n) or 1.0
    df: Counter[str] = Counter()
    for toks in tokens:
        df.update(set(toks) & terms.keys())
    common = COMMON_SHARE * n if n >= 20 else n
    weights = {t: idf(n, df[t]) * terms[t] for t in df if df[t] <= common}
    scores: dict[int, float] = {}
    for i, toks in enumerate(tokens):
        tf = Counter(t for t in toks if t in weights)
        if not tf:
            continue
        norm = K1 * (1 - B + B * len(toks) / avg)
        scores[i] = sum(w * tf[t] * (K1 + 1) / (tf[t] + norm) for t, w in weights.items() if tf[t])
    return scores


def _score_units(units: list[Unit], scores: dict[int, float]) -> None:
    for unit in units:
        unit.line_scores = {i: scores[i] for i in unit.rows if i in scores}
        unit.score = max(unit.line_scores.values(), default=0.0)


# --------------------------------------------------------------------------- rendering


def _clip(line: str) -> str:
    line = line.rstrip()
    if len(line) <= MAX_LINE_CHARS:
        return line
    return f"{line[:MAX_LINE_CHARS]}… (+{len(line) - MAX_LINE_CHARS} chars)"


def _run_rows(unit: Unit) -> list[int]:
    """Rows a run shows: its first line plus its best-matching lines (at most MAX_RUN_SHOWN),
    when few of its lines match (otherwise the match does not single any out)."""
    if len(unit.line_scores) * 4 > len(unit.rows):
        return [unit.rows[0]]
    best = sorted(unit.line_scores, key=lambda i: (-unit.line_scores[i], i))[:MAX_RUN_SHOWN]
    return sorted({unit.rows[0], *best})


def render_unit(unit: Unit, lines: Sequence[str], labels: Sequence[str]) -> list[str]:
    if not unit.run:
        return [f"{labels[i]}: {_clip(lines[i])}" for i in unit.rows]
    shown = set(_run_rows(unit))
    out: list[str] = []
    hidden = 0
    for i in unit.rows:
        if i in shown:
            if hidden:
                out.append(f"… {hidden} similar lines …")
                hidden = 0
            out.append(f"{labels[i]}: {_clip(lines[i])}")
        else:
            hidden += 1
    if hidden:
        out.append(f"… {hidden} similar lines (to {labels[unit.rows[-1]]}) …")
    return out


# --------------------------------------------------------------------------- selection


def _priority(units: list[Unit]) -> list[int]:
    """Unit indexes in the order they claim the budget: errors, then the frame (first and
    last passage: the command and its summary), then passages that match the task."""
    best = max((u.score for u in units), default=0.0)
    errors = sorted((i for i, u in enumerate(units) if u.error), key=lambda i: (-units[i].score, i))
    frame = [i for i in dict.fromkeys([len(units) - 1, 0]) if i >= 0 and not units[i].error]
    rest = sorted(
        (
            i
            for i, u in enumerate(units)
            if not u.error and i not in frame and u.score > 0 and u.score >= REST_SHARE * best
        ),
        key=lambda i: (-units[i].score, i),
    )
    return errors + frame + rest


def select(units: list[Unit], rendered: list[list[str]], budget: int) -> list[int]:
    kept: list[int] = []
    used = 0
    for i in _priority(units):
        cost = estimate_tokens("\n".join(rendered[i]))
        if used + cost <= budget:
            kept.append(i)
            used += cost
    return sorted(kept)


def compress(
    text: str,
    task: str = "",
    *,
    context: str = "",
    budget_tokens: int = DEFAULT_BUDGET,
    full_hint: str = "",
) -> Extract:
    """A focused extract of ``text`` for ``task`` (plus ``context``, e.g. the tool input,
    weighted half), within about ``budget_tokens``; ``full_hint`` says where the rest is."""
    text = text[:MAX_INPUT_CHARS]
    before = estimate_tokens(text) if text else 0
    lines, labels, is_json = split_lines(text)
    units = collapse_runs(lines, group_records(lines))
    _score_units(units, score_lines(lines, task_terms(task, context)))
    rendered = [render_unit(u, lines, labels) for u in units]
    kept = select(units, rendered, max(50, budget_tokens))
    out: list[str] = []
    previous = -2
    for i in kept:
        if i != previous + 1 and out:
            out.append("…")  # something was dropped in between
        out.extend(rendered[i])
        previous = i
    shown = sum(1 for line in out if not line.startswith("…"))
    collapsed = sum(len(units[i].rows) for i in kept) - shown
    body = "\n".join(out)
    footer = _footer(
        len(lines), shown, collapsed, before, estimate_tokens(body), is_json, full_hint
    )
    result = f"{body}\n{footer}" if body else footer
    return Extract(result, shown, len(lines), before, estimate_tokens(result))


def _footer(
    total: int, shown: int, collapsed: int, before: int, after: int, is_json: bool, hint: str
) -> str:
    unit = "JSON items" if is_json else "lines"
    dropped = total - shown - collapsed
    note = f"[extract of {total:,} {unit}: {shown:,} shown"
    if collapsed:
        note += f", {collapsed:,} similar ones collapsed"
    note += f", {dropped:,} dropped as unrelated to the task (~{before:,} → ~{after:,} tokens)"
    return note + (f"; {hint}]" if hint else "]")
