"""Long tool outputs made at test time (deterministic), each with the lines that matter.

Shared by tests/test_compress.py and benchmarks/bench_hooks.py.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class ToolOutput:
    name: str
    tool_name: str
    tool_input: dict[str, str]
    task: str  # the user's request
    text: str
    must_keep: tuple[str, ...]  # substrings the extract must hold


def build_log(lines: int = 5_000) -> ToolOutput:
    rng = random.Random(1)
    modules = ["core", "net", "storage", "ui", "crypto", "cli", "sync", "index"]
    out = ["-- The CXX compiler identification is GNU 13.2.0", "-- Configuring done"]
    while len(out) < lines - 12:
        module = rng.choice(modules)
        pct = min(99, len(out) * 100 // lines)
        if rng.random() < 0.03:
            out.append(f"Scanning dependencies of target {module}")
        elif rng.random() < 0.02:
            out.append(f"[{pct:3d}%] Linking CXX static library lib{module}.a")
        else:
            src = f"src/{module}/{module}_{rng.randrange(400)}.cpp"
            out.append(
                f"[{pct:3d}%] Building CXX object src/{module}/CMakeFiles/{module}.dir/"
                f"{src.rsplit('/', 1)[1]}.o -Wall -Wno-error=deprecated -O2"
            )
    out += [
        "src/net/socket_pool.cpp:142:17: error: 'kMaxIdle' was not declared in this scope",
        "  142 |     if (idle.size() > kMaxIdle) {",
        "      |                       ^~~~~~~~",
        "make[2]: *** [src/net/CMakeFiles/net.dir/build.make:76: socket_pool.cpp.o] Error 1",
        "make[1]: *** [CMakeFiles/Makefile2:410: src/net/CMakeFiles/net.dir/all] Error 2",
        "make: *** [Makefile:136: all] Error 2",
    ]
    return ToolOutput(
        "build log (5,000 lines, 1 error)",
        "Bash",
        {"command": "cmake --build build -j8"},
        "build the project and fix what breaks",
        "\n".join(out) + "\n",
        ("socket_pool.cpp:142:17: error: 'kMaxIdle'", "Makefile:136: all] Error 2"),
    )


def suite_run(passes: int = 800) -> ToolOutput:
    rng = random.Random(2)
    files = [f"tests/test_{n}.py" for n in ("api", "auth", "sync", "store", "cli", "search")]
    out = [
        "============================= test session starts ==============================",
        "platform linux -- Python 3.11.9, pytest-8.3.2, pluggy-1.5.0",
        f"collected {passes + 2} items",
        "",
    ]
    failing = {
        250: "tests/test_sync.py::test_conflict_resolution_keeps_newest",
        611: "tests/test_auth.py::test_token_refresh_after_expiry",
    }
    for i in range(passes + 2):
        pct = i * 100 // (passes + 2)
        name = failing.get(i) or f"{rng.choice(files)}::test_case_{i}"
        verdict = "FAILED" if i in failing else "PASSED"
        out.append(f"{name} {verdict} [{pct:3d}%]")
    out += [
        "",
        "=================================== FAILURES ===================================",
        "_______________________ test_conflict_resolution_keeps_newest _______________________",
        "",
        "    def test_conflict_resolution_keeps_newest():",
        "        a, b = make_pair()",
        ">       assert resolve(a, b).version == 7",
        "E       assert 6 == 7",
        "E        +  where 6 = Doc(version=6).version",
        "",
        "tests/test_sync.py:88: AssertionError",
        "_______________________ test_token_refresh_after_expiry _______________________",
        "",
        "    def test_token_refresh_after_expiry():",
        ">       client.refresh()",
        "E       auth.TokenExpired: refresh token expired at 2024-05-01T10:00:00Z",
        "",
        "tests/test_auth.py:41: TokenExpired",
        "=========================== short test summary info ============================",
        "FAILED tests/test_sync.py::test_conflict_resolution_keeps_newest - assert 6 == 7",
        "FAILED tests/test_auth.py::test_token_refresh_after_expiry - auth.TokenExpired",
        f"======================= 2 failed, {passes} passed in 41.27s =======================",
    ]
    return ToolOutput(
        "test run (2 failures, 800 passes)",
        "Bash",
        {"command": "pytest -v"},
        "run the tests and tell me what fails",
        "\n".join(out) + "\n",
        (
            "E       assert 6 == 7",
            "tests/test_sync.py:88: AssertionError",
            "E       auth.TokenExpired",
            "2 failed, 800 passed",
            "FAILED tests/test_auth.py::test_token_refresh_after_expiry",
        ),
    )


def git_log(commits: int = 600) -> ToolOutput:
    rng = random.Random(3)
    topics = ["docs", "ci", "deps", "ui", "sync", "store", "search", "auth", "tests"]
    verbs = ["fix", "tidy", "bump", "refactor", "add", "drop", "rename", "speed up"]
    out: list[str] = []
    for i in range(commits):
        sha = f"{rng.getrandbits(160):040x}"
        if i == 377:
            sha = "9c1e5a7b3d2f4e6a8b0c1d2e3f4a5b6c7d8e9f01"
            subject = "caddy: raise the config reload timeout from 10s to 30s"
        else:
            subject = f"{rng.choice(topics)}: {rng.choice(verbs)} {rng.choice(topics)} helpers"
        out += [
            f"commit {sha}",
            f"Author: Dev {i % 7} <dev{i % 7}@example.org>",
            f"Date:   Mon Mar {1 + i % 28} 10:{i % 60:02d}:00 2024 +0100",
            "",
            f"    {subject}",
            "",
        ]
    return ToolOutput(
        "git log (600 commits, one asked for)",
        "Bash",
        {"command": "git log"},
        "which commit changed the caddy reload timeout?",
        "\n".join(out),
        ("commit 9c1e5a7b3d2f4e6a8b0c1d2e3f4a5b6c7d8e9f01", "raise the config reload timeout"),
    )


def web_page(paragraphs: int = 400) -> ToolOutput:
    rng = random.Random(4)
    words = (
        "repository snapshot backend storage network option command archive policy "
        "retention schedule encryption cache lock prune mount index"
    ).split()
    out = ["Restic Documentation — Tuning Backup Parameters", "Home | Docs | Blog | Forum", ""]
    for i in range(paragraphs):
        if i == 233:
            out.append(
                "The default pack size is 16 MiB; set --pack-size (or RESTIC_PACK_SIZE) to "
                "change it, for example to 64 MiB for large repositories on fast links."
            )
        else:
            out.append(" ".join(rng.choice(words) for _ in range(40)).capitalize() + ".")
        out.append("")
    out += ["© 2024 restic authors · Privacy · Imprint"]
    return ToolOutput(
        "web page dump (400 paragraphs)",
        "WebFetch",
        {
            "url": "https://restic.readthedocs.io/en/stable/047_tuning_backup_parameters.html",
            "prompt": "what is the default pack size",
        },
        "how do I change restic's pack size and what is the default?",
        "\n".join(out),
        ("The default pack size is 16 MiB",),
    )


def json_answer(items: int = 500) -> ToolOutput:
    rng = random.Random(5)
    jobs = []
    for i in range(items):
        name = "backup-nas" if i == 321 else f"job-{i:04d}"
        status = "failing" if i == 321 else "ok"
        jobs.append(
            {
                "id": 1000 + i,
                "name": name,
                "status": status,
                "last_run": f"2024-05-{1 + i % 28:02d}T0{i % 10}:00:00Z",
                "duration_s": rng.randrange(5, 900),
                "owner": f"team-{i % 9}",
            }
        )
    text = json.dumps({"data": jobs, "meta": {"count": items, "page": 1}}, indent=2)
    return ToolOutput(
        "JSON API answer (500 jobs)",
        "mcp__ci__list_jobs",
        {"project": "homelab"},
        "why is the backup-nas job failing?",
        text,
        ('"name":"backup-nas"', '"status":"failing"'),
    )


def all_outputs() -> list[ToolOutput]:
    return [build_log(), suite_run(), git_log(), web_page(), json_answer()]
