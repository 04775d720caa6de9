"""Codes people keep in personal notes: PINs and door codes, two-factor recovery codes, a
wallet's seed phrase, a passphrase of plain words, a card's security code and number.
English and French.

Each needs its label: a number alone is a number. "PIN: 4821", "the garage door code is
2580", "code de la porte : 4B28A", "Alarm: 2580" (an alarm named alone: not "Alarm: 0630",
a time of day); "Recovery codes:" and the codes after it or in the list
below it; "Seed phrase:" and its 12 to 24 words, every one of them from the BIP-39 lists;
"Passphrase: correct horse battery staple" (four to eight plain words ending the line, none
of them a function word or a word about passwords); "CVV 123". What follows the label must
have the shape of the code: "PIN: see the card", "GPIO pin 17", "backup codes: stored in
1Password", "seed: 42" and a gardener's list of seeds stay. A card number needs the Luhn
check, an issuer's first digits and a word naming a card on its line or above its list.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator

from retriever.lexical import STOPWORDS
from retriever.redact.assign import VETO_LAST
from retriever.redact.core import LINE_BREAKS, MARK, Edit, Note, keep_first, marker
from retriever.redact.values import bip39_words, is_common_word, is_wordy

_S = r"[ \t]+"


def _labels(*alternatives: str) -> str:
    """Labels written with single spaces, each space standing for any run of blanks."""
    return "|".join(a.replace(" ", _S) for a in alternatives)


# A device or a place named alone ("Garage keypad: 8264", "Lockbox: 4471"), which needs a
# separator after it (see _PLACE). Not "Keypad:" alone (a model). "Alarm:" alone names an
# alarm clock's time as often as a house alarm's code: its code is judged as an alarm's
# (see _alarm_code_ok), and it comes last, after "alarm code", "alarm keypad".
_KEYPAD = "(?:door|gate|garage(?: door)?|front door|building|entry|entrance|alarm|shed) keypad"
_BOXES = "lockbox|keybox|key box|key safe|padlock|cadenas"
# "Alarme de la maison :": words before the separator ("panel", "system": a model's).
_ALARM = "alarme?"
_PIN_LABEL = _labels(
    "pin(?: (?:code|number))?",
    "puk(?: code)?",
    "passcode",
    "digicode",
    "(?:door|gate|garage(?: door)?|front door|alarm(?: panel| system)?|entry|entrance|lockbox"
    "|keybox|key box|key safe|lock|padlock|safe|locker|intercom|buzzer|unlock|voicemail)"
    " (?:code|combination|combo|pin)",
    f"{_KEYPAD}(?: (?:code|combination|combo|pin))?",
    "keypad (?:code|combination|combo|pin)",
    _BOXES,
    "code (?:pin|cb|secret|confidentiel)",
    "code (?:de (?:la |ma )?|du |d['’])?(?:carte(?: (?:bleue|bancaire|sim))?|porte|portail"
    "|garage|alarme|entr[ée]e|immeuble|cadenas|coffre(?:-fort)?|casier|interphone|acc[eè]s)",
    "combinaison (?:du |de la |de l['’])?(?:cadenas|coffre(?:-fort)?|casier)",
    "code (?:de )?d[ée]verrouillage",
    # An alarm's: "disarm code", "code to disarm", "code pour désactiver".
    "disarm(?:ing)? (?:code|pin)",
    "code (?:to disarm|pour d[ée]sactiver)",
    _ALARM,
)
_RECOVERY_LABEL = _labels(
    "(?:recovery|backup|2fa|two-factor|two factor|mfa|otp|scratch|emergency|one-time"
    "|single-use) codes?",
    "codes? (?:de )?(?:r[ée]cup[ée]ration|secours|sauvegarde|2fa)",
)
_SEED_LABEL = _labels(
    "(?:seed|recovery|mnemonic|secret recovery|wallet|backup) phrase",
    "(?:seed|recovery|secret|backup|wallet) words",
    "(?:12|15|18|21|24)(?:-| )?(?:words?|mots)",
    "mots (?:de (?:r[ée]cup[ée]ration|secours)|secrets)",
    # A wallet's name: what follows is judged as a seed is (every word from the lists).
    "metamask|ledger|trezor|exodus|phantom|electrum|trust wallet|coinbase wallet",
    "mnemonic(?: (?:seed|words))?",
    "seed",
    "phrase (?:de (?:r[ée]cup[ée]ration|secours)|mn[ée]monique)",
)
_PASSPHRASE_LABEL = _labels("passphrase", "pass phrase", "phrase (?:de passe|secr[eè]te)")
_CVV_LABEL = _labels(
    "cvv2?",
    "cvc2?",
    "(?:card )?(?:security|verification) (?:code|value)",
    "code de s[ée]curit[ée]",
    "cryptogramme(?: visuel)?",
    "card_(?:cvc|cvv)2?",  # a form's or an export's field
)
# Matched in the lowercase twin of the text; the value is read from the text. The group
# names are the rules, not the kinds they redact.
_LABELS = re.compile(
    rf"(?<![\w-])(?:(?P<pin>{_PIN_LABEL})|(?P<recovery>{_RECOVERY_LABEL})"
    rf"|(?P<seed>{_SEED_LABEL})|(?P<passphrase>{_PASSPHRASE_LABEL})|(?P<cvv>{_CVV_LABEL})"
    # American Express's "CID": a Content-ID, a customer's or a cell's id elsewhere, so only
    # on a line that names a card (see redact_codes).
    r"|(?P<cid>cid))(?![\w-])"
)
# Each hint costs a pass over the note: few and short, some shared with the prose rules
# ("pass"). "code" holds "digicode", "codes", "security code"; "comb" "combo",
# "combination", "combinaison"; "cv" "cvv" and "cvc"; "pass" "passcode" and "passphrase".
_HINTS = (
    "pin",
    "puk",
    "code",
    "comb",
    "seed",
    "mnemonic",
    "phrase",
    "pass",
    "cv",
    "card",
    "carte",  # "carte" and "amex" name a card: a line holding one may hold a "CID"
    "amex",
    "cryptogramme",
    "alarm",
    "keypad",
    "lockbox",
    "keybox",
    "key box",
    "key safe",
    "padlock",
    "cadenas",
)
# Seed phrases under a wallet's name or a count of words (their lines only).
_SEED_HINTS = ("words", "mots", "metamask", "ledger", "trezor", "exodus", "phantom", "electrum")

# Words between the label and its separator ("for my bank card", "(Visa ending 1234)",
# "de la carte SIM"): a bracketed aside, or a word with no digit (a number there is the
# value), no separator and no verb.
_QUAL_WORD = (
    r"(?:[ \t]+(?:\([^()\n]{1,40}\)|(?!(?:is|was|est|are|sont)(?![\w-]))[^\s:=|\d()]{1,30}))"
)
_VERB = r"(?:is|was|est|c['’]est|are|sont)(?:" + _S + r"(?:now|still|maintenant))?"
_AFTER = re.compile(
    r"(?:\*\*|__|\*|_|`|[\"'](?=[ \t]*:))?"  # a JSON or YAML key's closing quote: "cvc": "737"
    rf"(?:(?P<qual>{_QUAL_WORD}{{0,5}}?)"
    rf"(?:[ \t]*(?:::?|=|->|→)|[ \t]+[-–—](?=[ \t])|[ \t]+{_VERB}(?![\w-]))"
    r"|(?P<bare>))"
    r"[ \t]*(?:\*\*|__|\*|_)?[ \t]*",
    re.IGNORECASE,
)
# "PIN length:", "password requirements:", "backup codes policy:": about the code, not it.
_VETO = VETO_LAST | frozenset(
    "requirement requirements strength complexity hints policies number numbers".split()
)
_OPEN = "`\"'«“*"
_CLOSE = "`\"'»”*"


def _vetoed(qualifier: str | None, veto: frozenset[str] = _VETO) -> bool:
    return any(w.strip("()'\"`*").lower() in veto for w in (qualifier or "").split())


# --- PINs, door codes, card security codes ------------------------------------------------

# Digits in up to four groups ("12-34-56"), or up to twelve digits and capitals ("4B28A"),
# maybe a "#" at either end; never followed by more digits (a phone number, a card), a
# decimal, a date, a time or a colon ("Alarm code 1001: overtemperature"), nor by a card
# already redacted (the same verdict on a second pass).
_PIN_VALUE = re.compile(
    r"#?(?:\d{2,4}(?:[ -]\d{2,4}){1,3}|\d(?:[ -]\d){3,7}|[0-9A-Z]{3,12})#?"
    r"(?![0-9A-Za-z#]|[ -]?(?:\d|\[REDACTED:)|[.,/:]\d|:)"
)
_ISO_DATE = re.compile(r"\d{4}-\d\d-\d\d")
# Where a code after a place's name ends: its line, its sentence, an aside.
_CLAUSE_END = re.compile(r"[`\"'»”*]*[ \t]*(?:[.,;!)(\[–—]|[ \t]-[ \t]|\r?\Z)")
# The labels that name only a device or a place: a separator must follow ("keypad 4471
# model" is a product), and the code is digits, not a year ("Lockbox: 2024").
_PLACE = re.compile(_labels(_KEYPAD, _BOXES, _ALARM))
_ALARM_LABEL = re.compile(_labels(_ALARM))
# Words between a device's name and its colon that say the number is not its code ("Padlock
# model: 1177", "Lockbox serial: 44218", "Keypad battery: 2032").
_PLACE_VETO = frozenset(
    """
    model serial sku number no nr num ref reference contract company phone tel telephone cost
    price threshold battery batteries invoice order zip postcode ext extension room size
    version firmware part id delay zone zones time times log event brand type warranty
    clock snooze count budget sound volume tone installed monitoring réveil heure horaire
    télésurveillance panel system
    """.split()
)
# Before "alarm" on its line, only markup and the words of a house's own alarm: "UPS alarm:
# 3300", "Low battery alarm: 4800", "Fire alarm: 2580 Hz" name what sets it off, and what
# follows is a threshold or a measure.
_ALARM_OWNER = frozenset(
    "house home burglar intruder security my the our la l mon ma notre maison".split()
)
_LINE_WORD = re.compile(r"[^\W\d_]+")


def _alarm_owned(text: str, start: int) -> bool:
    """Only markup, or the words of a house's alarm, stand before the label on its line."""
    line_start = max(text.rfind("\n", 0, start) + 1, start - 40)
    before = _LINE_WORD.findall(text[line_start:start].lower())
    return all(w in _ALARM_OWNER for w in before)


# An alarm's code: four to eight digits but five (a postcode: "Alarme : 75011."), maybe a
# "#" around them ("#2580", "2580#"), or written apart ("25 80", "8 5 3 1"); never with
# dashes ("31-12", "01-05" are dates).
_ALARM_CODE = re.compile(r"#?(?:(?P<run>\d{4}|\d{6,8})|(?P<pair>\d\d \d\d)|\d(?: \d){3,7})#?")
# A time of day: HHMM or HHMMSS on the 24-hour clock, and "2400" (midnight, in schedules).
_CLOCK = re.compile(r"(?:[01]\d|2[0-3])[0-5]\d(?:[0-5]\d)?|2400")
_YYYYMMDD = re.compile(r"(?:19|20)\d\d(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])")
# After an alarm's code, the words that say what to do next ("2580 then OFF").
_ALARM_GOES_ON = re.compile(
    r"[`\"'»”*]*[ \t]+(?:(?:then|puis)[ \t]+(?:off|on)|to[ \t]+disarm|pour[ \t]+d[ée]sactiver)"
    r"(?![\w-])",
    re.IGNORECASE,
)
# What a number after a device's name is not: a phone number ("0800 123 456",
# "0612345678") or a month ("03-2024").
_NOT_A_PLACE_CODE = re.compile(r"\d\d+(?:[ -]\d+){2,}|0\d{9}|(?:0[1-9]|1[0-2])-(?:19|20)\d\d")
_CVV_VALUE = re.compile(r"\d{3,4}(?![\w/]|[.,:-]\d)")


def _pin_ok(v: str, bare: bool, place: bool = False) -> bool:
    """A PIN or a door code. With no separator after the label ("pin 1234") only plain
    digits, and no year ("PIN 2019", "unlock code 1984"); after a device's or a place's
    name alone ("Alarm: 2580"), digits and no year."""
    core = v.replace(" ", "").replace("-", "").strip("#")
    digits = sum(c.isdigit() for c in core)
    if not core.strip("0"):
        return False  # "0000": a placeholder
    if digits < len(core):  # a door code: "4B28A"
        return not bare and not place and digits >= 3 and len(core) <= 10
    if _ISO_DATE.fullmatch(v):
        return False
    if place and _NOT_A_PLACE_CODE.fullmatch(v.strip("#")):
        return False
    year = len(core) == 4 and core[:2] in ("19", "20")
    if (bare and core != v) or ((bare or place) and year):
        return False
    return 4 <= digits <= 12


_ASIDE = re.compile(r"[`\"'»”*]*[ \t]*\((?P<words>[^()\n]{1,40})\)")


def _alarm_code_ok(v: str) -> bool:
    """A house alarm's code after "Alarm:" alone ("2580", "#2580", "25 80"), not a time of
    day on the 24-hour clock ("0630", "06 30", "2100"), nor a date ("20240112"). A year, a
    phone number, "0000" are left by ``_pin_ok``."""
    m = _ALARM_CODE.fullmatch(v)
    if m is None:
        return False
    written = (m["run"] or m["pair"] or "").replace(" ", "")
    if _CLOCK.fullmatch(written):
        return False
    return _YYYYMMDD.fullmatch(written) is None


def _value_at(text: str, pos: int, end: int, pattern: re.Pattern[str]) -> re.Match[str] | None:
    while pos < end and text[pos] in _OPEN:
        pos += 1
    return pattern.match(text, pos, end)


def _pin_edit(
    text: str, pos: int, end: int, bare: bool, place: bool = False, alarm: bool = False
) -> Edit | None:
    m = _value_at(text, pos, end, _PIN_VALUE)
    if m is None or not _pin_ok(m.group(), bare, place):
        return None
    if alarm and not _alarm_code_ok(m.group()):
        return None  # "Alarm: 0630": a time
    ends = _CLAUSE_END.match(text, m.end(), end) or (
        alarm and _ALARM_GOES_ON.match(text, m.end(), end)
    )
    if place and not ends:
        return None  # "Alarm: 2500 ms", "Keypad: 1234 layout": a measure, a model
    aside = _ASIDE.match(text, m.end(), end) if place else None
    if aside is not None and _vetoed(re.sub(r"[.,;:]", " ", aside["words"]), _PLACE_VETO):
        return None  # "Alarm: 4471 (room number)": the aside says what it is
    return m.start(), m.end(), marker("pin")


def _cvv_edit(text: str, pos: int, end: int) -> Edit | None:
    m = _value_at(text, pos, end, _CVV_VALUE)
    return (m.start(), m.end(), marker("payment_card")) if m else None


# --- recovery codes and seed phrases: on the label's line, or in the lines below --------

_LIST_MARK = re.compile(r"[ \t]*(?:[-*+>][ \t]+|\d{1,2}[.)][ \t]+)?(?:\[[ xX]\][ \t]+)?")
_CODE_TOKEN = re.compile(r"[^\s,;|/]+")
_SEED_TOKEN = re.compile(r"[^\s,;|/–—-]+")
_CODE = re.compile(r"[A-Za-z0-9]{3,16}(?:-[A-Za-z0-9]{3,16}){0,7}")
_NUMBERING = re.compile(r"\d{1,2}[.)]?")
# A note beside a code ("(used)", "- used", "✅"), an HTML comment's end.
_CODE_ASIDE = re.compile(
    r"[ \t]+(?:\([^()\n]{0,40}\)|[-–—][ \t]+[^\W\d][\w ]{0,20}|[✅✓✔❌✗✘☑]\ufe0f?|-->)[ \t]*\r?\Z"
)
_SEED_ASIDE = re.compile(r"[ \t]*-->[ \t]*\r?\Z")
_LONGEST_LIST_LINE = 300  # longer, and a line is prose, not codes
_MOST_LIST_LINES = 64
_REST = re.compile(r"[ \t*_:]*\r?")  # what may end the label's line when the list is below


def _code_ok(token: str) -> bool:
    if not _CODE.fullmatch(token):
        return False
    core = token.replace("-", "")
    return len(core) >= 6 and sum(c.isdigit() for c in core) >= 2


def _tokens(
    text: str, start: int, stop: int, pattern: re.Pattern[str], aside_re: re.Pattern[str]
) -> list[tuple[int, int]]:
    """The tokens of ``text[start:stop]`` (a line of at most _LONGEST_LIST_LINE), past
    quotes and strike-through, less what ``aside_re`` finds at its end."""
    aside = aside_re.search(text, start, stop)
    stop = aside.start() if aside else stop
    out: list[tuple[int, int]] = []
    for m in pattern.finditer(text, start, stop):
        a, b = m.start(), m.end()
        while a < b and text[a] in _OPEN + "~":
            a += 1
        while b > a and text[b - 1] in _CLOSE + "~.":
            b -= 1
        if a < b:
            out.append((a, b))
    return out


# A recovery code's span, and whether it passes ``_code_ok`` on its own.
_Code = tuple[int, int, bool]


def _code_spans(text: str, start: int, stop: int) -> list[_Code] | None:
    """Each recovery code on ``text[start:stop]`` (apart by blanks, commas or bars; Google
    prints one as "1234 5678"), or None when anything else is there. A token with a code's
    shape but too few digits ("t7dtejigzy") is one only in a list of its own shape (see
    ``_one_list``)."""
    if stop - start > _LONGEST_LIST_LINE:
        return None
    tokens = _tokens(text, start, stop, _CODE_TOKEN, _CODE_ASIDE)
    spans: list[_Code] = []
    i = 0
    while i < len(tokens):
        a, b = tokens[i]
        if (
            i + 1 < len(tokens)
            and _four_digits(text[a:b])
            and _four_digits(text[slice(*tokens[i + 1])])
            and not text[b : tokens[i + 1][0]].strip(" \t")  # "1234 5678", never across a break
        ):
            spans.append((a, tokens[i + 1][1], True))  # "1234 5678"
            i += 2
            continue
        ok = _code_ok(text[a:b])
        if not ok and not _code_shaped(text[a:b]):
            return None
        spans.append((a, b, ok))
        i += 1
    return spans


def _code_shaped(token: str) -> bool:
    """Six letters and digits or more in a code's groups, none of them a word: a code with
    fewer than two digits ("qsxr-oixi", "t7dtejigzy"), not "finished" nor "well-done"."""
    if not _CODE.fullmatch(token) or len(token.replace("-", "")) < 6:
        return False
    if "-" not in token and is_wordy(token):
        return False
    return not any(is_common_word(p.lower()) for p in token.split("-"))


_SHAPE = re.compile(r"[A-Za-z0-9]")
_LEAST_LIST = 3  # codes in a list judged whole


def _one_list(text: str, codes: list[_Code]) -> bool:
    """Codes of one service: three or more, all of one shape (length and dashes), at least
    half of them passing the code check alone. Random codes of eight or ten characters lack
    a second digit often ("hx9o-awbp", "t7dtejigzy"); a list of them is still codes."""
    shapes = {_SHAPE.sub("x", text[a:b]) for a, b, _ in codes}
    passed = sum(ok for _, _, ok in codes)
    return len(codes) >= _LEAST_LIST and len(shapes) == 1 and passed * 2 >= len(codes)


def _four_digits(s: str) -> bool:
    return len(s) == 4 and s.isdigit()


def _seed_spans(text: str, start: int, stop: int) -> tuple[list[tuple[int, int]], int] | None:
    """The runs of seed words on ``text[start:stop]`` (numbering such as "1." allowed; a run
    never spans a line break) and how many words they hold, or None when a token is not
    a BIP-39 word."""
    if stop - start > _LONGEST_LIST_LINE:
        return None
    known = bip39_words()
    spans: list[tuple[int, int]] = []
    words = 0
    for a, b in _tokens(text, start, stop, _SEED_TOKEN, _SEED_ASIDE):
        token = text[a:b]
        if _NUMBERING.fullmatch(token):
            continue
        if unicodedata.normalize("NFC", token.lower()) not in known:
            return None
        words += 1
        gap = text[spans[-1][1] : a] if spans else "\n"
        if any(c in LINE_BREAKS for c in gap):
            spans.append((a, b))
        else:
            spans[-1] = (spans[-1][0], b)
    return spans, words


def _lines_below(text: str, end: int) -> Iterator[tuple[int, int]]:
    """The lines after the label's line (``end``: its end), each without its list mark,
    past blank and code-fence lines (codes come in groups, in fences) until three of those
    in a row. Lazy: the caller stops at the first line that is not what it reads."""
    pos, given, gap = end + 1, 0, 0
    while pos <= len(text) and given < _MOST_LIST_LINES:
        stop = text.find("\n", pos)
        stop = len(text) if stop < 0 else stop
        line_end = stop - 1 if stop > pos and text[stop - 1] == "\r" else stop
        first = _LIST_MARK.match(text, pos, line_end).end()  # type: ignore[union-attr]
        if first == line_end or text.startswith(("```", "~~~"), first):
            gap += 1
            if gap > 2:
                return
        else:
            gap = 0
            given += 1
            yield first, line_end
        pos = stop + 1


def _listed_edits(text: str, pos: int, end: int, seed: bool) -> tuple[list[Edit], int]:
    """Recovery codes or seed words on the rest of the label's line, or in the lines below
    it when the label ends its line; and where the reading stopped (a label in the lines
    read is part of them, not read again: "seed\\n" × 100,000 stays linear)."""
    below = _REST.match(text, pos, end).end() == end  # type: ignore[union-attr]
    lines: Iterable[tuple[int, int]] = _lines_below(text, end) if below else [(pos, end)]
    if not seed:
        return _recovery_edits(text, lines, end)
    spans: list[tuple[int, int]] = []
    words, read_to = 0, end
    for a, b in lines:
        read_to = b
        found = _seed_spans(text, a, b)
        if found is None or not found[1] or words > 24:
            break
        spans += found[0]
        words += found[1]
    if not 12 <= words <= 24:
        return [], read_to
    return [(a, b, marker("seed_phrase")) for a, b in spans], read_to


def _recovery_edits(
    text: str, lines: Iterable[tuple[int, int]], end: int
) -> tuple[list[Edit], int]:
    """The recovery codes on ``lines`` to the first line holding anything else, and where
    the reading stopped. A line holding a doubtful code ends the list there, unless the
    whole list is one (``_one_list``): then every code in it goes."""
    codes: list[_Code] = []
    sure, sure_read_to = -1, end  # the codes before the first doubtful line; its end
    read_to = end
    for a, b in lines:
        read_to = b
        found = _code_spans(text, a, b)
        if sure < 0 and not (found and all(ok for _, _, ok in found)):
            sure, sure_read_to = len(codes), b
        if not found:
            break
        codes += found
    if 0 <= sure < len(codes) and not _one_list(text, codes):
        codes, read_to = codes[:sure], sure_read_to
    return [(a, b, marker("recovery_code")) for a, b, _ in codes], read_to


# --- a passphrase of plain words ----------------------------------------------------------

_PLAIN_WORDS = re.compile(r"(?P<v>[a-z]{2,12}(?: [a-z]{2,12}){3,7})")
# Past the words: a closing quote, a full stop, an HTML comment's end, the line's end. Each
# run of blanks follows a token of its own: linear, however many blanks.
_LINE_END = re.compile(r"[`\"'»”]?[ \t]*(?:[.!][ \t]*)?(?:-->[ \t]*)?\r?")
# Words that say where a passphrase is, or what it is like, rather than what it is.
_NOT_PASSPHRASE = frozenset(
    """
    see ask same none not set unset empty blank below above here there elsewhere stored saved
    kept managed rotated changed reset required unknown default usual given provided shared
    sent emailed written printed hidden encrypted redacted removed expired forgotten lost
    manager keychain vault bitwarden lastpass keepass dashlane enpass one password passwords
    passphrase your my our their his her its this that it in on at by from as be no yes any
    all each every only also still just like use using via random randomly generated words
    word characters chars letters digits symbols long short minimum maximum least length
    strong weak secure unique pick choose avoid four five six seven eight ten twelve
    ou et le la les un une des du dans sur avec pour par voir même pas aucun mots
    """.split()
)


def _passphrase_edit(text: str, pos: int, end: int) -> Edit | None:
    if pos < end and text[pos] in _OPEN:
        pos += 1
    m = _PLAIN_WORDS.match(text, pos, end)
    if m is None or _LINE_END.match(text, m.end(), end).end() != end:  # type: ignore[union-attr]
        return None
    if any(w in STOPWORDS or w in _NOT_PASSPHRASE for w in m.group("v").split()):
        return None
    return m.start("v"), m.end("v"), marker("password")


# --- the stage ------------------------------------------------------------------------------


def _edits_for(text: str, label: re.Match[str], end: int) -> tuple[list[Edit], int]:
    """The label's edits, and where its reading stopped."""
    after = _AFTER.match(text, label.end(), end)
    if after is None or _vetoed(after["qual"]):
        return [], end
    bare = after["bare"] is not None
    rule = label.lastgroup
    if rule in ("recovery", "seed"):
        return _listed_edits(text, after.end(), end, seed=rule == "seed")
    if rule == "pin":
        if bare and label.group() == "pin" and text.startswith("pin", label.start()):
            return [], end  # "pin 13": a chip's; "PIN 4821", "card Pin 4821": a code
        place = _PLACE.fullmatch(label.group()) is not None
        if place and (bare or _vetoed(after["qual"], _PLACE_VETO)):
            return [], end  # "keypad 4471 model", "Padlock model: 1177"
        alarm = place and _ALARM_LABEL.fullmatch(label.group()) is not None
        if alarm and not _alarm_owned(text, label.start()):
            return [], end  # "Fire alarm: 2580 Hz", "UPS alarm: 4800"
        edit = _pin_edit(text, after.end(), end, bare, place, alarm)
    elif rule in ("cvv", "cid"):
        edit = _cvv_edit(text, after.end(), end)
    else:
        edit = None if bare else _passphrase_edit(text, after.end(), end)
    return ([edit] if edit is not None else []), end


def redact_codes(note: Note, counts: Counter[str]) -> str:
    """PINs, door codes, recovery codes, seed phrases, plain-word passphrases, card
    security codes, each after its label."""
    text, low = note.text, note.low
    edits: list[Edit] = []
    read_to = -1
    for start, end in note.lines(_HINTS + _SEED_HINTS):
        card: bool | None = None  # whether the line names a card, looked at once
        for label in _LABELS.finditer(low, start, end):
            if label.start() < read_to:
                continue  # in the lines a label above has read
            if label.lastgroup == "cid":
                card = _names_a_card(low, start, end) if card is None else card
                if not card:
                    continue  # "CID: 4471", a Content-ID or a customer's id
            found, stop = _edits_for(text, label, end)
            edits += found
            read_to = max(read_to, stop) if stop > end else read_to
    return keep_first(text, edits, counts)


# --- payment card numbers ---------------------------------------------------------------------

# Only near a word that names a card: a bare number of the right shape is an order number, an
# id or a serial as often as a card, and scanning every digit of a vault costs too much.
# "card" holds "mastercard"; a security code's name says a card too ("| Number | CVC |")
_CARD_HINTS = ("card", "carte", "visa", "amex", "cvc", "cvv", "cryptogramme")
_CARD_WORD = re.compile(
    r"(?<![a-z])(?:(?:master)?cards?|cartes?|visa|amex|cvc2?|cvv2?|cryptogramme)(?![a-z])"
)
_MARKERS = re.compile(re.escape(MARK.lower()) + r"[a-z_]+\]")  # in the lowercase twin
# 16 or 19 digits in fours, or American Express's 15 as 4-6-5, apart by blanks or dashes or
# not at all; not followed by another group of four (a longer id) nor by a marker (the same
# verdict on a second pass). No lookbehind: it would cost the regex engine its fast scan for
# a first digit.
_CARD = re.compile(
    r"(?:[2-6]\d{3}(?P<s>[ -]?)\d{4}(?P=s)\d{4}(?P=s)\d{4}(?:(?P=s)\d{3})?"
    r"|3[47]\d{2}(?P<a>[ -]?)\d{6}(?P=a)\d{5})"
    r"(?![\w+/]|[.,:-]\d|[ -]\d{4}(?![/\d])|[ ,-]?\[REDACTED:)"
)
_NOT_BEFORE = re.compile(r"[\w.+/-]")
_MOST_CARD_LINES = 20


def luhn_ok(digits: str) -> bool:
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = int(c) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


def issuer_ok(digits: str) -> bool:
    """First digits a card network issues: Visa 4, Mastercard 51-55 and 2221-2720, Maestro
    50 and 56-58, American Express 34/37, JCB and Diners 35-39, Discover 6011, 644-649 and
    65, UnionPay 62."""
    two, four = int(digits[:2]), int(digits[:4])
    return (
        digits[0] == "4"
        or 50 <= two <= 58
        or 2221 <= four <= 2720
        or 34 <= two <= 39
        or four == 6011
        or 644 <= int(digits[:3]) <= 649
        or two in (62, 65)
    )


def _card_edits(text: str, start: int, end: int) -> list[Edit]:
    edits: list[Edit] = []
    for m in _CARD.finditer(text, start, end):
        if m.start() > 0 and _NOT_BEFORE.match(text, m.start() - 1):
            continue  # inside a longer number, a version, a path
        digits = m.group().replace(" ", "").replace("-", "")
        if luhn_ok(digits) and issuer_ok(digits):
            edits.append((m.start(), m.end(), marker("payment_card")))
    return edits


def _names_a_card(low: str, start: int, end: int) -> bool:
    line = low[start:end]
    if MARK.lower() in line:  # "[redacted:payment_card]" names no card
        line = _MARKERS.sub(" ", line)
    return bool(_CARD_WORD.search(line))


_TABLE_RULE = re.compile(r"[ \t]*\|?(?:[ \t]*:?-+:?[ \t]*\|)+(?:[ \t]*:?-+:?[ \t]*)?\r?")


def redact_cards(note: Note, counts: Counter[str]) -> str:
    """Payment card numbers that pass the Luhn check, on a line that names a card or in
    the lines under one ("Visa:" above its number, a list of cards)."""
    text, low = note.text, note.low
    edits: list[Edit] = []
    read_to = -1  # a list of cards was read to here: a line in it that names a card too
    for start, end in note.lines(_CARD_HINTS):
        if end <= read_to or not _names_a_card(low, start, end):
            continue
        edits += _card_edits(text, start, end)
        for n, (a, b) in enumerate(_lines_below(text, end)):
            if n == 0 and _TABLE_RULE.fullmatch(text, a, b):
                continue  # a table's delimiter row: its rows follow
            found = _card_edits(text, a, b)
            if not found or n == _MOST_CARD_LINES:
                break
            edits += found
            read_to = b
    return keep_first(text, edits, counts)
