"""The derived digest of a prepared note (pure: no database): what a re-derivation compares
to decide whether a note's rows must be rewritten."""

from __future__ import annotations

import copy
import dataclasses
import os
import subprocess
import sys

from retriever import prepare
from retriever.chunk import Link
from retriever.prepare import PreparedChunk, PreparedDoc, prepare_text

NOTE = b"""---
title: Kettle
created: 2024-03-01
tags: [kitchen]
---
# Kettle

Descale it with citric acid every month. See [[Cleaning#Descaling]].

## Parts

The lid hinge is a spare part.
"""


def _prepared(raw: bytes = NOTE, *, mtime_ns: int = 1, path: str = "Kettle.md") -> PreparedDoc:
    return prepare_text(path, raw, size=len(raw), mtime_ns=mtime_ns, min_chars=1, max_chars=400)


def test_the_same_note_has_the_same_digest_whatever_its_stamp() -> None:
    first = _prepared()
    assert len(first.derived) == 32
    assert _prepared(mtime_ns=99).derived == first.derived
    assert prepare.derived_digest(first) == first.derived


def test_every_stored_part_of_a_note_moves_its_digest() -> None:
    base = _prepared().derived
    variants = {
        "body": NOTE.replace(b"every month", b"every week"),
        "link": NOTE.replace(b"#Descaling", b"#Scale"),
        "heading": NOTE.replace(b"## Parts", b"## Spares"),
        "tag": NOTE.replace(b"kitchen", b"home"),
        "date": NOTE.replace(b"2024-03-01", b"2024-03-02"),
        "lines": NOTE.replace(b"---\n# Kettle", b"---\n\n# Kettle"),
    }
    digests = {name: _prepared(raw).derived for name, raw in variants.items()}
    assert all(d != base for d in digests.values()), digests
    assert len(set(digests.values())) == len(digests)
    assert _prepared(path="Other.md").derived != base


def test_a_new_normaliser_or_store_format_moves_every_digest(monkeypatch) -> None:
    base = _prepared().derived
    monkeypatch.setattr(prepare, "DERIVED_FORMAT", prepare.DERIVED_FORMAT + 1)
    assert _prepared().derived != base
    monkeypatch.undo()
    form = prepare.LEXICAL_FORM
    monkeypatch.setattr(prepare, "LEXICAL_FORM", (form[0] + "x", *form[1:]))
    assert _prepared().derived != base


# What a chunk's row holds that its text's hash does not say, and what is derived from
# parts the digest holds already (the terms: text, headings, title, tags, normaliser).
CHUNK_FIELDS = {"ordinal", "passage_hash", "tokens", "heading_trail", "start_line", "end_line",
                "content_type"}  # fmt: skip
FROM_OTHER_PARTS = {"text", "context", "terms", "tfs", "length"}


def _changed(value: object) -> object:
    if isinstance(value, bool | None):
        return "x"
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, bytes):
        return bytes(32)
    if isinstance(value, list):
        return [*value, "x"]
    return f"{value}x"


def test_each_field_of_a_chunk_and_a_link_is_in_the_digest() -> None:
    doc = _prepared()
    assert doc.links and len(doc.chunks) > 1
    fields = {f.name for f in dataclasses.fields(PreparedChunk)}
    assert fields == CHUNK_FIELDS | FROM_OTHER_PARTS  # a new field must be placed here
    for name in sorted(CHUNK_FIELDS):
        other = copy.deepcopy(doc)
        setattr(other.chunks[1], name, _changed(getattr(other.chunks[1], name)))
        assert prepare.derived_digest(other) != doc.derived, name
    for link_field in dataclasses.fields(Link):
        other = copy.deepcopy(doc)
        old = getattr(other.links[0], link_field.name)
        other.links[0] = dataclasses.replace(other.links[0], **{link_field.name: _changed(old)})
        assert prepare.derived_digest(other) != doc.derived, link_field.name


# Every field of a prepared note: hashed, its file's stamp (compared apart), or not stored.
DOC_HASHED = {"path", "sha256", "title", "frontmatter", "tags", "aliases", "note_type",
              "created", "updated", "encoding", "chunks", "links"}  # fmt: skip
DOC_STAMP = {"size", "mtime_ns"}
DOC_NOT_STORED = {"redactions", "warnings", "derived"}


def test_each_field_of_a_note_is_hashed_or_said_why_not() -> None:
    doc = _prepared()
    fields = {f.name for f in dataclasses.fields(PreparedDoc)}
    assert fields == DOC_HASHED | DOC_STAMP | DOC_NOT_STORED  # a new field must be placed
    for name in sorted(DOC_HASHED - {"chunks", "links"}):
        other = copy.deepcopy(doc)
        value = getattr(other, name)
        setattr(other, name, {**value, "x": 1} if isinstance(value, dict) else _changed(value))
        assert prepare.derived_digest(other) != doc.derived, name


SET_NOTE = """
import sys
from retriever.prepare import prepare_text
raw = b"---\\ntags: !!set {kettle, descale, lid, hinge, spare, parts}\\n---\\n# Kettle\\n\\nText.\\n"
doc = prepare_text("K.md", raw, size=1, mtime_ns=1, min_chars=1, max_chars=400)
print(doc.derived.hex(), doc.tags)
"""


def test_a_yaml_set_gives_one_digest_whatever_the_hash_seed() -> None:
    """A YAML ``!!set`` is a Python set, whose order follows the process's hash seed: read
    in that order, the same note would be rewritten by every re-derivation."""
    seen = set()
    for seed in ("1", "2", "3", "4"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", SET_NOTE], capture_output=True, text=True, env=env, check=True
        )
        seen.add(done.stdout)
    assert len(seen) == 1, seen


def test_a_full_run_says_how_many_notes_it_rewrote(capsys) -> None:  # type: ignore[no-untyped-def]
    from retriever.cli import _print_index_report
    from retriever.index import IndexReport

    _print_index_report(IndexReport(vault="v", full=True, files_seen=40, files_unchanged=37,
                                    files_changed=3))  # fmt: skip
    shown = " ".join(capsys.readouterr().out.split())
    assert "every note read again, 3 rewritten" in shown
    assert "40 seen, 3 changed, 0 deleted, 37 unchanged" in shown
    _print_index_report(IndexReport(vault="v", files_seen=40, files_changed=1))
    assert "read again" not in capsys.readouterr().out
