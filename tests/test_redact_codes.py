"""PINs and door codes, two-factor recovery codes, seed phrases, passphrases of plain words
and payment cards, as people keep them in personal notes (``retriever.redact.codes``); and
the numbers, words and documentation around them that must stay.

Secrets are generated at test time (no credential-shaped literal is committed, except the
public test card numbers payment providers document). Each positive case checks the exact
output: the code, and only the code, became its marker.
"""

from __future__ import annotations

import secrets
import string
import time
from collections import Counter

import pytest

from retriever.redact import redact
from retriever.redact.codes import luhn_ok

WORDS = (
    "correct horse battery staple orange river cloud piano tiger maple ocean violet rocket "
    "pencil garden silver candle forest yellow window marble castle"
).split()


def digits(n: int) -> str:
    return secrets.choice("123456789") + "".join(
        secrets.choice(string.digits) for _ in range(n - 1)
    )


def code(n: int = 5) -> str:
    """A GitHub-style recovery code: two groups of ``n`` lowercase letters and digits."""
    while True:
        s = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(2 * n))
        if sum(c.isdigit() for c in s) >= 2:
            return s[:n] + "-" + s[n:]


def words(n: int) -> str:
    return " ".join(secrets.choice(WORDS) for _ in range(n))


def card(first: str = "4", length: int = 16) -> str:
    body = first + "".join(secrets.choice(string.digits) for _ in range(length - len(first) - 1))
    for last in string.digits:
        if luhn_ok(body + last):
            return body + last
    raise AssertionError("unreachable")


def fours(number: str, sep: str = " ") -> str:
    return sep.join(number[i : i + 4] for i in range(0, len(number), 4))


def check(template: str, values: list[str], kind: str) -> str:
    """``template`` with ``{0}``, ``{1}``… filled by ``values``: each value, and nothing
    else, becomes ``kind``'s marker; a second pass changes nothing."""
    note = template.format(*values)
    out, counts = redact(note)
    assert out == template.format(*[f"[REDACTED:{kind}]"] * len(values))
    assert counts == Counter({kind: len(values)})
    assert redact(out) == (out, Counter())
    return out


# --------------------------------------------------------------------------- PINs and codes


@pytest.mark.parametrize(
    "template",
    [
        "PIN: {0}",
        "My bank card PIN is {0}.",
        "- SIM card PIN: `{0}`",
        "**PIN code** : {0}",
        "The PIN for the old phone was {0}",
        "Door code: {0}",
        "The alarm code is {0}",
        "Garage door code {0}",
        "Gate code -> {0}",
        "Bike lock combo is {0}",
        "Code PIN de la carte SIM : {0}",
        "Le code de la porte est {0}",
        "Digicode : {0}",
        "Code du portail : {0}",
        "<!-- Voicemail PIN: {0} -->",
        "Voicemail passcode {0}",
        "Mon code de carte bleue est {0}",
        "Code confidentiel : {0}",
    ],
)
def test_a_pin_or_door_code_after_its_label(template: str) -> None:
    check(template, [digits(4 + secrets.randbelow(3))], "pin")


def test_a_door_code_with_a_letter_and_a_safe_combination() -> None:
    check("Le code de la porte est {0}", [digits(4) + "B"], "pin")
    check("Door code: {0}", [digits(4) + "#"], "pin")
    check("Safe combination: {0}", [f"{digits(2)}-{digits(2)}-{digits(2)}"], "pin")


# --------------------------------------------------------------------------- recovery codes


def test_recovery_codes_on_the_label_line() -> None:
    check("GitHub recovery codes: {0} {1} {2}", [code(), code(), code()], "recovery_code")
    check("2FA backup codes: {0}, {1}", [digits(8), digits(8)], "recovery_code")
    check("Recovery code: {0}", [f"{code(4)}-{code(4)}"], "recovery_code")


@pytest.mark.parametrize("eol", ["\n", "\r\n"])
def test_recovery_codes_listed_below_their_label(eol: str) -> None:
    check(
        "## Recovery codes\n\n- {0}\n- {1}\n- [x] ~~{2}~~\n\nUse one per login.\n".replace(
            "\n", eol
        ),
        [code(), code(), code()],
        "recovery_code",
    )
    check("Backup codes:\n```\n{0}\n{1}\n```\n", [code(), code()], "recovery_code")
    check("Codes de secours :\n1. {0}\n2. {1}\n", [code(), code()], "recovery_code")
    check("Recovery codes:\n\n```\n{0}\n{1}\n```\n", [code(), code()], "recovery_code")
    check(
        "Recovery codes:\n- {0}\n- {1}\n\n- {2}\n- {3}\n",
        [code() for _ in range(4)],
        "recovery_code",
    )


def test_codes_in_groups_apart_by_blank_lines() -> None:
    check(
        "Recovery codes:\n{0}\n\n{1}\n\n{2}\n\n{3}\n", [code() for _ in range(4)], "recovery_code"
    )


def test_codes_three_blank_lines_below_their_label_are_not_read() -> None:
    note = f"Recovery codes:\n\n\n\n{code()}\n"
    assert redact(note) == (note, Counter())


def test_google_backup_codes_printed_as_two_groups_of_four() -> None:
    pairs = [f"{digits(4)} {digits(4)}" for _ in range(3)]
    check("Google backup codes:\n{0}\n{1}\n{2}\nDone.\n", pairs, "recovery_code")


def test_the_list_below_a_label_ends_at_the_first_line_that_is_not_codes() -> None:
    first, second = code(), code()
    note = f"Recovery codes:\n- {first}\n- {second}\n- not a code\n- {code()}-later\n"
    out, counts = redact(note)
    assert counts == Counter({"recovery_code": 2})
    assert out.endswith("- not a code\n" + note.splitlines()[-1] + "\n")


# --------------------------------------------------------------------------- seed phrases


def test_a_seed_phrase_on_its_line_or_below() -> None:
    check("Wallet seed phrase: {0}", [words(12)], "seed_phrase")
    check("Recovery phrase:\n{0}\n{1}\n", [words(12), words(12)], "seed_phrase")
    numbered = "Mnemonic:\n" + "".join(f"{i}. {{{i - 1}}}\n" for i in range(1, 13))
    check(numbered, [secrets.choice(WORDS) for _ in range(12)], "seed_phrase")


def test_a_seed_needs_twelve_to_twenty_four_words() -> None:
    for note in (f"Seed phrase: {words(11)}", f"Seed phrase: {words(25)}", "Seed: 42"):
        assert redact(note) == (note, Counter())


# --------------------------------------------------------------------------- passphrases


@pytest.mark.parametrize(
    "template",
    [
        "Passphrase: {0}",
        "Private key passphrase: {0}",
        'The passphrase is "{0}"',
        "Password for the NAS: {0}.",
        "Mot de passe : {0}",
    ],
)
def test_a_passphrase_of_plain_words_after_an_explicit_label(template: str) -> None:
    check(template, [words(4 + secrets.randbelow(5))], "password")


# --------------------------------------------------------------------------- cards


def test_card_numbers_that_pass_the_luhn_check() -> None:
    check("Visa card {0}, expires next year", [fours(card())], "payment_card")
    check("Carte bancaire : {0}", [fours(card("5"), "-")], "payment_card")
    check("Card: {0}", [card()], "payment_card")
    amex = card("37", 15)
    check("Amex {0}", [f"{amex[:4]} {amex[4:10]} {amex[10:]}"], "payment_card")
    check("Visa:\n{0}\n", [fours(card())], "payment_card")
    check("Credit card {0} exp 12/27 CVV {1}", [fours(card()), digits(3)], "payment_card")


def test_numbers_that_are_not_cards_stay() -> None:
    number = card()
    bad = number[:-1] + str((int(number[-1]) + 1) % 10)  # fails the Luhn check
    for note in (
        f"Order {number} shipped",  # no card named
        f"Card: {fours(bad)}",
        f"Card: 9{number}",  # part of a longer number
        f"Card build {number}.1",
        "Card: 4444 4444 4444 4444",
    ):
        assert redact(note) == (note, Counter())


# --------------------------------------------------------------------------- what stays

KEEP = [
    "GPIO pin 17 drives the LED",
    "pin: 4",
    "PIN: see the card",
    "Set the PIN length to 6 digits.",
    "Minimum PIN length: 4",
    "The PIN must be at least 6 digits long.",
    "PIN: 0000",
    "PIN 12 3",
    "PIN: 1234 5678 9012 3",
    "The default PIN is 2019-05-01",
    "Backup codes: stored in 1Password",
    "Recovery codes are single use.",
    "recovery codes: 10 codes, printed",
    "Recovery codes:\nKeep them somewhere safe.\n",
    "Seed: 42",
    "seed: dendron.templates",
    "Password: same as the router",
    "Password: ask Bob",
    "password: stored in keychain",
    "Password: not set yet",
    "Password requirements: minimum eight characters",
    "passphrase: correct horse",
    "Password: ldap domain account",
    "Error code: 0x80070005",
    "Postal code: 75011",
    "door code changed in 2019",
    "Phone +33 6 12 34 56 78",
    "key combination: Ctrl+Shift+P",
    "Windows Hello PIN reset",
    "CVV is printed on the back",
    "The card security code is three digits",
    "Smart card reader 1234-5678 firmware 2.3",
]


@pytest.mark.parametrize("note", KEEP)
def test_documentation_and_prose_kept(note: str) -> None:
    assert redact(note) == (note, Counter())


# --------------------------------------------------------------------------- linear time

PATHOLOGICAL = {
    "labels_on_one_line": "PIN code " * 40_000,
    "labels_and_numbers": "door code 12 " * 40_000,
    "recovery_labels_stacked": "Recovery codes:\n" * 40_000,
    "a_long_list_of_codes": "Recovery codes:\n" + "- abc12-def34\n" * 40_000,
    "card_digits": "card " + "4111 " * 80_000,
    "seed_words": "Seed phrase: " + "abandon " * 80_000,
    "passphrase_words": "Passphrase: " + "horse " * 80_000,
}


@pytest.mark.parametrize("name", sorted(PATHOLOGICAL))
def test_hostile_inputs_stay_linear(name: str) -> None:
    started = time.process_time()
    redact(PATHOLOGICAL[name])
    assert time.process_time() - started < 5.0
