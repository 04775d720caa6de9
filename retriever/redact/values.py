"""Value heuristics: is this string a placeholder, a word, a name, or random enough to be a secret?"""

from __future__ import annotations

import base64
import binascii
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from functools import cache

from retriever.lexical import STOPWORDS
from retriever.redact.core import MARK

_LOWER = re.compile(r"[a-z]")

_UPPER = re.compile(r"[A-Z]")

DIGIT = re.compile(r"[0-9]")

DIGITS = re.compile(r"\d+")

CAMEL_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")

_CONSONANTS = re.compile(r"[^aeiouyAEIOUY]{4}")

VOWEL = re.compile(r"[aeiouyAEIOUY]")

_WORD_SPLIT = re.compile(r"[-_.:\s/]+")  # also splits xs:anyURI

_ALNUM_SPLIT = re.compile(r"[^A-Za-z0-9]+")

HEXLIKE = re.compile(r"[0-9a-f]+|[0-9A-F]+")

UUID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")

B64 = re.compile(r"[A-Za-z0-9+/_\-]+=*")

MASK_CHARS = frozenset("xX*•#0")
MASK_RUN_FROM = 10  # from this length, a mask's characters must run (see is_masked)

# Values that are obviously not a secret when they stand alone (compared lowercased).
_KEEP_WORDS = frozenset(
    """
    true false yes no on off none null nil undefined nan empty unset blank tbd tba todo fixme
    n/a na - required optional hidden masked redacted sensitive encrypted hashed default
    string str bytes text varchar char int integer number bool boolean object any unknown
    secretstr secretbytes password passwd passphrase passcode pass pwd secret secrets token
    tokens key apikey api_key credential credentials auth bearer basic changeme change_me
    changeit example sample test dummy placeholder value env environment foo bar baz
    """.split()
)

# A value containing one of these words is a placeholder (``your-token-here``).
_PLACEHOLDER_WORDS = frozenset(
    "your yours example placeholder changeme replaceme dummy redacted sample insert here".split()
)


def entropy(s: str) -> float:
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


def alnum_classes(s: str) -> int:
    return bool(_LOWER.search(s)) + bool(_UPPER.search(s)) + bool(DIGIT.search(s))


def is_masked(s: str) -> bool:
    """``xxxx``, ``****``, ``sk-proj-XXXXXXXX``, ``0000``: a masked or dummy value."""
    if len(s) >= 3 and len(set(s)) <= 2:
        return True
    # Counted in C (str.count): a hostile line of "key:xxx…" holds a value per key, each
    # running to the line's end, and a Python loop over each made it take minutes. A long
    # mask is a run ("XXXX-1234"), not the same characters scattered: "YHs#DpxE0#xx", a
    # random password, is half mask characters too. A short value needs no run ("0x2").
    if sum(s.count(ch) for ch in MASK_CHARS) * 2 < len(s):
        return False
    return len(s) < MASK_RUN_FROM or any(ch * 3 in s for ch in MASK_CHARS)


def is_wordy(s: str) -> bool:
    """Plain words or an identifier made of words (``my-app-key``, ``OAuthToken``).

    Random letters split into tiny camel-case pieces; a lone lowercase run of random
    letters usually holds four consonants in a row. About one random letters-only string
    in five still passes, which is why callers only use this to spot prose and code.
    """
    words: list[str] = []
    for part in _WORD_SPLIT.split(s):
        if not part:
            continue
        if not (part.isascii() and part.isalpha()):
            return False
        pieces = CAMEL_WORD.findall(part)
        # One-letter pieces: only a leading capital, as in OAuth or X-Header.
        if any(len(w) == 1 for w in pieces[1:]) or (
            len(pieces) > 1 and len(pieces[0]) == 1 and pieces[0].islower()
        ):
            return False
        words.extend(pieces)
    if not words or max(map(len, words)) > 24 or sum(map(len, words)) < 2.5 * len(words):
        return False
    return not (len(words) == 1 and words[0].islower() and _CONSONANTS.search(words[0]))


def is_multiword(s: str) -> bool:
    parts = [p for p in _WORD_SPLIT.split(s) if p]
    return len(parts) >= 2 and all(p.isascii() and p.isalpha() for p in parts)


def is_placeholder(value: str) -> bool:
    s = value.strip()
    if s.startswith(MARK) or is_masked(s):
        return True
    s = s.strip("*_ ")  # markdown emphasis around a template value: **<password>**
    if not s or s.startswith(("&lt;", "&#")):  # HTML-escaped <placeholder>
        return True
    low = s.lower()
    if low in _KEEP_WORDS or s[0] in "$<{[":  # ${VAR}, $VAR, <your-key>, {{ v }}, [..]
        return True
    if s[0] == "%" and _PERCENT_VARIABLE.fullmatch(s):  # %(x)s, %PASSWORD%, not %4T%W4qm…
        return True
    if only_format_fields(s):  # "%s:%s" % (user, pw), "{}:{}".format(user, pw)
        return True
    if "..." in s or "…" in s or low.startswith(("enc[", "vault:")):
        return True
    if any(
        w.lower() in _PLACEHOLDER_WORDS
        for part in _ALNUM_SPLIT.split(s)
        if part.isalpha()  # a part with digits in it is a random run, not a word
        for w in CAMEL_WORD.findall(part)
    ):
        return True
    return is_masked(s)


def looks_random(v: str) -> bool:
    """Loose test for a value under an explicit secret key (``api_key``, ``token``)."""
    if len(v) < 8:
        return False
    # Long mixed-case letters with no separator are random more often than a word.
    if is_wordy(v) and (len(v) < 16 or not v.isalpha() or v.islower() or v.isupper()):
        return False
    ent = entropy(v)
    return (alnum_classes(v) >= 2 and ent >= 2.5) or (len(v) >= 16 and ent >= 3.0)


def high_entropy(v: str) -> bool:
    """Strict test for a value under an ambiguous key (``key``, ``session``, ``sig``)."""
    if len(v) < 20 or is_wordy(v) or HEXLIKE.fullmatch(v) or UUID.fullmatch(v):
        return False  # hex and UUIDs there are hashes and ids far more often than secrets
    # Real tokens this long almost always mix in digits; CamelCase identifiers do not.
    return alnum_classes(v) >= 2 and bool(DIGIT.search(v)) and entropy(v) >= 3.3


def is_word_chain(s: str) -> bool:
    """Short alphabetic parts joined by separators: ``sk-learn-style-pipelines-for-ml``."""
    parts = [p for p in _WORD_SPLIT.split(s) if p]
    return len(parts) >= 2 and all(p.isascii() and p.isalpha() and len(p) <= 16 for p in parts)


def vendor_ok(token: str) -> bool:
    """A vendor-shaped token that is not a documented example, a mask or made of words."""
    return not (is_masked(token) or "example" in token.lower() or is_word_chain(token))


def userpass_b64(v: str) -> bool:
    """True when ``v`` is base64 of ``user:password`` (HTTP Basic credentials)."""
    if len(v) < 8 or len(v) % 4:
        return False
    try:
        raw = base64.b64decode(v, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return False
    user, sep, pw = raw.partition(":")
    return bool(sep and user and pw) and raw.isprintable()


_DOTTED = re.compile(r"[A-Za-z_$][\w$]*(?:\??\.[A-Za-z_$][\w$]*)+")  # a?.b: optional chaining

# A format or a variable written with "%": %s, %(password)s, %PASSWORD%, %{password}.
# And printf's %-20s, %.2f, %05d, %ld, Go's %+v, a batch file's %~1 and %*.
_PERCENT_VARIABLE = re.compile(
    r"%(?:\([\w.]*\)[-+ #0]*\d*(?:\.\d+)?[a-zA-Z]|[-+ #0]*\d*(?:\.\d+)?(?:hh?|ll?|[Lqjzt])?[a-zA-Z]"
    r"|[A-Za-z_][\w:.\-]*%|\{[^{}]*\}?|~?\d|\*)(?:\\[nrt])*"  # "%-20s\n" in a printf
)

# printf's and Python's format fields: "%s", "%(user)s", "%-8d", "{}", "{0}", "{user!r:>8}".
_FORMAT_FIELD = re.compile(
    r"%(?:\([\w.]*\))?[-+ #0]*\d*(?:\.\d+)?[sdifrxXeEgGc]|\{[\w.\[\]]*(?:![rsa])?(?::[^{}]*)?\}"
)


def only_format_fields(s: str) -> bool:
    """A format string made of fields and punctuation alone ("%s:%s", "{}@{}"): a template
    the code fills in, never a secret."""
    rest = _FORMAT_FIELD.sub("", s)
    return rest != s and not any(c.isalnum() for c in rest)


_PATH = re.compile(r"(?:~|\.{1,2})?/[\w.\-/]*|[A-Za-z]:\\\S*")

_FILE_EXT = re.compile(
    r"\.(?:pem|key|crt|cer|der|p12|pfx|jks|keystore|json|ya?ml|toml|ini|cfg|conf|env|txt|gpg|asc)$",
    re.IGNORECASE,
)

_WORD_TOKEN = re.compile(r"[(\"'`]?[A-Za-z][a-z]+(?:['’-][a-z]+)*[.,;:!?)\"'`]*")

# snake_case parts: a word with an optional number or short tag (filter1d, v2, 256).
_SNAKE_IDENT = re.compile(
    r"(?:[A-Za-z]+\d*[A-Za-z]{0,2}|\d+)(?:_+(?:[A-Za-z]+\d*[A-Za-z]{0,2}|\d+))+"
)


def is_path(v: str) -> bool:
    if _FILE_EXT.search(v):
        return True
    if not _PATH.fullmatch(v):
        return False
    # Base64 can start with '/': a path has short, word-like segments.
    return all(len(seg) < 16 or not looks_random(seg) for seg in v.split("/"))


def is_prose(v: str) -> bool:
    """Several space-separated tokens, at least half of them plain words."""
    toks = v.split()
    words = sum(bool(_WORD_TOKEN.fullmatch(t)) for t in toks)
    return len(toks) >= 2 and words * 2 >= len(toks)


def is_identifier(v: str) -> bool:
    """A snake_case name made of words, digits allowed (``filter1d_signature``)."""
    return bool(_SNAKE_IDENT.fullmatch(v)) and is_wordy(DIGITS.sub("", v))


def is_code_ref(v: str) -> bool:
    """``self.token``, ``os.environ``, ``_lib.NID_aes_256_cbc``: an attribute path."""
    if not _DOTTED.fullmatch(v):
        return False
    parts = [DIGITS.sub("", p).replace("$", "") for p in v.split(".")]
    return sum(is_wordy(p) for p in parts if p) * 2 >= len(parts)


# "kestrel.Citron99": two or three words joined by dots, the last one capitalised and
# ending in two digits or more, as people pick passwords. An attribute path looks the same
# to ``is_code_ref``, but its parts are lowercase, snake or upper case (``self.password``,
# ``settings.DB_PASSWORD``, ``user.pass2``, ``vault.prod.db01``, ``tests.auth.test12``):
# callers ask only under an explicit password label. Accented words too ("sapin.Grêle44").
_LOWER_WORD = "[a-zß-öø-ÿ]{2,}"
_TITLE_WORD = "[A-ZÀ-ÖØ-Þ][a-zß-öø-ÿ]+"
_DOTTED_PASSWORD = re.compile(
    rf"(?:{_LOWER_WORD}|{_TITLE_WORD})(?:\.(?:{_LOWER_WORD}|{_TITLE_WORD}))?\.{_TITLE_WORD}\d{{2,}}"
)


def is_dotted_password(v: str) -> bool:
    """A password of dotted words ending in a number (``velvet.Bramble19``), not code."""
    return _DOTTED_PASSWORD.fullmatch(v) is not None


@cache
def bip39_words() -> frozenset[str]:
    """The English and French BIP-39 lists (what wallets print), composed: common words."""
    try:
        from mnemonic import Mnemonic  # read once, when a seed or an app password is judged
    except ImportError:  # an install older than the dependency: no seed is recognised
        return frozenset()
    words = Mnemonic("english").wordlist + Mnemonic("french").wordlist
    return frozenset(unicodedata.normalize("NFC", w) for w in words)


def is_common_word(word: str) -> bool:
    """A function word (English or French) or a word of the BIP-39 lists: what prose, not a
    random code, is made of."""
    return word in STOPWORDS or word in bip39_words()


_ALPHABET = "abcdefghijklmnopqrstuvwxyz"


def made_up_groups(groups: Sequence[str]) -> bool:
    """Letter groups an example is made of: one repeated ("none none none none"), one letter
    over and over ("aaaa"), or every group in the alphabet's order ("abcd efgh ijkl mnop",
    Google's own example)."""
    return (
        len(set(groups)) < len(groups)
        or any(len(set(g)) == 1 for g in groups)
        or all(g in _ALPHABET for g in groups)
    )
