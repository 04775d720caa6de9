"""Turn one note file into everything the index stores (pure: no database).

Runs in worker processes during big index runs, so it only takes and returns plain data.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import stat
import unicodedata
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

from retriever.budget import estimate_tokens
from retriever.chunk import Link, ParsedNote, parse_note
from retriever.lexical import (
    BODY_WEIGHT,
    HEADING_WEIGHT,
    NORMALISER_VERSION,
    TAG_WEIGHT,
    TITLE_WEIGHT,
    weighted_terms,
)
from retriever.redact import redact

log = logging.getLogger(__name__)


@dataclass(slots=True)
class PreparedChunk:
    ordinal: int
    passage_hash: bytes
    text: str
    context: str
    tokens: int
    heading_trail: list[str]
    start_line: int
    end_line: int
    content_type: str
    terms: list[str]
    tfs: list[float]
    length: float


@dataclass(slots=True)
class PreparedDoc:
    path: str
    size: int
    mtime_ns: int
    sha256: bytes
    title: str
    frontmatter: dict[str, object]
    tags: list[str]
    aliases: list[str]
    note_type: str | None
    created: str | None
    updated: str | None
    encoding: str
    chunks: list[PreparedChunk]
    links: list[Link]
    redactions: Counter[str] = field(default_factory=Counter)
    warnings: list[str] = field(default_factory=list)
    derived: bytes = b""  # derived_digest: what the index stores of this note, summed up


_UTF16_BOMS = {b"\xff\xfe": "utf-16-le", b"\xfe\xff": "utf-16-be"}


def decode_note(raw: bytes) -> tuple[str, str]:
    """Decode note bytes: UTF-16 with its BOM (Windows' "Unicode" text), UTF-8 (BOM
    stripped), else cp1252, else latin-1 (never fails)."""
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    elif (codec := _UTF16_BOMS.get(raw[:2])) and len(raw) % 2 == 0:
        try:
            return raw[2:].decode(codec), "utf-16"
        except UnicodeDecodeError:
            pass  # lone surrogates: not UTF-16 after all
    try:
        return raw.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    try:
        return raw.decode("cp1252"), "cp1252"
    except UnicodeDecodeError:
        return raw.decode("latin-1"), "latin-1"


def normalise_passage(text: str) -> str:
    """The text a passage is keyed by: NFC, trailing spaces dropped, outer blank lines trimmed."""
    lines = unicodedata.normalize("NFC", text).split("\n")
    return "\n".join(line.rstrip() for line in lines).strip("\n")


def passage_hash(normalised: str, context: str = "") -> bytes:
    key = f"{context}\x1f{normalised}" if context else normalised
    return hashlib.sha256(key.encode("utf-8")).digest()


def embedding_input(context: str, text: str) -> str:
    """What the embedder sees: the heading context first, so short passages keep their topic."""
    return f"{context}\n\n{text}" if context else text


def _stable_title(title: str, source: str) -> str | None:
    """The title when it lives in the file (frontmatter or H1), None when it is only the file
    name: a rename must not change what a passage is keyed by, or it would be re-embedded."""
    return None if source == "filename" else title


def _redact_file_name_title(note: ParsedNote, redactions: Counter[str]) -> None:
    """A title taken from the file's name (``github ghp_….md``) redacted as text is: it is
    stored, searched and embedded as the first heading of every chunk."""
    named, found = redact(note.title)
    if not found:
        return
    redactions.update(found)
    old, note.title = note.title, named
    note.chunks = [
        replace(c, heading_trail=(named, *c.heading_trail[1:]))
        if c.heading_trail and c.heading_trail[0] == old
        else c
        for c in note.chunks
    ]


def prepare_text(
    path: str,
    raw: bytes,
    *,
    size: int,
    mtime_ns: int,
    min_chars: int,
    max_chars: int,
) -> PreparedDoc:
    text, encoding, warnings = _decoded(path, raw)
    # Redact the whole note first (frontmatter and comments included): nothing unredacted
    # is parsed, stored or embedded. Line structure is preserved, so citations stay right.
    text, redactions = redact(text)
    note = parse_note(text, path, min_chars=min_chars, max_chars=max_chars)
    if note.title_source == "filename":  # the file's name is no part of the text redacted
        _redact_file_name_title(note, redactions)
    if note.frontmatter_error:
        warnings.append(f"{path}: frontmatter ignored ({note.frontmatter_error})")
    doc = PreparedDoc(
        path=path,
        size=size,
        mtime_ns=mtime_ns,
        sha256=hashlib.sha256(raw).digest(),
        title=note.title,
        frontmatter=note.frontmatter,
        tags=note.tags,
        aliases=note.aliases,
        note_type=note.note_type,
        created=note.created,
        updated=note.updated,
        encoding=encoding,
        chunks=_prepared_chunks(note),
        links=note.links,
        redactions=redactions,
        warnings=warnings,
    )
    doc.derived = derived_digest(doc)
    return doc


# Part of every derived digest: bump it when the store writes other rows from the same
# PreparedDoc, so that the next re-derivation rewrites every note.
DERIVED_FORMAT = 1
# What turns a chunk's texts into its terms: the normaliser, the field weights, and the
# Unicode tables its case folding and word pattern read (they move with Python).
LEXICAL_FORM = (
    NORMALISER_VERSION,
    TITLE_WEIGHT,
    HEADING_WEIGHT,
    TAG_WEIGHT,
    BODY_WEIGHT,
    unicodedata.unidata_version,
)


def derived_digest(doc: PreparedDoc) -> bytes:
    """A hash of everything the index stores of ``doc`` but its file's size and mtime:
    its bytes' hash, what was read from it, each chunk and each link. A run that re-derives
    every note (a new chunker, normaliser or redactor) rewrites only the notes whose digest
    moved, so an upgrade neither rewrites 17,000 unchanged notes nor doubles the tables."""
    described = [
        DERIVED_FORMAT, LEXICAL_FORM, doc.path, doc.sha256.hex(), doc.title, doc.frontmatter,
        doc.tags, doc.aliases, doc.note_type, doc.created, doc.updated, doc.encoding,
    ]  # fmt: skip
    # A chunk's terms are its text's, heading's, title's and tags' under the normaliser
    # (LEXICAL_FORM): hashing those, not the terms, keeps the digest cheap (1.3 % of a note's
    # preparation instead of 3.5 %).
    chunks = [
        [c.ordinal, c.passage_hash.hex(), c.tokens, c.heading_trail, c.start_line, c.end_line,
         c.content_type]
        for c in doc.chunks
    ]  # fmt: skip
    links = [(k.target, k.kind, k.line, k.anchor, k.alias) for k in doc.links]
    # default=str: the frontmatter's dates, as the store writes them (store._document_row)
    text = json.dumps([described, chunks, links], default=str)
    return hashlib.sha256(text.encode("ascii")).digest()


def _decoded(path: str, raw: bytes) -> tuple[str, str, list[str]]:
    """The note's text, the encoding it was read with, and what was odd about it."""
    text, encoding = decode_note(raw)
    warnings: list[str] = []
    if encoding not in ("utf-8", "utf-16"):  # the fallbacks may have guessed wrong: say so
        warnings.append(f"{path}: not valid UTF-8, decoded as {encoding}")
    if "\x00" in text:
        # PostgreSQL text cannot hold NUL; keep the note, mark the bytes, say so.
        text = text.replace("\x00", "\ufffd")
        warnings.append(f"{path}: NUL bytes replaced by U+FFFD")
    return text, encoding, warnings


def _prepared_chunks(note: ParsedNote) -> list[PreparedChunk]:
    """Each non-empty chunk with its context, hash and weighted lexical terms."""
    title_text = " ".join([note.title, *note.aliases])
    tag_text = " ".join(note.tags)
    chunks: list[PreparedChunk] = []
    stable_title = _stable_title(note.title, note.title_source)
    for chunk in note.chunks:
        normalised = normalise_passage(chunk.text)
        if not normalised.strip():
            continue
        trail = (
            [stable_title, *chunk.heading_trail[1:]] if stable_title else chunk.heading_trail[1:]
        )
        context = " > ".join(t for t in trail if t)
        headings = " ".join(chunk.heading_trail[1:])
        lex = weighted_terms(
            [
                (title_text, TITLE_WEIGHT),
                (headings, HEADING_WEIGHT),
                (tag_text, TAG_WEIGHT),
                (normalised, BODY_WEIGHT),
            ]
        )
        chunks.append(
            PreparedChunk(
                ordinal=len(chunks),
                passage_hash=passage_hash(normalised, context),
                text=normalised,
                context=context,
                tokens=estimate_tokens(normalised),
                heading_trail=list(chunk.heading_trail),
                start_line=chunk.start_line,
                end_line=chunk.end_line,
                content_type=chunk.content_type,
                terms=lex.terms,
                tfs=lex.tfs,
                length=lex.length,
            )
        )
    return chunks


@dataclass(frozen=True, slots=True)
class PrepareJob:
    vault: str
    path: str
    min_chars: int
    max_chars: int
    known_sha: bytes | None  # skip parsing when the bytes did not change
    # A re-derivation (new pipeline): the note's stored digest and stamp. The note is
    # parsed again, and written only when its digest moved.
    known_derived: bytes | None = None
    known_stamp: tuple[int, int] | None = None


class Unchanged(NamedTuple):
    """The bytes did not change: only the file's stat needs refreshing."""

    path: str
    size: int
    mtime_ns: int
    sha256: bytes


class Kept(NamedTuple):
    """Re-derived to exactly what the index holds, stamp included: nothing to write."""

    path: str


class Unreadable(NamedTuple):
    path: str
    reason: str


PrepareResult = PreparedDoc | Unchanged | Kept | Unreadable


def read_regular(path: Path) -> tuple[bytes, os.stat_result]:
    """The bytes and stat of a regular file, read through one descriptor.

    The scan saw a regular file, but anything may be there by the time it is read:
    O_NONBLOCK keeps a FIFO swapped in from blocking the run for ever, O_NOFOLLOW keeps a
    symlink swapped in from leading out of the vault."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        chunks = []
        while block := os.read(fd, 1 << 20):
            chunks.append(block)
        return b"".join(chunks), st
    finally:
        os.close(fd)


def run_job(job: PrepareJob) -> PrepareResult:
    """Worker entry point: the note prepared, or that it is unchanged, or unreadable."""
    full = Path(job.vault) / job.path
    try:
        raw, st = read_regular(full)
    except OSError as exc:
        return Unreadable(job.path, exc.strerror or type(exc).__name__)
    sha = hashlib.sha256(raw).digest()
    if job.known_sha is not None and sha == job.known_sha:
        return Unchanged(job.path, st.st_size, st.st_mtime_ns, sha)
    doc = prepare_text(
        job.path,
        raw,
        size=st.st_size,
        mtime_ns=st.st_mtime_ns,
        min_chars=job.min_chars,
        max_chars=job.max_chars,
    )
    if job.known_derived is None or doc.derived != job.known_derived:
        return doc
    if job.known_stamp == (st.st_size, st.st_mtime_ns):
        return Kept(job.path)
    return Unchanged(job.path, st.st_size, st.st_mtime_ns, sha)


def run_jobs(jobs: list[PrepareJob]) -> list[PrepareResult]:
    """Several notes per worker task (one pickling round trip for all of them)."""
    return [run_job(job) for job in jobs]
