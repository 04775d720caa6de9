"""Fault 6: two `retriever index` runs and a `retriever watch` on one vault at once, while
notes change: nobody deadlocks, the later ones wait and say so, no note is lost or stored
twice, and the index ends equal to a clean one."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from retriever.index import LOCK_WAIT, PARALLEL_THRESHOLD
from retriever.scan import scan_vault
from tests.conftest import retriever_exe
from tests.faults.dump import dump_index, rows
from tests.faults.harness import amcheck, env_for, record_convergence, session_members, wait_until
from tests.test_index import big_note, make_big_vault, start_index

pytestmark = pytest.mark.faults


def index_matches_disk(url: str, vault: Path) -> bool:
    on_disk = {(f.path, f.size, f.mtime_ns) for f in scan_vault(vault).files}
    stored = {(r[0], r[1], r[2]) for r in rows(url, "SELECT path, size, mtime_ns FROM documents")}
    return on_disk == stored


@pytest.mark.faults_full
def test_two_indexers_and_a_watcher_at_once(
    db_url: str, tmp_path: Path, clean_index: Callable[..., dict[str, Any]]
) -> None:
    n = PARALLEL_THRESHOLD + 100
    vault = make_big_vault(tmp_path / "big", n)
    env = env_for(tmp_path / "home", db_url)
    watcher = subprocess.Popen(
        [retriever_exe(), "watch", str(vault), "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    started = time.monotonic()
    runs = [start_index(vault, env), start_index(vault, env)]
    try:
        time.sleep(1.5)  # while they run: edits, new notes, deletions
        rng = random.Random(5)
        paths = sorted(vault.rglob("*.md"))
        for i, path in enumerate(paths[:20]):
            path.write_text(big_note(i, n, rng, version=2), encoding="utf-8")
        for path in paths[-3:]:
            path.unlink()
        for k in range(5):
            (vault / f"Concurrent {k}.md").write_text(f"# Concurrent {k}\n\nAdded meanwhile.\n")
        outcomes = []
        for proc in runs:
            out, err = proc.communicate(timeout=240)  # a deadlock fails here
            outcomes.append((proc.returncode, json.loads(out), err.decode()))
        for code, data, err in outcomes:
            assert code in (0, 1), err[-2000:]
            assert not data["errors"] and "Traceback" not in err
        waited = sum(LOCK_WAIT in err for _, _, err in outcomes)
        print(f"indexers: exits {[o[0] for o in outcomes]}, {waited} said they waited")
        assert waited >= 1, "neither indexer said it waited for the other"
        # The watcher catches up with the last changes by itself.
        settled = wait_until(lambda: index_matches_disk(db_url, vault), 120, step=0.5)
        took = time.monotonic() - started
        assert settled is not None, "the watcher never caught up with the vault"
    finally:
        for proc in runs:
            if proc.poll() is None:
                proc.kill()
        watcher.send_signal(signal.SIGINT)  # Ctrl-C ends it cleanly
        try:
            watcher.communicate(timeout=60)
        finally:
            for p in session_members(watcher.pid):
                p.kill()
    assert watcher.returncode == 0
    assert not session_members(watcher.pid)
    got, want = dump_index(db_url), clean_index(vault)
    amcheck(db_url)
    lost, dup = record_convergence(
        "two indexers and a watcher at once",
        got,
        want,
        recovery_s=took,
        note=f"{waited} of 2 runs waited and said so; no deadlock",
    )
    assert (lost, dup) == (0, 0)
