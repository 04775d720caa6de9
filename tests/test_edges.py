"""Rough edges a new user hits first (issue 13): each test shows the fixed behaviour."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from retriever.notes import NotePathError
from retriever.query_input import SearchInputError
from tests.conftest import cli_env, retriever_exe, run_retriever, write_beir

LONG_LINE = (
    "Restic keeps nightly snapshots of the photo library and prunes them weekly; the "
    "retention policy and the repository are documented at "
    "https://example.org/a/very/long/path/to/the/restic/retention/policy/documentation/page "
    "so that nobody has to guess which snapshots survive a prune run on the server."
)


@pytest.fixture
def small_vault(tmp_path: Path) -> Path:
    vault = tmp_path / "small"
    (vault / "ops").mkdir(parents=True)
    (vault / "ops" / "Backups with a very long file name for the citation test.md").write_text(
        f"# Restic backup policy\n\n{LONG_LINE}\n\nSecond paragraph about restic checks.\n",
        encoding="utf-8",
    )
    (vault / "Cooking.md").write_text(
        "# Shakshuka\n\nEggs poached in a spiced tomato and pepper sauce.\n", encoding="utf-8"
    )
    return vault


def _cli_env(db_url: str, tmp_path: Path) -> dict[str, str]:
    return {
        "DATABASE_URL": db_url,
        "RETRIEVER_HOME": str(tmp_path / "home"),
        "RETRIEVER_EMBED_MODEL": "none",
        "PATH": "/usr/bin:/bin",
        "COLUMNS": "80",
        "RETRIEVER_SERVICE": "off",
    }


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_retriever(args, env, timeout=120)


# ----------------------------------------------------------------- 1: no searchable terms


@pytest.mark.parametrize("query", ["?!...", "???", "& | ! : * ( ) \\", ["?", "!!"]])
def test_punctuation_only_query_is_refused(make_app, small_vault: Path, query: object) -> None:
    app = make_app(small_vault)
    app.index()
    with pytest.raises(SearchInputError, match="no searchable terms"):
        app.search(query)  # type: ignore[arg-type]


def test_punctuation_beside_a_real_query_is_dropped(make_app, small_vault: Path) -> None:
    app = make_app(small_vault)
    app.index()
    result = app.search(["???", "restic retention"])
    assert result.queries == ["restic retention"] and result.hits


def test_stopwords_only_query_is_still_searched_semantically(
    make_app, vault_copy: Path, model_dir: Path
) -> None:
    app = make_app(vault_copy, model=model_dir)
    app.index()
    result = app.search("the of and")
    assert result.mode == "hybrid" and result.degraded_reason is None


def test_cli_punctuation_query_fails_with_one_line(
    small_vault: Path, db_url: str, tmp_path: Path
) -> None:
    env = _cli_env(db_url, tmp_path)
    _run(["index", str(small_vault)], env)
    plain = _run(["search", "--vault", str(small_vault), "?!..."], env)
    assert plain.returncode == 2 and plain.stdout == ""
    assert "no searchable terms" in plain.stderr and len(plain.stderr.strip().splitlines()) == 1
    as_json = _run(["search", "--vault", str(small_vault), "--json", "?!..."], env)
    data = json.loads(as_json.stdout)
    assert as_json.returncode == 2 and data["ok"] is False
    assert "no searchable terms" in data["error"]


# A bad command line, as an agent might write it: the message Typer would put in a box.
BAD_COMMAND_LINES = [
    (["search", "x", "--fusion", "bogus"], "Invalid value for '--fusion'", "retriever search"),
    (["search", "x", "--budget", "abc"], "Invalid value for '--budget'", "retriever search"),
    (["search", "x", "--nope"], "No such option: --nope", "retriever search"),
    (["search"], "Missing argument", "retriever search"),
    (["serch", "x"], "No such command 'serch'", "retriever"),
    (["db", "frobnicate"], "No such command 'frobnicate'", "retriever db"),
    (["serve", "--mcp", "--port", "99999"], "Invalid value for '--port'", "retriever serve"),
    (["serve", "--idle", "nan"], "Invalid value for '--idle'", "retriever serve"),
    (["serve", "--idle", "-1"], "Invalid value for '--idle'", "retriever serve"),
]


@pytest.mark.parametrize(("args", "said", "where"), BAD_COMMAND_LINES)
def test_a_bad_command_line_is_one_line_and_exit_2(
    tmp_path: Path, args: list[str], said: str, where: str
) -> None:
    """Like every other bad input: one line on stderr naming the problem and where help
    is, nothing on stdout; with --json the error object on stdout instead. Nothing is
    started for it (no database: the URL points nowhere)."""
    env = _cli_env("postgresql://nobody@127.0.0.1:1/none", tmp_path)
    plain = _run(args, env)
    assert plain.returncode == 2 and plain.stdout == ""
    line = plain.stderr.strip()
    assert len(line.splitlines()) == 1 and said in line, plain.stderr
    assert f"(see '{where} --help')" in line and "Traceback" not in line
    as_json = _run([*args, "--json"], env)
    data = json.loads(as_json.stdout)
    assert as_json.returncode == 2 and as_json.stderr == ""
    assert data["ok"] is False and said in data["error"] and data["via"] == "process"


def test_mcp_on_a_host_that_is_no_address_says_so(tmp_path: Path) -> None:
    env = _cli_env("postgresql://nobody@127.0.0.1:1/none", tmp_path)
    vault = tmp_path / "vault"
    vault.mkdir()
    done = _run(["mcp", str(vault), "--http", "--host", "bad host!!", "--port", "18765"], env)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "'bad host!!' is not an address" in done.stderr and "in use" not in done.stderr


@pytest.mark.parametrize("folder", ["../..", "/etc", "ops/../..", "C:\\Users"])
def test_a_folder_filter_outside_the_vault_is_refused(
    make_app, small_vault: Path, folder: str
) -> None:
    """Every front end filters the same way (the CLI took any string and answered
    "likely absent"): a folder that leaves the vault is refused, never an empty answer."""
    app = make_app(small_vault)
    app.index()
    with pytest.raises(NotePathError):
        app.search("restic", mode="lexical", folder=folder)


@pytest.mark.parametrize(
    ("folder", "said"),
    [
        ("nope", "no folder 'nope' in the vault"),
        ("ops/deeper", "no folder 'ops/deeper' in the vault"),
        ("Ops", "no folder 'Ops' in the vault: did you mean 'ops'?"),
        ("Cooking.md/x", "no folder 'Cooking.md/x' in the vault ('Cooking.md' is a file)"),
        ("drafts", "folder 'drafts' is excluded from the index"),
        (".obsidian", "folder '.obsidian' is excluded from the index"),
        ("linked", "folder 'linked' is a symbolic link"),
    ],
)
def test_a_folder_filter_naming_no_indexable_folder_says_so(
    make_app, small_vault: Path, folder: str, said: str
) -> None:
    """A folder that is not there (or that the index never reads) is refused with the
    reason, not answered "likely absent" as if the notes did not cover the question."""
    (small_vault / ".indexignore").write_text("drafts/\n", encoding="utf-8")
    for name in ("drafts", ".obsidian"):
        (small_vault / name).mkdir()
        (small_vault / name / "restic.md").write_text("# Restic\n\nrestic\n", "utf-8")
    (small_vault / "linked").symlink_to(small_vault / "ops", target_is_directory=True)
    app = make_app(small_vault)
    app.index()
    with pytest.raises(NotePathError) as exc:
        app.search("restic", mode="lexical", folder=folder)
    assert str(exc.value).startswith(said)
    # A real folder that merely has no match is answered, and says the vault lacks it.
    assert app.search("restic", mode="lexical", folder="ops").hits
    (small_vault / "empty").mkdir()
    assert app.search("restic", mode="lexical", folder="empty").likely_absent


def test_cli_folder_filter_naming_no_folder_is_one_line_and_exit_2(
    small_vault: Path, db_url: str, tmp_path: Path
) -> None:
    env = {**_cli_env(db_url, tmp_path), "RETRIEVER_VAULT": str(small_vault)}
    _run(["index"], env)
    plain = _run(["search", "restic", "--mode", "lexical", "--folder", "opz"], env)
    assert plain.returncode == 2 and plain.stdout == ""
    assert plain.stderr.strip() == "✗ no folder 'opz' in the vault"
    as_json = _run(["search", "restic", "--mode", "lexical", "--folder", "opz", "--json"], env)
    data = json.loads(as_json.stdout)
    assert as_json.returncode == 2 and data["error"] == "no folder 'opz' in the vault"


@pytest.mark.parametrize("folder", ["ops", "./ops", "ops/", " ops "])
def test_a_folder_filter_is_normalised(make_app, small_vault: Path, folder: str) -> None:
    app = make_app(small_vault)
    app.index()
    hits = app.search("restic", mode="lexical", folder=folder).hits
    assert hits and all(h.path.startswith("ops/") for h in hits)


def test_a_bad_hook_command_line_never_blocks_the_session(tmp_path: Path) -> None:
    """Claude Code reads exit 2 from a hook as "block": a mistyped hook says so on stderr
    and exits 0, with nothing on stdout."""
    env = _cli_env("postgresql://nobody@127.0.0.1:1/none", tmp_path)
    for args in (["hook", "prompt", "--bogus"], ["hook", "nosuch"], ["hook"]):
        done = _run(args, env)
        assert done.returncode == 0 and done.stdout == "", args
        assert len(done.stderr.strip().splitlines()) == 1 and "retriever hook" in done.stderr


def test_a_bare_command_still_shows_its_help(tmp_path: Path) -> None:
    """`retriever` or `retriever db` alone is a question, not a typo: the help, on stdout
    (exit 2, as before)."""
    env = _cli_env("postgresql://nobody@127.0.0.1:1/none", tmp_path)
    for args, shown in (([], "Commands"), (["db"], "upgrade")):
        done = _run(args, env)
        assert done.returncode == 2 and shown in done.stdout and done.stderr == ""


def test_mcp_punctuation_query_is_a_clean_tool_error(make_app, small_vault: Path) -> None:
    import asyncio

    from fastmcp import Client

    from retriever.mcp_server import build_server

    app = make_app(small_vault)
    app.index()

    async def call() -> object:
        async with Client(build_server(app)) as client:
            return await client.call_tool("search", {"queries": "???"}, raise_on_error=False)

    result = asyncio.run(call())
    assert result.is_error  # type: ignore[attr-defined]
    text = result.content[0].text  # type: ignore[attr-defined]
    assert "no searchable terms" in text and "Traceback" not in text


# ----------------------------------------------------------------- 2: small budgets


def test_budget_50_delivers_body_text_not_just_the_heading(make_app, small_vault: Path) -> None:
    app = make_app(small_vault)
    app.index()
    result = app.search("restic retention policy snapshots", budget_tokens=50)
    hit = result.hits[0]
    assert hit.truncated and hit.tokens <= 50 and result.used_tokens <= 50
    body = [ln for ln in hit.text.splitlines() if ln.strip() and not ln.startswith("#")]
    assert body, hit.text
    assert body[0].rstrip("…") in LONG_LINE
    # The citation covers exactly the delivered lines.
    lines = (small_vault / hit.path).read_text(encoding="utf-8").splitlines()
    delivered = hit.text.splitlines()
    assert hit.end_line - hit.start_line + 1 == len(delivered)
    for got, line in zip(delivered, lines[hit.start_line - 1 : hit.end_line], strict=True):
        assert line.startswith(got.rstrip("…"))


# ----------------------------------------------------------------- 3: piped output


def test_piped_search_output_is_not_wrapped(small_vault: Path, db_url: str, tmp_path: Path) -> None:
    env = _cli_env(db_url, tmp_path)
    _run(["index", str(small_vault)], env)
    done = _run(["search", "--vault", str(small_vault), "restic retention policy"], env)
    assert done.returncode in (0, 1), done.stderr
    assert LONG_LINE in done.stdout.splitlines()
    citation = "ops/Backups with a very long file name for the citation test.md:"
    assert any(line.startswith(citation) for line in done.stdout.splitlines()), done.stdout


# ----------------------------------------------------------------- 7: BEIR ids with "/"


@pytest.mark.parametrize(
    "doc_id", ["<dbpedia:AC/DC>", "a/b/c", "50%/x", ".hidden", "..", "Zürich_(city)", "x y.z"]
)
def test_beir_ids_map_to_safe_file_names_both_ways(doc_id: str) -> None:
    from retriever.evaluate import beir_doc_id, beir_note_name

    name = beir_note_name(doc_id)
    assert "/" not in name and not name.startswith(".") and name.endswith(".md")
    assert beir_doc_id(name) == doc_id


def test_eval_on_beir_ids_with_slashes(make_app, tmp_path: Path) -> None:
    from retriever.evaluate import evaluate, load_beir, write_beir_vault

    docs = {
        "<dbpedia:AC/DC>": ("AC/DC", "Australian hard rock band formed by the Young brothers."),
        "<dbpedia:Kayak>": ("Kayak", "A small narrow watercraft propelled by a paddle."),
    }
    queries = {"q1": "hard rock band Young brothers"}
    beir = write_beir(tmp_path / "dbpedia", docs, queries, [("q1", "<dbpedia:AC/DC>", 1)])
    corpus, cases = load_beir(beir)
    vault = tmp_path / "vault"
    write_beir_vault(corpus, vault)
    [relevant] = cases[0].relevant
    assert (vault / relevant).is_file() and "/" not in relevant
    app = make_app(vault)
    app.index()
    [result] = evaluate(app, cases, ablate=False)["results"]
    assert result["hit@1"] == pytest.approx(1.0)


# ----------------------------------------------------------------- 5: mcp --print-config


def test_print_config_carries_every_non_default_setting(
    make_app,
    small_vault: Path,
    model_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from retriever.cli import _print_client_config
    from retriever.config import Settings

    app = make_app(small_vault, model=model_dir, budget_tokens=900, exclude=["private/**"])
    _print_client_config(app, http=False, host="127.0.0.1", port=8765, token=None)
    printed = capsys.readouterr().err
    snippet = json.loads(printed[printed.index("{") :])
    env = snippet["mcpServers"]["retriever"]["env"]
    assert env["RETRIEVER_HOME"] == str(app.settings.home.resolve())
    assert env["RETRIEVER_EMBED_MODEL"] == str(model_dir.resolve())
    assert env["RETRIEVER_VAULT"] == str(small_vault.resolve())
    command = Path(snippet["mcpServers"]["retriever"]["command"])
    assert command.is_absolute() and command.exists()  # the agent starts it from elsewhere
    assert env["DATABASE_URL"] == app.settings.database_url  # set explicitly: needed to connect
    assert env["RETRIEVER_CALIBRATE"] == "false" and env["RETRIEVER_BUDGET_TOKENS"] == "900"
    assert "RETRIEVER_BM25_K1" not in env  # defaults stay out of the snippet
    # The snippet's environment rebuilds the same settings in the server the client starts.
    for key in [k for k in __import__("os").environ if k.startswith("RETRIEVER_")]:
        monkeypatch.delenv(key)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    rebuilt = Settings()
    for name in ("home", "embed_model", "database_url", "calibrate", "budget_tokens", "exclude"):
        assert str(getattr(rebuilt, name)) == str(getattr(app.settings, name)), name


# ----------------------------------------------------------------- 8: the vault, every way


def test_health_accepts_the_vault_its_hint_names(
    small_vault: Path, db_url: str, tmp_path: Path
) -> None:
    env = _cli_env(db_url, tmp_path)
    missing = _run(["health", "--json", "--vault", str(tmp_path / "nowhere")], env)
    vault_check = {c["name"]: c for c in json.loads(missing.stdout)["checks"]}["vault"]
    assert vault_check["status"] == "fail" and "--vault" in vault_check["hint"]
    for args in (["--vault", str(small_vault)], [str(small_vault)]):
        done = _run(["health", "--json", *args], env)
        checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
        assert checks["vault"]["status"] == "ok", done.stdout
    by_env = _run(["health", "--json"], {**env, "RETRIEVER_VAULT": str(small_vault)})
    assert {c["name"]: c for c in json.loads(by_env.stdout)["checks"]}["vault"]["status"] == "ok"


def test_index_and_status_take_vault_as_option_too(
    small_vault: Path, db_url: str, tmp_path: Path
) -> None:
    env = _cli_env(db_url, tmp_path)
    indexed = _run(["index", "--json", "--vault", str(small_vault)], env)
    assert json.loads(indexed.stdout)["files_seen"] == 2, indexed.stderr
    status = _run(["status", "--json", "--vault", str(small_vault)], env)
    assert json.loads(status.stdout)["notes_indexed"] == 2
    clash = _run(["status", str(small_vault), "--vault", str(tmp_path)], env)
    assert clash.returncode == 2 and "two vaults" in clash.stderr


# ----------------------------------------------------------------- 6: queries starting with "-"


def test_dash_queries_are_documented_and_work(
    small_vault: Path, db_url: str, tmp_path: Path
) -> None:
    env = _cli_env(db_url, tmp_path)
    helped = _run(["search", "--help"], env)
    assert 'retriever search -- "-v flag of rsync"' in helped.stdout
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    commands = readme[readme.index("## Commands") : readme.index("## Configuration")]
    assert "starts with `-` goes after `--`" in commands
    _run(["index", str(small_vault)], env)
    done = _run(["search", "--vault", str(small_vault), "--json", "--", "-restic retention"], env)
    assert json.loads(done.stdout)["queries"] == ["-restic retention"], done.stderr


# ----------------------------------------------------------------- 4: model warnings, once


def test_offline_hub_is_said_once_and_plainly(
    small_vault: Path, db_url: str, tmp_path: Path
) -> None:
    env = {
        **_cli_env(db_url, tmp_path),
        "RETRIEVER_EMBED_MODEL": "minishlab/potion-base-8M",
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf"),
    }
    for args in (["index", str(small_vault)], ["search", "--vault", str(small_vault), "restic"]):
        done = _run(args, env)
        assert done.stderr.count("the model hub is unreachable") == 1, done.stderr
        assert done.stderr.count("set RETRIEVER_EMBED_MODEL to a local Model2Vec folder") == 1


def test_model_card_note_is_not_printed_twice(
    small_vault: Path, db_url: str, tmp_path: Path, model_dir: Path
) -> None:
    import shutil

    model = tmp_path / "model"
    shutil.copytree(model_dir, model)
    (model / "README.md").write_text("# a model without card metadata\n", encoding="utf-8")
    env = {**_cli_env(db_url, tmp_path), "RETRIEVER_EMBED_MODEL": str(model)}
    done = _run(["index", str(small_vault)], env)
    assert done.returncode == 0, done.stderr
    assert "Repo card metadata block was not found" not in done.stderr


def test_a_busy_mcp_port_fails_before_any_url_is_printed(tmp_path: Path, db_url: str) -> None:
    import socket

    vault = tmp_path / "v"
    vault.mkdir()
    (vault / "a.md").write_text("# A\n\ntext\n", "utf-8")
    env = cli_env(db_url, tmp_path / "home")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [retriever_exe(), "mcp", str(vault), "--http", "--port", str(port), "--print-config"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 2
    assert f"port {port} on 127.0.0.1 is in use" in done.stderr
    assert "/mcp" not in done.stdout + done.stderr.replace("--port", "")


# ----------------------------------------------------------------- 9: bad settings, no database


@pytest.mark.parametrize(
    "args",
    [["db", "upgrade"], ["health", "--json"], ["search", "restic"], ["status", "--json"]],
    ids=["db-upgrade", "health", "search", "status"],
)
@pytest.mark.parametrize(
    ("name", "value"),
    [("RETRIEVER_BM25_K1", "abc"), ("RETRIEVER_FUSION", "bogus")],
    ids=["number", "choice"],
)
def test_a_bad_setting_is_one_line_naming_it(
    small_vault: Path, db_url: str, tmp_path: Path, args: list[str], name: str, value: str
) -> None:
    env = {**_cli_env(db_url, tmp_path), name: value, "RETRIEVER_VAULT": str(small_vault)}
    done = _run([*args], env)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    said = json.loads(done.stdout)["error"] if "--json" in args else done.stderr.strip()
    assert f"bad setting {name}='{value}'" in said
    assert "\n" not in said


@pytest.mark.parametrize(
    ("name", "value", "why"),
    [
        ("RETRIEVER_SEMANTIC_WEIGHT", "nan", "finite"),  # NaN scores: random order, bad JSON
        ("RETRIEVER_SEMANTIC_WEIGHT", "-1", "greater than or equal to 0"),  # a zero division
        ("RETRIEVER_RRF_K", "0", "greater than 0"),
        ("RETRIEVER_ABSENT_QUANTILE", "5", "less than or equal to 1"),
        ("RETRIEVER_SERVICE", "bogus", "'auto', 'connect' or 'off'"),  # not taken as auto
    ],
)
def test_a_number_or_mode_out_of_range_is_refused_before_anything_runs(
    small_vault: Path, db_url: str, tmp_path: Path, name: str, value: str, why: str
) -> None:
    env = {**_cli_env(db_url, tmp_path), name: value, "RETRIEVER_VAULT": str(small_vault)}
    done = _run(["search", "restic", "--json"], env)
    assert done.returncode == 2
    said = json.loads(done.stdout)["error"]
    assert said.startswith(f"bad setting {name}='{value}'") and why in said
    assert not (tmp_path / "home" / "service.sock").exists()


@pytest.mark.parametrize(
    "args",
    [["serve"], ["mcp"], ["status"], ["-m", "retriever.mcp_server"]],
    ids=["serve", "mcp", "status", "mcp-module"],
)
def test_a_list_setting_that_is_not_json_is_one_line_everywhere(
    small_vault: Path, db_url: str, tmp_path: Path, args: list[str]
) -> None:
    import sys

    env = {**_cli_env(db_url, tmp_path), "RETRIEVER_INCLUDE": "*.md"}
    env["RETRIEVER_VAULT"] = str(small_vault)
    command = [sys.executable, *args] if args[0] == "-m" else [retriever_exe(), *args]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    said = done.stderr.strip()
    assert said.endswith(
        'bad setting RETRIEVER_INCLUDE: not valid JSON (a list is written ["*.md", "notes/**"])'
    )
    assert len(said.splitlines()) == 1 and "Traceback" not in said


def test_a_database_url_value_is_never_echoed_by_the_settings_check() -> None:
    from retriever.config import settings_from
    from retriever.errors import ConfigError

    with pytest.raises(ConfigError) as caught:
        settings_from(database_url=987654321)  # not a string: pydantic refuses it
    assert str(caught.value).startswith("bad setting DATABASE_URL:")
    assert "987654321" not in str(caught.value)


def test_an_unreachable_database_is_one_line_with_a_hint_and_no_password(
    small_vault: Path, tmp_path: Path
) -> None:
    url = "postgresql://alice:s3cret-pw@127.0.0.1:1/nowhere"  # nothing listens on port 1
    env = {**_cli_env(url, tmp_path), "RETRIEVER_VAULT": str(small_vault)}
    for args in (["status"], ["db", "upgrade"]):
        done = _run(args, env)
        assert done.returncode == 2, args
        said = done.stderr.strip()
        assert len(said.splitlines()) == 1, said
        assert "cannot connect to postgresql://alice@127.0.0.1:1/nowhere" in said
        assert "retriever health" in said and "DATABASE_URL" in said  # what to do next
        assert "s3cret-pw" not in done.stdout + done.stderr
    # Search still answers, from the files, and says why.
    found = _run(["search", "--json", "restic retention"], env)
    data = json.loads(found.stdout)
    assert found.returncode == 1 and data["mode"] == "files"
    assert "cannot connect" in data["degraded_reason"] and data["hits"]


def test_pool_timeout_is_unavailable_with_the_hint(db_url: str) -> None:
    from retriever.db import Database, DatabaseUnreachable

    db = Database(db_url, max_size=1, timeout=0.5)
    try:
        with (
            db.connection(),  # the only connection is held: the next one times out
            pytest.raises(DatabaseUnreachable, match="retriever health"),
            db.connection(),
        ):
            pass
    finally:
        db.close()


def test_a_spare_connection_is_given_only_when_one_is_free(db_url: str) -> None:
    import time

    from retriever.db import Database

    db = Database(db_url, max_size=2, timeout=0.5)
    try:
        with db.connection() as own, db.spare() as spare:
            assert spare is not None and spare is not own  # the pool grows to its size
            spare.execute("SELECT 1")  # left in a transaction: handed back rolled back
        with db.connection(), db.connection():  # both held (two concurrent searches)
            started = time.perf_counter()
            with db.spare() as none:
                assert none is None
            assert time.perf_counter() - started < 0.05  # not waited for
        with db.spare() as again:
            assert again is not None and again.info.transaction_status.name == "IDLE"
    finally:
        db.close()


def test_a_search_that_gets_no_connection_answers_from_the_files(
    small_vault: Path, db_url: str, tmp_path: Path
) -> None:
    from retriever.app import Retriever
    from retriever.config import Settings
    from retriever.db import Database

    settings = Settings(
        vault=small_vault,
        home=tmp_path / "home",
        database_url=db_url,
        embed_model="none",
        calibrate=False,
    )
    app = Retriever(settings, db=Database(db_url, max_size=2, timeout=0.5))
    try:
        app.index()  # (an index run holds two connections: its lock and its work)
        with app.db.connection(), app.db.connection():  # every connection busy: none free
            result = app.search("restic retention", fresh=False)
        assert result.mode == "files" and result.hits
        assert result.degraded_reason and "no free connection" in result.degraded_reason
    finally:
        app.close()


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://alice:s3cret%zz@127.0.0.1/db",
        "postgresql://alice:s3cret@[::1/db",
        "postgresql://alice:s3cret@127.0.0.1/db?bogus=s3cret",
    ],
)
def test_a_malformed_database_url_never_echoes_the_password(
    small_vault: Path, tmp_path: Path, url: str
) -> None:
    env = {**_cli_env(url, tmp_path), "RETRIEVER_VAULT": str(small_vault)}
    for args in (["status"], ["db", "upgrade"]):
        done = _run(args, env)
        assert done.returncode == 2, done.stderr
        assert "DATABASE_URL is not a libpq URL" in done.stderr
        assert "s3cret" not in done.stdout + done.stderr
        assert len(done.stderr.strip().splitlines()) == 1


def test_an_unknown_fusion_flag_is_refused_before_anything_runs(
    small_vault: Path, db_url: str, tmp_path: Path
) -> None:
    done = _run(
        ["search", "--vault", str(small_vault), "--fusion", "bogus", "restic"],
        _cli_env(db_url, tmp_path),
    )
    assert done.returncode == 2 and done.stdout == ""
    assert "'bogus' is not one of" in done.stderr and "'linear'" in done.stderr


_LOAD_OFFLINE = """
import sys
from retriever.config import Settings
from retriever.embed import EmbedderUnavailable
from retriever.tiers import loader_for
try:
    loader_for(Settings(), sys.argv[1])("minishlab/potion-base-8M")
except EmbedderUnavailable as exc:
    print(exc)
"""


@pytest.mark.parametrize(
    ("tier", "setting"),
    [("primary", "RETRIEVER_EMBED_MODEL"), ("fallback", "RETRIEVER_FALLBACK_MODEL")],
)
def test_an_offline_model_names_the_setting_of_its_own_tier(
    tmp_path: Path, tier: str, setting: str
) -> None:
    import sys

    env = {"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    done = subprocess.run(
        [sys.executable, "-c", _LOAD_OFFLINE, tier],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    said = done.stdout
    assert "the model hub is unreachable" in said
    assert f"set {setting} to a local Model2Vec folder" in said
    other = {"RETRIEVER_EMBED_MODEL", "RETRIEVER_FALLBACK_MODEL"} - {setting}
    assert not any(name in said for name in other)


def test_control_characters_in_notes_and_names_never_reach_the_terminal(
    small_vault: Path, db_url: str, tmp_path: Path
) -> None:
    """A note (or a file name) holding escape sequences would retitle the window, clear the
    screen or recolour the output: a search shows them as control pictures, and file names
    with Rich markup brackets are printed as written."""
    esc = "\x1b"
    (small_vault / f"ops/esc{esc}[31mname [bold]x.md").write_text(
        f"# Escapes\n\nzanzibar {esc}]0;pwned\x07 title {esc}[2J clear \x9b31m done\n",
        encoding="utf-8",
    )
    env = {**_cli_env(db_url, tmp_path), "RETRIEVER_VAULT": str(small_vault)}
    indexed = _run(["index"], env)
    assert indexed.returncode == 1 and "✗" not in indexed.stderr  # 1: no model, lexical only
    done = _run(["search", "zanzibar", "--mode", "lexical"], env)
    assert done.returncode == 0, done.stderr
    printed = done.stdout + done.stderr
    assert esc not in printed and "\x07" not in printed and "\x9b" not in printed
    assert "␛]0;pwned␇ title ␛[2J clear" in done.stdout
    assert "esc␛[31mname [bold]x.md:" in done.stdout  # the citation, as written


def test_a_line_break_in_a_file_name_keeps_one_hit_per_line(
    small_vault: Path, db_url: str, tmp_path: Path
) -> None:
    """The citation line of a note whose name holds a line break shows it as ␊ (the
    layout stays one header line per hit); --json keeps the path exactly as it is."""
    (small_vault / "ops" / "two\nlines.md").write_text("# Split\n\nquagga\n", "utf-8")
    env = {**_cli_env(db_url, tmp_path), "RETRIEVER_VAULT": str(small_vault)}
    _run(["index"], env)
    done = _run(["search", "quagga", "--mode", "lexical"], env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("ops/two␊lines.md:1-3  Split") and lines[1] == "# Split", lines
    as_json = json.loads(_run(["search", "quagga", "--mode", "lexical", "--json"], env).stdout)
    assert as_json["hits"][0]["path"] == "ops/two\nlines.md"


def test_a_query_byte_that_is_not_utf8_is_read_as_cp1252_and_said(
    small_vault: Path, db_url: str, tmp_path: Path
) -> None:
    """`retriever search $'caf\\xe9'` (a Latin-1 terminal) searches "café", as a note
    in that encoding would be read, and says so on stderr; it was searched as "caf"."""
    (small_vault / "Café.md").write_text("# Café\n\nLe café crème du matin.\n", "utf-8")
    env = {**_cli_env(db_url, tmp_path), "RETRIEVER_VAULT": str(small_vault)}
    _run(["index"], env)
    latin1 = "caf\udce9"  # how Python holds the byte 0xE9 of argv: passed on as that byte
    done = _run(["search", latin1, "--mode", "lexical"], env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Café.md:")
    assert "⚠ the query is not UTF-8: its other bytes read as cp1252, 'café'" in done.stderr
    as_json = _run(["search", "--json", "--mode", "lexical", "-q", "cr\udce8me", latin1], env)
    data = json.loads(as_json.stdout)
    assert data["queries"] == ["café", "crème"] and data["hits"][0]["path"] == "Café.md"
    # A folder argument is a name, not text: its bytes are kept, and a folder the index
    # skips for its name is said, not answered "likely absent".
    os.mkdir(os.fsencode(small_vault) + b"/caf\xe9")
    done = _run(["search", "café", "--folder", latin1], env)
    assert done.returncode == 2 and "not UTF-8, which the index skips" in done.stderr


def test_a_byte_cp1252_lacks_is_read_as_latin1() -> None:
    from retriever.cli import _from_argv

    assert _from_argv("na\udc81ve") == "na\x81ve"
    assert _from_argv("plain café") == "plain café"  # valid UTF-8 is left alone
    # Beside a byte that is not UTF-8, valid UTF-8 stays as written (not read as cp1252).
    assert _from_argv("café caf\udce9") == "café café"


def test_two_vaults_or_a_home_that_is_a_file_are_one_line_each(
    small_vault: Path, db_url: str, tmp_path: Path
) -> None:
    env = {**_cli_env(db_url, tmp_path), "RETRIEVER_VAULT": str(small_vault)}
    done = _run(["index", str(small_vault), "--vault", str(tmp_path)], env)
    assert done.returncode == 2 and "two vaults given" in done.stderr
    assert "internal error" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    in_the_way = tmp_path / "home-file"
    in_the_way.write_text("not a folder", encoding="utf-8")
    env = {**env, "RETRIEVER_HOME": str(in_the_way)}
    env.pop("DATABASE_URL")  # the embedded server would live under the home
    done = _run(["status"], env)
    assert done.returncode == 2 and "cannot hold the database" in done.stderr
    assert "internal error" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    # health says what a search then does: it fails, it does not scan the files
    searched = _run(["search", "--json", "restic"], env)
    assert searched.returncode == 2 and "cannot hold the database" in searched.stdout
    health = _run(["health", "--json"], env)
    assert json.loads(health.stdout)["search_mode"] == "none" and health.returncode == 2


def test_help_starts_no_service(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {"PATH": "/usr/bin:/bin", "RETRIEVER_HOME": str(home), "RETRIEVER_SERVICE": "auto"}
    done = _run(["search", "--help"], env)
    assert done.returncode == 0 and "Usage" in done.stdout
    assert not home.exists()  # no service, so no server and no socket under it


def test_the_service_setting_folds_case_and_spaces_as_the_client_does() -> None:
    from retriever.config import Settings

    assert Settings(service=" OFF ").service == "off"  # type: ignore[arg-type]
    assert Settings(service="Connect").service == "connect"  # type: ignore[arg-type]
