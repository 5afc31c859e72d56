"""Build a plausible recorded cluster of any size, for the demo, the benchmark and fixtures.

The documents have the shape the API server and metrics-server serve (lists with
`apiVersion`/`kind`/`metadata.resourceVersion`, pods with owner references, container
resources and PodScheduled conditions, metrics in nanocores and Ki), so they exercise
the same parsers as a live cluster. Values come from a seeded RNG: the same arguments
always give the same cluster, which keeps screenshots and benchmarks repeatable.
"""

from __future__ import annotations

import json
import math
import random
from datetime import datetime, timedelta
from typing import Any

from loadwise.extender import kubeobjects

from .recorded import RecordedCluster

__all__ = ["synthetic_cluster"]

JSON = dict[str, Any]

_APPS = [
    ("shop", "checkout", "250m", "256Mi", "1", "512Mi"),
    ("shop", "cart", "100m", "128Mi", "500m", "256Mi"),
    ("shop", "catalog", "200m", "384Mi", "1", "768Mi"),
    ("data", "ingest-worker", "500m", "1Gi", "2", "2Gi"),
    ("data", "redis", "100m", "512Mi", "", "1Gi"),
    ("web", "frontend", "50m", "64Mi", "200m", "128Mi"),
    ("web", "api", "300m", "512Mi", "1500m", "1Gi"),
    ("batch", "nightly-report", "1", "2Gi", "2", "4Gi"),
    ("monitoring", "node-exporter", "10m", "32Mi", "100m", "64Mi"),
]
_STRATEGIES = [
    "LowNodeUtilization",
    "RemovePodsViolatingTopologySpreadConstraint",
    "HighNodeUtilization",
]


def _ts(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def _micro(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _millis(cpu: str) -> float:
    return float(cpu[:-1]) if cpu.endswith("m") else float(cpu) * 1000


def _uid(rng: random.Random) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _node(
    name: str,
    *,
    control_plane: bool,
    cpu: int,
    mem_gi: int,
    created: datetime,
    ready: bool,
    cordoned: bool,
    ip: str,
) -> JSON:
    labels = {
        "beta.kubernetes.io/arch": "arm64" if cpu <= 4 else "amd64",
        "kubernetes.io/arch": "arm64" if cpu <= 4 else "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
    }
    if control_plane:
        labels["node-role.kubernetes.io/control-plane"] = ""
    reserved_m = 100 if cpu <= 4 else 200
    return kubeobjects.node(
        name,
        cpu=str(cpu),
        memory=f"{mem_gi * 1024 * 1024}Ki",
        ephemeral_storage="61202244Ki",
        allocatable={
            "cpu": f"{cpu * 1000 - reserved_m}m",
            "memory": f"{mem_gi * 1024 * 1024 - 512 * 1024}Ki",
            "pods": "110",
            "ephemeral-storage": "56403987978",
        },
        labels=labels,
        annotations={"node.alpha.kubernetes.io/ttl": "0"},
        spec={"podCIDR": "10.42.0.0/24", "podCIDRs": ["10.42.0.0/24"]},
        unschedulable=cordoned,
        taints=[kubeobjects.taint("node.kubernetes.io/unschedulable")] if cordoned else (),
        ready=ready,
        internal_ip=ip,
        node_info={
            "kubeletVersion": "v1.33.4",
            "containerRuntimeVersion": "containerd://2.0.5",
            "osImage": "Debian GNU/Linux 12 (bookworm)",
            "architecture": labels["kubernetes.io/arch"],
        },
        uid="",
        resource_version="",
        created=_ts(created),
    )


def _decision_v2(
    rng: random.Random,
    scores: dict[str, int],
    bound: str,
    failed: dict[str, str],
    heat: dict[str, float],
) -> JSON:
    """A version 2 `loadwise.dev/decision` (docs/contracts.md) for a pod bound to `bound`.

    Mostly the extender's favourite is where the pod went; sometimes the top priority is
    shared (kube-scheduler picks among equal totals at random, so the favourite may lose
    the draw), and sometimes the scheduler's own plugin scores outweigh the extender's.
    """
    others = {n: s for n, s in scores.items() if n != bound}
    roll = rng.random()
    if others and roll < 0.15:  # the scheduler's own plugins pulled the pod elsewhere
        scores[bound] = max(0, max(others.values()) - rng.randint(1, 2))
    elif others and roll < 0.35:  # a tie at the top priority
        scores[bound] = max(others.values())
    top = max(scores.values())
    tied = sorted(n for n, s in scores.items() if s == top)
    # The favourite is the highest fine (unrounded) score: among the tied, any may win it.
    best = bound if tied == [bound] else rng.choice(tied)
    use = {
        n: [
            min(99, int(heat[n] * 55) + (1 if n != best else 0) * rng.randint(0, 9)),
            min(99, int(heat[n] * 60) + rng.randint(0, 6)),
        ]
        for n in scores
    }
    estimated = sorted(n for n in scores if rng.random() < 0.1)
    decision: JSON = {
        "policy": "least-used",
        "source": "load-watcher",
        "stale": False,
        "scores": dict(sorted(scores.items())),
        "use": dict(sorted(use.items())),
        "estimated": estimated,
        "omitted": 0,
        "failed": failed,
        "best": best,
        "why": f"cpu {use[best][0]}%, memory {use[best][1]}% after placement",
        "bound": bound,
    }
    if len(tied) > 1:
        decision["tied"] = tied
    return decision


def synthetic_cluster(
    *,
    nodes: int = 6,
    pods: int = 40,
    now: datetime,
    seed: int = 7,
    polls: int = 12,
    with_extender: bool = True,
    evictions: int = 3,
) -> RecordedCluster:
    """A cluster of `nodes` nodes (the first a control plane) running `pods` pods."""
    rng = random.Random(seed)
    rv = 1000
    node_docs: list[JSON] = []
    node_caps: list[tuple[str, int, int]] = []
    width = max(2, len(str(nodes - 1)))
    for i in range(nodes):
        control_plane = i == 0
        name = "cp-1" if control_plane else f"worker-{i:0{width}d}"
        cpu, mem = rng.choice([(4, 8), (4, 8), (8, 16), (16, 32)]) if not control_plane else (4, 8)
        doc = _node(
            name,
            control_plane=control_plane,
            cpu=cpu,
            mem_gi=mem,
            created=now - timedelta(days=30 + i % 7),
            ready=not (nodes > 3 and i == nodes - 1),
            cordoned=nodes > 4 and i == nodes - 2,
            ip=f"10.0.{i // 250}.{10 + i % 250}",
        )
        rv += 1
        doc["metadata"]["uid"] = _uid(rng)
        doc["metadata"]["resourceVersion"] = str(rv)
        node_docs.append(doc)
        node_caps.append((name, cpu, mem))
    # Load skew: a few hot nodes, most moderate, so "which node is hottest" has an answer.
    heat = {
        name: (0.9 if k % 7 == 1 else 0.25 + 0.5 * rng.random())
        for k, (name, _, _) in enumerate(node_caps)
    }
    schedulable = [
        n for k, n in enumerate(node_caps) if k != 0 and not (nodes > 4 and k >= nodes - 2)
    ] or node_caps

    used_m = {name: 0.0 for name, _, _ in node_caps}
    pod_docs: list[JSON] = []
    pod_metrics: list[JSON] = []
    event_docs: list[JSON] = []
    per_app: dict[str, int] = {}
    for i in range(pods):
        namespace, app, cpu_req, mem_req, cpu_lim, mem_lim = _APPS[i % len(_APPS)]
        ordinal = per_app.get(app, 0)
        per_app[app] = ordinal + 1
        name = f"{app}-7d9f{ordinal:x}-{rng.getrandbits(20):05x}"
        want = _millis(cpu_req)
        fits = [n for n in schedulable if used_m[n[0]] + want <= n[1] * 1000 - 300] or schedulable
        node_name, _, _ = rng.choice(fits)
        used_m[node_name] += want
        uid = _uid(rng)
        # Newest pods first in time order: pod i was scheduled (pods - i) * 9 seconds ago.
        scheduled = now - timedelta(seconds=9 * (pods - i) + rng.randint(0, 5))
        created = scheduled - timedelta(milliseconds=rng.randint(20, 900))
        pending = i == pods - 1 and pods > 10
        scheduler = "loadwise-scheduler" if i % 3 else "default-scheduler"
        limits = {k: v for k, v in (("cpu", cpu_lim), ("memory", mem_lim)) if v}
        rv += 1
        conditions: list[JSON] = [
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": _ts(scheduled),
            }
        ]
        if not pending:
            conditions += [
                {"type": "Initialized", "status": "True", "lastTransitionTime": _ts(scheduled)},
                {
                    "type": "Ready",
                    "status": "True",
                    "lastTransitionTime": _ts(scheduled + timedelta(seconds=4)),
                },
            ]
        pod = kubeobjects.pod(
            name,
            namespace=namespace,
            uid=uid,
            containers=[
                kubeobjects.container(
                    app,
                    image=f"registry.example/{namespace}/{app}:1.4.2",
                    requests={"cpu": cpu_req, "memory": mem_req},
                    limits=limits,
                )
            ],
            node_name=node_name,
            phase="Pending" if pending else "Running",
            labels={"app.kubernetes.io/name": app, "pod-template-hash": "7d9f"},
            generate_name=name[: name.rindex("-") + 1],
            owner={
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": f"{app}-7d9f",
                "uid": _uid(rng),
                "controller": True,
                "blockOwnerDeletion": True,
            },
            resource_version=str(rv),
            created=_ts(created),
            # Not `scheduled_at`: that gives PodScheduled alone, and running pods here
            # also carry Initialized and Ready.
            status={"conditions": conditions, "hostIP": "", "startTime": _ts(scheduled)},
            extra={
                "schedulerName": scheduler,
                "restartPolicy": "Always",
                "terminationGracePeriodSeconds": 30,
                "priority": 0,
            },
        )
        pod_docs.append(pod)
        if not pending:
            used_cpu = rng.uniform(0.2, 1.1) * heat[node_name] * 1.4 * _millis(cpu_req) / 1000
            used_mem = rng.uniform(0.5, 1.2) * heat[node_name] * 1.3
            pod_metrics.append(
                {
                    "metadata": {
                        "name": name,
                        "namespace": namespace,
                        "creationTimestamp": _ts(now),
                        "labels": {"app.kubernetes.io/name": app},
                    },
                    "timestamp": _ts(now - timedelta(seconds=11)),
                    "window": "15.012s",
                    "containers": [
                        {
                            "name": app,
                            "usage": {
                                "cpu": f"{int(used_cpu * 1e9)}n",
                                "memory": f"{int(used_mem * 200_000)}Ki",
                            },
                        }
                    ],
                }
            )
        if with_extender and scheduler == "loadwise-scheduler":
            candidates = rng.sample(schedulable, k=min(4, len(schedulable)))
            names = [c[0] for c in candidates if c[0] != node_name][:3] + [node_name]
            scores = {
                n: max(0, min(10, round(10 * (1 - heat[n]) + rng.uniform(-1, 1)))) for n in names
            }
            scores[node_name] = max(scores.values()) + (0 if rng.random() < 0.2 else 1)
            scores[node_name] = min(scores[node_name], 10)
            failed = {}
            hot = [n for n, *_ in node_caps if heat[n] >= 0.9 and n != node_name]
            if hot:
                failed[hot[0]] = f"cpu {int(heat[hot[0]] * 100 + 3)}% > 90% threshold"
            decision = _decision_v2(random.Random(f"{seed}:{uid}"), scores, node_name, failed, heat)
            best = str(decision["best"])
            why = str(decision["why"])
            msg_scores = " ".join(
                f"{n}={s}" for n, s in sorted(scores.items(), key=lambda kv: -kv[1])
            )
            message = f"scores {msg_scores}; best {best}: {why}"
            if failed:
                message += "; " + "; ".join(f"filtered {n}: {r}" for n, r in failed.items())
            at = scheduled - timedelta(milliseconds=40)
            rv += 1
            event_docs.append(
                {
                    "metadata": {
                        "name": f"{name}.{rng.getrandbits(60):x}",
                        "namespace": namespace,
                        "uid": _uid(rng),
                        "resourceVersion": str(rv),
                        "creationTimestamp": _ts(at),
                        "annotations": {
                            "loadwise.dev/decision": json.dumps(decision, separators=(",", ":"))
                        },
                    },
                    "involvedObject": {
                        "kind": "Pod",
                        "namespace": namespace,
                        "name": name,
                        "uid": uid,
                        "apiVersion": "v1",
                        "resourceVersion": pod["metadata"]["resourceVersion"],
                    },
                    "reason": "LoadwiseScored",
                    "message": message,
                    "type": "Normal",
                    "source": {"component": "loadwise-extender"},
                    "firstTimestamp": _ts(at),
                    "lastTimestamp": _ts(at),
                    "count": 1,
                    "eventTime": None,
                    "reportingComponent": "loadwise-extender",
                    "reportingInstance": "cp-1",
                }
            )
    hot_nodes = [n for n, *_ in node_caps if heat[n] >= 0.9] or [node_caps[-1][0]]
    for k in range(evictions):
        namespace, app, *_ = _APPS[k % len(_APPS)]
        victim = f"{app}-5c4b{k:x}-{rng.getrandbits(20):05x}"
        node_name = hot_nodes[k % len(hot_nodes)]
        at = now - timedelta(seconds=95 * (k + 1) + 13)
        rv += 1
        event_docs.append(
            {
                "metadata": {
                    "name": f"{victim}.{rng.getrandbits(60):x}",
                    "namespace": namespace,
                    "uid": _uid(rng),
                    "resourceVersion": str(rv),
                    "creationTimestamp": _ts(at),
                },
                "involvedObject": {
                    "kind": "Pod",
                    "namespace": namespace,
                    "name": victim,
                    "uid": _uid(rng),
                    "apiVersion": "v1",
                },
                "reason": _STRATEGIES[k % len(_STRATEGIES)],
                "message": f"pod eviction from {node_name} node by sigs.k8s.io/descheduler",
                "type": "Normal",
                "action": "Descheduled",
                "source": {},
                "firstTimestamp": None,
                "lastTimestamp": None,
                "count": 0,
                "eventTime": _micro(at),
                "reportingComponent": "sigs.k8s.io.descheduler",
                "reportingInstance": "sigs.k8s.io.descheduler-descheduler-6f7c9d-x2kqp",
            }
        )
    rv += 1
    event_docs.append(
        {  # an unrelated event the TUI must ignore
            "metadata": {
                "name": "worker-01.17f3a",
                "namespace": "default",
                "uid": _uid(rng),
                "resourceVersion": str(rv),
                "creationTimestamp": _ts(now - timedelta(minutes=20)),
            },
            "involvedObject": {"kind": "Node", "name": node_caps[-1][0], "uid": node_caps[-1][0]},
            "reason": "NodeNotReady",
            "message": f"Node {node_caps[-1][0]} status is now: NodeNotReady",
            "type": "Normal",
            "source": {"component": "node-controller"},
            "firstTimestamp": _ts(now - timedelta(minutes=20)),
            "lastTimestamp": _ts(now - timedelta(minutes=20)),
            "count": 1,
            "reportingComponent": "node-controller",
        }
    )

    node_polls: list[JSON] = []
    for p in range(polls):
        stamp = now - timedelta(seconds=15 * (polls - 1 - p) + 6)
        items = []
        for k, (name, cpu, mem) in enumerate(node_caps):
            if nodes > 3 and k == nodes - 1:
                continue  # NotReady: metrics-server has nothing for it
            wave = 0.12 * math.sin((p + k) / 2.5)
            load = min(0.98, max(0.03, heat[name] + wave + rng.uniform(-0.04, 0.04)))
            if not used_m[name]:
                load = 0.04 + 0.02 * rng.random()  # system daemons only
            items.append(
                {
                    "metadata": {
                        "name": name,
                        "creationTimestamp": _ts(stamp),
                        "labels": {"kubernetes.io/hostname": name},
                    },
                    "timestamp": _ts(stamp - timedelta(seconds=4)),
                    "window": "20.05s",
                    "usage": {
                        "cpu": f"{int(load * cpu * 1e9)}n",
                        "memory": f"{int(min(0.97, load * 0.9 + 0.08) * mem * 1024 * 1024)}Ki",
                    },
                }
            )
        node_polls.append(
            {
                "kind": "NodeMetricsList",
                "apiVersion": "metrics.k8s.io/v1beta1",
                "metadata": {},
                "items": items,
            }
        )
    return RecordedCluster(
        nodes={
            "kind": "NodeList",
            "apiVersion": "v1",
            "metadata": {"resourceVersion": str(rv)},
            "items": node_docs,
        },
        pods={
            "kind": "PodList",
            "apiVersion": "v1",
            "metadata": {"resourceVersion": str(rv)},
            "items": pod_docs,
        },
        events={
            "kind": "EventList",
            "apiVersion": "v1",
            "metadata": {"resourceVersion": str(rv)},
            "items": event_docs,
        },
        node_metrics=node_polls,
        pod_metrics={
            "kind": "PodMetricsList",
            "apiVersion": "metrics.k8s.io/v1beta1",
            "metadata": {},
            "items": pod_metrics,
        },
    )
