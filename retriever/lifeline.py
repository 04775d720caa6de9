"""Worker processes end with the process that owns them.

The indexer's workers are forked by multiprocessing's fork server, and every one of them
holds both ends of the pool's pipes and the fork server's "alive" pipe: when the indexer
dies without shutting its pool down (``kill -9``, the OOM killer), nothing ever reaches
end-of-file, and the workers, the fork server and the resource tracker wait for ever.
:func:`bind_to_owner` (a pool initializer) makes a worker exit as soon as its owner is
gone, which lets the fork server and the resource tracker see end-of-file and exit too.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
POLL_SECONDS = 1.0  # the fallback watchdog's period where pidfds are missing
EXIT_CODE = 70  # what an orphaned worker exits with (EX_SOFTWARE)


def start_fork_server(preload: list[str]) -> None:
    """Start multiprocessing's fork server with Ctrl-C blocked: the server and every worker
    it forks inherit the blocked mask, so a Ctrl-C sent to the whole process group (what a
    terminal does) cannot kill a worker before :func:`bind_to_owner` makes it ignore Ctrl-C.
    A worker killed that way broke the pool: the run failed instead of stopping cleanly."""
    from multiprocessing import forkserver, resource_tracker

    forkserver.set_forkserver_preload(preload)
    if not hasattr(signal, "pthread_sigmask"):
        forkserver.ensure_running()
        return
    # The resource tracker's own start unblocks SIGINT when it is done: start it first.
    resource_tracker.ensure_running()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        forkserver.ensure_running()  # a no-op once running; a Ctrl-C now stays pending
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def bind_to_owner(owner_pid: int) -> None:
    """Pool initializer: ignore Ctrl-C (the owner handles it and stops the pool) and exit
    when ``owner_pid`` exits."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):  # blocked since birth (start_fork_server)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    _die_with_parent()
    if not _alive(owner_pid):  # died before we got here: nothing left to work for
        os._exit(EXIT_CODE)
    watcher = threading.Thread(
        target=_watch, args=(owner_pid,), name="retriever-lifeline", daemon=True
    )
    watcher.start()


def _die_with_parent() -> None:
    """Linux: SIGKILL from the kernel when our direct parent (the fork server) dies."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _watch(owner_pid: int) -> None:
    """Block until the owner exits (a pidfd turns readable then), else poll its pid."""
    try:
        fd = os.pidfd_open(owner_pid)
    except (AttributeError, OSError):
        fd = -1
    if fd >= 0:
        with contextlib.suppress(OSError):
            select.select([fd], [], [])
        os._exit(EXIT_CODE)
    while _alive(owner_pid):
        time.sleep(POLL_SECONDS)
    os._exit(EXIT_CODE)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else (cannot happen for our owner)
    return True
