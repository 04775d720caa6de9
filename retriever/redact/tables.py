"""Credentials in markdown tables: the cells of a column headed "Password", "Mot de passe",
"API key", "Token"...

    | Service | User  | Password               |
    | ------- | ----- | ---------------------- |
    | NAS     | admin | violet-rocket-maple-42 |

Each cell of such a column is judged as a value written after its label would be (a
passphrase, a human password, random characters, key material); other columns are left
alone. A row that pairs a label with its value (``| Password | … |``) is prose's job.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter

from retriever.redact.core import MARK, Edit, Note, keep_first, marker
from retriever.redact.prose import CHECKS, LABEL_RE, label_lines

_PIPE = re.compile(r"(?<!\\)\|")
# GFM: a delimiter cell is one hyphen or more (`|--|`, `| - |`, `|:-|` are tables too).
_DELIMITER = re.compile(r"[ \t]*\|?(?:[ \t]*:?-+:?[ \t]*\|)+(?:[ \t]*:?-+:?[ \t]*)?[ \t]*")
# Header cells that name a password column only in a table's header ("pass" in prose is
# a verb or a ticket), and only beside a column of whom or what it opens: "| Test | Pass |"
# counts results.
_PASSWORD_HEADERS = frozenset({"pass", "pw", "pwd", "passwd", "mdp", "pass word"})
_ACCOUNT_HEADERS = frozenset(
    """user username login account email e-mail site service host server name compte
    utilisateur identifiant identifiants site web""".split()
)
_CELL_TRIM = " \t*_`\"'"
_MAX_ROWS = 500


def _cells(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """(start, end) of each cell's content, trimmed; outer pipes do not make empty cells."""
    bounds = [start - 1, *(m.start() for m in _PIPE.finditer(text, start, end)), end]
    cells = []
    for a, b in itertools.pairwise(bounds):
        a += 1
        while a < b and text[a] in _CELL_TRIM:
            a += 1
        while b > a and text[b - 1] in _CELL_TRIM:
            b -= 1
        cells.append((a, b))
    if cells and text[start:end].lstrip().startswith("|"):
        cells = cells[1:]
    if cells and text[start:end].rstrip().endswith("|"):
        cells = cells[:-1]
    return cells


def _next_line(text: str, end: int) -> tuple[int, int] | None:
    if end >= len(text):
        return None
    start = end + 1
    stop = text.find("\n", start)
    stop = len(text) if stop < 0 else stop
    return start, stop - (text[stop - 1 : stop] == "\r")


def _credential_columns(note: Note, start: int, end: int) -> dict[int, str]:
    """Column index -> label tier, for the header cells that name a credential."""
    out = {}
    cells = _cells(note.text, start, end)
    headers = {note.low[a:b] for a, b in cells}
    for i, (a, b) in enumerate(cells):
        m = LABEL_RE.fullmatch(note.low, a, b)
        if m is not None and m.lastgroup:
            out[i] = m.lastgroup
        elif note.low[a:b] in _PASSWORD_HEADERS and headers & _ACCOUNT_HEADERS:
            out[i] = "password"
    return out


def _column_edits(note: Note, header: tuple[int, int]) -> list[Edit]:
    text = note.text
    columns = _credential_columns(note, *header)
    delim = _next_line(text, header[1])
    if not columns or delim is None or not _DELIMITER.fullmatch(text, *delim):
        return []
    edits: list[Edit] = []
    row = _next_line(text, delim[1])
    for _ in range(_MAX_ROWS):
        if row is None or "|" not in text[row[0] : row[1]]:
            break
        cells = _cells(text, *row)
        for i, tier in columns.items():
            if i >= len(cells):
                continue
            a, b = cells[i]
            value = text[a:b]
            kind, ok = CHECKS[tier]
            if value and " " not in value and not value.startswith(MARK) and ok(value, False):
                edits.append((a, b, marker(kind)))
        row = _next_line(text, row[1])
    return edits


def redact_tables(note: Note, counts: Counter[str]) -> str:
    text = note.text
    if "|" not in text or "-" not in text:
        return text
    edits: list[Edit] = []
    for start, end in label_lines(note):
        if text.find("|", start, end) >= 0:
            edits += _column_edits(note, (start, end))
    return keep_first(text, edits, counts)
