"""The ``retriever`` console script: ask the resident service first, else run here.

Kept to the standard library: a hook or a search answered by the warm service costs one
interpreter start and one socket round trip, not a database boot and a model load.
"""

from __future__ import annotations

import atexit
import io
import os
import sys
import threading
from collections.abc import Callable
from typing import NoReturn


def main() -> None:
    argv = sys.argv[1:]
    stdin_text = _hook_input(argv)
    from retriever.client import run_remote

    code = run_remote(argv, stdin_text)
    if code is not None:
        sys.stdout.flush()
        sys.exit(code)
    if stdin_text is not None:
        sys.stdin = io.StringIO(stdin_text)  # already read: hand it on to the local run
    from retriever.cli import main as run_here

    _exit_after(run_here)


def _exit_after(command: Callable[[], object]) -> NoReturn:
    """Run ``command``, then end the process as the interpreter would, less its teardown.

    After the exit handlers, the interpreter frees every module and object one by one:
    0.1-0.2 s of a command that loaded numpy, psycopg and a model, and nothing the user
    needs (files are closed, the embedded server stopped, output flushed by then). So the
    steps that matter run here, in the interpreter's order: wait for non-daemon threads,
    run the exit handlers, flush standard output; then ``os._exit`` with the same code.
    Any other exception (Ctrl-C included) takes the interpreter's usual way out."""
    try:
        command()
        code = 0
    except SystemExit as stop:
        code = _exit_code(stop.code)
    shutdown = getattr(threading, "_shutdown", None)  # joins non-daemon threads, as at exit
    if shutdown is not None:
        shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # the reader went away, or the stream was closed
            pass
    os._exit(code)


def _exit_code(code: object) -> int:
    """The exit status ``SystemExit(code)`` gives, as the interpreter reads it: None is 0;
    an int keeps its low byte (one past 64 bits is -1, so 255); any other object is
    printed on stderr and gives 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF if -(2**63) <= code < 2**63 else 255
    if sys.stderr is not None:
        print(code, file=sys.stderr)
    return 1


def _hook_input(argv: list[str]) -> str | None:
    """Hooks read their event on stdin: read it once here so either path can use it."""
    from retriever.client import command_of

    if command_of(argv) != "hook" or sys.stdin is None or sys.stdin.isatty():
        return None
    try:
        return sys.stdin.read()
    except (OSError, UnicodeDecodeError):
        return None


if __name__ == "__main__":
    main()
