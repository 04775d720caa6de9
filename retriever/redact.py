"""Scrub credentials from a note's text before anything is stored or embedded.

:func:`redact` runs on the whole note (frontmatter, HTML comments and code fences included)
and replaces every secret token by ``[REDACTED:kind]``. For ``key = value`` secrets only
the value is replaced, so the text stays searchable (``DB_PASSWORD=[REDACTED:password]``).

Guarantees the indexer relies on:

* Line structure is preserved: no replacement contains or removes a line break, except a
  multi-line private-key block, which becomes the marker followed by exactly the line
  breaks the block spanned (``\\r\\n`` kept as ``\\r\\n``). Lines without a secret are
  byte-identical, so ``path:start-end`` citations stay right.
* Idempotent: markers are never matched again, so a second pass changes and counts nothing.
* Linear time: every pattern is anchored by a look-behind boundary or a literal prefix,
  quantifiers are bounded where they could backtrack, and each rule is skipped unless a
  cheap substring hint occurs in the text.

Besides ``key = value`` syntax (including Dataview's ``key:: value``) it reads values out
of Kubernetes ``kind: Secret`` manifests, and credentials written as sentences ("the wifi
password is …", "le mot de passe est …", "login: admin / …", "the encryption key is …")
when the value is a passphrase (words, dashes and a number) or random characters.

Kinds: see :data:`KINDS`. Deliberately not covered: bare high-entropy strings with no
credential-like key or vendor prefix (prose, tables); passphrases made of plain words
(``"correct horse battery staple"``) and plain words where the syntax reads as code
(``password = tiger`` with spaces is a variable; ``DB_PASSWORD=tiger`` is redacted); hex
and UUID values under ambiguous keys (``key``, ``signature``: hashes and ids); the Twilio
account SID (an identifier; its auth token is redacted); AWS pre-signed URL signatures;
secrets split across lines other than PEM blocks.

The module never logs or raises with a secret value; callers log kinds and file names.
"""

from __future__ import annotations

import base64
import binascii
import logging
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

log = logging.getLogger(__name__)

# Bump whenever a rule changes: stored text redacted by an older version must be re-indexed.
REDACTOR_VERSION = "3"

KINDS: tuple[str, ...] = (
    "private_key",
    "openai_key",
    "anthropic_key",
    "openrouter_key",
    "groq_key",
    "github_token",
    "gitlab_token",
    "aws_access_key_id",
    "aws_secret_key",
    "gcp_api_key",
    "gcp_client_secret",
    "gcp_access_token",
    "azure_key",
    "stripe_key",
    "slack_token",
    "slack_webhook",
    "discord_webhook",
    "discord_token",
    "twilio",
    "sendgrid_key",
    "npm_token",
    "pypi_token",
    "huggingface_token",
    "telegram_bot_token",
    "kubernetes_secret",
    "jwt",
    "url_password",
    "bearer_token",
    "basic_auth",
    "password",
    "secret",
    "generic_high_entropy",
)

_MARK = "[REDACTED:"
# Every character str.splitlines() treats as a line break: values must never contain one.
_LINE_BREAKS = "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_BREAK_RE = re.compile("\r\n|[" + _LINE_BREAKS + "]")

_Edit = tuple[int, int, str]


def _marker(kind: str) -> str:
    return f"{_MARK}{kind}]"


def _splice(text: str, edits: list[_Edit]) -> str:
    """Apply sorted, non-overlapping (start, end, replacement) edits."""
    if not edits:
        return text
    parts: list[str] = []
    last = 0
    for start, end, rep in edits:
        parts.append(text[last:start])
        parts.append(rep)
        last = end
    parts.append(text[last:])
    return "".join(parts)


# --------------------------------------------------------------------------- value heuristics

_LOWER = re.compile(r"[a-z]")
_UPPER = re.compile(r"[A-Z]")
_DIGIT = re.compile(r"[0-9]")
_CAMEL_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
_CONSONANTS = re.compile(r"[^aeiouyAEIOUY]{4}")
_VOWEL = re.compile(r"[aeiouyAEIOUY]")
_WORD_SPLIT = re.compile(r"[-_.:\s/]+")  # also splits xs:anyURI
_ALNUM_SPLIT = re.compile(r"[^A-Za-z0-9]+")
_HEXLIKE = re.compile(r"[0-9a-f]+|[0-9A-F]+")
_UUID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
_MASK_CHARS = frozenset("xX*•#0")

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


def _entropy(s: str) -> float:
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


def _alnum_classes(s: str) -> int:
    return bool(_LOWER.search(s)) + bool(_UPPER.search(s)) + bool(_DIGIT.search(s))


def _is_masked(s: str) -> bool:
    """``xxxx``, ``****``, ``sk-proj-XXXXXXXX``, ``0000``: a masked or dummy value."""
    if len(s) >= 3 and len(set(s)) <= 2:
        return True
    return sum(ch in _MASK_CHARS for ch in s) * 2 >= len(s)


def _is_wordy(s: str) -> bool:
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
        pieces = _CAMEL_WORD.findall(part)
        # One-letter pieces: only a leading capital, as in OAuth or X-Header.
        if any(len(w) == 1 for w in pieces[1:]) or (
            len(pieces) > 1 and len(pieces[0]) == 1 and pieces[0].islower()
        ):
            return False
        words.extend(pieces)
    if not words or max(map(len, words)) > 24 or sum(map(len, words)) < 2.5 * len(words):
        return False
    return not (len(words) == 1 and words[0].islower() and _CONSONANTS.search(words[0]))


def _is_multiword(s: str) -> bool:
    parts = [p for p in _WORD_SPLIT.split(s) if p]
    return len(parts) >= 2 and all(p.isascii() and p.isalpha() for p in parts)


def _is_placeholder(value: str) -> bool:
    s = value.strip()
    if s.startswith(_MARK) or _is_masked(s):
        return True
    s = s.strip("*_ ")  # markdown emphasis around a template value: **<password>**
    if not s or s.startswith(("&lt;", "&#")):  # HTML-escaped <placeholder>
        return True
    low = s.lower()
    if low in _KEEP_WORDS or s[0] in "$%<{[":  # ${VAR}, $VAR, %(x)s, <your-key>, {{ v }}, [..]
        return True
    if "..." in s or "…" in s or low.startswith(("enc[", "vault:")):
        return True
    if any(
        w.lower() in _PLACEHOLDER_WORDS
        for part in _ALNUM_SPLIT.split(s)
        if part.isalpha()  # a part with digits in it is a random run, not a word
        for w in _CAMEL_WORD.findall(part)
    ):
        return True
    return _is_masked(s)


def _looks_random(v: str) -> bool:
    """Loose test for a value under an explicit secret key (``api_key``, ``token``)."""
    if len(v) < 8:
        return False
    # Long mixed-case letters with no separator are random more often than a word.
    if _is_wordy(v) and (len(v) < 16 or not v.isalpha() or v.islower() or v.isupper()):
        return False
    ent = _entropy(v)
    return (_alnum_classes(v) >= 2 and ent >= 2.5) or (len(v) >= 16 and ent >= 3.0)


def _high_entropy(v: str) -> bool:
    """Strict test for a value under an ambiguous key (``key``, ``session``, ``sig``)."""
    if len(v) < 20 or _is_wordy(v) or _HEXLIKE.fullmatch(v) or _UUID.fullmatch(v):
        return False  # hex and UUIDs there are hashes and ids far more often than secrets
    # Real tokens this long almost always mix in digits; CamelCase identifiers do not.
    return _alnum_classes(v) >= 2 and bool(_DIGIT.search(v)) and _entropy(v) >= 3.3


def _is_word_chain(s: str) -> bool:
    """Short alphabetic parts joined by separators: ``sk-learn-style-pipelines-for-ml``."""
    parts = [p for p in _WORD_SPLIT.split(s) if p]
    return len(parts) >= 2 and all(p.isascii() and p.isalpha() and len(p) <= 16 for p in parts)


def _vendor_ok(token: str) -> bool:
    """A vendor-shaped token that is not a documented example, a mask or made of words."""
    return not (_is_masked(token) or "example" in token.lower() or _is_word_chain(token))


def _userpass_b64(v: str) -> bool:
    """True when ``v`` is base64 of ``user:password`` (HTTP Basic credentials)."""
    if len(v) < 8 or len(v) % 4:
        return False
    try:
        raw = base64.b64decode(v, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return False
    user, sep, pw = raw.partition(":")
    return bool(sep and user and pw) and raw.isprintable()


# --------------------------------------------------------------------------- simple rules


@dataclass(frozen=True, slots=True)
class _Rule:
    """One regex; the secret is ``group``; skipped unless a hint substring occurs."""

    kind: str
    regex: re.Pattern[str]
    hints: tuple[str, ...]
    group: str | int = 0
    check: Callable[[str], bool] = _vendor_ok
    kind_of: Callable[[re.Match[str]], str] | None = None
    hints_ci: bool = False


def _rule(
    kind: str,
    pattern: str,
    hints: tuple[str, ...],
    *,
    group: str | int = 0,
    check: Callable[[str], bool] = _vendor_ok,
    kind_of: Callable[[re.Match[str]], str] | None = None,
    flags: int = 0,
) -> _Rule:
    return _Rule(
        kind,
        re.compile(pattern, flags),
        hints,
        group,
        check,
        kind_of,
        bool(flags & re.IGNORECASE),
    )


def _has_hint(text: str, hints: tuple[str, ...], ci: bool, low: str | None = None) -> bool:
    if ci:
        low = text.lower() if low is None else low
        return any(h in low for h in hints)
    return any(h in text for h in hints)


def _apply_rule(rule: _Rule, text: str, counts: Counter[str], low: str | None = None) -> str:
    if not _has_hint(text, rule.hints, rule.hints_ci, low):
        return text
    edits: list[_Edit] = []
    for m in rule.regex.finditer(text):
        value = m.group(rule.group)
        if not value or not rule.check(value):
            continue
        kind = rule.kind_of(m) if rule.kind_of else rule.kind
        start, end = m.span(rule.group)
        edits.append((start, end, _marker(kind)))
        counts[kind] += 1
    return _splice(text, edits)


def _value_ok(v: str) -> bool:
    return len(v) >= 8 and not _is_placeholder(v)


def _token_ok(v: str) -> bool:
    return not _is_placeholder(v) and _looks_random(v) and not _is_code_ref(v)


def _password_ok(v: str) -> bool:
    return len(v) >= 3 and not _is_placeholder(v) and not (v.isdigit() and len(v) <= 5)


_TOKEN_END = r"(?![\w-])"

# Order matters: the most specific prefixes first (sk-ant- before sk-), and everything that
# can sit inside a larger structure (URL, header, assignment) before the structural rules,
# which then see a marker and leave it alone.
_VENDOR_RULES: tuple[_Rule, ...] = (
    _rule("anthropic_key", r"(?<![\w-])sk-ant-[A-Za-z0-9_\-]{20,}", ("sk-ant-",)),
    _rule("openrouter_key", r"(?<![\w-])sk-or-v\d+-[A-Za-z0-9]{20,}" + _TOKEN_END, ("sk-or-",)),
    _rule(
        "openai_key",
        r"(?<![\w-])sk-(?!ant-|or-)(?:(?:proj|svcacct|admin|None)-)?[A-Za-z0-9_\-]{32,}",
        ("sk-",),
    ),
    _rule("groq_key", r"(?<![\w-])gsk_[A-Za-z0-9]{20,}" + _TOKEN_END, ("gsk_",)),
    _rule(
        "github_token",
        r"(?<![\w-])(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{40,255})" + _TOKEN_END,
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    _rule(
        "gitlab_token",
        r"(?<![\w-])gl(?:pat|dt|rt|ptt|cbt|oas|imt|ft|soat|agent|ffct|wt)-"
        r"[A-Za-z0-9_\-]{20,}(?:\.[A-Za-z0-9_\-]+)*",
        ("gl",),
    ),
    _rule(
        "aws_access_key_id",
        r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}(?![A-Za-z0-9])",
        ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
    ),
    _rule("gcp_api_key", r"(?<![\w-])AIza[0-9A-Za-z_\-]{35}" + _TOKEN_END, ("AIza",)),
    _rule("gcp_client_secret", r"(?<![\w-])GOCSPX-[0-9A-Za-z_\-]{20,}", ("GOCSPX-",)),
    _rule("gcp_access_token", r"(?<![\w.-])ya29\.[0-9A-Za-z_\-]{20,}", ("ya29.",)),
    # Azure AD client secrets carry a version digit and "Q~" at a fixed offset.
    _rule(
        "azure_key",
        r"(?<![\w~.\-])[A-Za-z0-9_~.\-]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}(?![\w~.\-])",
        ("Q~",),
    ),
    _rule(
        "azure_key",
        r"(?<!\w)(?:AccountKey|SharedAccessKey|SharedAccessSignature)[ \t]*=[ \t]*"
        r"(?P<v>[^;\s\"'<>]+)",
        ("accountkey", "sharedaccess"),
        group="v",
        check=_value_ok,
        flags=re.IGNORECASE,
    ),
    # SAS token signature in a blob/queue URL.
    _rule(
        "azure_key",
        r"(?<=[?&])sig=(?P<v>[A-Za-z0-9%+/=]{16,})",
        ("sig=",),
        group="v",
        check=_token_ok,
    ),
    _rule(
        "stripe_key",
        r"(?<![\w-])(?:(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{24,})"
        + _TOKEN_END,
        ("sk_live_", "sk_test_", "rk_live_", "rk_test_", "whsec_"),
    ),
    _rule(
        "slack_webhook",
        r"https://hooks\.slack\.com/(?:services|workflows|triggers)/(?P<v>[A-Za-z0-9_/\-]{16,})",
        ("hooks.slack.com",),
        group="v",
    ),
    _rule(
        "slack_token",
        r"(?<![\w-])(?:xox[abposer]-|xoxe\.xox[bp]-|xapp-)[A-Za-z0-9\-]{10,}" + _TOKEN_END,
        ("xox", "xapp-"),
    ),
    _rule(
        "discord_webhook",
        r"https://(?:(?:ptb|canary)\.)?discord(?:app)?\.com/api/webhooks/"
        r"(?P<v>\d+/[A-Za-z0-9_\-]{20,})",
        ("discord",),
        group="v",
    ),
    _rule("twilio", r"(?<![A-Za-z0-9])SK[0-9a-fA-F]{32}(?![A-Za-z0-9])", ("SK",)),
    _rule(
        "sendgrid_key",
        r"(?<![\w.-])SG\.[A-Za-z0-9_\-]{16,32}\.[A-Za-z0-9_\-]{16,64}" + _TOKEN_END,
        ("SG.",),
    ),
    _rule("npm_token", r"(?<![\w-])npm_[A-Za-z0-9]{36}" + _TOKEN_END, ("npm_",)),
    _rule("pypi_token", r"(?<![\w-])pypi-AgE[A-Za-z0-9_\-]{50,}", ("pypi-AgE",)),
    _rule("huggingface_token", r"(?<![\w-])hf_[A-Za-z0-9]{30,}" + _TOKEN_END, ("hf_",)),
    # Bot id, colon, secret; also inside API URLs (https://api.telegram.org/bot<token>/).
    _rule(
        "telegram_bot_token",
        r"(?:(?<![\w:])|(?<=/bot))\d{8,10}:AA[A-Za-z0-9_\-]{30,40}" + _TOKEN_END,
        (":AA",),
    ),
    # Without the usual "AA": exactly 35 characters, and only where a bot is mentioned.
    _rule(
        "telegram_bot_token",
        r"(?:(?<![\w:])|(?<=/bot))\d{8,10}:[A-Za-z0-9_\-]{35}" + _TOKEN_END,
        ("telegram", "/bot", "bot_token", "bot token", "bottoken"),
        check=lambda t: _vendor_ok(t) and _alnum_classes(t) == 3,
        flags=re.IGNORECASE,
    ),
    _rule(
        "jwt",
        r"(?<![\w-])eyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*",
        ("eyJ",),
    ),
    # Discord bot token: base64 user id . timestamp . HMAC.
    _rule(
        "discord_token",
        r"(?<![\w.-])[MNO][A-Za-z0-9_\-]{23,27}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,40}"
        r"(?![\w.-])",
        (".",),
        check=lambda t: _vendor_ok(t) and _alnum_classes(t) == 3,
    ),
)


def _auth_kind(m: re.Match[str]) -> str:
    scheme = m.group("scheme")
    return "basic_auth" if scheme and scheme.lower() == "basic" else "bearer_token"


def _curl_user_kind(m: re.Match[str]) -> str:
    return "twilio" if re.fullmatch(r"AC[0-9a-f]{32}", m.group("user")) else "basic_auth"


# Possessive, then not followed by "(" or a word char: `base64.decodebytes(x)` is code.
_TOKEN68 = r"[A-Za-z0-9\-._~+/]++=*+(?![\w(])"

_HEADER_RULES: tuple[_Rule, ...] = (
    # Authorization / Proxy-Authorization headers: http dumps, curl -H, code dicts.
    _rule(
        "bearer_token",
        r"(?<![\w-])(?:proxy-)?authorization[\"'`]?\]?[ \t]*[:=][ \t]*[\"'`]?[ \t]*"
        r"(?:(?P<scheme>bearer|token|basic|apikey|api-key|key|sso-key)[ \t]+)?"
        r"(?P<v>" + _TOKEN68 + ")",
        ("authorization",),
        group="v",
        check=lambda v: len(v) >= 8 and not (_is_placeholder(v) or _is_wordy(v) or _is_code_ref(v)),
        kind_of=_auth_kind,
        flags=re.IGNORECASE,
    ),
    _rule(
        "bearer_token",
        r"(?<![\w-])[Bb]earer[ \t]+(?P<v>" + _TOKEN68 + ")",
        ("earer",),
        group="v",
        check=_token_ok,
    ),
    _rule(
        "basic_auth",
        r"(?<![\w-])[Bb]asic[ \t]+(?P<v>[A-Za-z0-9+/]{6,}={0,2})(?![\w+/=-])",
        ("asic",),
        group="v",
        check=_userpass_b64,
    ),
    # scheme://user:password@host; the password runs to the last '@' before the host.
    _rule(
        "url_password",
        r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]{0,30}://"
        r"(?P<user>[^\s:@/?#\[\]\"'<>]{0,256}):(?P<v>[^\s/?#\"'<>]{1,256})@(?=[^\s@/?#\"'<>])",
        ("://",),
        group="v",
        check=_password_ok,
    ),
    # ~/.netrc: "machine host login user password secret" (or "default login ...").
    _rule(
        "password",
        r"(?<![\w-])(?:machine[ \t]+\S+|default)(?:[ \t]+(?:login|account|port)[ \t]+\S+)*"
        r"[ \t]+(?:password|passwd)[ \t]+(?P<v>[^\s\"'`]+)",
        ("machine", "default"),
        group="v",
        check=lambda v: _password_ok(v) and not _is_wordy(v),
    ),
    _rule(
        "basic_auth",
        r"(?<![\w-])(?:-u|--user)[ \t]+[\"']?(?P<user>[^\s:\"']+):(?P<v>[^\s\"']+)",
        ("-u", "--user"),
        group="v",
        check=_password_ok,
        kind_of=_curl_user_kind,
    ),
)


# --------------------------------------------------------------------------- private keys

_D5 = "-" * 5  # spelled out so no literal key header appears in this file
_PEM_LABEL = r" [A-Z0-9 ]{0,40}?PRIV" + r"ATE KEY(?: BLOCK)?"
_PEM_BEGIN = re.compile(_D5 + "BEGIN" + _PEM_LABEL + _D5)
_PEM_END = re.compile(_D5 + "END" + _PEM_LABEL + _D5)
_PEM_HINT = "PRIV" + "ATE KEY"
_PEM_MAX_BODY = 200_000
# Tail of a block whose END line is missing: base64 and header lines that follow, through
# real newlines or the literal "\n" escapes of a JSON string.
_NL = r"(?:\r\n|[\r\n]|\\n)"
_PEM_TAIL = re.compile(
    r"(?:" + _NL + r"[ \t]*(?:[A-Za-z0-9+/=]{16,}|=[A-Za-z0-9+/]{4}|"
    r"(?:Proc-Type|DEK-Info|Comment|Version|Hash):[^\r\n\\\"]*)[ \t]*(?="
    + _NL
    + r"|[\"']|$)|"
    + _NL
    + r"(?="
    + _NL
    + r"))*"
)


_TRAILING_NL = re.compile(_NL + r"\Z")
_PEM_BODY = re.compile(r"[A-Za-z0-9+/]{16}")


def _redact_pem(text: str, counts: Counter[str]) -> str:
    if _PEM_HINT not in text:
        return text
    edits: list[_Edit] = []
    pos = 0
    end_m: re.Match[str] | None = None
    no_end_after = len(text) + 1  # memo: no END marker at or after this offset
    begin = _PEM_BEGIN.search(text)
    while begin is not None:
        if begin.start() < pos:  # inside a block already replaced
            begin = _PEM_BEGIN.search(text, pos)
            continue
        nxt = _PEM_BEGIN.search(text, begin.end())
        if (end_m is None or end_m.start() < begin.end()) and begin.end() < no_end_after:
            end_m = _PEM_END.search(text, begin.end())
            if end_m is None:
                no_end_after = begin.end()
        terminated = (
            end_m is not None
            and end_m.start() >= begin.end()
            and end_m.start() - begin.end() <= _PEM_MAX_BODY
            and (nxt is None or nxt.start() > end_m.start())
        )
        if terminated and end_m is not None:
            stop = end_m.end()
        else:
            tail = _PEM_TAIL.match(text, begin.end())
            stop = tail.end() if tail else begin.end()
            # Leave the final line break in place when the tail ended on one.
            stop = begin.end() + len(_TRAILING_NL.sub("", text[begin.end() : stop]))
        # A header with no key material (a constant in code, a how-to) is not a secret.
        if not _PEM_BODY.search(text, begin.end(), stop):
            begin = nxt
            continue
        breaks = "".join(_BREAK_RE.findall(text, begin.start(), stop))
        edits.append((begin.start(), stop, _marker("private_key") + breaks))
        counts["private_key"] += 1
        pos = stop
        begin = nxt
    return _splice(text, edits)


# --------------------------------------------------------------------------- line-scoped rules


def _line_spans(text: str, hint: re.Pattern[str]) -> list[tuple[int, int]]:
    """(start, end) of each distinct line containing a match of ``hint``.

    Each search is bounded by the nearest ``\n`` so that LF-only text never makes a scan
    for ``\r`` run to the end (or start) of the note: linear, not quadratic.
    """
    spans: list[tuple[int, int]] = []
    last_end = -1
    has_cr = "\r" in text
    for m in hint.finditer(text):
        if m.start() <= last_end:
            continue
        start = text.rfind("\n", 0, m.start()) + 1
        if has_cr:
            start = max(start, text.rfind("\r", start, m.start()) + 1)
        end = text.find("\n", m.end())
        if end == -1:
            end = len(text)
        if has_cr:
            cr = text.find("\r", m.end(), end)
            end = cr if cr != -1 else end
        spans.append((start, end))
        last_end = end
    return spans


def _scoped(
    text: str,
    counts: Counter[str],
    hint: re.Pattern[str],
    inner: re.Pattern[str],
    kind: str,
    check: Callable[[str], bool],
) -> str:
    edits: list[_Edit] = []
    for start, end in _line_spans(text, hint):
        for m in inner.finditer(text, start, end):
            value = m.group("v")
            if check(value):
                edits.append((*m.span("v"), _marker(kind)))
                counts[kind] += 1
    return _splice(text, edits)


# AWS secret access key: 40 base64-ish chars on a line that names it or holds the key id.
_AWS_HINT = re.compile(
    r"(?i)aws.{0,3}secret|secret.{0,3}access.{0,3}key|\[REDACTED:aws_access_key_id\]"
)
_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9/+=])(?P<v>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])")
# Twilio auth token: 32 hex on a line that holds an account SID.
_TWILIO_HINT = re.compile(r"(?<![A-Za-z0-9])AC[0-9a-f]{32}(?![A-Za-z0-9])")
_TWILIO_TOKEN = re.compile(r"(?<![A-Za-z0-9])(?P<v>[0-9a-f]{32})(?![A-Za-z0-9])")


def _aws_secret_ok(v: str) -> bool:
    return (
        _alnum_classes(v) == 3
        and _entropy(v) >= 3.5
        and "example" not in v.lower()
        and not _is_masked(v)
    )


def _redact_scoped(text: str, counts: Counter[str], low: str) -> str:
    if "secret" in low or "aws_access_key_id]" in text:
        text = _scoped(text, counts, _AWS_HINT, _AWS_SECRET, "aws_secret_key", _aws_secret_ok)
    if "AC" in text:
        text = _scoped(text, counts, _TWILIO_HINT, _TWILIO_TOKEN, "twilio", _vendor_ok)
    return text


# --------------------------------------------------------------------------- key = value

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
)
_CRED_WORD = re.compile(r"(?i)pass|pwd|secret|token|key|cred|auth")
_CAMEL_SPLIT = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEG_SPLIT = re.compile(r"[^A-Za-z0-9]+")
_CALL_OPEN = re.compile(r"\([ \t]*\Z")
_PREV_WORD = re.compile(r"([A-Za-z]+)[ \t]\Z")
_AFTER_WORD = re.compile(r"[ \t]+[A-Za-z]+\b(?![=:])")
# snake_case parts: a word with an optional number or short tag (filter1d, v2, 256).
_SNAKE_IDENT = re.compile(
    r"(?:[A-Za-z]+\d*[A-Za-z]{0,2}|\d+)(?:_+(?:[A-Za-z]+\d*[A-Za-z]{0,2}|\d+))+"
)
_DOTTED = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+")
_DIGITS = re.compile(r"\d+")
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
_PATH = re.compile(r"(?:~|\.{1,2})?/[\w.\-/]*|[A-Za-z]:\\\S*")
_FILE_EXT = re.compile(
    r"\.(?:pem|key|crt|cer|der|p12|pfx|jks|keystore|json|ya?ml|toml|ini|cfg|conf|env|txt|gpg|asc)$",
    re.IGNORECASE,
)
_WORD_TOKEN = re.compile(r"[(\"'`]?[A-Za-z][a-z]+(?:['’-][a-z]+)*[.,;:!?)\"'`]*")
# API keys and tokens use this alphabet; `{`, `(`, `|`, `\` and friends mean code or syntax.
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9+/=_\-.~%]+")

_PW_WORDS = frozenset("password passwd passwort passphrase passcode pwd pass pw pword".split())
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
_VETO_LAST = frozenset(
    """
    hash hashed digest checksum sha sha1 sha256 sha512 md5 crc id ids name names file files
    filename path paths dir url urls uri endpoint host length len count counts size type
    types kind ttl expiry expires expiration lifetime timeout policy field fields header
    param prefix suffix format regex pattern pat env var ref hint label description desc help
    prompt min max limit mode method strategy provider store manager reset rotation enabled
    required location version usage budget encoding algorithm alg index column table arn
    fingerprint rule rules scope scopes source
    """.split()
)
_KEY_SUFFIXES = frozenset("value val b64 base64 str string raw plain enc encoded base hex".split())
_SHELL_VARS = frozenset({"pwd", "oldpwd"})


def _key_segments(key: str) -> list[str]:
    segs = [s.lower() for s in _SEG_SPLIT.split(_CAMEL_SPLIT.sub("_", key)) if s]
    while len(segs) > 1 and segs[-1] in _KEY_SUFFIXES:
        segs.pop()
    return segs


@lru_cache(maxsize=4096)  # a vault repeats the same few key names endlessly
def _classify_key(key: str) -> tuple[str, str] | None:
    """(tier, kind) for a credential-looking key, else None. Tier: password/secret/weak."""
    segs = _key_segments(key)
    if not segs or segs[-1] in _VETO_LAST or "public" in segs or "publishable" in segs:
        return None
    last = segs[-1]
    prev = segs[-2] if len(segs) > 1 else ""
    joined = "".join(segs)
    if last in _PW_WORDS or last.endswith(("password", "passwd", "passphrase")):
        return None if joined in _SHELL_VARS else ("password", "password")
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


def _is_path(v: str) -> bool:
    if _FILE_EXT.search(v):
        return True
    if not _PATH.fullmatch(v):
        return False
    # Base64 can start with '/': a path has short, word-like segments.
    return all(len(seg) < 16 or not _looks_random(seg) for seg in v.split("/"))


def _is_prose(v: str) -> bool:
    """Several space-separated tokens, at least half of them plain words."""
    toks = v.split()
    words = sum(bool(_WORD_TOKEN.fullmatch(t)) for t in toks)
    return len(toks) >= 2 and words * 2 >= len(toks)


def _is_identifier(v: str) -> bool:
    """A snake_case name made of words, digits allowed (``filter1d_signature``)."""
    return bool(_SNAKE_IDENT.fullmatch(v)) and _is_wordy(_DIGITS.sub("", v))


def _is_code_ref(v: str) -> bool:
    """``self.token``, ``os.environ``, ``_lib.NID_aes_256_cbc``: an attribute path."""
    if not _DOTTED.fullmatch(v):
        return False
    parts = [_DIGITS.sub("", p).replace("$", "") for p in v.split(".")]
    return sum(_is_wordy(p) for p in parts if p) * 2 >= len(parts)


@dataclass(frozen=True, slots=True)
class _Site:
    """Where a value sits: enough syntax to tell a literal from code or prose."""

    key: str
    quoted: bool
    sep: str  # ":", "=", ":=", "=>", ",", "ann" (``key: type =``) or " " (``--flag value``)
    spaced: bool  # whitespace before the separator or between it and the value
    tight: bool  # no whitespace between separator and value
    follow: str  # the character right after the value
    text: str
    end: int


def _is_type_name(v: str) -> bool:
    """CamelCase of real words: each holds a vowel, bar acronyms and common abbreviations."""
    if not (_TYPE_LIKE.fullmatch(v) and _is_wordy(_DIGITS.sub("", v))):
        return False
    words = _CAMEL_WORD.findall(v)
    return all(
        w in _TYPE_ABBREVIATIONS or _VOWEL.search(w)
        for w in words
        if len(w) >= 2 and not w.isupper()
    )


def _unquoted_is_literal(v: str, site: _Site) -> bool:
    """False when an unquoted value is code, a type, a flag or the start of a sentence."""
    if v[0] in "!&*@(-:" or "(" in v or "[" in v:  # YAML tag/alias, call, index, next flag
        return False
    if _is_code_ref(v):
        return False
    if site.sep == ":" and not site.key.isupper() and _is_type_name(v):
        return False  # a type annotation: `password: SecretStr`, `key: Ed25519PrivateKey`
    if _UNION_NEXT.match(site.text, site.end):  # `key: bytes | None`
        return False
    if v.isascii() and v.isalpha() and _AFTER_WORD.match(site.text, site.end):
        return False  # "token: the smallest unit of text" is prose
    if site.sep == " " and "=" in v.rstrip("="):
        return False  # `--secrets KEY=value`: the flag takes an assignment, judged on its own
    if site.follow in "'`" and _is_wordy(v):
        return False  # "pre-pass: zsh's": cut at an apostrophe, so a word in a sentence
    if _is_identifier(v) and ((site.sep == "=" and site.spaced) or site.sep in (":=", "=>")):
        return False  # `a_signature = maximum_filter1d_signature`: a variable
    if _is_wordy(v):
        # A bare word is a literal in `.env` (KEY=word) and YAML (key: word), but a variable
        # in code (`password = user_pw`, `f(password=pw)`, `{token: tok,}`) and a word in
        # prose (`--password option`, `passwd:dir`).
        if site.sep in (" ", ":=", "=>") or site.follow in ",)":
            return False
        if site.follow == ";" and site.spaced:  # JS `pw = input;`, but not ADO `Password=x;`
            return False
        if (site.sep == "=" and site.spaced) or (site.sep == ":" and site.tight):
            return False
    return True


def _judge(tier: str, kind: str, raw: str, v: str, site: _Site) -> str:
    """The kind to redact ``v`` as, or '' to keep it. ``raw`` is before trimming."""
    if _is_placeholder(raw) or _is_placeholder(v) or "://" in v or _is_path(v):
        return ""
    if any(ch.isspace() for ch in v) and (tier != "password" or _is_prose(v)):
        return ""  # tokens have no spaces; a spaced password is kept only if not prose
    if not site.quoted and not _unquoted_is_literal(v, site):
        return ""
    if v.isdigit() and len(v) <= 5:  # counts, ports, sizes
        return ""
    if _is_wordy(v) and _CRED_WORD.search(v):  # "challengePassword", "my-secret-token"
        return ""
    if tier == "password":
        return kind if len(v) >= 3 and not _is_multiword(v) else ""
    if tier == "secret":
        return kind if _looks_random(v) else ""
    if not _TOKEN_CHARS.fullmatch(v):
        return ""
    if _userpass_b64(v):
        return "basic_auth"
    return kind if _high_entropy(v) else ""


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


_KEY_HINT_WORDS = tuple(_KEY_HINT.pattern.removeprefix("(?i)").split("|"))


def _hint_lines(
    text: str, words: tuple[str, ...] = _KEY_HINT_WORDS, low: str | None = None
) -> list[tuple[int, int]]:
    """(start, end) of each line holding one of ``words`` (lowercase): only there can a rule
    match. Found with str.find on the lowered text (C speed; a case-insensitive regex is not)."""
    low = text.lower() if low is None else low
    starts: set[int] = set()
    for word in words:
        i = low.find(word)
        while i >= 0:
            start = low.rfind("\n", 0, i) + 1
            starts.add(start)
            end = low.find("\n", i)
            if end < 0:
                break
            i = low.find(word, end)  # the rest of this line is covered already
    spans = []
    for start in sorted(starts):
        end = text.find("\n", start)
        spans.append((start, len(text) if end < 0 else end))
    return spans


def _redact_assignments(text: str, counts: Counter[str], low: str) -> str:
    edits: list[_Edit] = []
    pos = 0
    lines = _hint_lines(text, low=low)
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
        if not _KEY_HINT.search(key) or text.startswith(_MARK, key_start - len(_MARK)):
            continue
        sep = _separator(m)
        sep_start = m.start("sep") if sep not in ("ann", " ") else m.end("key")
        if sep == ":" and text[sep_start - 1] in " \t":
            continue  # "pass :role:" is prose; YAML, JSON and env put ':' right after the key
        classified = _classify_key(_compound_key(text, key_start, key))
        if classified is None:
            continue
        vm = _VALUE_RE.match(text, m.end())
        if vm is None:
            continue
        quoted = vm.group("q") is not None
        # `setenv("API_KEY", "v")` only: a bare `"a", "b"` is any list or tuple.
        if sep == "," and not (
            quoted
            and (key.isupper() or "_" in key)  # an env-var name, not `scrypt("password", salt)`
            and _CALL_OPEN.search(text, max(0, key_start - 20), key_start - 1)
        ):
            continue
        start, end = vm.span("qv" if quoted else "uv")
        raw = value = text[start:end]
        if not quoted:
            value = raw.rstrip(".:!*")
            end = start + len(value)
            if not value:
                continue
        site = _Site(
            key=key,
            quoted=quoted,
            sep=sep,
            spaced=text[sep_start - 1] in " \t" or bool(vm.group("pad").strip("*")),
            tight=not vm.group("pad").strip("*"),
            follow=text[vm.end() : vm.end() + 1],
            text=text,
            end=end,
        )
        kind = _judge(*classified, raw, value, site)
        if kind:
            edits.append((start, end, _marker(kind)))
            counts[kind] += 1
            pos = vm.end()
    return _splice(text, edits)


# --------------------------------------------------------------------------- Kubernetes Secrets

# A `kind: Secret` line; its document's top-level `data:` / `stringData:` holds the values.
_K8S_KIND = re.compile(r"""^([ \t]*)["']?kind["']?[ \t]*:[ \t]*["']?Secret["']?[ \t]*(?:#.*)?$""")
_K8S_ANY = re.compile(r"""^[ \t]*["']?kind["']?[ \t]*:[ \t]*["']?Secret""", re.MULTILINE)
_K8S_DATA = re.compile(r"""["']?(data|stringData)["']?[ \t]*:[ \t]*(?:#.*)?""")
_K8S_ENTRY = re.compile(r"""["']?[\w.\-]+["']?[ \t]*:(?:[ \t]+(?P<v>\S.*?))?[ \t]*""")
_YAML_KEY = re.compile(r"""["']?[\w.\-]+["']?[ \t]*:(?:[ \t]|$)|#|- """)
_B64 = re.compile(r"[A-Za-z0-9+/_\-]+=*")
_BLOCK_SCALAR = re.compile(r"[|>][+-]?\d?")


def _yaml_lines(text: str) -> list[tuple[int, int, int]]:
    """(start, end, indent) of every line; ``end`` excludes the break (and a CR)."""
    out = []
    pos = 0
    for line in text.split("\n"):
        body = line[:-1] if line.endswith("\r") else line
        out.append((pos, pos + len(body), len(body) - len(body.lstrip(" \t"))))
        pos += len(line) + 1
    return out


def _doc_bounds(text: str, lines: list[tuple[int, int, int]], at: int) -> tuple[int, int]:
    """Line range [lo, hi) of the YAML document around line ``at``: up to a `---`/`...`
    separator, a code fence, a line indented less than ``at``, or a top-level non-key line
    (prose around a bare manifest)."""
    base = lines[at][2]

    def inside(i: int) -> bool:
        start, end, ind = lines[i]
        body = text[start + ind : end]
        if not body.strip():
            return True
        if body.rstrip() in ("---", "...") or body.startswith(("```", "~~~")) or ind < base:
            return False
        return ind > base or bool(_YAML_KEY.match(body))

    lo = at
    while lo > 0 and inside(lo - 1):
        lo -= 1
    hi = at + 1
    while hi < len(lines) and inside(hi):
        hi += 1
    return lo, hi


def _k8s_value_ok(v: str, plain: bool) -> bool:
    v = v.strip("\"'")
    if not v or _is_placeholder(v):
        return False
    if plain:
        return True
    if not _B64.fullmatch(v):
        return False  # a template or a flow value, not base64
    try:
        raw = base64.b64decode(v + "=" * (-len(v) % 4), altchars=b"-_" if "-" in v else None)
        decoded = raw.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return True  # binary key material
    # A mask test on short real values ("app" has two letters) would keep too much.
    masked_only = _is_masked(decoded) and not set(decoded) <= _MASK_CHARS
    return not (decoded.isprintable() and _is_placeholder(decoded) and not masked_only)


def _k8s_block_edits(
    text: str, lines: list[tuple[int, int, int]], i: int, hi: int, plain: bool
) -> list[_Edit]:
    """Edits for the entries under the `data:`/`stringData:` key on line ``i``."""
    edits: list[_Edit] = []
    parent = lines[i][2]
    in_block = -1  # indent of the entry whose block scalar (`key: |`) we are inside
    for j in range(i + 1, hi):
        start, end, ind = lines[j]
        if start + ind == end:
            continue  # blank
        if ind <= parent:
            break
        if in_block >= 0 and ind > in_block:
            if not text.startswith(_MARK, start + ind):  # idempotent
                edits.append((start + ind, end, _marker("kubernetes_secret")))
            continue
        m = _K8S_ENTRY.fullmatch(text, start + ind, end)
        if m is None or m.group("v") is None:
            in_block = -1
            continue
        v = m.group("v")
        if _BLOCK_SCALAR.fullmatch(v):
            in_block = ind
            continue
        in_block = -1
        vs, ve = m.span("v")
        if v[0] in "\"'" and len(v) >= 2 and v[-1] == v[0]:
            vs, ve = vs + 1, ve - 1
        if _k8s_value_ok(text[vs:ve], plain):
            edits.append((vs, ve, _marker("kubernetes_secret")))
    return edits


def _redact_k8s_secrets(text: str, counts: Counter[str], low: str) -> str:
    """Values under `data:` (base64) and `stringData:` (plain) of a `kind: Secret` document."""
    if "Secret" not in text or "ata" not in text or not _K8S_ANY.search(text):
        return text
    lines = _yaml_lines(text)
    edits: list[_Edit] = []
    done_until = -1
    for at, (start, end, _) in enumerate(lines):
        if at < done_until or "Secret" not in text[start:end]:
            continue
        km = _K8S_KIND.match(text[start:end])
        if km is None:
            continue
        lo, hi = _doc_bounds(text, lines, at)
        done_until = hi
        for i in range(lo, hi):
            s, e, ind = lines[i]
            dm = _K8S_DATA.fullmatch(text, s + ind, e)
            if ind == len(km.group(1)) and dm is not None:
                edits += _k8s_block_edits(text, lines, i, hi, dm.group(1) == "stringData")
    counts["kubernetes_secret"] += len(edits)
    if not counts["kubernetes_secret"]:
        del counts["kubernetes_secret"]
    return _splice(text, sorted(edits))


# --------------------------------------------------------------------------- prose

# "password" and its French and qualified forms; "wifi password" is the same word.
_PW_PHRASE = r"(?:pass(?:word|phrase|code)s?|mots?[ \t]+de[ \t]+passe|mdp)"
# Material named by what it encrypts, English and French (accents optional).
_KEY_PHRASE = (
    r"(?:(?:encryption|decryption|master|backup|(?:restic[ \t]+)?repo(?:sitory)?|restic)"
    r"[ \t]+key|cl[eé][ \t]+(?:de[ \t]+)?(?:chiffrement|d[eé]chiffrement))"
)
# Up to five qualifying words ("for the guest network", "du wifi") before the separator.
_QUALIFIER = r"(?P<qual>(?:[ \t]+[^\s:=.;!?,()`\"'*]{1,24}){0,5}?)"
# Every qualifier length is tried with a separator before settling for none.
_PROSE_SEP = (
    r"(?:" + _QUALIFIER + r"[ \t]*(?P<sep>:|=|->|→|\b(?:is|was|est|était|sera)\b)|(?P<none>))"
)
_PROSE_VALUE = r"[ \t]*[`\"'*“«(]*[ \t]*(?P<v>[^\s`\"'*”»<>]{1,200})"
_PROSE_PW = re.compile(
    r"(?<![\w-])" + _PW_PHRASE + r"(?![\w-])" + _PROSE_SEP + _PROSE_VALUE,
    re.IGNORECASE,
)
_PROSE_KEY = re.compile(
    r"(?<![\w-])" + _KEY_PHRASE + r"(?![\w-])" + _PROSE_SEP + _PROSE_VALUE,
    re.IGNORECASE,
)
# "login: admin / secret", "user = root / secret", "identifiant : bob / secret".
_LOGIN_PAIR = re.compile(
    r"(?<![\w-])(?:login|user(?:name)?|identifiant|utilisateur)[ \t]*[:=][ \t]*[`\"'*]*"
    r"[^\s/`\"'*]{1,64}[`\"'*]*[ \t]*/[ \t]*[`\"'*]*(?P<v>[^\s`\"'*<>]{1,200})",
    re.IGNORECASE,
)
# Lowercase prefilters: a rule's regex only runs on the lines holding one of these. They
# assume single spaces ("encryption key"), as people write; the regexes allow more.
_PW_HINTS = ("password", "passphrase", "passcode", "passe", "mdp")
# Every English phrase ends in " key": one scan for it spares the others in most notes.
_KEY_HINTS_EN = (
    "encryption key",
    "decryption key",
    "master key",
    "backup key",
    "repo key",
    "repository key",
    "restic key",
)
_KEY_HINTS_FR = ("chiffrement",)
_LOGIN_HINTS = ("login", "user", "identifiant", "utilisateur")
_VALUE_TRIM = ".,;:!?)]}\"'`*”»"
_EMAIL = re.compile(r"[\w.+\-]+@[\w\-]+\.[\w.\-]+")
_PHRASE_PARTS = re.compile(r"[-_.+]")
# A word, one number, maybe more words: Win32_UserAccount, SHA256, x509Certificate.
_NAME_WITH_NUMBER = re.compile(r"[A-Za-z]*[A-Za-z]\d+(?:[_-]?[A-Za-z]+)*")


def _is_passphrase(v: str, min_parts: int = 2) -> bool:
    """Words joined by dashes (or dots, underscores) with a number: correct-horse-battery-42."""
    parts = _PHRASE_PARTS.split(v)
    if len(parts) < min_parts or not all(p.isascii() and p.isalnum() for p in parts):
        return False
    wordy = sum(len(p) >= 2 and any(c.isalpha() for c in p) for p in parts)
    return wordy >= 2 and any(c.isdigit() for c in v)


def _prose_secret_ok(v: str, strict: bool) -> bool:
    """A value written in a sentence: a passphrase or random characters, not a word."""
    if len(v) < 6 or _is_placeholder(v) or "://" in v or _EMAIL.fullmatch(v):
        return False
    if _is_path(v) or _is_code_ref(v) or _UUID.fullmatch(v):
        return False
    if _is_passphrase(v, 3 if strict else 2):
        return True
    if not _DIGIT.search(v) or (_NAME_WITH_NUMBER.fullmatch(v) and _is_wordy(_DIGITS.sub("", v))):
        return False  # Win32_UserAccount, SHA256, plain words: names, not secrets
    if strict:
        return len(v) >= 10 and _alnum_classes(v) == 3 and _entropy(v) >= 3.0
    return _looks_random(v) or (len(v) >= 6 and not v.isalnum() and _alnum_classes(v) >= 2)


def _key_material_ok(v: str, strict: bool) -> bool:
    """Base64 (or hex, when a separator says "this is it") key material."""
    if len(v) < 16 or _is_placeholder(v) or not _B64.fullmatch(v) or _UUID.fullmatch(v):
        return False
    if _HEXLIKE.fullmatch(v):
        return not strict and len(v) >= 32
    # Base64 of 32 random bytes lacks a digit about once in a thousand: do not insist on one.
    return _high_entropy(v) or (_alnum_classes(v) >= 2 and _entropy(v) >= 3.5 and not _is_wordy(v))


def _qualifier_vetoed(m: re.Match[str]) -> bool:
    """ "password hash is …", "key fingerprint: …": the value describes, it is not secret."""
    return any(w.lower() in _VETO_LAST for w in (m.group("qual") or "").split())


def _prose_edits(
    text: str,
    spans: list[tuple[int, int]],
    regex: re.Pattern[str],
    ok: Callable[[str, bool], bool],
    kind: str,
) -> list[_Edit]:
    edits: list[_Edit] = []
    for start, end in spans:
        for m in regex.finditer(text, start, end):
            if "qual" in m.re.groupindex and _qualifier_vetoed(m):
                continue
            strict = "none" in m.re.groupindex and m.group("none") is not None
            vs = m.start("v")
            v = m.group("v").rstrip(_VALUE_TRIM)
            if text.startswith(_MARK, vs) or not v or not ok(v, strict):
                continue
            edits.append((vs, vs + len(v), _marker(kind)))
    return edits


def _redact_prose(text: str, counts: Counter[str], low: str) -> str:
    """Credentials written as sentences: "the wifi password is …", "login: admin / …"."""
    edits: list[_Edit] = []
    if any(h in low for h in _PW_HINTS):
        spans = _hint_lines(text, _PW_HINTS, low)
        edits += _prose_edits(text, spans, _PROSE_PW, _prose_secret_ok, "password")
    if "/" in text and any(h in low for h in _LOGIN_HINTS):  # the pair's "/" first: cheap
        spans = [
            (a, b) for a, b in _hint_lines(text, _LOGIN_HINTS, low) if text.find("/", a, b) >= 0
        ]
        edits += _prose_edits(text, spans, _LOGIN_PAIR, _prose_secret_ok, "password")
    hints = _KEY_HINTS_FR if " key" not in low else _KEY_HINTS_EN + _KEY_HINTS_FR
    if any(h in low for h in hints):
        spans = _hint_lines(text, hints, low)
        edits += _prose_edits(text, spans, _PROSE_KEY, _key_material_ok, "secret")
    if not edits:
        return text
    kept: list[_Edit] = []
    for edit in sorted(edits):  # two rules can name the same value
        if not kept or edit[0] >= kept[-1][1]:
            kept.append(edit)
            counts[edit[2][len(_MARK) : -1]] += 1
    return _splice(text, kept)


# --------------------------------------------------------------------------- Twilio pairs

# Client("SK…" or "AC…", "<secret>"): the second literal is the key's secret or auth token.
_TWILIO_PAIR = re.compile(
    r"""(?P<q>["'])(?:(?:AC|SK)[0-9a-fA-F]{32}|\[REDACTED:twilio\])(?P=q)[ \t]*,[ \t]*"""
    r"""(?P<q2>["'])(?P<v>[A-Za-z0-9]{32})(?P=q2)"""
)


def _redact_twilio_pairs(text: str, counts: Counter[str], low: str) -> str:
    if "AC" not in text and "[REDACTED:twilio]" not in text:
        return text
    edits: list[_Edit] = []
    for m in _TWILIO_PAIR.finditer(text):
        if _looks_random(m.group("v")) and not _is_masked(m.group("v")):
            edits.append((*m.span("v"), _marker("twilio")))
            counts["twilio"] += 1
    return _splice(text, edits)


# --------------------------------------------------------------------------- entry point


def redact(text: str) -> tuple[str, Counter[str]]:
    """Return (scrubbed_text, counts_by_kind).

    Secrets become ``[REDACTED:kind]``; line breaks and secret-free lines are untouched.
    """
    counts: Counter[str] = Counter()
    if not text:
        return text, counts
    text = _redact_pem(text, counts)
    low = text.lower()  # shared by every rule's case-insensitive pre-check
    for rule in (*_VENDOR_RULES, *_HEADER_RULES):
        new = _apply_rule(rule, text, counts, low)
        if new is not text:
            text, low = new, new.lower()
    # The later stages share the lowered text too; it is refreshed only when one edits.
    for stage in (
        _redact_k8s_secrets,
        _redact_scoped,
        _redact_twilio_pairs,
        _redact_assignments,
        _redact_prose,
    ):
        new = stage(text, counts, low)
        if new is not text:
            text, low = new, new.lower()
    if counts:
        log.debug("redacted %d secret(s): %s", sum(counts.values()), sorted(counts))
    return text, counts
