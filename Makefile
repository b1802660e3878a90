# Two entry points (see README): `make demo` and `make test`. Everything else is a step of those.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# named by pyproject.toml's content, not compared by date: a fresh checkout (a clone, a git worktree sharing a
# venv) gives pyproject.toml a new mtime without changing what is installed
STAMP  := $(VENV)/.installed-$(shell sha256sum pyproject.toml | cut -c1-16)

.PHONY: demo setup test test-all typecheck unit e2e-build e2e clean image image-constraints browser-deps

demo: setup                      ## set up, then simulate the default fleet with the default policy
	$(BIN)/atoll simulate scenarios/kubecon-1000.yaml

setup: $(STAMP)

$(STAMP):
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	rm -f $(VENV)/.installed $(VENV)/.installed-*
	touch $@

# e2e-build before unit: the chart tests render charts/atoll with the helm it builds
test: typecheck e2e-build browser-deps unit e2e  ## set up and run everything: types, unit + property, e2e on a real Karmada fleet

test-all: test                    ## kept as an alias of test

# The dashboard's browser tests (tests/dashboard/test_browser.py) drive Debian's chromium + chromium-driver;
# selenium comes with the test extra. Idempotent: installs only what is missing (needs root or sudo).
browser-deps:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; else \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium chromium-driver; fi

typecheck: setup
	$(BIN)/mypy

# The unit tests on UNIT_WORKERS pytest-xdist workers (CI has 2 cores). loadfile: one worker runs a test file
# whole, in order, so a module fixture (the installed wheel's venv, the example plugin, Chromium) is built once.
# (Not loadgroup: xdist 3.8 marks groups by rewriting item._nodeid, which pytest 9.2 no longer reads, so its
# xdist_group marks are silently ignored.) `pytest tests` still runs them serially.
UNIT_WORKERS ?= 2
unit: setup
	$(BIN)/pytest -q -n $(UNIT_WORKERS) --dist loadfile tests

# CI gets its own fleet (state dir and port block), so it never reuses or collides with a developer's
# fleet on the default /tmp/atoll-e2e and ports 31400+. Either can still be overridden from the environment.
# Port blocks stay below the kernel's ephemeral range (32768+), where client sockets take ports at random.
ifeq ($(CI),true)
export ATOLL_E2E_STATE ?= /tmp/atoll-e2e-ci
export ATOLL_E2E_BASE_PORT ?= 28400
endif

e2e-build: setup                  ## build/cache Karmada, Kubernetes, kwok, etcd, helm from Go modules (warm: no-op)
	PATH="$(CURDIR)/$(BIN):$$PATH" e2e/fleet build

e2e: e2e-build                    ## e2e suite: starts a fleet (or reuses a healthy one), stops what it started
	$(BIN)/mypy e2e
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/pytest -q --durations=15 e2e   # the slowest tests, to keep CI under 45 min

# The chart's image (charts/atoll/Dockerfile: the wheel + pinned dependencies, non-root). Needs docker or
# podman (not available in CI); IMAGE names the result.
IMAGE ?= atoll:dev
CONTAINER_TOOL ?= $(shell command -v docker || command -v podman)
image:                            ## build the container image from the wheel (docker/podman)
	@test -n "$(CONTAINER_TOOL)" || { echo "make image: needs docker or podman"; exit 1; }
	$(CONTAINER_TOOL) build -f charts/atoll/Dockerfile -t $(IMAGE) .

image-constraints: setup          ## re-pin the image's dependencies (charts/atoll/constraints.txt) to the tested venv
	charts/atoll/lock-deps.sh

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache
