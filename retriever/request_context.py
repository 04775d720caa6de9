"""What one request of the resident service brings with it: the client's environment and
working folder, and which path answered. Outside the service nothing is set and the
process's own environment and folder apply. Standard library only (the thin client and
the settings both import it)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class RequestContext:
    env: Mapping[str, str]
    cwd: Path


_current: ContextVar[RequestContext | None] = ContextVar("retriever_request", default=None)


def current() -> RequestContext | None:
    return _current.get()


@contextmanager
def serving(env: Mapping[str, str], cwd: Path) -> Iterator[RequestContext]:
    ctx = RequestContext(dict(env), cwd)
    token = _current.set(ctx)
    try:
        yield ctx
    finally:
        _current.reset(token)


def answered_by() -> str:
    """``service`` inside a request of the resident service, else ``process``."""
    return "service" if _current.get() is not None else "process"


def absolute(path: Path) -> Path:
    """A path as the client meant it: relative paths start in the client's folder."""
    path = path.expanduser()
    ctx = _current.get()
    if path.is_absolute() or ctx is None:
        return path
    return ctx.cwd / path
