"""Which of Ansible's strategies the suite's ansible-playbook runs use.

Most of the suite asks what the roles do: what a run changes, refuses, restores, and what a
second run or check mode then says. For those runs the execution engine is not the subject,
so the default run (`make test`) drives Ansible through Mitogen for Ansible's
`mitogen_linear` strategy: the same tasks in the same order, with one Python interpreter kept
per host instead of a module copied and a new interpreter started per task. Measured on the
real kubeadm node (2026-11-26, one run at a time, nothing else running): a second site.yml
55.8 s -> 24.0 s, check mode 44.1 s -> 20.2 s, the same ok/changed/skipped counts.

What an operator's own run does on the wire stays on ansible-core's linear strategy, the one
operators use: the runs given `stock()` or `STOCK` (on the real node: the first site.yml,
killed before its proof; the site.yml at -vvv whose output is searched for secrets; the
rollback back to kubeadm's files), every run of tests/ansible (tests/ansible/conftest.py:
the short runs on the local connection gain nothing from Mitogen, 596 s on ansible-core's
strategy and 585 s on Mitogen's side by side on 2 workers, 2026-11-26, within what runs
differ by; and molecule-plugins' podman driver playbooks hang under Mitogen), and every run
of `make test-full`, which sets LOADWISE_TEST_ANSIBLE=stock. So Mitogen's strategy drives
the long runs over SSH of tests/lab only.

ansible-core 2.19 prints a deprecation warning for every strategy plugin outside
ansible.builtin ("no alternative ... is currently planned"): when a release drops them, this
switch goes and the suite is back to ansible-core's pace (the figures in docs/testing.md say what
that costs).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import ansible_mitogen

SWITCH = "LOADWISE_TEST_ANSIBLE"

# ansible-core's own strategy, the one an operator's ansible-playbook uses.
STOCK = {"ANSIBLE_STRATEGY": "linear"}


def mitogen() -> dict[str, str]:
    """The environment that makes ansible-playbook use Mitogen's linear strategy."""
    plugins = Path(ansible_mitogen.__file__).parent / "plugins" / "strategy"
    return {"ANSIBLE_STRATEGY_PLUGINS": str(plugins), "ANSIBLE_STRATEGY": "mitogen_linear"}


def suite_env() -> dict[str, str]:
    """What the suite sets in its own environment, inherited by every ansible-playbook it
    starts. Host keys: every inventory of the suite already passes StrictHostKeyChecking=no
    (its nodes get new host keys each run); Mitogen's ssh connection enforces Ansible's
    host_key_checking setting ahead of those options, so it is switched off here too."""
    env = {"ANSIBLE_HOST_KEY_CHECKING": "False"}
    if os.environ.get(SWITCH, "mitogen") != "stock":
        env.update(mitogen())
    return env


def stock(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) with ansible-core's own linear strategy."""
    return {**(os.environ if env is None else env), **STOCK}
