"""Suite-wide policy: in CI nothing may be skipped silently.

A skip locally is allowed (say, no podman on a laptop), but under CI=true every
skip is turned into a failure so that a suite that did not run cannot pass.

`make test` runs two pytest-xdist workers with --dist loadgroup: every lab test goes to one
worker (one lab per machine: fixed ports, one package-scoped lab), the molecule scenarios to
one worker (one at a time keeps their timing honest), everything else wherever there is room.
A test that names its own group keeps it. The real-node cluster's tests
(tests/lab/test_real_*.py) live under tests/lab but use neither the lab's ports nor its
processes (their nodes are podman containers with networks of their own), so they form a
group of their own, "realnodes" (one cluster at a time: its container names are fixed); the
burner's tests join the molecule scenarios' "podman" group.

How xdist places groups (xdist/scheduler/loadscope.py): groups are sorted by their number of
tests, largest first; each worker gets one, and a worker with two or fewer tests pending takes
the next. So the two longest groups must be the two with the most tests: the lab's (about 40)
and realnodes (about 25) start at once on the two workers, the podman group (5: molecule's
load_watcher scenario, the others being `full`, and the burner's tests) goes to
whichever nears its end first, the lab's, and every ungrouped test is a scope of one, so they
come last, on both workers (2026-11-26: the workers then ended 0.2 min apart). The time each
group took is printed at the end of every run (GroupTimes below) and kept in docs/testing.md.
"""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

import pytest

from tests import ansible_strategy

_LAB = Path(__file__).resolve().parent / "lab"
PODMAN_GROUP = "podman"  # the molecule scenarios and the real-node cluster


# tryfirst: xdist's own hook reads xdist_group marks to assign the groups; mark before it.
# The real-node modules share one cluster (tests/lab/conftest.py) and run in this order: the
# site tests start from kubeadm's own cluster and end with loadwise rolled back, so the next
# modules need no reset; test_real_nodes edits the scheduler's manifest by hand; the installer
# checks prove their own clean start (a reset) and roll back what they install; the fault
# tests (full) install loadwise on what the installer left and leave it so; the upgrade of
# loadwise itself (full) starts from a reset and rolls back. Then the modules that replace the
# shared cluster with one of their own under the same node names (REALNODE_OWN_CLUSTER, all
# full): none of the shared cluster's modules may come after them.
REALNODE_ORDER = (
    "test_real_site.py",
    "test_real_prometheus.py",
    "test_real_nodes.py",
    "test_real_installer.py",
    "test_real_faults.py",
    "test_real_loadwise_upgrade.py",
)
REALNODE_OWN_CLUSTER = ("test_real_placement.py", "test_real_limit.py", "test_real_upgrade.py")
_REALNODE_SEQUENCE = REALNODE_ORDER + REALNODE_OWN_CLUSTER


def _realnode_rank(item: pytest.Item) -> int:
    name = Path(str(item.path)).name
    return _REALNODE_SEQUENCE.index(name) if name in _REALNODE_SEQUENCE else len(_REALNODE_SEQUENCE)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # a stable sort: only the real-node modules move, each keeping its tests' own order
    realnode = [i for i, item in enumerate(items) if _realnode_rank(item) < len(_REALNODE_SEQUENCE)]
    ordered = sorted((items[i] for i in realnode), key=_realnode_rank)
    for i, item in zip(realnode, ordered, strict=True):
        items[i] = item
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        if _LAB in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.xdist_group("lab"))
        elif item.get_closest_marker("molecule"):
            item.add_marker(pytest.mark.xdist_group(PODMAN_GROUP))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CI") == "true" and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"skipped under CI=true, which is not allowed: {reason}"


class Heartbeat:
    """`make test` is never silent for longer than `every` seconds: the lab's and the real
    nodes' tests each run for minutes (`--durations` lists them), so while no test ends a
    line names the tests still running and for how long. In the controlling process only
    (under xdist the workers report their tests' start and end to it)."""

    def __init__(self, reporter: object, every: float = 30.0) -> None:
        self.reporter = reporter
        self.every = every
        self.running: dict[str, float] = {}
        self.finished = 0
        self.quiet_since = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="heartbeat", daemon=True)

    def pytest_sessionstart(self) -> None:
        self._thread.start()

    def pytest_sessionfinish(self) -> None:
        self._stop.set()

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.running[nodeid] = time.monotonic()

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        self.running.pop(nodeid, None)
        self.finished += 1
        self.quiet_since = time.monotonic()

    def line(self, now: float) -> str:
        tests = sorted(self.running.items(), key=lambda kv: kv[1])
        names = ", ".join(f"{nodeid} ({(now - t0) / 60:.1f} min)" for nodeid, t0 in tests)
        return f"[still running after {self.finished} finished: {names or 'setup'}]"

    def _beat(self) -> None:
        while not self._stop.wait(1.0):
            now = time.monotonic()
            if now - self.quiet_since >= self.every:
                self.quiet_since = now
                self.reporter.write_line(self.line(now))  # type: ignore[attr-defined]


FILES_SHOWN = 25


class GroupTimes:
    """At the end, the time each xdist group, each worker and the costliest test files spent
    (setup, call and teardown of their tests): the figures to balance the groups by (the
    module docstring), printed in every CI log. Under --dist loadgroup a test's node id ends
    in "@<group>"."""

    def __init__(self) -> None:
        self.groups: dict[str, list[float]] = {}
        self.workers: dict[str, float] = {}
        self.files: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # (a test's own parameters may hold an "@" too: a group name is a plain word)
        suffix = re.search(r"@([\w.-]+)$", report.nodeid)
        group = suffix.group(1) if suffix else "(no group)"
        seconds, tests = self.groups.setdefault(group, [0.0, 0])
        self.groups[group] = [seconds + report.duration, tests + (report.when == "call")]
        node = getattr(report, "node", None)
        worker = node.gateway.id if node is not None else "main"
        self.workers[worker] = self.workers.get(worker, 0.0) + report.duration
        path = report.nodeid.split("::", 1)[0]
        self.files[path] = self.files.get(path, 0.0) + report.duration

    def pytest_terminal_summary(self, terminalreporter) -> None:
        terminalreporter.section("time per xdist group and per worker")
        for group, (seconds, tests) in sorted(self.groups.items(), key=lambda kv: -kv[1][0]):
            terminalreporter.write_line(f"{seconds / 60:6.1f} min  {int(tests):4d} tests  {group}")
        for worker, seconds in sorted(self.workers.items()):
            terminalreporter.write_line(f"{seconds / 60:6.1f} min  worker {worker}")
        # the ungrouped tests are many small ones: their time shows per file
        terminalreporter.section(f"the {FILES_SHOWN} costliest test files")
        for path, seconds in sorted(self.files.items(), key=lambda kv: -kv[1])[:FILES_SHOWN]:
            terminalreporter.write_line(f"{seconds / 60:6.1f} min  {path}")


# trylast: the terminal reporter registers itself in its own pytest_configure
@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    # in every process (xdist's workers too): each ansible-playbook the suite starts inherits it
    os.environ.update(ansible_strategy.suite_env())
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and not hasattr(config, "workerinput"):
        config.pluginmanager.register(Heartbeat(reporter), "loadwise-heartbeat")
        config.pluginmanager.register(GroupTimes(), "loadwise-group-times")
