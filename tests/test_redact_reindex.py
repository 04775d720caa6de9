"""A new redactor version re-redacts an existing index (real PostgreSQL).

The index stores its pipeline version (chunker, normaliser, redactor); when the redactor's
version changes, the next `index` re-derives every note even though no file changed, so a
secret an older redactor let through leaves the database.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from collections import Counter
from pathlib import Path

import psycopg
import pytest

from retriever import index, prepare, store
from retriever.passage_text import unpack
from retriever.redact import REDACTOR_VERSION

WORDS = "violet rocket maple ocean candle forest marble castle".split()


def passages(url: str) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT ztext FROM passages").fetchall()
        terms = conn.execute("SELECT term FROM lexicon").fetchall()
    return "\n".join([unpack(r[0]) for r in rows] + [r[0] for r in terms])


def test_a_new_redactor_version_re_redacts_the_stored_text(
    make_app, vault_copy: Path, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    phrase = "-".join(secrets.choice(WORDS) for _ in range(3)) + f"-{secrets.randbelow(90) + 10}"
    note = vault_copy / "Wifi.md"
    note.write_text(f"# Wifi\n\nThe guest network.\n\ncode wifi : {phrase}\n", encoding="utf-8")
    # An index written by an older redactor, one that did not know this form.
    monkeypatch.setattr(prepare, "redact", lambda text: (text, Counter()))
    old = index.PIPELINE_VERSION.replace(f"-r{REDACTOR_VERSION}", "-r0")
    assert old != index.PIPELINE_VERSION
    monkeypatch.setattr(index, "PIPELINE_VERSION", old)
    app = make_app(vault_copy)
    app.index()
    assert phrase in passages(db_url)

    monkeypatch.undo()  # the current redactor and its version
    report = app.index()
    assert report.full  # no file changed: the version alone re-derived every note
    stored = passages(db_url)
    assert phrase not in stored
    assert "code wifi : [REDACTED:password]" in stored
    assert report.redactions.get("password", 0) >= 1


def _row_versions(url: str) -> dict[str, tuple[str, str, int]]:
    """Each note's row version (xmin: the transaction that last wrote it), its chunks' row
    versions and its chunk count: a row the run rewrote has a new xmin."""
    with psycopg.connect(url, autocommit=True) as conn:
        # No GROUP BY on xmin: before PostgreSQL 18, xid can be hashed but not sorted.
        rows = conn.execute(
            "SELECT d.path, d.xmin::text, coalesce((SELECT string_agg(c.xmin::text, ','"
            " ORDER BY c.ordinal) FROM chunks c WHERE c.doc_id = d.id), ''),"
            " (SELECT count(*) FROM chunks c WHERE c.doc_id = d.id) FROM documents d"
        ).fetchall()
    return {path: (doc, chunks, int(n)) for path, doc, chunks, n in rows}


def _new_pipeline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The index was written by another pipeline (as after an upgrade)."""
    old = index.PIPELINE_VERSION
    monkeypatch.setattr(index, "PIPELINE_VERSION", old + "-next")


def test_a_new_pipeline_rewrites_only_the_notes_whose_output_moved(
    make_app, vault_copy: Path, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app(vault_copy)
    # One note holds a word that the next pipeline redacts and this one does not.
    inbox = vault_copy / "Inbox.md"
    inbox.write_text(inbox.read_text("utf-8") + "\nzeppelin\n", "utf-8")
    monkeypatch.setattr(prepare, "redact", lambda t: (t.replace("zeppelin", "[X]"), Counter()))
    app.index()
    before = _row_versions(db_url)
    assert len(before) > 10

    _new_pipeline(monkeypatch)  # and the word is redacted by the new one
    monkeypatch.setattr(
        prepare, "redact", lambda t: (t.replace("zeppelin", "[REDACTED:word]"), Counter())
    )
    report = app.index()
    assert report.full
    assert report.files_changed == 1 and report.files_touched == 0
    assert report.files_unchanged == len(before) - 1
    after = _row_versions(db_url)
    assert after["Inbox.md"][0] != before["Inbox.md"][0]  # rewritten
    assert all(after[p] == before[p] for p in before if p != "Inbox.md")  # not one row else
    assert "[REDACTED:word]" in passages(db_url) and "[X]" not in passages(db_url)


def test_a_new_pipeline_refreshes_a_touched_stamp_without_rewriting(
    make_app, vault_copy: Path, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app(vault_copy)
    app.index()
    before = _row_versions(db_url)
    note = vault_copy / "Inbox.md"
    later = note.stat().st_mtime_ns + 5_000_000_000
    os.utime(note, ns=(later, later))  # same bytes, new mtime
    _new_pipeline(monkeypatch)
    report = app.index()
    assert report.full and report.files_changed == 0 and report.files_touched == 1
    after = _row_versions(db_url)
    assert after["Inbox.md"][1:] == before["Inbox.md"][1:]  # its chunks were not rewritten
    with psycopg.connect(db_url, autocommit=True) as conn:
        [(mtime, sha)] = conn.execute(
            "SELECT mtime_ns, sha256 FROM documents WHERE path = 'Inbox.md'"
        )
    assert mtime == later and bytes(sha) == hashlib.sha256(note.read_bytes()).digest()
    assert app.index().files_changed == 0  # and the next run finds nothing to do


def test_full_and_digestless_notes_are_rewritten(
    make_app, vault_copy: Path, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app(vault_copy)
    app.index()
    first = _row_versions(db_url)
    # --full rewrites every note, whatever the index holds.
    report = app.index(full=True)
    assert report.files_changed == len(first)
    second = _row_versions(db_url)
    assert all(second[p][0] != first[p][0] for p in first)
    # Notes written before revision 0008 have no digest: a new pipeline rewrites them.
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("UPDATE documents SET derived = NULL WHERE path <> 'Inbox.md'")
        [(n_null,)] = conn.execute("SELECT count(*) FROM documents WHERE derived IS NULL")
    second = _row_versions(db_url)
    _new_pipeline(monkeypatch)
    report = app.index()
    assert report.files_changed == n_null == len(first) - 1
    third = _row_versions(db_url)
    assert third["Inbox.md"] == second["Inbox.md"]
    with psycopg.connect(db_url, autocommit=True) as conn:
        [(n_null,)] = conn.execute("SELECT count(*) FROM documents WHERE derived IS NULL")
    assert n_null == 0


def test_forgotten_and_unread_notes_are_read_and_written_again(
    make_app, vault_copy: Path, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app(vault_copy)
    app.index()
    with psycopg.connect(db_url, autocommit=True) as conn:
        store.forget_stamps(conn, ["Inbox.md"])  # as after a folder the walk could not read
    # A re-derivation that cannot read one note: its rows stay, and so must its doubt.
    real_read = prepare.read_regular

    def read(path: Path):  # type: ignore[no-untyped-def]
        if path.name == "Home.md":
            raise PermissionError(13, "Permission denied")
        return real_read(path)

    monkeypatch.setattr(prepare, "read_regular", read)
    _new_pipeline(monkeypatch)
    report = app.index()
    assert report.files_changed == 1  # the forgotten note: written anew, not only touched
    assert any(e.startswith("Home.md: cannot read") for e in report.errors)
    with psycopg.connect(db_url, autocommit=True) as conn:
        rows = dict(conn.execute("SELECT path, sha256 FROM documents").fetchall())
    assert (
        bytes(rows["Inbox.md"]) == hashlib.sha256((vault_copy / "Inbox.md").read_bytes()).digest()
    )

    monkeypatch.setattr(prepare, "read_regular", real_read)  # readable again, same mtime
    again = app.index()
    assert again.files_changed == 1 and not again.errors  # Home.md, read this time
    assert app.index().files_changed == 0


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one CPU: notes are parsed in process")
def test_a_new_pipeline_keeps_notes_through_the_parse_workers(
    make_app, tmp_path: Path, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A vault big enough for the worker processes: their verdicts (kept, touched,
    rewritten) come back through the pool as they do on a real vault."""
    from tests.test_index import PARALLEL_THRESHOLD, big_vault_paths, make_big_vault

    vault = make_big_vault(tmp_path / "big", PARALLEL_THRESHOLD)
    app = make_app(vault)
    app.index()
    before = _row_versions(db_url)
    notes = big_vault_paths(vault)
    notes[0].write_text(notes[0].read_text("utf-8") + "\nA new line.\n", "utf-8")
    later = notes[1].stat().st_mtime_ns + 5_000_000_000
    os.utime(notes[1], ns=(later, later))
    _new_pipeline(monkeypatch)
    report = app.index()
    assert report.full and (report.files_changed, report.files_touched) == (1, 1)
    assert report.files_unchanged == PARALLEL_THRESHOLD - 2
    after = _row_versions(db_url)
    edited = notes[0].relative_to(vault).as_posix()
    assert after[edited][0] != before[edited][0]
    assert sum(after[p] != before[p] for p in before) == 2  # the edit and the touched stamp


def test_status_and_health_say_when_a_new_pipeline_has_not_run_yet(
    make_app, vault_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After an upgrade that brings a new redactor, the stored text is the old one's until
    `retriever index` runs: status and health say so (a search never re-derives)."""
    from retriever.health import run_health

    app = make_app(vault_copy)
    app.index()
    assert not app.status().pipeline_behind
    assert run_health(app).facts["pipeline_behind"] is False

    _new_pipeline(monkeypatch)  # the upgrade
    assert app.status().pipeline_behind
    report = run_health(app)
    check = report.check("index")
    assert check is not None and check.status == "warn" and report.verdict == "degraded"
    assert "another indexing pipeline" in check.detail
    assert check.hint and "retriever index" in check.hint
    app.search("backup", mode="lexical")  # the freshness pass leaves it to `index`
    assert app.status().pipeline_behind

    app.index()
    assert not app.status().pipeline_behind
    index_check = run_health(app).check("index")
    assert index_check is not None and index_check.status == "ok"

    monkeypatch.undo()  # a run stopped before it recorded its pipeline: as due as a new one
    with psycopg.connect(app.db.url, autocommit=True) as conn:
        conn.execute("DELETE FROM meta WHERE key = 'pipeline_version'")
    assert app.status().pipeline_behind
    assert app.index().full and not app.status().pipeline_behind


def test_the_status_and_health_commands_say_it_too(
    make_app, vault_copy: Path, db_url: str, tmp_path: Path, model_dir: Path
) -> None:
    from tests.conftest import run_retriever

    make_app(vault_copy, model=model_dir).index()
    env = {**os.environ, "DATABASE_URL": db_url, "RETRIEVER_HOME": str(tmp_path / "home"),
           "RETRIEVER_SERVICE": "off", "RETRIEVER_EMBED_MODEL": str(model_dir)}  # fmt: skip
    assert run_retriever(["status", str(vault_copy), "--json"], env).returncode == 0
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("UPDATE meta SET value = '\"c0-n0-r0\"' WHERE key = 'pipeline_version'")
    status = run_retriever(["status", str(vault_copy), "--json"], env)
    assert status.returncode == 1 and json.loads(status.stdout)["pipeline_behind"] is True
    text = run_retriever(["status", str(vault_copy)], env)
    assert text.returncode == 1 and "derived by another indexing pipeline" in text.stdout
    health = run_retriever(["health", str(vault_copy), "--json"], env)
    data = json.loads(health.stdout)
    [index_check] = [c for c in data["checks"] if c["name"] == "index"]
    assert health.returncode == 1 and index_check["status"] == "warn"
    assert "retriever index" in index_check["hint"]
