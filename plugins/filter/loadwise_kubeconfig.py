"""Which kubeconfig and context the run's kubernetes.core tasks use, for one control-plane host.

``loadwise_kubeconfig_choice(host_vars, env)``: the kubeconfig and context as the Kubernetes
client would pick them, from one control-plane host's variables and the controller's
environment, each with where it came from (printed at the start of a run).

The kubeconfig: ``loadwise_kubeconfig``, else k3s-ansible's ``kubeconfig`` (k3s-ansible keeps
it in its k3s_cluster group's vars, which the implicit localhost does not see: hence per
host), else ``$K8S_AUTH_KUBECONFIG`` (what kubernetes.core reads), else ``$KUBECONFIG``, else
``~/.kube/config``. Of a list ("a:b", as kubectl takes it) the first file that exists is used,
alone: the Python client kubernetes.core runs on merges such a list but takes current-context
from the last file that sets it (kubernetes/config/kube_config.py, KubeConfigMerger), where
kubectl (client-go) takes it from the first, so passing the list on would make loadwise talk to
another context than kubectl does for the same $KUBECONFIG. A list of which no file exists
gives its first entry (the error then names it); the default ``~/.kube/config`` missing gives
"" (no kubeconfig: kubernetes.core then uses in-cluster credentials or
K8S_AUTH_HOST/K8S_AUTH_API_KEY).

The context: ``loadwise_context``, else k3s-ansible's ``cluster_context``, else
``$K8S_AUTH_CONTEXT``, else "" (the file's current-context).

An empty or null variable counts as unset (as Jinja's ``default('', true)``). The files are
looked at on the controller, where filters run: existence, ``~`` and symbolic links resolved.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

DEFAULT_KUBECONFIG = "~/.kube/config"


class KubeconfigChoiceError(ValueError):
    """Input that is not a host's variables or an environment mapping."""


def _set(value: Any) -> str:
    """The variable's text, or "" when it is unset or false by Jinja's test (None, "", ...)."""
    return str(value) if value else ""


def loadwise_kubeconfig_choice(host_vars: Any, env: Any = None) -> dict[str, str]:
    """{"kubeconfig", "kubeconfig_from", "context", "context_from"} for one host's variables.

    env: the controller's K8S_AUTH_KUBECONFIG, KUBECONFIG and K8S_AUTH_CONTEXT (missing or ""
    is unset).
    """
    if not isinstance(host_vars, Mapping):
        raise KubeconfigChoiceError(
            f"loadwise_kubeconfig_choice needs a host's variables (a mapping), "
            f"not {type(host_vars).__name__}"
        )
    env = {} if env is None else env
    if not isinstance(env, Mapping):
        raise KubeconfigChoiceError(
            f"loadwise_kubeconfig_choice needs the environment as a mapping, "
            f"not {type(env).__name__}"
        )

    candidates = [
        (_set(host_vars.get("loadwise_kubeconfig")), "loadwise_kubeconfig"),
        (_set(host_vars.get("kubeconfig")), "kubeconfig (the k3s-ansible inventory variable)"),
        (_set(env.get("K8S_AUTH_KUBECONFIG")), "$K8S_AUTH_KUBECONFIG"),
        (_set(env.get("KUBECONFIG")), "$KUBECONFIG"),
    ]
    named = [(value, source) for value, source in candidates if value]
    is_default = not named
    value, source = named[0] if named else (DEFAULT_KUBECONFIG, "the default, no variable set")
    paths = [os.path.expanduser(p) for p in value.split(":") if p]
    existing = [p for p in paths if os.path.exists(p)]
    # a named list of which nothing exists: its first entry, so the error names it
    path = (existing + ([] if is_default else paths) + [""])[0]
    if len(paths) > 1:
        source += f", first existing of {len(paths)} paths"

    contexts = [
        (_set(host_vars.get("loadwise_context")), "loadwise_context"),
        (_set(host_vars.get("cluster_context")), "cluster_context (k3s-ansible)"),
        (_set(env.get("K8S_AUTH_CONTEXT")), "$K8S_AUTH_CONTEXT"),
    ]
    context, context_from = next(
        ((v, s) for v, s in contexts if v), ("", "the file's current-context")
    )
    return {
        "kubeconfig": os.path.realpath(path) if path else "",
        "kubeconfig_from": source,
        "context": context,
        "context_from": context_from,
    }


class FilterModule:
    """Ansible's entry point for filter plugins."""

    def filters(self) -> dict[str, Any]:
        return {"loadwise_kubeconfig_choice": loadwise_kubeconfig_choice}
