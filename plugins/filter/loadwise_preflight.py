"""Filters of the loadwise_preflight role: pure functions, no I/O (the tasks read the files).

- ``loadwise_unknown_names``: which ``loadwise_*`` variables no role declares, each with the
  closest declared name (difflib), so a misspelling fails before any change instead of being
  silently ignored.
- ``loadwise_kubeconfig_cluster``: the server and CA of one context of a kubeconfig document,
  resolved the way client-go does (kubernetes/client-go ``tools/clientcmd``: the named context,
  else ``current-context``; ``certificate-authority-data`` wins over ``certificate-authority``).
- ``loadwise_pem_certificates``: the PEM certificates of a CA bundle, normalised for comparison.
"""

from __future__ import annotations

import base64
import binascii
import difflib
import re
from collections.abc import Iterable, Mapping
from typing import Any

_PEM = re.compile(r"-----BEGIN CERTIFICATE-----(.*?)-----END CERTIFICATE-----", re.DOTALL)


class KubeconfigError(ValueError):
    """A kubeconfig that names no usable context or cluster."""


def loadwise_unknown_names(
    names: Iterable[str],
    known: Iterable[str],
    prefix: str = "loadwise_",
    ignore_prefixes: Iterable[str] = (),
) -> list[dict[str, str]]:
    """Every name starting with ``prefix`` that is not in ``known``, sorted, with a suggestion.

    Names starting with one of ``ignore_prefixes`` are left alone (a test harness's own).
    """
    declared = sorted(set(known))
    ignored = tuple(ignore_prefixes)
    unknown = sorted(
        {
            n
            for n in names
            if n.startswith(prefix)
            and n not in declared
            and not (ignored and n.startswith(ignored))
        }
    )
    result = []
    for name in unknown:
        close = difflib.get_close_matches(name, declared, n=1, cutoff=0.6)
        result.append({"name": name, "suggestion": close[0] if close else ""})
    return result


def _named(entries: Any, name: str, what: str) -> Mapping[str, Any]:
    for entry in entries or []:
        if isinstance(entry, Mapping) and entry.get("name") == name:
            value = entry.get(what)
            if isinstance(value, Mapping):
                return value
    raise KubeconfigError(f"the kubeconfig has no {what} named {name!r}")


def loadwise_kubeconfig_cluster(doc: Any, context: str = "") -> dict[str, str]:
    """Server, CA data (PEM text) and CA file of ``context`` (empty: the current context)."""
    if not isinstance(doc, Mapping):
        raise KubeconfigError("the kubeconfig is not a YAML mapping")
    name = context or str(doc.get("current-context") or "")
    if not name:
        raise KubeconfigError("the kubeconfig has no current-context and no context was given")
    ctx = _named(doc.get("contexts"), name, "context")
    cluster_name = str(ctx.get("cluster") or "")
    cluster = _named(doc.get("clusters"), cluster_name, "cluster")
    data = str(cluster.get("certificate-authority-data") or "")
    try:
        ca_data = base64.b64decode(data, validate=True).decode("ascii") if data else ""
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise KubeconfigError(
            f"cluster {cluster_name!r}: certificate-authority-data is not base64 PEM"
        ) from exc
    return {
        "context": name,
        "cluster": cluster_name,
        "server": str(cluster.get("server") or ""),
        "ca_data": ca_data,
        "ca_file": str(cluster.get("certificate-authority") or ""),
    }


def loadwise_pem_certificates(text: str) -> list[str]:
    """The base64 bodies of the PEM certificates in ``text``, whitespace removed, sorted."""
    return sorted("".join(body.split()) for body in _PEM.findall(text or ""))


def loadwise_schedulers_outside(
    pods: Any, config_path: str, names_in_run: list[str]
) -> list[dict[str, Any]]:
    """The kube-scheduler mirror pods that name loadwise's config on a node this run does not
    cover: [{"node", "ready"}], sorted by node. kubeadm renders a control-plane node joined
    after site.yml from the patched kubeadm-config, so its static pod passes loadwise's
    --config and mounts that file, which only a site.yml run on the node writes; until then
    the kubelet holds the pod (event "hostPath type check failed"). names_in_run: every name
    the run's hosts go by (inventory name, hostname, FQDN), compared without case, as the
    kubelet lowercases the hostname it registers the node under."""
    known = {str(n).lower() for n in names_in_run or [] if n}
    flag = f"--config={config_path}"
    found: dict[str, bool] = {}
    for pod in pods or []:
        spec = pod.get("spec") or {}
        node = str(spec.get("nodeName") or "")
        command = [str(a) for c in spec.get("containers") or [] for a in c.get("command") or []]
        if not node or flag not in command or node.lower() in known:
            continue
        conditions = (pod.get("status") or {}).get("conditions") or []
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        found[node] = found.get(node, False) or ready
    return [{"node": node, "ready": found[node]} for node in sorted(found)]


class FilterModule:
    """Ansible's entry point for filter plugins."""

    def filters(self) -> dict[str, Any]:
        return {
            "loadwise_unknown_names": loadwise_unknown_names,
            "loadwise_kubeconfig_cluster": loadwise_kubeconfig_cluster,
            "loadwise_pem_certificates": loadwise_pem_certificates,
            "loadwise_schedulers_outside": loadwise_schedulers_outside,
        }
