"""Jinja filters: has a Deployment rolled out, and if not, why (read from its pods).

loadwise_rollout_verdict(deployment, pods, nodes, previous) -> {"state": "ready" | "waiting" |
"failed", "reason": str, "pod": str, "container": str, "logs": bool, "previous_log": bool}

The rollout test is the one `kubectl rollout status` applies to a Deployment
(kubectl's polymorphichelpers/rollout_status.go): the controller has observed the current
generation, every replica runs the current template, the old ones are gone, and every
updated replica is available; a Progressing condition with reason ProgressDeadlineExceeded
is a failure. What the Deployment cannot say (why a pod does not start) comes from the
pods' container statuses, using the waiting/terminated reasons the kubelet sets
(pkg/kubelet/images/types.go, pkg/kubelet/container/sync_result.go): an image that cannot
be pulled, a container that cannot be created, one that keeps crashing. A binary built for
another architecture shows as "exec format error" (the kernel's ENOEXEC, as runc reports it),
an image without this node's platform as containerd's "no match for platform in manifest".

Two things only a real kubelet showed (tests/lab/test_real_nodes.py, kubelet 1.36 with
containerd 2.3 and runc 1.1): a container that dies right after it starts (a binary of another
architecture: runc's exec fails after the container has been reported started) is Running and
Ready for about a second, long enough for the Deployment to count it available; and while the
kubelet backs off, its status stays `terminated` (reason Error, exit code 1), not `waiting:
CrashLoopBackOff`. So a terminated container of a Deployment's running pod is a crash, and a
rollout is only called ready when a second look (`previous`, the verdict of the look before)
finds the same containers still up, with no restart in between.

The crashed container's log (`previous_log`, for k8s_log's `previous`): with a `terminated`
state the crashed instance is the current one (False); the kubelet keeps one dead instance per
container, so the one before it is already gone. With `waiting: CrashLoopBackOff` it is the
last one (True).

loadwise_rollout_started_unready(pods) and loadwise_rollout_log_verdict(verdict, log_lines,
failure, where): a container that runs but never gets ready (metrics-server that cannot verify
the kubelets' serving certificates answers /readyz with 500 and logs `x509: ...` on every
scrape) is a failure as soon as its log shows the pattern the including role gives, with the
role's advice, instead of after the whole timeout.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

# Waiting reasons that never clear by themselves (the kubelet backs off and retries the same thing).
_PULL_FAILURES = {"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull"}
_START_FAILURES = {
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
    "StartError",
}
_WRONG_ARCH = ("exec format error", "no match for platform")


def _wrong_arch(text: str, node: str, arch: str) -> str:
    where = f"node {node}" + (f" ({arch})" if arch else "") if node else "this node"
    return (
        f"wrong architecture: the image has no binary for {where} ({text.strip()}). "
        "Use a multi-arch image or one built for the nodes' architecture."
    )


def _container_failure(pod: dict[str, Any], arches: dict[str, str]) -> dict[str, Any] | None:
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    node = (pod.get("spec") or {}).get("nodeName") or ""
    arch = arches.get(node, "")
    name = meta.get("name", "?")
    statuses = [(cs, True) for cs in status.get("initContainerStatuses") or []] + [
        (cs, False) for cs in status.get("containerStatuses") or []
    ]
    # a pod that has finished (evicted, say) is replaced by the ReplicaSet, not restarted
    finished = status.get("phase") in ("Failed", "Succeeded")
    for cs, init in statuses:
        state = cs.get("state") or {}
        waiting = state.get("waiting") or {}
        reason = waiting.get("reason") or ""
        message = waiting.get("message") or ""
        last = (cs.get("lastState") or {}).get("terminated") or {}
        image = cs.get("image") or ""
        found = {
            "pod": name,
            "container": cs.get("name", "?"),
            "logs": False,
            "previous_log": True,
            # for explain(): a log saying "exec format error" then names the node's CPU
            "node": node,
            "arch": arch,
        }
        if any(m in message for m in _WRONG_ARCH) or any(
            m in (last.get("message") or "") for m in _WRONG_ARCH
        ):
            text = message if any(m in message for m in _WRONG_ARCH) else last.get("message", "")
            return {**found, "reason": f"pod {name}: {_wrong_arch(text, node, arch)}"}
        if reason in _PULL_FAILURES:
            return {
                **found,
                "reason": f"pod {name}: cannot pull image {image or '?'}: {reason}"
                + (f": {message}" if message else "")
                + ". Check the image name and tag, the node's access to the registry,"
                " or import the image into the node's containerd.",
            }
        if reason in _START_FAILURES:
            return {
                **found,
                "reason": f"pod {name}: container {found['container']} cannot start:"
                f" {reason}: {message}",
            }
        if reason == "CrashLoopBackOff":
            exit_code = last.get("exitCode")
            detail = ", ".join(
                part
                for part in (
                    f"exit code {exit_code}" if exit_code is not None else "",
                    last.get("reason") or "",
                    (last.get("message") or "").strip(),
                )
                if part
            )
            return {
                **found,
                "logs": True,
                "reason": f"pod {name}: container {found['container']} keeps crashing"
                " (CrashLoopBackOff"
                + (f", {detail}" if detail else "")
                + f", {cs.get('restartCount', 0)} restarts)",
            }
        ended = state.get("terminated") or {}
        # an init container that exited 0 is done; any other exit of a Deployment's container
        # is a crash the kubelet answers with a restart after a back-off
        if ended and not finished and (ended.get("exitCode") != 0 or not init):
            detail = ", ".join(
                part
                for part in (
                    f"exit code {ended.get('exitCode')}",
                    ended.get("reason") or "",
                    (ended.get("message") or "").strip(),
                )
                if part
            )
            return {
                **found,
                "logs": True,
                "previous_log": False,
                "reason": f"pod {name}: container {found['container']} crashed ({detail});"
                f" the kubelet restarts it with back-off ({cs.get('restartCount', 0)} restarts"
                " so far)",
            }
    return None


def _seen(pods: list[dict[str, Any]]) -> list[str]:
    """Which container instances run, and how often each restarted: two equal looks in a row
    mean nothing crashed in between."""
    return sorted(
        f"{(pod.get('metadata') or {}).get('name', '?')}/{cs.get('name', '?')}"
        f"@{cs.get('containerID', '')}#{cs.get('restartCount', 0)}"
        for pod in pods
        for cs in (pod.get("status") or {}).get("containerStatuses") or []
    )


def _running_since_before(pods: list[dict[str, Any]], moment: float) -> bool:
    """Every container of these pods runs, and started before `moment` (epoch seconds)."""
    statuses = [
        cs for pod in pods for cs in (pod.get("status") or {}).get("containerStatuses") or []
    ]
    for cs in statuses:
        started = ((cs.get("state") or {}).get("running") or {}).get("startedAt")
        try:
            # the API server writes RFC 3339 in UTC ("2026-11-23T14:00:00Z")
            when = datetime.fromisoformat(str(started).replace("Z", "+00:00")).timestamp()
        except ValueError:
            return False
        if when >= moment:
            return False
    return bool(statuses)


def _pending_reason(pods: list[dict[str, Any]]) -> str:
    for pod in pods:
        for cond in (pod.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                name = (pod.get("metadata") or {}).get("name", "?")
                return (
                    f"pod {name} not scheduled: {cond.get('reason', '')}: {cond.get('message', '')}"
                )
    return ""


def verdict(
    deployment: dict[str, Any] | None,
    pods: list[dict[str, Any]] | None = None,
    nodes: list[dict[str, Any]] | None = None,
    previous: dict[str, Any] | None = None,
    settled_before: float | None = None,
) -> dict[str, Any]:
    """Where the Deployment's rollout stands, with the reason an operator can act on.

    previous: the verdict of the look before ({} before the first look); a rollout is then
    ready only when this look and the one before both found it ready with the same container
    instances. None judges this one look alone.
    settled_before: a time (seconds since the epoch, the controller's clock); when every
    container was already running before it, as the kubelet recorded its start, the first
    look is enough: a container that dies right after it starts is not up that long."""
    none = {"pod": "", "container": "", "logs": False, "previous_log": True}
    if not deployment:
        return {**none, "state": "waiting", "reason": "the Deployment does not exist (yet)"}
    meta = deployment.get("metadata") or {}
    spec = deployment.get("spec") or {}
    status = deployment.get("status") or {}
    name = f"{meta.get('namespace', '')}/{meta.get('name', '?')}"
    arches = {
        (n.get("metadata") or {}).get("name", ""): (
            (n.get("status") or {}).get("nodeInfo") or {}
        ).get("architecture", "")
        for n in nodes or []
    }
    live = [p for p in pods or [] if not (p.get("metadata") or {}).get("deletionTimestamp")]
    for pod in live:
        failure = _container_failure(pod, arches)
        if failure:
            return {
                **failure,
                "state": "failed",
                "reason": f"Deployment {name}: {failure['reason']}",
            }
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Progressing" and cond.get("reason") == "ProgressDeadlineExceeded":
            return {
                **none,
                "state": "failed",
                "reason": f"Deployment {name}: {cond.get('message', '')}",
            }

    wanted = spec.get("replicas", 1)
    updated = status.get("updatedReplicas", 0)
    total = status.get("replicas", 0)
    available = status.get("availableReplicas", 0)
    if status.get("observedGeneration", 0) < meta.get("generation", 0):
        waiting = "the controller has not seen the new spec yet"
    elif updated < wanted:
        waiting = f"{updated} of {wanted} replicas updated"
    elif total > updated:
        waiting = f"{total - updated} old replicas pending termination"
    elif available < updated:
        waiting = f"{available} of {updated} updated replicas available"
    else:
        reason = f"Deployment {name}: {available} of {wanted} replicas available"
        seen = _seen(live)
        settled = settled_before is not None and _running_since_before(live, settled_before)
        if previous is not None and previous.get("seen") != seen and not settled:
            # the first look that finds it ready, or a container restarted since the last one
            return {
                **none,
                "state": "waiting",
                "reason": f"{reason}; looking once more to see that they stay up",
                "seen": seen,
            }
        return {**none, "state": "ready", "reason": reason, "seen": seen}
    pending = _pending_reason(live)
    return {
        **none,
        "state": "waiting",
        "reason": f"Deployment {name}: {waiting}" + (f"; {pending}" if pending else ""),
    }


def explain(result: dict[str, Any], log_lines: list[str] | None = None, timeout: int = 0) -> str:
    """The message the run fails with: the verdict's reason, what the log says, what to do."""
    lines = [line for line in log_lines or [] if line.strip()]
    reason = str(result.get("reason", ""))
    said = [line for line in lines if any(m in line for m in _WRONG_ARCH)]
    if said and "wrong architecture" not in reason:
        node, arch = str(result.get("node") or ""), str(result.get("arch") or "")
        reason += ": " + _wrong_arch(said[-1], node, arch)
    if result.get("state") == "waiting":
        reason += f" (still not rolled out after {timeout} s)"
    if lines:
        reason = reason.rstrip(".") + "; last log lines: "
        reason += " | ".join(line.strip() for line in lines[-5:])
    return reason


def started_unready(pods: list[dict[str, Any]] | None) -> dict[str, str]:
    """The first container that runs but is not ready ({"pod", "container"}; {} when none):
    where a program that starts but cannot do its work says why, in its log."""
    for pod in pods or []:
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            if (cs.get("state") or {}).get("running") and not cs.get("ready"):
                return {
                    "pod": (pod.get("metadata") or {}).get("name", "?"),
                    "container": cs.get("name", "?"),
                }
    return {}


def log_verdict(
    result: dict[str, Any],
    log_lines: list[str] | None,
    failure: dict[str, str] | None,
    where: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A rollout still waiting is failed when the unready container's log has a line matching
    ``failure["pattern"]`` (a regular expression): a failure that waiting does not clear, named
    with ``failure["explain"]`` (what to do) and the lines that say it."""
    pattern = (failure or {}).get("pattern") or ""
    if result.get("state") != "waiting" or not pattern:
        return result
    said = [line.strip() for line in log_lines or [] if line.strip() and re.search(pattern, line)]
    if not said:
        return result
    pod = (where or {}).get("pod", "?")
    return {
        **result,
        "state": "failed",
        "pod": pod,
        "container": (where or {}).get("container", "?"),
        "reason": f"{result.get('reason', '')}; pod {pod} runs but is not ready, its log says: "
        + " | ".join(said[-3:])
        + (f". {failure['explain']}" if (failure or {}).get("explain") else ""),
    }


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "loadwise_rollout_verdict": verdict,
            "loadwise_rollout_explain": explain,
            "loadwise_rollout_started_unready": started_unready,
            "loadwise_rollout_log_verdict": log_verdict,
        }
