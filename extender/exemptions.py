"""Which pods the load filter never rejects, and which pods the extender leaves alone.

Two kinds, with different answers:

- *Exempt* pods must run where the scheduler puts them, so the filter never rejects a
  node for load (their scores are the policy's, as for any pod): a DaemonSet's pod (its
  controller pins it to one node with a ``metadata.name`` matchFields node affinity, so a
  rejection is a pod that can go nowhere; Koordinator's LoadAware filter skips them too,
  koordinator-sh/koordinator issue 1229), a static pod's mirror, and a pod of
  system-critical priority (the kubelet's ``IsCriticalPod``,
  pkg/kubelet/types/pod_update.go: static, mirror, or priority >=
  ``SystemCriticalPriority``).
- *Ignored* pods opted out: the annotation :data:`IGNORE_ANNOTATION` ``"true"``, or a
  namespace the config lists (``ignore_namespaces``). The extender passes every node and
  answers equal priorities, so the scheduler's own plugins alone decide; no Event is
  recorded. ``"false"`` opts one pod of such a namespace back in.

Pure functions of the Pod as the scheduler sends it.
"""

from __future__ import annotations

import logging
from collections.abc import Container

from .quantity import shown
from .throttle import LogThrottle
from .wire import Pod

__all__ = [
    "CONFIG_MIRROR_ANNOTATION",
    "CONFIG_SOURCE_ANNOTATION",
    "IGNORE_ANNOTATION",
    "SYSTEM_CRITICAL_PRIORITY",
    "SYSTEM_PRIORITY_CLASSES",
    "exemption",
    "ignored",
]

log = logging.getLogger("loadwise.extender.exemptions")

IGNORE_ANNOTATION = "loadwise.dev/ignore"
# The kubelet's annotations on a static pod and on its mirror in the API
# (k8s.io/kubernetes pkg/kubelet/types/pod_update.go, ConfigMirrorAnnotationKey and
# ConfigSourceAnnotationKey; a pod created through the API has the source "api").
CONFIG_MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
CONFIG_SOURCE_ANNOTATION = "kubernetes.io/config.source"
# k8s.io/api scheduling/v1 types.go: SystemCriticalPriority = 2 * HighestUserDefinablePriority
# (1e9); the two built-in classes resolve to it (system-cluster-critical) and to it + 1000
# (system-node-critical, plugin/pkg/admission/priority). The names are checked as well, for a
# pod whose priority the admission plugin has not filled in.
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
SYSTEM_PRIORITY_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})

_bad_value_log = LogThrottle(60.0)


def exemption(pod: Pod) -> str | None:
    """Why the load filter must never reject a node for ``pod``, or None."""
    meta, spec = pod.metadata, pod.spec
    for owner in meta.ownerReferences or ():
        if owner.kind == "DaemonSet" and owner.controller:
            return "DaemonSet pod"
    annotations = meta.annotations or {}
    if CONFIG_MIRROR_ANNOTATION in annotations:
        return "mirror pod"
    source = annotations.get(CONFIG_SOURCE_ANNOTATION)
    if source is not None and source != "api":
        return "static pod"
    if spec.priorityClassName in SYSTEM_PRIORITY_CLASSES:
        return f"system-critical pod ({spec.priorityClassName})"
    if spec.priority is not None and spec.priority >= SYSTEM_CRITICAL_PRIORITY:
        return f"system-critical pod (priority {spec.priority})"
    return None


def ignored(pod: Pod, namespaces: Container[str]) -> str | None:
    """Why the extender leaves ``pod`` alone (every node passes, equal priorities), or None.

    The pod's own annotation wins over its namespace; a value other than "true" or
    "false" counts as absent and is logged (at most once a minute per pod)."""
    meta = pod.metadata
    value = (meta.annotations or {}).get(IGNORE_ANNOTATION)
    if value is not None:
        said = value.strip().lower()
        if said == "true":
            return f"opted out ({IGNORE_ANNOTATION})"
        if said == "false":
            return None
        key = f"{meta.namespace}/{meta.name}"
        _bad_value_log.warning(
            log,
            key,
            "pod %s: annotation %s=%s is neither true nor false; ignored",
            shown(key),
            IGNORE_ANNOTATION,
            shown(value),
        )
    if meta.namespace in namespaces:
        return f"namespace {meta.namespace} opted out (ignore_namespaces)"
    return None
