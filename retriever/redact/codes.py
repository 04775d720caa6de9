"""Codes people keep in personal notes: PINs and door codes, two-factor recovery codes, a
wallet's seed phrase, a passphrase of plain words, a card's security code. English and
French.

Each needs its label: a number alone is a number. "PIN: 4821", "the garage door code is
2580", "code de la porte : 4B28A"; "Recovery codes:" and the codes after it or in the list
below it; "Seed phrase:" and its twelve to twenty-four words; "Passphrase: correct horse
battery staple" (four to eight plain words, none of them a function word, ending the
line); "CVV 123".
What follows the label must have the shape of the code: "PIN: see the card", "GPIO pin
17", "backup codes: stored in 1Password" and "seed: 42" stay.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator

from retriever.lexical import STOPWORDS
from retriever.redact.assign import VETO_LAST
from retriever.redact.core import MARK, Edit, Note, keep_first, marker

_S = r"[ \t]+"
_PIN_LABEL = (
    r"pin(?:" + _S + r"(?:code|number))?|puk(?:" + _S + "code)?|digicode|passcode"
    r"|(?:door|gate|garage(?:" + _S + r"door)?|alarm|entry|entrance|building|lockbox|keybox"
    r"|key"
    + _S
    + r"box|lock|padlock|safe|locker|intercom|buzzer|unlock|voicemail)"
    + _S
    + r"(?:code|combination|combo|pin)"
    r"|code"
    + _S
    + r"(?:de"
    + _S
    + r"(?:(?:la|ma)"
    + _S
    + r")?)?carte(?:"
    + _S
    + r"(?:bleue|bancaire|sim|cb))?"
    r"|code"
    + _S
    + r"(?:pin|secret|confidentiel|(?:de"
    + _S
    + r"(?:la"
    + _S
    + r"|l['’])?|du"
    + _S
    + r"|d['’])"
    r"(?:porte|portail|garage|alarme|entr[ée]e|immeuble|cadenas|coffre(?:-fort)?|casier"
    r"|d[ée]verrouillage|interphone))"
    r"|combinaison" + _S + r"(?:du|de" + _S + r"la|de" + _S + r"l['’])" + _S + r"?"
    r"(?:cadenas|coffre(?:-fort)?|casier)"
)
_RECOVERY_LABEL = (
    r"(?:recovery|backup|2fa|two-factor|two" + _S + r"factor|mfa|otp|scratch|emergency"
    r"|one-time|single-use)" + _S + r"codes?"
    r"|codes?" + _S + r"(?:de" + _S + r")?(?:r[ée]cup[ée]ration|secours|sauvegarde|2fa)"
)
_SEED_LABEL = (
    r"(?:seed|recovery|mnemonic|secret"
    + _S
    + r"recovery|wallet|backup)"
    + _S
    + r"(?:phrase|words)|mnemonic|seed"
    r"|phrase" + _S + r"(?:de" + _S + r"(?:r[ée]cup[ée]ration|secours)|mn[ée]monique)"
)
_WORDS_LABEL = (
    r"pass(?:word|phrase)|mot" + _S + "de" + _S + r"passe|mdp|phrase" + _S + r"secr[eè]te"
)
_CVV_LABEL = r"cvv2?|cvc2?|card" + _S + r"(?:security|verification)" + _S + r"(?:code|value)"
# Matched in the lowercase twin of the text; the value is read from the text.
_LABELS = re.compile(
    rf"(?<![\w-])(?:(?P<pin>{_PIN_LABEL})|(?P<recovery>{_RECOVERY_LABEL})"
    rf"|(?P<seed>{_SEED_LABEL})|(?P<words>{_WORDS_LABEL})|(?P<cvv>{_CVV_LABEL}))(?![\w-])"
)
# Each hint costs a pass over the note: few and short, shared with the prose rules ("pass",
# "mdp"). "code" holds "digicode" and "codes"; "comb" "combo", "combination", "combinaison";
# "cv" "cvv" and "cvc"; "pin" "code pin".
_HINTS = ("pin", "code", "comb", "seed", "phrase", "mnemonic", "pass", "mdp", "cv", "card")

# Words between the label and its separator ("for my bank card", "de la carte SIM"): no
# digit (a number there is the value), no separator, never a verb.
_QUAL_WORD = r"(?:[ \t]+(?!(?:is|was|est|are|sont)(?![\w-]))[^\s:=|\d]{1,30})"
_VERB = r"(?:is|was|est|c['’]est|are|sont)(?:" + _S + r"(?:now|still|maintenant))?"
_AFTER = re.compile(
    r"(?:\*\*|__|\*|_)?"
    rf"(?:(?P<qual>{_QUAL_WORD}{{0,5}}?)(?:[ \t]*(?P<sep>[:=]|->|→)|[ \t]+(?P<verb>{_VERB})(?![\w-]))"
    r"|(?P<bare>))"
    r"[ \t]*(?:\*\*|__|\*|_)?[ \t]*",
    re.IGNORECASE,
)
# "PIN length:", "password requirements:", "backup codes policy:": about the code, not it.
_VETO = VETO_LAST | frozenset("requirement requirements strength complexity hints policies".split())
_OPEN = "`\"'«“*"
_CLOSE = "`\"'»”*"

# --- PINs and door codes ----------------------------------------------------------------

_PIN_VALUE = re.compile(r"[#*]?[0-9A-Za-z](?:[0-9A-Za-z#*]|[ -](?=\d)){3,15}")
_AFTER_NUMBER = re.compile(r"[./:,]\d")  # a decimal, a date, a time, a version: not a PIN
_ISO_DATE = re.compile(r"\d{4}-\d\d-\d\d")
_PLACEHOLDER = frozenset("0#*xX•")


def _pin_ok(v: str, bare: bool) -> bool:
    core = v.replace(" ", "").replace("-", "")
    digits = sum(c.isdigit() for c in core)
    if set(core) <= _PLACEHOLDER:
        return False
    letters = [c for c in core if c.isalpha()]
    if letters:  # a door code: "4B28A"
        upper = all(c.isupper() for c in letters)
        return not bare and upper and core == v and digits >= 3 and len(core) <= 10
    return 4 <= digits <= 12


def _pin_edit(text: str, pos: int, end: int, bare: bool) -> Edit | None:
    while pos < end and text[pos] in _OPEN:
        pos += 1
    m = _PIN_VALUE.match(text, pos, end)
    if m is None:
        return None
    v = m.group()
    if _AFTER_NUMBER.match(text, m.end(), end) or _ISO_DATE.fullmatch(v) or not _pin_ok(v, bare):
        return None
    return m.start(), m.end(), marker("pin")


_CVV_VALUE = re.compile(r"\d{3,4}(?![\w.,/:-])")


def _cvv_edit(text: str, pos: int, end: int) -> Edit | None:
    m = _CVV_VALUE.match(text, pos, end)
    return (m.start(), m.end(), marker("payment_card")) if m else None


# --- recovery codes and seed phrases: on the label's line, or in the lines below --------

_NUMBERING = re.compile(r"\d{1,2}[.)]?")
_LIST_MARK = re.compile(r"[ \t]*(?:[-*+>][ \t]+|\d{1,2}[.)][ \t]+)?(?:\[[ xX]\][ \t]+)?")
_TOKEN = re.compile(r"[^\s,;]+")
_CODE = re.compile(r"[A-Za-z0-9]{3,12}(?:-[A-Za-z0-9]{3,12}){0,7}")
_SEED_WORD = re.compile(r"[a-z]{3,8}")
# Common words the BIP-39 list leaves out (it holds "about", "above", "again"): prose.
_NOT_SEED_WORDS = frozenset(
    "the and that with this from which have were been your their there they what when will "
    "would should could into than them these".split()
)
_COMMENT_END = "-->"  # "<!-- Recovery codes: … -->"
_MAX_LINE = 300  # a list line longer than this is prose, not codes
_MAX_LINES = 64


def _code_ok(token: str) -> bool:
    if not _CODE.fullmatch(token):
        return False
    core = token.replace("-", "")
    return len(core) >= 6 and sum(c.isdigit() for c in core) >= 2


def _code_spans(text: str, start: int, stop: int) -> list[tuple[int, int]] | None:
    """Each recovery code on ``text[start:stop]`` (codes apart by blanks or commas; Google
    writes one as "1234 5678"), or None when anything else is there."""
    if stop - start > _MAX_LINE:
        return None
    spans: list[tuple[int, int]] = []
    for m in _TOKEN.finditer(text, start, stop):
        if m.group() == _COMMENT_END:
            continue
        a, b = m.start(), m.end()
        while a < b and text[a] in _OPEN + "~":
            a += 1
        while b > a and text[b - 1] in _CLOSE + "~.":
            b -= 1
        tok = text[a:b]
        if spans and len(tok) == 4 and tok.isdigit() and _four_digits_before(text, spans[-1]):
            spans[-1] = (spans[-1][0], b)  # the second half of "1234 5678"
            continue
        if not (_code_ok(tok) or (len(tok) == 4 and tok.isdigit())):
            return None
        spans.append((a, b))
    if any(not _code_ok(text[a:b].replace(" ", "")) for a, b in spans):
        return None
    return spans


def _four_digits_before(text: str, span: tuple[int, int]) -> bool:
    return span[1] - span[0] == 4 and text[span[0] : span[1]].isdigit()


def _seed_spans(text: str, start: int, stop: int) -> tuple[list[tuple[int, int]], int] | None:
    """The stretch of seed words on ``text[start:stop]`` and how many words it holds
    (numbering such as "1." or "12)" allowed), or None when anything else is there."""
    if stop - start > _MAX_LINE:
        return None
    first = last = -1
    words = 0
    for m in _TOKEN.finditer(text, start, stop):
        tok = m.group()
        if _NUMBERING.fullmatch(tok) or tok == _COMMENT_END:
            continue
        if not _SEED_WORD.fullmatch(tok) or tok in _NOT_SEED_WORDS:
            return None
        words += 1
        first = m.start() if first < 0 else first
        last = m.end()
    return ([(first, last)] if words else []), words


def _lines_below(text: str, end: int) -> Iterator[tuple[int, int]]:
    """The lines after the label's line (``end``: its end), each without its list mark,
    past blank and code-fence lines (codes come in groups, in fences) until three of those
    in a row. Lazy: the caller stops at the first line that is not what it reads."""
    pos, given, gap = end + 1, 0, 0
    while pos <= len(text) and given < _MAX_LINES:
        stop = text.find("\n", pos)
        stop = len(text) if stop < 0 else stop
        line_end = stop - 1 if stop > pos and text[stop - 1] == "\r" else stop
        stripped = text[pos:line_end].strip()
        if stripped.startswith(("```", "~~~")) or not stripped:
            gap += 1
            if gap > 2:
                return
        else:
            gap = 0
            given += 1
            yield _LIST_MARK.match(text, pos, line_end).end(), line_end  # type: ignore[union-attr]
        pos = stop + 1


def _listed_edits(text: str, pos: int, end: int, seed: bool) -> list[Edit]:
    """Recovery codes or seed words on the rest of the label's line, or in the lines below
    it when the label ends its line."""
    kind = "seed_phrase" if seed else "recovery_code"
    rest = text[pos:end].strip().strip("*_:").strip()
    lines: Iterable[tuple[int, int]] = [(pos, end)] if rest else _lines_below(text, end)
    spans: list[tuple[int, int]] = []
    words = 0
    for a, b in lines:
        if seed:
            found = _seed_spans(text, a, b)
            if found is None:
                break
            spans += found[0]
            words += found[1]
        else:
            codes = _code_spans(text, a, b)
            if not codes:
                break
            spans += codes
    if seed and not 12 <= words <= 24:
        return []
    return [(a, b, marker(kind)) for a, b in spans if not text.startswith(MARK, a)]


# --- a passphrase of plain words ----------------------------------------------------------

_PLAIN_WORDS = re.compile(
    r"[`\"'«“]?(?P<v>[a-z]{2,12}(?: [a-z]{2,12}){3,7})[`\"'»”]?[ \t]*[.!]?[ \t]*(?:-->[ \t]*)?\r?$",
    re.MULTILINE,
)
# Words that say where the password is, or what it is like, rather than what it is.
_NOT_PASSPHRASE = frozenset(
    """
    see ask same none not set unset empty blank below above here there elsewhere stored saved
    kept managed rotated changed reset required unknown default usual given provided shared
    sent emailed written printed hidden encrypted redacted removed expired forgotten lost
    manager keychain vault bitwarden lastpass keepass dashlane enpass one password passwords
    your my our their his her its this that it in on at by from as be no yes any all each
    every only also still just like use using via ou et le la les un une des du dans sur
    avec pour par voir même pas aucun
    """.split()
)


def _words_edit(text: str, pos: int, end: int) -> Edit | None:
    m = _PLAIN_WORDS.match(text, pos, end)
    if m is None:
        return None
    words = m.group("v").split()
    if any(w in STOPWORDS or w in _NOT_PASSPHRASE for w in words):
        return None
    return m.start("v"), m.end("v"), marker("password")


# --- the stage ------------------------------------------------------------------------------


def _edits_for(text: str, label: re.Match[str], end: int) -> list[Edit]:
    after = _AFTER.match(text, label.end(), end)
    if after is None or any(
        w.strip("()'\"`*").lower() in _VETO for w in (after["qual"] or "").split()
    ):
        return []
    bare = after.group("bare") is not None
    kind = label.lastgroup
    if kind == "pin":
        edit = _pin_edit(text, after.end(), end, bare)
    elif kind == "cvv":
        edit = _cvv_edit(text, after.end(), end)
    elif kind == "words":
        edit = None if bare else _words_edit(text, after.end(), end)
    else:
        if bare and after.end() < end and text[after.end() : end].strip():
            return []  # "recovery codes are single use": codes follow a separator or a line
        return _listed_edits(text, after.end(), end, seed=kind == "seed")
    return [edit] if edit is not None else []


def redact_codes(note: Note, counts: Counter[str]) -> str:
    """PINs, door codes, recovery codes, seed phrases, plain-word passphrases, card
    security codes, each after its label."""
    text, low = note.text, note.low
    edits: list[Edit] = []
    done = -1  # lines below a label already read: a second label there reads nothing new
    for start, end in note.lines(_HINTS):
        for label in _LABELS.finditer(low, start, end):
            if label.start() < done:
                continue
            found = _edits_for(text, label, end)
            edits += found
            if found and found[-1][0] > end:
                done = found[-1][1]
    return keep_first(text, edits, counts)


# --- payment card numbers ---------------------------------------------------------------------

# Only near a word that names a card: a bare number of the right shape is an order number, an
# id or a serial as often as a card, and scanning every digit of a vault costs too much.
_CARD_HINTS = ("card", "carte", "visa", "amex")  # "card" holds "mastercard"
# 16 or 19 digits in fours, or 15 as 4-6-5 (American Express), apart by blanks or dashes or
# not at all. No lookbehind: it would cost the regex engine its fast scan for a first digit.
_CARD = re.compile(
    r"[2-6]\d{3}(?:(?P<s>[ -]?)\d{4}(?P=s)\d{4}(?P=s)\d{4}(?:(?P=s)\d{3})?"
    r"|(?P<a>[ -]?)\d{6}(?P=a)\d{5})(?![\w+/]|[.,:-]\d|[ -]\d)"
)
_NOT_BEFORE = re.compile(r"[\w.+/-]")


def luhn_ok(digits: str) -> bool:
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = int(c) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


def _card_edits(text: str, start: int, end: int) -> list[Edit]:
    edits: list[Edit] = []
    for m in _CARD.finditer(text, start, end):
        if m.start() > 0 and _NOT_BEFORE.match(text, m.start() - 1):
            continue  # inside a longer number, a version, a path
        digits = m.group().replace(" ", "").replace("-", "")
        if len(set(digits)) > 1 and luhn_ok(digits):
            edits.append((m.start(), m.end(), marker("payment_card")))
    return edits


def redact_cards(note: Note, counts: Counter[str]) -> str:
    """Payment card numbers that pass the Luhn check, on a line that names a card or on the
    line after one ("Visa:" above its number)."""
    text = note.text
    edits: list[Edit] = []
    scanned = 0
    for start, end in note.lines(_CARD_HINTS):
        below = text.find("\n", end + 1)
        stop = len(text) if below < 0 or end >= len(text) else below
        edits += _card_edits(text, max(start, scanned), stop)
        scanned = stop
    return keep_first(text, edits, counts)
