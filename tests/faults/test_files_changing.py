"""Fault 7: notes change while an index run reads them: created, deleted, renamed,
truncated to 0 bytes, replaced atomically, replaced by a FIFO, made unreadable (chmod 000).

The indexer runs as an unprivileged user (root reads a chmod 000 file anyway), which needs
root to start and `setpriv`; without them the run is root's and chmod 000 proves nothing,
which the test says. The run must end (no hang on a FIFO), report what it could not read,
and the next run must converge to a clean index of the files as they are then."""

from __future__ import annotations

import json
import os
import pwd
import random
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from retriever.index import PARALLEL_THRESHOLD
from tests.conftest import retriever_exe
from tests.faults.dump import dump_index, rows
from tests.faults.harness import PG_SYSTEM_USER, amcheck, env_for, record_convergence, wait_until
from tests.test_index import big_note, make_big_vault

pytestmark = pytest.mark.faults

USER = PG_SYSTEM_USER  # an unprivileged account that exists wherever the wheel ran as root


def unprivileged() -> list[str] | None:
    """The command prefix that runs as USER, or None where that is impossible."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return None
    try:
        pw = pwd.getpwnam(USER)
    except KeyError:
        return None
    return ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups", "--"]


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder the unprivileged user can reach (pytest's tmp folders are root-only)."""
    path = Path(tempfile.mkdtemp(prefix="retriever-faults-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        subprocess.run(["chmod", "-R", "u+rwX", str(path)], check=False)
        shutil.rmtree(path, ignore_errors=True)


def start(
    prefix: list[str], vault: Path, env: dict[str, str], *extra: str
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*prefix, retriever_exe(), "index", str(vault), "--json", *extra],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def churn(vault: Path, n: int, rng: random.Random, stop_after: float) -> dict[str, int]:
    """Change notes the way people and tools do, until ``stop_after`` seconds have passed."""
    done = dict.fromkeys(
        ["fifo", "chmod 000", "created", "deleted", "renamed", "truncated", "replaced"], 0
    )
    started = time.monotonic()
    k = 0
    while time.monotonic() - started < stop_after:
        notes = sorted(p for p in vault.rglob("*.md") if p.is_file() and not p.is_symlink())
        path = rng.choice(notes[-len(notes) // 3 :])  # read last: still ahead of the run
        kind = list(done)[k % len(done)]
        k += 1
        try:
            if kind == "created":
                (vault / f"Created {k}.md").write_text(f"# Created {k}\n\nDuring the scan.\n")
            elif kind == "deleted":
                path.unlink()
            elif kind == "renamed":
                path.rename(path.with_name(f"Renamed {k}.md"))
            elif kind == "truncated":
                path.write_bytes(b"")
            elif kind == "replaced":  # an editor's atomic save: temp file, then rename over
                tmp = path.with_suffix(".tmp")
                tmp.write_text(big_note(k, n, rng, version=3), encoding="utf-8")
                os.replace(tmp, path)
            elif kind == "fifo":
                path.unlink()
                os.mkfifo(path)
            else:
                path.chmod(0)
        except OSError:
            continue
        done[kind] += 1
        time.sleep(0.01)
    return done


def _within(seconds: float, fn: Callable[[], Any]) -> Any:
    """fn() on a daemon thread; fails the test when it has not returned in time."""
    import threading

    box: list[Any] = []
    worker = threading.Thread(target=lambda: box.append(fn()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert box, f"still blocked after {seconds} s"
    return box[0]


def test_a_fifo_or_symlink_swapped_in_after_the_scan_is_refused(tmp_path: Path) -> None:
    """The scan skips FIFOs and symlinks, but one may replace a note before it is read."""
    from retriever.prepare import PrepareJob, Unreadable, run_job

    (tmp_path / "outside.md").write_text("# Outside\n\nsecret plans\n")
    vault = tmp_path / "vault"
    vault.mkdir()
    os.mkfifo(vault / "pipe.md")
    (vault / "link.md").symlink_to(tmp_path / "outside.md")
    for name in ("pipe.md", "link.md"):
        got = _within(5, lambda name=name: run_job(PrepareJob(str(vault), name, 200, 2000, None)))
        assert isinstance(got, Unreadable), got
    # The no-database search reads the same way (the scan is bypassed to force the race).
    from retriever import files_search
    from retriever.scan import FileInfo

    infos = [FileInfo("pipe.md", 0, 0), FileInfo("link.md", 0, 0)]
    assert _within(
        5, lambda: files_search._count_terms(vault, infos, ["secret"], time.monotonic() + 5)
    ) == ([], False)


@pytest.mark.faults_full
def test_notes_change_during_an_index_run(
    db_url: str, shared_dir: Path, clean_index: Callable[..., dict[str, Any]]
) -> None:
    prefix = unprivileged()
    home = shared_dir / "home"
    home.mkdir()
    if prefix:
        pw = pwd.getpwnam(USER)
        os.chown(home, pw.pw_uid, pw.pw_gid)
    n = 5 * PARALLEL_THRESHOLD  # workers read ~500 notes ahead of the writer: more than that
    vault = make_big_vault(shared_dir / "vault", n)
    env = env_for(home, db_url)
    proc = start(prefix or [], vault, env)
    # Change notes once the scan is over and the first batch is written.
    assert wait_until(
        lambda: (
            proc.poll() is not None or bool(rows(db_url, "SELECT count(*) FROM documents")[0][0])
        ),
        120,
    )
    counts = churn(vault, n, random.Random(9), stop_after=3.0)
    try:
        out, err = proc.communicate(timeout=120)  # a FIFO read would hang here
    finally:
        if proc.poll() is None:
            proc.kill()
    data = json.loads(out)
    print(
        f"during the run: {counts}; exit {proc.returncode}; {data['files_changed']} written; errors {data['errors']}"
    )
    assert proc.returncode in (0, 1), err.decode()[-2000:]
    assert "Traceback" not in err.decode()
    unreadable = [e for e in data["errors"] if "cannot read" in e]
    if prefix:
        # What changed under the run is reported, never fatal; a chmod 000 note is one.
        assert any("Permission denied" in e for e in unreadable) or counts["chmod 000"] == 0

    # The user fixes permissions and removes the FIFOs; the next run converges.
    for path in vault.rglob("*.md"):
        if path.is_fifo():
            path.unlink()
        elif path.is_file():
            path.chmod(0o644)
    started = time.monotonic()
    second = start(prefix or [], vault, env)
    out, err = second.communicate(timeout=180)
    took = time.monotonic() - started
    assert second.returncode in (0, 1) and not json.loads(out)["errors"], err.decode()[-2000:]
    got, want = dump_index(db_url), clean_index(vault)
    amcheck(db_url)
    who = f"as {USER}" if prefix else "as root: chmod 000 not enforced"
    record_convergence(
        "notes change during an index run",
        got,
        want,
        recovery_s=took,
        note=f"{sum(counts.values())} changes, {who}",
    )
