# retriever — the two commands a newcomer needs:
#   make run [VAULT=path]   set up, index the vault on the embedded database, serve MCP
#   make test               set up and run the tests (and lint)
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
VAULT ?= examples/vault
PORT ?= 8765
CORPUS ?= ../shared/corpora/win32-17k
MODEL ?= ../shared/models/m2v-minilm-256
CASES ?= ../shared/corpora/dendron-vault-cases.jsonl

.PHONY: install run index serve test test-fast faults lint format compose-test test-containers engine engine-stop bench bench-index bench-equivalence bench-quality bench-hooks bench-cli bench-calibration bench-redaction calibrate eval up down logs clean

$(BIN)/retriever: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	@touch $@

install: $(BIN)/retriever

run: install
	$(BIN)/retriever index "$(VAULT)" || [ $$? -eq 1 ]
	$(BIN)/retriever status "$(VAULT)" || [ $$? -eq 1 ]
	RETRIEVER_VAULT="$(VAULT)" $(BIN)/retriever mcp --http --port $(PORT) --print-config

index: install
	$(BIN)/retriever index "$(VAULT)"

serve: install
	RETRIEVER_VAULT="$(VAULT)" $(BIN)/retriever mcp --http --port $(PORT) --print-config

# The pure stages only: no PostgreSQL, no subprocess that starts one (about a minute).
test-fast: install
	$(BIN)/pytest -q -m "not db and not server and not docker"

test: install
	$(BIN)/ruff check $(LINTED)
	$(BIN)/mypy
	$(BIN)/pytest -q

# The fault-injection suite at full size (tests/faults, and the kill -9 / Ctrl-C tests):
# kills, starves and fills every component, checks the index converges to a clean one, and
# prints a table (fault, runs, converged, lost, wrong answers, recovery time). `make test`
# runs its fast subset.
faults: install
	$(BIN)/pytest -m faults --faults-full -rs -q

LINTED := retriever healthcheck migrations tests benchmarks services

lint: install
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)
	$(BIN)/mypy

format: install
	$(BIN)/ruff format $(LINTED)
	$(BIN)/ruff check --fix $(LINTED)

# The container stack and the testcontainers path, on a Docker engine of the project's own
# at DOCKER_ENGINE_HOST (never the default socket; started, as root, when missing; the
# targets skip with a reason when it cannot start). Images: the pinned upstream ones, or
# the local stand-ins of services/standins/ where Docker Hub is out of reach.
DOCKER_ENGINE_HOST ?= unix:///var/run/retriever-docker.sock
CONTAINERS := RETRIEVER_DOCKER_HOST=$(DOCKER_ENGINE_HOST) BIN=$(BIN) services/containers.sh
PYTEST_CONTAINERS ?= -m "db or docker"

compose-test: install
	$(CONTAINERS) compose-test

test-containers: install
	$(CONTAINERS) test-containers $(PYTEST_CONTAINERS)

engine:
	RETRIEVER_DOCKER_HOST=$(DOCKER_ENGINE_HOST) services/engine.sh start

engine-stop:
	RETRIEVER_DOCKER_HOST=$(DOCKER_ENGINE_HOST) services/engine.sh stop

# Benchmarks (not tests): figures side by side with the plain SQLite reference.
bench: install
	$(BIN)/python -m benchmarks.bench_search --corpus "$(CORPUS)" --model "$(MODEL)"

bench-index: install
	$(BIN)/python -m benchmarks.bench_index --corpus "$(CORPUS)" --model "$(MODEL)"

# Chunker equivalence: our block parsing against stock markdown-it on every note.
bench-equivalence: install
	$(BIN)/python -m benchmarks.chunker_equivalence tests/vault ../shared/corpora/dendron-vault "$(CORPUS)"

# Redaction on documentation corpora (every hit a false-positive candidate, shown with its
# context), CPU throughput, and the same figures for the redactor at BASELINE (a git ref).
REDACTION_CORPORA ?= ../shared/corpora/dendron-vault $(CORPUS)
BASELINE ?= main
bench-redaction: install
	$(BIN)/python -m benchmarks.bench_redaction $(REDACTION_CORPORA) --baseline "$(BASELINE)" --samples 20

bench-hooks: install
	$(BIN)/python -m benchmarks.bench_hooks --vault tests/vault --runs 30

# Whole-command latency: warm resident service vs in-process, first call, files mode.
bench-cli: install
	$(BIN)/python -m benchmarks.bench_cli --vault ../shared/corpora/dendron-vault --model "$(MODEL)" \
		--files-corpus "$(CORPUS)"

# Does calibration transfer? Pseudo-query nDCG next to real-question nDCG for every
# candidate ranking (MODEL may be ollama:all-minilm with the compat server running).
STUDY_HOME ?= .retriever/calibration-study
bench-calibration: install
	RETRIEVER_HOME="$(STUDY_HOME)" RETRIEVER_EMBED_MODEL="$(MODEL)" RETRIEVER_CALIBRATE=false \
		$(BIN)/retriever index ../shared/corpora/dendron-vault || [ $$? -eq 1 ]
	$(BIN)/python -m benchmarks.calibration_study --home "$(STUDY_HOME)" --model "$(MODEL)" \
		--vault ../shared/corpora/dendron-vault --cases "$(CASES)"

calibrate: install
	$(BIN)/retriever calibrate "$(VAULT)"

bench-quality: install
	$(BIN)/python -m benchmarks.quality --corpus ../shared/corpora/dendron-vault --model "$(MODEL)" --cases "$(CASES)"

eval: install
	RETRIEVER_EMBED_MODEL="$(MODEL)" $(BIN)/retriever eval "$(CASES)" --vault "$(VAULT)" --ablate

# Containerised stack (needs a Docker engine).
up:
	VAULT="$(VAULT)" docker compose up -d --build
down:
	docker compose down
logs:
	docker compose logs -f --tail=200

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
