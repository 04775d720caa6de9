"""Vault-confined, read-only access to notes for the MCP server and hooks.

Everything an agent names is a *vault-relative* path that must pass :func:`safe_note_path`
before any file is opened: no absolute paths, no ``..``, no NUL, nothing in an excluded
folder, only regular markdown files, and no symlink whose target leaves the vault.
Backslashes, drive letters, URL-encoded escapes and control characters are refused too,
unless the file of that very name exists (``a%20b.md`` is a name: nothing is decoded).
Error messages name the offending *relative* path at most, never a location on this machine.

Text is decoded and redacted exactly as the indexer does (:func:`prepare.decode_note`,
:func:`redact.redact`), so ``read_note`` shows what the index holds, line for line.
"""

from __future__ import annotations

import base64
import binascii
import errno
import hashlib
import json
import os
import posixpath
import re
import stat
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from retriever import query_input
from retriever.doc_filter import DocFilter
from retriever.errors import InputError
from retriever.prepare import decode_note
from retriever.redact import redact
from retriever.scan import ALWAYS_EXCLUDED_DIRS, DEFAULT_INCLUDE, VaultFilter, decodable, within

if TYPE_CHECKING:
    import psycopg

    from retriever.app import Retriever

MAX_PATH_CHARS = 1_024
READ_MAX_BYTES = 24_000  # default cap of one read_note answer (~6k tokens)
READ_HARD_MAX_BYTES = 200_000
LIST_MAX_LIMIT = 200
LINKS_MAX_DEPTH = 3
LINKS_MAX_NODES = 200
_ECHO_CHARS = 120  # how much of a caller's bad input an error message may quote

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_DRIVE = re.compile(r"^[A-Za-z]:")
# Absolute locations inside messages: POSIX paths (not the '//' of a URL) and drive paths.
_ABS_POSIX = re.compile(r"(?<![\w.:/~%>-])/[^\s/'\"`,;:()\[\]<>]+(?:/[^\s/'\"`,;:()\[\]<>]*)*")
_ABS_WINDOWS = re.compile(r"\b[A-Za-z]:\\[^\s'\"`,;]*")
# Where '\\' separates folders (Windows), a backslash can climb: never part of a name there.
_BACKSLASH_SEPARATES = os.sep != "/" or os.altsep is not None


class NotePathError(InputError):
    """The path cannot be served. The message is safe to show an agent (no absolute paths)."""


class NoteQueryError(InputError):
    """A listing or link query has unusable arguments; the message says how to fix them."""


# --------------------------------------------------------------------------- messages


def scrub_paths(
    text: str, *, vault: str | os.PathLike[str] | None = None, others: tuple[object, ...] = ()
) -> str:
    """``text`` with absolute filesystem locations replaced by ``<vault>`` / ``<path>``.

    For system messages (errors, health details, degraded reasons) only, never note text:
    a note may legitimately talk about ``/etc/hosts``.
    """
    for root, label in [(vault, "<vault>"), *((o, "<path>") for o in others)]:
        if root:
            for form in sorted({str(root), os.path.realpath(str(root))}, key=len, reverse=True):
                if len(form) > 1:
                    text = text.replace(form, label)
    text = _ABS_WINDOWS.sub("<path>", text)
    return _ABS_POSIX.sub("<path>", text)


def scrub_message(app: Retriever, text: str) -> str:
    """:func:`scrub_paths` with this app's vault, home and local model folder."""
    settings = app.settings
    for model in (settings.embed_model, settings.fallback_model):
        if "/" in model and os.path.isabs(os.path.expanduser(model)):
            # A local model folder: its name identifies it, its location is nobody's business.
            text = text.replace(model, os.path.basename(model.rstrip("/")) or "<model>")
    return scrub_paths(text, vault=settings.resolved_vault(), others=(settings.home,))


def _echo(value: str) -> str:
    """A short, printable quote of caller input for error messages."""
    shown = _CONTROL.sub("?", value[:_ECHO_CHARS])
    return repr(shown + ("…" if len(value) > _ECHO_CHARS else ""))


# --------------------------------------------------------------------------- paths


def clean_relative(
    rel: object, *, what: str = "path", exists: Callable[[str], bool] | None = None
) -> str:
    """Syntactic checks shared by note paths and folder filters; returns the normalised path.

    Rejects instead of repairing: an agent that sends ``..%2f`` or ``C:\\`` should learn
    the rule, not have the server guess what it meant. Some rules are only advice, though
    (see :func:`_advice`): a real file may be called ``a%20b.md`` or hold a line break, and
    list_notes and search return it so. With ``exists``, a path that breaks only advice is
    accepted when ``exists(norm)`` finds it, taken literally: nothing is ever decoded, so
    confinement rests on the checks that always apply.
    """
    if not isinstance(rel, str):
        raise NotePathError(f"{what} must be a string")
    norm = _confined(rel, what)
    problem = _advice(rel, what)
    if problem and not (exists is not None and exists(norm)):
        raise NotePathError(problem)
    return norm


def _confined(rel: str, what: str) -> str:
    """The checks no file name can waive: not empty, short, no NUL, not absolute, no '..'."""
    if not rel.strip():
        raise NotePathError(f"{what} is empty: give a vault-relative path such as 'folder/Note.md'")
    if len(rel) > MAX_PATH_CHARS:
        raise NotePathError(f"{what} is too long ({len(rel)} characters)")
    if "\x00" in rel:
        raise NotePathError(f"{what} contains control characters")
    if _BACKSLASH_SEPARATES and _windows_like(rel):
        raise NotePathError(_windows_advice(what))  # a separator or drive here: never a name
    if rel.startswith("/"):
        raise NotePathError(
            # Not echoed: an absolute path says where things are on this machine.
            f"{what} is absolute: give it relative to the vault root, such as 'folder/Note.md'"
        )
    parts = rel.split("/")
    if ".." in parts:
        raise NotePathError(f"{what} {_echo(rel)} leaves its folder ('..' is not allowed)")
    norm = posixpath.normpath(rel)
    # Components, not a string prefix: "..notes.md" is a note, only ".." itself climbs.
    if norm in ("", ".", "..") or norm.startswith(("../", "/")):
        raise NotePathError(f"{what} {_echo(rel)} does not name anything inside the vault")
    return norm


def _windows_like(rel: str) -> bool:
    return "\\" in rel or bool(_DRIVE.match(rel))


def _windows_advice(what: str) -> str:
    return (
        f"{what} looks like a Windows path: use a vault-relative path with "
        "forward slashes, such as 'folder/Note.md'"
    )


def _advice(rel: str, what: str) -> str | None:
    """What looks like a mistake but may be a real file name on this system (control
    characters, a backslash or drive letter, a URL escape, a leading '~'), or None."""
    if _CONTROL.search(rel):
        return f"{what} contains control characters"
    if _windows_like(rel):
        return _windows_advice(what)
    if "%" in rel and unquote(rel) != rel:
        # %2e%2e, %2f and friends: paths are plain text here, never URL-encoded.
        return f"{what} {_echo(rel)} contains URL-encoded characters: send the plain path"
    if rel.startswith("~"):
        # Never expanded: '~/x' would be a folder called '~' in the vault.
        return f"{what} is absolute: give it relative to the vault root, such as 'folder/Note.md'"
    return None


def _vault_filter(app_or_vault: Retriever | Path) -> tuple[Path, VaultFilter]:
    if isinstance(app_or_vault, Path):
        root = Path(os.path.realpath(app_or_vault))
        return root, VaultFilter(root, DEFAULT_INCLUDE, ())
    settings = app_or_vault.settings
    root = Path(os.path.realpath(settings.resolved_vault()))
    return root, VaultFilter(root, settings.include, settings.exclude)


def _check_included(filt: VaultFilter, rel: str, shown: str) -> None:
    parts = rel.split("/")
    if any(p in ALWAYS_EXCLUDED_DIRS for p in parts[:-1]):
        raise NotePathError(f"{shown} is in a folder that is never indexed (e.g. .obsidian)")
    if not rel.lower().endswith(".md"):
        raise NotePathError(f"{shown} is not a markdown note: only .md files can be read")
    for i in range(1, len(parts)):
        if filt.dir_excluded("/".join(parts[:i])):
            raise NotePathError(f"{shown} is in a folder excluded from the index")
    if not filt.file_included(rel):
        raise NotePathError(f"{shown} is excluded from the index (.indexignore or settings)")


def _included(filt: VaultFilter, rel: str) -> bool:
    try:
        _check_included(filt, rel, "")
    except NotePathError:
        return False
    return True


def _present(root: Path, rel: str) -> bool:
    """Whether ``rel`` names an entry of the vault, looked at only through folders inside
    it: a folder symlinked out of the vault must not tell what exists out there."""
    parent = Path(os.path.realpath(root / rel)).parent
    return within(root, parent) and os.path.lexists(root / rel)


def safe_note_path(vault: Path | Retriever, rel: str) -> Path:
    """The real path of the vault note ``rel``, or :class:`NotePathError`.

    ``vault`` is a vault folder (default include rules) or a Retriever (its settings'
    include/exclude globs and the vault's ``.indexignore`` apply, as in the indexer).
    """
    return _resolve_note(vault, rel)[1]


def _resolve_note(vault: Path | Retriever, rel: str) -> tuple[str, Path]:
    """``rel`` normalised, and the real path of the note it names (see safe_note_path)."""
    root, filt = _vault_filter(vault)
    # A name that only looks odd (a%20b.md, a line break) is served when it is really there.
    # Included first: no probing for what exists in the folders the index never reads.
    norm = clean_relative(rel, exists=lambda n: _included(filt, n) and _present(root, n))
    shown = _echo(norm)
    _check_included(filt, norm, shown)

    candidate = root / norm
    real = Path(os.path.realpath(candidate))
    # commonpath, not a string prefix: /vault-other must not pass for /vault.
    if not within(root, real):
        raise NotePathError(f"{shown} points outside the vault (symlink)")
    real_rel = real.relative_to(root).as_posix()
    if real_rel != norm:
        # A symlink inside the vault: its target must be a servable note too.
        try:
            _check_included(filt, real_rel, shown + " (link target)")
        except NotePathError as exc:
            raise NotePathError(f"{shown} links to a file that cannot be read: {exc}") from None
    try:
        st = os.stat(real)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            raise NotePathError(
                f"note {shown} not found: use list_notes or search to find the exact path"
            ) from None
        raise NotePathError(f"note {shown} cannot be read ({_errno_name(exc)})") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise NotePathError(f"{shown} is {kind}: only markdown notes can be read")
    return norm, real


def folder_filter(app: Retriever, folder: str | None) -> str | None:
    """A search's folder filter: None for the whole vault ("", "/"), else the normalised
    vault-relative folder. One that leaves the vault, or that the index can hold no note
    of (absent, excluded, a symlink), is refused with the reason: an empty answer would
    read as "the vault does not cover this"."""
    if folder is None or not folder.strip().strip("/"):
        return None
    root, filt = _vault_filter(app)
    norm = clean_relative(
        folder.strip().rstrip("/"),
        what="folder",
        exists=lambda n: _folder_problem(root, filt, n) is None,
    )
    problem = _folder_problem(root, filt, norm)
    if problem:
        raise NotePathError(problem)
    return norm


def _folder_problem(root: Path, filt: VaultFilter, rel: str) -> str | None:
    """Why no note under ``rel`` can be indexed, or None. Each step is looked at as the
    indexer's walk sees it: a real folder (a symlink is never followed), not excluded."""
    shown = _echo(rel)
    parts = rel.split("/")
    for depth in range(1, len(parts) + 1):
        step = "/".join(parts[:depth])
        try:
            mode = os.lstat(root / step).st_mode
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                return f"no folder {shown} in the vault" + _other_case(root, parts[:depth])
            return f"folder {shown} cannot be read ({_errno_name(exc)})"
        if stat.S_ISLNK(mode):
            return f"folder {shown} is a symbolic link: the index does not follow links"
        if not stat.S_ISDIR(mode):
            return f"no folder {shown} in the vault ({_echo(step)} is a file)"
        if filt.dir_excluded(step):
            return f"folder {shown} is excluded from the index (.indexignore or settings)"
    if not decodable(rel):  # a name from argv's bytes: the walk skips it (see scan.decodable)
        return f"folder {shown} has a name that is not UTF-8, which the index skips"
    return None


def _other_case(root: Path, parts: list[str]) -> str:
    """A hint when the missing step exists with other letter case ('Homelab', 'homelab'):
    names are case-sensitive here, and the mistake is easy to miss."""
    parent, name = "/".join(parts[:-1]), parts[-1].casefold()
    try:
        with os.scandir(root / parent) as entries:
            near = sorted(e.name for e in entries if e.name.casefold() == name)
    except OSError:
        return ""
    return f": did you mean {_echo('/'.join([*parts[:-1], near[0]]))}?" if near else ""


def _errno_name(exc: OSError) -> str:
    return errno.errorcode.get(exc.errno or 0, type(exc).__name__)


def _read_regular(path: Path, limit: int) -> bytes:
    """Read at most ``limit`` bytes, refusing anything that turned into a non-file.

    O_NONBLOCK: a FIFO swapped in after the check must not hang the server;
    O_NOFOLLOW: the resolved path's last component must not have become a symlink.
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise NotePathError(f"the note cannot be opened ({_errno_name(exc)})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotePathError("the note is not a regular file")
        chunks: list[bytes] = []
        remaining = limit
        while remaining > 0:
            block = os.read(fd, min(remaining, 1 << 20))
            if not block:
                break
            chunks.append(block)
            remaining -= len(block)
        return b"".join(chunks)
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- read_note


def _split_lines(text: str) -> list[str]:
    """Lines as the chunker counts them: \\r\\n, \\r and \\n each end one line."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()  # a final newline ends the last line; it does not start another
    return lines


def _check_line(value: object, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise NoteQueryError(f"{name} must be a whole number (1 is the first line)")
    if value < 1:
        raise NoteQueryError(f"{name} must be 1 or more (line numbers start at 1)")
    return value


def read_note(
    app: Retriever,
    rel: str,
    start_line: int | None = None,
    end_line: int | None = None,
    max_bytes: int = READ_MAX_BYTES,
) -> dict[str, Any]:
    """Redacted lines of one note, numbered as citations number them, capped in bytes."""
    start = _check_line(start_line, "start_line") or 1
    end = _check_line(end_line, "end_line")
    if end is not None and end < start:
        raise NoteQueryError(f"end_line ({end}) is before start_line ({start})")
    if not 1 <= max_bytes <= READ_HARD_MAX_BYTES:
        raise NoteQueryError(f"max_bytes must be between 1 and {READ_HARD_MAX_BYTES}")
    norm, path = _resolve_note(app, rel)
    limit = app.settings.max_file_bytes
    raw = _read_regular(path, limit + 1)
    if len(raw) > limit:
        # The indexer skips such files, so they are not notes as far as search is concerned.
        raise NotePathError(
            f"note {_echo(norm)} is larger than the {limit}-byte limit and is not indexed"
        )
    text, encoding = decode_note(raw)
    # Same order as the indexer: redact the whole decoded note, then split into lines.
    text, redactions = redact(text)
    lines = _split_lines(text)
    total = len(lines)
    if start > total:
        raise NoteQueryError(f"start_line {start} is past the end: the note has {total} lines")
    last = min(end or total, total)
    shown, shown_end, truncated = _numbered_lines(lines, start, last, max_bytes)
    result: dict[str, Any] = {
        "path": norm,
        "start_line": start,
        "end_line": shown_end,
        "total_lines": total,
        "citation": f"{norm}:{start}-{shown_end}",
        "truncated": truncated,
        "text": shown,
    }
    if truncated:
        more = shown_end < last
        result["next_start_line"] = shown_end + 1 if more else None
        result["hint"] = (
            f"output capped at {max_bytes} bytes; call read_note again with "
            f"start_line={shown_end + 1} for more"
            if more
            else f"line {shown_end} alone is over the {max_bytes}-byte cap: only its start is shown"
        )
    if redactions:
        result["redacted"] = sum(redactions.values())
    if encoding != "utf-8":
        result["encoding"] = encoding
    return result


def _numbered_lines(
    lines: list[str], start: int, last: int, max_bytes: int
) -> tuple[str, int, bool]:
    """Lines ``start``..``last`` numbered, within ``max_bytes``: (text, last line shown,
    whether the cap cut it short)."""
    width = len(str(last))
    out: list[str] = []
    used = 0
    shown_end = start - 1
    for n in range(start, last + 1):
        line = f"{n:>{width}}| {lines[n - 1]}\n"
        size = len(line.encode("utf-8"))
        if used + size > max_bytes:
            if not out:  # a single huge line: cut it rather than return nothing
                cut = line.encode("utf-8")[:max_bytes].decode("utf-8", errors="ignore")
                out.append(cut + "\n")
                shown_end = n
            return "".join(out), shown_end, True
        out.append(line)
        used += size
        shown_end = n
    return "".join(out), shown_end, False


# --------------------------------------------------------------------------- list_notes


def parse_modified_after(value: datetime | str | None) -> datetime | None:
    """The search contract's date check, its complaint as a note query error."""
    try:
        return query_input.parse_modified_after(value)
    except query_input.SearchInputError as exc:
        raise NoteQueryError(str(exc)) from None


def _filter_fingerprint(flt: DocFilter) -> str:
    """Binds a cursor to the filters it was made with."""
    raw = json.dumps([flt.folder, list(flt.tags), flt.note_type, flt.modified_after_ns])
    return hashlib.sha256(raw.encode()).hexdigest()[:12]


def _encode_cursor(after: str, flt: DocFilter) -> str:
    payload = json.dumps({"v": 1, "after": after, "q": _filter_fingerprint(flt)})
    return base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")


def _decode_cursor(cursor: str, flt: DocFilter) -> str:
    bad = NoteQueryError(
        "cursor is not valid: pass the next_cursor value of the previous list_notes answer "
        "unchanged, with the same filters"
    )
    if not isinstance(cursor, str) or len(cursor) > 4 * MAX_PATH_CHARS:
        raise bad
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        data = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise bad from None
    if not isinstance(data, dict) or data.get("v") != 1 or not isinstance(data.get("after"), str):
        raise bad
    if data.get("q") != _filter_fingerprint(flt):
        raise NoteQueryError(
            "cursor belongs to a list_notes call with different filters: repeat the same "
            "filters, or drop the cursor to start from the beginning"
        )
    return data["after"]


def _clean_tag(tag: str | None) -> str | None:
    if tag is None:
        return None
    if not isinstance(tag, str) or len(tag) > 200 or _CONTROL.search(tag):
        raise NoteQueryError("tag must be a short tag name such as 'homelab' or '#homelab'")
    cleaned = tag.strip().lstrip("#").strip().casefold()
    return cleaned or None


def _iso_mtime(mtime_ns: int) -> str:
    return datetime.fromtimestamp(mtime_ns / 1e9, tz=UTC).isoformat(timespec="seconds")


def list_notes(
    app: Retriever,
    folder: str | None = None,
    tag: str | None = None,
    note_type: str | None = None,
    modified_after: datetime | str | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> dict[str, Any]:
    """Indexed notes (metadata only), in path order, one page at a time."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= LIST_MAX_LIMIT:
        raise NoteQueryError(f"limit must be a whole number between 1 and {LIST_MAX_LIMIT}")
    # A folder the index can hold no note of is refused as search refuses it: an empty
    # page would read as "nothing there yet".
    folder_norm = folder_filter(app, str(folder)) if folder is not None else None
    if note_type is not None and (not isinstance(note_type, str) or len(note_type) > 100):
        raise NoteQueryError("type must be a short note type such as 'howto'")
    when = parse_modified_after(modified_after)
    tag_clean = _clean_tag(tag)
    flt = DocFilter.of(
        folder=folder_norm,
        tags=[tag_clean] if tag_clean else None,
        note_type=note_type,
        modified_after=when,
    )
    after = _decode_cursor(cursor, flt) if cursor else None
    base, params = flt.sql()
    base = base or "TRUE"
    page_where = base + (' AND d.path COLLATE "C" > %(after)s' if after is not None else "")
    if after is not None:
        params["after"] = after
    params["limit"] = limit + 1
    with app.db.connection() as conn:
        total_row = conn.execute(
            f"SELECT count(*) FROM documents d WHERE {base}", params
        ).fetchone()
        rows = conn.execute(
            f"SELECT path, title, tags, note_type, mtime_ns, size FROM documents d"
            f' WHERE {page_where} ORDER BY path COLLATE "C" LIMIT %(limit)s',
            params,
        ).fetchall()
        conn.commit()
    has_more = len(rows) > limit
    rows = rows[:limit]
    _, filt = _vault_filter(app)
    notes = [
        {
            "path": r[0],
            "title": r[1],
            "tags": list(r[2] or []),
            "type": r[3],
            "modified": _iso_mtime(int(r[4])),
            "bytes": int(r[5]),
        }
        for r in rows
        # Defence in depth: a note indexed before .indexignore changed is not listed.
        if filt.file_included(r[0])
    ]
    return {
        "notes": notes,
        "count": len(notes),
        "total": int(total_row[0]) if total_row else len(notes),
        "next_cursor": _encode_cursor(rows[-1][0], flt) if has_more and rows else None,
    }


# --------------------------------------------------------------------------- links

_DIRECTIONS = ("out", "back", "both")


def note_links(
    app: Retriever, path: str, direction: str = "both", depth: int = 1
) -> dict[str, Any]:
    """Notes linked from (``out``), linking to (``back``) or both ways around ``path``,
    up to ``depth`` hops, plus the note's own links that resolve to nothing."""
    if direction not in _DIRECTIONS:
        raise NoteQueryError(f"direction must be one of {', '.join(_DIRECTIONS)}")
    if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= LINKS_MAX_DEPTH:
        raise NoteQueryError(f"depth must be 1, 2 or {LINKS_MAX_DEPTH}")
    _, filt = _vault_filter(app)
    # An odd name that list_notes or search returned is looked up as it is.
    norm = clean_relative(path, exists=lambda n: _included(filt, n) and _indexed(app, n))
    _check_included(filt, norm, _echo(norm))
    with app.db.connection() as conn:
        row = conn.execute("SELECT id, title FROM documents WHERE path = %s", (norm,)).fetchone()
        if row is None:
            conn.commit()
            raise NotePathError(
                f"note {_echo(norm)} is not in the index: use list_notes or search to find "
                "the exact path"
            )
        doc_id, title = int(row[0]), row[1]
        unresolved = [
            {"target": r[0], "kind": r[1], "line": int(r[2])}
            for r in conn.execute(
                "SELECT target, kind, line FROM links WHERE doc_id = %s AND resolved IS NULL"
                " ORDER BY line, target",
                (doc_id,),
            )
        ]
        found, truncated = _neighbours(conn, norm, direction, depth, filt)
        titles = dict(
            conn.execute(
                "SELECT path, title FROM documents WHERE path = ANY(%s)", (list(found),)
            ).fetchall()
        )
        conn.commit()
    neighbours = sorted(found.values(), key=lambda e: (e["distance"], e["path"]))
    for entry in neighbours:
        entry["title"] = titles.get(entry["path"], "")
        if entry["distance"] == 1:
            del entry["via"]  # the start note itself
    return {
        "path": norm,
        "title": title,
        "direction": direction,
        "depth": depth,
        "links": neighbours,
        "unresolved": unresolved,
        "truncated": truncated,
    }


def _indexed(app: Retriever, path: str) -> bool:
    with app.db.connection() as conn:
        row = conn.execute("SELECT 1 FROM documents WHERE path = %s", (path,)).fetchone()
        conn.commit()
    return row is not None


_EDGE_SQL = (
    "SELECT DISTINCT d.path, t.path FROM links l"
    " JOIN documents d ON d.id = l.doc_id"
    " JOIN documents t ON t.id = l.resolved"  # resolved: the target's document id
    " WHERE {side}.path = ANY(%s)"
)


def _edges(
    conn: psycopg.Connection, frontier: list[str], direction: str
) -> list[tuple[str, str, str]]:
    """(from, to, direction) for every resolved link leaving or entering ``frontier``."""
    edges: list[tuple[str, str, str]] = []
    if direction in ("out", "both"):
        rows = conn.execute(_EDGE_SQL.format(side="d"), (frontier,)).fetchall()
        edges += [(src, dst, "out") for src, dst in rows]
    if direction in ("back", "both"):
        rows = conn.execute(_EDGE_SQL.format(side="t"), (frontier,)).fetchall()
        edges += [(dst, src, "back") for src, dst in rows]
    return sorted(edges)


def _neighbours(
    conn: psycopg.Connection, start: str, direction: str, depth: int, filt: VaultFilter
) -> tuple[dict[str, dict[str, Any]], bool]:
    """Breadth-first over links from ``start``: each note reached (distance, direction,
    via), and whether LINKS_MAX_NODES cut the walk short."""
    found: dict[str, dict[str, Any]] = {}
    frontier = [start]
    for distance in range(1, depth + 1):
        nxt: list[str] = []
        for src, dst, how in _edges(conn, frontier, direction):
            if dst == start or not filt.file_included(dst):
                continue
            if dst in found:
                entry = found[dst]
                if entry["distance"] == distance and entry["direction"] != how:
                    entry["direction"] = "both"
                continue
            if len(found) >= LINKS_MAX_NODES:
                return found, True
            found[dst] = {"path": dst, "distance": distance, "direction": how, "via": src}
            nxt.append(dst)
        frontier = nxt
        if not frontier:
            break
    return found, False
