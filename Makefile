# The README's commands. Every target creates the virtual environment first if it is missing.
# `make serve` installs the runtime and the local runner only (the project's dependencies and the
# local embedding model); `make test`, `make bench` and the other targets install the test and
# bench tools too (the bench extra is part of it so that the benchmarks' smoke tests run in
# `make test`).
PYTHON ?= python3
# aws-sam-cli is installed separately (see README: Deploy).
SAM ?= sam
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
RUNTIME_STAMP := $(VENV)/.installed-runtime
# checkov (template security scanner, tests/reliability/test_template_scanners.py) pins old boto3,
# botocore, packaging and networkx: it gets a virtual environment of its own inside .venv.
CHECKOV_VERSION := 3.3.30
CHECKOV_VENV := $(VENV)/tools/checkov
# Only `test` and `validate` need it; its stamp names the version, so changing it reinstalls.
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed-$(CHECKOV_VERSION)
# The official MCP conformance suite (npm), run against `serve` by tests/e2e/test_mcp_conformance.py.
# 0.1.12 runs on Node 20; later releases need Node 22. Without npm nothing is installed and the
# test is skipped, saying why.
MCP_CONFORMANCE_VERSION := 0.1.12
MCP_CONFORMANCE_DIR := $(VENV)/tools/mcp-conformance
MCP_CONFORMANCE_STAMP := $(MCP_CONFORMANCE_DIR)/.installed-$(MCP_CONFORMANCE_VERSION)

.PHONY: venv checkov mcp-conformance test lint typecheck serve bench build validate clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $(STAMP) $(RUNTIME_STAMP)

# What `make serve` needs: .[embedding] (the default local embedding provider's model), not dev or bench.
$(RUNTIME_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[embedding]'
	touch $(RUNTIME_STAMP)

checkov: $(CHECKOV_STAMP)

$(CHECKOV_STAMP): $(STAMP)
	test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet 'checkov==$(CHECKOV_VERSION)'
	touch $(CHECKOV_STAMP)

mcp-conformance: $(MCP_CONFORMANCE_STAMP)

$(MCP_CONFORMANCE_STAMP):
	@if command -v npm >/dev/null 2>&1; then \
		mkdir -p $(MCP_CONFORMANCE_DIR) && \
		npm install --prefix $(MCP_CONFORMANCE_DIR) --no-audit --no-fund --save-exact \
			'@modelcontextprotocol/conformance@$(MCP_CONFORMANCE_VERSION)' && \
		touch $(MCP_CONFORMANCE_STAMP); \
	else \
		echo "npm not found: the MCP conformance suite is not installed (its test will be skipped)"; \
	fi

## Run every check CI runs: lint, type check, tests.
test: venv checkov mcp-conformance lint typecheck
	$(BIN)/python -m pytest

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: venv
	$(BIN)/mypy

## Start the local API (moto + local gateway) with a seeded demo workspace.
serve: $(RUNTIME_STAMP)
	$(BIN)/agent-knowledge serve

## Run the performance suite (bench/README.md); `$(BIN)/python -m bench --quick` for a fast run.
bench: venv
	$(BIN)/python -m bench

## Validate the template (cfn-lint with informational rules and checkov, both run by the scanners'
## tests; `make test` runs them too).
validate: venv checkov
	$(BIN)/python -m pytest -q tests/reliability/test_template_scanners.py

## Build the deployable bundle with `sam build` (nothing else first: `make validate` checks the
## template). It needs a python3.12 on PATH, the runtime's version: with pyenv, PYENV_VERSION
## picks the newest 3.12 installed (pyenv resolves a version prefix); `make build PY312=3.12.4`
## for a particular one.
PY312 ?= 3.12
build:
	@PYENV_VERSION=$(PY312) python3.12 --version >/dev/null 2>&1 || { echo "make build: no python3.12 on PATH \
	(sam build needs the runtime's Python 3.12: install one, or with pyenv \`pyenv install 3.12\`)" >&2; exit 1; }
	PYENV_VERSION=$(PY312) $(SAM) build

clean:
	rm -rf $(VENV) .aws-sam .pytest_cache .mypy_cache .ruff_cache
