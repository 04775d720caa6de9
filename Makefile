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

.PHONY: install run index serve test lint format bench bench-index bench-equivalence bench-quality bench-hooks bench-cli bench-calibration calibrate eval up down logs clean

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

test: install
	$(BIN)/ruff check retriever healthcheck migrations tests benchmarks
	$(BIN)/pytest -q

lint: install
	$(BIN)/ruff check retriever healthcheck migrations tests benchmarks
	$(BIN)/ruff format --check retriever healthcheck migrations tests benchmarks

format: install
	$(BIN)/ruff format retriever healthcheck migrations tests benchmarks
	$(BIN)/ruff check --fix retriever healthcheck migrations tests benchmarks

# Benchmarks (not tests): figures side by side with the plain SQLite reference.
bench: install
	$(BIN)/python -m benchmarks.bench_search --corpus "$(CORPUS)" --model "$(MODEL)"

bench-index: install
	$(BIN)/python -m benchmarks.bench_index --corpus "$(CORPUS)" --model "$(MODEL)"

# Chunker equivalence: our block parsing against stock markdown-it on every note.
bench-equivalence: install
	$(BIN)/python -m benchmarks.chunker_equivalence tests/vault ../shared/corpora/dendron-vault "$(CORPUS)"

bench-hooks: install
	$(BIN)/python -m benchmarks.bench_hooks --vault tests/vault --runs 30

bench-cli: bench-hooks

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
