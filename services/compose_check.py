"""End-to-end check of the compose stack, from the host (what `make compose-test` runs).

Starts docker-compose.yml under its own project name on a copy of examples/vault, waits for
every healthcheck, then checks what a user relies on: MCP over HTTP lists the tools and
answers a hybrid search; both embedding tiers hold a vector for every passage; a note
written into the vault is indexed by the watcher within seconds (through the read-only
mount); stopping the embedding server moves answers to the fallback tier (still hybrid,
and saying so) and starting it again brings the primary tier back; `down` then `up` keeps the index (the volume);
nothing is published beyond 127.0.0.1; the app containers run as uid 10001 with every
capability dropped. Prints a table and tears the stack down (volumes included).

Needs DOCKER_HOST pointing at an engine that has the images (see the Makefile target).
Exit 0 when every check passed, 1 otherwise, 2 when the stack could not be started.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "docker-compose.yml"
HEALTHY = ("db", "ollama", "indexer", "mcp")
ONE_SHOT = ("migrate", "ollama-pull")
APP = ("migrate", "indexer", "mcp")
TOOLS = {"search", "get_context", "read_note", "list_notes", "links", "health"}


class CheckFailed(Exception):
    """A check's one-line reason."""


@dataclass
class Result:
    name: str
    ok: bool
    detail: str
    seconds: float


def compose_command() -> list[str]:
    docker = shutil.which("docker")
    probe = [docker or "docker", "compose", "version"]
    if docker is None or subprocess.run(probe, capture_output=True).returncode != 0:
        raise SystemExit(
            "error: the docker compose v2 plugin is not installed (engine.sh installs it)"
        )
    return [docker, "compose"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Stack:
    def __init__(self, project: str, env: dict[str, str]) -> None:
        self.base = [*compose_command(), "-p", project, "-f", str(COMPOSE_FILE)]
        self.env = {**os.environ, **env}

    def compose(self, *args: str, timeout: float = 600, check: bool = True) -> str:
        proc = subprocess.run(
            [*self.base, *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            last = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-3:]
            raise CheckFailed(f"`compose {' '.join(args)}` failed: {' | '.join(last)}")
        return proc.stdout

    def container(self, service: str) -> str:
        ids = self.compose("ps", "-a", "-q", service).split()
        if not ids:
            raise CheckFailed(f"no container for service {service}")
        return ids[0]

    def inspect(self, service: str) -> dict[str, Any]:
        out = subprocess.run(
            ["docker", "inspect", self.container(service)],
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
        )
        return json.loads(out.stdout)[0]

    def exec(self, service: str, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [*self.base, "exec", "-T", service, *cmd],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if check and proc.returncode != 0:
            raise CheckFailed(f"{service}: `{' '.join(cmd)}` failed: {proc.stderr.strip()[-200:]}")
        return proc

    def sql(self, query: str) -> str:
        return self.exec(
            "db", "psql", "-U", "retriever", "-d", "retriever", "-tAc", query
        ).stdout.strip()

    def wait_healthy(self, timeout: float = 300) -> float:
        """Every long-running service healthy and every one-shot exited 0."""
        started = time.monotonic()
        while True:
            pending = []
            for service in (*HEALTHY, *ONE_SHOT):
                state = self.inspect(service)["State"]
                if service in ONE_SHOT:
                    if state["Status"] == "exited" and state["ExitCode"] != 0:
                        raise CheckFailed(
                            f"{service} exited with {state['ExitCode']}: {self.tail(service)}"
                        )
                    if state["Status"] != "exited":
                        pending.append(f"{service}:{state['Status']}")
                    continue
                health = (state.get("Health") or {}).get("Status", "none")
                if health == "unhealthy":
                    raise CheckFailed(f"{service} is unhealthy: {self.tail(service)}")
                if state["Status"] != "running" or health != "healthy":
                    pending.append(f"{service}:{health}")
            if not pending:
                return time.monotonic() - started
            if time.monotonic() - started > timeout:
                raise CheckFailed(f"not healthy after {timeout:.0f} s: {', '.join(pending)}")
            time.sleep(2)

    def tail(self, service: str, lines: int = 3) -> str:
        out = self.compose("logs", "--no-color", "--tail", str(lines), service, check=False)
        return " | ".join(line.strip() for line in out.strip().splitlines()[-lines:])


class Mcp:
    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}/mcp"

    def _run(self, fn: Callable[[Any], Any]) -> Any:
        from fastmcp import Client

        async def go() -> Any:
            async with Client(self.url, timeout=60) as client:
                return await fn(client)

        return asyncio.run(go())

    def tools(self) -> set[str]:
        async def fn(client: Any) -> Any:
            return await client.list_tools()

        return {tool.name for tool in self._run(fn)}

    def search(self, query: str) -> dict[str, Any]:
        async def fn(client: Any) -> Any:
            result = await client.call_tool("search", {"queries": query, "mode": "hybrid"})
            return result.data

        data = self._run(fn)
        if not isinstance(data, dict):
            raise CheckFailed(f"search answered {type(data).__name__}, not an object")
        return data


def paths(answer: dict[str, Any]) -> list[str]:
    return [str(hit.get("citation", "")).rsplit(":", 1)[0] for hit in answer.get("hits", [])]


def poll(predicate: Callable[[], bool], timeout: float, every: float = 1.0) -> float | None:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if predicate():
            return time.monotonic() - started
        time.sleep(every)
    return None


def host_addresses() -> list[str]:
    """This machine's non-loopback IPv4 addresses (where a 0.0.0.0 bind would be reachable)."""
    out = subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split()
    return [a for a in out if "." in a and not a.startswith("127.")]


def reachable(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), 1).close()
        return True
    except OSError:
        return False


def run_checks(stack: Stack, mcp: Mcp, vault: Path, port: int) -> list[Result]:
    results: list[Result] = []

    def check(name: str, fn: Callable[[], str], *, fatal: bool = False) -> bool:
        started = time.monotonic()
        try:
            detail, ok = fn(), True
        except CheckFailed as exc:
            detail, ok = str(exc), False
        except Exception as exc:  # one line per failure, whatever it is
            detail, ok = (
                f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                False,
            )
        results.append(Result(name, ok, detail, time.monotonic() - started))
        print(f"  {'ok  ' if ok else 'FAIL'} {name}: {detail}", flush=True)
        if fatal and not ok:
            raise CheckFailed(f"{name}: {detail}")
        return ok

    def up() -> str:
        stack.compose("up", "-d", "--no-build", timeout=600)
        waited = stack.wait_healthy()
        return f"db, ollama, indexer, mcp healthy; migrate, ollama-pull exited 0 ({waited:.0f} s after up)"

    check("compose up, every healthcheck", up, fatal=True)

    def tools() -> str:
        names = mcp.tools()
        missing = TOOLS - names
        if missing:
            raise CheckFailed(f"missing tools: {sorted(missing)}")
        return f"{len(names)} tools over http://127.0.0.1:{port}/mcp"

    check("MCP lists the tools", tools)

    def hybrid() -> str:
        answer = mcp.search("citation path start end line numbers")
        if answer.get("mode") != "hybrid":
            raise CheckFailed(f"mode {answer.get('mode')!r}: {answer.get('degraded_reason')}")
        if "Citations.md" not in paths(answer)[:3]:
            raise CheckFailed(f"Citations.md not in the top 3: {paths(answer)[:3]}")
        return f"mode hybrid, top hit {paths(answer)[0]}"

    check("hybrid search, example vault", hybrid)

    def tiers() -> str:
        # The indexer fills the fallback tier first, then the primary one.
        query = (
            "SELECT count(DISTINCT e.model)::text || ' ' || (SELECT count(*) FROM passages)"
            " || ' ' || min(n)::text FROM (SELECT model, count(*) AS n FROM embeddings"
            " WHERE part = 0 GROUP BY model) e"
        )
        state: list[str] = []

        def filled() -> bool:
            state[:] = stack.sql(query).split()
            return len(state) == 3 and state[0] == "2" and state[1] == state[2]

        if poll(filled, timeout=120, every=2) is None:
            raise CheckFailed(f"models, passages, fewest vectors: {state}")
        models = stack.sql("SELECT string_agg(model_id, ', ' ORDER BY id) FROM models")
        return f"{state[1]} passages, a vector each from both tiers ({models})"

    check("both embedding tiers filled", tiers)

    def resident() -> str:
        done = stack.exec(
            "mcp", "retriever", "search", "citation line numbers", "--json", check=False
        )
        answer = json.loads(done.stdout)
        if answer.get("via") != "service" or not answer.get("hits"):
            raise CheckFailed(f"via {answer.get('via')!r}, {len(answer.get('hits') or [])} hits")
        return f"`exec mcp retriever search` answered by the resident service ({answer['mode']})"

    check("CLI in the mcp container uses the service", resident)

    marker = f"quokkafjord{uuid.uuid4().hex[:6]}"
    note = f"Standin check {marker}.md"

    def watcher() -> str:
        (vault / note).write_text(
            f"# {marker}\n\nThe {marker} runbook: citations of search results, backups "
            "and the health check of the embedded database.\n"
        )
        (vault / note).chmod(0o644)
        seen = poll(
            lambda: stack.sql(f"SELECT count(*) FROM documents WHERE path = '{note}'") == "1",
            timeout=60,
            every=0.5,
        )
        if seen is None:
            raise CheckFailed(
                f"the indexer did not index {note} within 60 s: {stack.tail('indexer')}"
            )
        answer = mcp.search(marker)
        if note not in paths(answer)[:1]:
            raise CheckFailed(f"search for the new note's word returned {paths(answer)[:3]}")
        if answer.get("mode") != "hybrid":
            raise CheckFailed(f"mode {answer.get('mode')!r}")
        return f"indexed by the watcher {seen:.1f} s after writing, then found first by search"

    check("new note found (watcher)", watcher)

    def read_only() -> str:
        for service in ("indexer", "mcp"):
            proc = stack.exec(service, "sh", "-c", "touch /vault/.write-probe", check=False)
            if proc.returncode == 0:
                raise CheckFailed(f"{service} could write into /vault")
            if "Read-only file system" not in proc.stderr:
                raise CheckFailed(f"{service}: unexpected error {proc.stderr.strip()[-120:]}")
        return "indexer and mcp: writing to /vault fails (Read-only file system)"

    check("vault mounted read-only", read_only)

    def fallback() -> str:
        # A fresh query each time: the server caches query vectors it has already embedded.
        queries = (f"citation line numbers of passage {i}" for i in range(10_000))
        stack.compose("stop", "ollama")
        answer = mcp.search(next(queries))
        tier = (answer.get("mode"), answer.get("tier"))
        if tier != ("hybrid", "fallback") or "fallback model" not in str(
            answer.get("degraded_reason")
        ):
            raise CheckFailed(f"with ollama stopped: {tier}, {answer.get('degraded_reason')!r}")
        if not answer.get("hits"):
            raise CheckFailed("with ollama stopped: no hits")
        reason = str(answer["degraded_reason"])
        stack.compose("start", "ollama")
        stack.wait_healthy()
        back = poll(lambda: mcp.search(next(queries)).get("tier") == "primary", 120, 3)
        if back is None:
            raise CheckFailed(
                "the primary tier did not return within 120 s of ollama being healthy"
            )
        return f"stopped: hybrid from the fallback tier ({reason}); restarted: primary tier again after {back:.0f} s"

    check("embedder down -> fallback tier -> primary", fallback)

    def volume() -> str:
        before = (
            stack.sql("SELECT system_identifier FROM pg_control_system()"),
            stack.sql("SELECT count(*) FROM documents"),
            stack.sql("SELECT count(*) FROM embeddings"),
        )
        stack.compose("down", timeout=300)
        stack.compose("up", "-d", "--no-build", timeout=600)
        stack.wait_healthy()
        after = (
            stack.sql("SELECT system_identifier FROM pg_control_system()"),
            stack.sql("SELECT count(*) FROM documents"),
            stack.sql("SELECT count(*) FROM embeddings"),
        )
        if after[0] != before[0]:
            raise CheckFailed("the database cluster was re-created: the pgdata volume was lost")
        if after[1:] != before[1:]:
            raise CheckFailed(f"documents/embeddings {before[1:]} before, {after[1:]} after")
        if note not in paths(mcp.search(marker))[:1]:
            raise CheckFailed("the new note is no longer found after down/up")
        return f"same cluster, {after[1]} notes and {after[2]} vectors kept, note still found"

    check("down + up keeps the index", volume)

    def loopback() -> str:
        published = []
        for service in (*HEALTHY, *ONE_SHOT):
            ports = stack.inspect(service)["NetworkSettings"].get("Ports") or {}
            for inner, bindings in ports.items():
                for binding in bindings or []:
                    published.append(
                        f"{service} {inner}->{binding['HostIp']}:{binding['HostPort']}"
                    )
                    if binding["HostIp"] != "127.0.0.1":
                        raise CheckFailed(f"{service} publishes {inner} on {binding['HostIp']}")
        if published != [f"mcp 8765/tcp->127.0.0.1:{port}"]:
            raise CheckFailed(f"unexpected published ports: {published}")
        outside = [a for a in host_addresses() if reachable(a, port)]
        if outside:
            raise CheckFailed(f"port {port} answers on {outside}")
        if not reachable("127.0.0.1", port):
            raise CheckFailed(f"port {port} does not answer on 127.0.0.1")
        return (
            f"only {published[0]}; refused on {', '.join(host_addresses()) or 'no other address'}"
        )

    check("nothing beyond 127.0.0.1", loopback)

    def non_root() -> str:
        for service in APP:
            info = stack.inspect(service)
            host = info["HostConfig"]
            if "ALL" not in (host.get("CapDrop") or []):
                raise CheckFailed(f"{service}: cap_drop ALL not applied ({host.get('CapDrop')})")
            if not any("no-new-privileges" in o for o in host.get("SecurityOpt") or []):
                raise CheckFailed(f"{service}: no-new-privileges not applied")
            if info["Config"].get("User") != "retriever":
                raise CheckFailed(f"{service}: image user is {info['Config'].get('User')!r}")
        for service in ("indexer", "mcp"):
            status = stack.exec(
                service, "sh", "-c", "id -u; grep -E '^Cap(Eff|Prm):' /proc/self/status"
            ).stdout.split()
            if (
                status[0] != "10001"
                or status[2] != "0000000000000000"
                or status[4] != "0000000000000000"
            ):
                raise CheckFailed(f"{service}: {' '.join(status)}")
        others = []
        for service in ("db", "ollama"):
            uid = stack.exec(
                service, "sh", "-c", "awk '/^Uid:/{print $2}' /proc/1/status"
            ).stdout.strip()
            others.append(f"{service} uid {uid}")
        return f"migrate/indexer/mcp uid 10001, CapEff 0, no-new-privileges ({', '.join(others)}, as upstream)"

    check("app non-root, caps dropped", non_root)
    return results


def table(results: list[Result]) -> str:
    rows = [("check", "result", "time", "detail")] + [
        (r.name, "PASS" if r.ok else "FAIL", f"{r.seconds:.0f} s", r.detail) for r in results
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = []
    for i, row in enumerate(rows):
        lines.append(
            " | ".join([*(c.ljust(w) for c, w in zip(row[:3], widths, strict=True)), row[3]])
        )
        if i == 0:
            lines.append("-+-".join("-" * w for w in widths) + "-+-" + "-" * 10)
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", default="retriever-check", help="compose project name")
    parser.add_argument("--keep", action="store_true", help="leave the stack running")
    args = parser.parse_args()
    if not os.environ.get("DOCKER_HOST"):
        print(
            "error: set DOCKER_HOST to the engine to use (make compose-test does)", file=sys.stderr
        )
        return 2

    work = Path(tempfile.mkdtemp(prefix="retriever-compose-check-"))
    vault = work / "vault"
    shutil.copytree(ROOT / "examples" / "vault", vault)
    # The container user (uid 10001) must be able to read the copy.
    for path in [work, *vault.rglob("*"), vault]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    port = free_port()
    stack = Stack(args.project, {"VAULT": str(vault), "RETRIEVER_MCP_PORT": str(port)})
    started = time.monotonic()
    print(f"compose check: project {args.project}, vault copy {vault}, MCP port {port}", flush=True)
    results: list[Result] = []
    code = 0
    try:
        stack.compose("down", "-v", "--remove-orphans", check=False)
        results = run_checks(stack, Mcp(port), vault, port)
    except CheckFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        code = 2
    finally:
        if not args.keep:
            stack.compose("down", "-v", "--remove-orphans", timeout=300, check=False)
            shutil.rmtree(work, ignore_errors=True)
    print()
    print(table(results))
    failed = [r for r in results if not r.ok]
    total = time.monotonic() - started
    print(f"\ncompose check took {total:.0f} s")
    print(f"compose-test: {len(results) - len(failed)} passed, {len(failed)} failed")
    return code or (1 if failed else 0)


if __name__ == "__main__":
    sys.exit(main())
