"""The one search contract's input checks, shared by the CLI, the MCP server, the hooks
and the library: the same limits and the same messages everywhere."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Literal

from retriever.errors import InputError

Mode = Literal["hybrid", "lexical", "semantic"]
MODES: tuple[Mode, ...] = ("hybrid", "lexical", "semantic")
MAX_QUERIES = 4
MAX_QUERY_CHARS = 2_000
HARD_QUERY_BYTES = 100_000  # bigger is refused outright, not truncated
MIN_BUDGET, MAX_BUDGET = 50, 20_000


class SearchInputError(InputError):
    """The query or options are unusable; the message says how to fix them."""


def clean_text(text: str) -> str:
    """Control characters become spaces (they mean nothing and upset tokenisers); runs of
    white space become one."""
    return " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())


def check_queries(queries: str | Sequence[str]) -> tuple[list[str], list[str]]:
    """1-4 cleaned, distinct queries, and remarks on what was changed (truncation)."""
    items = [queries] if isinstance(queries, str) else queries
    if not isinstance(items, Sequence) or not all(isinstance(q, str) for q in items):
        raise SearchInputError('queries must be a string or a list of strings, e.g. ["restic"]')
    total = sum(len(q.encode("utf-8", errors="replace")) for q in items)
    if total > HARD_QUERY_BYTES:
        raise SearchInputError(
            f"the queries total {total} bytes, over the {HARD_QUERY_BYTES // 1000} KB limit: "
            f"send a short question (at most {MAX_QUERY_CHARS} characters), not a document"
        )
    cleaned: list[str] = []
    remarks: list[str] = []
    for i, query in enumerate(items, start=1):
        text = clean_text(query)
        if len(text) > MAX_QUERY_CHARS:
            remarks.append(f"query {i} was cut to {MAX_QUERY_CHARS} characters")
            text = text[:MAX_QUERY_CHARS]
        if text and text not in cleaned:
            cleaned.append(text)
    if not cleaned:
        raise SearchInputError(
            "the query is empty: ask a question or give key words, e.g. 'how are backups done'"
        )
    if len(cleaned) > MAX_QUERIES:
        raise SearchInputError(
            f"at most {MAX_QUERIES} queries per call (got {len(cleaned)}): keep the best "
            "phrasings, or make several calls"
        )
    # Punctuation alone matches nothing in either arm: refuse rather than return noise.
    # (Stopwords alone stay allowed: the semantic arm can still read them.)
    cleaned = [q for q in cleaned if has_searchable_text(q)]
    if not cleaned:
        raise SearchInputError(
            "no searchable terms: the query has no letter or digit; ask with words"
        )
    return cleaned, remarks


def validate_queries(queries: str | Sequence[str]) -> list[str]:
    return check_queries(queries)[0]


def has_searchable_text(query: str) -> bool:
    """Whether the query holds at least one letter or digit (in any script)."""
    return any(ch.isalnum() for ch in query)


def check_budget(value: object, name: str = "budget_tokens") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SearchInputError(f"{name} must be a whole number of tokens")
    if not MIN_BUDGET <= value <= MAX_BUDGET:
        raise SearchInputError(
            f"{name} must be between {MIN_BUDGET} and {MAX_BUDGET} (got {value}); "
            "1200 suits a quick answer, 4000 a thorough one"
        )
    return value


def check_mode(value: object) -> Mode:
    mode = (value or "hybrid").strip().lower() if isinstance(value, str | None) else None
    if mode not in MODES:
        raise SearchInputError(f"mode must be one of {', '.join(MODES)}")
    return mode


def parse_modified_after(value: datetime | str | None) -> datetime | None:
    """ISO date or date-time (a trailing Z allowed); without a zone it is UTC."""
    if value is None or isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise SearchInputError(
                "modified_after must be an ISO date such as 2024-05-01 or 2024-05-01T09:30"
            ) from None
    else:
        raise SearchInputError("modified_after must be an ISO date string such as 2024-05-01")
    if parsed is not None and parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed
