"""Is a word written after "the password is" a secret? Judgements for values found in prose.

A label in a sentence is weaker evidence than ``PASSWORD=`` in a config file, so the value
has to look like what people actually choose or paste: a passphrase (``violet-rocket-42``),
a human password (``Summer2024!``), random characters, or key material (base64, hex, a
BitLocker recovery key). Names, numbers, versions, paths and placeholders are kept.

``strict`` is for values with no separator after the label ("backup key X"), where the next
word is as likely to be prose as a value.
"""

from __future__ import annotations

import re

from retriever.redact.values import (
    B64,
    DIGIT,
    DIGITS,
    HEXLIKE,
    UUID,
    VOWEL,
    alnum_classes,
    entropy,
    high_entropy,
    is_code_ref,
    is_path,
    is_placeholder,
    is_wordy,
    looks_random,
)

EMAIL = re.compile(r"[\w.+\-]+@[\w\-]+\.[\w.\-]+")
_PHRASE_PARTS = re.compile(r"[-_.+]")
_PHRASE_PART = re.compile(r"(?:[A-Z]?[a-z]{1,15}|[A-Z]{1,15})\d{0,6}|\d{1,6}")
# A word, one number, maybe more words: Win32_UserAccount, SHA256, x509Certificate.
NAME_WITH_NUMBER = re.compile(r"[A-Za-z]*[A-Za-z]\d+(?:[_-]?[A-Za-z]+)*")
# The words of a name: Title, lower or UPPER runs (digits and separators split them).
_NAME_PIECE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")
# Numbers, versions, dates, sizes, hex literals: 802.11ac, 2024-01-31, 0x8007000E, 12px.
_NUMBERISH = re.compile(r"(?:0[xX][0-9A-Fa-f]+|\d[\d.,:/x_-]*)[A-Za-z]{0,3}")
# A word and a number, as people pick passwords: Summer2024, hunter22, admin123.
_WORD_THEN_NUMBER = re.compile(r"[A-Za-z][a-z]{2,}\d{2,}")
# Technical names of that shape: Base64, Win32, Int64, Utf16, Latin1, Sha256.
_TECH_STEMS = frozenset(
    """
    base win int uint utf ucs sha md aes des rsa ecdsa latin ipv http tls ssl pkcs crc float
    double char word dword qword long short byte bytes iso ansi ascii unicode x arm amd
    intel level layer version ver rev build step phase tier zone port vlan com lpt
    """.split()
)
# Capitalised words, then a number: RiverBatteryOrange91.
_CAMEL_THEN_NUMBER = re.compile(r"(?:[A-Z][a-z]{2,}){3,}\d{2,}")
# Lowercase words joined by dashes, no number: correct-horse-battery-staple.
_DASHED_WORDS = re.compile(r"[a-z]{3,12}(?:-[a-z]{3,12}){3,}")
# A symbol a password policy asks for (never one that only ends a sentence).
PW_SYMBOL = re.compile(r"[!#$%&*+=?@^~]")
# BitLocker: eight groups of six digits, each a multiple of 11.
_BITLOCKER = re.compile(r"\d{6}(?:-\d{6}){7}")
# Characters API tokens use; spaces, braces and quotes mean something else.
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9+/=_\-.~:]+")


def is_passphrase(v: str, min_parts: int = 2) -> bool:
    """Words joined by dashes (or dots, underscores) with a number: correct-horse-battery-42.

    Each part is a plain word (lower, Title or upper case), a number, or a word then a
    number; a part like ``FramedIpv6Prefix`` makes it an identifier instead.
    """
    parts = _PHRASE_PARTS.split(v)
    if len(parts) < min_parts or not all(_PHRASE_PART.fullmatch(p) for p in parts):
        return False
    wordy = sum(len(p) >= 2 and p[0].isalpha() for p in parts)
    return wordy >= 2 and any(c.isdigit() for c in v)


def is_bitlocker_key(v: str) -> bool:
    if not _BITLOCKER.fullmatch(v):
        return False
    return all(int(g) % 11 == 0 and int(g) < 720896 for g in v.split("-"))


def _not_a_value(v: str) -> bool:
    """Placeholders, addresses, paths, names and numbers: never a secret in prose."""
    return bool(
        is_placeholder(v)
        or "://" in v
        or EMAIL.fullmatch(v)
        or is_path(v)
        or is_code_ref(v)
        or UUID.fullmatch(v)
        or _NUMBERISH.fullmatch(v)
    )


def _is_name(v: str) -> bool:
    """A name made of a few words and maybe a short number: Win32_UserAccount, HomeNet-5G,
    SHA256_HASH_OF_CONTENT. Random strings switch case every few characters, so they split
    into many pieces, some without a vowel."""
    if sum(c.isdigit() for c in v) > 4:
        return False
    pieces = _NAME_PIECE.findall(v)
    if not pieces or len(pieces) > 6:
        return False
    if sum(len(p) <= 2 or not VOWEL.search(p) for p in pieces) > 2:
        # Random characters switch case every few letters: many short or vowelless pieces,
        # though each passes below ("Z1LBBV2kog-XGUaU", "Li_Julv_QAjatA5o"; "IPv6…" has 2).
        return False
    return all((p.isupper() and len(p) <= 5) or (len(p) <= 15 and VOWEL.search(p)) for p in pieces)


def _human_password(v: str) -> bool:
    """Summer2024!, hunter22, Tr0ub4dor&3, RiverBatteryOrange91."""
    if PW_SYMBOL.search(v) and alnum_classes(v) >= 2 and DIGIT.search(v):
        return True
    m = _WORD_THEN_NUMBER.fullmatch(v)
    if m and DIGITS.sub("", v).lower() not in _TECH_STEMS:
        return True
    return bool(_CAMEL_THEN_NUMBER.fullmatch(v))


def password_ok(v: str, strict: bool) -> bool:
    """A password written in a sentence: a passphrase or random characters, not a word."""
    if len(v) < 6 or _not_a_value(v) or v.startswith("/") or "//" in v:
        return False
    if is_passphrase(v, 3 if strict else 2):
        return True
    if strict:
        if PW_SYMBOL.search(v) and DIGIT.search(v) and alnum_classes(v) >= 2 and len(v) >= 8:
            return True  # Summer2024!, Tr0ub4dor&3: a symbol no name holds
        if _is_name(v):
            return False
        return len(v) >= 10 and alnum_classes(v) == 3 and entropy(v) >= 3.0
    if _human_password(v) or _DASHED_WORDS.fullmatch(v):
        return True
    if not DIGIT.search(v) or _is_name(v):
        return False  # Win32_UserAccount, SHA256, HomeNet-5G, plain words: names, not secrets
    return looks_random(v) or (not v.isalnum() and alnum_classes(v) >= 2)


# What a note says passwords are hashed, encrypted or encoded with, and ticket ids.
_TECH_NAME = re.compile(
    r"(?:md5|sha-?\d*|base\d+|utf-?\d+\w*|ipv[46]|ext[234]|aes-?\d*|rsa-?\d*|pbkdf2|bcrypt"
    r"|argon2\w*|scrypt|sha\d+crypt|md5sum|sha\d*sum|gpt-?\d\w*|[mo]365|win\d+|1password\d*"
    r"|bitwarden\d*|keepass\w*)",
    re.IGNORECASE,
)
_TICKET = re.compile(r"[A-Za-z]{2,10}-\d{1,6}")
_SHORTCUT = re.compile(r"(?:ctrl|alt|shift|cmd|command|option|opt|win|super|meta|fn)\+", re.I)


def ending_password_ok(v: str) -> bool:
    """A password that ends its line after an explicit password label and its separator
    ("Mot de passe : hunter2", "The NAS password is Welcome1"): nothing follows to make it
    a sentence, so a short one with a digit or a symbol counts too. Not a plain word
    ("required", "Dragon"), a number of five digits or fewer (a PIN's rules judge those),
    a name of several words (HomeNet-5G, default_password) or code (getpass())."""
    if len(v) < 6 or v.isalpha() or (v.isdigit() and len(v) <= 5) or "(" in v:
        return False
    if _SHORTCUT.match(v) or not v[0].isalnum():  # Ctrl+Alt+Del, §4.2, →Settings
        return False
    if _TECH_NAME.fullmatch(v) or _TICKET.fullmatch(v):  # "Mot de passe : AES256", PROJ-42
        return False
    if _not_a_value(v) and not v.isdigit():
        return False
    # Several words run together in lower case with digits (mimi2012chat) are a password;
    # a name writes its words apart (ReadWrite2Mode, Win32_UserAccount, HomeNet-5G).
    lower_run = v.isalnum() and v.islower()
    return lower_run or not (_is_name(v) and len(_NAME_PIECE.findall(v)) > 1)


# A word and a year or a number joined by a dash: "maple-1987", "Movies-4471" (a ticket is
# written in capitals: PROJ-42).
_WORD_DASH_NUMBER = re.compile(r"[A-Z]?[a-z]{3,}[-_.]\d{2,6}")


def word_dash_number(v: str) -> bool:
    """ "maple-1987" after a verb that says it is the password ("changed to", "is"): a
    ticket is written in capitals (PROJ-42) and "sha-256", "utf-8" name what they are."""
    return bool(_WORD_DASH_NUMBER.fullmatch(v)) and not _TECH_NAME.fullmatch(v)


def key_material_ok(v: str, strict: bool) -> bool:
    """Base64 or hex key material, or a BitLocker recovery key."""
    if is_bitlocker_key(v):
        return True
    if len(v) < 16 or is_placeholder(v) or not B64.fullmatch(v) or UUID.fullmatch(v):
        return False
    if HEXLIKE.fullmatch(v):
        return len(v) >= 32 and (not strict or len(v) in (32, 64, 128))
    if _is_name(v):  # after the hex test: hex without its digits can pass for words
        return False
    # Base64 of 32 random bytes lacks a digit about once in a thousand: do not insist on one.
    return high_entropy(v) or (alnum_classes(v) >= 2 and entropy(v) >= 3.5 and not is_wordy(v))


def token_ok(v: str, strict: bool) -> bool:
    """An API token or secret named in prose: long, random, in a token's alphabet. A UUID
    too, after a separator: Heroku and others issue API keys as UUIDs, and the label is
    explicit ("API key", "auth token"; one named as an id is left by the caller,
    ``prose._named_as_id``)."""
    if UUID.fullmatch(v):
        return not strict and not is_placeholder(v)
    if len(v) < 16 or _not_a_value(v) or not _TOKEN_CHARS.fullmatch(v):
        return False
    if HEXLIKE.fullmatch(v):
        return not strict and len(v) >= 32
    if _is_name(v):
        return False
    return high_entropy(v) if strict else (key_material_ok(v, strict) or high_entropy(v))
