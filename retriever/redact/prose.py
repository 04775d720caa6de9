"""Credentials written as sentences and labels, English and French.

A *label* names the secret ("the Wi-Fi password", "mot de passe", "restic repo key", "API
token"); a few qualifying words may follow ("for the guest network", "du NAS", "(router)"),
then a *separator* (``:``, ``=``, ``::``, ``→``, a table's ``|``, "is", "was changed to",
"est", "c'est"...) and the value. Without a separator only a value that could not be prose
is taken ("Wi-Fi HomeNet password violet-rocket-maple-42"), unless "with" or "using" comes
before the label ("ssh root@nas with password toor1234"): that reads as a separator.

Each label has a tier that says what its value must look like (:mod:`prose_values`):
``password`` (passphrases, human passwords, random characters), ``key`` (base64 or hex key
material) and ``token`` (long random strings). Login pairs ("login: admin / secret", "user
admin pass secret") are read by :mod:`logins`.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable

from retriever.redact.assign import VETO_LAST, pair_label, run_end
from retriever.redact.core import MARK, Edit, Note, keep_first, lines_above, marker
from retriever.redact.prose_values import (
    ending_password_ok,
    key_material_ok,
    password_ok,
    token_ok,
    word_dash_number,
)
from retriever.redact.values import HEXLIKE, UUID, is_dotted_password

SPACES = r"[ \t]+"  # a space between the words of a label
_PW_LABEL = (
    r"pass(?:word|phrase|code|wd)s?|pwd|pswd|pw|p/w|pass(?=[ \t]*[:=]|[ \t]+(?:is|was|est)\b)"
    r"|mot-de-passe|motdepasse|mots?"
    + SPACES
    + r"de"
    + SPACES
    + r"passe|mdp|phrase"
    + SPACES
    + r"(?:secr[eè]te|de"
    + SPACES
    + "passe)"
    r"|code" + SPACES + r"(?:(?:du|de)" + SPACES + r")?(?:wi-?fi|d['’]acc[eè]s)"
    r"|(?:wi-?fi|access)" + SPACES + "code"
    r"|network" + SPACES + "security" + SPACES + "key"
    r"|cl[eé]f?"
    + SPACES
    + "de"
    + SPACES
    + r"s[eé]curit[eé](?:"
    + SPACES
    + r"(?:du"
    + SPACES
    + r")?r[eé]seau)?"
    r"|(?:wi-?fi|wlan|wpa2?|network|r[eé]seau)" + SPACES + "key"
    r"|cl[eé]f?" + SPACES + r"(?:du" + SPACES + r")?(?:wi-?fi|wpa2?|r[eé]seau)"
    # "Wi-Fi:", "WiFi (home):", "Wifi at mum's:", "wifi for guests:", "Home wifi — …": a
    # separator must follow, after an aside or a place at most ("wifi after update:" and
    # "WiFi chip —" name no password)
    r"|wi-?fi(?=(?:[ \t]+\([^()\n]{1,30}\)|[ \t]+(?:at|chez|for|pour|du|de|des)[ \t]+[^\s:=]{1,30}"
    r"(?:[ \t]+[^\s:=]{1,30})?|[ \t]+(?:guests?|invit[ée]s?|home|maison|salon|bureau|office"
    r"|[25](?:\.4)?ghz))?[ \t]*(?:::|:[ \t]|[–—][ \t]))"
)
_KEY_LABEL = (
    r"(?:encryption|decryption|master|backup|recovery|unlock|luks|age|vault|signing|secret"
    r"|private|(?:restic" + SPACES + r")?repo(?:sitory)?|restic|bitlocker|unseal)" + SPACES + "key"
    r"|cl[eé]f?" + SPACES + r"du" + SPACES + r"d[eé]p[oô]t"
    r"|cl[eé]f?" + SPACES + r"(?:de" + SPACES + r"|d['’])?"
    r"(?:chiffrement|d[eé]chiffrement|r[eé]cup[eé]ration|ma[iî]tre|secr[eè]te|priv[eé]e"
    r"|sauvegarde|d[eé]verrouillage)"
)
_TOKEN_LABEL = (
    r"api" + SPACES + r"(?:key|token|secret)|apikey"
    r"|(?:access|auth|bot|bearer|webhook|admin|app|client|personal"
    + SPACES
    + "access|refresh|session)"
    + SPACES
    + r"(?:token|secret)"
    r"|cl[eé]f?" + SPACES + r"(?:d['’])?api"
)
# Bare words: only with a separator ("the token for the bot: X"), never "token X".
_WEAK_LABEL = r"(?P<weak_key>key|cl[eé]f?)|(?P<weak_token>token|secret|jeton)"
# Matched in the lowercase twin of the text (much faster than a case-insensitive regex). A
# word of its own, or wrapped in underscore emphasis: "__Password__ :", "_mdp_ :" (not
# "db_password" or "password_hash": names the assignment rules judge).
_OPEN = r"(?:(?<![\w-])|(?<=(?<![\w-])_)|(?<=(?<![\w-])__))"
_CLOSE = r"(?:(?![\w-])|(?=__?(?![\w-])))"
LABEL_RE = re.compile(
    rf"{_OPEN}(?:(?P<password>{_PW_LABEL})|(?P<key>{_KEY_LABEL})|(?P<token>{_TOKEN_LABEL})"
    rf"|{_WEAK_LABEL}){_CLOSE}"
)
# Lowercase substrings that every label holds one of: only those lines are searched. Lines
# with "key" are kept only when it is a word ("HKEY_", "monkey" are not).
_LABEL_HINTS = (
    "pass",
    "mdp",
    "pw",
    "pswd",
    "p/w",
    "wifi",
    "wi-fi",
    "code d",
    "access code",
    "clé",
    "clef",
    "cle d",
    "token",
    "secret",
    "jeton",
)
_KEY_HINT = "key"
# A word, not HKEY_ or monkey; in underscore emphasis too (_Key_ :).
_KEY_WORD = re.compile(
    r"(?:(?<![a-z0-9_-])|(?<=(?<![a-z0-9_-])_)|(?<=(?<![a-z0-9_-])__))key|apikey"
)

# Words that may sit between the label and its separator: "for the router", "du NAS",
# "(guest)", "for https://nas.local", "'Guest'". Never a sentence end, never a separator.
_QUAL_WORD = r"(?:\([^()\n]{1,30}\)|(?:[^\s:=|.!?;()\[\]]|[.!?;](?=\S)|:(?=//)){1,40})"
_QUALIFIER = rf"(?P<qual>(?:[ \t]+{_QUAL_WORD}){{0,5}}?)"
_VERB = (
    r"(?:is|was|has"
    + SPACES
    + r"been|a"
    + SPACES
    + r"[ée]t[ée])"
    + SPACES
    + r"(?:set|changed|reset|updated|chang[ée]|mis)"
    r"|is|was|are|were|est|[ée]tait|c['’]est|sera|reste|remains|became|devient"
)
# "password changed to X", "mot de passe changé en X": a participle with no auxiliary says
# a value follows only with its preposition ("password changed twice" names none).
_CHANGED = (
    r"(?:changed|set|reset|updated|rotated|chang[ée]e?|modifi[ée]e?|mis|remplac[ée]e?)"
    + SPACES
    + r"(?:to|en|à|par)(?=[ \t:])"
)
_SEP = (
    r"(?:[ \t]*(?P<sep>::|:=|=>|->|→|:(?![/\\])|[=|–—])|[ \t]+-(?=[ \t])(?P<dash>)"
    rf"|[ \t]+(?P<verb>{_CHANGED}"
    rf"|(?:{_VERB})(?:{SPACES}(?:now|still|maintenant|toujours|d[ée]sormais))?"
    # "changed to X": the preposition is a word of its own ("to%aB…" is a value)
    r"(?:" + SPACES + r"(?:(?:to|en|à)(?=[ \t:])|:))?)(?![\w-]))"
)
# A bold or italic label may close its emphasis first: "**Mot de passe** : …".
_AFTER_SEP = re.compile(r"(?:\*\*|__|\*|_)?" + _QUALIFIER + _SEP + r"[ \t]*:?[ \t]*", re.IGNORECASE)
_OPENERS = "`\"'*“«‘([_"
# A "*" between two characters of a value is one of its characters (Tr0ub*dor); one
# before a blank or another "*" closes emphasis (**Tr0ub4dor**).
_VALUE = re.compile(r"(?:[^\s`\"'*”»’<>|]|\*(?=[^\s*`\"'”»’<>|])){1,200}")
VALUE_TRIM = ".,;:)]}\"'`*”»’"
# A value is judged on its first 200 characters (enough for every check, and bounded work
# per label) but redacted to the end of its run: an AWS session token or a long JWT must
# not leave its tail behind. Each run is read to its end once: a value that starts inside
# the value redacted last is part of it (see redact_prose).
# Past a value that ends its line: a full stop, a closing quote or emphasis, blanks.
_ENDS_LINE = re.compile(r"[.!`\"'*_”»’)\]]{0,3}[ \t]*\r?")
_HEX_AFTER = re.compile(r"[ \t]+(?P<v>[0-9a-f]{32}(?:[0-9a-f]{8}|[0-9a-f]{32})?)(?![\w-])")
_HEADING = re.compile(r"[ \t]{0,3}#{1,6}[ \t]")
# Words that name a Wi-Fi network ("network" and "réseau" alone name too much else).
_WIFI_WORDS = re.compile(
    r"(?<![\w-])(?:wi-?fi|ssid|wpa2?|wpa3|livebox|freebox|bbox|hotspot"
    r"|network[ \t]+name|nom[ \t]+du[ \t]+r[ée]seau)(?![a-z0-9])"  # Freebox-AB12 too
)
_VALUE_REST = re.compile(r"(?:[^\s`\"'*”»’<>|]|\*(?=[^\s*`\"'”»’<>|]))*")
# What may follow a label that ends its line: a colon, emphasis, a closing bracket.
# Each run of blanks follows a token it needs: no two runs can split one (linear time).
# An arrow pointing down says the value is below, as a colon does ("Password ↓").
_DOWN = "↓⬇⤵👇"
_LABEL_TAIL = re.compile(
    r"[ \t]*(?:(?:\*\*|__|\*|_)[ \t]*)?(?::[ \t]*)?(?:(?:\*\*|__|\*|_)[ \t]*)?"
    rf"(?:[{_DOWN}]\ufe0f?[ \t]*)?\r?"
)
# A line holding one token (in a list, a quote, backticks): a value under its label.
# Blanks only before the opening quotes or after them, never both: two runs of blanks side
# by side would let a long line be split and read again in as many ways.
_LONE_VALUE = re.compile(
    r"[ \t]*(?:[-*+>][ \t]+)?(?:[`\"'«“*]+[ \t]*)?(?P<v>[^\s`\"'»”*<>|]+)[`\"'»”*]*[ \t]*\r?"
)
# Google's app passwords, as Google shows them: "abcd efgh ijkl mnop".
_FOUR_WORDS = r"(?P<v>[a-z]{4}(?: [a-z]{4}){3})"
_APP_PASSWORD = re.compile(rf"[ \t`\"'*]*{_FOUR_WORDS}(?![\w-]| [a-z])")
_APP_LINE = re.compile(rf"[ \t]*(?:[-*+>][ \t]+)?[`\"']*{_FOUR_WORDS}[`\"']*[ \t]*\r?")
_APP_WORD = re.compile(r"(?:app|application)[ \t]+\Z|\A[ \t]+d['’]application", re.IGNORECASE)


def _app_label(text: str, label: re.Match[str]) -> bool:
    """ "app password", "mot de passe d'application": Google's name for them."""
    if label.lastgroup != "password":
        return False
    return bool(
        _APP_WORD.search(text[max(0, label.start() - 12) : label.start()])
        or _APP_WORD.search(text[label.end() : label.end() + 14])
    )


# Up to three words after a label with no separator: "mdp wifi X", "password X".
_NEXT_WORD = re.compile(r"[ \t]+([^\s]{1,200})")
# "ssh root@nas with password X", "connect using the password X", "avec le mot de passe X":
# the preposition says a value follows, as a separator would.
_WITH = re.compile(
    r"(?<![^\s(])(?:with|using|use|via|avec)[ \t]+"
    r"(?:(?P<art>the|a|an|its|their|my|this|that|le|un|son|leur|ce)[ \t]+)?\Z",
    re.IGNORECASE,
)
_OF = re.compile(r"[ \t]+(?:of|de)(?=[ \t])", re.IGNORECASE)  # "with a password of X"
# A plain value (a word and a number) only where its clause ends: "ssh … with password
# toor1234", not "sign in with password Office365 credentials".
_CLAUSE_END = re.compile(r"[`\"'*_”»’]*[ \t]*(?:[.,;:!?)\]]|\r?\Z)")  # past its quotes
# A UUID named as an id, not a secret: "API key UUID:", "request-id:", "the ID of the API
# key is …", "l'identifiant de la clé API : …".
_ID_WORDS = frozenset("id ids uuid guid identifier identifiant".split())
_ID_BEFORE = re.compile(
    r"(?<![\w-])(?:id|uuid|guid|identifier|identifiant|name|nom)[ \t]+(?:of|de|du|d['’])"
    r"(?:[ \t]*(?:the|la|le|l['’]|this|that|your|my)(?![\w-]))?[ \t]*\Z",
    re.IGNORECASE,
)

_Check = Callable[[str, bool], bool]


def _labelled_password_ok(v: str, strict: bool) -> bool:
    """A value after an explicit password label: as ``password_ok`` judges it, or dotted
    words ending in a capitalised word and a number ("Mot de passe : velvet.Bramble19"),
    which read as code elsewhere."""
    return password_ok(v, strict) or (not strict and is_dotted_password(v))


CHECKS: dict[str, tuple[str, _Check]] = {
    "password": ("password", _labelled_password_ok),
    "key": ("secret", key_material_ok),
    "token": ("secret", token_ok),
    # "key: <sha256>" is a hash far more often than a key: base64 only.
    "weak_key": ("secret", lambda v, _: not HEXLIKE.fullmatch(v) and key_material_ok(v, True)),
    # A bare "token"/"secret" names ids and nonces too: no UUID there.
    "weak_token": ("secret", lambda v, _: not UUID.fullmatch(v) and token_ok(v, False)),
    # A bare "Key:" under a Wi-Fi network: its password, but not a list of bands
    # ("2.4GHz/5GHz").
    "wifi_key": ("password", lambda v, strict: "/" not in v and password_ok(v, strict)),
}


def _take_value(text: str, pos: int, end: int) -> tuple[int, str, int] | None:
    """The value starting at ``pos`` (past opening quotes and emphasis), trimmed: (start,
    its first 200 characters, where they were read to; see ``value_end``)."""
    while pos < end and (text[pos] in _OPENERS or text[pos] in " \t"):
        pos += 1
    m = _VALUE.match(text, pos, end)
    if m is None or text.startswith(MARK, pos):
        return None
    value = m.group().rstrip(VALUE_TRIM)
    if value.endswith(("!", "?")) and not value.rstrip("!?"):
        return None
    return pos, value, m.end()


def value_end(text: str, pos: int, read: int, end: int, run: re.Pattern[str] = _VALUE_REST) -> int:
    """Where the redaction of the value read from ``pos`` to ``read`` (at most 200
    characters) ends: past the rest of its ``run`` when it was cut there, trailing
    punctuation left out. Only for a value that passed its check: each run is then read
    once."""
    if read - pos >= 200:
        rest = run.match(text, read, end)
        read = rest.end() if rest else read
    return pos + len(text[pos:read].rstrip(VALUE_TRIM))


Span = tuple[int, int]  # the last value redacted: a value starting inside it is part of it


def wifi_context(low: str, start: int, end: int) -> bool:
    """Whether the line ``start``-``end`` or one of the three above names a Wi-Fi network:
    there a bare "Key:" or "Clé :" is its password."""
    return _WIFI_WORDS.search(low, lines_above(low, start, 3), end) is not None


class _WifiLines:
    """``wifi_context`` of each line, looked at once and only for a bare "Key:" on it."""

    __slots__ = ("_low", "_seen")

    def __init__(self, low: str) -> None:
        self._low = low
        self._seen: dict[int, bool] = {}

    def __call__(self, start: int, end: int) -> bool:
        if (known := self._seen.get(start)) is None:
            known = self._seen[start] = wifi_context(self._low, start, end)
        return known


def _labelled_edit(
    text: str, label: re.Match[str], end: int, last: Span, near_wifi: Callable[[], bool]
) -> Edit | None:
    tier = label.lastgroup or "password"
    if tier == "password" and pair_label(text, label.start(), label.group()):
        return None  # "login/mdp : admin/…": a login pair's label, read by ``logins``
    if tier == "weak_key" and near_wifi():
        tier = "wifi_key"
    kind, ok = CHECKS[tier]
    tail = _LABEL_TAIL.fullmatch(text, label.end(), end)
    if tail is not None:  # "**Wi-Fi password:**" ends its line: the value is below
        return _edit_below(text, label, tail.group(), end, tier)
    if (
        tier == "password"
        and "code" not in label.group()  # access and Wi-Fi codes: the PIN rules' own
        and label.group() != "pwd"  # "cd to the pwd", the shell's working directory
        and _CHANGE_BEFORE.search(text, max(0, label.start() - 60), label.start())
        and (edit := _after_change(text, label, end, ok, last)) is not None
    ):
        return edit  # "I changed the wifi password to X"
    after = _AFTER_SEP.match(text, label.end(), end)
    if after is not None:
        changed = (
            after.group("verb") is not None
            and _CHANGED_VERB.match(text, after.start("verb")) is not None
        )
        veto = _CHANGE_VETO if changed else VETO_LAST
        if any(w.strip("()'\"`*").lower() in veto for w in after.group("qual").split()):
            return None  # "password hash: …", "key fingerprint is …"
        if changed and label.group() == "pwd":
            return None  # "pwd changed to /tmp": the working directory
        app = _app_password(text, label, after.end(), end, kind)
        if app is not None:  # "app password: abcd efgh ijkl mnop"
            return app
        found = _take_value(text, after.end(), end)
        if found is None or _inside(last, found[0]):
            return None
        if changed and _NOT_CHANGED_TO.fullmatch(found[1]):
            return None  # "Wi-Fi password set to WPA2-Personal"
        stop = found[0] + len(found[1])
        if not ok(found[1], False) and not (
            label.lastgroup == "password"  # not a Wi-Fi "Key:", read as a password
            and "code" not in label.group()  # access and Wi-Fi codes: the PIN rules' own
            and (
                (_ENDS_LINE.fullmatch(text, stop, end) and ending_password_ok(found[1]))
                # "password changed to maple-1987.": a verb says it is the value
                or (
                    after.group("verb") is not None
                    and _CLAUSE_END.match(text, stop, end)
                    and word_dash_number(found[1])
                )
            )
        ):
            return None
        if UUID.fullmatch(found[1]) and _named_as_id(text, label, after.group("qual")):
            return None
        return found[0], value_end(text, found[0], found[2], end), marker(kind)
    if tier.startswith("weak"):
        return None
    app = _app_password(text, label, label.end(), end, kind)
    if app is not None:  # "Gmail app password abcd efgh ijkl mnop"
        return app
    if tier == "password" and (w := _WITH.search(text, max(0, label.start() - 24), label.start())):
        edit = _after_with(text, label, end, ok, last, of=w.group("art") in ("a", "an"))
        if edit is not None:
            return edit
    if tier == "token" and (hexed := _HEX_AFTER.match(text, label.end(), end)) is not None:
        # "Datadog API key 92ce…", "Gitea access token 5d16…": hex right after a named
        # token is the token (a hash would be named as one).
        return hexed.start("v"), hexed.end("v"), marker(kind)
    return _unseparated_edit(text, label, end, kind, ok, last)


# "I changed the wifi password to X", "set the root password to X", "j'ai mis le mot de
# passe du wifi à X": a verb of changing before the label (in its clause), a preposition
# after it and the value after that.
_CHANGE_BEFORE = re.compile(
    r"(?<![\w-])(?:chang(?:e|es|ed|ing|é|ée|er)|set|sets|setting|reset|resets|resetting"
    r"|updat(?:e|es|ed|ing)|rotat(?:e|es|ed|ing)|switched|modifi(?:é|ée|er)|mis|mets|mettre"
    r"|remis|remplac(?:é|ée|er)|d[ée]fini[rs]?)(?![\w-])[^.!?;:=\n]{0,40}\Z",
    re.IGNORECASE,
)
_TO = frozenset("to en à par as".split())
# What a password's label names after a verb of changing, not the password: "password
# hashing changed to …", "the password strength meter to …".
_CHANGE_VETO = VETO_LAST | frozenset(
    """
    hashing storage requirement requirements strength meter checker library module component
    salt history
    """.split()
)
# What a password is changed to that is no password: a Wi-Fi security mode, a standard, a
# hashing scheme, a time range ("changé à 9h-10h").
_NOT_CHANGED_TO = re.compile(
    r"wpa\d?(?:-\w+)?|wep|nist(?:-[\d-]+)?|pbkdf2(?:-\w+)?|bcrypt(?:-\d+)?|argon2(?:-\w+)?"
    r"|scrypt|\d{1,2}h\d{0,2}-\d{1,2}h\d{0,2}",
    re.IGNORECASE,
)
_CHANGED_VERB = re.compile(_CHANGED, re.IGNORECASE)
_WORD = re.compile(r"[^\s:=]+")
# Past a value whose clause goes on: a word of time or purpose ("… to Winter2025 yesterday").
_LATER = re.compile(
    r"[`\"'*_”»’]*[ \t]+(?:yesterday|today|tonight|this|last|on|after|before|since|again|when"
    r"|because|for|hier|aujourd['’]hui|ce|cette|depuis|apr[eè]s|avant|quand|car|pour)(?![\w-])",
    re.IGNORECASE,
)


def _after_change(text: str, label: re.Match[str], end: int, ok: _Check, last: Span) -> Edit | None:
    """The value after "to", "en", "à" in the next six words past a password label that a
    verb of changing comes before. Words about the password ("policy", "manager") stop it;
    the value is judged strictly, or as after a separator where its clause ends."""
    pos = label.end()
    for n, w in enumerate(_WORD.finditer(text, pos, min(end, pos + 120))):
        word = w.group()
        if n >= 6 or word.strip("()'\"`*_").lower() in _CHANGE_VETO:
            return None
        if word.lower() not in _TO:
            if not word.isalpha() and not word.endswith(("'", "’")):
                return None  # only words stand between: "the guest wifi", "de la box"
            continue
        found = _take_value(text, w.end(), end)
        if found is None or _inside(last, found[0]) or _NOT_CHANGED_TO.fullmatch(found[1]):
            return None
        v, stop = found[1], found[0] + len(found[1])
        ends = _CLAUSE_END.match(text, stop, end) or _LATER.match(text, stop, end)
        if ok(v, True) or (ends and (ok(v, False) or ending_password_ok(v) or word_dash_number(v))):
            return found[0], value_end(text, found[0], found[2], end), marker("password")
    return None


def _inside(last: Span, pos: int) -> bool:
    return last[0] <= pos < last[1]


def _named_as_id(text: str, label: re.Match[str], qualifier: str) -> bool:
    """Whether the label names the UUID as an id: "API key UUID:", "request-id:", "the ID
    of the API key is"."""
    words = re.split(r"[\s()\[\]'\"`*_-]+", qualifier.lower())
    before = text[max(0, label.start() - 30) : label.start()]
    return bool(_ID_WORDS.intersection(words)) or bool(_ID_BEFORE.search(before))


def _after_with(
    text: str, label: re.Match[str], end: int, ok: _Check, last: Span, *, of: bool
) -> Edit | None:
    """ "with password X", "with a password of X": the next word, judged as after a
    separator where its clause ends, else as strictly as with no separator."""
    pos = label.end()
    after_of = _OF.match(text, pos, end) if of else None
    m = _NEXT_WORD.match(text, after_of.end() if after_of else pos, end)
    found = _take_value(text, m.start(1), end) if m is not None else None
    if found is None or _inside(last, found[0]):
        return None
    stop = found[0] + len(found[1])
    if not ok(found[1], True) and not (_CLAUSE_END.match(text, stop, end) and ok(found[1], False)):
        return None
    return found[0], value_end(text, found[0], found[2], end), marker("password")


def _edit_below(text: str, label: re.Match[str], tail: str, end: int, tier: str) -> Edit | None:
    """A label alone on its line, the value alone on the next. A colon, bold or a heading
    says the value is coming; a bare label at a line's end needs a strict value."""
    kind, ok = CHECKS[tier]
    line_start = text.rfind("\n", 0, label.start()) + 1
    explicit = (
        ":" in tail
        or "*" in tail
        or any(c in tail for c in _DOWN)
        or _HEADING.match(text, line_start) is not None
    )
    if tier.startswith("weak") and not explicit:
        return None
    below = _next_line(text, end)
    if below is not None and _app_label(text, label):
        app = _APP_LINE.fullmatch(text, *below)
        if app is not None:  # "App password:" and the four words below
            return app.start("v"), app.end("v"), marker(kind)
    found = _next_line_value(text, below)
    if found is None:
        return None
    value = found[1][:200]
    # Under an explicit password label (a colon, bold, a heading naming one password) a
    # value alone on its line ends it: judged as one ending its line after a separator is.
    # "## Passwords", "# Mots de passe" head a section, not a value.
    one = not label.group().endswith("s") and not label.group().startswith("mots")
    if not ok(value, not explicit) and not (
        explicit and one and label.lastgroup == "password" and ending_password_ok(value)
    ):
        return None
    return found[0], found[0] + len(found[1]), marker(kind)


def _app_password(text: str, label: re.Match[str], start: int, end: int, kind: str) -> Edit | None:
    """A Google app password (four words of four letters) at ``start``, after an "app
    password" label."""
    if not _app_label(text, label):
        return None
    app = _APP_PASSWORD.match(text, start, end)
    return (app.start("v"), app.end("v"), marker(kind)) if app is not None else None


def _next_line(text: str, end: int) -> tuple[int, int] | None:
    """(start, stop) of the next non-blank line, past one code-fence line."""
    pos, fences = end + 1, 0
    for _ in range(4):
        if pos > len(text):
            return None
        stop = text.find("\n", pos)
        stop = len(text) if stop < 0 else stop
        stripped = text[pos:stop].strip()
        if stripped.startswith(("```", "~~~")) and fences == 0:
            fences += 1
        elif stripped:
            return pos, stop
        pos = stop + 1
    return None


def _next_line_value(text: str, line: tuple[int, int] | None) -> tuple[int, str] | None:
    """The lone token on ``line`` (see ``_next_line``): a value written under its label."""
    if line is None:
        return None
    m = _LONE_VALUE.fullmatch(text, *line)
    if m is None or text.startswith(MARK, m.start("v")):
        return None
    value = m.group("v").rstrip(VALUE_TRIM)
    return (m.start("v"), value) if value else None


def _unseparated_edit(
    text: str, label: re.Match[str], end: int, kind: str, ok: _Check, last: Span
) -> Edit | None:
    """ "Wi-Fi HomeNet password X", "mdp wifi X": one of the next three words, if strict."""
    pos = label.end()
    for _ in range(3):
        m = _NEXT_WORD.match(text, pos, end)
        if m is None:
            return None
        word = m.group(1)
        found = _take_value(text, m.start(1), end)
        if found is not None and _inside(last, found[0]):
            return None
        if found is not None and ok(found[1], True):
            return found[0], value_end(text, found[0], found[2], end), marker(kind)
        if not word.isalpha() or word.lower() in VETO_LAST:
            return None  # only plain words ("wifi", "for", "du") stand between
        pos = m.end()
    return None


# A password's next value on its line, after a word or sign that says one follows: a
# rotation log ("from X to Y", "X -> Y", "~~X~~ Y", "(was X)"), a list ("X, Y").
_VERSION = re.compile(r"v?\d+(?:\.\d+)+(?:[-+][\w.]+)?", re.IGNORECASE)  # v1.2.3-beta
_ANOTHER_WORD = (
    r"(?:to|then|now|new|old|was|and|or|puis|maintenant|ancien|nouveau|et|ou|devient|vers|à)"
    r"(?:[ \t]*:)?[ \t]+"
)
_ANOTHER = re.compile(
    r"(?:[ \t]*(?:,|/|->|=>|→|\(|;|:)[ \t]*(?:" + _ANOTHER_WORD + r")?"
    r"|[ \t]+" + _ANOTHER_WORD + r"|(?<=~~)[ \t]+)"  # "~~old~~ new": struck through, then a blank
    r"(?:~~|\*\*|[`\"'«“])?(?P<v>[^\s`\"'»”()<>|,;]{6,200})",
    re.IGNORECASE,
)


def _more_passwords(text: str, pos: int, end: int) -> list[Edit]:
    """Other passwords on the line after the one that ends at ``pos``: each must look
    like one on its own (``password_ok``, strict)."""
    edits: list[Edit] = []
    while (m := _ANOTHER.match(text, pos, end)) is not None:
        value = m.group("v").rstrip("~*").rstrip(VALUE_TRIM)
        if not value or value.startswith(MARK) or _VERSION.fullmatch(value):
            break
        if not password_ok(value, True):
            break
        # Judged on what the connector's pattern read, redacted to the end of its run:
        # "Xy7kq2Lm9p;Abc!x9q" and "Qw3rty!x(y)z" are one password each.
        stop = min(end, max(m.start("v") + len(value), run_end(text, m.start("v"))))
        edits.append((m.start("v"), stop, marker("password")))
        pos = _past_closers(text, stop, end)
    return edits


def redact_more_passwords(note: Note, counts: Counter[str]) -> str:
    """The passwords after a redacted one on its line, whichever rule redacted it: "from
    [REDACTED:password] to Y", "[REDACTED:password] (old: Y)"."""
    text = note.text
    edits: list[Edit] = []
    done = -1
    for start, end in note.lines((_PASSWORD_MARK.lower(),)):
        for m in _PASSWORD_MARK_RE.finditer(text, start, end):
            if m.start() >= done:
                found = _more_passwords(text, _past_closers(text, m.end(), end), end)
                edits += found
                done = found[-1][1] if found else m.end()
    return keep_first(text, edits, counts)


_PASSWORD_MARK = marker("password")
_PASSWORD_MARK_RE = re.compile(re.escape(_PASSWORD_MARK))


def _past_closers(text: str, pos: int, end: int) -> int:
    while pos < end and text[pos] in "~*`\"'»”":
        pos += 1
    return pos


def label_lines(note: Note) -> list[tuple[int, int]]:
    low = note.low
    spans = note.lines(_LABEL_HINTS)
    keys = [(a, b) for a, b in note.lines((_KEY_HINT,)) if _KEY_WORD.search(low, a, b)]
    return sorted(set(spans) | set(keys)) if keys else spans


def redact_prose(note: Note, counts: Counter[str]) -> str:
    """Credentials written as sentences: "the wifi password is …", "clé de chiffrement : …"."""
    text, low = note.text, note.low
    edits: list[Edit] = []
    last: Span = (0, 0)
    wifi = _WifiLines(low)
    for start, end in label_lines(note):
        for label in LABEL_RE.finditer(low, start, end):
            edit = _labelled_edit(text, label, end, last, functools.partial(wifi, start, end))
            if edit is not None:
                edits.append(edit)
                last = (edit[0], edit[1])
    return keep_first(text, edits, counts)
