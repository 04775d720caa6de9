"""One error hierarchy: every deliberate error has a kind, and an edge turns any error into
one line (input and unavailable errors as they are, others as internal)."""

from __future__ import annotations

import psycopg
import pytest

from retriever.db import DatabaseConfigError, DatabaseError
from retriever.embed import EmbedderError, InvalidVectorError
from retriever.errors import InputError, InternalError, UnavailableError, VaultError, describe
from retriever.mcp_server import RemoteBindError
from retriever.notes import NotePathError, NoteQueryError
from retriever.query_input import SearchInputError


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (SearchInputError, InputError),
        (NotePathError, InputError),
        (NoteQueryError, InputError),
        (RemoteBindError, InputError),
        (VaultError, InputError),
        (DatabaseConfigError, InputError),
        (DatabaseError, UnavailableError),
        (EmbedderError, UnavailableError),
        (InvalidVectorError, UnavailableError),
    ],
)
def test_every_deliberate_error_has_a_kind(error: type[Exception], kind: type[Exception]) -> None:
    assert issubclass(error, kind)


def test_old_catch_clauses_still_catch() -> None:
    # Callers that caught ValueError / RuntimeError keep working.
    assert issubclass(SearchInputError, ValueError)
    assert issubclass(DatabaseError, RuntimeError)
    assert issubclass(DatabaseConfigError, ValueError)


def test_describe_is_one_line_and_names_the_kind() -> None:
    assert describe(VaultError("vault folder not found: /x")) == "vault folder not found: /x"
    assert describe(DatabaseError("cannot connect:\n\tIs the server running?")) == (
        "cannot connect: Is the server running?"
    )
    db = describe(psycopg.OperationalError("server closed the connection\nunexpectedly"))
    assert db == "database error: OperationalError: server closed the connection"
    bug = describe(KeyError("chunk"))
    assert bug.startswith("internal error: KeyError") and "\n" not in bug
    assert describe(InternalError("")) == "InternalError"
