"""Tests for retriever.scan: which files of a vault are notes (real filesystem, no database)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from retriever.scan import (
    ALWAYS_EXCLUDED_DIRS,
    ScanReport,
    VaultFilter,
    decodable,
    rescan_paths,
    scan_vault,
)
from tests.conftest import TEST_VAULT, refuse_folder


def paths(report: ScanReport) -> list[str]:
    return [f.path for f in report.files]


def write(path: Path, text: str = "# Note\n\nSome text.\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def expected_test_vault_notes() -> set[str]:
    """The test vault's notes, listed independently of the scanner."""
    found = set()
    for dirpath, dirnames, filenames in os.walk(TEST_VAULT):
        rel_dir = Path(dirpath).relative_to(TEST_VAULT).as_posix()
        dirnames[:] = [d for d in dirnames if d not in ALWAYS_EXCLUDED_DIRS]
        if rel_dir == "private" or rel_dir.startswith("private/"):  # the vault's .indexignore
            continue
        for name in filenames:
            if name.endswith(".md"):
                found.add(name if rel_dir == "." else f"{rel_dir}/{name}")
    return found


def test_scans_the_test_vault() -> None:
    report = scan_vault(TEST_VAULT)
    got = paths(report)
    assert got == sorted(got, key=lambda p: p.split("/")), "deterministic, sorted walk"
    assert len(got) == len(set(got))
    assert set(got) == expected_test_vault_notes()
    assert "private/Journal.md" not in got  # .indexignore: private/
    assert not any(p.startswith((".trash/", ".obsidian/")) for p in got)
    assert "attachments/diagram.txt" not in got
    assert report.skipped_too_large == []
    assert report.skipped_escaping_links == []
    for info in report.files:
        st = (TEST_VAULT / info.path).stat()
        assert (info.size, info.mtime_ns) == (st.st_size, st.st_mtime_ns)


def test_tool_folders_are_never_scanned(tmp_path: Path) -> None:
    vault = tmp_path / "v"
    write(vault / "keep.md")
    for name in ALWAYS_EXCLUDED_DIRS:
        write(vault / name / "inside.md")
        write(vault / "sub" / name / "deep" / "inside.md")
    write(vault / "node_modules" / "pkg" / "README.md")
    # Names that merely look similar are ordinary notes and folders.
    write(vault / ".obsidian.md")
    write(vault / "git" / "note.md")
    write(vault / "trash" / "note.md")
    write(vault / ".venv" / "lib" / "python3.11" / "site-packages" / "pkg" / "README.md")
    write(vault / "tools" / "venv" / "README.md")
    write(vault / "venvs.md")  # a note about virtualenvs is still a note
    assert {
        ".obsidian",
        ".trash",
        ".git",
        "node_modules",
        ".venv",
        "venv",
        "__pycache__",
        "site-packages",
    } <= ALWAYS_EXCLUDED_DIRS
    expected = [".obsidian.md", "git/note.md", "keep.md", "trash/note.md", "venvs.md"]
    assert paths(scan_vault(vault)) == expected
    # Not even an include glob that names them explicitly brings them in.
    report = scan_vault(vault, include=["**/*.md", ".obsidian/**", "node_modules/**", ".git/*"])
    assert paths(report) == expected


def test_tool_folders_are_not_even_entered(tmp_path: Path) -> None:
    vault = tmp_path / "v"
    write(vault / "keep.md")
    outside = tmp_path / "outside"
    write(outside / "x.md")
    # Entering these folders would report the escaping links inside them.
    for name in ALWAYS_EXCLUDED_DIRS:
        (vault / name).mkdir()
        (vault / name / "escape").symlink_to(outside, target_is_directory=True)
    (vault / "private").mkdir()
    (vault / "private" / "escape").symlink_to(outside, target_is_directory=True)
    (vault / ".indexignore").write_text("private/\n", encoding="utf-8")
    (vault / "skipped").mkdir()
    (vault / "skipped" / "escape").symlink_to(outside, target_is_directory=True)
    report = scan_vault(vault, exclude=["skipped/"])
    assert paths(report) == ["keep.md"]
    assert report.skipped_escaping_links == []


def test_indexignore_is_honoured(tmp_path: Path) -> None:
    vault = tmp_path / "v"
    (vault).mkdir()
    (vault / ".indexignore").write_text(
        "# comment line\n\nprivate/\ndrafts/*.md\n!drafts/Keep.md\nSecret*.md\n/Top only.md\n",
        encoding="utf-8",
    )
    for rel in [
        "Home.md",
        "private/Journal.md",
        "private/deeper/Diary.md",
        "area/private/Hidden.md",  # "private/" matches the folder at any depth
        "drafts/One.md",
        "drafts/Keep.md",
        "drafts/sub/Nested.md",  # "drafts/*.md" does not cross a slash
        "Secret plans.md",
        "area/Secret recipe.md",
        "Top only.md",
        "area/Top only.md",  # anchored pattern: only at the root
    ]:
        write(vault / rel)
    got = paths(scan_vault(vault))
    assert got == [
        "Home.md",
        "area/Top only.md",
        "drafts/Keep.md",
        "drafts/sub/Nested.md",
    ]


def test_the_test_vault_indexignore_excludes_private() -> None:
    assert (TEST_VAULT / "private" / "Journal.md").is_file()
    assert "private/" in (TEST_VAULT / ".indexignore").read_text(encoding="utf-8").splitlines()
    assert "private/Journal.md" not in paths(scan_vault(TEST_VAULT))


def test_include_and_exclude_globs() -> None:
    only_homelab = paths(scan_vault(TEST_VAULT, include=["homelab/**"]))
    assert only_homelab
    assert all(p.startswith("homelab/") for p in only_homelab)
    assert set(only_homelab) == {p for p in expected_test_vault_notes() if p.startswith("homelab/")}

    without = paths(scan_vault(TEST_VAULT, exclude=["travel/", "**/Setup.md", "Home.md"]))
    assert not any(p.startswith("travel/") for p in without)
    assert "homelab/Setup.md" not in without
    assert "projects/tidepool/Setup.md" not in without
    assert "Home.md" not in without
    assert "Inbox.md" in without
    removed = expected_test_vault_notes() - set(without)
    assert removed == {
        p
        for p in expected_test_vault_notes()
        if p.startswith("travel/") or p.endswith("/Setup.md") or p == "Home.md"
    }

    # An include glob never re-admits what .indexignore excludes.
    assert "private/Journal.md" not in paths(scan_vault(TEST_VAULT, include=["private/**"]))
    assert paths(scan_vault(TEST_VAULT, include=["private/**"])) == []


def test_only_markdown_files(tmp_path: Path) -> None:
    vault = tmp_path / "v"
    for rel in [
        "a.md",
        "c.markdown",
        "d.md.txt",
        "e.txt",
        "f.pdf",
        "g.canvas",
        "md",
        "notes.md/inside.md",  # a folder named like a note is walked, not read as a file
    ]:
        write(vault / rel)
    os.mkfifo(vault / "pipe.md")  # not a regular file: never opened (would block)
    assert paths(scan_vault(vault)) == ["a.md", "notes.md/inside.md"]


def test_symlinks_leaving_the_vault_are_skipped_and_reported(tmp_path: Path) -> None:
    vault = tmp_path / "v"
    write(vault / "Home.md")
    outside = tmp_path / "outside"
    write(outside / "secret.md", "OUTSIDE marker\n")
    write(outside / "nested" / "more.md")
    sibling = tmp_path / "v-evil"  # shares the vault's name as a string prefix
    write(sibling / "x.md")
    (vault / "link.md").symlink_to(outside / "secret.md")
    (vault / "linkdir").symlink_to(outside, target_is_directory=True)
    (vault / "sub").mkdir()
    (vault / "sub" / "sibling.md").symlink_to(sibling / "x.md")
    (vault / "sub" / "rel-escape").symlink_to(Path("..") / ".." / "outside")  # relative link
    (vault / "dangling.md").symlink_to(vault / "missing.md")  # inside, but no target

    report = scan_vault(vault)
    assert paths(report) == ["Home.md"]
    assert sorted(report.skipped_escaping_links) == [
        "link.md",
        "linkdir",
        "sub/rel-escape",
        "sub/sibling.md",
    ]
    assert "dangling.md" not in paths(report)


def test_symlink_inside_the_vault_adds_no_duplicate(tmp_path: Path) -> None:
    vault = tmp_path / "v"
    write(vault / "cooking" / "Dashi.md", "# Dashi\n")
    write(vault / "cooking" / "Soup" / "Miso.md", "# Miso\n")
    write(vault / "homelab" / "Backups.md", "# Backups\n\nrestic\n")
    # A folder shortcut (its name sorts after the real folder) and a note shortcut.
    (vault / "shortcuts").mkdir()
    (vault / "shortcuts" / "kitchen").symlink_to(vault / "cooking", target_is_directory=True)
    (vault / "shortcuts" / "again").symlink_to(Path("..") / "cooking")  # relative, same folder
    (vault / "Backups link.md").symlink_to(vault / "homelab" / "Backups.md")

    report = scan_vault(vault)
    got = paths(report)
    # Every note once, under its real path; shortcuts add nothing.
    assert got == ["cooking/Dashi.md", "cooking/Soup/Miso.md", "homelab/Backups.md"]
    assert report.skipped_escaping_links == []


def test_vault_reached_through_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real"
    write(real / "a" / "Note.md")
    (real / "b").symlink_to(real / "a", target_is_directory=True)  # absolute, via real path
    alias = tmp_path / "alias"
    alias.symlink_to(real, target_is_directory=True)
    report = scan_vault(alias)
    assert paths(report) == ["a/Note.md"]
    assert report.skipped_escaping_links == []


def test_symlink_loops_are_survived(tmp_path: Path) -> None:
    vault = tmp_path / "v"
    write(vault / "a" / "Note.md")
    write(vault / "z" / "Other.md")
    (vault / "a" / "up").symlink_to(Path(".."))  # back to the vault root
    (vault / "a" / "self").symlink_to(vault / "a", target_is_directory=True)
    (vault / "z" / "to-a").symlink_to(vault / "a", target_is_directory=True)
    (vault / "a" / "to-z").symlink_to(vault / "z", target_is_directory=True)
    (vault / "loop.md").symlink_to(vault / "loop.md")  # ELOOP on stat
    (vault / "ping.md").symlink_to(vault / "pong.md")
    (vault / "pong.md").symlink_to(vault / "ping.md")
    report = scan_vault(vault)
    got = paths(report)
    # Each real file exactly once, under its real path.
    assert got == ["a/Note.md", "z/Other.md"]
    assert report.skipped_escaping_links == []


def test_file_over_the_size_cap_is_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    vault = tmp_path / "v"
    write(vault / "small.md", "x" * 100)
    write(vault / "exact.md", "x" * 1000)
    write(vault / "big.md", "x" * 1001)
    with caplog.at_level(logging.WARNING, logger="retriever.scan"):
        report = scan_vault(vault, max_bytes=1000)
    assert paths(report) == ["exact.md", "small.md"]
    assert report.skipped_too_large == ["big.md"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("big.md" in w and "1001" in w for w in warnings)
    assert not any("small.md" in w or "exact.md" in w for w in warnings)


def test_missing_vault_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        scan_vault(tmp_path / "nope")
    write(tmp_path / "file.md")
    with pytest.raises(FileNotFoundError):
        scan_vault(tmp_path / "file.md")


def test_unreadable_folder_is_reported(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads any folder")
    vault = tmp_path / "v"
    write(vault / "a.md")
    write(vault / "locked" / "b.md")
    (vault / "locked").chmod(0)
    try:
        report = scan_vault(vault)
    finally:
        (vault / "locked").chmod(0o755)
    assert paths(report) == ["a.md"]
    assert [d for d, _ in report.unreadable_dirs] == ["locked"]


def test_a_folder_the_walk_cannot_read_hides_its_notes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its notes' fate is unknown, so they are reported hidden, never deleted (the error
    is the operating system's: root reads any folder, so it is raised here)."""
    vault = tmp_path / "v"
    write(vault / "a.md")
    write(vault / "locked" / "b.md")
    write(vault / "lockedness.md")
    refuse_folder(monkeypatch, "locked")
    report = scan_vault(vault)
    assert paths(report) == ["a.md", "lockedness.md"]
    assert report.unreadable_dirs == [("locked", "Permission denied")]
    assert report.hides("locked/b.md") and report.hides("locked/deeper/c.md")
    assert not report.hides("lockedness.md") and not report.hides("a.md")


def test_names_that_are_not_utf8_are_skipped_and_reported(tmp_path: Path) -> None:
    vault = tmp_path / "v"
    write(vault / "a.md")
    root = os.fsencode(vault)
    with open(root + b"/\xff_bad.md", "wb") as fh:
        fh.write(b"# bad\n")
    os.mkdir(root + b"/dir\xfe")
    with open(root + b"/dir\xfe/inner.md", "wb") as fh:
        fh.write(b"# inner\n")
    report = scan_vault(vault)
    assert paths(report) == ["a.md"]
    assert sorted(report.skipped_bad_names) == ["\\xff_bad.md", "dir\\xfe"]
    assert all(decodable(name) for name in report.skipped_bad_names)  # printable as given
    touched = [os.fsdecode(b"\xff_bad.md"), "a.md"]
    again = rescan_paths(vault, {}, touched)
    assert paths(again) == ["a.md"] and again.skipped_bad_names == ["\\xff_bad.md"]


# --- bugs -----------------------------------------------------------------------------


def test_symlink_to_excluded_content_is_not_scanned(tmp_path: Path) -> None:
    vault = tmp_path / "v"
    write(vault / "Home.md")
    write(vault / "private" / "Journal.md", "# Journal\n\npersonal\n")
    write(vault / ".trash" / "Old.md")
    write(vault / ".obsidian" / "snippets" / "x.md")
    (vault / ".indexignore").write_text("private/\n", encoding="utf-8")
    (vault / "journal-link.md").symlink_to(vault / "private" / "Journal.md")
    (vault / "private-link").symlink_to(vault / "private", target_is_directory=True)
    (vault / "trash-link").symlink_to(vault / ".trash", target_is_directory=True)
    (vault / "config-link").symlink_to(vault / ".obsidian", target_is_directory=True)
    assert paths(scan_vault(vault)) == ["Home.md"]


def test_real_folder_wins_over_a_symlink_to_it(tmp_path: Path) -> None:
    vault = tmp_path / "v"
    write(vault / "cooking" / "Dashi.md")
    (vault / "a-cooking").symlink_to(vault / "cooking", target_is_directory=True)
    assert paths(scan_vault(vault)) == ["cooking/Dashi.md"]


def test_the_default_include_keeps_what_its_pattern_keeps(tmp_path: Path) -> None:
    fast = VaultFilter(tmp_path, ("**/*.md",), ())
    matched = VaultFilter(tmp_path, ("**/*.md", "**/*.md"), ())  # not the default: pathspec
    paths = ["a.md", "A.MD", "b.Md", "x/.md", "x/y/z.md", "x.md.bak", "d.md/x.txt", "É/été.md"]
    assert [fast.file_included(p) for p in paths] == [matched.file_included(p) for p in paths]
    assert fast.file_included("x/y/z.md") and not fast.file_included("x.md.bak")
    (tmp_path / ".indexignore").write_text("# only a comment\n\n", encoding="utf-8")
    assert VaultFilter(tmp_path, ("**/*.md",), ()).file_included("a.md")
    (tmp_path / ".indexignore").write_text("drafts/\n", encoding="utf-8")
    ignoring = VaultFilter(tmp_path, ("**/*.md",), ())
    assert not ignoring.file_included("drafts/a.md") and ignoring.file_included("a.md")


def _found(report: ScanReport) -> set[tuple[str, int, int]]:
    return {(f.path, f.size, f.mtime_ns) for f in report.files}


def test_rescanning_the_touched_paths_finds_what_a_walk_finds(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    write(vault / "notes" / "a.md")
    write(vault / "sub" / "dir" / "deep.md")
    write(vault / "keep.md")
    (vault / ".indexignore").write_text("drafts/\n")
    (vault / "drafts").mkdir()
    (vault / ".git").mkdir()
    (vault / "elsewhere").mkdir()
    cap = {"max_bytes": 200, "exclude": ["private/**"]}
    known = {f.path: (f.size, f.mtime_ns) for f in scan_vault(vault, **cap).files}
    changes = {
        "notes/a.md": lambda p: write(p, "# A\n\nedited\n"),
        "sub/dir/deep.md": lambda p: p.unlink(),
        "drafts/new.md": write,  # ignored by .indexignore
        ".git/z.md": write,  # an excluded folder
        "private/p.md": write,  # excluded by a glob
        "big.md": lambda p: write(p, "x" * 500),  # over the cap
        "notes/c.txt": write,  # not a note
        "notes/l2.md": lambda p: p.symlink_to(vault / "keep.md"),  # never followed
        "elsewhere/new.md": write,
        "gone.md": lambda p: None,  # touched, never there
    }
    for rel, change in changes.items():
        change(vault / rel)
    walked = scan_vault(vault, **cap)
    rescanned = rescan_paths(vault, known, changes, **cap)
    assert _found(rescanned) == _found(walked)
    assert rescanned.skipped_too_large == walked.skipped_too_large == ["big.md"]


def test_a_touched_note_under_a_symlinked_folder_is_not_reached(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    write(vault / "real" / "n.md")
    (vault / "alias").symlink_to(vault / "real")
    known = {f.path: (f.size, f.mtime_ns) for f in scan_vault(vault).files}
    assert set(known) == {"real/n.md"}
    assert _found(rescan_paths(vault, known, ["alias/n.md"])) == _found(scan_vault(vault))
