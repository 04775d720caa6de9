"""The plain reference design: SQLite FTS5 BM25 + sqlite-vec cosine KNN + RRF (k=60).

Self-contained on purpose (it shares no code with ``retriever``): notes are split at ``## ``
headings outside code fences after the YAML frontmatter is stripped; each chunk is indexed
as title / headings / body (BM25 column weights 1 / 0.5 / 0.3) and embedded with the same
Model2Vec model as ours (float32, cosine). Python's own ``sqlite3`` is often built without
extension loading, so ``pysqlite3`` (the ``pysqlite3-binary`` wheel) is used when needed.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

RRF_K = 60
DEPTH = 50  # candidates taken from each list before fusion
EMBED_BATCH = 512
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_NEWLINE = re.compile(r"\r\n|\r|\n")
_TOKEN = re.compile(r"\w+", re.UNICODE)
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _sqlite() -> Any:
    import sqlite3

    if hasattr(sqlite3.Connection, "enable_load_extension"):
        return sqlite3
    try:
        from pysqlite3 import dbapi2  # type: ignore[import-not-found]
    except ImportError as exc:
        raise RuntimeError(
            "this Python's sqlite3 cannot load extensions (sqlite-vec): "
            "pip install pysqlite3-binary"
        ) from exc
    return dbapi2


@dataclass(slots=True)
class RefChunk:
    path: str
    start_line: int  # 1-based, in the original file (frontmatter counted)
    end_line: int
    title: str
    headings: str
    body: str
    text: str


def _fenced(lines: list[str], first: int) -> list[bool]:
    """Per line: inside a fenced code block (fence lines included)."""
    out, fence = [False] * len(lines), ""
    for i in range(first, len(lines)):
        m = _FENCE.match(lines[i])
        if m and (not fence or (m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence))):
            out[i], fence = True, "" if fence else m.group(1)
        else:
            out[i] = bool(fence)
    return out


def split_note(path: str, text: str) -> list[RefChunk]:
    """H2 chunking: frontmatter stripped, split at ``## `` lines outside code fences."""
    lines = _NEWLINE.split(text.lstrip("\ufeff"))
    first, title = 0, ""
    if lines and lines[0].strip() == "---":
        for i in range(1, len(lines)):
            if lines[i].strip() in ("---", "..."):
                first = i + 1
                try:
                    meta = yaml.load("\n".join(lines[1:i]), Loader=_LOADER)
                except yaml.YAMLError:
                    meta = None
                if isinstance(meta, dict) and meta.get("title"):
                    title = str(meta["title"])
                break
    fenced = _fenced(lines, first)
    starts = [first] + [
        i for i in range(first + 1, len(lines)) if not fenced[i] and lines[i].startswith("## ")
    ]
    if not title:
        h1 = next((ln[2:].strip() for ln in lines[first:] if ln.startswith("# ")), "")
        title = h1 or Path(path).stem
    chunks = []
    for a, b in zip(starts, [*starts[1:], len(lines)], strict=True):
        heads, body = [], []
        for i in range(a, b):
            m = None if fenced[i] else _HEADING.match(lines[i])
            (heads if m else body).append(m.group(2) if m else lines[i])
        while a < b and not lines[a].strip():
            a += 1
        while b > a and not lines[b - 1].strip():
            b -= 1
        if a < b:
            text = "\n".join(lines[a:b])
            chunks.append(RefChunk(path, a + 1, b, title, " ".join(heads), "\n".join(body), text))
    return chunks


def fts_query(query: str) -> str:
    """Each token quoted (FTS5 syntax made inert), OR-ed: natural-language queries."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in _TOKEN.findall(query))


def iter_notes(vault: Path) -> Iterator[tuple[str, str]]:
    for p in sorted(vault.rglob("*.md")):
        if p.is_file():
            yield p.relative_to(vault).as_posix(), p.read_text("utf-8", errors="replace")


class ReferenceIndex:
    def __init__(self, db_path: Path | str, model_path: Path | str) -> None:
        self.db_path = Path(db_path)
        self.model_path = str(model_path)
        self._model: Any = None
        self._conn: Any = None

    @property
    def model(self) -> Any:
        if self._model is None:
            from model2vec import StaticModel

            self._model = StaticModel.from_pretrained(self.model_path)
        return self._model

    def embed(self, texts: list[str]) -> np.ndarray:
        vecs = self.model.encode(texts, use_multiprocessing=False)
        return np.asarray(vecs, dtype=np.float32)

    @property
    def conn(self) -> Any:
        if self._conn is None:
            import sqlite_vec

            self._conn = _sqlite().connect(str(self.db_path))
            self._conn.enable_load_extension(True)
            sqlite_vec.load(self._conn)
            self._conn.enable_load_extension(False)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def build(self, vault_dir: Path | str) -> dict[str, float]:
        """(Re)build from scratch; returns stats and the time of each stage."""
        t0 = time.perf_counter()
        self.close()
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{self.db_path}{suffix}").unlink(missing_ok=True)
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        model_load = time.perf_counter()
        dim = int(self.model.dim)
        model_load = time.perf_counter() - model_load
        c = self.conn
        c.executescript(
            f"""
            PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
            CREATE TABLE chunks (id INTEGER PRIMARY KEY, path TEXT, start_line INT, end_line INT);
            CREATE VIRTUAL TABLE fts USING fts5(title, headings, body,
                tokenize = 'porter unicode61 remove_diacritics 2');
            CREATE VIRTUAL TABLE vec USING vec0(embedding float[{dim}] distance_metric=cosine);
            """
        )
        files = n = 0
        t_parse = t_embed = t_write = 0.0
        batch: list[RefChunk] = []

        def flush() -> None:
            nonlocal n, t_embed, t_write
            if not batch:
                return
            t = time.perf_counter()
            vecs = self.embed([ch.text for ch in batch])
            t_embed += time.perf_counter() - t
            t = time.perf_counter()
            ids = range(n + 1, n + 1 + len(batch))
            c.executemany(
                "INSERT INTO chunks VALUES (?, ?, ?, ?)",
                [
                    (i, ch.path, ch.start_line, ch.end_line)
                    for i, ch in zip(ids, batch, strict=True)
                ],
            )
            c.executemany(
                "INSERT INTO fts (rowid, title, headings, body) VALUES (?, ?, ?, ?)",
                [(i, ch.title, ch.headings, ch.body) for i, ch in zip(ids, batch, strict=True)],
            )
            c.executemany(
                "INSERT INTO vec (rowid, embedding) VALUES (?, ?)",
                [(i, v.tobytes()) for i, v in zip(ids, vecs, strict=True)],
            )
            t_write += time.perf_counter() - t
            n += len(batch)
            batch.clear()

        with c:
            for path, text in iter_notes(Path(vault_dir)):
                t = time.perf_counter()
                batch.extend(split_note(path, text))
                t_parse += time.perf_counter() - t
                files += 1
                if len(batch) >= EMBED_BATCH:
                    flush()
            flush()
            c.execute("INSERT INTO fts (fts) VALUES ('optimize')")
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return {
            "files": files,
            "chunks": n,
            "seconds": round(time.perf_counter() - t0, 3),
            "model_load_s": round(model_load, 3),
            "parse_s": round(t_parse, 3),
            "embed_s": round(t_embed, 3),
            "write_s": round(t_write, 3),
            "db_bytes": self.db_path.stat().st_size,
        }

    def is_built(self) -> bool:
        if not self.db_path.exists():
            return False
        try:
            return self.conn.execute("SELECT count(*) FROM chunks").fetchone()[0] > 0
        except Exception:
            return False

    # -- search ---------------------------------------------------------------------
    def lexical_ids(self, query: str, limit: int) -> list[int]:
        q = fts_query(query)
        if not q:
            return []
        rows = self.conn.execute(
            "SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY bm25(fts, 1.0, 0.5, 0.3) LIMIT ?",
            (q, limit),
        )
        return [r[0] for r in rows]

    def semantic_ids(self, query: str, limit: int) -> list[int]:
        vec = self.embed([query])[0]
        rows = self.conn.execute(
            "SELECT rowid FROM vec WHERE embedding MATCH ? AND k = ? ORDER BY distance",
            (vec.tobytes(), limit),
        )
        return [r[0] for r in rows]

    def ranked_ids(self, query: str, mode: str, limit: int) -> list[int]:
        if mode == "lexical":
            return self.lexical_ids(query, limit)
        if mode == "semantic":
            return self.semantic_ids(query, limit)
        if mode != "hybrid":
            raise ValueError(f"unknown mode {mode!r}")
        depth = max(DEPTH, limit)
        scores: dict[int, float] = {}
        for ids in (self.lexical_ids(query, depth), self.semantic_ids(query, depth)):
            for rank, i in enumerate(ids, start=1):
                scores[i] = scores.get(i, 0.0) + 1.0 / (RRF_K + rank)
        return sorted(scores, key=lambda i: (-scores[i], i))[:limit]

    def search(self, query: str, mode: str = "hybrid", k: int = 10) -> list[tuple[str, int, int]]:
        """Chunk-level hits, best first: (path, start_line, end_line)."""
        ids = self.ranked_ids(query, mode, k)
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        rows = self.conn.execute(
            f"SELECT id, path, start_line, end_line FROM chunks WHERE id IN ({marks})", ids
        ).fetchall()
        by_id = {r[0]: (r[1], r[2], r[3]) for r in rows}
        return [by_id[i] for i in ids]

    def search_docs(self, query: str, mode: str = "hybrid", k: int = 10) -> list[str]:
        """Document-level ranking for evaluation: each path at its best chunk's rank."""
        out: list[str] = []
        for path, _, _ in self.search(query, mode, max(DEPTH, k * 5)):
            if path not in out:
                out.append(path)
        return out[:k]
