# Two commands do all set-up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
AGENT ?= gemini
WORKFLOW ?= waaah-orc
CLI_DIR := .cache/clis
# The suite's workers: one per core, at most 4 (each test file runs on one worker, in order).
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ $$n -gt 4 ] && n=4; echo $$n)
PYTEST := $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile
export PATH := $(PATH):$(abspath $(CLI_DIR))/node_modules/.bin

.PHONY: run test lint unit runtime e2e clis clis-extra clis-old browser systemd-tools image image-test demo bench venv clean

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml setup.py waaah_agent/core/supervise/_jsonbytes.c waaah_agent/core/secrets/_visible.c \
  waaah_agent/runtime/supervise/_ptyread.c
	@echo "waaah: setting up $(VENV) (the Python packages; about a minute the first time)"
	@set -e; start=$$(date +%s); \
	  test -x $(BIN)/python || $(PYTHON) -m venv $(VENV); \
	  $(BIN)/pip install -q --upgrade pip; \
	  $(BIN)/pip install -q -e '.[dev]'; \
	  echo "waaah: $(VENV) ready ($$(( $$(date +%s) - start )) s)"
	@touch $@

## Start a supervised session (AGENT=gemini|claude|codex|opencode, WORKFLOW=<name>, ARGS=extra waaah flags).
run: venv
	@command -v $(AGENT) >/dev/null 2>&1 || scripts/install_clis.sh $(AGENT)
	@echo "waaah: starting $(AGENT) with the $(WORKFLOW) workflow (Ctrl+C for the menu)"
	@WAAAH_VIA_MAKE=1 $(BIN)/waaah agent --start=$(AGENT) --as=$(WORKFLOW) $(ARGS)

## The whole suite: lint, type checks, unit, runtime (real PTY) and e2e (real CLIs, offline).
test: venv lint clis clis-extra clis-old browser systemd-tools
	$(PYTEST)

lint: venv
	$(BIN)/ruff check waaah_agent tests scripts setup.py
	$(BIN)/ruff format --check waaah_agent tests scripts setup.py
	$(BIN)/mypy waaah_agent

unit: venv
	$(PYTEST) tests/unit

runtime: venv browser systemd-tools
	$(PYTEST) tests/runtime

e2e: venv clis clis-extra clis-old
	$(PYTEST) tests/e2e

## Install the pinned real CLIs into .cache/clis (reused on later runs).
clis:
	scripts/install_clis.sh

## Also codex and opencode (~600 MB; `make test` installs them too; `make run AGENT=codex` installs just that one).
clis-extra:
	scripts/install_clis.sh extra

## Debian's chromium, which the `waaah report --html` test opens headless (apt; needs root or sudo).
browser:
	@scripts/install_browser.sh

## Debian's systemd tools (systemd-analyze, systemd-escape) the service tests read the units with (apt).
systemd-tools:
	@scripts/install_systemd_tools.sh

## The container image (deploy/container/Containerfile) with buildah, its base from Debian's packages.
## Minutes, and root: not part of `make test`.
image:
	scripts/build_image.sh

## The image's entrypoint run from its own root file system (tests/image).
image-test: venv image
	WAAAH_IMAGE=$${WAAAH_IMAGE:-localhost/waaah-agent:dev} $(BIN)/python -m pytest tests/image -s

## Older releases of gemini, claude and codex the e2e core scenarios also run (.cache/clis-old; docs/supervisor.md "CLI releases").
clis-old:
	scripts/install_clis.sh old

## The supervisor over a bundled SIMULATED agent (no account, no model needed); its screen says what to try.
demo: venv
	@echo "waaah: the demo agent has no model; try /crash 1, /limit try again in 2 minutes, hello, /quit, Ctrl+C"
	SIM_DEMO=1 $(BIN)/waaah agent --start=simulated --as=$(WORKFLOW) $(ARGS)

bench: venv
	$(BIN)/python scripts/bench_relay.py
	$(BIN)/python scripts/bench_machine.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
