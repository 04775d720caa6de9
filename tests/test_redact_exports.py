"""Credentials as exports and key files put them in notes: password managers' and browsers'
CSV exports (``retriever.redact.delimited``), a card's security code or a PIN as a JSON
field, PuTTY's .ppk key files, wallet keys in Base58Check, a Wi-Fi network's bare "Key:",
and an e-mail address with its password on the line below. And the documentation and
prose around them that must stay.

Secrets are generated at test time (no credential-shaped literal is committed). Each
positive case checks the exact output: the secret, and only it, became its marker.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import string

import pytest

from retriever.redact import redact

PW = "[REDACTED:password]"
KEY = "[REDACTED:private_key]"


def password(n: int = 12) -> str:
    """Random characters with a capital, a small letter, a digit and a symbol. No "*"
    ("**" reads as emphasis in prose) and a letter or digit first ("&#" opens an HTML
    entity, "%" a variable)."""
    symbols = "!#%&+?@^"
    pool = string.ascii_letters + string.digits + symbols
    while True:
        s = secrets.choice(string.ascii_letters) + "".join(
            secrets.choice(pool) for _ in range(n - 1)
        )
        if all(any(c in g for c in s) for g in (*_CLASSES, symbols)):
            return s


_CLASSES = (string.ascii_lowercase, string.ascii_uppercase, string.digits)


def plain_password() -> str:
    """What people pick and exports hold: a word, maybe a short number."""
    return secrets.choice(["sunshine", "fluffy", "dragon", "maple"]) + secrets.choice(["", "7"])


# --- CSV exports ------------------------------------------------------------------------


def test_a_browser_export_loses_every_password_and_only_them() -> None:
    a, b = password(), plain_password()
    text = (
        "name,url,username,password,note\n"
        f'netflix.com,https://www.netflix.com/login,alice@example.com,{a},"shared, with mom"\n'
        f"amazon.fr,https://amazon.fr,alice,{b},\n"
    )
    out, counts = redact(text)
    assert out == text.replace(a, PW).replace(f",{b},", f",{PW},")
    assert counts["password"] == 2


def test_quoted_exports_keepass_firefox_and_bitwarden_with_its_totp() -> None:
    a, b, c = password(), password(), password()
    totp = base64.b32encode(secrets.token_bytes(10)).decode()
    text = (
        '"Group","Title","Username","Password","URL","Notes"\n'
        f'"Root","NAS","admin","{a}","http://192.168.1.10",""\n'
        "\n"
        '"url","username","password","httpRealm","guid"\n'
        f'"https://accounts.google.com","alice@gmail.com","{b}","","{{9a1b}}"\n'
        "\n"
        "folder,favorite,type,name,notes,fields,reprompt,login_uri,login_username,"
        "login_password,login_totp\n"
        f",,login,Gandi,,,0,https://gandi.net,alice,{c},{totp}\n"
    )
    out, counts = redact(text)
    expected = text.replace(a, PW).replace(b, PW).replace(c, PW)
    assert out == expected.replace(totp, "[REDACTED:secret]")
    assert counts == {"password": 3, "secret": 1}


@pytest.mark.parametrize("sep", [";", "\t"])
def test_semicolon_and_tab_separated_rows_each_lose_their_password(sep: str) -> None:
    values = [password() for _ in range(4)]
    rows = "".join(f"site{i}{sep}user{i}{sep}{v}\n" for i, v in enumerate(values))
    text = f"site{sep}login{sep}mot de passe\n{rows}"
    out, counts = redact(text)
    expected = text
    for v in values:
        expected = expected.replace(v, PW)
    assert out == expected
    assert counts["password"] == 4


def test_a_csv_in_a_fence_ends_with_it() -> None:
    a = password()
    text = f"```csv\nuser,password\nbob,{a}\n```\nalice,{plain_password()}\n"
    out, _ = redact(text)
    assert out == text.replace(a, PW)


@pytest.mark.parametrize(
    "text",
    [
        # Documentation of a form or a schema: "password" is a row's value, not a header.
        "field,type,description\npassword,string,the user's password\nemail,string,contact\n",
        # Prose with commas.
        "The password, username and url fields are required.\nCall login, logout, refresh.\n",
        "Columns: name, password, created_at\nname,created_at\nalice,2024-05-01\n",
        # A header without an account column: values are judged, names and words stay.
        "password,strength\nhunter,weak\nargon2,hash\n",
    ],
)
def test_documentation_and_prose_with_commas_stay(text: str) -> None:
    assert redact(text) == (text, {})


# --- JSON fields --------------------------------------------------------------------------


def test_a_security_code_and_a_pin_as_json_fields() -> None:
    cvc, pin = str(secrets.randbelow(900) + 100), str(secrets.randbelow(9000) + 1000)
    text = f'{{"cvc": "{cvc}", "exp": "03/29"}}\n{{"pin": "{pin}", "card": "debit"}}\n'
    out, counts = redact(text)
    assert out == text.replace(f'"{cvc}"', '"[REDACTED:payment_card]"').replace(
        f'"{pin}"', '"[REDACTED:pin]"'
    )
    assert counts == {"payment_card": 1, "pin": 1}


# --- PuTTY .ppk ----------------------------------------------------------------------------


def test_a_ppk_file_loses_its_private_lines_only() -> None:
    public = base64.b64encode(secrets.token_bytes(51)).decode()
    private = [base64.b64encode(secrets.token_bytes(48)).decode() for _ in range(2)]
    mac = secrets.token_hex(32)
    text = (
        "PuTTY-User-Key-File-3: ssh-rsa\nEncryption: none\nComment: rsa-key-20240101\n"
        f"Public-Lines: 1\n{public}\nPrivate-Lines: 2\n{private[0]}\n{private[1]}\n"
        f"Private-MAC: {mac}\n"
    )
    out, counts = redact(text)
    assert out == text.replace(private[0], KEY).replace(private[1], KEY)
    assert counts == {"private_key": 1}


# --- wallet keys ----------------------------------------------------------------------------

_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def base58check(payload: bytes) -> str:
    raw = payload + hashlib.sha256(hashlib.sha256(payload).digest()).digest()[:4]
    number, out = int.from_bytes(raw, "big"), ""
    while number:
        number, digit = divmod(number, 58)
        out = _B58[digit] + out
    return "1" * (len(raw) - len(raw.lstrip(b"\0"))) + out


def wif(compressed: bool) -> str:
    return base58check(b"\x80" + secrets.token_bytes(32) + (b"\x01" if compressed else b""))


def xprv() -> str:
    payload = bytes.fromhex("0488ade4") + b"\0" * 9 + secrets.token_bytes(32) + b"\0"
    return base58check(payload + secrets.token_bytes(32))


@pytest.mark.parametrize("make", [lambda: wif(False), lambda: wif(True), xprv])
def test_wallet_keys_with_a_valid_checksum(make: object) -> None:
    key = make()  # type: ignore[operator]
    text = f"Paper wallet backup {key} (cold storage)\n"
    assert redact(text) == (text.replace(key, KEY), {"private_key": 1})


def test_a_look_alike_without_its_checksum_stays() -> None:
    key = wif(True)
    broken = key[:-1] + ("2" if key[-1] != "2" else "3")
    text = f"id {broken}\n"
    assert redact(text) == (text, {})


# --- Wi-Fi ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "template",
    [
        "## Home Wi-Fi\nSSID: Livebox-7F3A\nKey: {v}\n",
        "- Réseau : Freebox-AB12\n- Clé : {v}\n",
        "Guest Wi-Fi HomeNet-5G, key {v}\n",
        "Network name: HomeNet\nSecurity key: {v}\n",
    ],
)
def test_a_bare_key_under_a_wifi_network_is_its_password(template: str) -> None:
    value = password(12)
    text = template.format(v=value)
    assert redact(text) == (text.replace(value, PW), {"password": 1})


@pytest.mark.parametrize(
    "text",
    ["Key: value\n", "Network: 10.0.0.0/24\nKey: see the vault\n", "La clé : sous le pot\n"],
)
def test_a_bare_key_elsewhere_stays(text: str) -> None:
    assert redact(text) == (text, {})


# --- an e-mail and its password on two lines -----------------------------------------------


@pytest.mark.parametrize("template", ["Netflix\n{e}\n{v}\n", "- {e}\n- `{v}`\n", "{e}\r\n{v}"])
def test_a_password_alone_under_an_email_alone(template: str) -> None:
    value = "7" + password(13)  # not "Ab#…": a word and "#" or ":" reads as "Order#12"
    text = template.format(e="alice@example.com", v=value)
    assert redact(text) == (text.replace(value, PW), {"password": 1})


@pytest.mark.parametrize(
    "below", ["Thanks!", "https://example.com/a?b=1", "version-2.3.1-beta", "2024-05-01"]
)
def test_what_follows_an_email_otherwise_stays(below: str) -> None:
    text = f"alice@example.com\n{below}\n"
    assert redact(text) == (text, {})


# --- a short password that ends its line after its label -----------------------------------


def word_and_number() -> str:
    """How people pick passwords: a word and a few digits (hunter2, maple1987)."""
    return secrets.choice(["hunter", "maple", "soleil", "chaton"]) + str(secrets.randbelow(9999))


@pytest.mark.parametrize(
    "template",
    [
        "Mot de passe : {v}\n",
        "The NAS password is {v}.\n",
        "Password for the NAS: {v}\n",
        "Mot de passe (box Free) : `{v}`\n",
    ],
)
def test_a_word_and_a_number_ending_the_line_after_a_password_label(template: str) -> None:
    value = word_and_number()
    text = template.format(v=value)
    assert redact(text) == (text.replace(value, PW), {"password": 1})


@pytest.mark.parametrize(
    "text",
    [
        "Password: required\n",
        "The password is ReadWrite2Mode\n",
        "Mot de passe : 123\n",
        "the password: getpass()\n",
        "The password is 12+ chars.\n",
    ],
)
def test_words_names_and_rules_ending_the_line_stay(text: str) -> None:
    assert redact(text) == (text, {})


def test_an_access_code_stays_a_pin() -> None:
    pin = str(secrets.randbelow(9000) + 1000)
    assert redact(f"Code d'accès : {pin}\n") == ("Code d'accès : [REDACTED:pin]\n", {"pin": 1})


# --- "%" ----------------------------------------------------------------------------------


def test_a_password_starting_with_a_percent_sign() -> None:
    value = "%" + password(10) + "!"  # not "%…%": that is a variable
    text = f"DB_PASSWORD={value}\n"
    assert redact(text) == ("DB_PASSWORD=[REDACTED:password]\n", {"password": 1})


@pytest.mark.parametrize("value", ["%PASSWORD%", "%(password)s", "%s", "%{db_password}"])
def test_percent_variables_stay(value: str) -> None:
    text = f"DB_PASSWORD={value}\n"
    assert redact(text) == (text, {})


# --- what a review found: exports' odd records, and notes that are not passwords ------------


def test_a_record_whose_notes_run_over_lines_and_a_trailing_comma() -> None:
    a, b, c = plain_password(), plain_password() + "x", plain_password() + "y"
    text = (
        "Name,Login,Password,Notes\n"
        f'Bank,alice,{a},"line one\n\nline three"\n'
        f"Mail,bob,{b},x\n"
        "\n"
        "name,url,username,password\n"
        f"GitHub,https://github.com,alice,{c},\n"
    )
    out, counts = redact(text)
    expected = text.replace(f",{a},", f",{PW},").replace(f",{b},", f",{PW},")
    assert out == expected.replace(f",{c},", f",{PW},")
    assert counts == {"password": 3}


def test_a_camel_case_otp_column() -> None:
    otp = base64.b32encode(secrets.token_bytes(10)).decode()
    text = f"username,password,otpSecret\nbob,{password()},{otp}\n"
    out, counts = redact(text)
    assert out.endswith(",[REDACTED:secret]\n") and counts == {"password": 1, "secret": 1}


@pytest.mark.parametrize("otp", ["JBSWYQDPEHPKTPXP", "JBSW YQDP EHPK TPXP", "MFRGGZDFMZTWQ2LK"])
def test_an_otp_secret_with_or_without_a_digit(otp: str) -> None:
    # One random 16-character base32 secret in 28 has no digit from 2 to 7.
    text = f"username,password,totp\nbob,x,{otp}\n"
    assert redact(text) == (text.replace(otp, "[REDACTED:secret]"), {"secret": 1})


@pytest.mark.parametrize("note", ["see authenticator app", "SEE AUTHENTICATOR APP", "none"])
def test_a_note_in_an_otp_column_stays(note: str) -> None:
    text = f"username,password,totp\nbob,x,{note}\n"
    assert redact(text) == (text, {})


def test_notes_in_a_password_column_stay() -> None:
    text = (
        "name,username,password\n"
        "Netflix,famille@example.com,in Bitwarden\n"
        "Spotify,moi@example.com,same as Netflix\n"
        "Deezer,moi@example.com,expired\n"
        "Qobuz,moi@example.com,(see 1Password)\n"
    )
    assert redact(text) == (text, {})


@pytest.mark.parametrize(
    "text",
    [
        'printf("password: %-20s\\n", pw)\n',
        "Password: %.2f\n",
        "password = %ld\n",
        "password=%~1\n",
        "Network shortcuts\nKey: Ctrl+Alt+T\n",
        "## Network diagram\nKey: R1=router,S1=switch\n",
        "Réseaux sociaux\nClé : @alice_2024\n",
        "Music network\nKey: F#m7\n",
        "alice.martin@example.com\nRef:INV-2024-0042\n",
        "alice@example.com\nOrder#A1B2-C3D4\n",
        "alice@example.com\n@alice_2024\n",
        "## Passwords\n\nPython3\n",
        "Mot de passe : Ctrl+Alt+Del\n",
        "Mot de passe : §4.2\n",
        "| User | Secret |\n|---|---|\n| alice | yes2fa |\n",
        "| Alarm | Code | Meaning |\n|---|---|---|\n| Low battery | 1001 | replace |\n",
        "see http://localhost:8080#user@example.com\n",
        "openssl passwd -1 -in passwords.txt\n",
    ],
)
def test_what_reads_like_a_password_but_is_not(text: str) -> None:
    assert redact(text) == (text, {})


@pytest.mark.parametrize("value", ["YHs#DpxE0#xx", "x0#Xa9#xB0k2"])
def test_a_password_half_of_mask_characters_is_no_mask(value: str) -> None:
    # A mask is a run (XXXX-1234, ****); these are random passwords that happen to hold
    # x, # and 0 (one random 12-character password in about 15,000 did).
    for text in (f"username,password\nbob,{value}\n", f"DB_PASSWORD={value}\n"):
        assert redact(text) == (text.replace(value, PW), {"password": 1})


@pytest.mark.parametrize("mask", ["xxxx", "XXXX-XXXX-1234", "********", "0000", "sk-proj-XXXXXXXX"])
def test_masked_values_stay(mask: str) -> None:
    for text in (f"username,password\nbob,{mask}\n", f"DB_PASSWORD={mask}\n"):
        assert redact(text) == (text, {})


@pytest.mark.parametrize("line", ["D3D12_RENDER_PASS_FLAG_SUSPENDING_PASS = 0x2,", "PASS = 0x4"])
def test_a_short_flag_value_stays(line: str) -> None:
    assert redact(line + "\n") == (line + "\n", {})
