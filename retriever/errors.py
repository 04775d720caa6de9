"""One error hierarchy: what the library raises on purpose, by kind, so that each edge
(CLI, MCP, hooks) translates it once: input (the caller can fix it), unavailable (a
component does not answer: retry or repair it) and internal (a bug, said plainly)."""

from __future__ import annotations


class RetrieverError(Exception):
    """Root of the errors the library raises on purpose."""


class InputError(RetrieverError, ValueError):
    """The caller's input or setting is wrong; the message says how to fix it."""


class UnavailableError(RetrieverError, RuntimeError):
    """A component (the database, the model server) cannot be reached or prepared."""


class InternalError(RetrieverError):
    """Something that should not happen; reported in one line, details in the log."""


class ConfigError(InputError):
    """A setting (an environment variable) has a value the program cannot use."""


class VaultError(InputError):
    """The vault folder is missing, or is not a folder."""


def describe(exc: BaseException) -> str:
    """The one line an edge shows for ``exc`` (anything not ours is internal)."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if isinstance(exc, RetrieverError | FileNotFoundError):
        return " ".join(str(exc).split()) or type(exc).__name__
    if type(exc).__module__.split(".")[0] in {"psycopg", "psycopg_pool"}:
        return f"database error: {type(exc).__name__}: {first}".rstrip(": ")
    return f"internal error: {type(exc).__name__}: {first} (run with -v for details)"
