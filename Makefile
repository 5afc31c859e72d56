# The two commands a newcomer needs (README.md, first lines):
#   make demo   the product's main job; on one machine with no cluster, the lab demo
#   make test   set up everything from scratch and run the whole test suite
.PHONY: demo test setup unit lint bench clean

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
