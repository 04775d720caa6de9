"""Knowing that a vault did not change without walking it (Linux inotify).

A freshness pass walks the whole vault before a search: on win32-17k, 17,000 ``stat``
calls and 0.15-0.4 s, most of the pass. A long-lived process (the resident service, the
MCP server) instead keeps an inotify watch on every folder of the vault, and skips the walk
when nothing under the vault moved since the last walk began. Nothing is trusted blindly:

- a *barrier* proves the watch has caught up: a cookie file created in a folder of our own
  (a temporary one, never in the vault) comes back through the same inotify queue, so it
  arrives after every vault event that happened before it was created;
- a pass after events about a few files looks at those files only (``begin_walk`` names
  them); a folder's own change, the ignore file, a queue overflow, more than
  ``MAX_TOUCHED`` files, a folder that could not be watched or a read error make the next
  pass walk the whole vault, as without a watch;
- vaults on network or FUSE filesystems (whose remote changes inotify never sees) are not
  watched, and even a quiet vault is walked again after ``MAX_TRUST_S`` seconds.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from retriever.scan import ALWAYS_EXCLUDED_DIRS, IGNORE_FILE

log = logging.getLogger(__name__)

# Walk at least this often whatever the watch says: a bound on any loss no check here
# foresees (writes through mmap, say, which raise no event).
MAX_TRUST_S = 600.0
MAX_TOUCHED = 1000  # files touched between two passes beyond which a walk is cheaper
BARRIER_TIMEOUT_S = 0.25  # the cookie's round trip takes well under a millisecond
# Filesystems where the kernel sees every change (changes made by another machine on a
# network or FUSE mount never reach inotify).
LOCAL_FILESYSTEMS = frozenset(
    {"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "zfs", "f2fs", "jfs", "reiserfs",
     "overlay", "bcachefs", "nilfs2"}
)  # fmt: skip


def filesystem_type(path: Path, mountinfo: str = "/proc/self/mountinfo") -> str | None:
    """The type of the filesystem holding ``path`` (the longest mount point above it)."""
    try:
        lines = Path(mountinfo).read_text().splitlines()
    except OSError:
        return None
    best, kind = "", None
    target = str(path)
    for line in lines:
        left, _, right = line.partition(" - ")
        fields = left.split()
        if len(fields) < 5 or not right:
            continue
        mount = fields[4].replace("\\040", " ")
        inside = target == mount or target.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best):
            best, kind = mount, right.split()[0]
    return kind


class VaultWatch:
    """An inotify watch over a vault's folders; see the module doc."""

    def __init__(self, vault: Path) -> None:
        from inotify_simple import INotify, flags

        self._flags = flags
        self._vault = vault
        self._inotify = INotify()
        self._mask = (
            flags.CREATE | flags.DELETE | flags.MODIFY | flags.ATTRIB | flags.MOVED_FROM
            | flags.MOVED_TO | flags.DELETE_SELF | flags.MOVE_SELF | flags.CLOSE_WRITE
        )  # fmt: skip
        self._cookies = Path(tempfile.mkdtemp(prefix="retriever-watch-"))
        self._cookie_wd = self._inotify.add_watch(self._cookies, flags.CREATE)
        self._cond = threading.Condition()
        # Files touched since the last pass began; None: unknown (before the first pass,
        # after a folder's change or lost events): the next pass walks the whole vault.
        self._touched: set[str] | None = None
        self._broken: str | None = None
        self._walked_at = 0.0
        self._issued = 0
        self._seen = 0
        self._stop = threading.Event()
        self._folders: dict[int, Path] = {}  # watch descriptor -> folder
        try:
            self._add_tree(vault)
        except OSError:
            self._inotify.close()
            shutil.rmtree(self._cookies, ignore_errors=True)
            raise
        self._thread = threading.Thread(target=self._run, daemon=True, name="vault-watch")

    @classmethod
    def start(cls, vault: Path) -> VaultWatch | None:
        """A running watch, or None where one cannot be trusted or set up (not Linux, a
        network filesystem, the kernel's watch limit reached): walks then go on as before."""
        kind = filesystem_type(vault)
        if kind not in LOCAL_FILESYSTEMS:
            log.info("not watching %s: its filesystem (%s) may change unseen", vault, kind)
            return None
        try:
            watch = cls(vault)
        except (ImportError, OSError) as exc:
            log.info("not watching %s: %s", vault, exc)
            return None
        watch._thread.start()
        return watch

    # -- what a freshness pass asks ------------------------------------------------------
    def quiet(self) -> bool:
        """True when nothing under the vault moved since the last walk began (proven by a
        cookie's round trip through the watch)."""
        with self._cond:
            if self._broken or self._stale():
                return False
            # The round trip even when a change is known: the walk that follows then
            # starts after every event so far, and is not marked again by their tail.
            self._issued += 1
            cookie = self._issued
        try:
            (self._cookies / str(cookie)).touch()
        except OSError as exc:
            self._break(f"cookie: {exc}")
            return False
        with self._cond:
            arrived = self._cond.wait_for(
                lambda: self._seen >= cookie or self._broken is not None, BARRIER_TIMEOUT_S
            )
            return bool(arrived) and self._broken is None and self._touched == set()

    def begin_walk(self) -> set[str] | None:
        """A pass starts: it sees everything before this, and later changes mark the vault
        again. Returns the vault-relative paths touched since the last pass began: only
        those need a look. None: unknown (a folder moved, events were lost, the trust ran
        out, ...): walk the whole vault."""
        with self._cond:
            touched = None if self._broken or self._stale() else self._touched
            if touched is None:
                self._walked_at = time.monotonic()
            self._touched = set()
            return touched

    def mark_changed(self) -> None:
        """The pass did not bring the index in line (too many files, the index busy, an
        error): the next one walks the whole vault."""
        with self._cond:
            self._touched = None

    def close(self) -> None:
        self._stop.set()
        try:
            (self._cookies / "stop").touch()  # wakes the thread's read at once
        except OSError:
            pass  # the thread wakes within a second anyway
        self._thread.join(timeout=2.0)
        self._inotify.close()
        shutil.rmtree(self._cookies, ignore_errors=True)

    # -- the watching thread -------------------------------------------------------------
    def _stale(self) -> bool:
        return time.monotonic() - self._walked_at > MAX_TRUST_S

    def _break(self, why: str) -> None:
        with self._cond:
            if self._broken is None:
                log.warning("vault watch stopped (%s): freshness passes walk the vault", why)
            self._broken = why
            self._touched = None
            self._cond.notify_all()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                events = self._inotify.read(timeout=1000)
                if events:
                    self._take(events)
        except Exception as exc:  # never a silent death: a dead watch would be trusted
            if not self._stop.is_set():
                self._break(f"{type(exc).__name__}: {exc}")

    def _take(self, events: list[Any]) -> None:
        flags = self._flags
        cookies: list[int] = []
        paths: set[str] = set()
        unknown = False  # a change that is not one file's: the next pass walks it all
        for event in events:
            if event.wd == self._cookie_wd:
                if event.name.isdigit():
                    cookies.append(int(event.name))
                continue
            if event.mask & (flags.DELETE_SELF | flags.MOVE_SELF) and self._is_root(event.wd):
                self._break("the vault folder moved or was deleted")
                continue
            if event.mask & flags.ISDIR and event.mask & (flags.CREATE | flags.MOVED_TO):
                self._add_new_folder(event.wd, event.name)  # before the change is marked
            rel = self._file_of(event)
            if rel is None:
                unknown = True  # lost events, a folder's own change, the ignore file
            else:
                paths.add(rel)
        for cookie in cookies:
            (self._cookies / str(cookie)).unlink(missing_ok=True)
        with self._cond:
            if unknown:
                self._touched = None
            elif self._touched is not None:
                self._touched |= paths
                if len(self._touched) > MAX_TOUCHED:
                    self._touched = None
            if cookies:
                self._seen = max(self._seen, *cookies)
            self._cond.notify_all()

    def _file_of(self, event: Any) -> str | None:
        """The vault-relative path of the one file an event is about, else None."""
        flags = self._flags
        if event.mask & (flags.Q_OVERFLOW | flags.IGNORED | flags.ISDIR) or not event.name:
            return None
        folder = self._folders.get(event.wd)
        if folder is None:
            return None
        rel = (folder / event.name).relative_to(self._vault).as_posix()
        return None if rel == IGNORE_FILE else rel

    # -- folders -------------------------------------------------------------------------
    def _is_root(self, wd: int) -> bool:
        return self._folders.get(wd) == self._vault

    def _add_new_folder(self, parent_wd: int, name: str) -> None:
        parent = self._folders.get(parent_wd)
        if parent is not None and name not in ALWAYS_EXCLUDED_DIRS:
            try:
                self._add_tree(parent / name)
            except OSError as exc:
                self._break(f"cannot watch {parent / name}: {exc}")

    def _add_tree(self, top: Path) -> None:
        """Watch ``top`` and every folder below it (never following links, never the
        folders no note lives in)."""
        pending = [top]
        while pending:
            folder = pending.pop()
            self._folders[self._inotify.add_watch(folder, self._mask)] = folder
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in entries:
                if entry.name in ALWAYS_EXCLUDED_DIRS:
                    continue
                try:
                    mode = entry.stat(follow_symlinks=False).st_mode
                except OSError:
                    continue
                if stat.S_ISDIR(mode):
                    pending.append(Path(entry.path))
