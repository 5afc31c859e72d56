# The two commands a newcomer needs (README.md, first lines):
#   make demo   the product's main job; on one machine with no cluster, the lab demo
#               (first run builds the real control plane from Go modules, ~25 min)
#   make test   set up everything from scratch and run the whole test suite
.PHONY: demo demo-offline lab-up lab-down test setup unit lint bench

VENV := .venv
PY := $(VENV)/bin/python

setup:
	scripts/setup

test: setup
	$(PY) -m pytest

unit: setup
	$(PY) -m pytest tests/unit

lint: setup
	$(VENV)/bin/ruff check extender tui tests benchmarks
	$(VENV)/bin/ansible-lint

bench: setup
	$(PY) benchmarks/prioritize.py

demo: setup
	scripts/demo

demo-offline: setup
	scripts/demo --offline

lab-up: setup
	scripts/lab up

lab-down:
	scripts/lab down
