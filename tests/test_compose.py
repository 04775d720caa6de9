"""Static checks of docker-compose.yml, its Model2Vec override and the app Dockerfile.

These guard the deployment's safety properties (pinned images, loopback-only ports,
read-only vault, non-root app, health-gated start-up) without needing Docker. The one
test that does need an engine skips with a reason when none answers.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker-compose.yml"
OVERRIDE = ROOT / "services" / "compose.model2vec.yml"
DOCKERFILE = ROOT / "services" / "app" / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"

APP_SERVICES = ("migrate", "indexer", "mcp")
ONE_SHOT = {"migrate", "ollama-pull"}
LONG_RUNNING = {"db", "ollama", "indexer", "mcp"}
EXPECTED_DEPENDS = {
    "ollama-pull": {"ollama": "service_healthy"},
    "migrate": {"db": "service_healthy"},
    # The indexer and the MCP server never wait for Ollama: the fallback tier answers until
    # the model is pulled.
    "indexer": {"db": "service_healthy", "migrate": "service_completed_successfully"},
    "mcp": {"db": "service_healthy", "migrate": "service_completed_successfully"},
}


def _load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict), f"{path.name} is not a mapping"
    return data


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return _load(COMPOSE)


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


def _split_image(ref: str) -> tuple[str, str | None, str | None]:
    """(name, tag, digest) of an image reference; a registry port is not a tag."""
    name, _, digest = ref.partition("@")
    last = name.rsplit("/", 1)[-1]
    tag = None
    if ":" in last:
        name, tag = name.rsplit(":", 1)
    return name, tag, digest or None


def _image_default(ref: str) -> tuple[str | None, str]:
    """(variable, default) of `${VAR:-default}`; (None, ref) for a literal image name."""
    m = re.fullmatch(r"\$\{(\w+):-([^}]+)\}", ref)
    return (m[1], m[2]) if m else (None, ref)


def _volume_target(vol: str | dict[str, Any]) -> tuple[str, bool]:
    """(container path, read-only?) for short or long volume syntax."""
    if isinstance(vol, dict):
        return str(vol.get("target", "")), bool(vol.get("read_only", False))
    # Split from the right: the source may contain ${VAR:-default} with colons.
    parts = vol.rsplit(":", 2)
    if len(parts) == 3 and set(parts[2].split(",")) <= {"ro", "rw", "z", "Z", "nocopy"}:
        return parts[1], "ro" in parts[2].split(",")
    return vol.rsplit(":", 1)[-1], False


def _healthcheck_text(svc: dict[str, Any]) -> str:
    test = svc["healthcheck"]["test"]
    return " ".join(test) if isinstance(test, list) else str(test)


# -- compose file -----------------------------------------------------------------------


def test_compose_parses_and_has_the_services(services: dict[str, Any]) -> None:
    assert set(services) == {"db", "ollama", "ollama-pull", "migrate", "indexer", "mcp"}


def test_every_image_is_pinned(services: dict[str, dict[str, Any]]) -> None:
    for name, svc in services.items():
        ref = svc.get("image")
        if ref is None:
            assert "build" in svc, f"{name}: neither image nor build"
            continue
        _, tag, digest = _split_image(_image_default(ref)[1])
        if digest:
            assert re.fullmatch(r"sha256:[0-9a-f]{64}", digest), f"{name}: bad digest {ref}"
            continue
        assert tag, f"{name}: image {ref!r} has no tag"
        assert tag != "latest", f"{name}: image {ref!r} uses latest"
        if "build" not in svc:  # pulled images need an exact version, not a moving tag
            assert re.search(r"\d+\.\d+", tag), f"{name}: {ref!r} is not an exact version"


def test_image_names_are_overridable_with_upstream_defaults(
    services: dict[str, dict[str, Any]],
) -> None:
    # Machines without Docker Hub substitute local stand-ins; users change nothing.
    expected = {
        "db": ("RETRIEVER_DB_IMAGE", "pgvector/pgvector:0.8.0-pg17"),
        "ollama": ("RETRIEVER_OLLAMA_IMAGE", "ollama/ollama:0.6.8"),
        "ollama-pull": ("RETRIEVER_OLLAMA_IMAGE", "ollama/ollama:0.6.8"),
        **{name: ("RETRIEVER_APP_IMAGE", "retriever-app:local") for name in APP_SERVICES},
    }
    assert {name: _image_default(svc["image"]) for name, svc in services.items()} == expected
    args, _ = _dockerfile_stages()
    for name in APP_SERVICES:
        build_arg = services[name]["build"]["args"]["PYTHON_IMAGE"]
        assert _image_default(build_arg) == ("RETRIEVER_PYTHON_IMAGE", args["PYTHON_IMAGE"])


def test_published_ports_are_loopback_only(services: dict[str, dict[str, Any]]) -> None:
    published = 0
    for name, svc in services.items():
        assert svc.get("network_mode") != "host", f"{name}: host networking bypasses this"
        for port in svc.get("ports", []):
            published += 1
            if isinstance(port, dict):
                assert port.get("host_ip") == "127.0.0.1", f"{name}: {port}"
            else:
                assert str(port).startswith("127.0.0.1:"), f"{name}: {port!r} not on loopback"
    assert published == 1  # only the MCP endpoint


def test_db_and_ollama_publish_nothing(services: dict[str, dict[str, Any]]) -> None:
    for name in ("db", "ollama"):
        assert not services[name].get("ports"), f"{name} must not publish ports"
        assert not services[name].get("expose"), f"{name}: no extra exposure needed"


def test_mcp_listens_inside_and_is_published_on_loopback(
    services: dict[str, dict[str, Any]],
) -> None:
    mcp = services["mcp"]
    assert mcp["command"] == [
        "retriever",
        *("serve", "--mcp", "--host", "0.0.0.0", "--port", "8765"),
    ]
    assert mcp["ports"] == ["127.0.0.1:${RETRIEVER_MCP_PORT:-8765}:8765"]


def test_one_shot_and_long_running_services(services: dict[str, dict[str, Any]]) -> None:
    # One-shot = runs once and exits; everything else must stay up. Only the schema is
    # waited for: the Ollama pull runs beside the app (the fallback tier answers meanwhile).
    completed = {
        dep
        for svc in services.values()
        for dep, spec in (svc.get("depends_on") or {}).items()
        if isinstance(spec, dict) and spec.get("condition") == "service_completed_successfully"
    }
    assert completed == {"migrate"}
    assert {n for n, s in services.items() if s.get("restart") == "no"} == ONE_SHOT
    assert set(services) - ONE_SHOT == LONG_RUNNING
    for name in ONE_SHOT:
        assert services[name].get("restart", "no") == "no", f"{name} must not restart"
    for name in LONG_RUNNING:
        svc = services[name]
        assert svc.get("restart") == "unless-stopped", f"{name}: restart policy"
        hc = svc.get("healthcheck")
        assert hc and not hc.get("disable") and hc.get("test"), f"{name}: needs a healthcheck"


def test_app_healthchecks_treat_only_down_as_unhealthy(
    services: dict[str, dict[str, Any]],
) -> None:
    for name in ("indexer", "mcp"):
        text = _healthcheck_text(services[name])
        assert services[name]["healthcheck"]["test"][0] == "CMD-SHELL"
        assert "retriever health --json" in text, name
        assert "-eq 1" in text or "-le 1" in text, f"{name}: exit 1 (degraded) must pass"
    assert "pg_isready" in _healthcheck_text(services["db"])
    assert "ollama" in _healthcheck_text(services["ollama"])


def test_healthcheck_dollars_are_escaped_for_compose(
    services: dict[str, dict[str, Any]],
) -> None:
    # A bare $? would be eaten by compose interpolation; the shell must receive it.
    for name, svc in services.items():
        if "healthcheck" in svc:
            text = _healthcheck_text(svc)
            assert not re.search(r"(?<!\$)\$(?!\$)", text.replace("$$", "")), name


def test_vault_is_mounted_read_only_everywhere(services: dict[str, dict[str, Any]]) -> None:
    mounted = []
    for name, svc in services.items():
        for vol in svc.get("volumes", []):
            target, read_only = _volume_target(vol)
            if target == "/vault":
                mounted.append(name)
                assert read_only, f"{name}: vault must be mounted :ro"
                assert isinstance(vol, str) and vol.startswith("${VAULT:-./examples/vault}:")
    assert sorted(mounted) == ["indexer", "mcp"]


def test_data_lives_in_named_volumes(compose: dict[str, Any]) -> None:
    services = compose["services"]
    named = set(compose.get("volumes") or {})
    assert any(str(v).startswith("pgdata:") for v in services["db"]["volumes"])
    assert any(str(v).startswith("ollama:/root/.ollama") for v in services["ollama"]["volumes"])
    assert {"pgdata", "ollama"} <= named


def test_depends_on_conditions(services: dict[str, dict[str, Any]]) -> None:
    for name, svc in services.items():
        deps = svc.get("depends_on") or {}
        assert isinstance(deps, dict), f"{name}: use the long depends_on form with conditions"
        got = {dep: spec.get("condition") for dep, spec in deps.items()}
        assert got == EXPECTED_DEPENDS.get(name, {}), name


def test_app_environment(services: dict[str, dict[str, Any]]) -> None:
    expected = {
        "DATABASE_URL": "postgresql://retriever:${POSTGRES_PASSWORD:-retriever}@db:5432/retriever",
        "RETRIEVER_VAULT": "/vault",
        "RETRIEVER_EMBED_MODEL": "ollama:${RETRIEVER_OLLAMA_MODEL:-bge-m3:567m}",
        "RETRIEVER_EMBED_DIM": "${RETRIEVER_OLLAMA_DIM:-1024}",
        "RETRIEVER_OLLAMA_URL": "http://ollama:11434",
    }
    for name in APP_SERVICES:
        svc = services[name]
        env = svc["environment"]
        assert {k: env.get(k) for k in expected} == expected, name
        assert svc["build"]["dockerfile"] == "services/app/Dockerfile"
    assert services["indexer"]["command"] == ["retriever", "watch", "--vault", "/vault"]
    assert services["migrate"]["command"] == ["retriever", "db", "upgrade"]
    db_env = services["db"]["environment"]
    assert db_env["POSTGRES_PASSWORD"] == "${POSTGRES_PASSWORD:-retriever}"
    assert services["ollama-pull"]["command"] == ["pull", "${RETRIEVER_OLLAMA_MODEL:-bge-m3:567m}"]


def test_ollama_model_is_pinned_by_an_exact_tag(services: dict[str, dict[str, Any]]) -> None:
    """Never :latest, nor a bare name (which means :latest)."""
    default = re.search(r"RETRIEVER_OLLAMA_MODEL:-([^}]+)\}", services["ollama-pull"]["command"][1])
    assert default is not None
    name, _, tag = default[1].partition(":")
    assert name and tag and tag != "latest"


def test_no_secrets_or_privileges_in_app(services: dict[str, dict[str, Any]]) -> None:
    for name in APP_SERVICES:
        svc = services[name]
        assert not svc.get("privileged"), name
        assert svc.get("user") in (None, "retriever", "10001"), name


# -- Model2Vec override -------------------------------------------------------------------


def test_model2vec_override_drops_ollama() -> None:
    override = _load(OVERRIDE)["services"]
    for name in ("ollama", "ollama-pull"):
        assert override[name]["profiles"] == ["ollama"]
    bundled = _fallback_dir()
    for name in APP_SERVICES:
        env = override[name]["environment"]
        # The model the image carries: no hub download at run time.
        assert env["RETRIEVER_EMBED_MODEL"] == bundled
        assert env["RETRIEVER_EMBED_DIM"] == ""  # Ollama's expected dimension does not apply
        assert "depends_on" not in override[name]


def _fallback_dir() -> str:
    found = re.findall(r"ARG FALLBACK_MODEL_DIR=(\S+)", DOCKERFILE.read_text())
    assert found and len(set(found)) == 1, "one FALLBACK_MODEL_DIR default in both stages"
    return str(found[0])


def test_image_carries_the_fallback_model() -> None:
    _, stages = _dockerfile_stages()
    builder, final = "\n".join(stages[0]), "\n".join(stages[-1])
    assert "save_pretrained" in builder and "FALLBACK_MODEL_STANDIN" in builder
    assert "chmod -R a+rX /opt/retriever/models" in builder  # readable by uid 10001
    assert "COPY --from=builder /opt/retriever/models /opt/retriever/models" in final
    assert "ENV RETRIEVER_FALLBACK_MODEL=${FALLBACK_MODEL_DIR}" in final
    assert _fallback_dir().startswith("/opt/retriever/models/")
    # The stand-in build reads these from the context; nothing else of tests/ goes in.
    ignore = DOCKERIGNORE.read_text().splitlines()
    assert {"!tests/model_factory.py", "!tests/vault", "!examples/vault"} <= set(ignore)


# -- Dockerfile ---------------------------------------------------------------------------


def _dockerfile_stages() -> tuple[dict[str, str], list[list[str]]]:
    """(global ARG defaults, instructions per stage), continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    args: dict[str, str] = {}
    stages: list[list[str]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            stages.append([line])
        elif stages:
            stages[-1].append(line)
        elif m := re.match(r"ARG\s+(\w+)=(\S+)", line, re.IGNORECASE):
            args[m[1]] = m[2]
    return args, stages


def _base_image(from_line: str, args: dict[str, str]) -> str:
    ref = from_line.split()[1]
    return re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m[1], m[0]), ref)


def test_dockerfile_is_multi_stage_and_pinned() -> None:
    args, stages = _dockerfile_stages()
    assert len(stages) >= 2, "builder + final stage expected"
    assert re.search(r"\bAS\s+builder\b", stages[0][0], re.IGNORECASE)
    for stage in stages:
        image = _base_image(stage[0], args)
        _, tag, digest = _split_image(image)
        assert digest or (tag and re.match(r"3\.11\.\d+-slim", tag)), f"unpinned base {image}"


def test_dockerfile_final_stage_is_non_root_and_lean() -> None:
    _, stages = _dockerfile_stages()
    final = stages[-1]
    users = [line.split(None, 1)[1] for line in final if line.upper().startswith("USER ")]
    assert users, "final stage must switch USER"
    assert users[-1].split(":")[0] not in {"root", "0"}
    assert any("--uid 10001" in line for line in final), "fixed uid 10001 expected"
    body = "\n".join(final)
    assert "COPY --from=builder /opt/venv /opt/venv" in body
    for tool in ("build-essential", "gcc", "g++", "apt-get install"):
        assert tool not in body, f"final stage must not install {tool}"


def test_dockerignore_keeps_context_clean() -> None:
    entries = {line.strip() for line in DOCKERIGNORE.read_text().splitlines() if line.strip()} - {
        ""
    }
    assert {".venv", ".git", "**/__pycache__", ".pytest_cache", "tests"} <= entries


# -- with a Docker engine -----------------------------------------------------------------


def _docker_or_skip() -> str:
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("no Docker engine: the docker CLI is not installed")
    try:
        info = subprocess.run([docker, "info"], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.skip("no Docker engine: `docker info` did not answer within 20 s")
    if info.returncode != 0:
        reason = (info.stderr.strip().splitlines() or ["unknown error"])[-1]
        pytest.skip(f"no Docker engine: `docker info` failed ({reason})")
    plugin = subprocess.run(
        [docker, "compose", "version"], capture_output=True, text=True, timeout=20
    )
    if plugin.returncode != 0:
        pytest.skip("Docker engine answers but the compose plugin is missing")
    return docker


@pytest.mark.docker
@pytest.mark.parametrize("files", [[COMPOSE], [COMPOSE, OVERRIDE]], ids=["ollama", "model2vec"])
def test_docker_compose_config_is_valid(files: list[Path]) -> None:
    docker = _docker_or_skip()
    cmd = [docker, "compose"]
    for f in files:
        cmd += ["-f", str(f)]
    result = subprocess.run(
        [*cmd, "config", "--quiet"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
