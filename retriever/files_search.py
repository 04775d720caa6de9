"""Search without a database: BM25 over the vault files themselves.

When PostgreSQL cannot be reached or started, an agent still gets an answer, lexical only,
and told so (``mode: "files"``). The files go through the index's own pipeline (decoding,
redaction, chunking, the same normaliser and field weights), so passages, citations and
redaction match what an index would hold. To stay fast on a big vault, a cheap pass first
counts, per query term, the files whose folded text contains it (every token the
normaliser makes is a substring of the folded text, so no match is missed); that count is
the IDF's document frequency, and only the best-scoring files are chunked. The whole
search is bounded in time: past the limit it answers from the files read so far.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from retriever.budget import allocate, estimate_tokens
from retriever.doc_filter import DocFilter
from retriever.lexical import BM25Params, fold, idf, query_terms
from retriever.prepare import PreparedChunk, PreparedDoc, decode_note, prepare_text, read_regular
from retriever.scan import DEFAULT_INCLUDE, FileInfo, scan_vault
from retriever.search import Hit, SearchResult, truncate_to_budget

FILES_TIME_LIMIT = 5.0  # seconds for the whole answer; past it, the files read so far
MAX_FILES_CHUNKED = 40  # the best files by a whole-file BM25 are chunked and scored


@dataclass(frozen=True, slots=True)
class FilesQuery:
    queries: list[str]
    budget_tokens: int
    limit: int = 30
    folder: str | None = None
    tags: list[str] | None = None
    note_type: str | None = None
    modified_after: datetime | None = None
    bm25: BM25Params = field(default_factory=BM25Params)


@dataclass(slots=True)
class FilesAnswer:
    """Ranked passages with what the caller needs to say how complete the answer is."""

    passages: list[tuple[float, PreparedDoc, PreparedChunk]]
    coverage: float
    files_total: int
    files_read: int
    timed_out: bool


@dataclass(slots=True)
class _FileCounts:
    """One file as the cheap pass saw it: its length and how often each query term occurs
    in its folded text (the text itself is not kept: a big vault would not fit)."""

    info: FileInfo
    length: int
    counts: dict[str, int]


def search_files(
    vault: Path,
    query: FilesQuery,
    *,
    include: Iterable[str] = DEFAULT_INCLUDE,
    exclude: Iterable[str] = (),
    max_bytes: int = 2_000_000,
    min_chars: int = 30,
    max_chars: int = 2000,
    time_limit: float = FILES_TIME_LIMIT,
) -> FilesAnswer:
    # The scan gets four fifths of the time: chunking the best files takes the rest.
    deadline = time.monotonic() + time_limit * 0.8
    terms = _terms(query.queries)
    scope = DocFilter.of_options(query)
    files = [
        f
        for f in scan_vault(vault, include=include, exclude=exclude, max_bytes=max_bytes).files
        if scope.accepts_file(f.path, f.mtime_ns)
    ]
    seen, timed_out = _count_terms(vault, files, terms, deadline)
    df = {t: sum(1 for f in seen if t in f.counts) for t in terms}
    weights = {t: idf(len(files), df[t]) for t in terms if df[t]}
    best = _best_files(seen, weights, query.bm25)[:MAX_FILES_CHUNKED]
    docs = [d for d in (_prepare(vault, f.info, min_chars, max_chars) for f in best) if d]
    docs = [d for d in docs if scope.accepts_note(d.note_type, d.tags)]
    passages = _rank_passages(docs, weights, query.bm25)
    coverage = _coverage(passages[0][2], query.queries) if passages else 0.0
    return FilesAnswer(passages, coverage, len(files), len(seen), timed_out)


def _terms(queries: list[str]) -> list[str]:
    seen: dict[str, None] = {}
    for q in queries:
        seen.update(dict.fromkeys(query_terms(q)))
    return list(seen)


def _count_terms(
    vault: Path, files: list[FileInfo], terms: list[str], deadline: float
) -> tuple[list[_FileCounts], bool]:
    """One pass over the files: the query terms' counts in each (every token the normaliser
    makes is a substring of the folded text, so no file holding a term is missed)."""
    seen: list[_FileCounts] = []
    for info in files:
        if time.monotonic() > deadline:
            return seen, True
        try:
            raw, _ = read_regular(vault / info.path)
        except OSError:
            continue  # vanished or unreadable: the index would skip it too
        folded = _fold_lines(decode_note(raw)[0])
        counts = {t: c for t in terms if (c := folded.count(t))}
        seen.append(_FileCounts(info, len(folded), counts))
    return seen, False


_NON_ASCII = re.compile(r"[^\x00-\x7f]+")


def _fold_lines(text: str) -> str:
    """``fold`` applied only to the lines that need it: notes are mostly ASCII, and
    normalising a whole note to fold a few accented words was most of the scan's time."""
    if text.isascii():
        return text.lower()
    parts: list[str] = []
    done = 0  # text[:done] is already in parts
    for match in _NON_ASCII.finditer(text):
        if match.start() < done:
            continue  # on a line already folded
        start = text.rfind("\n", 0, match.start()) + 1
        end = text.find("\n", match.end())
        end = len(text) if end < 0 else end
        parts += [text[done:start].lower(), fold(text[start:end])]
        done = end
    parts.append(text[done:].lower())
    return "".join(parts)


def _best_files(
    seen: list[_FileCounts], weights: dict[str, float], p: BM25Params
) -> list[_FileCounts]:
    """Files ordered by BM25 over raw substring counts (cheap, and only to choose)."""
    if not weights or not seen:
        return []
    avg = sum(f.length for f in seen) / len(seen) or 1.0
    scored: list[tuple[float, str, _FileCounts]] = []
    for f in seen:
        norm = p.k1 * (1 - p.b + p.b * f.length / avg)
        score = sum(
            w * f.counts[t] * (p.k1 + 1) / (f.counts[t] + norm)
            for t, w in weights.items()
            if t in f.counts
        )
        if score > 0:
            scored.append((score, f.info.path, f))
    scored.sort(key=lambda s: (-s[0], s[1]))
    return [f for _, _, f in scored]


def _prepare(vault: Path, info: FileInfo, min_chars: int, max_chars: int) -> PreparedDoc | None:
    try:
        raw, _ = read_regular(vault / info.path)
    except OSError:
        return None
    return prepare_text(
        info.path,
        raw,
        size=info.size,
        mtime_ns=info.mtime_ns,
        min_chars=min_chars,
        max_chars=max_chars,
    )


def _rank_passages(
    docs: list[PreparedDoc], weights: dict[str, float], p: BM25Params
) -> list[tuple[float, PreparedDoc, PreparedChunk]]:
    """Exact BM25 of each passage (the index's weighted term frequencies and lengths)."""
    chunks = [(d, c) for d in docs for c in d.chunks]
    if not chunks:
        return []
    avg = sum(c.length for _, c in chunks) / len(chunks) or 1.0
    ranked: list[tuple[float, PreparedDoc, PreparedChunk]] = []
    for doc, chunk in chunks:
        tfs = dict(zip(chunk.terms, chunk.tfs, strict=True))
        norm = p.k1 * (1 - p.b + p.b * chunk.length / avg)
        score = sum(
            w * tfs[t] * (p.k1 + 1) / (tfs[t] + norm) for t, w in weights.items() if t in tfs
        )
        if score > 0:
            ranked.append((score, doc, chunk))
    ranked.sort(key=lambda r: (-r[0], r[1].path, r[2].start_line))
    return ranked


def _coverage(chunk: PreparedChunk, queries: list[str]) -> float:
    held = set(chunk.terms)
    shares = [len(set(t) & held) / len(t) for t in map(query_terms, queries) if t]
    return max(shares, default=0.0)


def files_result(
    answer: FilesAnswer, query: FilesQuery, *, why: str, absent_coverage: float, took_ms: float
) -> SearchResult:
    """The answer in the search contract, saying it came from the files and why."""
    hits = _hits(answer, query)
    reason = f"{why}; answered by scanning the vault files (lexical only, no index)"
    if answer.timed_out:
        reason += f"; stopped after {answer.files_read} of {answer.files_total} files (time limit)"
    return SearchResult(
        queries=query.queries,
        mode="files",
        degraded_reason=reason,
        hits=hits,
        coverage=answer.coverage,
        best_cosine=None,
        likely_absent=not hits or answer.coverage < absent_coverage,
        budget_tokens=query.budget_tokens,
        used_tokens=sum(h.tokens for h in hits),
        fusion="lexical",
        ranking="bm25 over files",
        took_ms=took_ms,
        ranked_paths=list(dict.fromkeys(doc.path for _, doc, _ in answer.passages)),
    )


def _hits(answer: FilesAnswer, query: FilesQuery) -> list[Hit]:
    """The passages that fit the token budget, best of each note first."""
    ranked = answer.passages[: query.limit * 2]
    plan = allocate(
        ranked,
        budget=query.budget_tokens,
        doc_of=lambda r: r[1].path,
        tokens_of=lambda r: r[2].tokens,
    )
    hits: list[Hit] = []
    for rank, i in enumerate(plan.kept[: query.limit], start=1):
        score, doc, chunk = ranked[i]
        hits.append(
            Hit(
                path=doc.path,
                title=doc.title,
                heading_trail=chunk.heading_trail,
                start_line=chunk.start_line,
                end_line=chunk.end_line,
                text=chunk.text,
                score=round(score, 6),
                ranks={"lexical": rank, "semantic": None, "graph": None, "title": None},
                passage_hash=chunk.passage_hash.hex(),
                stale=False,  # read just now
                content_type=chunk.content_type,
                tokens=estimate_tokens(chunk.text),
            )
        )
    if hits and hits[0].tokens > query.budget_tokens:
        truncate_to_budget(hits[0], query.budget_tokens)
    return hits
