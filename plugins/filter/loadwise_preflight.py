"""Filters of the loadwise_preflight role: pure functions, no I/O (the tasks read the files).

- ``loadwise_unknown_names``: which ``loadwise_*`` variables no role declares, each with the
  closest declared name (difflib), so a misspelling fails before any change instead of being
  silently ignored.
- ``loadwise_kubeconfig_cluster``: the server and CA of one context of a kubeconfig document,
  resolved the way client-go does (kubernetes/client-go ``tools/clientcmd``: the named context,
  else ``current-context``; ``certificate-authority-data`` wins over ``certificate-authority``).
- ``loadwise_pem_certificates``: the PEM certificates of a CA bundle, normalised for comparison.
- ``loadwise_image_problems``: the image settings a container runtime would refuse to pull,
  each named, so a typo fails in preflight rather than as ImagePullBackOff after a change.
- ``loadwise_wheelhouse_missing``: the entries of the extender's hash-pinned lock that one node
  target needs and that no wheel of a prepared wheelhouse matches by sha256.
"""

from __future__ import annotations

import base64
import binascii
import difflib
import importlib.util
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import ModuleType
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


# The grammar of an image reference as container runtimes parse it (the distribution
# project's reference package, reference/regexp.go): a domain (with a port) or a first path
# component, lower-case path components separated by ".", "_", "__" or "-", a tag of at most
# 128 word characters, dots and dashes not starting with either, and a digest. Only sha256
# digests are accepted: the algorithm every registry serves.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*"
_LABEL = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?"
_DOMAIN = rf"{_LABEL}(?:\.{_LABEL})*(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"sha256:[0-9a-f]{64}"
_REPOSITORY = rf"(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*"
_IMAGE = re.compile(rf"^{_REPOSITORY}(?::{_TAG})?(?:@{_DIGEST})?$")
_REGISTRY = re.compile(rf"^{_DOMAIN}(?:/{_COMPONENT})*$")
_VERSION = re.compile(rf"^{_TAG}(?:@{_DIGEST})?$")


def loadwise_image_problems(
    images: Mapping[str, Any],
    registries: Mapping[str, Any] | None = None,
    versions: Mapping[str, Any] | None = None,
) -> list[str]:
    """One sentence per setting a runtime would not pull, sorted by variable name.

    images: variable name -> full reference (empty: unset, the role's default applies).
    registries: variable name -> registry and path prefix (no tag, no digest).
    versions: variable name -> {minor: tag or tag@digest} tables.
    """
    problems: list[tuple[str, str]] = []
    for name, value in (images or {}).items():
        text = "" if value is None else str(value)
        if text and not _IMAGE.match(text):
            problems.append(
                (
                    name,
                    f'{name} is not an image reference (got "{text}"): use '
                    "registry/path/name:tag or registry/path/name@sha256:<64 hex>.",
                )
            )
    for name, value in (registries or {}).items():
        text = "" if value is None else str(value).rstrip("/")
        if not _REGISTRY.match(text):
            problems.append(
                (
                    name,
                    f"{name} must be a registry with an optional path, such as registry.k8s.io "
                    f'or mirror.lan:5000/k8s, without a tag or digest (got "{text}").',
                )
            )
    for name, table in (versions or {}).items():
        entries = table.items() if isinstance(table, Mapping) else []
        bad = sorted(f"{k}: {v}" for k, v in entries if not _VERSION.match(str(v or "")))
        if not isinstance(table, Mapping) or bad:
            got = "; ".join(bad) if bad else repr(table)
            problems.append(
                (
                    name,
                    f"{name} must map Kubernetes minors to an image tag, optionally with a "
                    f"digest (v1.2.3 or v1.2.3@sha256:<64 hex>); got {got}.",
                )
            )
    return [text for _, text in sorted(problems)]


def _lock_reader() -> ModuleType:
    """roles/loadwise_extender/files/locked_requirements.py, the one reader of the lock: the
    role runs it to write each target's entries, an air-gapped operator runs it by hand
    (docs/ansible.md), and this filter asks it which entries a target installs. The
    collection keeps plugins/ and roles/ side by side, as this checkout does."""
    path = Path(__file__).resolve().parents[2] / "roles/loadwise_extender/files"
    spec = importlib.util.spec_from_file_location(
        "loadwise_locked_requirements", path / "locked_requirements.py"
    )
    if spec is None or spec.loader is None:
        raise ValueError(f"no lock reader at {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def loadwise_wheelhouse_missing(lock: str, target: str, checksums: Iterable[str]) -> list[str]:
    """The ``name==version`` entries of ``lock`` that ``target`` installs (their markers
    decided for it) and whose recorded sha256s match none of ``checksums`` (the wheelhouse's
    files), in the lock's order."""
    reader = _lock_reader()
    environment = reader.environment(target)
    have = {f"--hash=sha256:{c}".lower() for c in checksums or []}
    return [
        f"{requirement.name}{requirement.specifier}"
        for requirement, hashes in reader.entries(lock or "")
        if (requirement.marker is None or requirement.marker.evaluate(environment))
        and not {h.lower() for h in hashes} & have
    ]


class FilterModule:
    """Ansible's entry point for filter plugins."""

    def filters(self) -> dict[str, Any]:
        return {
            "loadwise_unknown_names": loadwise_unknown_names,
            "loadwise_kubeconfig_cluster": loadwise_kubeconfig_cluster,
            "loadwise_pem_certificates": loadwise_pem_certificates,
            "loadwise_schedulers_outside": loadwise_schedulers_outside,
            "loadwise_image_problems": loadwise_image_problems,
            "loadwise_wheelhouse_missing": loadwise_wheelhouse_missing,
        }
