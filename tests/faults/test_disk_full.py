"""Fault 5: the disk under RETRIEVER_HOME (and so the embedded server's data directory)
fills up during an index run: a clear error, no corrupt state; once space is freed the
next run converges. The small disk is a tmpfs mounted for the test (root only)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.faults.harness import (
    assert_clean_failure,
    dump_with_server_up,
    env_for,
    record_convergence,
    run_json,
    seed_pgdata,
    stop_server,
)
from tests.test_index import make_big_vault, start_index

pytestmark = pytest.mark.faults

DISK_MB = 112  # the seeded data directory takes ~64 MB of it
LEFT_MB = 2  # what the filler leaves free before the big run


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a size-limited tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m,mode=0755", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()}): no small disk to fill")
    try:
        yield mount
    finally:
        stop_server(mount / "home" / "pgdata")
        if subprocess.run(["umount", str(mount)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def fill(disk: Path, leave_mb: int) -> Path:
    """A filler file that leaves ``leave_mb`` MB free."""
    free = shutil.disk_usage(disk).free
    filler = disk / "filler"
    size = max(0, free - leave_mb * 1024 * 1024)
    with open(filler, "wb") as f:
        f.truncate(0)
    subprocess.run(["fallocate", "-l", str(size), str(filler)], check=True)
    return filler


@pytest.mark.faults_full
def test_disk_full_during_an_index_run(
    small_disk: Path,
    pgdata_template: Path,
    tmp_path: Path,
    clean_index: Callable[..., dict[str, Any]],
    faults_full: bool,
) -> None:
    home = small_disk / "home"
    seed_pgdata(pgdata_template, home)
    datadir = home / "pgdata"
    vault = make_big_vault(tmp_path / "vault", 40)
    env = env_for(home)
    code, _, stderr = run_json(["index", str(vault)], env)
    assert code in (0, 1), stderr[-2000:]

    # Many more notes, then a disk with almost nothing left.
    make_big_vault(tmp_path / "vault" / "more", 1200 if faults_full else 600, seed=3)
    for path in sorted((tmp_path / "vault" / "more").rglob("*.md"))[::3]:
        path.write_text(path.read_text() + ("\n\nPadding paragraph. " * 400), encoding="utf-8")
    filler = fill(small_disk, LEFT_MB)
    proc = start_index(vault, env)
    out, err = proc.communicate(timeout=300)
    stderr = err.decode()
    print(f"disk full: exit {proc.returncode}: {out.decode()[-500:]}")
    assert proc.returncode == 2, f"the run did not fail on a full disk: {out.decode()[-800:]}"
    assert_clean_failure(proc.returncode, stderr)
    error = json.loads(out)["error"]
    assert "space" in error.lower() or "disk" in error.lower(), error

    filler.unlink()  # the user frees space
    started = time.monotonic()
    attempts = 0
    while True:  # a server that crashed on the full disk needs a moment to come back
        attempts += 1
        code, data, stderr = run_json(["index", str(vault)], env)
        if code in (0, 1) or time.monotonic() - started > 120:
            break
        assert_clean_failure(code, stderr)
        time.sleep(2)
    took = time.monotonic() - started
    assert code in (0, 1) and not data["interrupted"], stderr[-2000:]
    got = dump_with_server_up(vault, env, datadir)
    want = clean_index(vault)
    record_convergence(
        "disk full during an index run",
        got,
        want,
        recovery_s=took,
        note=f"{DISK_MB} MB tmpfs; {attempts} run(s) after freeing space",
    )
