"""Fixtures for the tests of the Ansible roles' Python (tests/ansible/fakes.py has the fakes)."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator

import pytest

from tests import ansible_strategy
from tests.ansible.fakes import Health, serve, start_named


@pytest.fixture(scope="package", autouse=True)
def _operators_strategy() -> Iterator[None]:
    """The playbook runs of these tests (the local connection, and molecule's nodes) on
    ansible-core's own linear strategy, as an operator's: Mitogen's gains nothing on them
    (tests/ansible_strategy.py has the side-by-side figures). Package-scoped, so the module
    fixtures' runs are covered too; the tests/lab runs on the same worker keep Mitogen's."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in ansible_strategy.STOCK.items():
            patch.setenv(name, value)
        yield


@pytest.fixture
def health() -> Iterator[tuple[Health, str]]:
    """A health endpoint answering 200 "ok" until the test changes its Health."""
    state = Health()
    with serve(state) as url:
        yield state, url


@pytest.fixture
def scheduler() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A process whose argv[0] is a name no other process on this machine has."""
    name = f"loadwise-test-scheduler-{uuid.uuid4().hex[:12]}"
    proc = start_named(name)
    try:
        yield name, proc
    finally:
        proc.kill()
        proc.wait()
