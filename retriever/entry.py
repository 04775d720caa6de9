"""The ``retriever`` console script: ask the resident service first, else run here.

Kept to the standard library: a hook or a search answered by the warm service costs one
interpreter start and one socket round trip, not a database boot and a model load.
"""

from __future__ import annotations

import io
import sys


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

    run_here()


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
