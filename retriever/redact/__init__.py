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
* Linear time: patterns start with a literal prefix where they can (the regex engine's
  fast scan) or are bounded by their line, quantifiers are bounded where they could
  backtrack, and each rule runs only where a cheap trigger word occurs (:class:`Note`
  finds each word once per text and shares it across the stages).

Stages, in order (one module each): private-key blocks and PuTTY's .ppk private lines
(``pem``); vendor-shaped tokens, keys in API URLs under their host (OpenWeather, Alchemy,
Infura), wallet keys with a valid Base58Check checksum and HTTP credentials
(``vendors``); Kubernetes ``kind: Secret`` manifests (``kubernetes``);
passwords on command lines, ``mysql -pX``, ``sshpass -p X``, ``IDENTIFIED BY 'X'``,
``xfreerdp /p:X``, ``smbclient -U user%X``, ``keytool -storepass X``, ``7z -pX``, Oracle's
``user/X@db``, ``cloudflared service install <token>`` (``commands``);
credentials passed positionally in code, ``Client("SK…", "…")`` (``calls``); ``key =
value`` in every syntax, Dataview's ``key:: value`` included (``assign``); credentials
named by markup, ``<password>X</password>``, ``<add key="…Password" value="X"/>``, a
``| DB_PASSWORD | X |`` table row, a value under its key (``password: >``, a ``tokens:``
list, a Terraform variable's ``default``) (``markup``); the credential columns of comma-,
semicolon- or tab-separated exports under their header (``delimited``); two-factor setup
keys (``otp``); credentials
written as prose in English and French, "the wifi password is …", "clé de chiffrement : …",
a value alone under its label, "I changed the wifi password to …" (``prose``, judged by
``prose_values``); login pairs, "login: admin / …", "u: bob p: …", "user/pass: …", and
``.pgpass`` lines (``logins``); PINs and door codes (a house alarm's after "Alarm:"
alone, never a time of day), two-factor recovery codes, seed phrases, plain-word passphrases, card security codes (``codes``) and card
numbers that pass the Luhn check near a card's name (``codes.redact_cards``); the credential
columns of markdown tables (``tables``); the other passwords on a line that held one, "from
X to Y", "X (old: Y)" (``prose.redact_more_passwords``).

The rules read the note with no-break and other odd spaces as plain spaces and invisible
characters (zero-width space, soft hyphen) left out: "Mot de passe : X" is written with a
no-break space in French. A line they leave alone is given back as written.

Kinds: see :data:`KINDS`. Deliberately not covered: bare high-entropy strings with no
credential-like label, key, call or vendor prefix; passphrases made of plain words with no
number (``"correct horse battery staple"``) except four to eight words ending the line
after a passphrase label, or four or more dashed words after a password label; plain
words where the syntax reads as code (``password = tiger`` with spaces is a variable;
``DB_PASSWORD=tiger`` is redacted); hex and UUID values under
ambiguous labels (``key``, a lookup's, a hash's or an id's ``CACHE_KEY``, ``DIGEST_KEY``,
``signature``: hashes and ids; 32 hex characters under a vendor's ``OPENWEATHER_KEY`` are
redacted); a strong password with no label, even after a key emoji or a service's name
in a list item ("🔑 …", "- Netflix — …": tech stacks and gamer tags look the same); the
Twilio account SID (an identifier; its auth token is redacted); AWS pre-signed URL signatures; secrets split
across lines other than PEM blocks, and a value on the line below its label other than a
YAML block scalar or list and a Terraform variable's default.

The module never logs or raises with a secret value; callers log kinds and file names.
"""

from __future__ import annotations

import logging
import re
from collections import Counter

from retriever.redact.assign import redact_assignments
from retriever.redact.calls import redact_calls
from retriever.redact.codes import redact_cards, redact_codes
from retriever.redact.commands import redact_commands
from retriever.redact.core import Note
from retriever.redact.delimited import redact_delimited
from retriever.redact.kubernetes import redact_k8s_secrets
from retriever.redact.logins import redact_logins, redact_pgpass
from retriever.redact.markup import redact_markup
from retriever.redact.otp import redact_otp
from retriever.redact.pem import redact_pem, redact_ppk
from retriever.redact.prose import redact_more_passwords, redact_prose
from retriever.redact.tables import redact_tables
from retriever.redact.vendors import (
    HEADER_RULES,
    VENDOR_RULES,
    apply_rule,
    redact_api_tokens,
    redact_scoped,
)

log = logging.getLogger(__name__)

# Bump whenever a rule changes: stored text redacted by an older version must be re-indexed.
REDACTOR_VERSION = "28"

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
    "api_token",
    "kubernetes_secret",
    "jwt",
    "url_password",
    "bearer_token",
    "basic_auth",
    "password",
    "secret",
    "pin",
    "recovery_code",
    "seed_phrase",
    "payment_card",
    "generic_high_entropy",
)


# Spaces the rules' ``[ \t]`` does not match: French typography puts a no-break space
# before a colon ("Mot de passe : …"), and word processors and web pages paste them. And
# invisible characters that can sit inside a pasted token (zero-width space, soft hyphen).
_ODD_SPACES = "\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000"
_INVISIBLE = "\u00ad\u200b\u200c\u200d\u2060\ufeff"
_ODD = re.compile(f"[{_ODD_SPACES}{_INVISIBLE}]")


def redact(text: str) -> tuple[str, Counter[str]]:
    """Return (scrubbed_text, counts_by_kind).

    Secrets become ``[REDACTED:kind]``; line breaks and secret-free lines are untouched.
    """
    odd = set() if not text or text.isascii() else set(_ODD.findall(text))
    if not odd:
        return _redact(text)
    # The rules read a copy with plain spaces and no invisible characters; a line they
    # leave alone is given back as written, a line they redact as they wrote it.
    read = text
    for char in odd:  # str.replace per character found: translate() is 5x slower here
        read = read.replace(char, " " if char in _ODD_SPACES else "")
    plain, counts = _redact(read)
    if plain == read:  # nothing redacted (most notes): the text as written
        return text, counts
    written = text.splitlines(keepends=True)
    out = plain.splitlines(keepends=True)
    if len(out) != len(written):  # never expected: the rules keep every line break
        return plain, counts
    lines = zip(written, read.splitlines(keepends=True), out, strict=True)
    return "".join(w if o == r else o for w, r, o in lines), counts


def _redact(text: str) -> tuple[str, Counter[str]]:
    counts: Counter[str] = Counter()
    if not text:
        return text, counts
    text = redact_ppk(redact_pem(text, counts), counts)
    note = Note(text)  # the lowercase text and the trigger-word lines, shared by every rule
    for rule in VENDOR_RULES:
        new = apply_rule(rule, note, counts)
        if new is not note.text:
            note = Note(new)
    new = redact_api_tokens(note, counts)
    if new is not note.text:
        note = Note(new)
    for rule in HEADER_RULES:
        new = apply_rule(rule, note, counts)
        if new is not note.text:
            note = Note(new)
    for stage in (
        redact_k8s_secrets,
        redact_scoped,
        redact_commands,
        redact_calls,
        redact_assignments,
        redact_markup,
        redact_delimited,
        redact_otp,
        redact_prose,
        redact_logins,
        redact_pgpass,
        redact_codes,
        redact_cards,
        redact_tables,
        redact_more_passwords,
    ):
        new = stage(note, counts)
        if new is not note.text:
            note = Note(new)
    text = note.text
    if counts:
        log.debug("redacted %d secret(s): %s", sum(counts.values()), sorted(counts))
    return text, counts
