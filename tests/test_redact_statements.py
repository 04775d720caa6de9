"""Passwords in SQL and MongoDB statements, server directives, command lines of Windows,
broker, tunnel and Wi-Fi tools, Kubernetes environment entries, URLs with a '#' in the
password, and labels as people abbreviate them. And the prose about them that must stay.

Secrets are generated at test time (no credential-shaped literal is committed).
"""

from __future__ import annotations

import secrets
import string

import pytest

from retriever.redact import redact

PW = "[REDACTED:password]"


def password(n: int = 12) -> str:
    """Letters and digits and a symbol that no command line or quote treats specially."""
    pool = string.ascii_letters + string.digits
    while True:
        s = "".join(secrets.choice(pool) for _ in range(n - 1)) + secrets.choice("!#%^+")
        if all(any(c in g for c in s) for g in (string.ascii_lowercase, string.digits)):
            return s


def word_and_number() -> str:
    return secrets.choice(["bonjour", "gandalf", "sunshine", "nantes"]) + str(
        1000 + secrets.randbelow(9000)
    )


def check(template: str, kind: str = "password", value: str | None = None) -> None:
    value = value or password()
    text = template.format(v=value)
    assert redact(text) == (text.replace(value, f"[REDACTED:{kind}]"), {kind: 1})


@pytest.mark.parametrize(
    "template",
    [
        "ALTER USER postgres PASSWORD '{v}';",
        "CREATE ROLE reporting LOGIN PASSWORD '{v}' VALID UNTIL 'infinity';",
        "ALTER LOGIN sa WITH PASSWORD = N'{v}';",
        "SET PASSWORD FOR 'bob'@'localhost' = PASSWORD('{v}');",
        'db.createUser({{user: "app", pwd: "{v}", roles: ["readWrite"]}})',
        'db.changeUserPassword("app", "{v}")',
    ],
)
def test_sql_and_mongodb_statements(template: str) -> None:
    check(template, value=word_and_number())


@pytest.mark.parametrize(
    "template",
    [
        "requirepass {v}",
        "  masterauth {v}\n",
        "    command: redis-server --requirepass {v}",
        '    command: ["redis-server", "--requirepass", "{v}"]',
        "plink -ssh root@10.0.0.5 -pw {v}",
        "net use Z: \\\\nas\\share {v} /user:bob",
        "az login -u bob@contoso.com -p {v}",
        "lftp -u bob,{v} ftp.example.com",
        "mosquitto_pub -h broker -u bob -P {v} -t x -m y",
        "mosquitto_passwd -b /etc/mosquitto/passwd bob {v}",
        "rabbitmqctl add_user admin {v}",
        "influx -username admin -password {v}",
        "pihole -a -p {v}",
        "wpa_passphrase HomeNet {v}",
        "nmcli dev wifi connect HomeNet password {v}",
        "echo {v} | sudo -S apt update",
        "openssl passwd -1 {v}",
        "x11vnc -storepasswd {v} ~/.vnc/passwd",
    ],
)
def test_directives_and_command_lines(template: str) -> None:
    check(template)


def test_minio_and_ngrok_secrets() -> None:
    secret = "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(40))
    check("mc alias set minio http://192.168.1.10:9000 minioadmin {v}", value=secret)
    check("ngrok config add-authtoken {v}", kind="api_token", value=secret)


@pytest.mark.parametrize(
    "text",
    [
        "The requirepass directive sets a password.",
        "requirepass ${REDIS_PASSWORD}",
        "ALTER USER bob PASSWORD EXPIRE;",
        "SET PASSWORD = PASSWORD(@newpw);",
        "Use net use to map drives.",
        "nmcli connection show",
        "openssl passwd -help",
    ],
)
def test_statements_and_prose_without_a_password_stay(text: str) -> None:
    assert redact(text) == (text, {})


@pytest.mark.parametrize(
    "template",
    [
        "htpasswd -b -c /etc/nginx/.htpasswd admin {v}",
        "sudo htpasswd -c -b /etc/apache2/.htpasswd bob {v}",
        "htpasswd -bB -C 10 /etc/nginx/.htpasswd admin {v}",
        "htpasswd -B -b -r 12 .htpasswd admin {v}",
        "htpasswd -nb admin {v}",
        "htpasswd -n -b admin {v} > .htpasswd",
        "htpasswd -nb admin {v} then paste the line",  # with -n the user comes first
        "net use Z: \\\\nas\\photos /user:jdupont {v}",
        "net use \\\\nas\\photos /user:NAS\\jdupont {v} /persistent:yes",
        "NET USE * \\\\srv\\share /USER:bob {v}",
    ],
)
def test_htpasswd_flag_groups_and_net_use_after_the_user(template: str) -> None:
    """htpasswd's flags in several groups (b in one; no file with n), and net use's
    password after "/user:X" as well as before it."""
    check(template)


@pytest.mark.parametrize(
    "text",
    [
        "htpasswd -c /etc/nginx/.htpasswd admin",  # no -b: htpasswd asks
        "htpasswd -B -c /etc/nginx/.htpasswd admin",
        "htpasswd -c -B /etc/nginx/.htpasswd admin note",
        "htpasswd -nB admin",
        "htpasswd -D /etc/nginx/.htpasswd admin",
        "net use Z: \\\\nas\\photos /user:jdupont *",  # "*" asks
        "net use Z: \\\\nas\\photos /user:jdupont /persistent:yes",
        "net use Z: \\\\nas\\photos /user:jdupont /p:no",  # a switch, not a password
        "Run net use Z: \\\\nas\\photos /user:jdupont and type the password",
        "net use Z: \\\\server\\share /user:DOMAIN\\username password",
        # Inline code in a note: the backtick ends the command, and a placeholder stays.
        "`htpasswd -b -c file user PASSWORD` creates the file",
        "Run `htpasswd -b /etc/nginx/.htpasswd admin <password>` first",
    ],
)
def test_htpasswd_and_net_use_without_a_password_stay(text: str) -> None:
    assert redact(text) == (text, {})


@pytest.mark.parametrize(
    "template",
    [
        "Run `mysql -uroot -p{v}` then",
        "`htpasswd -b -c /etc/nginx/.htpasswd admin {v}` once",
        "`sshpass -p {v} ssh pi@nas`",
    ],
)
def test_a_command_in_inline_code_ends_at_its_backtick(template: str) -> None:
    """The password goes, the backtick that closes the inline code stays."""
    check(template)


@pytest.mark.parametrize(
    "text",
    [
        "password = '%s:%s' % (user, pw)",
        "password = b'%s:%s' % (user, pw)",
        'auth = "{}:{}".format(user, pw)',
        "secret = '%(user)s@%(host)s' % cfg",
        'PASSWORD = "{0}-{1}".format(a, b)',
    ],
)
def test_a_format_string_of_fields_alone_is_no_password(text: str) -> None:
    assert redact(text) == (text, {})


def tunnel_token() -> str:
    """A Cloudflare Tunnel token: base64 of its JSON ('{"a":"…","t":"…","s":"…"}')."""
    body = "".join(secrets.choice(string.ascii_letters + string.digits + "+/") for _ in range(180))
    return "eyJhIjoi" + body


@pytest.mark.parametrize(
    "template",
    [
        "sudo cloudflared service install {v}",
        "cloudflared.exe service install {v}",
        "cloudflared tunnel run --token {v}",
        "cloudflared tunnel --no-autoupdate run --token={v}",
        "docker run cloudflare/cloudflared:latest tunnel --no-autoupdate run --token {v}",
        "/usr/local/bin/cloudflared service install '{v}'",
    ],
)
def test_a_cloudflare_tunnel_token(template: str) -> None:
    check(template, kind="api_token", value=tunnel_token())


@pytest.mark.parametrize(
    "text",
    [
        "cloudflared service install",
        "cloudflared tunnel run mytunnel",
        "cloudflared service install homelab-tunnel",  # a tunnel's name, not its token
        "cloudflared tunnel run --token $TUNNEL_TOKEN",
        "cloudflared tunnel run --token <token>",
        "Install cloudflared, then paste the token from the dashboard.",
    ],
)
def test_cloudflared_without_a_token_stays(text: str) -> None:
    assert redact(text) == (text, {})


@pytest.mark.parametrize("prefix", ["b", "r", "u", "rb", "Br", "f"])
@pytest.mark.parametrize("quote", ["'", '"'])
def test_a_python_string_prefix_before_a_secret(prefix: str, quote: str) -> None:
    """``app.secret_key = b'…'`` is judged as the plain string is."""
    hexed = "".join(secrets.choice("0123456789abcdef") for _ in range(32))
    check(f"app.secret_key = {prefix}{quote}{{v}}{quote}", kind="secret", value=hexed)
    check(f"DB_PASSWORD = {prefix}{quote}{{v}}{quote}")


@pytest.mark.parametrize(
    "text",
    [
        "password = f'{prefix}{user.id}'",  # an f-string that builds the value is code
        'password = f"pw-{os.getpid()}"',
        "secret_key = b'changeme'",
        "key = b'abc'",
        "password = b''",
        "token = rb'${TOKEN}'",
    ],
)
def test_a_prefixed_string_that_is_code_or_a_placeholder_stays(text: str) -> None:
    assert redact(text) == (text, {})


@pytest.mark.parametrize("quote", ['"', ""])
def test_a_kubernetes_environment_entry(quote: str) -> None:
    check("env:\n  - name: DB_PASSWORD\n    value: " + quote + "{v}" + quote + "\n")


@pytest.mark.parametrize(
    "text",
    [
        "env:\n  - name: DB_PASSWORD\n    valueFrom:\n      secretKeyRef:\n        name: db\n",
        "- name: DB_USER\n  value: app\n",
        '- name: PASSWORD_MIN_LENGTH\n  value: "12"\n',
        '- name: DB_PASSWORD\n  value: "${DB_PASSWORD}"\n',
    ],
)
def test_other_environment_entries_stay(text: str) -> None:
    assert redact(text) == (text, {})


@pytest.mark.parametrize("scheme", ["postgres", "mysql", "clickhouse"])
def test_a_hash_sign_in_a_url_password(scheme: str) -> None:
    value = password(6) + "#" + password(6)
    check(scheme + "://app:{v}@db:5432/app", kind="url_password", value=value)


def test_a_url_fragment_stays() -> None:
    text = "see https://example.com:8080/#a@b and https://x.org/#:~:text=a@b\n"
    assert redact(text) == (text, {})


@pytest.mark.parametrize(
    "template",
    [
        "pswd: {v}",
        "P/W: {v}",
        "mot-de-passe : {v}",
        "motdepasse={v}",
        "### NAS password\n{v}\n",
        "Clé Wi-Fi : {v}",
    ],
)
def test_abbreviated_labels_and_a_heading(template: str) -> None:
    check(template, value=word_and_number())


def test_words_run_together_with_digits() -> None:
    value = "mimi" + str(1000 + secrets.randbelow(9000)) + "chat"
    check("Clé Wi-Fi : {v}", value=value)


@pytest.mark.parametrize(
    "text",
    ["The P/W ratio is 3.", "p/w: 5", "# My passwords\nSee below\n", "## Password\nSee it\n"],
)
def test_abbreviations_and_headings_without_a_password_stay(text: str) -> None:
    assert redact(text) == (text, {})


# --- web servers, HAProxy, Postfix ----------------------------------------------------------


def token(n: int = 32) -> str:
    while True:
        s = "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(n))
        if all(any(c in g for c in s) for g in (string.ascii_lowercase, string.ascii_uppercase)):
            return s


@pytest.mark.parametrize(
    ("template", "kind"),
    [
        ("proxy_set_header X-Api-Key {v};", "secret"),
        ('set $api_key "{v}";', "secret"),
        ('RequestHeader set X-API-Key "{v}"', "secret"),
        ("fastcgi_param DB_PASSWORD {v};", "password"),
        ("SetEnv DB_PASSWORD {v}", "password"),
        ("userlist admins\n  user admin insecure-password {v}\n", "password"),
        ("listen stats\n  stats auth admin:{v}\n", "password"),
        ("[smtp.gmail.com]:587    bob@gmail.com:{v}\n", "password"),
    ],
)
def test_server_directives(template: str, kind: str) -> None:
    check(template, kind=kind, value=token())


@pytest.mark.parametrize(
    "text",
    [
        "proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;",
        "fastcgi_param SCRIPT_FILENAME $document_root$fastcgi_script_name;",
        "set $upstream_key http://backend;",
    ],
)
def test_server_directives_without_a_secret_stay(text: str) -> None:
    assert redact(text) == (text, {})


# --- vendor tokens, and hex after a named token ----------------------------------------------


def _hex(n: int) -> str:
    return secrets.token_hex(n // 2)


@pytest.mark.parametrize(
    "make",
    [
        lambda: "sk_" + _hex(48),  # ElevenLabs
        lambda: "re_" + token(8) + "_" + token(24),  # Resend
        lambda: "squ_" + _hex(40),  # SonarQube
        lambda: "sgp_" + _hex(40),  # Sourcegraph
        lambda: "y0_" + token(56),  # Yandex
        lambda: "vk1.a." + token(80),  # VK
        lambda: "act." + token(60),  # TikTok
        lambda: "cio" + token(32),  # crates.io
        lambda: (
            "oauth:" + "".join(secrets.choice(string.ascii_lowercase) for _ in range(26)) + "a1b2"
        ),
        lambda: "s." + token(24),  # HashiCorp Vault, before 1.10
        lambda: "AAAA" + token(7) + ":APA91b" + token(134),  # Firebase Cloud Messaging
    ],
)
def test_more_vendor_tokens(make: object) -> None:
    value = make()  # type: ignore[operator]
    check("Here is the new Vault one: {v} - rotate in March", kind="api_token", value=value)


@pytest.mark.parametrize("template", ["Datadog API key {v}", "Gitea access token {v}"])
def test_hex_right_after_a_named_token(template: str) -> None:
    check(template, kind="secret", value=_hex(40))


@pytest.mark.parametrize(
    "text",
    [
        "See docs s.Some.thing and s.abcdefghijklmnopqrstuvwx here.",
        "cio is the chief information officer; oauth:token flows",
        "re_search_engine_optimization_tips",
        "The API key sha256 is e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    ],
)
def test_lookalikes_stay(text: str) -> None:
    assert redact(text) == (text, {})


# --- PEM with a word processor's dashes, tables -----------------------------------------------


def test_a_private_key_block_whose_dashes_became_en_and_em_dashes() -> None:
    import base64

    body = [base64.b64encode(secrets.token_bytes(48)).decode() for _ in range(2)]
    label = "RSA PRIV" + "ATE KEY"
    text = f"\u2014\u2013BEGIN {label}\u2014\u2013\n{body[0]}\n{body[1]}\n\u2014\u2013END {label}\u2014\u2013\n"
    assert redact(text) == ("[REDACTED:private_key]\n\n\n\n", {"private_key": 1})


@pytest.mark.parametrize(
    ("header", "value", "kind"),
    [
        ("| Site | Identifiant | Mot de passe |", "x | {v}", "password"),
        ("| Account | Secret |", "{v}", "password"),
    ],
)
def test_table_columns(header: str, value: str, kind: str) -> None:
    secret = str(1000 + secrets.randbelow(9000)) if kind == "pin" else password()
    cells = header.count("|") - 1
    row = "| a | " + value.format(v=secret) + " |" if cells > 1 else "| " + value + " |"
    text = f"{header}\n|{'---|' * cells}\n{row}\n"
    assert redact(text) == (text.replace(secret, f"[REDACTED:{kind}]"), {kind: 1})


@pytest.mark.parametrize(
    "text",
    [
        "| Language | Code |\n|---|---|\n| French | 1036 |\n",
        "| Error | Code |\n|---|---|\n| Timeout | 4081 |\n",
        "| Site | Password |\n|---|---|\n| NAS | required |\n",
    ],
)
def test_tables_without_a_secret_stay(text: str) -> None:
    assert redact(text) == (text, {})


@pytest.mark.parametrize(
    ("template", "kind"),
    [
        ("openssl passwd -6 -salt xyz {v}", "password"),
        ('proxy_set_header\tX-Api-Key\t"{v}";', "secret"),
        ("proxy_set_header x-api-key {v};", "secret"),
        ("setenv DB_PASSWORD {v}", "password"),
        ("REQUIREPASS {v}", "password"),
        ("- requirepass {v}", "password"),
        ("> requirepass {v}", "password"),
        ('CONFIG SET requirepass "{v}"', "password"),
    ],
)
def test_variants_of_the_directives(template: str, kind: str) -> None:
    check(template, kind=kind, value=token())


@pytest.mark.parametrize("dash", ["\u2014", "\u2212" * 5])
def test_a_private_key_block_with_one_em_dash_or_minus_signs(dash: str) -> None:
    import base64

    body = base64.b64encode(secrets.token_bytes(48)).decode()
    label = "RSA PRIV" + "ATE KEY"
    text = f"{dash}BEGIN {label}{dash}\n{body}\n{dash}END {label}{dash}\n"
    assert redact(text) == ("[REDACTED:private_key]\n\n\n", {"private_key": 1})


# --- Cisco IOS, msmtp -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "template",
    [
        "username admin privilege 15 password 0 {v}",
        "enable password 7 {v}",
        "line vty 0 4\n password 7 {v}\n",
        "snmp-server community {v} RO",
        "crypto isakmp key {v} address 0.0.0.0",
        "account gmail\nhost smtp.gmail.com\nuser bob@gmail.com\npassword {v}\n",
    ],
)
def test_cisco_and_msmtp_configurations(template: str) -> None:
    check(template, value=token(16))


@pytest.mark.parametrize(
    "text",
    [
        "username admin secret 5 $1$mERr$hx5rVt7rPNoS4wqbXKX7m0",  # a hash
        "user guide\npassword manager\n",
        "Change your password regularly\npassword reset\n",
        "user bob\npassword ${PASS}\n",
    ],
)
def test_hashes_and_prose_under_a_user_line_stay(text: str) -> None:
    assert redact(text) == (text, {})


# --- seed phrases under a wallet's name or a count of words ----------------------------------


def seed_words(n: int = 12) -> str:
    from mnemonic import Mnemonic

    return Mnemonic("english").generate(128 if n == 12 else 256)


@pytest.mark.parametrize(
    "template", ["Metamask: {v}\n", "12 mots : {v}\n", "Ledger 24 words:\n{v}\n", "Trezor:\n{v}\n"]
)
def test_a_seed_under_a_wallet_or_a_count_of_words(template: str) -> None:
    words = seed_words(24 if "24" in template else 12)
    text = template.format(v=words)
    assert redact(text) == (text.replace(words, "[REDACTED:seed_phrase]"), {"seed_phrase": 1})


@pytest.mark.parametrize(
    "text",
    [
        "The ledger words are in the safe.\n",
        "Ledger: balance 1200 EUR\n",
        "12 words: that is how long the summary should be, roughly\n",
        "Phantom: the opera by Andrew Lloyd Webber\n",
    ],
)
def test_a_wallet_name_or_a_count_of_words_without_a_seed_stays(text: str) -> None:
    assert redact(text) == (text, {})


@pytest.mark.parametrize(
    "template",
    [
        "plink -pw {v} host",
        "plink.exe -ssh -pw {v} admin@10.0.0.2",
        "pscp -pw {v} file.txt user@host:/tmp",
        "sshpass -p {v} ssh root@nas",
        "mysql -u root -p{v} db",
        "redis-cli -a {v} ping",
        "docker login -u bob -p {v} registry.example.com",
        "smbclient //nas/share -U bob%{v}",
        "7z x backup.7z -p{v}",
    ],
)
@pytest.mark.parametrize("value", ["Tr0ub4dor&3", "P&ssw0rd", "a&b9Xy!2&c"])
def test_an_ampersand_inside_a_command_line_password(template: str, value: str) -> None:
    check(template, value=value)


@pytest.mark.parametrize(
    "text",
    [
        "plink -pw $PW host && echo done",
        "sshpass -p $PASS ssh host && ls",
        "mysql -u root -p db && echo ok",
        "redis-cli -a $REDIS_PW ping & wait",
        "plink -batch host & disown",
    ],
)
def test_a_shell_ampersand_after_a_command_stays(text: str) -> None:
    assert redact(text) == (text, {})
