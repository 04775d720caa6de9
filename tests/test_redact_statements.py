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
        s = "".join(secrets.choice(pool) for _ in range(n - 1)) + secrets.choice("!#@%^+")
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
