"""The canonical dump of an index: everything it derives from the files, keyed by paths
and text hashes (never by ids), so a faulted database can be compared with a clean full
index of the same files made in a fresh home."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import numpy as np
import psycopg
import pytest

from retriever.passage_text import unpack

VECTOR_TOLERANCE = 1e-5  # the same text through the same model, maybe in another batch


def rows(url: str, sql: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()  # type: ignore[arg-type]


def dump_index(url: str) -> dict[str, Any]:
    """documents, chunks, links, lexicon, passages and embeddings (by passage hash)."""
    docs = {
        (
            r[0],
            bytes(r[1]),
            r[2],
            r[3],
            r[4],
            tuple(r[5]),
            tuple(r[6]),
            r[7],
            r[8],
            json.dumps(r[9], sort_keys=True),
        )
        for r in rows(
            url,
            "SELECT path, sha256, title, size, mtime_ns, tags, aliases, note_type, encoding,"
            " frontmatter FROM documents",
        )
    }
    # chunks.terms hold lexicon ids, which differ between databases: compare the words.
    chunks = Counter(
        (
            r[0],
            r[1],
            bytes(r[2]),
            r[3],
            r[4],
            tuple(sorted(zip(r[5], r[6], strict=True))),
            tuple(r[7]),
            r[8],
            r[9],
        )
        for r in rows(
            url,
            "SELECT d.path, c.ordinal, c.passage_hash, c.start_line, c.end_line,"
            " ARRAY(SELECT l.term FROM unnest(c.terms) WITH ORDINALITY u(id, o)"
            "       JOIN lexicon l ON l.id = u.id ORDER BY u.o), c.tfs,"
            " c.heading_trail, c.content_type, c.len"
            " FROM chunks c JOIN documents d ON d.id = c.doc_id",
        )
    )
    links = Counter(
        tuple(r)
        for r in rows(
            url,
            "SELECT d.path, l.target, l.anchor, l.alias, l.kind, l.line, l.n, r.path FROM links l"
            " JOIN documents d ON d.id = l.doc_id LEFT JOIN documents r ON r.id = l.resolved",
        )
    )
    lexicon = {r[0]: r[1] for r in rows(url, "SELECT term, df FROM lexicon")}
    stats = rows(url, "SELECT n_chunks, sum_len FROM lex_stats")
    passages = {
        (bytes(r[0]), unpack(r[1]), r[2], r[3])
        for r in rows(url, "SELECT hash, ztext, context, tokens FROM passages")
    }
    vectors = {  # a passage's whole vector (part 0) and its windows' (1..)
        (r[0], bytes(r[1]), r[2]): np.array([float(x) for x in r[3].strip("[]").split(",")])
        for r in rows(
            url,
            "SELECT m.fingerprint, e.hash, e.part, e.vec::text FROM embeddings e"
            " JOIN models m ON m.id = e.model",
        )
    }
    return {
        "documents": docs,
        "chunks": chunks,
        "links": links,
        "lexicon": lexicon,
        "lex_stats": stats,
        "passages": passages,
        "embedded": set(vectors),
        "vectors": vectors,
    }


def differences(got: dict[str, Any], want: dict[str, Any]) -> list[str]:
    """What differs between two dumps, one line per part (empty: the same index)."""
    out: list[str] = []
    for key in ("documents", "chunks", "links", "lexicon", "passages", "embedded"):
        g, w = got[key], want[key]
        if g == w:
            continue
        if isinstance(g, Counter) and isinstance(w, Counter):
            diff: object = {
                "extra": list((g - w).items())[:5],
                "missing": list((w - g).items())[:5],
            }
        elif isinstance(g, dict) and isinstance(w, dict):
            diff = {k: (g.get(k), w.get(k)) for k in set(g) | set(w) if g.get(k) != w.get(k)}
        else:
            diff = {"extra": list(g - w)[:5], "missing": list(w - g)[:5]}
        out.append(f"{key} differ from a clean index: {str(diff)[:1500]}")
    for k in set(got["vectors"]) & set(want["vectors"]):
        gap = float(np.max(np.abs(got["vectors"][k] - want["vectors"][k])))
        if gap > VECTOR_TOLERANCE:
            out.append(f"the vector of passage {k[1].hex()[:12]} differs by {gap:.3g}")
            break
    [(n_chunks, sum_len)] = got["lex_stats"]
    [(w_chunks, w_sum_len)] = want["lex_stats"]
    if n_chunks != w_chunks or abs(sum_len - w_sum_len) > 1e-6 * max(1.0, abs(w_sum_len)):
        out.append(f"lex_stats {(n_chunks, sum_len)} != {(w_chunks, w_sum_len)}")
    return out


def assert_same_index(got: dict[str, Any], want: dict[str, Any]) -> None:
    diff = differences(got, want)
    if diff:
        pytest.fail("\n".join(diff))


def lost_and_duplicated(got: dict[str, Any], want: dict[str, Any]) -> tuple[int, int]:
    """Notes of the clean index missing from ``got``, and notes stored more than once."""
    have = Counter(d[0] for d in got["documents"])
    wanted = {d[0] for d in want["documents"]}
    return len(wanted - set(have)), sum(n - 1 for n in have.values() if n > 1)


def assert_stats_consistent(url: str) -> None:
    """lexicon and lex_stats agree with the chunks actually stored; no orphan passage."""
    lexicon = {r[0]: r[1] for r in rows(url, "SELECT term, df FROM lexicon")}
    derived = {
        r[0]: r[1]
        for r in rows(
            url,
            "SELECT l.term, count(*) FROM chunks c,"
            " unnest(c.terms) AS t JOIN lexicon l ON l.id = t GROUP BY l.term",
        )
    }
    assert lexicon == derived
    [(n_chunks, sum_len)] = rows(url, "SELECT n_chunks, sum_len FROM lex_stats")
    [(c_chunks, c_len)] = rows(
        url, "SELECT (SELECT count(*) FROM chunks), (SELECT coalesce(sum(len), 0) FROM chunks)"
    )
    assert n_chunks == c_chunks
    assert sum_len == pytest.approx(c_len, rel=1e-6, abs=1e-3)
    [(orphans,)] = rows(
        url,
        "SELECT count(*) FROM passages p WHERE NOT EXISTS"
        " (SELECT 1 FROM chunks c WHERE c.passage_hash = p.hash)",
    )
    assert orphans == 0
