#!/opt/ollama/bin/python
"""LOCAL STAND-IN for the `ollama` binary of ollama/ollama:0.6.8, embedding API only.

For machines that cannot reach Docker Hub (nor Ollama's model registry): it speaks the part
of Ollama's HTTP API that an embedding client, the compose healthcheck and the `ollama-pull`
one-shot use, over a Model2Vec model made at image build time. Users with Docker Hub run
the real image and never build this.

  ollama serve            listen on $OLLAMA_HOST (the image sets 0.0.0.0:11434, as upstream)
  ollama list             GET /api/tags, printed as a table (the compose healthcheck)
  ollama pull NAME        POST /api/pull, streamed progress (the ollama-pull one-shot)
  ollama --version

Server routes: GET / (and HEAD), GET /api/version, GET /api/tags, GET /api/ps,
POST /api/pull, POST /api/show, DELETE /api/delete, POST /api/embed, POST /api/embeddings.

Faithful where clients can tell: a model must be pulled before it embeds (404 "model ... not
found, try pulling it first" otherwise), pulled models live under $OLLAMA_MODELS (default
/root/.ollama/models, the compose volume) and survive restarts, names without a tag mean
":latest", /api/embed takes a string or a list and returns L2-normalised vectors. Not
faithful: every pulled name is served by the same bundled model (its dimension, not the
real model's), and pulling downloads nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sys
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib import error, request

VERSION = "0.6.8"
MODEL_DIR = Path(os.environ.get("OLLAMA_STANDIN_MODEL", "/usr/share/ollama-standin/model"))
DEFAULT_PORT = 11434


# -- names and hosts ---------------------------------------------------------------------


def canonical(name: str) -> str:
    """'bge-m3' -> 'bge-m3:latest'; a tag or a namespace is kept."""
    name = name.strip()
    last = name.rsplit("/", 1)[-1]
    return name if ":" in last else f"{name}:latest"


def parse_host(value: str | None, *, client: bool) -> tuple[str, int]:
    """OLLAMA_HOST as Ollama reads it: [scheme://]host[:port], default 127.0.0.1:11434."""
    value = (value or "").strip()
    if "://" in value:
        value = value.split("://", 1)[1]
    value = value.rstrip("/")
    host, port = value, DEFAULT_PORT
    if value.count(":") == 1:
        host, raw = value.split(":")
        port = int(raw) if raw else DEFAULT_PORT
    host = host or "127.0.0.1"
    if client and host in ("0.0.0.0", "::", "[::]"):
        host = "127.0.0.1"
    return host, port


def models_root() -> Path:
    return Path(os.environ.get("OLLAMA_MODELS", str(Path.home() / ".ollama" / "models")))


def manifest_path(name: str) -> Path:
    model, tag = canonical(name).rsplit(":", 1)
    namespace, _, base = model.rpartition("/")
    return (
        models_root() / "manifests" / "registry.ollama.ai" / (namespace or "library") / base / tag
    )


# -- server ------------------------------------------------------------------------------


class Backend:
    """The bundled Model2Vec model, loaded once, shared by every pulled name."""

    def __init__(self) -> None:
        import numpy as np
        from model2vec import StaticModel

        self._np = np
        self.model = StaticModel.from_pretrained(str(MODEL_DIR))
        weights = b"".join(p.read_bytes() for p in sorted(MODEL_DIR.glob("*.safetensors")))
        self.weights_digest = hashlib.sha256(weights).hexdigest()
        self.size = len(weights)
        self.dim = int(self.model.dim)
        # Text with no known word gets one fixed direction instead of a zero vector (a zero
        # vector has no cosine); real Ollama models never return zeros either.
        rng = np.random.default_rng(11434)
        fallback = rng.standard_normal(self.dim).astype(np.float32)
        self.fallback = fallback / np.linalg.norm(fallback)
        self.lock = threading.Lock()

    def digest(self, name: str) -> str:
        return hashlib.sha256(f"{self.weights_digest}:{canonical(name)}".encode()).hexdigest()

    def embed(self, texts: list[str]) -> list[list[float]]:
        np = self._np
        if not texts:
            return []
        with self.lock:
            vectors = np.asarray(self.model.encode(texts), dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        ok = np.isfinite(norms) & (norms > 1e-12)
        vectors = np.where(ok, vectors / np.where(ok, norms, 1.0), self.fallback)
        return vectors.tolist()


def pulled() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    root = models_root() / "manifests" / "registry.ollama.ai"
    for path in sorted(root.glob("*/*/*")) if root.is_dir() else []:
        try:
            entry = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        found[entry["name"]] = entry
    return found


def make_handler(backend: Backend) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = f"ollama-standin/{VERSION}"

        def log_message(self, fmt: str, *args: Any) -> None:
            sys.stderr.write(f"[GIN] {self.command} {self.path} {fmt % args}\n")

        # -- plumbing ------------------------------------------------------------
        def reply(self, code: int, obj: Any) -> None:
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def text(self, code: int, body: str) -> None:
            data = body.encode()
            self.send_response(code)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def body(self) -> dict[str, Any]:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            data = json.loads(raw or b"{}")
            if not isinstance(data, dict):
                raise ValueError("request body must be a JSON object")
            return data

        def route(self) -> str:
            return self.path.split("?", 1)[0].rstrip("/") or "/"

        # -- verbs ---------------------------------------------------------------
        def do_HEAD(self) -> None:
            self.do_GET()

        def do_GET(self) -> None:
            path = self.route()
            if path == "/":
                self.text(200, "Ollama is running")
            elif path == "/api/version":
                self.reply(200, {"version": VERSION})
            elif path == "/api/tags":
                self.reply(200, {"models": [self.describe(e) for e in pulled().values()]})
            elif path == "/api/ps":
                self.reply(200, {"models": []})
            else:
                self.text(404, "404 page not found")

        def do_DELETE(self) -> None:
            if self.route() != "/api/delete":
                return self.text(404, "404 page not found")
            name = self.name(self.body())
            path = manifest_path(name)
            if not path.exists():
                return self.reply(404, {"error": f"model '{name}' not found"})
            path.unlink()
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            try:
                req = self.body()
            except ValueError as exc:
                return self.reply(400, {"error": f"invalid request: {exc}"})
            path = self.route()
            if path == "/api/pull":
                return self.pull(req)
            if path == "/api/show":
                entry = pulled().get(canonical(self.name(req)))
                if entry is None:
                    return self.reply(404, {"error": f"model '{self.name(req)}' not found"})
                return self.reply(200, self.show(entry))
            if path in ("/api/embed", "/api/embeddings"):
                return self.embed(req, legacy=path == "/api/embeddings")
            self.text(404, "404 page not found")

        # -- handlers ------------------------------------------------------------
        @staticmethod
        def name(req: dict[str, Any]) -> str:
            return str(req.get("model") or req.get("name") or "")

        def describe(self, entry: dict[str, Any]) -> dict[str, Any]:
            return {
                "name": entry["name"],
                "model": entry["name"],
                "modified_at": entry["modified_at"],
                "size": backend.size,
                "digest": backend.digest(entry["name"]),
                "details": self.details(),
            }

        @staticmethod
        def details() -> dict[str, Any]:
            return {
                "parent_model": "",
                "format": "safetensors",
                "family": "model2vec",
                "families": ["model2vec"],
                "parameter_size": "static",
                "quantization_level": "F32",
            }

        def show(self, entry: dict[str, Any]) -> dict[str, Any]:
            return {
                "license": "",
                "modelfile": f"# local stand-in: Model2Vec model served as {entry['name']}\n",
                "parameters": "",
                "template": "",
                "details": self.details(),
                "model_info": {
                    "general.architecture": "model2vec",
                    "model2vec.embedding_length": backend.dim,
                },
                "capabilities": ["embedding"],
                "modified_at": entry["modified_at"],
            }

        def pull(self, req: dict[str, Any]) -> None:
            name = self.name(req)
            if not name:
                return self.reply(400, {"error": "model is required"})
            full = canonical(name)
            path = manifest_path(full)
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists():
                entry = {"name": full, "modified_at": datetime.now(UTC).isoformat()}
                path.write_text(json.dumps(entry))
            digest = backend.digest(full)
            steps = [
                {"status": "pulling manifest"},
                {
                    "status": f"pulling {digest[:12]}",
                    "digest": f"sha256:{digest}",
                    "total": backend.size,
                    "completed": backend.size,
                },
                {"status": "verifying sha256 digest"},
                {"status": "writing manifest"},
                {"status": "success"},
            ]
            if req.get("stream") is False:
                return self.reply(200, steps[-1])
            self.send_response(200)
            self.send_header("Content-Type", "application/x-ndjson")
            self.send_header("Connection", "close")
            self.end_headers()
            for step in steps:
                self.wfile.write(json.dumps(step).encode() + b"\n")
                self.wfile.flush()
            self.close_connection = True

        def embed(self, req: dict[str, Any], *, legacy: bool) -> None:
            name = self.name(req)
            if not name:
                return self.reply(400, {"error": "model is required"})
            if canonical(name) not in pulled():
                return self.reply(404, {"error": f'model "{name}" not found, try pulling it first'})
            raw = req.get("prompt") if legacy else req.get("input")
            if raw is None:
                raw = [] if not legacy else ""
            texts = [raw] if isinstance(raw, str) else raw
            if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
                return self.reply(400, {"error": "invalid input type"})
            started = time.perf_counter_ns()
            vectors = backend.embed(texts)
            if legacy:
                return self.reply(200, {"embedding": vectors[0] if vectors else []})
            self.reply(
                200,
                {
                    "model": name,
                    "embeddings": vectors,
                    "total_duration": time.perf_counter_ns() - started,
                    "load_duration": 0,
                    "prompt_eval_count": sum(len(t.split()) for t in texts),
                },
            )

    return Handler


def serve() -> int:
    host, port = parse_host(os.environ.get("OLLAMA_HOST"), client=False)
    backend = Backend()
    server = ThreadingHTTPServer((host, port), make_handler(backend))
    server.daemon_threads = True

    def stop(signum: int, _frame: object) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    # PID 1 in a container gets no default signal handling: say what SIGTERM/SIGINT mean.
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(
        f"Listening on {host}:{port} (version {VERSION}, local stand-in: Model2Vec "
        f"{backend.dim} dimensions, models in {models_root()})",
        flush=True,
    )
    server.serve_forever()
    server.server_close()
    return 0


# -- client ------------------------------------------------------------------------------


def _url(path: str) -> str:
    host, port = parse_host(os.environ.get("OLLAMA_HOST"), client=True)
    return f"http://{host}:{port}{path}"


def _fail(message: str) -> int:
    print(f"Error: {message}", file=sys.stderr)
    return 1


def _age(iso: str) -> str:
    try:
        seconds = (datetime.now(UTC) - datetime.fromisoformat(iso)).total_seconds()
    except ValueError:
        return "unknown"
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if n > 1 else ''} ago"
    return "Less than a minute ago"


def list_models() -> int:
    try:
        with request.urlopen(_url("/api/tags"), timeout=10) as resp:
            models = json.load(resp)["models"]
    except (error.URLError, OSError):
        return _fail("could not connect to ollama app, is it running?")
    rows = [("NAME", "ID", "SIZE", "MODIFIED")] + [
        (m["name"], m["digest"][:12], f"{m['size'] / 1e6:.0f} MB", _age(m["modified_at"]))
        for m in models
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for row in rows:
        print("    ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return 0


def pull(name: str) -> int:
    body = json.dumps({"model": name, "stream": True}).encode()
    req = request.Request(_url("/api/pull"), data=body, method="POST")
    req.add_header("Content-Type", "application/json")
    try:
        with request.urlopen(req, timeout=600) as resp:
            for line in resp:
                if not line.strip():
                    continue
                step = json.loads(line)
                if "error" in step:
                    return _fail(step["error"])
                print(step.get("status", ""), flush=True)
    except error.HTTPError as exc:
        return _fail(json.loads(exc.read() or b"{}").get("error", f"HTTP {exc.code}"))
    except (error.URLError, OSError):
        return _fail("could not connect to ollama app, is it running?")
    return 0


USAGE = """Usage: ollama [serve | list | pull MODEL | --version]
(local stand-in for ollama/ollama: embedding API only)"""


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    command, args = argv[0], argv[1:]
    if command in ("-v", "--version", "version"):
        print(f"ollama version is {VERSION} (local stand-in)")
        return 0
    if command == "serve":
        return serve()
    if command in ("list", "ls"):
        return list_models()
    if command == "pull" and len(args) == 1:
        return pull(args[0])
    print(USAGE, file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
