"""A new redactor version re-redacts an existing index (real PostgreSQL).

The index stores its pipeline version (chunker, normaliser, redactor); when the redactor's
version changes, the next `index` re-derives every note even though no file changed, so a
secret an older redactor let through leaves the database.
"""

from __future__ import annotations

import secrets
from collections import Counter
from pathlib import Path

import psycopg
import pytest

from retriever import index, prepare
from retriever.redact import REDACTOR_VERSION

WORDS = "violet rocket maple ocean candle forest marble castle".split()


def passages(url: str) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT text FROM passages").fetchall()
        terms = conn.execute("SELECT term FROM lexicon").fetchall()
    return "\n".join(r[0] for r in rows + terms)


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
