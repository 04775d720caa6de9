"""The incremental indexer against a real PostgreSQL: changes, renames, deletes, exact BM25
statistics, redaction, embeddings, interruption (Ctrl-C, kill -9) and the CLI."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import random
import secrets
import shutil
import signal
import string
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pathspec
import psycopg
import pytest

from retriever import store
from retriever.app import Retriever
from retriever.config import Settings
from retriever.db import Database
from retriever.embed import Embedder
from retriever.index import PARALLEL_THRESHOLD
from retriever.lexical import weighted_terms
from retriever.passage_text import pack, unpack
from retriever.planner_stats import ANALYZE_MIN_ROWS, ANALYZE_SHARE
from retriever.prepare import embedding_input
from retriever.scan import ALWAYS_EXCLUDED_DIRS
from retriever.windows import embedding_windows, unpack_windows
from tests.conftest import refuse_folder, retriever_exe, run_retriever
from tests.faults.dump import (
    assert_same_index,
    assert_stats_consistent,
    differences,
    lost_and_duplicated,
)
from tests.faults.dump import dump_index as snapshot
from tests.faults.table import record

EXCLUDED_TEST_NOTES = ["private/Journal.md", ".trash/Old grocery list.md"]


# --- helpers ----------------------------------------------------------------------------


def notes_on_disk(vault: Path) -> set[str]:
    """The notes that should be indexed, listed from the filesystem independently of the
    scanner: markdown files outside tool folders and not matched by .indexignore."""
    ignore_file = vault / ".indexignore"
    lines = ignore_file.read_text(encoding="utf-8").splitlines() if ignore_file.exists() else []
    spec = pathspec.PathSpec.from_lines("gitignore", lines)
    found: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(vault):
        rel_dir = Path(dirpath).relative_to(vault).as_posix()
        dirnames[:] = [
            d
            for d in dirnames
            if d not in ALWAYS_EXCLUDED_DIRS
            and not spec.match_file((d if rel_dir == "." else f"{rel_dir}/{d}") + "/")
        ]
        for name in filenames:
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            if name.endswith(".md") and not spec.match_file(rel):
                found.add(rel)
    return found


def query(url: str, sql: str, params: tuple[object, ...] = ()) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()  # type: ignore[arg-type]


def scalar(url: str, sql: str, params: tuple[object, ...] = ()) -> object:
    return query(url, sql, params)[0][0]


def doc_paths(url: str) -> set[str]:
    return {r[0] for r in query(url, "SELECT path FROM documents")}


def passage_hashes_of(url: str, path: str) -> list[bytes]:
    rows = query(
        url,
        "SELECT c.passage_hash FROM chunks c JOIN documents d ON d.id = c.doc_id"
        " WHERE d.path = %s ORDER BY c.ordinal",
        (path,),
    )
    return [bytes(r[0]) for r in rows]


def link_rows(url: str, source: str) -> list[tuple[str, str, str | None]]:
    """(target, kind, resolved path) of the links of ``source``."""
    return query(
        url,
        "SELECT l.target, l.kind, r.path FROM links l JOIN documents d ON d.id = l.doc_id"
        " LEFT JOIN documents r ON r.id = l.resolved WHERE d.path = %s ORDER BY l.line, l.target",
        (source,),
    )


@contextmanager
def open_app(vault: Path, url: str, home: Path, model: str | Path = "none") -> Iterator[Retriever]:
    settings = Settings(vault=vault, home=home, database_url=url, embed_model=str(model))
    app = Retriever(settings, db=Database(url))
    try:
        yield app
    finally:
        app.close()


def clean_rebuild(
    vault: Path, url: str, home: Path, model: str | Path = "none"
) -> dict[str, object]:
    with open_app(vault, url, home, model) as app:
        report = app.index(full=True)
        assert report.errors == []
    return snapshot(url)


def cli_env(url: str, home: Path, model: str | Path = "none", **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("RETRIEVER_") and k not in ("DATABASE_URL", "PYTHONWARNINGS")
    }
    env.update(
        DATABASE_URL=url,
        RETRIEVER_HOME=str(home),
        RETRIEVER_EMBED_MODEL=str(model),
        RETRIEVER_SERVICE="off",
        **extra,
    )
    return env


def run_cli(args: list[str], env: dict[str, str], timeout: float = 120) -> tuple[int, dict, str]:
    proc = run_retriever(args, env, timeout=timeout)
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"stdout is not JSON: {proc.stdout[:500]!r}; stderr: {proc.stderr[-1500:]}")
    return proc.returncode, data, proc.stderr


WORDS = (
    "server backup network bread flour recipe travel kyoto lisbon caddy proxy docker compose "
    "tidepool feed reader sqlite index search vector lexicon journal garden tomato basil "
    "restic snapshot kombu dashi miso ferment starter crumb oven steam harbour tram pastry "
    "vlan router switch uptime monitor alert disk raid scrub btrfs python asyncio parser"
).split()


def big_note(i: int, n: int, rng: random.Random, version: int = 0) -> str:
    words = WORDS
    paragraphs = []
    for j in range(3):
        sentence = " ".join(rng.choice(words) for _ in range(14))
        paragraphs.append(f"{sentence.capitalize()} (note {i}, part {j}, v{version}).")
    if i % 10 == 0:
        paragraphs.append("A paragraph shared by every tenth note, to share passages.")
    front = f"---\ntitle: Note {i}\naliases: [n{i}]\ntags: [t{i % 5}]\n---\n" if i % 3 == 0 else ""
    links = f"See [[Note {(i * 7 + 1) % n}]], [[n{(i + 3) % n}]] and [[Missing {i % 4}]]."
    sections = "\n\n## Part\n\n".join(paragraphs)
    return f"{front}# Note {i}\n\n{links}\n\n{sections}\n"


def make_big_vault(root: Path, n: int, seed: int = 7) -> Path:
    rng = random.Random(seed)
    for i in range(n):
        path = root / f"area{i % 8}" / f"Note {i}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(big_note(i, n, rng), encoding="utf-8")
    return root


def big_vault_paths(root: Path) -> list[Path]:
    return sorted(root.rglob("*.md"))


class Watch:
    """Polls the database while a `retriever index` subprocess runs."""

    def __init__(self, url: str) -> None:
        self.conn = psycopg.connect(url, autocommit=True)
        self.started_at = self.conn.execute("SELECT clock_timestamp()").fetchone()[0]  # type: ignore[index]

    def state(self) -> dict[str, int]:
        row = self.conn.execute(
            "SELECT (SELECT count(*) FROM documents),"
            " (SELECT count(*) FROM documents WHERE indexed_at > %s),"
            " (SELECT count(*) FROM passages), (SELECT count(*) FROM embeddings)",
            (self.started_at,),
        ).fetchone()
        assert row is not None
        return dict(zip(("documents", "written", "passages", "embeddings"), row, strict=True))

    def close(self) -> None:
        self.conn.close()


def start_index(vault: Path, env: dict[str, str], *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [retriever_exe(), "index", str(vault), "--json", *extra],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def run_until(
    proc: subprocess.Popen[bytes],
    watch: Watch,
    condition: Callable[[dict[str, int], float], bool],
    action: Callable[[subprocess.Popen[bytes]], None],
    timeout: float = 60,
) -> tuple[bool, dict[str, int], float]:
    """Poll until ``condition`` holds (then run ``action``) or the process ends.
    Returns (acted, state at that moment, elapsed seconds)."""
    started = time.monotonic()
    while proc.poll() is None:
        elapsed = time.monotonic() - started
        assert elapsed < timeout, "indexer did not finish in time"
        state = watch.state()
        if condition(state, elapsed):
            action(proc)
            return True, state, elapsed
        time.sleep(0.01)
    return False, watch.state(), time.monotonic() - started


def embedding_resumed() -> Callable[[dict[str, int], float], bool]:
    """True once the embeddings count rises above the lowest value seen in this run
    (garbage collection may lower it first; only the embedding phase raises it)."""
    lowest: list[int] = []

    def condition(state: dict[str, int], elapsed: float) -> bool:
        if not lowest or state["embeddings"] < lowest[0]:
            lowest[:] = [state["embeddings"]]
            return False
        return state["embeddings"] > lowest[0]

    return condition


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the indexer, its forkserver and workers
    except ProcessLookupError:
        pass
    proc.communicate(timeout=30)


# --- indexing the test vault --------------------------------------------------------------


def test_index_the_test_vault(make_app, vault_copy: Path, db_url: str) -> None:
    app = make_app(vault_copy)
    report = app.index()
    expected = notes_on_disk(vault_copy)
    assert len(expected) >= 25

    assert report.errors == []
    assert report.interrupted is False
    assert report.files_seen == len(expected)
    assert report.files_changed == len(expected)
    assert report.files_unchanged == report.files_deleted == report.files_touched == 0
    assert doc_paths(db_url) == expected
    for path in doc_paths(db_url):
        assert (vault_copy / path).is_file()
    for excluded in EXCLUDED_TEST_NOTES:
        assert (vault_copy / excluded).exists()
        assert excluded not in doc_paths(db_url)
    assert not any(p.startswith((".obsidian/", ".trash/", "private/")) for p in doc_paths(db_url))

    n_chunks = scalar(db_url, "SELECT count(*) FROM chunks")
    assert report.chunks_added == n_chunks > 0
    assert report.chunks_removed == 0
    # Every document of this vault has text, so at least one chunk each.
    assert scalar(db_url, "SELECT count(DISTINCT doc_id) FROM chunks") == len(expected)
    n_passages = scalar(db_url, "SELECT count(*) FROM passages")
    assert 0 < n_passages <= n_chunks  # type: ignore[operator]
    assert report.passages_pending == n_passages  # no model
    assert report.embed_error and "turned off" in report.embed_error

    # Links: counted as stored, the unresolved ones are the ones we know of.
    n_links = scalar(db_url, "SELECT count(*) FROM links")
    unresolved = query(
        db_url,
        "SELECT d.path, l.target, l.kind FROM links l JOIN documents d ON d.id = l.doc_id"
        " WHERE l.resolved IS NULL ORDER BY 1, 2",
    )
    assert report.links_resolved + report.links_unresolved == n_links
    assert report.links_unresolved == len(unresolved)
    assert report.links_resolved > 100
    assert ("homelab/Home Server.md", "Kubernetes Migration", "wiki") in unresolved
    assert all(u[1] in {"Kubernetes Migration", "rack-photo.png"} for u in unresolved), unresolved

    home_server = link_rows(db_url, "homelab/Home Server.md")
    assert ("Caddy", "wiki", "homelab/Reverse Proxy.md") in home_server  # by alias
    assert ("homelab/Setup", "wiki", "homelab/Setup.md") in home_server  # by path
    assert ("Docker Compose Stack.md", "markdown", "homelab/Docker Compose Stack.md") in home_server
    assert ("Network", "frontmatter", "homelab/Network.md") in home_server
    # "[[Setup]]" from the vault root: two candidates, the shallowest wins.
    assert ("Setup", "wiki", "homelab/Setup.md") in link_rows(db_url, "Inbox.md")
    assert ("DDIA", "wiki", "reading/ddia-notes.md") in link_rows(
        db_url, "reading/Reading Log 2024.md"
    )
    # Link resolution never points at something excluded.
    assert (
        scalar(
            db_url,
            "SELECT count(*) FROM links l JOIN documents r ON r.id = l.resolved"
            " WHERE r.path LIKE 'private/%%' OR r.path LIKE '.trash/%%'",
        )
        == 0
    )

    titles = dict(query(db_url, "SELECT path, title FROM documents"))
    assert titles["homelab/Setup.md"] == "Server install notes"  # frontmatter title
    assert titles["Quick thought.md"] == "Quick thought"  # file name stem
    assert_stats_consistent(db_url)
    meta = dict(query(db_url, "SELECT key, value FROM meta"))
    assert meta["links_pending"] is False
    assert meta["pipeline_version"]
    assert meta["last_index"]["vault"] == str(vault_copy.resolve())


def test_second_run_and_touch_change_nothing(make_app, vault_copy: Path, db_url: str) -> None:
    app = make_app(vault_copy)
    first = app.index()
    before = snapshot(db_url)
    chunk_ids = query(db_url, "SELECT id FROM chunks ORDER BY id")

    again = app.index()
    assert (again.files_changed, again.chunks_added, again.chunks_removed) == (0, 0, 0)
    assert again.passages_embedded == again.files_touched == again.files_deleted == 0
    assert again.files_unchanged == again.files_seen == first.files_seen
    assert snapshot(db_url) == before

    # touch: mtime changes, bytes do not -> recorded, nothing re-derived.
    note = vault_copy / "cooking" / "Dashi.md"
    st = note.stat()
    os.utime(note, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    touched = app.index()
    assert touched.files_touched == 1
    assert touched.files_changed == 0
    assert touched.chunks_added == touched.chunks_removed == 0
    assert touched.files_unchanged == first.files_seen - 1
    assert query(db_url, "SELECT id FROM chunks ORDER BY id") == chunk_ids
    assert (
        scalar(db_url, "SELECT mtime_ns FROM documents WHERE path = 'cooking/Dashi.md'")
        == note.stat().st_mtime_ns
    )
    after = snapshot(db_url)
    assert after["chunks"] == before["chunks"]
    assert after["lexicon"] == before["lexicon"]

    # ...and the new mtime was recorded: the next run sees nothing at all.
    quiet = app.index()
    assert quiet.files_touched == quiet.files_changed == 0
    assert quiet.files_unchanged == first.files_seen


def test_edit_replaces_only_that_note(make_app, vault_copy: Path, db_url: str) -> None:
    app = make_app(vault_copy)
    app.index()
    path = "cooking/Dashi.md"
    old_hashes = passage_hashes_of(db_url, path)
    others_before = query(
        db_url,
        "SELECT c.id, c.passage_hash FROM chunks c JOIN documents d ON d.id = c.doc_id"
        " WHERE d.path <> %s ORDER BY c.id",
        (path,),
    )
    assert app.search("sensei slimy", mode="lexical", fresh=False, graph=False).hits[0].path == path
    note = vault_copy / path
    note.write_text(
        "---\ntitle: Dashi\ntags: [japanese]\n---\n# Dashi\n\nBack to [[Home]].\n\n"
        "## Quick version\nSteep a sachet of zanzibarquokka granules in hot water for four "
        "minutes, then discard the sachet.\n",
        encoding="utf-8",
    )
    report = app.index()
    assert report.files_changed == 1
    assert report.files_unchanged == report.files_seen - 1
    assert report.files_touched == report.files_deleted == 0
    assert report.chunks_removed == len(old_hashes)
    new_hashes = passage_hashes_of(db_url, path)
    assert report.chunks_added == len(new_hashes) > 0
    gone = set(old_hashes) - set(new_hashes)
    assert gone
    # Other notes' chunks were not rewritten.
    assert (
        query(
            db_url,
            "SELECT c.id, c.passage_hash FROM chunks c JOIN documents d ON d.id = c.doc_id"
            " WHERE d.path <> %s ORDER BY c.id",
            (path,),
        )
        == others_before
    )
    # The new text is searchable, the old text is gone (passages garbage-collected).
    hits = app.search("zanzibarquokka", mode="lexical", fresh=False, graph=False).hits
    assert hits and hits[0].path == path
    assert "zanzibarquokka" in hits[0].text
    assert report.passages_collected == len(gone)  # none of them was shared
    assert scalar(db_url, "SELECT count(*) FROM passages WHERE hash = ANY(%s)", (list(gone),)) == 0
    assert not [t for t in stored_texts(db_url) if "sensei" in t]
    assert app.search("sensei slimy", mode="lexical", fresh=False, graph=False).hits == []
    assert scalar(db_url, "SELECT count(*) FROM lexicon WHERE term IN ('sensei', 'slimy')") == 0
    # A word the note shared with another note keeps that note's hits only.
    katsuobushi = app.search("katsuobushi", mode="lexical", fresh=False, graph=False).hits
    assert {h.path for h in katsuobushi} == {"cooking/Pantry Staples.md"}
    assert_stats_consistent(db_url)
    assert scalar(db_url, "SELECT sha256 FROM documents WHERE path = %s", (path,)) == (
        hashlib.sha256(note.read_bytes()).digest()
    )


def test_rename_reuses_passages_and_reresolves_links(
    make_app, vault_copy: Path, db_url: str, model_dir: Path
) -> None:
    app = make_app(vault_copy, model=model_dir)
    first = app.index()
    assert first.passages_pending == 0
    n_embeddings = scalar(db_url, "SELECT count(*) FROM embeddings")
    setup_hashes = passage_hashes_of(db_url, "homelab/Setup.md")
    network_hashes = passage_hashes_of(db_url, "homelab/Network.md")

    # Two renames: one changes the name (links by path/name break), one only the folder.
    os.rename(vault_copy / "homelab" / "Setup.md", vault_copy / "homelab" / "Server Install.md")
    (vault_copy / "archive").mkdir()
    os.rename(vault_copy / "homelab" / "Network.md", vault_copy / "archive" / "Network.md")
    report = app.index()
    assert report.errors == []
    assert report.files_deleted == 2
    assert report.files_changed == 2
    assert report.files_unchanged == report.files_seen - 2
    assert report.passages_embedded == 0  # found by hash: nothing embedded twice
    assert report.passages_collected == 0
    assert report.passages_pending == 0
    assert scalar(db_url, "SELECT count(*) FROM embeddings") == n_embeddings
    paths = doc_paths(db_url)
    assert "homelab/Setup.md" not in paths and "homelab/Network.md" not in paths
    assert passage_hashes_of(db_url, "homelab/Server Install.md") == setup_hashes
    assert passage_hashes_of(db_url, "archive/Network.md") == network_hashes

    home_server = link_rows(db_url, "homelab/Home Server.md")
    assert ("homelab/Setup", "wiki", None) in home_server  # a link by path breaks
    assert ("Network", "wiki", "archive/Network.md") in home_server  # by name: follows
    assert ("Network", "frontmatter", "archive/Network.md") in home_server
    # "[[Setup]]" now has a single candidate left.
    assert ("Setup", "wiki", "projects/tidepool/Setup.md") in link_rows(db_url, "Inbox.md")
    assert ("homelab/Setup", "wiki", None) in link_rows(db_url, "projects/tidepool/Setup.md")
    # Links out of the renamed note still resolve (stored under its new path).
    assert ("Home Server", "wiki", "homelab/Home Server.md") in link_rows(
        db_url, "homelab/Server Install.md"
    )
    assert report.links_unresolved == scalar(
        db_url, "SELECT count(*) FROM links WHERE resolved IS NULL"
    )
    assert report.links_resolved == scalar(
        db_url, "SELECT count(*) FROM links WHERE resolved IS NOT NULL"
    )
    assert_stats_consistent(db_url)

    # Renaming back restores the original link targets.
    os.rename(vault_copy / "homelab" / "Server Install.md", vault_copy / "homelab" / "Setup.md")
    back = app.index()
    assert back.passages_embedded == 0
    assert ("homelab/Setup", "wiki", "homelab/Setup.md") in link_rows(
        db_url, "homelab/Home Server.md"
    )
    assert ("Setup", "wiki", "homelab/Setup.md") in link_rows(db_url, "Inbox.md")


def test_rename_of_a_note_titled_by_its_h1_reuses_vectors(
    make_app, vault_copy: Path, db_url: str, model_dir: Path
) -> None:
    app = make_app(vault_copy, model=model_dir)
    app.index()
    hashes = passage_hashes_of(db_url, "Inbox.md")
    assert hashes
    os.rename(vault_copy / "Inbox.md", vault_copy / "Todo.md")  # "# Inbox" stays the title
    report = app.index()
    assert scalar(db_url, "SELECT title FROM documents WHERE path = 'Todo.md'") == "Inbox"
    assert report.passages_embedded == 0
    assert passage_hashes_of(db_url, "Todo.md") == hashes


def test_delete_removes_document_chunks_and_links(make_app, vault_copy: Path, db_url: str) -> None:
    app = make_app(vault_copy)
    app.index()
    path = "homelab/Reverse Proxy.md"
    doc_id = scalar(db_url, "SELECT id FROM documents WHERE path = %s", (path,))
    assert scalar(db_url, "SELECT count(*) FROM chunks WHERE doc_id = %s", (doc_id,))
    assert scalar(db_url, "SELECT count(*) FROM links WHERE doc_id = %s", (doc_id,))
    incoming = scalar(db_url, "SELECT count(*) FROM links WHERE resolved = %s", (doc_id,))
    assert incoming  # [[Caddy]], [[Reverse Proxy]], ...
    unresolved_before = scalar(db_url, "SELECT count(*) FROM links WHERE resolved IS NULL")
    n_chunks = scalar(db_url, "SELECT count(*) FROM chunks WHERE doc_id = %s", (doc_id,))

    (vault_copy / path).unlink()
    report = app.index()
    assert report.files_deleted == 1
    assert report.files_changed == 0
    assert report.chunks_removed == n_chunks
    assert path not in doc_paths(db_url)
    assert scalar(db_url, "SELECT count(*) FROM chunks WHERE doc_id = %s", (doc_id,)) == 0
    assert scalar(db_url, "SELECT count(*) FROM links WHERE doc_id = %s", (doc_id,)) == 0
    assert scalar(db_url, "SELECT count(*) FROM links WHERE resolved = %s", (doc_id,)) == 0
    # Links that pointed at it are now unresolved (and counted so).
    assert ("Caddy", "wiki", None) in link_rows(db_url, "homelab/Home Server.md")
    assert scalar(db_url, "SELECT count(*) FROM links WHERE resolved IS NULL") == (
        unresolved_before + incoming  # type: ignore[operator]
    )
    assert report.links_unresolved == unresolved_before + incoming  # type: ignore[operator]
    assert not [t for t in stored_texts(db_url) if "local_certs" in t]
    assert_stats_consistent(db_url)

    # A new note with the missing title resolves the old dangling link.
    (vault_copy / "homelab" / "Kubernetes Migration.md").write_text(
        "# Kubernetes Migration\n\nNot doing it.\n", encoding="utf-8"
    )
    app.index()
    assert ("Kubernetes Migration", "wiki", "homelab/Kubernetes Migration.md") in link_rows(
        db_url, "homelab/Home Server.md"
    )


def test_newly_ignored_and_oversized_notes_leave_the_index(
    make_app, vault_copy: Path, db_url: str, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# Outside\n\nnot part of the vault\n", encoding="utf-8")
    (vault_copy / "escape.md").symlink_to(outside / "secret.md")
    app = make_app(vault_copy, max_file_bytes=6000)
    big = vault_copy / "Big.md"
    big.write_text("# Big\n\n" + "lorem ipsum dolor sit amet " * 300, encoding="utf-8")
    report = app.index()
    assert "Big.md" in report.skipped and "escape.md" in report.skipped
    assert any(w.startswith("Big.md: skipped, over 6000 bytes") for w in report.warnings)
    assert "Big.md" not in doc_paths(db_url) and "escape.md" not in doc_paths(db_url)
    assert report.errors == []
    oversized = {p for p in notes_on_disk(vault_copy) if (vault_copy / p).stat().st_size > 6000} - {
        "escape.md"
    }
    assert doc_paths(db_url) == notes_on_disk(vault_copy) - oversized - {"escape.md"}

    # A note that grows over the cap, and a folder that becomes ignored, leave the index.
    (vault_copy / "Inbox.md").write_text("# Inbox\n\n" + "x " * 4000, encoding="utf-8")
    with (vault_copy / ".indexignore").open("a", encoding="utf-8") as f:
        f.write("travel/\n")
    travel = {p for p in doc_paths(db_url) if p.startswith("travel/")}
    assert travel
    travel_hashes = [h for p in travel for h in passage_hashes_of(db_url, p)]
    report = app.index()
    assert report.files_deleted == len(travel) + 1
    assert not any(p.startswith("travel/") for p in doc_paths(db_url))
    assert "Inbox.md" not in doc_paths(db_url)
    assert (
        scalar(db_url, "SELECT count(*) FROM passages WHERE hash = ANY(%s)", (travel_hashes,)) == 0
    )
    assert_stats_consistent(db_url)


def test_a_second_indexer_does_not_wait_when_asked_not_to(
    make_app, vault_copy: Path, db_url: str
) -> None:
    from retriever.db import INDEX_LOCK_KEY

    app = make_app(vault_copy)
    with psycopg.connect(db_url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (INDEX_LOCK_KEY,))
        report = app.index(wait_for_lock=False)
        assert report.warnings == ["another indexer is running; skipped"]
        assert report.files_seen == report.files_changed == 0
        assert doc_paths(db_url) == set()
        holder.execute("SELECT pg_advisory_unlock(%s)", (INDEX_LOCK_KEY,))
    report = app.index(wait_for_lock=False)
    assert report.files_changed == len(notes_on_disk(vault_copy))


def test_skipped_run_returns_its_connection_to_the_pool_unchanged(
    make_app, vault_copy: Path, db_url: str
) -> None:
    from retriever.db import INDEX_LOCK_KEY

    app = make_app(vault_copy)
    with psycopg.connect(db_url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (INDEX_LOCK_KEY,))
        assert app.index(wait_for_lock=False).warnings
        holder.execute("SELECT pg_advisory_unlock(%s)", (INDEX_LOCK_KEY,))
    states = []
    with app.db.connection() as a, app.db.connection() as b:
        states = [a.autocommit, b.autocommit]
    assert states == [False, False]


def test_lexicon_stays_exact_through_edits_renames_deletes(
    make_app, vault_copy: Path, db_url: str, new_db_url, tmp_path: Path
) -> None:
    app = make_app(vault_copy)
    app.index()
    v = vault_copy
    steps: list[Callable[[], None]] = [
        # Edit body text.
        lambda: (v / "cooking" / "Shakshuka.md").write_text(
            (v / "cooking" / "Shakshuka.md").read_text(encoding="utf-8").replace("feta", "halloumi")
            + "\nExtra paragraph about smoked paprika and cumin seeds, toasted first.\n",
            encoding="utf-8",
        ),
        # Change title, aliases and tags: terms of every chunk of the note change.
        lambda: (v / "homelab" / "Reverse Proxy.md").write_text(
            (v / "homelab" / "Reverse Proxy.md")
            .read_text(encoding="utf-8")
            .replace("title: Reverse Proxy", "title: Edge Gateway")
            .replace("  - Caddy\n", "  - Traefik\n")
            .replace("tags: [homelab, caddy, tls]", "tags: [network, gateway]"),
            encoding="utf-8",
        ),
        # Rename (name and folder), delete, add, duplicate (shared passages), empty a note.
        lambda: os.rename(v / "travel" / "Lisbon Weekend.md", v / "cooking" / "Lisboa.md"),
        lambda: (v / "reading" / "ddia-notes.md").unlink(),
        lambda: (v / "New idea.md").write_text(
            "# New idea\n\nIndex the vault with [[Tidepool]] style fetching, halloumi aside.\n",
            encoding="utf-8",
        ),
        lambda: shutil.copyfile(v / "cooking" / "Dashi.md", v / "cooking" / "Dashi copy.md"),
        lambda: (v / "Quick thought.md").write_text("", encoding="utf-8"),
        lambda: (v / "cooking" / "Dashi copy.md").unlink(),
        lambda: os.rename(v / "homelab", v / "servers"),  # a whole folder moves
    ]
    for step in steps:
        step()
        report = app.index()
        assert report.errors == []
        assert_stats_consistent(db_url)
    # Several changes in a single run too.
    (v / "Inbox.md").unlink()
    os.rename(v / "Home.md", v / "Start.md")
    (v / "cooking" / "Dashi.md").write_text("# Dashi\n\nJust buy it.\n", encoding="utf-8")
    app.index()
    assert_stats_consistent(db_url)

    incremental = snapshot(db_url)
    reference = clean_rebuild(vault_copy, new_db_url(), tmp_path / "ref-home")
    assert_same_index(incremental, reference)
    assert "servers/Reverse Proxy.md" in doc_paths(db_url)
    assert "Quick thought.md" in doc_paths(db_url)  # empty note: a document without chunks
    assert (
        scalar(
            db_url,
            "SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.doc_id"
            " WHERE d.path = 'Quick thought.md'",
        )
        == 0
    )


def test_full_rebuild_produces_the_same_state(make_app, vault_copy: Path, db_url: str) -> None:
    app = make_app(vault_copy)
    app.index()
    os.rename(vault_copy / "cooking" / "Dashi.md", vault_copy / "Dashi.md")
    (vault_copy / "travel" / "Packing List.md").unlink()
    (vault_copy / "Inbox.md").write_text("# Inbox\n\nEmpty for once.\n", encoding="utf-8")
    app.index()
    before = snapshot(db_url)
    report = app.index(full=True)
    assert report.full is True
    assert report.files_changed == report.files_seen
    assert report.files_unchanged == 0
    assert report.errors == []
    assert_same_index(snapshot(db_url), before)
    assert_stats_consistent(db_url)
    again = app.index()
    assert again.files_changed == 0


def test_non_utf8_note_is_decoded_and_reported(make_app, vault_copy: Path, db_url: str) -> None:
    (vault_copy / "cafe.md").write_bytes(
        "# Caf\xe9 cr\xe8me\n\nLe caf\xe9 cr\xe8me du matin, \xab sans sucre \xbb.\n".encode(
            "latin-1"
        )
    )
    # 0x81 is undefined in cp1252: only latin-1 can decode this one.
    (vault_copy / "odd.md").write_bytes(b"# Odd\n\nA stray byte \x81 in na\xefve text here.\n")
    app = make_app(vault_copy)
    report = app.index()
    assert report.errors == []
    assert report.files_changed == len(notes_on_disk(vault_copy))
    assert "cafe.md: not valid UTF-8, decoded as cp1252" in report.warnings
    assert "odd.md: not valid UTF-8, decoded as latin-1" in report.warnings
    enc = dict(query(db_url, "SELECT path, encoding FROM documents"))
    assert enc["cafe.md"] == "cp1252"
    assert enc["odd.md"] == "latin-1"
    assert enc["cooking/Dashi.md"] == "utf-8"
    assert scalar(db_url, "SELECT title FROM documents WHERE path = 'cafe.md'") == "Café crème"
    texts = [
        unpack(r[0])
        for r in query(
            db_url,
            "SELECT p.ztext FROM passages p JOIN chunks c ON c.passage_hash = p.hash"
            " JOIN documents d ON d.id = c.doc_id WHERE d.path = 'cafe.md'",
        )
    ]
    assert any("café crème du matin, « sans sucre »" in t for t in texts)
    hits = app.search("café crème", mode="lexical", fresh=False, graph=False).hits
    assert hits and hits[0].path == "cafe.md"
    assert app.search("naïve", mode="lexical", fresh=False, graph=False).hits[0].path == "odd.md"
    # Unchanged on the next run (the raw bytes are hashed, not the decoded text).
    assert app.index().files_changed == 0


def test_note_with_a_nul_byte_is_not_fatal(make_app, vault_copy: Path, db_url: str) -> None:
    (vault_copy / "binary.md").write_bytes(b"# Binary\n\nhello\x00world and some more text\n")
    app = make_app(vault_copy)
    report = app.index()  # raises psycopg.DataError today
    assert report.files_changed == len(notes_on_disk(vault_copy))
    assert "binary.md" in doc_paths(db_url)
    assert any("binary.md" in w for w in report.warnings + report.errors)


# --- redaction --------------------------------------------------------------------------


def _random(alphabet: str, n: int) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


def planted_secrets() -> dict[str, str]:
    alnum = string.ascii_letters + string.digits
    pem_body = base64.b64encode(secrets.token_bytes(480)).decode()
    pem_lines = [pem_body[i : i + 64] for i in range(0, len(pem_body), 64)]
    return {
        "github": "gh" + "p_" + _random(alnum, 36),
        "aws": "AK" + "IA" + _random(string.ascii_uppercase + string.digits, 16),
        "db_password": _random(alnum, 24),
        "pem_body": "\n".join(pem_lines),
    }


def test_planted_secrets_never_reach_the_database(
    make_app, vault_copy: Path, db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    s = planted_secrets()
    url = "postgresql" + f"://deploy:{s['db_password']}@db.internal:5432/prod"
    pem = (
        "-----BEGIN "
        + "RSA PRIVATE KEY-----\n"
        + s["pem_body"]
        + "\n-----END "
        + "RSA PRIVATE KEY-----"
    )
    note = (
        "---\n"
        "title: Deploy runbook\n"
        f"token: {s['github']}\n"
        f"aws_key_id: {s['aws']}\n"
        f'database: "{url}"\n'
        f"aliases: [deploy, {s['github']}]\n"
        "tags: [ops]\n"
        "---\n"
        "# Deploy runbook\n\n"
        f"Push with {s['github']} and the key {s['aws']}.\n\n"
        f"Connect to [the database]({url}) or {url} directly.\n\n"
        f"<!-- old credentials: {s['github']} {s['aws']} {url} -->\n\n"
        "## Key\n\n"
        f"{pem}\n\n"
        "Rotate every quarter.\n"
    )
    (vault_copy / "ops").mkdir()
    (vault_copy / "ops" / "Deploy.md").write_text(note, encoding="utf-8")
    app = make_app(vault_copy)
    with caplog.at_level(logging.DEBUG):
        report = app.index()
    assert report.errors == []
    assert "ops/Deploy.md" in doc_paths(db_url)

    values = [s["github"], s["aws"], s["db_password"], *s["pem_body"].splitlines()]
    dump = dump_database(db_url)
    assert len(dump) > 10_000  # the dump really contains the index
    assert "Deploy runbook" in dump and "REDACTED" in dump
    lowered = dump.lower()
    for value in values:
        assert value not in dump
        assert value.lower() not in lowered
    # No lexicon term derived from a secret (the lexicon lowercases and splits identifiers).
    lexicon = {r[0] for r in query(db_url, "SELECT term FROM lexicon")}
    for value in values:
        derived = {t for t in weighted_terms([(value, 1.0)]).terms if len(t) >= 8}
        assert not derived & lexicon
    # Report and logs name kinds, never values.
    assert report.redactions == {
        "aws_access_key_id": 3,
        "github_token": 4,
        "private_key": 1,
        "url_password": 4,
    }
    shown = json.dumps(report.to_dict()) + "\n".join(r.getMessage() for r in caplog.records)
    for value in values:
        assert value not in shown
    assert "github_token" in caplog.text and "ops/Deploy.md" in caplog.text
    # Line structure is kept: the passage after the key block cites the right line.
    rows = query(
        db_url,
        "SELECT c.start_line, p.ztext FROM chunks c JOIN passages p ON p.hash = c.passage_hash"
        " JOIN documents d ON d.id = c.doc_id WHERE d.path = 'ops/Deploy.md'",
    )
    rows = [(start, unpack(packed)) for start, packed in rows]
    lines = note.splitlines()
    rotate = lines.index("Rotate every quarter.") + 1
    assert any("Rotate every quarter." in text and start <= rotate for start, text in rows)


def stored_texts(url: str) -> list[str]:
    """Every passage text the database holds, unpacked."""
    return [unpack(r[0]) for r in query(url, "SELECT ztext FROM passages")]


def dump_database(url: str) -> str:
    """Every text, jsonb and array column of every table, as text, and every passage text
    (packed: not readable in SQL)."""
    columns = query(
        url,
        "SELECT table_name, column_name FROM information_schema.columns"
        " WHERE table_schema = 'public' AND (data_type IN ('text', 'jsonb', 'json', 'ARRAY',"
        " 'character varying'))"
        " ORDER BY table_name, column_name",
    )
    tables = {c[0] for c in columns}
    assert {"documents", "passages", "chunks", "links", "lexicon", "meta"} <= tables
    parts: list[str] = []
    with psycopg.connect(url, autocommit=True) as conn:
        for table, column in columns:
            rows = conn.execute(f'SELECT "{column}"::text FROM "{table}"').fetchall()
            parts.extend(r[0] for r in rows if r[0] is not None)
    texts = stored_texts(url)
    assert texts
    return "\n".join(parts + texts)


# --- embeddings -------------------------------------------------------------------------


def test_every_passage_gets_a_vector(
    make_app, vault_copy: Path, db_url: str, model_dir: Path
) -> None:
    app = make_app(vault_copy, model=model_dir)
    report = app.index()
    n_passages = scalar(db_url, "SELECT count(*) FROM passages")
    assert report.embed_error is None
    assert report.model == str(model_dir)
    assert report.passages_pending == 0
    assert report.passages_embedded == n_passages
    assert scalar(db_url, "SELECT count(*) FROM embeddings WHERE part = 0") == n_passages
    assert scalar(db_url, "SELECT count(*) FROM embeddings WHERE part > 0") == 0  # in windows
    assert scalar(db_url, "SELECT count(*) FROM models") == 1
    dims = {r[0] for r in query(db_url, "SELECT vector_dims(vec) FROM embeddings")}
    assert dims == {scalar(db_url, "SELECT dim FROM models")}
    assert scalar(db_url, "SELECT count(*) FROM embeddings WHERE l2_norm(vec) = 0") == 0
    # Semantic search now has vectors to use.
    # Each stored vector is the model's embedding of that passage's text.
    embedder, error = app.embedder()
    assert embedder is not None and error is None
    rows = query(
        db_url,
        "SELECT p.context, p.ztext, e.vec::text FROM passages p"
        " JOIN embeddings e ON e.hash = p.hash AND e.part = 0 ORDER BY p.hash LIMIT 20",
    )
    fresh = embedder.embed([embedding_input(r[0], unpack(r[1])) for r in rows])
    fresh /= np.linalg.norm(fresh, axis=1, keepdims=True)
    stored = np.asarray([json.loads(r[2]) for r in rows], dtype=np.float32)
    stored /= np.linalg.norm(stored, axis=1, keepdims=True)
    cosines = stored @ fresh.T
    assert (np.diag(cosines) > 0.99).all()  # half precision storage
    assert (cosines.argmax(axis=1) == np.arange(len(rows))).all()
    _assert_windows_stored(db_url, embedder)
    result = app.search("kombu stock for miso soup", mode="semantic", fresh=False)
    assert result.degraded_reason is None
    assert result.mode == "semantic"
    assert result.hits
    assert app.index().passages_embedded == 0


def _assert_windows_stored(db_url: str, embedder: Embedder) -> None:
    """A long passage also holds its windows' vectors (one row of int8 codes, in order),
    each in the direction of the model's embedding of that window; a short one holds only
    its whole vector."""
    passages = [
        (h, context, unpack(packed))
        for h, context, packed in query(db_url, "SELECT hash, context, ztext FROM passages")
    ]
    packed = {
        bytes(h): unpack_windows(bytes(blob), embedder.dimension)
        for h, blob in query(db_url, "SELECT hash, vecs FROM windows")
    }
    expected = {
        bytes(h): embedding_windows(context, body)
        for h, context, body in passages
        if embedding_windows(context, body)
    }
    assert expected, "the test vault has passages longer than a window"
    assert any(not embedding_windows(c, t) for _, c, t in passages)
    assert set(packed) == set(expected)
    assert all(len(packed[h]) == len(texts) for h, texts in expected.items())
    keys = sorted(expected)
    fresh = embedder.embed([t for h in keys for t in expected[h]])
    stored = np.vstack([packed[h] for h in keys])
    cos = (stored / np.linalg.norm(stored, axis=1, keepdims=True)) @ (
        fresh / np.linalg.norm(fresh, axis=1, keepdims=True)
    ).T
    assert (np.diag(cos) > 0.99).all()


def test_missing_model_indexes_lexically_then_catches_up(
    make_app, vault_copy: Path, db_url: str, model_dir: Path
) -> None:
    lexical = make_app(vault_copy, model="/nonexistent")
    report = lexical.index()
    n_passages = scalar(db_url, "SELECT count(*) FROM passages")
    assert report.errors == []
    assert report.files_changed == len(notes_on_disk(vault_copy))
    assert report.model is None
    assert report.embed_error and "/nonexistent" in report.embed_error
    assert "cannot load" in report.embed_error
    assert report.passages_pending == n_passages > 0
    assert scalar(db_url, "SELECT count(*) FROM embeddings") == 0
    assert lexical.search("katsuobushi", mode="lexical", fresh=False, graph=False).hits

    # A small edit while no model is there: still lexical, still pending.
    (vault_copy / "Inbox.md").write_text("# Inbox\n\nNothing to file.\n", encoding="utf-8")
    pending_report = lexical.index()
    n_passages = scalar(db_url, "SELECT count(*) FROM passages")
    assert pending_report.passages_pending == n_passages

    real = make_app(vault_copy, model=model_dir)
    caught_up = real.index()
    assert caught_up.files_changed == 0
    assert caught_up.passages_embedded == n_passages
    assert caught_up.passages_pending == 0
    assert caught_up.embed_error is None
    assert scalar(db_url, "SELECT count(*) FROM embeddings WHERE part = 0") == n_passages


def test_model_change_adds_vectors_and_gc_prunes_old_ones(
    make_app, vault_copy: Path, db_url: str, model_dir: Path, tmp_path: Path
) -> None:
    from tests.model_factory import build_model

    other = build_model(vault_copy, tmp_path / "other-model", dim=32)
    first = make_app(vault_copy, model=model_dir)
    first.index()
    n_passages = scalar(db_url, "SELECT count(*) FROM passages")
    old_fp = scalar(db_url, "SELECT fingerprint FROM models")

    second = make_app(vault_copy, model=other)
    report = second.index()
    assert report.passages_embedded == n_passages
    assert report.passages_pending == 0
    per_model = dict(
        query(
            db_url,
            "SELECT m.fingerprint, count(e.hash) FROM models m"
            " LEFT JOIN embeddings e ON e.model = m.id AND e.part = 0 GROUP BY m.fingerprint",
        )
    )
    assert len(per_model) == 2
    assert per_model[old_fp] == n_passages  # the old model's vectors are kept
    new_fp = next(fp for fp in per_model if fp != old_fp)
    assert per_model[new_fp] == n_passages
    assert (
        scalar(
            db_url,
            "SELECT DISTINCT vector_dims(e.vec) FROM embeddings e JOIN models m ON m.id = e.model"
            " WHERE m.fingerprint = %s",
            (new_fp,),
        )
        == 32
    )

    # Without a working embedder, gc cannot tell which vectors are current: keeps them all.
    assert make_app(vault_copy, model="none").gc() == {
        "passages_removed": 0,
        "models_removed": 0,
        "calibrations_removed": 0,
    }
    assert scalar(db_url, "SELECT count(*) FROM models") == 2

    assert second.gc() == {"passages_removed": 0, "models_removed": 1, "calibrations_removed": 0}
    assert [r[0] for r in query(db_url, "SELECT fingerprint FROM models")] == [new_fp]
    assert scalar(db_url, "SELECT count(*) FROM embeddings WHERE part = 0") == n_passages
    assert second.gc() == {"passages_removed": 0, "models_removed": 0, "calibrations_removed": 0}
    # Switching back re-embeds everything for the first model.
    assert first.index().passages_embedded == n_passages


# --- interruption -----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.faults
def test_kill_9_converges_to_a_clean_index(
    db_url: str, new_db_url, model_dir: Path, tmp_path: Path
) -> None:
    n = 2 * PARALLEL_THRESHOLD
    vault = make_big_vault(tmp_path / "big", n)
    env = cli_env(db_url, tmp_path / "home", model_dir, RETRIEVER_EMBED_BATCH="16")
    watch = Watch(db_url)
    kills: list[str] = []

    def attempt(label: str, condition: Callable[[dict[str, int], float], bool]) -> None:
        watch.started_at = watch.conn.execute("SELECT clock_timestamp()").fetchone()[0]  # type: ignore[index]
        proc = start_index(vault, env)
        acted, state, elapsed = run_until(proc, watch, condition, kill_group)
        if acted:
            kills.append(label)
            print(f"kill -9 {label}: after {elapsed:.2f}s, state {state}")
        else:
            _, err = proc.communicate()
            print(f"{label}: finished first ({proc.returncode}) after {elapsed:.2f}s, {state}")
            assert proc.returncode in (0, 1), err.decode()[-2000:]

    try:
        # 1. First run, parallel path, killed once the first batch is committed.
        attempt("write phase (first run)", lambda s, t: s["written"] > 0)
        assert scalar(db_url, "SELECT count(*) FROM documents")  # the first batch committed
        # 2. Killed while embedding.
        attempt("embed phase", lambda s, t: s["embeddings"] > 0)
        # 3. Change many notes, delete, rename, add; kill early, mid-write, mid-embed.
        rng = random.Random(11)
        notes = big_vault_paths(vault)
        for i, path in enumerate(notes[: PARALLEL_THRESHOLD + 30]):
            path.write_text(big_note(i, n, rng, version=1), encoding="utf-8")
        for path in notes[-15:]:
            path.unlink()
        for k, path in enumerate(notes[-40:-25]):
            os.rename(path, path.parent / f"Renamed {k}.md")
        for k in range(10):
            (vault / "fresh").mkdir(exist_ok=True)
            (vault / "fresh" / f"New {k}.md").write_text(
                f"# New {k}\n\nA new note linking [[Note {k}]] and [[Renamed {k}]].\n",
                encoding="utf-8",
            )
        attempt("at 1.2 s", lambda s, t: t >= 1.2)
        attempt("write phase (incremental run)", lambda s, t: s["written"] > 0)
        attempt("embed phase (incremental run)", embedding_resumed())
    finally:
        watch.close()
    assert kills, "no kill landed while the indexer ran"

    # The next run completes...
    started = time.monotonic()
    code, data, stderr = run_cli(["index", str(vault), "--json"], env)
    took = time.monotonic() - started
    assert code == 0, stderr[-2000:]
    assert data["ok"] is True and data["interrupted"] is False
    assert data["passages_pending"] == 0
    assert data["files_seen"] == len(big_vault_paths(vault))
    # ...and equals a clean full index of the same files into a fresh database.
    reference_url = new_db_url()
    code, _, stderr = run_cli(
        ["index", str(vault), "--json", "--full"],
        cli_env(reference_url, tmp_path / "ref-home", model_dir),
    )
    assert code == 0, stderr[-2000:]
    got, want = snapshot(db_url), snapshot(reference_url)
    lost, duplicated = lost_and_duplicated(got, want)
    record(
        "kill -9 indexer group at each commit point",
        converged=not differences(got, want),
        lost=lost + duplicated,
        recovery_s=took,
        note=f"{len(kills)} kills, then one run",
    )
    assert_same_index(got, want)
    assert_stats_consistent(db_url)


@pytest.mark.faults
@pytest.mark.parametrize("target", ["process", "group"])
def test_ctrl_c_stops_with_a_summary_and_the_next_run_completes(
    db_url: str, model_dir: Path, tmp_path: Path, target: str
) -> None:
    """SIGINT to the indexer alone, or to its whole process group as a terminal's Ctrl-C
    does (fork server and workers included)."""
    n = 2 * PARALLEL_THRESHOLD
    vault = make_big_vault(tmp_path / "big", n)
    env = cli_env(db_url, tmp_path / "home", model_dir, RETRIEVER_EMBED_BATCH="8")
    watch = Watch(db_url)
    sig = os.kill if target == "process" else os.killpg
    try:
        proc = start_index(vault, env)
        acted, state, elapsed = run_until(
            proc, watch, lambda s, t: s["written"] > 0, lambda p: sig(p.pid, signal.SIGINT)
        )
        print(f"SIGINT ({target}) after {elapsed:.2f}s, state {state}")
        assert acted, "the indexer finished before the first batch was seen"
        out, err = proc.communicate(timeout=60)
    finally:
        watch.close()
    assert proc.returncode == 1, err.decode()[-3000:]
    data = json.loads(out)
    assert data["interrupted"] is True
    assert data["ok"] is False
    assert data["errors"] == []
    assert 0 < data["files_changed"] <= n
    assert "Traceback" not in err.decode()
    assert "interrupted" in err.decode()  # the log line, on stderr
    # Nothing half-written: every stored note is complete and the statistics are exact.
    assert_stats_consistent(db_url)

    started = time.monotonic()
    code, data, stderr = run_cli(["index", str(vault), "--json"], env)
    took = time.monotonic() - started
    assert code == 0, stderr[-2000:]
    assert data["interrupted"] is False
    assert data["files_seen"] == n
    assert data["passages_pending"] == 0
    stored = scalar(db_url, "SELECT count(*) FROM documents")
    record(
        f"Ctrl-C to the indexer ({target})",
        converged=stored == n,
        lost=abs(n - int(stored)),  # type: ignore[call-overload]
        recovery_s=took,
        note="then one run",
    )
    assert stored == n
    assert_stats_consistent(db_url)


def test_cli_json_and_exit_codes(
    db_url: str, vault_copy: Path, model_dir: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    expected = len(notes_on_disk(vault_copy))
    env = cli_env(db_url, home, model_dir)

    code, data, _ = run_cli(["index", str(vault_copy), "--json"], env)
    assert code == 0
    assert data["ok"] is True
    assert data["files_seen"] == data["files_changed"] == expected
    assert data["passages_pending"] == 0
    assert data["passages_embedded"] > 0
    assert data["interrupted"] is False and data["errors"] == []

    code, status, _ = run_cli(["status", str(vault_copy), "--json"], env)
    assert code == 0
    assert status["ok"] is True
    assert status["notes_on_disk"] == status["notes_indexed"] == expected
    assert status["notes_changed"] == status["notes_deleted"] == 0
    assert status["passages_pending"] == 0
    assert status["passages"] == scalar(db_url, "SELECT count(*) FROM passages")
    assert status["chunks"] == scalar(db_url, "SELECT count(*) FROM chunks")
    assert status["model_error"] is None
    assert len(status["stored_models"]) == 1
    assert status["last_index"]["vault"] == str(vault_copy.resolve())
    assert status["database"].startswith("postgresql://")

    # No model: the index is complete lexically, vectors are pending -> exit 1, logs on stderr.
    lexical = cli_env(db_url, home, "none")
    code, data, stderr = run_cli(["index", str(vault_copy), "--json"], lexical)
    assert code == 1
    assert data["ok"] is False
    assert data["files_changed"] == 0
    assert data["passages_pending"] == status["passages"]
    assert "turned off" in data["embed_error"]
    assert "embedder unavailable" in stderr
    code, st, _ = run_cli(["status", str(vault_copy), "--json"], lexical)
    assert code == 1
    assert st["ok"] is False and st["model_error"]

    # A changed note makes status degraded until the next index run.
    (vault_copy / "Inbox.md").write_text("# Inbox\n\nEmpty.\n", encoding="utf-8")
    code, st, _ = run_cli(["status", str(vault_copy), "--json"], env)
    assert code == 1
    assert st["notes_changed"] == 1
    assert st["notes_indexed"] == expected - 1

    # A missing vault fails cleanly, as JSON.
    code, data, _ = run_cli(["index", str(tmp_path / "nope"), "--json"], env)
    assert code == 2
    assert data["ok"] is False and "not found" in data["error"]


# --- bulk load (first index of a big vault) ---------------------------------------------


def _empty_index(db_url: str) -> None:
    """Back to a database that has never indexed anything (schema kept)."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("TRUNCATE documents, passages, lexicon, links, chunks CASCADE")
        conn.execute("UPDATE lex_stats SET n_chunks = 0, sum_len = 0")
        conn.execute("DELETE FROM meta")


def test_bulk_load_gives_the_same_index_as_note_by_note(
    make_app, vault_copy: Path, db_url: str, pg_server_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first index above BULK_THRESHOLD drops the secondary indexes, counts term
    frequencies once at the end and compacts: the result equals the row-by-row build."""
    from retriever import index as index_module

    monkeypatch.setattr(index_module, "BULK_THRESHOLD", 10**9)
    make_app(vault_copy).index()
    want = snapshot(db_url)
    _empty_index(db_url)
    monkeypatch.setattr(index_module, "BULK_THRESHOLD", 1)
    report = make_app(vault_copy).index()
    assert report.errors == []
    assert "bulk_indexes" in report.phases
    assert_same_index(snapshot(db_url), want)
    assert_stats_consistent(db_url)
    indexes = {r[0] for r in query(db_url, "SELECT indexname FROM pg_indexes")}
    assert set(store.SECONDARY_INDEXES) <= indexes
    assert scalar(db_url, "SELECT value FROM meta WHERE key = %s", (store.BULK_KEY,)) is False


def test_a_bulk_load_that_died_is_repaired_by_the_next_run(
    make_app, vault_copy: Path, db_url: str
) -> None:
    """Killed mid-load: indexes dropped, term counts never made. The next run rebuilds both
    before writing anything, so the incremental bookkeeping starts from exact counts."""
    app = make_app(vault_copy)
    app.index()
    with psycopg.connect(db_url) as conn:
        store.begin_bulk(conn)  # what a killed bulk load leaves behind, counts included
        conn.execute("UPDATE lexicon SET df = 0")
        conn.commit()
    (vault_copy / "Inbox.md").write_text("# Inbox\n\nA brand new sentence.\n", encoding="utf-8")
    report = app.index()
    assert report.errors == []
    assert_stats_consistent(db_url)
    indexes = {r[0] for r in query(db_url, "SELECT indexname FROM pg_indexes")}
    assert set(store.SECONDARY_INDEXES) <= indexes


def test_repeated_links_are_one_row_with_a_count(make_app, vault_copy: Path, db_url: str) -> None:
    (vault_copy / "Repeats.md").write_text(
        "# Repeats\n\nSee [[Dashi]].\n\nAnd again [[Dashi]], [[Dashi]].\n", encoding="utf-8"
    )
    make_app(vault_copy).index()
    rows = query(
        db_url,
        "SELECT l.target, l.line, l.n FROM links l JOIN documents d ON d.id = l.doc_id"
        " WHERE d.path = 'Repeats.md'",
    )
    assert rows == [("Dashi", 3, 3)]


def test_hnsw_index_is_built_once_past_the_threshold_and_search_agrees(
    make_app,
    vault_copy: Path,
    db_url: str,
    model_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from retriever import index as index_module

    app = make_app(vault_copy, model=model_dir)
    monkeypatch.setattr(index_module, "HNSW_THRESHOLD", 10**9)
    app.index()
    hnsw = "SELECT count(*) FROM pg_indexes WHERE starts_with(indexname, 'embeddings_hnsw_m')"
    assert scalar(db_url, hnsw) == 0  # below the threshold: exact search only
    exact = [h.path for h in app.search("backup snapshots", mode="semantic", fresh=False).hits]

    monkeypatch.setattr(index_module, "HNSW_THRESHOLD", 5)
    building = "building the HNSW index"
    (vault_copy / "new.md").write_text("# New\n\nA note that makes the run write.\n", "utf-8")
    with caplog.at_level(logging.INFO, logger="retriever.index"):
        assert app.index().errors == []
        assert scalar(db_url, hnsw) == 1 and building in caplog.text
        options = "SELECT reloptions FROM pg_class WHERE starts_with(relname, 'embeddings_hnsw_m')"
        assert scalar(db_url, options) == [
            f"m={index_module.HNSW_M}",
            f"ef_construction={index_module.HNSW_EF_CONSTRUCTION}",
        ]
        # Whole-passage vectors only: windows are rescored, never searched through it.
        indexdef = (
            "SELECT indexdef FROM pg_indexes WHERE starts_with(indexname, 'embeddings_hnsw_m')"
        )
        assert "(part = 0)" in scalar(db_url, indexdef)
        caplog.clear()
        (vault_copy / "new.md").write_text("# New\n\nEdited again.\n", "utf-8")
        assert app.index().errors == []  # a later run finds the index there: no rebuild
        assert scalar(db_url, hnsw) == 1 and building not in caplog.text
    approx = [h.path for h in app.search("backup snapshots", mode="semantic", fresh=False).hits]
    assert approx[:3] == exact[:3]  # the same best notes with the index in place


def _statistics_rows(url: str, table: str) -> int:
    n = scalar(url, "SELECT count(*) FROM pg_stats WHERE tablename = %s", (table,))
    assert isinstance(n, int)
    return n


def test_an_index_run_gives_the_planner_statistics_for_the_vectors(
    make_app, vault_copy: Path, db_url: str, model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without them the planner takes a model's vectors for a handful of rows. A
    command's embedded server rarely lives to autovacuum's first look, so the run that
    stores the vectors analyzes their tables (last_analyze: ours, not autovacuum's); a
    run that stores a few more does not."""
    from retriever import planner_stats

    analyzed = (
        "SELECT relname, last_analyze FROM pg_stat_user_tables"
        " WHERE relname IN ('embeddings', 'windows') ORDER BY relname"
    )
    app = make_app(vault_copy, model=model_dir)
    assert app.index().passages_embedded > 0
    first = dict(query(db_url, analyzed))
    assert set(first) == {"embeddings", "windows"} and None not in first.values()
    rows = scalar(db_url, "SELECT reltuples FROM pg_class WHERE relname = 'embeddings'")
    assert rows == scalar(db_url, "SELECT count(*) FROM embeddings")

    monkeypatch.setattr(planner_stats, "ANALYZE_MIN_ROWS", 10**6)  # a small change
    (vault_copy / "new.md").write_text("# New\n\nA passage of its own to embed.\n", "utf-8")
    assert app.index().passages_embedded == 1
    assert dict(query(db_url, analyzed)) == first

    # Vectors an older version stored and never analyzed (an index build counted the
    # rows, no statistics): a run with nothing to embed, in a new process, which does not
    # load the model, gathers them.
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("DELETE FROM pg_statistic WHERE starelid = 'embeddings'::regclass")
    assert _statistics_rows(db_url, "embeddings") == 0
    report = make_app(vault_copy, model=model_dir).index()
    assert report.passages_embedded == 0 and report.files_changed == 0
    assert _statistics_rows(db_url, "embeddings") > 0
    assert dict(query(db_url, analyzed))["embeddings"] > first["embeddings"]


def test_an_index_run_marks_the_vectors_all_visible(
    make_app, vault_copy: Path, db_url: str, model_dir: Path
) -> None:
    """Counting the passages that lack a vector (every run) is an index-only scan, which
    reads the table for every page not marked all-visible; a command's server rarely lives
    to autovacuum's first look, so the run that stores the vectors vacuums them, and so
    does a later run that finds them unmarked and never vacuumed (an index an older
    version built)."""
    marked = "SELECT relallvisible, relpages FROM pg_class WHERE relname = 'embeddings'"
    vacuumed = "SELECT last_vacuum FROM pg_stat_user_tables WHERE relname = 'embeddings'"
    assert make_app(vault_copy, model=model_dir).index().passages_embedded > 0
    visible, pages = query(db_url, marked)[0]
    assert pages > 0 and visible == pages
    first = scalar(db_url, vacuumed)
    assert first is not None

    assert make_app(vault_copy, model=model_dir).index().files_changed == 0
    assert scalar(db_url, vacuumed) == first  # marked already: no vacuum again

    with psycopg.connect(db_url, autocommit=True) as conn:  # unmarked, but vacuumed once
        conn.execute("UPDATE pg_class SET relallvisible = 0 WHERE relname = 'embeddings'")
    assert make_app(vault_copy, model=model_dir).index().files_changed == 0
    assert scalar(db_url, vacuumed) == first  # not on every run some pages stay unmarked

    with psycopg.connect(db_url, autocommit=True) as conn:  # as an older version left it
        conn.execute("SELECT pg_stat_reset_single_table_counters('embeddings'::regclass)")
    assert scalar(db_url, vacuumed) is None
    report = make_app(vault_copy, model=model_dir).index()
    assert report.passages_embedded == 0 and report.files_changed == 0
    assert query(db_url, marked)[0] == (pages, pages)
    assert scalar(db_url, vacuumed) is not None


def test_a_vault_changed_by_later_runs_gets_fresh_statistics(
    make_app, vault_copy: Path, db_url: str
) -> None:
    """The first index analyzes what it loaded. A later run that adds or removes 50
    chunks plus a tenth of them analyzes the notes' tables again (a command's server
    rarely lives to autovacuum's first look); a run that changes fewer does not."""
    analyzed = (
        "SELECT relname, last_analyze FROM pg_stat_user_tables WHERE relname IN"
        " ('chunks', 'passages', 'documents', 'lexicon', 'links') ORDER BY relname"
    )

    def due() -> int:  # the changed chunks that call for statistics now
        chunks = scalar(db_url, "SELECT count(*) FROM chunks")
        assert isinstance(chunks, int)
        return int(ANALYZE_MIN_ROWS + ANALYZE_SHARE * chunks) + 1

    app = make_app(vault_copy)
    app.index()
    first = dict(query(db_url, analyzed))
    assert len(first) == 5 and None not in first.values()
    grown = 2 * due()  # one chunk each
    for i in range(grown):
        (vault_copy / f"grown-{i}.md").write_text(f"# Grown {i}\n\nNote {i} of many.\n", "utf-8")
    assert app.index().chunks_added == grown
    second = dict(query(db_url, analyzed))
    assert [t for t in first if not second[t] > first[t]] == []

    # Edits replace each note's chunk: 2 changed rows a note, over 50, under the share.
    edited = ANALYZE_MIN_ROWS // 2 + 1
    assert 2 * edited < due()
    for i in range(edited):
        (vault_copy / f"grown-{i}.md").write_text(f"# Grown {i}\n\nEdited {i}.\n", "utf-8")
    assert app.index().files_changed == edited
    assert dict(query(db_url, analyzed)) == second

    removed = due()  # removing as many analyzes too (under half the notes: no --force)
    for i in range(removed):
        (vault_copy / f"grown-{i}.md").unlink()
    assert app.index().chunks_removed == removed
    assert dict(query(db_url, analyzed))["chunks"] > second["chunks"]


def test_statistics_that_cannot_be_gathered_never_fail_the_run(
    make_app,
    vault_copy: Path,
    db_url: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An ANALYZE that fails (a lock or statement timeout on a shared server; here a
    table that is not there) is a warning: the run's notes and links are kept."""
    from retriever import index as index_module

    monkeypatch.setattr(index_module, "NOTE_TABLES", "no_such_table")
    with caplog.at_level(logging.WARNING, logger="retriever.index"):
        report = make_app(vault_copy).index()
    assert report.errors == [] and report.files_changed > 0
    assert "could not gather planner statistics for chunks" in caplog.text
    assert scalar(db_url, "SELECT count(*) FROM documents") == report.files_changed
    assert scalar(db_url, "SELECT count(*) FROM links WHERE resolved IS NOT NULL") > 0


def test_an_index_run_leaves_nothing_in_the_gin_pending_lists(
    make_app, vault_copy: Path, db_url: str
) -> None:
    """Rows written after a GIN index's build wait in its pending list, which every scan of
    the index reads in full: a run below the bulk threshold (the first index of this
    vault, then an edit, a new note and a deletion) moves them into the index's tree.
    ``gin_clean_pending_list`` returns the pages it had to move: none."""
    flush = (
        "SELECT gin_clean_pending_list('chunks_terms_gin'),"
        " gin_clean_pending_list('documents_tags_gin')"
    )
    app = make_app(vault_copy)
    assert app.index().files_changed > 0
    assert query(db_url, flush) == [(0, 0)]
    home = vault_copy / "Home.md"
    home.write_text(home.read_text("utf-8") + "\nAn added line about kiwis.\n", "utf-8")
    (vault_copy / "new-note.md").write_text("---\ntags: [fresh]\n---\n# New\n\nMangoes.\n")
    assert app.index().files_changed == 2
    assert query(db_url, flush) == [(0, 0)]
    (vault_copy / "new-note.md").unlink()
    assert app.index().files_deleted == 1
    assert query(db_url, flush) == [(0, 0)]


def test_a_pending_list_that_cannot_be_flushed_never_fails_the_run(
    make_app,
    vault_copy: Path,
    db_url: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A role that does not own the index may not flush it: a warning, the notes kept
    (autovacuum flushes it later)."""
    from retriever import planner_stats

    monkeypatch.setattr(planner_stats, "GIN_INDEXES", ("no_such_index",))
    with caplog.at_level(logging.WARNING, logger="retriever.index"):
        report = make_app(vault_copy).index()
    assert report.errors == [] and report.files_changed > 0
    assert "could not flush the GIN indexes' pending lists" in caplog.text
    assert scalar(db_url, "SELECT count(*) FROM documents") == report.files_changed


def test_a_prepared_semantic_search_still_walks_the_hnsw_index(
    make_app, vault_copy: Path, model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long-lived process (MCP server, resident service) prepares a statement from its
    sixth run on a connection, and Postgres may then settle on a generic plan. The partial
    HNSW index (WHERE model = <id>) must suit that plan too: with the model id as a
    parameter it did not, and such searches became exact scans."""
    from retriever import index as index_module
    from retriever.vector import vector_search

    app = make_app(vault_copy, model=model_dir)
    monkeypatch.setattr(index_module, "HNSW_THRESHOLD", 5)
    assert app.index().errors == []
    embedder, _ = app.embedder()
    assert embedder is not None
    query = embedder.embed(["backup snapshots"])[0]
    scans = (
        "SELECT coalesce(sum(idx_scan), 0) FROM pg_stat_user_indexes"
        " WHERE starts_with(indexrelname, 'embeddings_hnsw_m')"
    )
    with app.db.connection() as conn:
        row = store.model_row(conn, embedder.fingerprint)
        assert row is not None
        before = conn.execute(scans).fetchone()
        threshold = conn.prepare_threshold
        conn.prepare_threshold = 0  # prepared at once, as after five runs
        try:
            conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            conn.execute("SET LOCAL enable_sort = off")  # a tiny table: no sort if avoidable
            hits = vector_search(conn, *row, query, limit=5)
        finally:
            conn.prepare_threshold = threshold
        conn.execute("SELECT pg_stat_force_next_flush()")
        conn.commit()
        conn.execute("SELECT pg_stat_clear_snapshot()")
        after = conn.execute(scans).fetchone()
        conn.commit()
    assert hits and before is not None and after is not None
    assert after[0] > before[0]


def test_pending_counts_agree_with_the_passages_that_lack_a_vector(
    make_app, vault_copy: Path, model_dir: Path
) -> None:
    app = make_app(vault_copy, model=model_dir)

    def counts() -> tuple[int, int]:
        embedder, _ = app.embedder()
        assert embedder is not None
        with app.db.connection() as conn:
            row = store.model_row(conn, embedder.fingerprint)
            assert row is not None
            return store.count_pending(conn, row[0]), len(store.pending_hashes(conn, row[0]))

    app.index(embed_limit=5)  # a few vectors, most passages pending
    fast, exact = counts()
    assert fast == exact > 0
    app.index()
    assert counts() == (0, 0)
    (vault_copy / "Home.md").unlink()  # its passages and their vectors go together
    (vault_copy / "Inbox.md").write_text("# Inbox\n\nA new passage to embed.\n", "utf-8")
    app.index(embed=False)
    assert counts() == (1, 1)


def test_gc_after_an_edit_spares_shared_passages_and_a_dead_run_gets_a_full_gc(
    make_app, vault_copy: Path, db_url: str
) -> None:
    body = "## Quokkas\n\nA paragraph two notes share word for word, about quokkas.\n"
    (vault_copy / "Twin A.md").write_text(body, "utf-8")
    (vault_copy / "Twin B.md").write_text(body, "utf-8")
    app = make_app(vault_copy)
    app.index()
    shared = set(passage_hashes_of(db_url, "Twin A.md")) & set(
        passage_hashes_of(db_url, "Twin B.md")
    )
    assert shared
    (vault_copy / "Twin A.md").write_text("## Quokkas\n\nNow about wombats.\n", "utf-8")
    report = app.index()
    assert report.passages_collected == 0  # Twin B still holds the shared passage
    assert (
        scalar(db_url, "SELECT count(*) FROM passages WHERE hash = ANY(%s)", (list(shared),)) == 1
    )
    # An orphan no run dropped is left to the next full GC ...
    orphan = b"\x01" * 32
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO passages (hash, ztext, context, tokens) VALUES (%s, %s, '', 1)",
            (orphan, pack("lost")),
        )
    (vault_copy / "Twin B.md").write_text("## Quokkas\n\nNow about numbats.\n", "utf-8")
    report = app.index()
    assert report.passages_collected == 1  # the shared passage, orphaned now
    assert scalar(db_url, "SELECT count(*) FROM passages WHERE hash = %s", (orphan,)) == 1
    # ... which a run that finds an earlier one died after writing does, changes or not.
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("UPDATE meta SET value = 'true'::jsonb WHERE key = 'gc_pending'")
    report = app.index()
    assert report.files_changed == 0 and report.passages_collected == 1
    assert scalar(db_url, "SELECT count(*) FROM passages WHERE hash = %s", (orphan,)) == 0
    assert scalar(db_url, "SELECT value FROM meta WHERE key = 'gc_pending'") is False


def test_an_edit_embeds_what_its_note_holds_and_what_earlier_runs_left(
    make_app, vault_copy: Path, model_dir: Path
) -> None:
    app = make_app(vault_copy, model=model_dir)
    app.index(embed_limit=5)
    left = app.index(embed=False).passages_pending
    assert left > 0
    note = vault_copy / "Inbox.md"
    note.write_text("# Inbox\n\nA fresh thought about quokkas.\n", "utf-8")
    report = app.index()  # the new passage, and everything earlier runs left
    assert report.passages_pending == 0 and report.passages_embedded > 1
    note.write_text("# Inbox\n\nAnother thought, about wombats.\n", "utf-8")
    report = app.index()  # found among the note's own passages
    assert report.passages_embedded == 1 and report.passages_pending == 0
    embedder, _ = app.embedder()
    assert embedder is not None
    with app.db.connection() as conn:
        row = store.model_row(conn, embedder.fingerprint)
        assert row is not None
        assert store.pending_hashes(conn, row[0], among_paths=["Inbox.md"]) == []


def test_a_batch_is_written_once_it_holds_enough_chunks_and_links_stream_alike(
    make_app, vault_copy: Path, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches bounded by chunks (not only by notes) and links resolved from a server-side
    cursor give the same index as one batch; no batch holds more notes than it must."""
    from retriever import index as index_module

    make_app(vault_copy).index()
    want = snapshot(db_url)
    _empty_index(db_url)
    batches: list[list[int]] = []  # chunks of each note, per batch written
    real_write = store.write_documents

    def counted(conn: psycopg.Connection, docs: list[object], **kw: object) -> object:
        batches.append([len(d.chunks) for d in docs])  # type: ignore[attr-defined]
        return real_write(conn, docs, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(index_module, "WRITE_BATCH_CHUNKS", 5)
    monkeypatch.setattr(store, "write_documents", counted)
    report = make_app(vault_copy).index()
    batches = [b for b in batches if b]
    assert report.errors == [] and len(batches) > 3
    # A batch is written as soon as it reaches the cap: only its last note crosses it.
    assert all(sum(b[:-1]) < 5 for b in batches)
    assert sum(map(sum, batches)) == report.chunks_added
    assert_same_index(snapshot(db_url), want)
    assert_stats_consistent(db_url)


def test_a_big_run_hands_its_freed_memory_back_and_a_small_one_does_not_try(
    make_app, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retriever import index as index_module

    vault = make_big_vault(tmp_path / "big", PARALLEL_THRESHOLD)
    calls: list[str] = []
    monkeypatch.setattr(index_module, "release_memory", lambda: calls.append("trim"))
    app = make_app(vault)
    assert app.index().files_changed == PARALLEL_THRESHOLD
    assert calls == ["trim"]  # after the write phase; no embedding pass here
    (vault / "extra.md").write_text("# Extra\n\nOne more note.\n", encoding="utf-8")
    assert app.index().files_changed == 1
    assert calls == ["trim"]
    monkeypatch.undo()
    index_module.release_memory()  # glibc: trims; elsewhere: does nothing, never raises


@pytest.mark.parametrize(("long_lived", "built_by_the_edit"), [(False, 1), (True, 0)])
def test_a_long_lived_app_builds_the_link_resolver_before_the_first_edit(
    make_app,
    vault_copy: Path,
    monkeypatch: pytest.MonkeyPatch,
    long_lived: bool,
    built_by_the_edit: int,
) -> None:
    """The resident service's first edit does not wait for the link resolver (0.17 s of
    0.33 s on win32-17k): after an index run a long-lived app builds it in the background,
    and the edit's run reuses it. A one-off command leaves it to the edit."""
    from retriever import index as index_module

    make_app(vault_copy).index()
    monkeypatch.setattr(index_module, "_RESOLVERS", {})  # a process that did not index
    app = make_app(vault_copy)
    app.long_lived = long_lived
    app.index()  # nothing changed: no link to resolve
    if app._links_warming is not None:
        app._links_warming.join(timeout=60)
    assert (app._links_warming is not None) == long_lived
    built: list[int] = []
    real = index_module.LinkResolver

    def counted(*args: object, **kwargs: object) -> object:
        built.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(index_module, "LinkResolver", counted)
    note = vault_copy / "Home.md"  # it links to other notes
    note.write_text(note.read_text(encoding="utf-8") + "\nOne more line.\n", encoding="utf-8")
    report = app.index()
    assert report.files_changed == 1 and report.errors == []
    assert len(built) == built_by_the_edit


SCOPED_VAULT = {
    "Café.md": "# Café\n\nCoffee.\n",
    "Équipe.md": "# Équipe\n\nTeam.\n",
    "Re\u0301sume\u0301.md": "# CV\n\nA file name in NFD, as macOS writes it.\n",
    "ref/Paper.md": "# Paper\n\nP.\n",
    "ref/Draft.md": "# Draft\n\nD.\n",
    "people/Bob.md": "---\naliases: [Robert, '  Bobby ']\n---\n# Bob\n\nB.\n",
    "projects/Alpha.md": "---\naliases: [Project A, '  Padded Alias ']\n---\n# Alpha\n\nA.\n",
    "U.md": "---\naliases: [Über]\n---\n# U\n\nU.\n",
    "archive/old/Shared.md": "# Shared\n\nOld.\n",
    "deep/nested/Shared.md": "# Shared\n\nNested.\n",
    "notes/Shared.md": "# Shared\n\nBeside the source.\n",
    "dendron.topic.md": "# Topic\n\nT.\n",
    "TARGET.md": "# Upper\n\nU.\n",
    "Target.md": "# Lower\n\nL.\n",
    "notes/Source.md": "# Source\n\nNothing linked yet.\n",
    **{f"filler/Note {i}.md": f"# Note {i}\n\nFiller {i}.\n" for i in range(20)},
}
SCOPED_LINKS = {  # link in notes/Source.md -> the note it resolves to (None: unresolved)
    "[[Cafe\u0301]]": "Café.md",
    "[[équipe]]": "Équipe.md",
    "[[Résumé]]": "Re\u0301sume\u0301.md",
    "[[robert]]": "people/Bob.md",
    "[[Bobby]]": "people/Bob.md",
    "[p](../ref/Paper.md)": "ref/Paper.md",  # only its path names it
    "[d](../ref/Draft)": "ref/Draft.md",  # ... without .md
    "[[project a]]": "projects/Alpha.md",
    "[[Padded Alias]]": "projects/Alpha.md",
    "[[über]]": "U.md",
    "[[ÜBER]]": "U.md",
    "[[old/Shared]]": "archive/old/Shared.md",
    "[[nested/shared.md]]": "deep/nested/Shared.md",
    "[[Shared]]": "notes/Shared.md",
    "[x](../projects/Alpha.md)": "projects/Alpha.md",
    "[y](Alpha.md)": "projects/Alpha.md",
    "[[a label|dendron.topic]]": "dendron.topic.md",
    "[[target]]": "TARGET.md",
    "[[Note 3]]": "filler/Note 3.md",
    "[[Missing]]": None,
}


def test_an_edit_resolves_its_links_against_only_the_notes_they_name(
    make_app: Callable[..., Retriever], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process with no link resolver yet (a one-off command) resolves an edited note's
    links against the notes they can name, read by key, not every note of the vault; the
    targets are those a resolution over the whole vault gives (non-ASCII names and aliases,
    padded aliases, folder suffixes, relative links, Dendron labels, case)."""
    from retriever import index as index_module

    vault = tmp_path / "scoped"
    for rel, text in SCOPED_VAULT.items():
        (vault / rel).parent.mkdir(parents=True, exist_ok=True)
        (vault / rel).write_text(text, encoding="utf-8")
    app = make_app(vault)
    app.index()
    monkeypatch.setattr(index_module, "_RESOLVERS", {})  # a process that did not index
    sizes: list[int] = []
    real = index_module.LinkResolver

    def counted(paths: list[str], *args: object) -> object:
        sizes.append(len(paths))
        return real(paths, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(index_module, "LinkResolver", counted)
    source = vault / "notes" / "Source.md"
    source.write_text("# Source\n\n" + "\n".join(SCOPED_LINKS) + "\n", encoding="utf-8")
    report = app.index()
    assert report.files_changed == 1 and report.errors == []
    assert sizes and max(sizes) < len(SCOPED_VAULT) // 2  # not every note was read
    with app.db.connection() as conn:
        got = dict(
            conn.execute(
                "SELECT l.target || coalesce('|' || l.alias, ''), d.path FROM links l"
                " JOIN documents s ON s.id = l.doc_id LEFT JOIN documents d ON d.id = l.resolved"
                " WHERE s.path = 'notes/Source.md'"
            ).fetchall()
        )
        monkeypatch.setattr(index_module, "LinkResolver", real)
        again = index_module.IndexReport(vault=str(vault))
        index_module._resolve_links(conn, again, None, "whole vault")  # every note read
        conn.commit()
        whole = dict(
            conn.execute(
                "SELECT l.target || coalesce('|' || l.alias, ''), d.path FROM links l"
                " JOIN documents s ON s.id = l.doc_id LEFT JOIN documents d ON d.id = l.resolved"
                " WHERE s.path = 'notes/Source.md'"
            ).fetchall()
        )
    assert got == whole
    assert sorted(got.values(), key=str) == sorted(SCOPED_LINKS.values(), key=str)
    assert report.links_resolved == len(SCOPED_LINKS) - 1 and report.links_unresolved == 1


UNGUARDED = """
from retriever.app import Retriever
from retriever.config import Settings

report = Retriever(Settings(vault={vault!r}, home={home!r})).index()
print("indexed", report.files_changed)
"""


def test_a_script_without_the_main_guard_fails_instead_of_waiting_forever(
    db_url: str, tmp_path: Path
) -> None:
    """Workers import the caller's main module before they parse notes. Without the
    ``__main__`` guard each would start an index run of its own and wait for the lock
    the parent holds, while the parent waits for them: the script must end, and say why."""
    vault = make_big_vault(tmp_path / "big", PARALLEL_THRESHOLD)
    script = tmp_path / "unguarded.py"
    script.write_text(UNGUARDED.format(vault=str(vault), home=str(tmp_path / "home")), "utf-8")
    done = subprocess.run(
        [sys.executable, str(script)],
        env=cli_env(db_url, tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode != 0
    assert "indexed" not in done.stdout
    assert 'if __name__ == "__main__":' in done.stderr


def test_a_folder_that_cannot_be_read_keeps_its_notes_and_says_so(
    make_app, tmp_path: Path, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether its notes are still there is unknown: they stay indexed as they were, and
    the run reports an error (exit 1) instead of deleting them. The error is raised here:
    the tests run as root, who reads any folder."""
    vault = tmp_path / "v"
    for rel in ("a.md", "locked/b.md", "locked/deep/c.md"):
        (vault / rel).parent.mkdir(parents=True, exist_ok=True)
        (vault / rel).write_text(f"# {rel}\n\nText of {rel} about gardens.\n", encoding="utf-8")
    app = make_app(vault)
    assert app.index().errors == []
    refuse_folder(monkeypatch, "locked")
    (vault / "a.md").write_text("# a\n\nEdited.\n", encoding="utf-8")
    report = app.index()
    assert report.files_deleted == 0 and report.files_changed == 1
    assert report.errors == [
        "locked/: cannot read the folder (Permission denied); its indexed notes are kept as they were"
    ]
    assert doc_paths(db_url) == {"a.md", "locked/b.md", "locked/deep/c.md"}
    # A full re-derive (a new redactor, say) cannot reach them either: their stamps are
    # forgotten, so that they are derived again as soon as they can be read.
    full = app.index(full=True)
    assert full.files_deleted == 0 and full.errors == report.errors
    assert scalar(db_url, "SELECT count(*) FROM documents WHERE size = -1") == 2
    monkeypatch.undo()
    (vault / "locked" / "b.md").unlink()  # readable again: a real deletion is one
    again = make_app(vault).index()  # a command of its own walks the vault
    assert again.errors == [] and again.files_deleted == 1 and again.files_changed == 1
    assert doc_paths(db_url) == {"a.md", "locked/deep/c.md"}
    assert scalar(db_url, "SELECT count(*) FROM documents WHERE size = -1") == 0


def test_a_file_name_that_is_not_utf8_is_skipped_and_the_rest_indexed(
    make_app, tmp_path: Path, db_url: str
) -> None:
    vault = tmp_path / "v"
    vault.mkdir()
    (vault / "a.md").write_text("# a\n\nGardens.\n", encoding="utf-8")
    with open(os.fsencode(vault) + b"/\xff_bad.md", "wb") as fh:
        fh.write(b"# bad\n\nGardens too.\n")
    app = make_app(vault)
    report = app.index()
    assert report.errors == [
        "\\xff_bad.md: skipped, its name is not valid UTF-8 (rename it to index it)"
    ]
    assert doc_paths(db_url) == {"a.md"}
    assert app.index(touched={os.fsdecode(b"\xff_bad.md"), "a.md"}).errors == report.errors
    hits = app.search("gardens", fresh=True).hits
    assert [h.path for h in hits] == ["a.md"]
