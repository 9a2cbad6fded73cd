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

.PHONY: rehearse run test venv synth lambda-deps report pull-results clean-venv

$(BIN)/python:
	$(PY) -m venv $(VENV)

# Core + local CPU ML stack: what `make run` needs.
$(VENV)/.stamp-run: pyproject.toml constraints.txt | $(BIN)/python
	$(PIP) install -c constraints.txt "torch==2.13.0"
	$(PIP) install -c constraints.txt -e ".[local]"
	@touch $@

# Everything the test suite needs (adds Lambda, CDK and test toolchains).
$(VENV)/.stamp-test: pyproject.toml constraints.txt $(VENV)/.stamp-run
	$(PIP) install -c constraints.txt -e ".[local,lambda,cdk,test]"
	@touch $@

venv: $(VENV)/.stamp-test

run: $(VENV)/.stamp-run
	$(BIN)/neuronpipe run --local --profile $(PROFILE) --results $(RESULTS) --report $(REPORT_DIR)

test: $(VENV)/.stamp-test
	$(BIN)/python -m pytest -q

# Offline synth for review: no Lambda layer needed (these templates must not be deployed; `cdk deploy`
# synthesizes again with require_lambda_deps=true and refuses without `make lambda-deps`).
synth: $(VENV)/.stamp-test
	$(BIN)/python -m infra.app --outdir cdk.out --setting require_lambda_deps=false

# Third-party packages for the Lambda layer (pip for the Lambda platform; needs the package registry).
lambda-deps: $(VENV)/.stamp-test
	$(BIN)/python -m infra.bundling deps

report: $(VENV)/.stamp-run
	$(BIN)/neuronpipe report --results $(RESULTS) --out $(REPORT_DIR)

pull-results: $(VENV)/.stamp-run
	@test -n "$(BUCKET)" || { echo "set BUCKET=<results bucket>"; exit 2; }
	$(BIN)/neuronpipe pull --from s3://$(BUCKET)/results --to $(RESULTS)

clean-venv:
	rm -rf $(VENV)

# The AWS run of a request, rehearsed on this machine (moto + sandboxed boxes): `make rehearse INPUT=run.json`.
rehearse: $(VENV)/.stamp-test
	$(BIN)/neuronpipe rehearse --no-live $(if $(INPUT),--input $(INPUT))
