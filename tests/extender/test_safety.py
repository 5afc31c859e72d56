"""The extender never blocks what must run, and no caller or reading can switch it off.

Through the real wire: the aiohttp server over loopback, with (where a pod watch and
Events are part of the case) the real Kubernetes client watching a small fake API
server on loopback (``test_cluster.FakeAPI``; the lab runs the real one). Pods are
sent in the shapes their controllers give them.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import logging
import math
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import msgspec
import pytest
from aiohttp.test_utils import TestServer

from loadwise.extender import kubeobjects
from loadwise.extender.cli import build_parser, overrides_from
from loadwise.extender.config import ConfigError, load_settings
from loadwise.extender.exemptions import exemption, ignored
from loadwise.extender.server import make_app
from loadwise.extender.service import UNCONFIRMED_SECONDS, Extender
from loadwise.extender.wire import Pod
from loadwise.extender.wiring import build_extender

from .helpers import StaticSource, node_json, snapshot
from .test_cluster import FakeAPI, kubeconfig, wait_for

GI = 1024**3

# -- pods as their controllers create them ---------------------------------------------


def _workload_pod(name: str, *, namespace: str = "shop", **extra: Any) -> dict[str, Any]:
    """A Deployment's pod as its ReplicaSet creates it."""
    spec_extra = {"schedulerName": "default-scheduler", "priority": 0}
    spec_extra.update(extra.pop("spec", {}))
    return kubeobjects.pod(
        name,
        namespace=namespace,
        uid=f"uid-{name}",
        generate_name=name.rsplit("-", 1)[0] + "-",
        owner={
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": name.rsplit("-", 1)[0],
            "uid": "rs-uid",
            "controller": True,
            "blockOwnerDeletion": True,
        },
        containers=[
            kubeobjects.container(
                "app", requests={"cpu": "100m", "memory": "128Mi"}, limits={"memory": "256Mi"}
            )
        ],
        labels={"app": "web", "pod-template-hash": "7b8bc6ff54"},
        phase="Pending",
        extra=spec_extra,
        **extra,
    )


def daemonset_pod(node: str) -> dict[str, Any]:
    """A DaemonSet's pod as the DaemonSet controller creates it: owned by the DaemonSet
    as its controller, pinned to one node by a required node affinity on the field
    ``metadata.name`` (kubernetes pkg/controller/daemon/util,
    ReplaceDaemonSetPodNodeNameNodeAffinity), with the tolerations it adds."""
    tolerate = [
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),
    ]
    return kubeobjects.pod(
        "node-exporter-x7k2p",
        namespace="monitoring",
        uid="uid-node-exporter-x7k2p",
        generate_name="node-exporter-",
        owner={
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "name": "node-exporter",
            "uid": "ds-uid",
            "controller": True,
            "blockOwnerDeletion": True,
        },
        containers=[
            kubeobjects.container(
                "node-exporter",
                requests={"cpu": "100m", "memory": "180Mi"},
                limits={"memory": "180Mi"},
            )
        ],
        tolerations=[
            {"key": key, "operator": "Exists", "effect": effect} for key, effect in tolerate
        ],
        labels={
            "app.kubernetes.io/name": "node-exporter",
            "controller-revision-hash": "6d5f8b7c9",
            "pod-template-generation": "1",
        },
        phase="Pending",
        extra={
            "schedulerName": "default-scheduler",
            "priority": 0,
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchFields": [
                                    {"key": "metadata.name", "operator": "In", "values": [node]}
                                ]
                            }
                        ]
                    }
                }
            },
        },
    )


def mirror_pod(node: str) -> dict[str, Any]:
    """A static pod's mirror as the kubelet creates it in the API: owned by its Node, the
    kubelet's config annotations (pkg/kubelet/types/pod_update.go), no priority class."""
    return kubeobjects.pod(
        f"static-web-{node}",
        namespace="default",
        uid="uid-static-web",
        owner={
            "apiVersion": "v1",
            "kind": "Node",
            "name": node,
            "uid": "node-uid",
            "controller": True,
        },
        annotations={
            "kubernetes.io/config.hash": "5e6c1c2a3b9f4d7e8a0b1c2d3e4f5a6b",
            "kubernetes.io/config.mirror": "5e6c1c2a3b9f4d7e8a0b1c2d3e4f5a6b",
            "kubernetes.io/config.seen": "2026-11-25T08:00:00.000000000Z",
            "kubernetes.io/config.source": "file",
        },
        containers=[kubeobjects.container("web", requests={"cpu": "100m", "memory": "64Mi"})],
        node_name=node,
        phase="Pending",
        extra={"priority": 0},
    )


def critical_pod() -> dict[str, Any]:
    """k3s's local-path-provisioner, a Deployment's pod of class system-node-critical, with
    the priority the Priority admission plugin resolves it to (2000001000)."""
    return _workload_pod(
        "local-path-provisioner-5d56847996-4xq2m",
        namespace="kube-system",
        spec={"priorityClassName": "system-node-critical", "priority": 2000001000},
    )


MUST_RUN = {
    "daemonset": daemonset_pod,
    "mirror": mirror_pod,
    "critical": lambda node: critical_pod(),
}
# 95 % of 8Gi plus the pod's memory estimate (Koordinator's: the larger of request and
# limit, x 0.7): 180Mi -> 126Mi (+1.5 points), 256Mi -> 179Mi (+2.2), 64Mi -> 45Mi (+0.5).
OVER = {"daemonset": 97, "mirror": 96, "critical": 97}
WHY = {
    "daemonset": "DaemonSet pod",
    "mirror": "mirror pod",
    "critical": "system-critical pod (system-node-critical)",
}


# -- a cluster on loopback --------------------------------------------------------------


def load_file(tmp_path, loads: Mapping[str, tuple[float, float]]):
    """A load-watcher /watcher document with each node's latest cpu and memory percent."""
    path = tmp_path / "watcher.json"
    metrics = {
        name: {
            "metrics": [
                {"type": "CPU", "operator": "Latest", "value": cpu},
                {"type": "Memory", "operator": "Latest", "value": memory},
            ]
        }
        for name, (cpu, memory) in loads.items()
    }
    now = int(time.time())
    doc = {
        "timestamp": now,
        "window": {"duration": "1m", "start": now - 60, "end": now},
        "source": "KubernetesMetricsServer",
        "data": {"NodeMetricsMap": metrics},
    }
    path.write_text(json.dumps(doc))
    return path


@dataclass
class Cluster:
    client: httpx.AsyncClient
    ext: Extender
    api: FakeAPI | None

    async def call(self, verb: str, pod: dict[str, Any], names: list[str]) -> Any:
        body = json.dumps({"Pod": pod, "NodeNames": names})
        r = await self.client.post(f"/scheduler/{verb}", content=body)
        assert r.status_code == 200, r.text
        return r.json()

    async def bind(self, pod: dict[str, Any], node: str) -> None:
        """What kube-scheduler does next, as the pod watch sees it."""
        assert self.api is not None
        bound = copy.deepcopy(pod)
        bound["spec"]["nodeName"] = node
        await self.api.pod_events.put({"type": "ADDED", "object": bound})

    async def event_for(self, pod: dict[str, Any]) -> dict[str, Any]:
        assert self.api is not None
        api, name = self.api, pod["metadata"]["name"]
        await wait_for(
            lambda: any(e["involvedObject"]["name"] == name for e in api.events), f"{name}'s Event"
        )
        return next(e for e in api.events if e["involvedObject"]["name"] == name)

    async def metric(self, line: str) -> float | None:
        """The value of the /metrics sample ``line`` (name and labels), None if absent."""
        for text in (await self.client.get("/metrics")).text.splitlines():
            if text.startswith(line + " "):
                return float(text.rsplit(" ", 1)[1])
        return None


def decision_of(event: Mapping[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(event["metadata"]["annotations"]["loadwise.dev/decision"])
    return result


def _nodes(names, **kw):
    return [kubeobjects.node(n, cpu="4", memory="8Gi", **kw) for n in names]


@contextlib.asynccontextmanager
async def watched(
    tmp_path,
    loads: Mapping[str, tuple[float, float]],
    nodes: list[dict[str, Any]] | None = None,
    **overrides: Any,
) -> AsyncIterator[Cluster]:
    """The extender as ``wiring.build_extender`` builds it with a kubeconfig: node and pod
    watch, Events, a load file; served over loopback."""
    api = FakeAPI()
    api.nodes = nodes if nodes is not None else _nodes(loads)
    api_server = TestServer(api.app(), host="127.0.0.1")
    await api_server.start_server()
    config = kubeconfig(tmp_path, str(api_server.make_url("")).rstrip("/"))
    settings = load_settings(
        None,
        {
            "kubeconfig": str(config),
            "source.kind": "file",
            "source.file": str(load_file(tmp_path, loads)),
            "source.stale_after_seconds": 0,
            **overrides,
        },
    )
    ext = build_extender(settings)
    assert ext.recorder is not None
    ext.recorder.merge_seconds = 0.05
    server = TestServer(make_app(ext), host="127.0.0.1")
    await server.start_server()
    try:
        async with httpx.AsyncClient(base_url=str(server.make_url(""))) as client:
            await wait_for(lambda: ext.readiness()[0], "a load snapshot and a synced watch")
            await wait_for(lambda: api.watch_calls >= 2, "the pod watch past its first 410")
            yield Cluster(client, ext, api)
    finally:
        api.closing.set()
        await server.close()
        await api_server.close()


@contextlib.asynccontextmanager
async def unwatched(
    loads: Mapping[str, tuple[float, float]], **overrides: Any
) -> AsyncIterator[Cluster]:
    """The extender without a kubeconfig, holding one snapshot as given (unchecked)."""
    settings = load_settings(None, {"source.kind": "file", "source.file": "/dev/null", **overrides})
    ext = Extender(settings, StaticSource(snapshot(loads)))
    server = TestServer(make_app(ext), host="127.0.0.1")
    await server.start_server()
    try:
        async with httpx.AsyncClient(base_url=str(server.make_url(""))) as client:
            await wait_for(lambda: ext.refresher.snapshot is not None, "the snapshot")
            yield Cluster(client, ext, None)
    finally:
        await server.close()


# -- exemptions ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(MUST_RUN))
async def test_a_pod_that_must_run_is_never_rejected_for_load(tmp_path, kind):
    """A DaemonSet's pod reaches the extender with its one node (the affinity filtered the
    rest), a mirror pod with its own; a system-critical Deployment pod with every node.
    Each passes its node at 95 % memory, is scored as usual, and its Event says why."""
    async with watched(tmp_path, {"hot": (20.0, 95.0), "cool": (20.0, 30.0)}) as c:
        pod = MUST_RUN[kind]("hot")
        names = ["hot"] if kind != "critical" else ["hot", "cool"]
        out = await c.call("filter", pod, names)
        assert out["NodeNames"] == names and out["FailedAndUnresolvableNodes"] == {}
        scores = {h["Host"]: h["Score"] for h in await c.call("prioritize", pod, names)}
        if kind == "critical":  # scored as usual: the cool node is the favourite
            assert scores["cool"] > scores["hot"]
        await c.bind(pod, "hot")
        event = await c.event_for(pod)
        assert event["type"] == "Normal"  # nothing went wrong: the pod may go there
        assert event["message"].startswith(f"{WHY[kind]}: never rejected for load")
        decision = decision_of(event)
        assert decision["exempt"] == WHY[kind]
        assert decision["let_through"] == {"hot": f"memory {OVER[kind]}% > 90% threshold"}
        name = "loadwise_extender_filter_all_over_threshold_total"
        assert await c.metric(name) == 0.0


def test_only_the_kubelets_own_marks_make_a_pod_exempt():
    """What is not exempt: an owner that is not the DaemonSet controller, a priority just
    below the system range, a class name that only looks like a system one."""
    ds = msgspec.convert(daemonset_pod("n"), type=Pod)
    assert exemption(ds) == "DaemonSet pod"
    not_controller = copy.deepcopy(daemonset_pod("n"))
    not_controller["metadata"]["ownerReferences"][0]["controller"] = False
    assert exemption(msgspec.convert(not_controller, type=Pod)) is None
    below = _workload_pod("web-7b8bc6ff54-a", spec={"priority": 1_999_999_999})
    assert exemption(msgspec.convert(below, type=Pod)) is None
    at = _workload_pod("web-7b8bc6ff54-b", spec={"priority": 2_000_000_000})
    assert exemption(msgspec.convert(at, type=Pod)) == "system-critical pod (priority 2000000000)"
    lookalike = _workload_pod("web-7b8bc6ff54-c", spec={"priorityClassName": "system-critical"})
    assert exemption(msgspec.convert(lookalike, type=Pod)) is None
    api = _workload_pod("web-7b8bc6ff54-d", annotations={"kubernetes.io/config.source": "api"})
    assert exemption(msgspec.convert(api, type=Pod)) is None


# -- no dead end -------------------------------------------------------------------------


async def test_a_single_node_at_92_percent_memory_still_starts_its_next_pod(tmp_path):
    async with watched(tmp_path, {"pi": (30.0, 92.0)}) as c:
        pod = _workload_pod("web-7b8bc6ff54-xx9nh")
        out = await c.call("filter", pod, ["pi"])
        assert out["NodeNames"] == ["pi"] and out["FailedAndUnresolvableNodes"] == {}
        assert await c.metric("loadwise_extender_filter_all_over_threshold_total") == 1.0
        await c.bind(pod, "pi")
        event = await c.event_for(pod)
        assert event["type"] == "Warning" and event["reason"] == "LoadwiseScored"
        # 92 % of 8Gi + the pod's 179Mi estimate = 94 %
        assert event["message"].startswith(
            "every candidate over its threshold: let through the least loaded "
            "pi: memory 94% > 90% threshold; bound to pi"
        )
        assert decision_of(event)["let_through"] == {"pi": "memory 94% > 90% threshold"}


async def test_when_every_node_is_over_the_least_loaded_pass_and_the_rest_stay_rejected():
    # Without a kubeconfig node sizes are unknown: the measured percentages decide.
    loads = {"a": (20.0, 97.0), "b": (93.0, 40.0), "c": (20.0, 93.0), "d": (99.0, 99.0)}
    async with unwatched(loads) as c:
        out = await c.call("filter", _workload_pod("web-7b8bc6ff54-a"), list(loads))
        # b and c are 3 points over, a 7, d 9: the least over pass and so does a, within
        # least-used's spreading band (5 points) of them, in the asked order; d stays out
        assert out["NodeNames"] == ["a", "b", "c"]
        assert out["FailedAndUnresolvableNodes"] == {
            "d": "cpu 99% > 90% threshold; memory 99% > 90% threshold",
        }
        out = await c.call("filter", _workload_pod("web-7b8bc6ff54-b"), ["a", "c", "e"])
        # e has no reading: it passes, so nobody else is let through
        assert out["NodeNames"] == ["e"] and set(out["FailedAndUnresolvableNodes"]) == {"a", "c"}
        assert await c.metric("loadwise_extender_filter_all_over_threshold_total") == 1.0


# -- opt-out -----------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["annotation", "namespace"])
async def test_an_opted_out_pod_passes_everywhere_with_equal_priorities_and_no_event(tmp_path, how):
    loads = {"hot": (20.0, 95.0), "cool": (10.0, 20.0)}
    async with watched(tmp_path, loads, ignore_namespaces=["batch"]) as c:
        if how == "annotation":
            pod = _workload_pod("job-6c9f4-a", annotations={"loadwise.dev/ignore": "true"})
        else:
            pod = _workload_pod("job-6c9f4-a", namespace="batch")
        out = await c.call("filter", pod, ["hot", "cool"])
        assert out["NodeNames"] == ["hot", "cool"] and out["FailedAndUnresolvableNodes"] == {}
        scores = await c.call("prioritize", pod, ["hot", "cool"])
        assert scores == [{"Host": "hot", "Score": 5}, {"Host": "cool", "Score": 5}]
        await c.bind(pod, "hot")
        # an ordinary pod scored after it gets its Event: the opted-out one never did
        other = _workload_pod("web-7b8bc6ff54-b")
        assert (await c.call("filter", other, ["hot", "cool"]))["NodeNames"] == ["cool"]
        await c.call("prioritize", other, ["hot", "cool"])
        await c.bind(other, "cool")
        await c.event_for(other)
        assert [e["involvedObject"]["name"] for e in c.api.events] == ["web-7b8bc6ff54-b"]
        ignored_line = 'loadwise_extender_decisions_total{outcome="ignored",verb="filter"}'
        assert await c.metric(ignored_line) == 1.0


def test_the_annotation_false_opts_one_pod_of_an_ignored_namespace_back_in(caplog):
    back = _workload_pod("web-a", namespace="batch", annotations={"loadwise.dev/ignore": "false"})
    assert ignored(msgspec.convert(back, type=Pod), {"batch"}) is None
    odd = _workload_pod("web-b", annotations={"loadwise.dev/ignore": "yes please"})
    with caplog.at_level(logging.WARNING, logger="loadwise.extender.exemptions"):
        for _ in range(3):
            assert ignored(msgspec.convert(odd, type=Pod), ()) is None
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "is neither true nor false" in lines[0]


def test_a_namespace_that_cannot_exist_is_refused_at_start():
    with pytest.raises(ConfigError, match="ignore_namespaces: 'Kube_System' is not a namespace"):
        load_settings(None, {"ignore_namespaces": ["Kube_System"], "source.url": "http://x"})
    with pytest.raises(ConfigError, match="mode"):
        load_settings(None, {"mode": "dry-run", "source.url": "http://x"})


# -- per-node thresholds -------------------------------------------------------------------


THRESHOLD_NODES = [
    # a Raspberry Pi whose memory may only reach 75 %, by annotation
    kubeobjects.node(
        "pi", cpu="4", memory="4Gi", annotations={"loadwise.dev/memory-threshold": "75"}
    ),
    # a mini PC allowed to 95 % CPU, by label (given at join: kubelet --node-labels)
    kubeobjects.node(
        "mini",
        cpu="8",
        memory="32Gi",
        labels={"kubernetes.io/hostname": "mini", "loadwise.dev/cpu-threshold": "95%"},
    ),
    # an annotation nobody can read: the default applies, the request is answered
    kubeobjects.node(
        "odd", cpu="4", memory="8Gi", annotations={"loadwise.dev/cpu-threshold": "ninety"}
    ),
]
THRESHOLD_LOADS = {"pi": (10.0, 80.0), "mini": (92.0, 10.0), "odd": (92.0, 10.0)}


def _check_thresholds(out: dict[str, Any]) -> None:
    failed = out["FailedAndUnresolvableNodes"]
    assert failed["pi"].startswith("memory ") and failed["pi"].endswith("% > 75% threshold")
    assert failed["odd"].startswith("cpu ") and failed["odd"].endswith("% > 90% threshold")
    assert "mini" not in failed


async def test_a_nodes_own_thresholds_come_from_the_watch_and_reach_the_decision(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="loadwise.extender.model")
    async with watched(tmp_path, THRESHOLD_LOADS, THRESHOLD_NODES) as c:
        pod = _workload_pod("web-7b8bc6ff54-a")
        out = await c.call("filter", pod, ["pi", "mini", "odd"])
        assert out["NodeNames"] == ["mini"]
        _check_thresholds(out)
        await c.bind(pod, "mini")
        decision = decision_of(await c.event_for(pod))
        # the dashboard reads this key: node -> {"cpu": pct, "memory": pct}, differing ones
        assert decision["thresholds"] == {
            "pi": {"cpu": 90.0, "memory": 75.0},
            "mini": {"cpu": 95.0, "memory": 90.0},
        }
    warnings = [r.getMessage() for r in caplog.records if "ninety" in r.getMessage()]
    assert len(warnings) == 1, warnings  # once, not per request or per relist
    assert "annotation loadwise.dev/cpu-threshold" in warnings[0]


async def test_a_nodes_own_thresholds_come_from_full_node_objects():
    """nodeCacheCapable: false, no kubeconfig: the Node objects in the request say it."""
    async with unwatched(THRESHOLD_LOADS) as c:
        body = json.dumps(
            {"Pod": _workload_pod("web-7b8bc6ff54-a"), "Nodes": {"items": THRESHOLD_NODES}}
        )
        out = (await c.client.post("/scheduler/filter", content=body)).json()
        assert [n["metadata"]["name"] for n in out["Nodes"]["items"]] == ["mini"]
        _check_thresholds(out)


# -- observe-only ----------------------------------------------------------------------------


async def test_observe_mode_rejects_nothing_answers_equal_priorities_and_says_would(tmp_path):
    loads = {"hot": (20.0, 95.0), "cool": (10.0, 20.0)}
    async with watched(tmp_path, loads, mode="observe") as c:
        pod = _workload_pod("web-7b8bc6ff54-a")
        out = await c.call("filter", pod, ["hot", "cool"])
        assert out["NodeNames"] == ["hot", "cool"] and out["FailedAndUnresolvableNodes"] == {}
        scores = await c.call("prioritize", pod, ["hot", "cool"])
        assert scores == [{"Host": "hot", "Score": 5}, {"Host": "cool", "Score": 5}]
        await c.bind(pod, "hot")  # the scheduler's own choice: nothing steered it
        event = await c.event_for(pod)
        assert event["type"] == "Normal"
        message = event["message"]
        assert message.startswith("observe-only, nothing applied; bound to hot")
        assert "would have preferred cool" in message
        assert "would have rejected hot: memory 97% > 90% threshold" in message
        decision = decision_of(event)
        assert decision["observe"] is True and decision["best"] == "cool"
        assert decision["scores"]["cool"] > decision["scores"]["hot"]  # what it would have said


def test_the_observe_flag_sets_the_mode():
    assert overrides_from(build_parser().parse_args(["--observe"]))["mode"] == "observe"
    assert "mode" not in overrides_from(build_parser().parse_args([]))


# -- what one caller can make it believe -----------------------------------------------------


def _made_up(uid: str, requests: dict[str, str], limits: dict[str, str] | None = None):
    return kubeobjects.pod(
        f"made-up-{uid}",
        uid=uid,
        containers=[kubeobjects.container("x", requests=requests, limits=limits)],
    )


async def test_a_made_up_pod_cannot_make_a_node_look_full(tmp_path):
    """A prioritize call for a pod asking 64 CPU / 1 TiB, naming one node: kube-scheduler's
    own fit check never sends such a pod for a 4-CPU node, so it is not counted; one with
    small requests but 1 TiB limits counts at most the node's size, and only until the
    watch could have seen it bound (UNCONFIRMED_SECONDS); neither gets an Event."""
    async with watched(tmp_path, {"a": (20.0, 30.0), "b": (20.0, 30.0)}) as c:
        ext = c.ext
        assert ext.recorder is not None
        ext.recorder.bind_wait_seconds = 0.2
        for i in range(3):
            await c.call("prioritize", _made_up(f"big-{i}", {"cpu": "64", "memory": "1Ti"}), ["a"])
        assert await c.metric("loadwise_extender_placements_refused_total") == 3.0
        real = _workload_pod("web-7b8bc6ff54-a")
        assert (await c.call("filter", real, ["a", "b"]))["NodeNames"] == ["a", "b"]

        limits = {"cpu": "64", "memory": "1Ti"}
        await c.call("prioritize", _made_up("wide", {"cpu": "100m"}, limits), ["a"])
        pending = ext.ledger.everything()["a"]
        assert pending.cpu_millis <= 4000 and pending.memory_bytes <= 8 * GI
        out = await c.call("filter", _workload_pod("web-7b8bc6ff54-b"), ["a", "b"])
        assert out["NodeNames"] == ["b"]  # counted at the node's size: full, for now

        ext.clock = lambda: time.time() + UNCONFIRMED_SECONDS + 1
        ext.housekeep()
        assert "a" not in ext.ledger.everything()
        out = await c.call("filter", _workload_pod("web-7b8bc6ff54-c"), ["a", "b"])
        assert out["NodeNames"] == ["a", "b"]

        unbound = 'loadwise_extender_events_total{outcome="unbound"}'
        for _ in range(100):  # every note above: waited 0.2 s for a binding, then dropped
            if (await c.metric(unbound) or 0) >= 7:
                break
            await asyncio.sleep(0.05)
        assert await c.metric(unbound) == 7.0
        assert c.api.events == []  # no pod the watch saw: no Event in anybody's namespace


async def test_without_a_watch_an_assumption_is_capped_but_lasts_the_ledger_horizon():
    """No kubeconfig (full Node objects in the requests): the same cap on what a placement
    counts; but nothing could confirm a placement, so none is dropped early."""
    async with unwatched({"a": (20.0, 30.0)}) as c:
        pod = _made_up("wide", {"cpu": "100m"}, {"cpu": "64", "memory": "1Ti"})
        body = json.dumps({"Pod": pod, "Nodes": {"items": [node_json("a")]}})
        assert (await c.client.post("/scheduler/prioritize", content=body)).status_code == 200
        c.ext.clock = lambda: time.time() + UNCONFIRMED_SECONDS + 1
        c.ext.housekeep()
        pending = c.ext.ledger.everything()["a"]
        assert pending.pods == 1
        assert pending.cpu_millis == 4000 and pending.memory_bytes == 8 * GI


# -- bad readings --------------------------------------------------------------------------


async def test_a_bad_reading_affects_only_its_node():
    """Readings no source check caught (here: a snapshot taken as given) make their own
    node unknown; the others keep their scores, and nothing is answered fail-open."""
    loads = {
        "good": (10.0, 20.0),
        "busy": (60.0, 85.0),
        "negative": (-5.0, -5.0),
        "huge": (1e308, 1e308),
        "nan": (math.nan, 50.0),
    }
    async with unwatched(loads) as c:
        nodes = [node_json(name) for name in loads]
        body = json.dumps({"Pod": _workload_pod("web-7b8bc6ff54-a"), "Nodes": {"items": nodes}})
        r = await c.client.post("/scheduler/prioritize", content=body)
        scores = {h["Host"]: h["Score"] for h in r.json()}
        assert scores["good"] > scores["busy"]
        # unknown: least-used's "no data" score, the same for each (never idle's 10)
        assert scores["negative"] == scores["huge"] == scores["nan"] < 10
        out = (await c.client.post("/scheduler/filter", content=body)).json()
        passed = [n["metadata"]["name"] for n in out["Nodes"]["items"]]
        assert passed == ["good", "busy", "negative", "huge", "nan"]  # unknown: not rejected
        # only the two good nodes on the fast path's arithmetic (a pod of another workload:
        # a sibling of the first would be kept off its node by the spreading term)
        other = _workload_pod("api-6c9d7f8b45-b", namespace="other")
        both = json.dumps({"Pod": other, "Nodes": {"items": nodes[:2]}})
        fast = {
            h["Host"]: h["Score"]
            for h in (await c.client.post("/scheduler/prioritize", content=both)).json()
        }
        assert fast["good"] > fast["busy"]
        assert (
            await c.metric('loadwise_extender_errors_total{kind="internal",verb="prioritize"}')
            is None
        )
        assert (
            await c.metric('loadwise_extender_errors_total{kind="internal",verb="filter"}') is None
        )
