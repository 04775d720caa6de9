"""One filter builder: the index's SQL and the files search's Python agree."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from retriever.app import Retriever
from retriever.doc_filter import DocFilter


def test_tags_match_themselves_and_nested_tags_only() -> None:
    f = DocFilter.of(tags=["#HomeLab", " ", "#"])
    assert f.tags == ("homelab",)
    assert f.accepts_note(None, ["homelab"]) and f.accepts_note(None, ["HomeLab/Backup"])
    assert not f.accepts_note(None, ["homelabs"]) and not f.accepts_note(None, [])
    # A tag is text, not a pattern: glob characters match only themselves.
    assert not DocFilter.of(tags=["home*"]).accepts_note(None, ["homelab"])
    assert not DocFilter.of(tags=["[h]omelab"]).accepts_note(None, ["homelab"])


def test_folder_type_and_time() -> None:
    f = DocFilter.of(folder="/homelab/", note_type="HowTo")
    assert f.folder == "homelab"
    assert f.accepts_file("homelab/Setup.md", 0) and not f.accepts_file("homelab2/x.md", 0)
    assert f.accepts_note("howto", []) and not f.accepts_note(None, [])
    after = DocFilter.of(modified_after=datetime(2024, 1, 1, tzinfo=UTC))
    assert after.modified_after_ns == 1_704_067_200 * 10**9
    assert after.accepts_file("a.md", after.modified_after_ns)
    assert not after.accepts_file("a.md", after.modified_after_ns - 1)
    assert DocFilter.of().sql() == ("", {})


@pytest.fixture
def indexed(make_app, vault_copy: Path) -> Retriever:
    app = make_app(vault_copy)
    app.index()
    return app


@pytest.mark.parametrize(
    ("spec", "some"),
    [
        ({"folder": "homelab"}, True),
        ({"folder": "cooking/"}, True),
        ({"tags": ["cooking"]}, True),
        ({"tags": ["COOKING", "daily"]}, True),
        ({"tags": ["cook%"]}, False),
        ({"note_type": "HOWTO"}, True),
        ({"folder": "homelab", "note_type": "incident"}, True),
        ({"modified_after": datetime(2000, 1, 1, tzinfo=UTC)}, True),
        ({"modified_after": datetime(2999, 1, 1, tzinfo=UTC)}, False),
    ],
)
def test_sql_and_python_select_the_same_notes(indexed: Retriever, spec: dict, some: bool) -> None:
    f = DocFilter.of(**spec)
    where, params = f.sql()
    with indexed.db.connection() as conn:
        rows = conn.execute("SELECT path, mtime_ns, note_type, tags FROM documents").fetchall()
        chosen = conn.execute(f"SELECT d.path FROM documents d WHERE {where}", params)
        by_sql = {r[0] for r in chosen.fetchall()}
    by_python = {
        p
        for p, mtime, kind, tags in rows
        if f.accepts_file(p, mtime) and f.accepts_note(kind, tags)
    }
    assert by_sql == by_python
    assert bool(by_sql) == some
