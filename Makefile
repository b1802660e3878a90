# Two entry points (see README): `make demo` and `make test`. Everything else is a step of those.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo setup test test-all typecheck unit e2e-build e2e clean

demo: setup                      ## set up, then simulate the default fleet with the default policy
	$(BIN)/atoll simulate scenarios/kubecon-1000.yaml

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

test: typecheck unit              ## set up and run the tests that are proven green: types, unit + property

test-all: test e2e                ## also e2e on a real Karmada fleet (harness still being finished, see e2e/README)

typecheck: setup
	$(BIN)/mypy

unit: setup
	$(BIN)/pytest -q tests

e2e-build: setup                  ## build/cache Karmada, Kubernetes, kwok, etcd, helm from Go modules
	PATH="$(CURDIR)/$(BIN):$$PATH" e2e/fleet build

e2e: e2e-build
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/pytest -q -m e2e e2e

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache
