"""``key = value`` in every syntax notes hold: env, YAML, JSON, TOML, code, flags, Dataview."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from retriever.redact.core import MARK, Edit, Note, marker, splice
from retriever.redact.values import (
    CAMEL_WORD,
    DIGIT,
    DIGITS,
    HEXLIKE,
    VOWEL,
    high_entropy,
    is_code_ref,
    is_common_word,
    is_dotted_password,
    is_identifier,
    is_multiword,
    is_path,
    is_placeholder,
    is_prose,
    is_wordy,
    looks_random,
    made_up_groups,
    userpass_b64,
)

# key, optional closing quote/bracket, then the separator. Only key + separator is consumed
# so a non-credential match never swallows a credential assignment inside its value.
_ASSIGN_RE = re.compile(
    r"""
    (?:(?<![\w.\-])(?P<dash>--)(?=[A-Za-z_])|(?<![\w.\-]))
    (?P<key>[A-Za-z_][\w.\-]{0,79}+)  # possessive: never retry shorter keys
    (?P<kq>["'`])?\]?\??(?:\*\*|__)?[ \t]*
    (?:
        (?P<ann>:[ \t]*[A-Za-z_][\w.]*(?:\[[\w.\[\], |]{0,40}\])?
            (?:[ \t]*\|[ \t]*[A-Za-z_][\w.]*(?:\[[\w.\[\], |]{0,40}\])?){0,3}
            [ \t]*=(?![=>~]))
      | (?P<sep>::(?=[ \t])|:=|=>|=(?![=~])|:(?![:/\\=])|(?(kq),|(?!)))
      | (?P<ws>(?(dash)(?<=[ \t])|(?!)))
    )
    """,
    re.VERBOSE,
)

_VALUE_RE = re.compile(
    r"""(?P<pad>[ \t]*(?:\*\*)?[ \t]*)
    (?:
        (?:(?P<pre>[bBrRuUfF]|[rR][bBfF]|[bBfF][rR])(?=["']))?  # Python's b'…', r'…', f'…'
        (?P<q>["'`])
        (?P<qv>(?:\\[^\r\n\x0b\x0c\x1c-\x1e\x85\u2028\u2029]
            |(?!(?P=q))[^\\\r\n\x0b\x0c\x1c-\x1e\x85\u2028\u2029])*)
        (?P=q)
      | (?P<uv>[^\s"'`,;&<>)}\]]+)
    )""",
    re.VERBOSE,
)

_KEY_HINT = re.compile(
    r"(?i)pass|pwd|pw|secret|token|key|auth|cred|sig|cookie|session|salt|hmac|sas|bearer|jwt|otp"
    r"|psk"
)

_CRED_WORD = re.compile(r"(?i)pass|pwd|secret|token|key|cred|auth")

_CAMEL_SPLIT = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")

_SEG_SPLIT = re.compile(r"[^A-Za-z0-9]+")

_CALL_OPEN = re.compile(r"\([ \t]*\Z")

_PREV_WORD = re.compile(r"([A-Za-z][A-Za-z0-9]*)[ \t]\Z")

_AFTER_WORD = re.compile(r"[ \t]+[A-Za-z]+\b(?![=:])")

# A length rule, not a password: "Password: min 12 chars", "password: 8-64 characters".
_LENGTH_RULE = re.compile(
    r"(?:[ \t]+[\w+-]{1,12}){0,2}[ \t]+(?:chars?|characters?|caract[eè]res?|digits?|letters?"
    r"|symbols?|long)\b",
    re.IGNORECASE,
)

# CamelCase made of Title-case words, an acronym prefix and one digit run allowed:
# SecretStr, OAuthToken, Ed25519PrivateKey, PKCS7PrivateKeyTypes. Random mixed case rarely fits.
_TYPE_LIKE = re.compile(
    r"(?:[A-Z]{1,5}\d{0,3})?[A-Z][a-z]{1,15}(?:[A-Z][a-z]{2,15}){0,5}"
    r"(?:\d{1,6}(?:[A-Z][a-z]{2,15}){1,5})?"
)

_TYPE_ABBREVIATIONS = frozenset(
    "Str Dsn Url Xml Sql Ssl Tls Jwt Src Ptr Ctx Cfg Msg Pwd Db Id Io Fn Rx Tx".split()
)

_UNION_NEXT = re.compile(r"[ \t]*\|")

_CALL_START = re.compile(r"[A-Za-z_][\w.]*\(")

# Rust's number types (`password: i32 = 0`); a random run is never one of these.
_PRIMITIVE = re.compile(r"[iu](?:8|16|32|64|128|size)|f(?:32|64)")

# What may precede a dotenv or YAML key on its line.
_LINE_HEAD = re.compile(r"[ \t]*(?:(?:[>*+-]|<!--|\d+[.)])[ \t]*)*(?:export[ \t]+)?")

# Where an unquoted value stopped before its run ended: at `&`, `(` or `)` (dotenv and YAML
# values hold them: Django's SECRET_KEY, `P&ssw0rd`). The run goes on to whitespace.
# A run ends at a blank, a quote, a table's pipe or an HTML tag ("X<br>", "X</li>").
_RUN_REST = re.compile(r"(?:[^\s\"'`|<]|<(?!/?[A-Za-z]))+")
# What a whole-run value may hold past where the unquoted pattern stopped: `P&ssw0rd`,
# `Tr0ub4dor,x9`, `a;b`, `x)y` (not `<`: "X<br>" in a table ends at its tag).
_RUN_GOES_ON = frozenset("&(),;}]")
_PAIRS = (("(", ")"), ("[", "]"), ("{", "}"))
_SECRETISH = re.compile(r"[\d!#$%^*+=?@~]")  # what a password's next piece holds, a name's not
_PARAM = re.compile(r"\w+=")
_SHORT_RUN = re.compile(r"[^\s\"'`]{1,1000}")
# After a value: closing brackets, quotes and punctuation, then the line's end, a comment,
# a table's next cell or an HTML tag.
_LINE_ENDS = re.compile(
    r"[ \t)\]}.,;!?\"'`]{0,20}"
    r"(?:#|\||</?[A-Za-z][^>\n]{0,30}>|-->[ \t]*\r?(?:\n|\Z)|\r?(?:\n|\Z))"
)

# API keys and tokens use this alphabet; `{`, `(`, `|`, `\` and friends mean code or syntax.
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9+/=_\-.~%]+")

# psk: a Wi-Fi pre-shared key (wpa_supplicant, NetworkManager), which is its password.
_PW_WORDS = frozenset("password passwd passwort passphrase passcode pwd pass pw pword psk".split())

_SECRET_WORDS = frozenset("secret secrets token apikey credential credentials".split())

_SECRET_SUFFIXES = (
    "secret",
    "token",
    "apikey",
    "accesskey",
    "secretkey",
    "privatekey",
    "authkey",
    "signingkey",
    "masterkey",
    "accountkey",
)

# "<qualifier> key" is a credential; a bare "key" is only weak evidence.
_KEY_QUALIFIERS = frozenset(
    """
    api access secret private auth signing encryption encrypt decryption master account app
    application session shared subscription client consumer license licence hmac webhook
    service storage primary secondary admin server sas ssh crypto aes jwt bot backup repo
    repository restic recovery
    """.split()
)

_WEAK_WORDS = frozenset(
    "key auth sig signature cookie session salt hmac sas cred creds otp jwt bearer passkey".split()
)

_WEAK_FRAGMENTS = ("password", "passwd", "secret", "token", "apikey", "privatekey", "accesskey")

# Trailing key words that make the key describe something about a secret, not hold one.
VETO_LAST = frozenset(
    """
    hash hashed digest checksum sha sha1 sha256 sha512 md5 crc id ids name names file files
    filename path paths dir url urls uri endpoint host length len count counts size type
    types kind ttl expiry expires expiration lifetime timeout policy field fields header
    param prefix suffix format regex pattern pat env var ref hint label description desc help
    prompt min max limit mode method strategy provider store manager reset rotation enabled
    required location version usage budget encoding algorithm alg index column table arn
    fingerprint rule rules scope scopes source ssid
    """.split()
)

_KEY_SUFFIXES = frozenset("value val b64 base64 str string raw plain enc encoded base hex".split())

_SHELL_VARS = frozenset({"pwd", "oldpwd"})
_WIFI_WORDS = frozenset("wifi wpa wpa2 wpa3 wlan psk network".split())


def _key_segments(key: str) -> list[str]:
    segs = [s.lower() for s in _SEG_SPLIT.split(_CAMEL_SPLIT.sub("_", key)) if s]
    while len(segs) > 1 and segs[-1] in _KEY_SUFFIXES:
        segs.pop()
    return segs


@lru_cache(maxsize=4096)  # a vault repeats the same few key names endlessly
def classify_key(key: str) -> tuple[str, str] | None:
    """(tier, kind) for a credential-looking key, else None. Tier: password/secret/weak."""
    segs = _key_segments(key)
    if not segs or segs[-1] in VETO_LAST or "public" in segs or "publishable" in segs:
        return None
    last = segs[-1]
    prev = segs[-2] if len(segs) > 1 else ""
    joined = "".join(segs)
    if last in _PW_WORDS or last.endswith(("password", "passwd", "passphrase")):
        return None if joined in _SHELL_VARS else ("password", "password")
    if last == "key" and prev in _WIFI_WORDS:  # "WPA2 key: …" is the Wi-Fi password
        return "password", "password"
    if (
        last in _SECRET_WORDS
        or last.endswith(_SECRET_SUFFIXES)
        or (last == "key" and prev in _KEY_QUALIFIERS)
    ):
        if ("aws" in joined and "secret" in joined) or "secretaccesskey" in joined:
            return "secret", "aws_secret_key"
        if (
            "azure" in joined
            or "ocpapim" in joined
            or joined.endswith(("accountkey", "sharedaccesskey"))
        ):
            return "secret", "azure_key"
        if "twilio" in joined:
            return "secret", "twilio"
        return "secret", "secret"
    if last in _WEAK_WORDS or any(f in joined for f in _WEAK_FRAGMENTS):
        return "weak", "generic_high_entropy"
    return None


@dataclass(frozen=True, slots=True)
class _Site:
    """Where a value sits: enough syntax to tell a literal from code or prose."""

    key: str
    quoted: bool
    sep: str  # ":", "=", ":=", "=>", ",", "ann" (``key: type =``) or " " (``--flag value``)
    spaced: bool  # whitespace before the separator or between it and the value
    tight: bool  # no whitespace between separator and value
    follow: str  # the character right after the value
    env: bool  # a whole-run value (dotenv, YAML): symbols, parentheses and & are its own
    text: str
    end: int


def _is_type_name(v: str) -> bool:
    """CamelCase of real words: each holds a vowel, bar acronyms and common abbreviations."""
    if not (_TYPE_LIKE.fullmatch(v) and is_wordy(DIGITS.sub("", v))):
        return False
    words = CAMEL_WORD.findall(v)
    return all(
        w in _TYPE_ABBREVIATIONS or VOWEL.search(w)
        for w in words
        if len(w) >= 2 and not w.isupper()
    )


def _unquoted_is_literal(v: str, site: _Site) -> bool:
    """False when an unquoted value is code, a type, a flag or the start of a sentence."""
    if site.env:
        # KEY=value to the end of its run, as dotenv reads it: `!`, `@`, `(` or `&` are
        # characters of the password. Not a command substitution, a YAML tag or alias
        # (`key: !Ref x`, `*alias`), a call (`KEY=f(x)`) or a flag (`pass: -v`).
        if v.startswith(("$(", "`")) or (
            v.endswith((")", "`")) and ("$(" in v or "`" in v or _CALL_START.match(v))
        ):
            return False
        if (site.sep == ":" and v[0] in "!&*") or (v[0] == "-" and not looks_random(v[1:])):
            return False
    elif v[0] in "!&*@(-:" or "(" in v or "[" in v:  # YAML tag/alias, call, index, next flag
        return False
    if is_code_ref(v):
        return False
    if site.sep == ":" and not site.key.isupper() and _is_type_name(v):
        return False  # a type annotation: `password: SecretStr`, `key: Ed25519PrivateKey`
    if _UNION_NEXT.match(site.text, site.end) and (is_wordy(v) or _is_type_name(v)):
        return False  # `key: bytes | None`, but not a value in a table cell
    if v.isascii() and v.isalpha() and _AFTER_WORD.match(site.text, site.end):
        return False  # "token: the smallest unit of text" is prose
    if len(v) <= 12 and _LENGTH_RULE.match(site.text, site.end):
        return False  # "Password: 12+ chars, one digit"
    if site.sep == " " and "=" in v.rstrip("="):
        return False  # `--secrets KEY=value`: the flag takes an assignment, judged on its own
    if site.follow and site.follow in "'`" and is_wordy(v):
        return False  # "pre-pass: zsh's": cut at an apostrophe, so a word in a sentence
    if is_identifier(v) and ((site.sep == "=" and site.spaced) or site.sep in (":=", "=>")):
        return False  # `a_signature = maximum_filter1d_signature`: a variable
    if is_wordy(v):
        # A bare word is a literal in `.env` (KEY=word) and YAML (key: word), but a variable
        # in code (`password = user_pw`, `f(password=pw)`, `{token: tok,}`) and a word in
        # prose (`--password option`, `passwd:dir`).
        if site.sep in (" ", ":=", "=>") or (site.follow and site.follow in ",)"):
            return False
        if site.follow == ";" and site.spaced:  # JS `pw = input;`, but not ADO `Password=x;`
            return False
        if (site.sep == "=" and site.spaced) or (site.sep == ":" and site.tight):
            return False
    return True


def _is_annotation(ann: str) -> bool:
    """``: Type =`` holds a type (``str``, ``SecretStr``, ``typing.Optional[str]``), not a
    random run that ends in ``=``."""
    if not ann.rstrip("=").endswith((" ", "\t")):
        return False  # `x: T = v` is spaced (PEP 8); `KEY: yiqa=oj…` is a value
    name = ann.lstrip(":").rstrip("= \t").split("[", 1)[0].split("|", 1)[0].strip()
    parts = name.split(".")
    return all(p and (is_wordy(p) or _is_type_name(p) or _PRIMITIVE.fullmatch(p)) for p in parts)


def _whole_run(text: str, key: str, key_start: int, sep: str, vm: re.Match[str]) -> bool:
    """A value whose run of non-space characters is all its own: ``KEY=value`` with nothing
    between (dotenv, shell, compose), or ``key: value`` ending its line (YAML), the key
    upper case or at its line's start (``_at_line_head``); elsewhere ``key: value`` or
    ``--key=value`` whose run ends the line ("SSH key passphrase: Tr0ub4dor&3"). A keyword
    argument (``f(password=getpass())``) is code, and so is a lowercase key's value that
    calls or indexes (``password=hash(raw)``)."""
    if not _at_line_head(text, key, key_start):
        # "SSH key passphrase: Tr0ub4dor&3": a value that ends its line is its whole run
        # wherever its key stands ("&3" was left behind). A short run only: every key of a
        # long line would read it again.
        short = _SHORT_RUN.match(text, vm.start("uv"))
        if sep not in (":", "=") or short is None or short.end() - short.start() >= LONG_VALUE:
            return False  # ("--password=X&3" too)
        stop = run_end(text, vm.end("uv"))
        value = text[vm.start("uv") : stop]
        return _LINE_ENDS.match(text, stop) is not None and not any(c in value for c in "([")
    stop = run_end(text, vm.end("uv"))
    if not key.isupper() and any(c in text[vm.start("uv") : stop] for c in "(["):
        return False
    if sep == "=":
        return not vm.group("pad") and text[vm.start() - 2 : vm.start() - 1] != " "
    if sep == ":":
        return _LINE_ENDS.match(text, stop) is not None
    return False


def _at_line_head(text: str, key: str, key_start: int) -> bool:
    """An upper-case key (an environment variable anywhere: `-e KEY=…`), or one that starts
    its line after indentation, ``export``, a list or quote marker."""
    line_start = text.rfind("\n", 0, key_start) + 1
    return key.isupper() or _LINE_HEAD.fullmatch(text, line_start, key_start) is not None


def _extended(text: str, cut: int, *, anywhere: bool) -> int:
    """Where a whole-run value cut at ``cut`` ends: the run's end, unless what follows the
    cut is a list's next name ("API_KEY,DB_PASSWORD", "contents:read,issues:write") or the
    next key ("abc&def=1", "…;Trusted_Connection=False;"). ``anywhere``: the key does not
    start its line (its value is a whole run only because it ends the line)."""
    end = run_end(text, cut)
    if text[cut] in "&()" and not anywhere:
        return end  # a dotenv or YAML value at its line's start: Django's SECRET_KEY
    piece = text[cut + 1 : end]
    if _PARAM.match(piece) or (text[cut] in ",;" and not _SECRETISH.search(piece)):
        return cut
    return end


def _amp_inside(text: str, pos: int) -> bool:
    """An "&" at ``pos`` inside a run ("Tr0ub&dor"), not a shell's "&&" or a lone "&"."""
    return text[pos : pos + 1] == "&" and text[pos + 1 : pos + 2] not in (
        "",
        "&",
        " ",
        "\t",
        "\r",
        "\n",
    )


def run_end(text: str, pos: int) -> int:
    """End of the run of non-space characters from ``pos``, less unbalanced closing
    brackets and trailing punctuation (``KEY=p(w)x)`` in a call, ``{password: a&b}``,
    ``… is a&b.``)."""
    m = _RUN_REST.match(text, pos)
    end = m.end() if m else pos
    balance = {c: text.count(o, pos, end) - text.count(c, pos, end) for o, c in _PAIRS}
    while end > pos and text[end - 1] in ").,;]}":
        last = text[end - 1]
        if last in balance:
            if balance[last] >= 0:
                break  # closes a bracket the value opened: `p(w)x)` keeps one
            balance[last] += 1
        end -= 1
    return end


# A Google app password as Google shows it, "qwzx efgh ijkl mnop": sixteen random letters.
_APP_PASSWORD = re.compile(r"[a-z]{4}(?: [a-z]{4}){3}")


def _app_password(v: str) -> bool:
    """Four groups of four letters, at most one of them a common word: "this will work
    fine" and "some long text here" are sentences. Not a made-up one: a group repeated
    ("none none none none"), one letter four times ("aaaa bbbb cccc dddd"), or each group
    letters in the alphabet's order ("abcd efgh ijkl mnop", Google's own example)."""
    if not _APP_PASSWORD.fullmatch(v):
        return False
    groups = v.split()
    return not made_up_groups(groups) and sum(map(is_common_word, groups)) <= 1


# What a name before "_KEY" says the key is: a lookup, an index, a hash or a public key's
# fingerprint, not a credential ("CACHE_KEY", "SORT_KEY", "GPG_KEY", "COMMIT_KEY").
_LOOKUP_KEY_WORDS = frozenset(
    """
    primary foreign sort partition cache routing idempotency lookup row object s3 redis
    dedup dedupe unique composite shard range map dict entry item record lock group message
    event request trace correlation etag hash sha sha1 sha256 md5 gpg pgp gnupg public host
    index translation i18n locale cursor commit git rev revision build release version
    checksum content file cdn bucket path query sql db table column field react list node
    digest sha3 sha512 blake2 blake3 fingerprint tree blob parent head base snapshot layer
    manifest artifact image model uuid guid id nonce run user device tenant state example
    sample fake dummy test placeholder torrent infohash magnet
    """.split()
)
# A name such as OPENWEATHER_KEY, as an environment variable is written.
_UPPER_SNAKE_KEY = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*_KEY")
_HEX_RUN = "0123456789abcdef"


def _placeholder_hex(v: str) -> bool:
    """A made-up hex value: one character or a short group repeated ("deadbeef" * 4,
    "0123456789abcdef" * 2), or a run of sequential hex digits in it."""
    low = v.lower()
    if any(low == (low[:p] * (len(low) // p + 1))[: len(low)] for p in range(1, 17)):
        return True
    runs = (_HEX_RUN[i : i + 8] for i in range(len(_HEX_RUN) - 7))
    return any(r in low or r[::-1] in low for r in runs)


def _vendor_hex_key(key: str, v: str) -> bool:
    """32 hex characters under a vendor's ``*_KEY`` written as an environment variable
    (``OPENWEATHER_KEY``, ``TMDB_KEY``): the v3 API keys many services issue. A bare
    ``key``, one named as a lookup, a hash or an id (``CACHE_KEY``, ``COMMIT_KEY``), and a
    made-up value hold no credential; 40 and 64 hex characters are hashes."""
    if _UPPER_SNAKE_KEY.fullmatch(key) is None:
        return False
    segs = _key_segments(key)
    if len(segs) < 2 or segs[-1] != "key" or any(s in _LOOKUP_KEY_WORDS for s in segs):
        return False
    return (
        len(v) == 32
        and HEXLIKE.fullmatch(v) is not None
        and DIGIT.search(v) is not None
        and not v.isdigit()
        and not _placeholder_hex(v)
    )


def _judge(tier: str, kind: str, raw: str, v: str, site: _Site) -> str:
    """The kind to redact ``v`` as, or '' to keep it. ``raw`` is before trimming."""
    if is_placeholder(raw) or is_placeholder(v) or "://" in v or is_path(v):
        return ""
    if tier == "password" and site.quoted and _app_password(v):
        return kind  # MAIL_PASSWORD="qwzx efgh ijkl mnop": spaced, but not prose
    if any(ch.isspace() for ch in v) and (tier != "password" or is_prose(v)):
        return ""  # tokens have no spaces; a spaced password is kept only if not prose
    # "wifi_password: kestrel.Citron99" reads as an attribute path, but is no code
    dotted = tier == "password" and is_dotted_password(v)
    if not site.quoted and not dotted and not _unquoted_is_literal(v, site):
        return ""
    if v.isdigit() and len(v) <= 5:  # counts, ports, sizes
        return ""
    if is_wordy(v) and _CRED_WORD.search(v):  # "challengePassword", "my-secret-token"
        return ""
    if tier == "password":
        return kind if len(v) >= 3 and not is_multiword(v) else ""
    if tier == "secret":
        return kind if looks_random(v) else ""
    if ":" in v and "://" not in v:
        # `BOT_AUTH=123456789:AAx…`, `PROXY_AUTH=id:secret`: judge the part after the colon.
        head, _, v = v.rpartition(":")
        if not head or not _TOKEN_CHARS.fullmatch(head):
            return ""
    if not _TOKEN_CHARS.fullmatch(v):
        return ""
    if userpass_b64(v):
        return "basic_auth"
    if _vendor_hex_key(site.key, v):
        return "secret"  # OPENWEATHER_KEY=<32 hex>
    return kind if high_entropy(v) else ""


def _compound_key(text: str, key_start: int, key: str) -> str:
    """Join a prose label like "API key" / "Client Secret" into one key."""
    if key.lower() not in ("key", "secret", "token"):
        return key
    m = _PREV_WORD.search(text, max(0, key_start - 30), key_start)
    return f"{m.group(1)}_{key}" if m else key


def _separator(m: re.Match[str]) -> str:
    if m.group("ann") is not None:
        return "ann"
    if m.group("ws") is not None:
        return " "
    return m.group("sep") or ""


# A login pair's label, "user/pass:", "u/p:", "login/pw:": ``logins`` reads the pair or the
# password alone after it; the assignment and prose stages leave it ("login/DB_PASSWORD=" is
# a key of their own).
PAIR_USER = r"u|user(?:name)?|login|id|identifiant"  # the halves of such a label
PAIR_PASSWORD = r"p|pw|pwd|pswd|passwd|pass(?:word)?s?|mdp"
_PAIR_LABEL_HEAD = re.compile(rf"(?<![\w/-])(?:{PAIR_USER})/\Z", re.I)
_PAIR_LABEL_TAIL = re.compile(PAIR_PASSWORD, re.I)


def pair_label(text: str, start: int, label: str) -> bool:
    """Whether ``label`` at ``start`` is the second half of a login pair's label."""
    return (
        _PAIR_LABEL_TAIL.fullmatch(label) is not None
        and _PAIR_LABEL_HEAD.search(text, max(0, start - 12), start) is not None
    )


LONG_VALUE = 1000  # characters: no key=value of a real note holds another key this far in

KEY_HINT_WORDS = tuple(_KEY_HINT.pattern.removeprefix("(?i)").split("|"))


def redact_assignments(note: Note, counts: Counter[str]) -> str:
    text = note.text
    edits: list[Edit] = []
    pos = 0
    lines = note.lines(KEY_HINT_WORDS)
    line = 0
    while line < len(lines):
        line_start, line_end = lines[line]
        if pos >= line_end:
            line += 1
            continue
        # Keys and separators never span lines, so the search is bounded by the line; the
        # value is still read from the whole text.
        m = _ASSIGN_RE.search(text, max(pos, line_start), line_end)
        if m is None:
            line += 1
            continue
        # Resume right after the key: what followed may hold the real assignment
        # (`$env:API_KEY = ...` first matches key `env` with an "annotation").
        pos = m.end("key")
        key = m.group("key").rstrip(".-")
        key_start = m.start("key")
        if not _KEY_HINT.search(key) or text.startswith(MARK, key_start - len(MARK)):
            continue
        if pair_label(text, key_start, key):
            continue  # "user/pass: admin / …": a login pair's label (``logins``), not a key
        sep = _separator(m)
        if sep == "ann" and not _is_annotation(m.group("ann")):
            # `SECRET: hIU9…N04=` is a value ending in base64 padding, not `key: Type =`.
            sep, value_from = ":", m.start("ann") + 1
        else:
            value_from = m.end()
        sep_start = m.start("sep") if sep not in ("ann", " ") else m.end("key")
        if sep == ":" and m.group("ann") is not None:
            sep_start = m.start("ann")
        if sep == ":" and text[sep_start - 1] in " \t":
            continue  # "pass :role:" is prose; YAML, JSON and env put ':' right after the key
        classified = classify_key(_compound_key(text, key_start, key))
        if classified is None:
            continue
        vm = _VALUE_RE.match(text, value_from)
        if vm is None:
            continue
        if vm.end() - value_from > LONG_VALUE:
            # Read once: the keys inside a long value are part of it. A hostile line of
            # "password:xxx…" (a value per key, each to the line's end) took minutes.
            pos = max(pos, vm.end())
        quoted = vm.group("q") is not None
        if "f" in (vm.group("pre") or "").lower() and "{" in vm.group("qv"):
            continue  # f"{user}-{pw}": code that builds the value
        # `setenv("API_KEY", "v")` only: a bare `"a", "b"` is any list or tuple.
        if sep == "," and not (
            quoted
            and (key.isupper() or "_" in key)  # an env-var name, not `scrypt("password", salt)`
            and _CALL_OPEN.search(text, max(0, key_start - 20), key_start - 1)
        ):
            continue
        start, end = vm.span("qv" if quoted else "uv")
        env = not quoted and _whole_run(text, key, key_start, sep, vm)
        in_query = text[key_start - 1 : key_start] in ("?", "&")  # `?token=abc&state=x`
        if env and not in_query and text[end : end + 1] in _RUN_GOES_ON:
            end = _extended(text, end, anywhere=not _at_line_head(text, key, key_start))
        raw = value = text[start:end]
        if not quoted:
            value = raw.rstrip(".:*")  # a final "!" is part of a password far more often
            end = start + len(value)
            if not value:
                continue
        site = _Site(
            key=key,
            quoted=quoted,
            sep=sep,
            spaced=text[sep_start - 1] in " \t" or bool(vm.group("pad").strip("*")),
            tight=not vm.group("pad").strip("*"),
            follow=text[end : end + 1] if env else text[vm.end() : vm.end() + 1],
            text=text,
            end=end,
            env=env,
        )
        kind = _judge(*classified, raw, value, site)
        if kind == "password" and not quoted and not env and _amp_inside(text, end):
            # "NAS password: Tr0ub&dor -> …": the value was cut at "&" only because more
            # follows on its line; the run is the password (not "&next=1", a parameter).
            end = _extended(text, end, anywhere=True)
        if (
            kind
            and end - start > 4
            and text.startswith("~~", start)
            and text[end - 2 : end] == "~~"
        ):
            start, end = start + 2, end - 2  # struck through ("~~Old1!~~ New2!"): inside it
        if kind:
            edits.append((start, end, marker(kind)))
            counts[kind] += 1
            pos = max(vm.end(), end)
    return splice(text, edits)
