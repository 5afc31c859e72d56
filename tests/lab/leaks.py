"""What a run's output must never show: the keys on a kubeadm control-plane node and the
ServiceAccount tokens loadwise's run made. Used on the real node, where site.yml runs at -vvv
(tests/lab/test_real_site.py): at that verbosity Ansible prints every task's result, so a task
that reads a credential without no_log would show it there."""

from __future__ import annotations

import base64
import re

import yaml

# Files on the node whose keys no run may print: the scheduler's kubeconfig (slurped by
# preflight, the extender and load-watcher roles for its server and CA), the admin's, the
# cluster's own keys, and the extender's TLS keys (when the role made them).
KEY_FILES = (
    "/etc/kubernetes/scheduler.conf /etc/kubernetes/admin.conf "
    "/etc/kubernetes/pki/*.key /etc/loadwise/tls/*.key /etc/loadwise/tls/scheduler/*.key"
)


def secrets_on_node(host) -> dict[str, str]:
    """name -> the text of each file above that exists, read inside the node."""
    out = host.sh(
        f'for f in {KEY_FILES}; do [ -f "$f" ] || continue; '
        'printf "== %s\\n" "$f"; base64 -w0 "$f"; echo; done'
    )
    files: dict[str, str] = {}
    for name, blob in re.findall(r"^== (\S+)\n(\S*)$", out, re.M):
        files[name] = base64.b64decode(blob).decode()
    return files


def _needles(name: str, text: str) -> list[str]:
    """Strings that would show `text` (or its keys) in a run's output: slurp's base64 of the
    whole file, the keys' base64 as a kubeconfig holds them, and their PEM lines."""
    whole = base64.b64encode(text.encode()).decode()
    needles = [whole[len(whole) // 2 : len(whole) // 2 + 48]]
    keys = []
    if name.endswith(".key"):
        keys.append(text)
    else:
        for user in (yaml.safe_load(text) or {}).get("users") or []:
            data = (user.get("user") or {}).get("client-key-data")
            if data:
                needles.append(data[40:100])
                keys.append(base64.b64decode(data).decode())
    for key in keys:
        body = [ln for ln in key.splitlines() if ln and not ln.startswith("-----")]
        needles += [ln for ln in body if len(ln) >= 40][:3]
    return needles


def loadwise_tokens(kube) -> dict[str, str]:
    """The service-account tokens loadwise's run made (its labelled token Secrets)."""
    found = {}
    for secret in (
        kube.core()
        .list_secret_for_all_namespaces(label_selector="app.kubernetes.io/part-of=loadwise")
        .items
    ):
        if secret.type == "kubernetes.io/service-account-token" and (secret.data or {}).get(
            "token"
        ):
            found[secret.metadata.name] = secret.data["token"]
    return found


def printed(out: str, secrets: dict[str, str], tokens: dict[str, str]) -> list[str]:
    """Which of the files' keys and which tokens `out` shows (each named, never quoted)."""
    return [
        f"{name}: {needle[:12]}..."
        for name, text in secrets.items()
        for needle in _needles(name, text)
        if needle in out
    ] + [
        f"Secret {name}"
        for name, data in tokens.items()
        for needle in (data[10:70], base64.b64decode(data).decode()[20:80])
        if needle in out
    ]
