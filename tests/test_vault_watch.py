"""The vault watch of long-lived processes: a freshness pass skips its walk only when the
watch proves nothing changed, walks after any change, and a search sees an edit at once."""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from retriever import index, store
from retriever.app import Retriever
from retriever.vault_watch import LOCAL_FILESYSTEMS, VaultWatch, filesystem_type
from tests.conftest import AppFactory, count_walks

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="inotify is Linux's")


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    (root / "notes").mkdir(parents=True)
    (root / "notes" / "a.md").write_text("# A\n\nfirst\n")
    return root


@pytest.fixture
def watch(vault: Path) -> Iterator[VaultWatch]:
    started = VaultWatch.start(vault)
    if started is None:
        pytest.skip(f"no inotify watch here ({filesystem_type(vault)})")
    yield started
    started.close()


def _after_walk(watch: VaultWatch) -> bool:
    watch.begin_walk()
    return watch.quiet()


def _settles(watch: VaultWatch) -> bool:
    """Quiet after a walk or two: a change's last events (close after write) may still
    arrive after the first walk began, which only costs one more walk."""
    return any(_after_walk(watch) for _ in range(3))


def test_quiet_only_after_a_walk_that_began_with_the_watch_in_place(watch: VaultWatch) -> None:
    assert not watch.quiet()  # nothing proves the index saw the vault yet
    assert _after_walk(watch)
    assert watch.quiet()  # still nothing moved


@pytest.mark.parametrize(
    "change",
    [
        lambda v: (v / "notes" / "a.md").write_text("# A\n\nsecond\n"),
        lambda v: (v / "b.md").write_text("new"),
        lambda v: (v / "notes" / "a.md").unlink(),
        lambda v: (v / "notes" / "a.md").rename(v / "a.md"),
        lambda v: os.utime(v / "notes" / "a.md", (1, 1)),
        lambda v: (v / "notes" / "deeper").mkdir(),
    ],
    ids=["edit", "create", "delete", "move", "touch", "folder"],
)
def test_any_change_under_the_vault_ends_the_quiet(
    watch: VaultWatch, vault: Path, change: object
) -> None:
    assert _after_walk(watch)
    change(vault)  # type: ignore[operator]
    assert not watch.quiet()  # the cookie's round trip proves the change was seen
    assert _settles(watch)  # the next walk sees it; quiet again


def test_a_new_folder_is_watched_too(watch: VaultWatch, vault: Path) -> None:
    (vault / "fresh").mkdir()
    assert _settles(watch)
    (vault / "fresh" / "inside.md").write_text("x")
    assert not watch.quiet()


def test_excluded_folders_are_not_watched(watch: VaultWatch, vault: Path) -> None:
    (vault / ".obsidian").mkdir()
    assert not watch.quiet()
    assert _settles(watch)
    (vault / ".obsidian" / "workspace.json").write_text("{}")  # Obsidian writes it all day
    assert watch.quiet()


def _touched_after(watch: VaultWatch, change: object) -> set[str] | None:
    assert _settles(watch)
    change()  # type: ignore[operator]
    watch.quiet()  # every event so far is in
    return watch.begin_walk()


def test_a_pass_is_told_which_files_were_touched(watch: VaultWatch, vault: Path) -> None:
    edited = _touched_after(watch, lambda: (vault / "notes" / "a.md").write_text("x"))
    assert edited == {"notes/a.md"}
    moved = _touched_after(watch, lambda: (vault / "notes" / "a.md").rename(vault / "b.md"))
    assert moved == {"notes/a.md", "b.md"}
    assert _touched_after(watch, lambda: None) == set()


@pytest.mark.parametrize(
    "change",
    [
        lambda v: (v / "notes" / "sub").mkdir(),
        lambda v: (v / "notes").rename(v / "archive"),
        lambda v: (v / ".indexignore").write_text("drafts/\n"),
        lambda v: [(v / f"n{i}.md").write_text("x") for i in range(1001)],
    ],
    ids=["new-folder", "moved-folder", "ignore-file", "too-many"],
)
def test_a_change_that_is_not_a_few_files_asks_for_a_walk(
    watch: VaultWatch, vault: Path, change: object
) -> None:
    assert _touched_after(watch, lambda: change(vault)) is None  # type: ignore[operator]


def test_the_trust_runs_out_into_a_walk(
    watch: VaultWatch, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _settles(watch)
    monkeypatch.setattr("retriever.vault_watch.MAX_TRUST_S", 0.0)
    time.sleep(0.01)
    assert watch.begin_walk() is None


def test_a_pass_that_did_not_catch_up_walks_again(watch: VaultWatch) -> None:
    assert _after_walk(watch)
    watch.mark_changed()
    assert not watch.quiet()
    assert watch.begin_walk() is None  # what it left behind is not known: a walk


def test_a_deleted_vault_stops_the_watch_for_good(watch: VaultWatch, vault: Path) -> None:
    assert _after_walk(watch)
    shutil.rmtree(vault)
    assert not watch.quiet()
    vault.mkdir()
    assert not _after_walk(watch)  # a new folder under the old name is not watched


def test_even_a_quiet_vault_is_walked_after_a_while(
    watch: VaultWatch, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _after_walk(watch)
    monkeypatch.setattr("retriever.vault_watch.MAX_TRUST_S", 0.0)
    time.sleep(0.01)
    assert not watch.quiet()


def test_close_removes_the_cookie_folder_at_once(vault: Path) -> None:
    started = VaultWatch.start(vault)
    if started is None:
        pytest.skip("no inotify watch here")
    cookies = started._cookies
    assert cookies.is_dir()
    t0 = time.monotonic()
    started.close()
    assert time.monotonic() - t0 < 0.5  # the thread is woken, not waited for
    assert not cookies.exists()


def test_filesystem_type_reads_the_longest_mount(tmp_path: Path) -> None:
    info = tmp_path / "mountinfo"
    info.write_text(
        "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
        "40 22 0:40 / /mnt/share rw - nfs4 server:/x rw\n"
        "41 22 0:41 / /mnt/my\\040drive rw - fuse.sshfs host: rw\n"
    )
    assert filesystem_type(Path("/home/me/vault"), str(info)) == "ext4"
    assert filesystem_type(Path("/mnt/share/vault"), str(info)) == "nfs4"
    assert filesystem_type(Path("/mnt/my drive/v"), str(info)) == "fuse.sshfs"
    assert filesystem_type(Path("/mnt/shared"), str(info)) == "ext4"  # not under /mnt/share
    assert "nfs4" not in LOCAL_FILESYSTEMS and "fuse.sshfs" not in LOCAL_FILESYSTEMS


def test_a_network_vault_is_not_watched(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("retriever.vault_watch.filesystem_type", lambda _p: "nfs4")
    assert VaultWatch.start(vault) is None


# -- in a long-lived app, against the real database ---------------------------------------


def _long_lived(make_app: AppFactory, vault: Path) -> Retriever:
    """An app as the service holds it, indexed: its first run started the watch and walked
    the vault under it (the watch is quiet from here)."""
    app = make_app(vault)  # fresh_interval stays at its default: the watch needs none
    app.long_lived = True
    app.index()
    if app._watch is None:
        pytest.skip("no inotify watch here")
    return app


def test_a_search_walks_only_after_a_change_and_sees_it_at_once(
    make_app: AppFactory, vault_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app(vault_copy)  # fresh_interval stays at its default: the watch needs none
    app.long_lived = True
    walks = count_walks(monkeypatch)
    app.index()  # starts the watch; this first run walks
    if app._watch is None:
        pytest.skip("no inotify watch here")
    assert len(walks) == 1
    for _ in range(3):
        assert app.search("backup", mode="lexical").refreshed_files == 0
    assert len(walks) == 1  # nothing changed: no walk at all
    note = vault_copy / "Inbox.md"
    note.write_text(note.read_text("utf-8") + "\nCall the zorblax locksmith.\n", "utf-8")
    found = app.search("zorblax locksmith", mode="lexical")  # no fresh_interval to wait out
    assert found.refreshed_files == 1 and found.hits[0].path == "Inbox.md"
    assert len(walks) == 1  # the watch named the one file to look at
    (vault_copy / "projects" / "Zorblax plan.md").write_text("# Plan\n\nzorblax\n", "utf-8")
    note.unlink()
    found = app.search("zorblax", mode="lexical")
    assert found.refreshed_files == 2 and [h.path for h in found.hits] == [
        "projects/Zorblax plan.md"
    ]
    (vault_copy / "new folder").mkdir()
    (vault_copy / "new folder" / "Zorblax.md").write_text("# Zorblax\n\nzorblax\n", "utf-8")
    found = app.search("zorblax", mode="lexical")
    assert "new folder/Zorblax.md" in {h.path for h in found.hits}
    assert len(walks) == 2  # a new folder: the vault is walked


def test_a_pass_that_left_changes_behind_walks_again(
    make_app: AppFactory, vault_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app(vault_copy, fresh_max_files=1)
    app.long_lived = True
    app.index()
    app.search("backup", mode="lexical")
    if app._watch is None:
        pytest.skip("no inotify watch here")
    walks = count_walks(monkeypatch)
    for name in ("Inbox.md", "README.md"):
        (vault_copy / name).write_text("# Changed\n\nzorblax\n", "utf-8")
    assert app.search("zorblax", mode="lexical").refreshed_files == 0  # too many: left
    assert not walks  # the watch named the two files
    assert app.search("zorblax", mode="lexical").refreshed_files == 0
    assert len(walks) == 1  # not trusted any more: the next pass walks the vault


def test_a_short_lived_app_does_not_watch(make_app: AppFactory, vault_copy: Path) -> None:
    app = make_app(vault_copy, fresh_interval=0.0)
    app.index()
    app.search("backup", mode="lexical")
    assert app._watch is None


def test_the_watch_can_be_turned_off(make_app: AppFactory, vault_copy: Path) -> None:
    app = make_app(vault_copy, fresh_watch=False, fresh_interval=0.0)
    app.long_lived = True
    app.index()
    app.search("backup", mode="lexical")
    assert app._watch is None


def test_an_index_run_skips_the_walk_while_the_watch_is_quiet(
    make_app: AppFactory, vault_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = _long_lived(make_app, vault_copy)
    seen = app.index().files_seen
    walks = count_walks(monkeypatch)
    quiet = app.index()
    assert not walks and quiet.files_seen == seen and quiet.files_changed == 0
    note = vault_copy / "Inbox.md"
    note.write_text(note.read_text("utf-8") + "\nzorblax\n", "utf-8")
    edited = app.index()
    assert not walks and edited.files_changed == 1  # the watch named the file
    assert app.search("zorblax", mode="lexical").hits[0].path == "Inbox.md"
    (vault_copy / "projects" / "Zorblax plan.md").write_text("# Plan\n\nzorblax\n", "utf-8")
    (vault_copy / "Quick thought.md").unlink()
    moved = app.index()
    assert not walks and (moved.files_changed, moved.files_deleted) == (1, 1)
    assert moved.files_seen == seen and moved.files_unchanged == seen - 1  # as a walk counts


def test_an_index_run_another_indexer_stalled_leaves_a_walk_due(
    make_app: AppFactory, vault_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = _long_lived(make_app, vault_copy)
    note = vault_copy / "Inbox.md"
    note.write_text(note.read_text("utf-8") + "\nzorblax\n", "utf-8")
    with psycopg.connect(app.settings.database_url or "", autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", (index.INDEX_LOCK_KEY,))
        assert index.LOCK_BUSY in app.index(wait_for_lock=False).warnings
    walks = count_walks(monkeypatch)
    assert app.index().files_changed == 1 and len(walks) == 1  # not trusted: walked


def test_a_search_after_an_upgrade_takes_no_more_than_its_bound(
    make_app: AppFactory, vault_copy: Path
) -> None:
    """The watch names one edited note, but a changed pipeline walks the whole vault: the
    notes that differ there (here two) are more than a search's bounded pass takes."""
    app = make_app(vault_copy, fresh_max_files=1)
    app.long_lived = True
    app.index()
    if app._watch is None:
        pytest.skip("no inotify watch here")
    with app.db.connection() as conn:
        store.set_meta(conn, "pipeline_version", "old-version")
        store.forget_stamps(conn, ["Home.md"])  # differs from its file, unseen by the watch
        conn.commit()
    note = vault_copy / "Inbox.md"
    note.write_text(note.read_text("utf-8") + "\nwombats\n", "utf-8")
    assert app.search("wombats", mode="lexical").refreshed_files == 0


def test_a_changed_pipeline_is_never_taken_from_the_watch(
    make_app: AppFactory, vault_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = _long_lived(make_app, vault_copy)
    with app.db.connection() as conn:
        store.set_meta(conn, "pipeline_version", "old-version")
        conn.commit()
    walks = count_walks(monkeypatch)
    assert app.index().full  # re-derived from a walk of the vault, not from the index
    assert len(walks) == 1
