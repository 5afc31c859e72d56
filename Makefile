# The two commands a newcomer needs (README.md, first lines):
#   make demo   the product's main job; on one machine with no cluster, the lab demo
#               (first run builds the real control plane from Go modules, ~25 min)
#   make test   set up everything from scratch and run the whole test suite
.PHONY: demo demo-offline lab-up lab-down test test-full setup unit lint bench bench-micro bench-placement bench-cost bench-realplacement bench-realchurn soak footprint

VENV := .venv
PY := $(VENV)/bin/python

setup:
	scripts/setup

# Two workers: the real-node cluster's group on one, the lab's on the other, then molecule's
# and the ungrouped suites wherever there is room (tests/conftest.py).
# PYTEST_WORKERS=0 runs everything in one process.
# --durations lists the slowest tests and tests/conftest.py the time per group and worker, so a
# CI log shows where the time goes (docs/testing.md, "How long it takes").
PYTEST_WORKERS ?= 2

# The first build (every Go program and node image the suite needs, 18-29 min on a cold 2-core
# machine, README.md) runs before pytest with its progress on screen (lab/prepare.py); pytest
# itself prints a line naming the tests still running whenever none has ended for 30 s.
# test-full also runs the tests marked `full`: slower paths whose coverage the default run
# has elsewhere (each says where, pyproject.toml's markers list them), and every playbook run
# through ansible-core's own strategy, which make test keeps for the runs that prove an
# operator's path (tests/ansible_strategy.py).
test: setup
	$(PY) -m lab prepare test
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadgroup --durations=30 -m "not full"

test-full: setup
	$(PY) -m lab prepare test
	LOADWISE_TEST_ANSIBLE=stock $(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadgroup --durations=30

unit: setup
	$(PY) -m pytest tests/extender tests/tui tests/ansible -m "not molecule"

# The installer on every supported ansible-core without a node (13 min in one process): the
# latest 2.17 and 2.18 in venvs of their own (scripts/setup-ansible-cores, only made here, so
# `make test`'s setup stays as it is), then tests/ansible/test_ansible_core_versions.py on
# each of them and on the oldest (2.16) and .venv's pin (2.19).
.PHONY: test-ansible-cores
test-ansible-cores: setup
	scripts/setup-ansible-cores
	$(PY) -m pytest -n $(PYTEST_WORKERS) tests/ansible/test_ansible_core_versions.py \
		tests/ansible/test_template_quotes.py

# The extender's runtime dependencies and everything they pull, each file pinned by sha256,
# for every node Python from 3.10 up (one universal lock; environment markers where the
# versions differ). The loadwise_extender role downloads and installs exactly these files
# (pip --require-hashes --no-deps). tests/ansible/test_extender_lock.py checks it against
# pyproject.toml's pins and this command.
.PHONY: lock
lock: setup
	$(VENV)/bin/uv pip compile pyproject.toml --universal --python-version 3.10 --generate-hashes --quiet -o roles/loadwise_extender/files/requirements.lock

lint: setup
	$(VENV)/bin/ruff check extender tui lab tests benchmarks
	$(VENV)/bin/mypy
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ansible-lint

# Every benchmark docs/benchmarks.md reports as measured, in one command (~45 min): the
# extender's own latency, memory and cluster-side cost (bench-micro, ~5 min), then the cost
# inside the real scheduler against stock and the null extender, ratios and spread
# (bench-cost), and docs/placement.md with its plots rendered again from the runs
# docs/placement/results.json holds (bench-placement and bench-realplacement measure those).
# The report refuses runs of more than one commit: its tables compare code that ran side by
# side.
bench: bench-micro bench-cost
	$(PY) -m benchmarks.placement --from-results docs/placement/results.json --out docs

bench-micro: setup
	$(PY) benchmarks/prioritize.py
	$(PY) -m benchmarks.memory
	$(PY) -m benchmarks.cluster_side

# Placement quality and scheduling cost against the stock scheduler and Trimaran, on the lab
# (docs/placement.md). Builds what it needs first (Go builds and the lab each under their
# machine-wide lock; the Trimaran scheduler only where lab/build knows it); a contender
# whose build failed is reported as not run. Five runs of each pair by default (about five times
# the time of one): PLACEMENT_ARGS="--scenarios hog burst --repeats 1".
bench-placement: setup
	flock /tmp/loadwise-go.lock lab/build >/dev/null
	if grep -q trimaran-scheduler lab/build; then \
		flock /tmp/loadwise-go.lock lab/build trimaran-scheduler >/dev/null || \
		echo "bench-placement: the Trimaran build failed; its contenders will be reported as not run"; \
	fi
	flock /tmp/loadwise-lab.lock $(PY) -m benchmarks.placement $(PLACEMENT_ARGS)

# The cost of scheduling through an extender (docs/benchmarks.md, "The cost inside the real
# scheduler"): 2,000 pods on 100 nodes, stock, stock without batching, a null extender and
# loadwise, each with both verbs and with prioritize only, 5 interleaved rounds (~25 min on a
# quiet 2-core machine; docs/benchmarks.md cites two such invocations, seeds 3301 and 3302);
# prints the cost table (drain, decided/s, algorithm and CPU ms per pod, ratios, ranges).
# Its report goes to COST_OUT, not docs/ (which holds every scenario's runs).
COST_OUT ?= /tmp/loadwise-bench-cost
bench-cost: setup
	flock /tmp/loadwise-go.lock lab/build >/dev/null
	flock /tmp/loadwise-lab.lock $(PY) -m benchmarks.placement --scenarios scale-100 \
		--contenders stock stock-nobatch null-extender null-prioritize-only \
		loadwise-least-used loadwise-prioritize-only --out $(COST_OUT) $(COST_ARGS)

# Memory and CPU at rest, in a 200-pod burst and under a steady stream of pods
# (benchmarks/soak.py, on loopback; SOAK_ARGS="--seconds 3600 --every 300").
soak: setup
	$(PY) benchmarks/soak.py $(SOAK_ARGS)

# The same on the real-node cluster, the extender as a systemd service beside the kubelet's
# scheduler (benchmarks/footprint.py, ~12 min; it brings the cluster up and down); an hour of
# day-2 churn after it: FOOTPRINT_ARGS="--soak 3600".
footprint: setup
	flock /tmp/loadwise-lab.lock $(PY) -m benchmarks.footprint $(FOOTPRINT_ARGS)

# Placement on the real-node cluster, its workers nodes of 2 GiB, one with a memory hog no pod
# requests, and what each scheduler's placement cost there: OOM kills, kubelet evictions,
# MemoryPressure, restarts, startup latency (benchmarks/realplacement.py, docs/placement.md
# "On real kubelets"; ~25 min; it brings the cluster up and down).
# REALPLACEMENT_ARGS="--repeats 1".
bench-realplacement: setup
	flock /tmp/loadwise-lab.lock $(PY) -m benchmarks.realplacement $(REALPLACEMENT_ARGS)

# A stream of pods that come and go on the real-node cluster, workers of 3 GiB and 2 GiB, a
# memory hog on the larger for the stream's first 240 s, every pod deleted after a seeded
# lifetime and replaced: OOM kills, evictions, MemoryPressure, restarts, start latency per
# contender (benchmarks/realchurn.py; 5 runs of each, ~100 min; it brings the cluster up and
# down). REALCHURN_ARGS="--repeats 1 --duration 240 --hog-seconds 160".
bench-realchurn: setup
	flock /tmp/loadwise-lab.lock $(PY) -m benchmarks.realchurn $(REALCHURN_ARGS)

demo: setup
	scripts/demo

demo-offline: setup
	scripts/demo --offline

lab-up: setup
	scripts/lab up

lab-down:
	scripts/lab down
