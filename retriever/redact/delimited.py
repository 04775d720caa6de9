"""Credentials in comma-, semicolon- or tab-separated text: a password manager's or a
browser's export pasted into a note, under a header that names the column.

    name,url,username,password
    GitHub,https://github.com,alice,Tr0ub4dor&3xq

Every record under such a header (to the first blank line, fence or line without the
separator; a quoted cell may run over lines) has its credential cells redacted, and only
those. Beside a column of whom or what it opens (username, login, url, title...) a password
cell of one word is redacted whatever it looks like, but a state ("expired", "same"): the
header says what it is, and exported passwords are often plain words. Without one
("field,type,description" documentation), or spaced ("in Bitwarden"), it is judged as a
value written after its label would be.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator

from retriever.redact.core import MARK, Edit, Note, keep_first, marker
from retriever.redact.prose import CHECKS, LABEL_RE, label_lines
from retriever.redact.values import is_placeholder, is_prose

_SEPARATORS = ",;\t"
# What a hand-kept list writes where a password goes: a state, not the password.
_STATUS_WORDS = frozenset(
    """none same expired unchanged changed reset revoked disabled pending unknown empty
    blank hidden sso oauth saml passkey voir vide aucun idem expire expiré inchangé
    """.split()
)
_MAX_CELLS = 40  # a header row, not a line of prose with commas
_MAX_HEADER_CELL = 40
_MAX_HEADER_LINE = 2000
# Header words of the column a password belongs to (a site, a user).
_ACCOUNT_WORDS = frozenset(
    """user username login account email e-mail site service host server name title url
    uri website compte utilisateur identifiant nom""".split()
)
# Exports name the column after its record: "login_password" (Bitwarden), "Password".
_EXPORT_PASSWORD = re.compile(r"(?:login |account |user )?(?:password|passwd|pwd|mot de passe)")
_EXPORT_OTP = re.compile(r"(?:login )?(?:totp|otp|otpauth|2fa)(?: secret| seed| key)?")
# A base32 secret has a digit from 2 to 7 ("see authenticator app" has none), or is
# capitals only, whole or in groups of four: one random 16-character secret in 28 has no
# digit at all.
_OTP_VALUE = re.compile(
    r"otpauth://\S+|(?=[A-Za-z2-7 ]*[2-7])[A-Za-z2-7 ]{16,}=*"
    r"|[A-Z]{16,}=*|[A-Z]{4}(?: [A-Z]{4}){3,}"
)
_CLAUSE = re.compile(r"[.!?:]\s|[.!?:]$|[()]")
_MAX_RECORD_LINES = 50  # a quoted cell of notes runs over at most this many more lines
_FENCE = re.compile(r"[ \t]*(?:```|~~~)")


def _closing_quote(text: str, pos: int, end: int) -> int:
    """Where the quoted cell opened at ``pos`` closes ("" inside is a quote), or -1."""
    close = text.find('"', pos + 1, end)
    while close >= 0 and close + 1 < end and text[close + 1] == '"':
        close = text.find('"', close + 2, end)
    return close


def _split(text: str, start: int, end: int, sep: str) -> list[tuple[int, int]]:
    """(start, end) of each cell's content, quotes left out ("a, b" is one cell)."""
    blanks = " \t".replace(sep, "")
    cells: list[tuple[int, int]] = []
    pos = start
    while pos <= end:
        while pos < end and text[pos] in blanks:
            pos += 1
        if pos < end and text[pos] == '"':
            close = _closing_quote(text, pos, end)
            if close < 0:
                return cells  # the quoted cell goes on to the next line
            cells.append((pos + 1, close))
            nxt = text.find(sep, close, end)
        else:
            nxt = text.find(sep, pos, end)
            b = end if nxt < 0 else nxt
            while b > pos and text[b - 1] in blanks:
                b -= 1
            cells.append((pos, b))
        pos = end + 1 if nxt < 0 else nxt + 1
    return cells


def _normal(cell: str) -> str:
    """A header cell as words: "login_password", "otpSecret" -> "login password", "otp secret"."""
    words = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", cell.strip().strip("\"'`*"))
    return re.sub(r"[_\-.]+", " ", words).strip().lower()


def _header_like(cell: str) -> bool:
    """A column's name: a few words, not a clause of a sentence with commas."""
    return len(cell) <= _MAX_HEADER_CELL and len(cell.split()) <= 3 and not _CLAUSE.search(cell)


def _column_tier(name: str) -> str | None:
    if _EXPORT_PASSWORD.fullmatch(name):
        return "password"
    if name in ("cvc", "cvv", "cvc2", "cvv2", "card cvc", "card cvv", "security code"):
        return "cvc"
    if _EXPORT_OTP.fullmatch(name):
        return "otp"
    m = LABEL_RE.fullmatch(name)
    return m.lastgroup if m is not None and m.lastgroup else None


def _header(note: Note, start: int, end: int) -> tuple[str, dict[int, str], int] | None:
    """(separator, column -> tier, its number of cells when a column names an account,
    else 0) of a header row."""
    line = note.low[start:end]
    if "|" in line or "(" in line or len(line) > _MAX_HEADER_LINE:
        return None  # a markdown table (the tables stage's), a call's arguments, prose
    counts = {s: line.count(s) for s in _SEPARATORS}
    sep = max(counts, key=lambda s: counts[s])
    # Cells of a few words each: prose with a comma or two has longer stretches between.
    if not counts[sep] or len(line) > (counts[sep] + 1) * _MAX_HEADER_CELL or ". " in line:
        return None
    cells = [_normal(note.text[a:b]) for a, b in _split(note.text, start, end, sep)]
    if not 2 <= len(cells) <= _MAX_CELLS or not all(map(_header_like, cells)):
        return None
    columns = {i: tier for i, c in enumerate(cells) if (tier := _column_tier(c))}
    accounts = any(set(c.split()) & _ACCOUNT_WORDS for c in cells)
    return (sep, columns, len(cells) if accounts else 0) if columns else None


def _cell_edit(value: str, tier: str, lenient: bool) -> str | None:
    """The marker kind for a credential cell's value, or None to leave it."""
    if not value or value.startswith(MARK) or is_placeholder(value):
        return None
    if tier == "otp":
        return "secret" if _OTP_VALUE.fullmatch(value) else None
    if tier == "cvc":
        return "payment_card" if re.fullmatch(r"\d{3,4}", value) else None
    kind, ok = CHECKS[tier]
    if " " in value:  # a passphrase, judged; "in Bitwarden", "same as Netflix" are notes
        return kind if tier == "password" and ok(value, False) and not is_prose(value) else None
    if ok(value, False):
        return kind
    # Beside whom it opens, an export's password is any single token but a note about it
    # ("expired", "(see 1Password)", "voir coffre" is spaced).
    plain = len(value) >= 4 and value.lower() not in _STATUS_WORDS and value[0] not in "(["
    return "password" if lenient and tier == "password" and plain else None


def _line_at(text: str, start: int) -> tuple[int, int, int]:
    """(start, end without its "\\r", where the next line starts) of the line at ``start``."""
    stop = text.find("\n", start)
    stop = len(text) if stop < 0 else stop
    return start, stop - (text[stop - 1 : stop] == "\r"), stop + 1


def _rows(text: str, end: int) -> Iterator[tuple[int, int]]:
    """The records after the header that ends at ``end``, to a blank line or a fence (read
    lazily: the caller stops at the first one without the separator). A record whose
    quoted cell holds line breaks (an export's notes) runs on to where its quotes close."""
    pos = end + 1
    while pos <= len(text):
        start, line_end, pos = _line_at(text, pos)
        if not text[start:line_end].strip() or _FENCE.match(text, start, line_end):
            return
        quotes = text.count('"', start, line_end)
        for _ in range(_MAX_RECORD_LINES):
            if quotes % 2 == 0 or pos > len(text):
                break
            more, line_end, pos = _line_at(text, pos)
            quotes += text.count('"', more, line_end)
        yield start, line_end


def redact_delimited(note: Note, counts: Counter[str]) -> str:
    text = note.text
    if "," not in text and ";" not in text and "\t" not in text:
        return text
    edits: list[Edit] = []
    read = -1
    for start, end in label_lines(note):
        if start <= read or (head := _header(note, start, end)) is None:
            continue
        sep, columns, width = head
        for row_start, row_end in _rows(text, end):
            if sep not in text[row_start:row_end]:
                break
            read = row_end
            cells = _split(text, row_start, row_end, sep)
            # Lenient only in a record of the header's shape (an empty cell more or less
            # at its end: a trailing separator).
            shape = len(cells) - (len(cells) > 1 and cells[-1][0] == cells[-1][1])
            lenient = width in (len(cells), shape)
            for i, tier in columns.items():
                if i < len(cells) and (kind := _cell_edit(text[slice(*cells[i])], tier, lenient)):
                    edits.append((*cells[i], marker(kind)))
    return keep_first(text, edits, counts)
