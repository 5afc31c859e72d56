"""Credentials never reach the output, at any verbosity: every task that reads, applies or
writes one is `no_log`, read from the task YAML itself (every role's tasks, the playbooks).

What counts as a credential here: a kubeconfig (kubeadm's scheduler.conf embeds the scheduler's
client key and certificate; k3s's scheduler.kubeconfig names its key file), anything under
/etc/kubernetes/pki or a k3s server's cred/, tls/ and token files, k3s's /etc/rancher tree (its
config.yaml holds the join token as k3s-ansible writes it), a private key, and a Kubernetes
Secret (a ServiceAccount token). The kube-scheduler's static pod manifest is read in the open:
it holds paths to key files, never a key. A path given by a variable counts by the variable's
default (roles/*/defaults/main.yml), as an operator who sets none gets it.

At -v Ansible prints each task's result: a slurp's base64 `content`, a command's stdout, the
object a kubernetes.core.k8s task applied or deleted as the API server returns it (a token
Secret with `data.token`, filled by the token controller), a template task's diff.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CREDENTIAL = re.compile(
    r"kubeconfig|k3s\.yaml|/etc/kubernetes/[^/\s'\"]+\.conf\b|/etc/kubernetes/pki/|/etc/rancher/"
    r"|/var/lib/rancher/k3s/server/(cred|tls|token|node-token)\b|\.key\b"
)
MODULES_READING = {"slurp", "command", "shell", "raw", "fetch"}
TASK_KEYS = ("block", "rescue", "always")


def _short(module: str) -> str:
    return module.rsplit(".", 1)[-1]


def _defaults() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in sorted(ROOT.glob("roles/*/defaults/main.yml")):
        out.update(yaml.safe_load(path.read_text()) or {})
    return out


DEFAULTS = _defaults()


def _with_defaults(text: str) -> str:
    """The text, plus the default value of every loadwise_* variable it names."""
    names = sorted(set(re.findall(r"\bloadwise_[a-z0-9_]+", text)))
    return text + " " + " ".join(json.dumps(DEFAULTS.get(n, "")) for n in names)


def _tasks(items: Any, where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for task in items or []:
        if not isinstance(task, dict):
            continue
        nested = [key for key in TASK_KEYS if key in task]
        if nested:
            for key in nested:
                for sub_where, sub in _tasks(task[key], where):
                    # a block's no_log applies to its tasks
                    yield sub_where, {"no_log": task.get("no_log"), **sub}
            continue
        yield f"{where}: {task.get('name', '?')}", task


def _all_tasks() -> Iterator[tuple[str, dict[str, Any]]]:
    for path in sorted(ROOT.glob("roles/*/tasks/*.yml")) + sorted(
        ROOT.glob("roles/*/handlers/*.yml")
    ):
        yield from _tasks(yaml.safe_load(path.read_text()), str(path.relative_to(ROOT)))
    for path in sorted(ROOT.glob("playbooks/*.yml")):
        for play in yaml.safe_load(path.read_text()) or []:
            for key in ("pre_tasks", "tasks", "post_tasks", "handlers"):
                yield from _tasks(play.get(key), str(path.relative_to(ROOT)))


def _module(task: dict[str, Any]) -> tuple[str, Any]:
    for key, value in task.items():
        if "." in key and key.split(".")[0] in {"ansible", "kubernetes"}:
            return _short(key), value
        if key in MODULES_READING | {"k8s", "k8s_info", "template"}:
            return key, value
    return "", None


def _template_text(where: str, name: str) -> str:
    role = where.split("/")[1]
    path = ROOT / "roles" / role / "templates" / name
    return path.read_text() if path.exists() else ""


def _handles_a_credential(where: str, task: dict[str, Any]) -> str:
    """Why the task handles a credential ('' when it does not)."""
    module, args = _module(task)
    text = json.dumps(args) + " " + json.dumps(task.get("loop", task.get("with_items", "")))
    if module in MODULES_READING and CREDENTIAL.search(_with_defaults(text)):
        return f"{module} of {CREDENTIAL.search(_with_defaults(text))[0]!r}"  # type: ignore[index]
    if module == "k8s":
        applied = text + " ".join(
            _template_text(where, name) for name in re.findall(r"template', '([^']+)'", text)
        )
        if re.search(r"kind:\s*Secret\b|\"kind\": \"Secret\"", applied):
            return "k8s applies or deletes a Secret (its result holds the token)"
    if module == "k8s_info" and isinstance(args, dict) and args.get("kind") == "Secret":
        return "k8s_info returns a Secret"
    if module == "template" and isinstance(args, dict) and "kubeconfig" in str(args.get("dest")):
        return "template writes a kubeconfig (its diff shows it)"
    return ""


CASES = [
    (where, why) for where, task in _all_tasks() if (why := _handles_a_credential(where, task))
]
TASKS = dict(_all_tasks())


def test_the_scan_finds_the_credential_tasks_it_is_about() -> None:
    """The rule above finds the tasks it exists for (so an empty scan cannot pass)."""
    found = {where for where, _ in CASES}
    for expected in (
        "roles/loadwise_preflight/tasks/identity.yml: Preflight | Read the node's scheduler "
        "kubeconfig",
        "roles/loadwise_load_watcher/tasks/node.yml: Load-watcher | Read the node's scheduler "
        "kubeconfig (its API server address)",
        "roles/loadwise_load_watcher/tasks/service.yml: Load-watcher | Apply its ServiceAccount, "
        "read-only RBAC and token Secret",
        "roles/loadwise_extender/tasks/node.yml: Extender | Read the API server address from the "
        "node's scheduler kubeconfig",
        "roles/loadwise_scheduler_config/tasks/foreign.yml: Foreign scheduler config | Read the "
        "config file and the other drop-ins",
    ):
        assert expected in found, sorted(found)
    # and leaves alone what holds no secret
    assert "roles/loadwise_preflight/tasks/detect.yml: Preflight | Read the kubeadm " \
        "kube-scheduler manifest" not in found  # fmt: skip


@pytest.mark.parametrize(("where", "why"), CASES, ids=[w for w, _ in CASES])
def test_a_task_handling_a_credential_is_no_log(where: str, why: str) -> None:
    assert TASKS[where].get("no_log") is True, f"{where}: {why}, but it has no `no_log: true`"
