"""Passwords given to commands on their command line: ``mysql -pSECRET``, ``sshpass -p x``,
``redis-cli -a x``, ``docker login -p x``, ``sqlcmd -P x``, ``IDENTIFIED BY 'x'``,
``ConvertTo-SecureString 'x' -AsPlainText``, ``echo x | docker login --password-stdin``,
Dockerfile ``ENV KEY value`` and fish ``set -gx KEY value``.

Each rule runs only on the lines holding its flag or keyword (:meth:`Note.lines`: " -p",
" -a", "identified"...), so a note without any costs a few substring searches.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from retriever.redact.assign import classify_key
from retriever.redact.core import MARK, Edit, Note, keep_first, lines_above, marker
from retriever.redact.values import high_entropy, is_placeholder, is_wordy, looks_random

# A value's characters: an "&" between two of them is one too ("plink -pw Tr0ub4dor&3"),
# not a shell's "&&", "&>" or a lone "& " that sends the command to the background. A
# backtick ends it: the command is inline code in a note ("`htpasswd -b f user PASSWORD`").
_RUN = r"(?:[^\s'\"|;&<>`]|&(?=[^\s'\"|;&<>`]))"
_VALUE = rf"(?P<v>'[^'\n]+'|\"[^\"\n]+\"|{_RUN}+)"
_QUOTED = r"(?P<v>'[^'\n]+'|\"[^\"\n]+\")"
_WORD = rf"(?P<v>'[^'\s]+'|\"[^\"\s]+\"|{_RUN}+)"  # one word: "hello world" is a message


@dataclass(frozen=True, slots=True)
class _Rule:
    words: tuple[str, ...]  # lowercase: the rule runs only on lines holding one of them
    regex: re.Pattern[str]
    kind: str = "password"
    words_ok: bool = True  # False: a value made of words is prose ("identified by 'Name'")


def _rule(
    words: tuple[str, ...],
    pattern: str,
    kind: str = "password",
    flags: int = 0,
    *,
    words_ok: bool = True,
) -> _Rule:
    return _Rule(words, re.compile(pattern, flags), kind, words_ok)


_MYSQL = r"(?:mysql(?:dump|admin|import|sh|check)?|mariadb(?:-dump|-admin)?)"
_LOGIN = r"(?:docker|podman|nerdctl|buildah|skopeo|oras|helm[ \t]+registry)[ \t]+login"
_CMD = r"(?<![\w/.-])"  # a command word, not part of a path (/etc/mysql) or a longer name
# From the command to its flag: bounded (a line repeating the command would make the lazy
# scan quadratic) and within one command (not past a pipe, `;` or `&&`).
_GAP = r"(?=[ \t])[^\n|;&]{0,200}?[ \t]"

# htpasswd's flags, in one group or several ("-b -c", "-bB -C 10": bcrypt's cost, or -r's
# rounds, after its letter); b in one of them says the password is on the command line.
_FLAG = r"-[a-zA-Z]++(?:(?<=[Cr])[ \t]+\d+)?[ \t]+"
_FLAGS = rf"(?:{_FLAG})++"
_HTPASSWD_B = rf"(?=(?:{_FLAG})*-[a-zA-Z]*b)"
_HTPASSWD_N = rf"(?:{_FLAG})*-[a-zA-Z]*n"  # -n: the result on stdout, no file named

_RULES: tuple[_Rule, ...] = (
    # -pSECRET, attached (a bare -p prompts; -P is the port).
    _rule(
        (" -p",),
        rf"{_CMD}{_MYSQL}{_GAP}-p(?P<v>[^\s'\"|;&<>-]{_RUN}*|'[^'\n]+'|\"[^\"\n]+\")",
    ),
    _rule((" -p",), rf"{_CMD}sshpass{_GAP}-p[ \t]*{_VALUE}"),
    _rule((" -a", "--pass"), rf"{_CMD}redis-cli{_GAP}(?:-a|--pass)[ \t]+{_VALUE}"),
    _rule((" -p",), rf"{_CMD}{_LOGIN}{_GAP}-p[ \t]+{_VALUE}"),
    _rule((" -p",), rf"{_CMD}mongo(?:sh|dump|restore|import|export)?{_GAP}-p[ \t]+{_VALUE}"),
    _rule((" -p",), rf"{_CMD}(?:sqlcmd|bcp|osql){_GAP}-P[ \t]*{_VALUE}"),
    _rule((" -n",), rf"{_CMD}ssh-keygen{_GAP}-N[ \t]*{_VALUE}"),
    _rule(("pass:",), rf"(?<![\w-])-pass(?:in|out)?[ \t]+pass:{_VALUE}"),  # openssl
    _rule(  # quoted: never "identified by its …" in prose
        ("identified",),
        rf"(?<!\w)identified[ \t]+(?:with[ \t]+\w+[ \t]+)?by[ \t]+{_QUOTED}",
        flags=re.IGNORECASE,
        words_ok=False,
    ),
    _rule(  # Oracle's bare word, only in a CREATE/ALTER USER statement ("… identified by X.")
        ("identified",),
        r"(?<!\w)(?:create|alter)[ \t]+(?:user|role)[ \t][^\n;]{0,200}?identified[ \t]+by[ \t]+"
        r"(?P<v>[^\s'\";]+)(?=[ \t]*(?:;|\r?$))",
        flags=re.IGNORECASE | re.MULTILINE,
        words_ok=False,
    ),
    _rule(
        ("securestring",),
        rf"ConvertTo-SecureString[ \t]+(?:-String[ \t]+)?{_VALUE}[ \t]+-AsPlainText",
        flags=re.IGNORECASE,
    ),
    _rule(
        ("password-stdin",),
        rf"{_CMD}(?:echo|printf)[ \t]+(?:-n[ \t]+)?{_VALUE}[ \t]*\|[^\n]{{0,200}}--password-stdin",
    ),
    # Remote desktop, SMB, LDAP, Java keystores, archives, IPMI, Oracle, account tools.
    _rule(("/p:",), rf"{_CMD}[wx]freerdp3?{_GAP}/p:{_VALUE}"),
    _rule(
        (" -u", "--user"),
        rf"{_CMD}(?:smbclient|rpcclient|smbmap|smbcacls|crackmapexec|netexec|nxc)"
        rf"{_GAP}(?:-U|--user(?:name)?)[ \t=]*['\"]?[^\s%'\"]{{1,64}}%(?P<v>{_RUN}+)",
    ),
    _rule(
        (" -w",),
        rf"{_CMD}ldap(?:search|modify|add|delete|passwd|whoami|compare|modrdn|exop|url)"
        rf"{_GAP}-w[ \t]+{_VALUE}",
    ),
    _rule(
        ("storepass", "keypass"),
        rf"{_CMD}keytool{_GAP}-(?:src|dest)?(?:store|key)pass[ \t]+{_VALUE}",
    ),
    _rule(
        (" -p",),
        rf"{_CMD}7z[az]?{_GAP}-p(?P<v>[^\s'\"|;&<>-]{_RUN}*|'[^'\n]+'|\"[^\"\n]+\")",
    ),
    _rule((" -p", "--password"), rf"{_CMD}(?:un)?zip{_GAP}(?:-P|--password)[ \t]+{_VALUE}"),
    _rule((" -p",), rf"{_CMD}ipmitool{_GAP}-P[ \t]+{_VALUE}"),
    _rule((" -k",), rf"{_CMD}openssl[ \t]+enc{_GAP}-k[ \t]+{_VALUE}"),
    _rule(("--body",), rf"{_CMD}gh[ \t]+secret[ \t]+set{_GAP}(?:-b|--body)[ \t=]*{_VALUE}"),
    # htpasswd -b: the file, the user, the password; with -n no file.
    _rule(
        ("htpasswd",),
        rf"{_CMD}htpasswd[ \t]+{_HTPASSWD_B}(?!{_HTPASSWD_N}){_FLAGS}\S+[ \t]+\S+[ \t]+{_VALUE}",
    ),
    _rule(
        ("htpasswd",),
        rf"{_CMD}htpasswd[ \t]+{_HTPASSWD_B}(?={_HTPASSWD_N}){_FLAGS}\S+[ \t]+{_VALUE}",
    ),
    _rule(
        ("net user",),
        rf"{_CMD}net[ \t]+user[ \t]+\S+[ \t]+{_VALUE}[ \t]+/(?:add|domain)",
        flags=re.IGNORECASE,
    ),
    _rule(
        ("chpasswd",),
        rf"{_CMD}(?:echo|printf)[ \t]+(?:-[ne][ \t]+)?['\"]?[\w.@-]{{1,64}}:"
        rf"(?P<v>[^\s'\"|]+)['\"]?[ \t]*\|[^\n]{{0,100}}chpasswd",
    ),
    _rule(  # Oracle's user/password@database
        ("sqlplus", "rman", "expdp", "impdp", "sqlldr"),
        rf"{_CMD}(?:sqlplus|rman|expdp|impdp|sqlldr)(?:[ \t]+-[A-Za-z]+)*[ \t]+['\"]?[\w$#]{{1,64}}/"
        r"(?P<v>[^\s@/'\"]+)(?=@)",  # "sqlplus docs/manual" is a path
        flags=re.MULTILINE,
    ),
    _rule(("jdbc:oracle",), r"jdbc:oracle:(?:thin|oci8?):[\w$#]{1,64}/(?P<v>[^\s@/'\"]+)@"),
    # SQL: a role's password in CREATE/ALTER USER|ROLE|LOGIN, SET PASSWORD; MongoDB's.
    _rule(
        ("create user", "create role", "create login", "alter user", "alter role", "alter login"),
        r"(?<!\w)(?:create|alter)[ \t]+(?:user|role|login)[ \t][^\n;]{0,200}?(?<!\w)password"
        rf"[ \t]*=?[ \t]*N?{_QUOTED}",
        flags=re.IGNORECASE,
    ),
    _rule(
        ("set password",),
        r"(?<!\w)set[ \t]+password(?:[ \t]+for[ \t]+[^\n=;]{1,100}?)?[ \t]*=[ \t]*"
        rf"(?:password[ \t]*\([ \t]*)?{_QUOTED}",
        flags=re.IGNORECASE,
    ),
    _rule(
        ("pwd",), rf"(?:create|update)User\([^\n]{{0,200}}?(?<!\w)pwd[\"']?[ \t]*:[ \t]*{_QUOTED}"
    ),
    _rule(
        ("changeuserpassword",),
        rf"changeUserPassword\([ \t]*(?:'[^'\n]{{1,64}}'|\"[^\"\n]{{1,64}}\")[ \t]*,[ \t]*{_QUOTED}",
    ),
    # Redis's password directives: a redis.conf line (in a list or a quote too), a flag (in
    # a compose list too), CONFIG SET.
    _rule(
        ("requirepass", "masterauth"),
        r"^[ \t]*(?:[-*>][ \t]+)?(?:requirepass|masterauth)[ \t]+"
        r"(?P<v>'[^'\n]+'|\"[^\"\n]+\"|\S+)[ \t]*\r?$",
        flags=re.MULTILINE | re.IGNORECASE,
    ),
    _rule(
        ("requirepass", "masterauth"),
        r"(?:--|config[ \t]+set[ \t]+)(?:requirepass|masterauth)(?:[ \t]+|=|[\"'][ \t]*,[ \t]*)"
        r"(?P<v>'[^'\n]+'|\"[^\"\n]+\"|[^\s'\"|;&<>\]]+)",
        flags=re.IGNORECASE,
    ),
    # Cisco IOS: a plain (type 0) or reversible (type 7) password or key, an SNMP
    # community, an IKE pre-shared key. Types 5, 8 and 9 are hashes and stay.
    _rule(
        ("password 0", "password 7", "secret 0", "secret 7", "key 0", "key 7"),
        r"^[ \t]*(?:username[ \t]+\S+(?:[ \t]+privilege[ \t]+\d+)?[ \t]+(?:password|secret)"
        r"|enable[ \t]+password|password|key)[ \t]+[07][ \t]+(?P<v>\S+)[ \t]*\r?$",
        flags=re.MULTILINE,
    ),
    _rule(
        ("snmp-server community",),
        r"^[ \t]*snmp-server[ \t]+community[ \t]+(?P<v>\S+)(?=[ \t]+(?:RO|RW|ro|rw|view)\b|[ \t]*\r?$)",
        flags=re.MULTILINE,
    ),
    _rule(
        ("isakmp key",), r"crypto[ \t]+isakmp[ \t]+key[ \t]+(?:[06][ \t]+)?(?P<v>\S+)[ \t]+address"
    ),
    # HAProxy's user lists and stats page; Postfix's sasl_passwd ("[host]:port user:pw").
    _rule(("insecure-password",), r"(?<![\w-])insecure-password[ \t]+" + _VALUE),
    _rule(("stats auth",), r"(?<![\w-])stats[ \t]+auth[ \t]+[^\s:]{1,64}:" + _VALUE),
    _rule(
        ("]:",),
        r"^[ \t]*\[[\w.-]{1,253}\]:\d{1,5}[ \t]+[^\s:]{1,128}:(?P<v>\S+)[ \t]*\r?$",
        flags=re.MULTILINE,
    ),
    # Windows and embedded-device tools, message brokers, tunnels, Wi-Fi.
    _rule((" -pw",), rf"{_CMD}(?:plink|pscp|psftp)(?:\.exe)?{_GAP}-pw[ \t]+{_VALUE}"),
    _rule(
        ("net use",),
        r"(?<![\w-])net[ \t]+use[ \t]+(?:[A-Za-z]:|\*)[ \t]+\\\\\S+[ \t]+"
        r"(?P<v>[^\s/'\"|;&<>]\S*|'[^'\n]+'|\"[^\"\n]+\")[ \t]+/user:",
        flags=re.IGNORECASE,
    ),
    _rule(  # the password after the user ("/user:bob X"); not a switch ("/persistent:no")
        ("net use",),
        r"(?<![\w-])net[ \t]+use[ \t]+(?:(?:[A-Za-z]:|\*)[ \t]+)?\\\\\S+[ \t]+/user:\S+[ \t]+"
        r"(?P<v>[^\s/'\"|;&<>]\S*|'[^'\n]+'|\"[^\"\n]+\")",
        flags=re.IGNORECASE,
        words_ok=False,  # "net use … /user:bob and type the password" is a sentence
    ),
    _rule(("az login",), rf"{_CMD}az[ \t]+login{_GAP}(?:-p|--password)[ \t=]+{_VALUE}"),
    _rule(
        ("alias set", "host add"),
        rf"{_CMD}mc[ \t]+(?:alias[ \t]+set|config[ \t]+host[ \t]+add)[ \t]+\S+[ \t]+https?://\S+"
        rf"[ \t]+\S+[ \t]+{_VALUE}",
    ),
    _rule(("lftp",), rf"{_CMD}lftp{_GAP}-u[ \t]+['\"]?[^\s,'\"]{{1,64}},{_VALUE}"),
    _rule(
        ("mosquitto_", "rdesktop", "racadm"),
        rf"{_CMD}(?:mosquitto_(?:pub|sub|rr)|rdesktop|racadm){_GAP}-[Pp][ \t]+{_VALUE}",
    ),
    _rule(
        ("mosquitto_passwd",), rf"{_CMD}mosquitto_passwd[ \t]+-b[ \t]+\S+[ \t]+\S+[ \t]+{_VALUE}"
    ),
    _rule(
        ("rabbitmqctl",),
        rf"{_CMD}rabbitmqctl[ \t]+(?:add_user|change_password)[ \t]+\S+[ \t]+{_VALUE}",
    ),
    _rule(("influx",), rf"{_CMD}influx{_GAP}-password[ \t]+{_VALUE}"),
    _rule(("pihole",), rf"{_CMD}pihole[ \t]+-a[ \t]+-p[ \t]+{_VALUE}"),
    # Cloudflare Tunnel's token (base64 of its JSON, "eyJ…"), to install the service or run
    # the tunnel; in a container too ("cloudflare/cloudflared:latest tunnel run --token").
    _rule(
        ("cloudflared",),
        r"(?<![\w.-])cloudflared(?:\.exe)?(?::[\w.-]+)?[ \t](?:[^\n|;&]{0,200}?[ \t])??"
        r"(?:service[ \t]+install[ \t]+|--token(?:[ \t]+|=))['\"]?(?P<v>eyJ[A-Za-z0-9+/=_-]{40,})",
        kind="api_token",
    ),
    _rule(
        ("authtoken",),
        rf"{_CMD}ngrok[ \t]+(?:config[ \t]+add-authtoken|authtoken)[ \t]+{_VALUE}",
        kind="api_token",
    ),
    _rule(
        ("wpa_passphrase",),
        rf"{_CMD}wpa_passphrase[ \t]+(?:'[^'\n]+'|\"[^\"\n]+\"|\S+)[ \t]+{_VALUE}",
    ),
    _rule(
        ("nmcli",),
        rf"{_CMD}nmcli{_GAP}(?:password|wifi-sec\.psk|802-11-wireless-security\.psk)[ \t]+{_VALUE}",
    ),
    _rule(
        ("sudo -s",), rf"{_CMD}(?:echo|printf)[ \t]+(?:-n[ \t]+)?{_WORD}[ \t]*\|[ \t]*sudo[ \t]+-S"
    ),
    _rule(  # past its options, -salt and -in with their arguments
        ("openssl passwd",),
        rf"{_CMD}openssl[ \t]+passwd(?:[ \t]+(?:-(?:salt|in)[ \t]+\S+|-\w+))*+[ \t]+(?!-){_VALUE}",
    ),
    _rule(("storepasswd",), rf"{_CMD}x11vnc{_GAP}-storepasswd[ \t]+(?![~/.]){_VALUE}"),
    _rule(
        (" -a ", "--auth"),
        rf"{_CMD}https?{_GAP}(?:-a|--auth)[ \t]+[^\s:'\"]+:{_VALUE}",
        kind="basic_auth",
    ),
)

# Dockerfile `ENV KEY value` and fish `set -gx KEY value`: the key decides, as in ``KEY=value``.
_ENV_SPACED = re.compile(
    r"^(?:[ \t]*(?:[>*+-]|<!--))*[ \t]*"  # in a list item, a quote or a comment too
    r"(?:ENV[ \t]+|set[ \t]+(?:-[a-zA-Z]+[ \t]+)+|setx[ \t]+"
    # nginx and Apache: an environment parameter, a request header, a variable.
    r"|(?i:fastcgi_param|uwsgi_param|scgi_param|SetEnv)[ \t]+"
    r"|(?i:proxy_set_header|add_header|RequestHeader[ \t]+set|Header[ \t]+set)[ \t]+(?=[Xx]-)"
    r"|set[ \t]+\$)"
    r"(?P<key>[A-Za-z_][\w-]*)[ \t]+" + _VALUE + r"[ \t]*;?[ \t]*(?:-->)?[ \t]*\r?$",
    re.MULTILINE,  # matched at a line's start, $ is its end
)


def _value(text: str, m: re.Match[str]) -> tuple[int, int, str]:
    start, end = m.span("v")
    raw = text[start:end]
    if raw[:1] in "'\"" and raw[-1:] == raw[:1]:
        start, end, raw = start + 1, end - 1, raw[1:-1]
    return start, end, raw


# A port or a port mapping (`-p 8080`, `-p 127.0.0.1:27017:27017/tcp`), not a password.
_PORTS = re.compile(r"\d{1,5}|[\d.]*:[\d.:]+(?:/(?:tcp|udp))?")


def _secret_ok(v: str) -> bool:
    return (
        len(v) >= 3 and not v.startswith(MARK) and not is_placeholder(v) and not _PORTS.fullmatch(v)
    )


def _spaced_assignment(text: str, line_start: int, line_end: int) -> Edit | None:
    """``ENV KEY value`` / ``set -gx KEY value`` on this line, judged by its key."""
    m = _ENV_SPACED.match(text, line_start, line_end)
    found = classify_key(m.group("key")) if m else None
    if m is None or found is None:
        return None
    tier, kind = found
    start, end, v = _value(text, m)
    # As for KEY=value: a password is any value, a secret a random one, and under a weak
    # key (`GPG_KEY`, a public fingerprint) only a long mixed one.
    judge = {"password": _secret_ok, "secret": looks_random}.get(tier, high_entropy)
    return (start, end, marker(kind)) if _secret_ok(v) and judge(v) else None


# msmtp, and config files like it: "password X" alone on its line, under "user X",
# "account X" or "host X" within three lines.
_CONFIG_PASSWORD = re.compile(r"[ \t]*(?:password|passwd)[ \t]+(?P<v>\S+)[ \t]*\r?")
_CONFIG_ACCOUNT = re.compile(
    r"^[ \t]*(?:user|login|account|host|username)[ \t]+\S+[ \t]*\r?$", re.M
)


def _config_password(text: str, line_start: int, line_end: int) -> Edit | None:
    m = _CONFIG_PASSWORD.fullmatch(text, line_start, line_end)
    if m is None or not _secret_ok(m["v"]) or is_wordy(m["v"]):  # "password manager"
        return None
    if _CONFIG_ACCOUNT.search(text, lines_above(text, line_start, 3), line_start) is None:
        return None
    return m.start("v"), m.end("v"), marker("password")


def redact_commands(note: Note, counts: Counter[str]) -> str:
    text = note.text
    edits: list[Edit] = []
    for rule in _RULES:
        for line_start, line_end in note.lines(rule.words):
            for m in rule.regex.finditer(text, line_start, line_end):
                start, end, v = _value(text, m)
                if _secret_ok(v) and (rule.words_ok or not is_wordy(v)):
                    edits.append((start, end, marker(rule.kind)))
    for line_start, line_end in note.lines(("password ", "passwd ")):
        if (edit := _config_password(text, line_start, line_end)) is not None:
            edits.append(edit)
    hints = ("env ", "set -", "setx ", "_param", "header", "setenv", "set $")
    for line_start, line_end in note.lines(hints):
        edit = _spaced_assignment(text, line_start, line_end)
        if edit is not None:
            edits.append(edit)
    return keep_first(text, edits, counts)
