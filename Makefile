# tailfabric — make targets. `make test` and `make demo` set themselves up (apt packages, .venv).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# Debian packages the project's tools and tests use (installed when missing and we are root).
APT_PACKAGES := python3-venv python3-dev gcc iproute2 tcpdump tcpreplay iputils-ping
RESULTS := results

.PHONY: help setup system-deps test test-unit lint bench-p4 p4-info clean

help:
	@echo "make test        set up .venv and run the whole test suite"
	@echo "make bench-p4    packets/s of the software P4 target -> results/bench_p4.csv"
	@echo "make p4-info P4=prog.p4   write the P4Info of a program to build/"
	@echo "make lint        ruff"
	@echo "make clean       remove build outputs and results"

system-deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else echo "missing Debian packages:$$missing (run as root or install them)"; fi; \
	fi

$(STAMP): pyproject.toml
	@$(MAKE) --no-print-directory system-deps
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	@touch $(STAMP)

setup: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider tests

test-unit: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider tests/unit

lint: $(STAMP)
	$(VENV)/bin/ruff check .

bench-p4: $(STAMP)
	@mkdir -p $(RESULTS)
	$(PY) -m switch.bench --out $(RESULTS)/bench_p4.csv

p4-info: $(STAMP)
	@mkdir -p build
	$(VENV)/bin/tf-p4 info $(P4) -o build/$(notdir $(basename $(P4))).p4info.txtpb

clean:
	rm -rf build $(RESULTS) .pytest_cache .ruff_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
