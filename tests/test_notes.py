"""Vault-confined note access: hostile paths, redaction, listing, links (real PostgreSQL)."""

from __future__ import annotations

import os
import re
import secrets
import time
from pathlib import Path

import pytest

from retriever.notes import (
    NotePathError,
    NoteQueryError,
    list_notes,
    note_links,
    read_note,
    safe_note_path,
    scrub_paths,
)
from tests.conftest import TEST_VAULT


def fake_github_token() -> str:
    """A credential-shaped value made at run time (never written in a source file)."""
    body = re.sub(r"[^A-Za-z0-9]", "", secrets.token_urlsafe(64))[:36]
    return "gh" + "p_" + body


def _assert_clean(message: str, *roots: Path) -> None:
    for root in roots:
        assert str(root) not in message
        assert os.path.realpath(root) not in message
    assert "/tmp" not in message


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A secret file next to (not inside) the vault, plus a sibling folder whose name
    shares the vault's prefix (string-prefix checks would let it through)."""
    secret_dir = tmp_path / "outside"
    secret_dir.mkdir()
    (secret_dir / "secret.md").write_text("OUTSIDE-THE-VAULT marker\n", encoding="utf-8")
    evil = tmp_path / "vault-evil"
    evil.mkdir()
    (evil / "x.md").write_text("OUTSIDE-THE-VAULT sibling\n", encoding="utf-8")
    return secret_dir


HOSTILE = [
    "",
    "   ",
    "/etc/passwd",
    "/etc/passwd.md",
    "~/notes.md",
    "../outside/secret.md",
    "homelab/../../outside/secret.md",
    "./../vault-evil/x.md",
    "..%2foutside%2fsecret.md",
    "%2e%2e/outside/secret.md",
    "homelab%2fBackups.md",
    "Home.md\x00.txt",
    "Home\x07.md",
    "homelab\\Backups.md",
    "..\\..\\Windows\\win.ini",
    "..",
    "./..",
    "homelab/..",
    "..//Home.md",
    "../..notes.md",
    "..notes.md/../../outside/secret.md",
    "C:\\Windows\\win.ini",
    "C:/Windows/notes.md",
    "homelab",
    ".obsidian/workspace.json",
    ".obsidian/x.md",
    ".trash/Old grocery list.md",
    ".git/config",
    "node_modules/pkg/README.md",
    "private/Journal.md",
    "attachments/diagram.txt",
    ".indexignore",
    "missing/Nope.md",
    "x" * 5000 + ".md",
]


@pytest.mark.parametrize("rel", HOSTILE)
def test_hostile_paths_are_refused_without_leaking(
    vault_copy: Path, outside: Path, rel: str
) -> None:
    with pytest.raises(NotePathError) as exc:
        safe_note_path(vault_copy, rel)
    message = str(exc.value)
    _assert_clean(message, vault_copy, outside)
    assert len(message) < 400


def test_absolute_path_into_the_vault_is_refused(vault_copy: Path) -> None:
    with pytest.raises(NotePathError) as exc:
        safe_note_path(vault_copy, str(vault_copy / "Home.md"))
    assert "absolute" in str(exc.value)
    _assert_clean(str(exc.value), vault_copy)


def test_symlinks_leaving_the_vault_are_refused(vault_copy: Path, outside: Path) -> None:
    (vault_copy / "link.md").symlink_to(outside / "secret.md")
    (vault_copy / "linkdir").symlink_to(outside, target_is_directory=True)
    (vault_copy / "sibling.md").symlink_to(outside.parent / "vault-evil" / "x.md")
    for rel in ("link.md", "linkdir/secret.md", "sibling.md"):
        with pytest.raises(NotePathError) as exc:
            safe_note_path(vault_copy, rel)
        assert "outside the vault" in str(exc.value)
        _assert_clean(str(exc.value), vault_copy, outside)


def test_symlink_to_an_excluded_note_is_refused(vault_copy: Path) -> None:
    (vault_copy / "journal-link.md").symlink_to(vault_copy / "private" / "Journal.md")
    with pytest.raises(NotePathError) as exc:
        safe_note_path(vault_copy, "journal-link.md")
    assert "cannot be read" in str(exc.value)


def test_symlink_inside_the_vault_is_served(vault_copy: Path) -> None:
    (vault_copy / "shortcut.md").symlink_to(vault_copy / "homelab" / "Backups.md")
    real = safe_note_path(vault_copy, "shortcut.md")
    assert real == (vault_copy / "homelab" / "Backups.md").resolve()


def test_fifo_and_directory_named_like_notes_are_refused(vault_copy: Path) -> None:
    os.mkfifo(vault_copy / "pipe.md")
    (vault_copy / "folder.md").mkdir()
    started = time.perf_counter()
    for rel in ("pipe.md", "folder.md"):
        with pytest.raises(NotePathError) as exc:
            safe_note_path(vault_copy, rel)
        assert "folder" in str(exc.value) or "regular file" in str(exc.value)
    assert time.perf_counter() - started < 1  # a FIFO must never block


def test_good_paths(vault_copy: Path) -> None:
    assert safe_note_path(vault_copy, "homelab/Backups.md").name == "Backups.md"
    assert safe_note_path(vault_copy, "./Home.md").name == "Home.md"
    assert safe_note_path(vault_copy, "projects/tidepool/Bug - config reload.md").is_file()
    # A literal percent sign that is not an escape is just a character.
    (vault_copy / "100% done.md").write_text("# Done\n", encoding="utf-8")
    assert safe_note_path(vault_copy, "100% done.md").is_file()


def test_names_starting_with_two_dots_are_notes(vault_copy: Path) -> None:
    """Only a whole ``..`` component climbs: ``..notes.md`` is an ordinary file name."""
    (vault_copy / "..notes.md").write_text("# Dots\n", encoding="utf-8")
    (vault_copy / "homelab" / "..draft.md").write_text("# Draft\n", encoding="utf-8")
    (vault_copy / "...md").write_text("# Three dots\n", encoding="utf-8")
    (vault_copy / "..archive").mkdir()
    (vault_copy / "..archive" / "old.md").write_text("# Old\n", encoding="utf-8")
    for rel in ("..notes.md", "homelab/..draft.md", "./..notes.md", "...md", "..archive/old.md"):
        real = safe_note_path(vault_copy, rel)
        assert real.is_file() and real.is_relative_to(vault_copy.resolve())


# Names the index holds that look like mistakes: list_notes and search return them so.
ODD_NAMES = [
    "a%20b.md",
    "50%2e5 percent.md",
    "line\nbreak.md",
    "tab\there.md",
    "back\\slash.md",
    "~draft.md",
    "C:notes.md",
    "homelab/%2e%2e%2fHome.md",
]


def test_odd_but_real_names_are_served_literally(vault_copy: Path, outside: Path) -> None:
    """An odd name is served when that very file is there, never decoded ("%2e%2e%2f" is
    not "../"); absent, the same path gets the advice; an odd name still cannot leave the
    vault through a symlink or probe an excluded folder."""
    for rel in ODD_NAMES:
        with pytest.raises(NotePathError):
            safe_note_path(vault_copy, rel)  # not there yet: refused with the advice
        (vault_copy / rel).write_text(f"# {rel}\n", encoding="utf-8")
        real = safe_note_path(vault_copy, rel)
        assert real == (vault_copy / rel).resolve() and real.read_text("utf-8") == f"# {rel}\n"
    (vault_copy / "out%20side.md").symlink_to(outside / "secret.md")
    (vault_copy / "private" / "a%20b.md").write_text("# Hidden\n", encoding="utf-8")
    for rel in ("out%20side.md", "private/a%20b.md", "private/c%20d.md"):
        with pytest.raises(NotePathError) as exc:
            safe_note_path(vault_copy, rel)
        _assert_clean(str(exc.value), vault_copy, outside)
    # The same answer whether or not the excluded file is there: no existence probe.
    messages = set()
    for rel in ("private/a%20b.md", "private/c%20d.md"):
        with pytest.raises(NotePathError) as exc:
            safe_note_path(vault_copy, rel)
        messages.add(str(exc.value).replace("a%20b", "X").replace("c%20d", "X"))
    assert len(messages) == 1
    # Nor through a folder linked out of the vault: the same answer, file there or not.
    (outside / "sub").mkdir(exist_ok=True)
    (outside / "sub" / "se cret%20x.md").write_text("x", encoding="utf-8")
    (vault_copy / "link").symlink_to(outside / "sub")
    linked = set()
    for rel in ("link/se cret%20x.md", "link/nothere%20x.md"):
        with pytest.raises(NotePathError) as exc:
            safe_note_path(vault_copy, rel)
        _assert_clean(str(exc.value), vault_copy, outside)
        linked.add(str(exc.value).replace("se cret%20x", "X").replace("nothere%20x", "X"))
    assert len(linked) == 1


def test_read_note_serves_odd_names(make_app, vault_copy: Path) -> None:
    for rel in ODD_NAMES:
        (vault_copy / rel).write_text("# Odd\n\nbody\n", encoding="utf-8")
    app = make_app(vault_copy)
    for rel in ODD_NAMES:
        data = read_note(app, rel)
        assert data["path"] == rel and data["total_lines"] == 3
        assert data["citation"] == f"{rel}:1-3"


def test_read_note_serves_two_dot_names(make_app, vault_copy: Path) -> None:
    (vault_copy / "..notes.md").write_text("# Dots\n\nline two\n", encoding="utf-8")
    (vault_copy / "homelab" / "..draft.md").write_text("# Draft\n", encoding="utf-8")
    app = make_app(vault_copy)
    assert read_note(app, "..notes.md")["total_lines"] == 3
    assert read_note(app, "homelab/..draft.md")["citation"] == "homelab/..draft.md:1-1"
    with pytest.raises(NotePathError):
        read_note(app, "../..notes.md")


def test_scrub_paths() -> None:
    text = "cannot load '/srv/models/x': HFValidationError; db postgresql://u@/tmp/s/db"
    out = scrub_paths(text, vault="/srv/vault")
    assert "/srv" not in out and "/tmp" not in out
    assert "http://127.0.0.1:11434" in scrub_paths("Ollama at http://127.0.0.1:11434 is down")
    assert scrub_paths("vault /srv/vault/x.md", vault="/srv/vault") == "vault <vault>/x.md"


# --------------------------------------------------------------------------- read_note


def test_read_note_numbers_lines_and_redacts(make_app, vault_copy: Path) -> None:
    token = fake_github_token()
    note = vault_copy / "homelab" / "Deploy keys.md"
    note.write_text(
        f"# Deploy keys\n\nThe CI uses this token: {token}\nRotate it yearly.\n", encoding="utf-8"
    )
    app = make_app(vault_copy)
    data = read_note(app, "homelab/Deploy keys.md")
    assert token not in data["text"]
    assert "[REDACTED:github_token]" in data["text"]
    assert data["redacted"] == 1
    assert data["total_lines"] == 4
    assert data["text"].splitlines()[0] == "1| # Deploy keys"
    assert data["citation"] == "homelab/Deploy keys.md:1-4"
    assert not data["truncated"]


def test_read_note_ranges_and_caps(make_app, vault_copy: Path) -> None:
    app = make_app(vault_copy)
    full = read_note(app, "homelab/Backups.md")
    part = read_note(app, "homelab/Backups.md", start_line=3, end_line=5)
    assert part["start_line"] == 3 and part["end_line"] == 5
    assert [line.split("| ", 1)[0].strip() for line in part["text"].splitlines()] == ["3", "4", "5"]
    past = read_note(app, "homelab/Backups.md", start_line=2, end_line=10_000)
    assert past["end_line"] == full["total_lines"]
    small = read_note(app, "homelab/Backups.md", max_bytes=200)
    assert small["truncated"] and small["next_start_line"] == small["end_line"] + 1
    assert len(small["text"].encode()) <= 200
    assert f"start_line={small['end_line'] + 1}" in small["hint"]
    (vault_copy / "log.md").write_text("# Log\n\n" + "wombat " * 10_000 + "\n", "utf-8")
    huge = read_note(app, "log.md", start_line=3, max_bytes=500)
    assert huge["truncated"] and huge["end_line"] == 3 and huge["next_start_line"] is None
    assert "start_line=" not in huge["hint"] and "line 3 alone" in huge["hint"]
    with pytest.raises(NoteQueryError):
        read_note(app, "homelab/Backups.md", start_line=0)
    with pytest.raises(NoteQueryError):
        read_note(app, "homelab/Backups.md", start_line=-5)
    with pytest.raises(NoteQueryError):
        read_note(app, "homelab/Backups.md", start_line=9, end_line=3)
    with pytest.raises(NoteQueryError, match="has"):
        read_note(app, "homelab/Backups.md", start_line=10**9)


def test_read_note_line_endings_match_citations(make_app, vault_copy: Path) -> None:
    (vault_copy / "crlf.md").write_bytes(b"\xef\xbb\xbf# T\r\none\rtwo\r\nthree\r\n")
    data = read_note(make_app(vault_copy), "crlf.md")
    assert data["total_lines"] == 4
    assert data["text"].splitlines() == ["1| # T", "2| one", "3| two", "4| three"]


def test_read_note_refuses_oversized_files(make_app, vault_copy: Path) -> None:
    (vault_copy / "big.md").write_text("x" * 5000, encoding="utf-8")
    app = make_app(vault_copy, max_file_bytes=1000)
    with pytest.raises(NotePathError, match="not indexed"):
        read_note(app, "big.md")


# --------------------------------------------------------------------------- list_notes


@pytest.fixture
def indexed(make_app):
    app = make_app(TEST_VAULT)
    app.index(embed=False)
    return app


def test_list_notes_pages_through_everything(indexed) -> None:
    with indexed.db.connection() as conn:
        expected = sorted(r[0] for r in conn.execute("SELECT path FROM documents"))
        conn.commit()
    seen: list[str] = []
    cursor = None
    while True:
        page = list_notes(indexed, limit=7, cursor=cursor)
        assert page["count"] <= 7 and page["total"] == len(expected)
        seen += [n["path"] for n in page["notes"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == sorted(expected, key=lambda p: p.encode())
    assert len(seen) == len(set(seen))
    assert not any(p.startswith("private/") for p in seen)
    first = list_notes(indexed, limit=1)["notes"][0]
    assert set(first) == {"path", "title", "tags", "type", "modified", "bytes"}


def test_list_notes_filters(indexed) -> None:
    homelab = list_notes(indexed, folder="homelab")["notes"]
    assert homelab and all(n["path"].startswith("homelab/") for n in homelab)
    assert list_notes(indexed, folder="homelab/")["count"] == len(homelab)
    tagged = list_notes(indexed, tag="#Backup")["notes"]
    assert "homelab/Backups.md" in [n["path"] for n in tagged]
    howto = list_notes(indexed, note_type="howto")["notes"]
    assert howto and all(n["type"] == "howto" for n in howto)
    assert list_notes(indexed, modified_after="2999-01-01")["count"] == 0
    assert list_notes(indexed, modified_after="2000-01-01T00:00:00Z")["count"] == len(
        list_notes(indexed, limit=200)["notes"]
    )


@pytest.mark.parametrize("limit", [0, -1, 201, 10**12, True])
def test_list_notes_rejects_bad_limits(indexed, limit) -> None:
    with pytest.raises(NoteQueryError, match="between 1 and 200"):
        list_notes(indexed, limit=limit)


def test_list_notes_rejects_bad_input(indexed, tmp_path: Path) -> None:
    for folder in ("../", "/etc", "..%2f", "a\\b", str(tmp_path)):
        with pytest.raises(NotePathError) as exc:
            list_notes(indexed, folder=folder)
        _assert_clean(str(exc.value), tmp_path)
    with pytest.raises(NoteQueryError, match="ISO date"):
        list_notes(indexed, modified_after="last tuesday")
    with pytest.raises(NoteQueryError, match="cursor"):
        list_notes(indexed, cursor="not-a-cursor")
    cursor = list_notes(indexed, limit=2)["next_cursor"]
    with pytest.raises(NoteQueryError, match="different filters"):
        list_notes(indexed, limit=2, cursor=cursor, folder="homelab")


# --------------------------------------------------------------------------- links


def test_links_out_back_and_depth(indexed) -> None:
    out = note_links(indexed, "Home.md", direction="out")
    paths = {link["path"] for link in out["links"]}
    assert "homelab/Backups.md" in paths
    assert all(link["distance"] == 1 and link["direction"] == "out" for link in out["links"])
    back = note_links(indexed, "homelab/Backups.md", direction="back")
    assert "Home.md" in {link["path"] for link in back["links"]}
    deeper = note_links(indexed, "homelab/Backups.md", direction="both", depth=2)
    assert len(deeper["links"]) >= len(note_links(indexed, "homelab/Backups.md")["links"])
    assert any(link["distance"] == 2 and "via" in link for link in deeper["links"])
    assert all(link["path"] != "homelab/Backups.md" for link in deeper["links"])
    assert isinstance(out["unresolved"], list)


def test_links_lists_unresolved_targets(make_app, vault_copy: Path) -> None:
    (vault_copy / "Dangling.md").write_text("# D\n\nSee [[No Such Note]] and [[Home]].\n")
    app = make_app(vault_copy)
    app.index(embed=False)
    data = note_links(app, "Dangling.md", direction="out")
    assert [u["target"] for u in data["unresolved"]] == ["No Such Note"]
    assert [link["path"] for link in data["links"]] == ["Home.md"]


def test_links_rejects_bad_input(indexed) -> None:
    with pytest.raises(NoteQueryError):
        note_links(indexed, "Home.md", direction="sideways")
    for depth in (0, 4, -1, 10**9):
        with pytest.raises(NoteQueryError):
            note_links(indexed, "Home.md", depth=depth)
    with pytest.raises(NotePathError, match="not in the index"):
        note_links(indexed, "Nope.md")
    with pytest.raises(NotePathError):
        note_links(indexed, "private/Journal.md")
    with pytest.raises(NotePathError):
        note_links(indexed, "../Home.md")
