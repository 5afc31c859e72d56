#!/usr/bin/env python3
"""Benchmark of the extender's prioritize verb against a trivial aiohttp floor.

    .venv/bin/python benchmarks/prioritize.py            # full run, ~3 minutes on 2 cores
    .venv/bin/python benchmarks/prioritize.py --quick    # ~30 s
    .venv/bin/python benchmarks/prioritize.py --verbs filter   # the filter cells alone

The filter cells (``--verbs filter``, part of the default run) put the filter's fast
path and its general path side by side: two extenders with the same config and
requests, one with ``LeastUsedFastPath`` switched off in its process
(``--general-extender``), taking turns with the floor in every round.

What runs (all on loopback, three processes so client and servers don't share a GIL):

- the real extender, ``loadwise-extender --config CFG --load-file FILE --listen
  127.0.0.1:PORT``, fed a generated load-watcher document for the N nodes with
  ``stale_after_seconds: 0`` so the data never goes stale;
- the floor: this very script in ``--floor-server`` mode, a bare aiohttp app on
  the same stack that reads the request body and answers a canned, correctly
  sized ``[{"Host":..,"Score":..}]`` list (what any aiohttp handler costs at least);
- the client (this process): one aiohttp ClientSession with keep-alive.

For N in 10, 100, 1000 and both cache modes (``nodeCacheCapable: true`` -> the
request carries ``NodeNames``; false -> full ``Nodes`` objects shaped like a real
kubelet reports them, with labels, annotations, conditions, addresses, nodeInfo
and 30-50 ``status.images``) it measures sequential latency (p50/p99) and the
throughput of a few concurrent clients, alternating floor and extender rounds
(ABAB) so machine noise hits both alike. Every pod is a distinct pod (its own
UID), as in a real burst. Every answer is checked: status 200 and a
``[{"Host":..,"Score":..}]`` list naming exactly the N nodes with integer
scores 0..10; anything else aborts the run.

Without a kubeconfig the extender sizes cache-capable requests (names only)
from Node objects it saw in earlier full-Node requests, so the cache-capable
cells are warmed up with one full-Node request for the same N nodes first.

It is a measurement, not a test: the exit code is 0 even when a goal is missed
(it says "GOAL MISSED"); it is non-zero only when something is broken.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import platform
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from lab.processes import AsyncChild, start_async
from loadwise.extender import kubeobjects

NODE_COUNTS = (10, 100, 1000)
MODES = ("names", "full")  # names: nodeCacheCapable true; full: false
MODE_LABEL = {"names": "cache-capable (NodeNames)", "full": "full Nodes"}
# extender p50 / floor p50 in cache-capable mode, per node count
GOAL_RATIOS = {100: 1.3, 1000: 2.0}
GOAL_FULL_P99_MS = 20.0  # full Nodes, 100 nodes
CONCURRENCY = 4
HEADER_N = "X-Bench-Nodes"


# --------------------------------------------------------------------------- floor


class _FloorArgs(msgspec.Struct):
    # Raw captures ``null`` as its bytes (msgspec takes no ``Raw | None``)
    Nodes: msgspec.Raw = msgspec.Raw(b"null")
    NodeNames: msgspec.Raw = msgspec.Raw(b"[]")


_floor_args = msgspec.json.Decoder(_FloorArgs)


def floor_server(listen: str) -> None:
    """The floor: aiohttp, read the body, answer a canned list of N hosts."""
    from aiohttp import web

    canned: dict[int, bytes] = {}

    def answer(n: int) -> bytes:
        body = canned.get(n)
        if body is None:
            body = msgspec.json.encode([{"Host": f"node-{i:04d}", "Score": 5} for i in range(n)])
            canned[n] = body
        return body

    async def prioritize(request: web.Request) -> web.Response:
        await request.read()
        n = int(request.headers.get(HEADER_N, "0"))
        return web.Response(body=answer(n), content_type="application/json")

    async def filter_(request: web.Request) -> web.Response:
        # every node passes: the candidates echoed back as they came (names, or the
        # Node objects, scanned but not decoded), as a filter answer must
        given = _floor_args.decode(await request.read())
        if bytes(given.Nodes) != b"null":
            body = b'{"Nodes":' + bytes(given.Nodes) + b',"FailedNodes":{}}'
        else:
            body = b'{"NodeNames":' + bytes(given.NodeNames) + b',"FailedNodes":{}}'
        return web.Response(body=body, content_type="application/json")

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/scheduler/prioritize", prioritize)
    app.router.add_post("/scheduler/filter", filter_)
    app.router.add_get("/readyz", healthz)
    host, _, port = listen.rpartition(":")
    web.run_app(app, host=host, port=int(port), access_log=None, print=None)


# --------------------------------------------------------------------------- data


def node_name(i: int) -> str:
    return f"node-{i:04d}"


_IMAGE_REPOS = """
docker.io/library/nginx docker.io/library/redis docker.io/library/postgres
docker.io/library/busybox docker.io/library/alpine docker.io/library/python
docker.io/library/golang docker.io/library/node docker.io/library/mariadb
docker.io/rancher/mirrored-coredns-coredns docker.io/rancher/local-path-provisioner
docker.io/rancher/mirrored-metrics-server docker.io/rancher/klipper-helm
docker.io/rancher/mirrored-library-traefik docker.io/rancher/klipper-lb
docker.io/rancher/mirrored-pause registry.k8s.io/kube-proxy registry.k8s.io/pause
registry.k8s.io/coredns/coredns registry.k8s.io/etcd
registry.k8s.io/metrics-server/metrics-server registry.k8s.io/ingress-nginx/controller
quay.io/prometheus/node-exporter quay.io/prometheus/prometheus
quay.io/prometheus/alertmanager quay.io/prometheus-operator/prometheus-operator
quay.io/prometheus-operator/prometheus-config-reloader
quay.io/jetstack/cert-manager-controller quay.io/jetstack/cert-manager-webhook
quay.io/jetstack/cert-manager-cainjector quay.io/cilium/cilium
quay.io/cilium/operator-generic quay.io/cilium/hubble-relay ghcr.io/fluxcd/source-controller
ghcr.io/fluxcd/kustomize-controller ghcr.io/fluxcd/helm-controller
ghcr.io/home-assistant/home-assistant docker.io/grafana/grafana docker.io/grafana/loki
docker.io/grafana/promtail docker.io/longhornio/longhorn-manager
docker.io/longhornio/longhorn-engine docker.io/longhornio/longhorn-instance-manager
docker.io/longhornio/csi-provisioner docker.io/jellyfin/jellyfin docker.io/pihole/pihole
docker.io/vaultwarden/server docker.io/linuxserver/sonarr docker.io/linuxserver/radarr
docker.io/nextcloud docker.io/bitnami/kubectl docker.io/bitnami/postgresql
docker.io/bitnami/redis docker.io/minio/minio docker.io/traefik
docker.io/portainer/portainer-ce
""".split()


def _hex(rng: random.Random, n: int) -> str:
    return f"{rng.getrandbits(4 * n):0{n}x}"


def _uuid(rng: random.Random) -> str:
    return f"{_hex(rng, 8)}-{_hex(rng, 4)}-{_hex(rng, 4)}-{_hex(rng, 4)}-{_hex(rng, 12)}"


def make_node(i: int, rng: random.Random) -> dict[str, Any]:
    """A v1.Node shaped like what kube-scheduler's informer holds for a real node."""
    name = node_name(i)
    cpus = rng.choice([4, 8, 16, 32, 64])
    mem_ki = rng.choice([8, 16, 32, 64, 128, 256]) * 1024 * 1024 - rng.randrange(200_000, 900_000)
    arch = rng.choice(["amd64", "amd64", "arm64"])
    zone = f"zone-{'abc'[i % 3]}"
    ip = f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"
    images = []
    for repo in rng.sample(_IMAGE_REPOS, rng.randint(30, 50)):
        digest = _hex(rng, 64)
        tag = f"v{rng.randint(0, 3)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}"
        names = [f"{repo}@sha256:{digest}", f"{repo}:{tag}"]
        if rng.random() < 0.4:
            names.append(f"{repo}:latest")
        images.append({"names": names, "sizeBytes": rng.randint(700_000, 1_500_000_000)})
    hugepages = {"hugepages-1Gi": "0", "hugepages-2Mi": "0"}
    return kubeobjects.node(
        name,
        cpu=str(cpus),
        memory=f"{mem_ki}Ki",
        ephemeral_storage=f"{rng.randint(50, 2000) * 1024 * 1024}Ki",
        capacity=hugepages,
        allocatable={
            "cpu": str(cpus),
            "ephemeral-storage": str(rng.randint(50, 2000) * 1024**3),
            **hugepages,
            "memory": f"{mem_ki - 100_000}Ki",
            "pods": "110",
        },
        uid=_uuid(rng),
        resource_version=str(rng.randint(100_000, 9_999_999)),
        created="2024-06-01T12:00:00Z",
        labels={
            "beta.kubernetes.io/arch": arch,
            "beta.kubernetes.io/instance-type": "k3s",
            "beta.kubernetes.io/os": "linux",
            "kubernetes.io/arch": arch,
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "node-role.kubernetes.io/worker": "true",
            "node.kubernetes.io/instance-type": "k3s",
            "topology.kubernetes.io/region": "homelab",
            "topology.kubernetes.io/zone": zone,
            "longhorn.io/node": "true",
        },
        annotations={
            "alpha.kubernetes.io/provided-node-ip": ip,
            "flannel.alpha.coreos.com/backend-data": '{"VNI":1,"VtepMAC":"'
            + ":".join(_hex(rng, 2) for _ in range(6))
            + '"}',
            "flannel.alpha.coreos.com/backend-type": "vxlan",
            "flannel.alpha.coreos.com/kube-subnet-manager": "true",
            "flannel.alpha.coreos.com/public-ip": ip,
            "k3s.io/hostname": name,
            "k3s.io/internal-ip": ip,
            "k3s.io/node-args": '["agent","--node-label","node-role.kubernetes.io/worker=true"]',
            "k3s.io/node-config-hash": _hex(rng, 52).upper() + "====",
            "k3s.io/node-env": '{"K3S_URL":"https://10.0.0.1:6443"}',
            "node.alpha.kubernetes.io/ttl": "0",
            "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            "csi.volume.kubernetes.io/nodeid": '{"driver.longhorn.io":"' + name + '"}',
        },
        spec={
            "podCIDR": f"10.42.{i % 256}.0/24",
            "podCIDRs": [f"10.42.{i % 256}.0/24"],
            "providerID": f"k3s://{name}",
        },
        conditions=kubeobjects.node_conditions(heartbeat="2025-01-01T00:00:00Z"),
        internal_ip=ip,
        node_info={
            "machineID": _hex(rng, 32),
            "systemUUID": _uuid(rng),
            "bootID": _uuid(rng),
            "kernelVersion": "6.1.0-28-" + arch,
            "osImage": "Debian GNU/Linux 12 (bookworm)",
            "containerRuntimeVersion": "containerd://1.7.23-k3s2",
            "kubeletVersion": "v1.31.4+k3s1",
            "kubeProxyVersion": "v1.31.4+k3s1",
            "operatingSystem": "linux",
            "architecture": arch,
        },
        images=images,
        extra={"daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}},
    )


def make_pod_template() -> bytes:
    """A Deployment's pod as kube-scheduler sends it; ``@UID@`` is replaced per request."""
    not_ready = {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
    pod = kubeobjects.pod(
        "web-7d4b9c8f6d-@UID@",
        generate_name="web-7d4b9c8f6d-",
        uid="@UID@",
        resource_version="123456",
        created="2025-01-01T00:00:00Z",
        labels={"app": "web", "pod-template-hash": "7d4b9c8f6d"},
        owner={
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": "web-7d4b9c8f6d",
            "uid": "3f1c0d7e-5a8b-4c2d-9e6f-0a1b2c3d4e5f",
            "controller": True,
            "blockOwnerDeletion": True,
        },
        containers=[
            kubeobjects.container(
                "web",
                image="docker.io/library/nginx:1.27",
                ports=[80],
                requests={"cpu": "250m", "memory": "256Mi"},
                limits={"cpu": "1", "memory": "512Mi"},
                extra={
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                },
            )
        ],
        tolerations=[
            {"key": "node.kubernetes.io/not-ready", **not_ready},
            {"key": "node.kubernetes.io/unreachable", **not_ready},
        ],
        phase="Pending",
        status={"qosClass": "Burstable"},
        extra={
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "schedulerName": "default-scheduler",
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        },
    )
    return msgspec.json.encode(pod)


def make_watcher(n: int, rng: random.Random) -> bytes:
    """A load-watcher v0.2.4 ``/watcher`` document for N nodes (see examples/watcher.json)."""
    now = int(time.time())
    nodes = {}
    for i in range(n):
        cpu, mem = rng.uniform(5, 85), rng.uniform(10, 85)
        nodes[node_name(i)] = {
            "metrics": [
                {"name": "", "type": "CPU", "operator": "AVG", "rollup": "", "value": cpu},
                {
                    "name": "",
                    "type": "CPU",
                    "operator": "STD",
                    "rollup": "",
                    "value": rng.uniform(0, 10),
                },
                {"name": "", "type": "Memory", "operator": "AVG", "rollup": "", "value": mem},
                {
                    "name": "",
                    "type": "Memory",
                    "operator": "STD",
                    "rollup": "",
                    "value": rng.uniform(0, 5),
                },
            ],
            "tags": {},
            "metadata": {"dataCenter": ""},
        }
    doc = {
        "timestamp": now,
        "window": {"duration": "15m", "start": now - 900, "end": now},
        "source": "KubernetesMetricsServer",
        "data": {"NodeMetricsMap": nodes},
    }
    return msgspec.json.encode(doc)


@dataclass
class Bodies:
    """Pre-encoded request parts for N nodes; a body differs per request only in the pod UID."""

    n: int
    names: list[str]
    nodes_json: bytes  # {"metadata":{},"items":[...]}
    names_json: bytes  # ["node-0000",...]
    pod_template: bytes
    counter: int = 0
    same_pod: bool = False
    vary_order: bool = False
    turns: int = 0

    def body(self, mode: str) -> bytes:
        if not self.same_pod:
            self.counter += 1
        uid = f"00000000-0000-4000-8000-{self.counter:012d}".encode()
        pod = self.pod_template.replace(b"@UID@", uid)
        if mode == "full":
            return b'{"Pod":' + pod + b',"Nodes":' + self.nodes_json + b',"NodeNames":null}'
        names = self.names_json
        if self.vary_order:
            # kube-scheduler lists feasible nodes as its parallel filter checks finish,
            # from a start that rotates (pkg/scheduler/schedule_one.go
            # findNodesThatPassFilters): the same nodes, in another order each time
            self.turns += 1
            k = (self.turns * 37) % max(1, self.n)
            names = msgspec.json.encode(self.names[k:] + self.names[:k])
        return b'{"Pod":' + pod + b',"Nodes":null,"NodeNames":' + names + b"}"


def make_bodies(n: int, pod_template: bytes, seed: int = 1) -> Bodies:
    rng = random.Random(seed)
    nodes = [make_node(i, rng) for i in range(n)]
    names = [node_name(i) for i in range(n)]
    return Bodies(
        n=n,
        names=names,
        nodes_json=msgspec.json.encode({"metadata": {}, "items": nodes}),
        names_json=msgspec.json.encode(names),
        pod_template=pod_template,
    )


# --------------------------------------------------------------------------- checking


class HostPriority(msgspec.Struct, forbid_unknown_fields=True):
    Host: str
    Score: int


_answer_decoder = msgspec.json.Decoder(list[HostPriority])


class BadAnswer(RuntimeError):
    pass


def _decoded(who: str, status: int, body: bytes, decoder: msgspec.json.Decoder[Any], what: str):  # type: ignore[no-untyped-def]
    """The answer, decoded; BadAnswer for any status but 200 or a body that is not ``what``."""
    if status != 200:
        raise BadAnswer(f"{who}: HTTP {status}: {body[:300]!r}")
    try:
        return decoder.decode(body)
    except msgspec.DecodeError as exc:
        raise BadAnswer(f"{who}: not {what}: {exc}: {body[:300]!r}") from None


def check_answer(who: str, status: int, body: bytes, names: list[str]) -> None:
    answer = _decoded(who, status, body, _answer_decoder, "a [{Host,Score}] list")
    hosts = [a.Host for a in answer]
    if len(hosts) != len(names) or set(hosts) != set(names):
        raise BadAnswer(f"{who}: answered {len(hosts)} hosts, expected the {len(names)} asked")
    for a in answer:
        if type(a.Score) is not int or not 0 <= a.Score <= 10:
            raise BadAnswer(f"{who}: score {a.Score!r} for {a.Host} not an integer 0..10")


class _Meta(msgspec.Struct):
    name: str


class _NamedNode(msgspec.Struct):
    metadata: _Meta


class _NodeList(msgspec.Struct):
    items: list[_NamedNode]


class FilterAnswer(msgspec.Struct, forbid_unknown_fields=True):
    Nodes: _NodeList | None = None
    NodeNames: list[str] | None = None
    FailedNodes: dict[str, str] = {}
    FailedAndUnresolvableNodes: dict[str, str] = {}
    Error: str = ""


_filter_decoder = msgspec.json.Decoder(FilterAnswer)
REJECTED: Counter[str] = Counter()  # nodes rejected, by server (for the report)


def check_filter(who: str, status: int, body: bytes, names: list[str]) -> None:
    """A filter answer: HTTP 200, no error, every node asked either kept or rejected."""
    answer = _decoded(who, status, body, _filter_decoder, "a filter result")
    if answer.Nodes is not None:
        kept = [node.metadata.name for node in answer.Nodes.items]
    else:
        kept = answer.NodeNames or []
    failed = {**answer.FailedNodes, **answer.FailedAndUnresolvableNodes}
    if answer.Error or len(kept) + len(failed) != len(names) or {*kept, *failed} != set(names):
        raise BadAnswer(f"{who}: kept {len(kept)} and rejected {len(failed)} of {len(names)}")
    REJECTED[who] += len(failed)


CHECKS = {"prioritize": check_answer, "filter": check_filter}


# --------------------------------------------------------------------------- processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def extender_command(python: str) -> list[str]:
    script = Path(python).parent / "loadwise-extender"
    if script.exists():
        return [str(script)]
    found = shutil.which("loadwise-extender")
    return [found] if found else [python, "-m", "loadwise.extender"]


@dataclass
class Server:
    name: str
    url: str
    child: AsyncChild

    async def stop(self) -> None:
        await self.child.stop(10)


async def wait_ready(session, server: Server, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    async def readyz() -> bool:
        async with session.get(server.url + "/readyz") as resp:
            if resp.status != 200:
                raise RuntimeError(f"{resp.status} {(await resp.text()).strip()}")
            return True

    await server.child.wait_ready(readyz, timeout, interval=0.1)


async def start_floor(workdir: Path) -> Server:
    port = free_port()
    argv = [sys.executable, os.path.abspath(__file__), "--floor-server", f"127.0.0.1:{port}"]
    child = await start_async("floor", argv, log=workdir / "floor.log", append=False)
    return Server("floor", f"http://127.0.0.1:{port}", child)


async def start_extender(
    workdir: Path, n: int, *, name: str = "extender", general: bool = False, extra: str = ""
) -> Server:
    """The real extender; with ``general`` its least-used fast path is switched off
    (``general_extender``), everything else alike. ``extra``: more config lines."""
    port = free_port()
    load = workdir / f"watcher-{n}.json"
    load.write_bytes(make_watcher(n, random.Random(n)))
    cfg = workdir / f"extender-{n}.yaml"
    cfg.write_text(
        "log_level: warning\n"
        "policy: least-used\n"
        "source:\n"
        "  kind: file\n"
        f"  file: {load}\n"
        "  refresh_seconds: 30\n"
        "  stale_after_seconds: 0   # never stale: the benchmark's data must stay usable\n"
        f"max_nodes: {n}   # full Node requests of n nodes, without a kubeconfig\n" + extra
    )
    command = (
        [sys.executable, os.path.abspath(__file__), "--general-extender"]
        if general
        else extender_command(sys.executable)
    )
    child = await start_async(
        name,
        [
            *command,
            "--config",
            str(cfg),
            "--load-file",
            str(load),
            "--listen",
            f"127.0.0.1:{port}",
        ],
        log=workdir / f"{name}-{n}.log",
        append=False,
    )
    return Server(name, f"http://127.0.0.1:{port}", child)


def general_extender(argv: list[str]) -> int:
    """``loadwise-extender ARGV`` with the least-used fast path switched off: every
    request takes the general path (per-node states), as before the fast path. Only
    for measuring it side by side; the shipped extender has no such switch."""
    from loadwise.extender.cli import main as extender_main
    from loadwise.extender.fastpath import LeastUsedFastPath

    LeastUsedFastPath.for_policy = classmethod(lambda cls, policy: None)  # type: ignore[method-assign, assignment]
    return extender_main(argv)


# --------------------------------------------------------------------------- measuring


@dataclass
class Cell:
    n: int
    mode: str
    lat: dict[str, list[float]] = field(default_factory=lambda: {"floor": [], "extender": []})
    done: dict[str, int] = field(default_factory=lambda: {"floor": 0, "extender": 0})
    busy: dict[str, float] = field(default_factory=lambda: {"floor": 0.0, "extender": 0.0})
    body_bytes: int = 0
    per_round: int = 0
    pods: int = 0  # distinct pods the extender prioritized in this cell (its ledger size)


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    k = min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))
    return s[k]


SENT: Counter[str] = Counter()  # requests sent, by server (extender: per cell)
RESENT: Counter[str] = Counter()  # requests sent again on a new connection (see ``one``)


async def one(  # type: ignore[no-untyped-def]
    session, server: Server, bodies: Bodies, mode: str, verb: str = "prioritize"
) -> float:
    body = bodies.body(mode)
    SENT[server.name] += 1
    headers = {"Content-Type": "application/json", HEADER_N: str(bodies.n)}
    import aiohttp

    for attempt in (1, 2):
        t0 = time.perf_counter()
        try:
            async with session.post(
                f"{server.url}/scheduler/{verb}", data=body, headers=headers
            ) as r:
                answer = await r.read()
                status = r.status
            break
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
            # The extender closes a keep-alive connection idle for 10 s (docs/contracts.md);
            # while the other servers take their turns under load, a pooled connection can
            # be that old. Sent again once on a new connection; only that attempt is timed.
            if attempt == 2:
                raise
            RESENT[server.name] += 1
    dt = time.perf_counter() - t0
    CHECKS[verb](server.name, status, answer, bodies.names)
    return dt


async def latency_round(  # type: ignore[no-untyped-def]
    session, server: Server, bodies: Bodies, mode: str, count: int, out, verb: str = "prioritize"
):
    for _ in range(count):
        out.append(await one(session, server, bodies, mode, verb))


async def throughput_round(  # type: ignore[no-untyped-def]
    session, server: Server, bodies: Bodies, mode: str, seconds: float, verb: str = "prioritize"
):
    deadline = time.perf_counter() + seconds
    done = 0

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await one(session, server, bodies, mode, verb)
            done += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return done, time.perf_counter() - t0


async def throughput_turns(  # type: ignore[no-untyped-def]
    session, order, bodies: Bodies, mode: str, seconds: float, cell, verb: str = "prioritize"
) -> None:
    """A throughput round per server of ``order``, added to ``cell.done``/``cell.busy``."""
    for server in order:
        done, took = await throughput_round(session, server, bodies, mode, seconds, verb)
        cell.done[server.name] += done
        cell.busy[server.name] += took
        gc.collect()


@dataclass
class Plan:
    requests: dict[tuple[str, int], int]  # sequential requests per server per cell
    rounds: int  # ABAB rounds the sequential requests are split into
    warmup: int  # per server per cell, at most a quarter of the cell's requests
    tput_seconds: float  # per server per throughput round
    tput_rounds: int  # ABBA pairs of throughput rounds


FULL = Plan(
    requests={
        ("names", 10): 2000,
        ("names", 100): 2000,
        ("names", 1000): 500,
        ("full", 10): 1000,
        ("full", 100): 1000,
        ("full", 1000): 40,
    },
    rounds=10,
    warmup=50,
    tput_seconds=1.5,
    tput_rounds=1,
)
QUICK = Plan(
    requests={
        ("names", 10): 300,
        ("names", 100): 300,
        ("names", 1000): 60,
        ("full", 10): 200,
        ("full", 100): 200,
        ("full", 1000): 8,
    },
    rounds=4,
    warmup=20,
    tput_seconds=0.5,
    tput_rounds=1,
)


async def run_cell(  # type: ignore[no-untyped-def]
    session, floor: Server, ext: Server, bodies: Bodies, mode: str, plan: Plan
) -> Cell:
    cell = Cell(bodies.n, mode, body_bytes=len(bodies.body(mode)))
    count = plan.requests[(mode, bodies.n)]
    warm = min(plan.warmup, max(1, count // 4))
    for server in (floor, ext):
        await latency_round(session, server, bodies, mode, warm, [])
    per_round = max(1, count // plan.rounds)
    gc.collect()
    gc.disable()
    try:
        for r in range(plan.rounds):
            order: tuple[Server, ...] = (floor, ext) if r % 2 == 0 else (ext, floor)  # ABBA...
            for server in order:
                await latency_round(session, server, bodies, mode, per_round, cell.lat[server.name])
        cell.per_round = per_round
        for _ in range(plan.tput_rounds):
            order = (floor, ext, ext, floor)  # ABBA
            await throughput_turns(session, order, bodies, mode, plan.tput_seconds, cell)
    finally:
        gc.enable()
    return cell


FILTER_NODE_COUNTS = (100, 500)
# The filter cells' thresholds: the generated readings go up to 85 %, so with the pod
# on them a few nodes of every answer are over and get a reason (the default 90 %
# would reject none).
FILTER_CONFIG = "filter:\n  thresholds: {cpu: 84, memory: 84}\n"
FILTER_SERVERS = ("floor", "fast", "general")


@dataclass
class FilterPlan:
    requests: dict[tuple[str, int], int]  # sequential requests per server per cell
    rounds: int
    warmup: int
    tput_seconds: float


FILTER_FULL = FilterPlan(
    requests={("names", 100): 1500, ("names", 500): 900, ("full", 100): 600, ("full", 500): 120},
    rounds=6,
    warmup=30,
    tput_seconds=1.0,
)
FILTER_QUICK = FilterPlan(
    requests={("names", 100): 300, ("names", 500): 180, ("full", 100): 120, ("full", 500): 24},
    rounds=3,
    warmup=10,
    tput_seconds=0.4,
)


@dataclass
class FilterCell:
    n: int
    mode: str
    lat: dict[str, list[float]] = field(default_factory=lambda: {s: [] for s in FILTER_SERVERS})
    done: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FILTER_SERVERS, 0))
    busy: dict[str, float] = field(default_factory=lambda: dict.fromkeys(FILTER_SERVERS, 0.0))
    body_bytes: int = 0
    rejected: float = 0.0  # nodes the fast extender rejected per answer, on average


async def run_filter_cell(  # type: ignore[no-untyped-def]
    session, servers: list[Server], bodies: Bodies, mode: str, plan: FilterPlan
) -> FilterCell:
    """The floor, the fast path and the general path, each in turn: every round a
    rotation of the three (floor-fast-general, fast-general-floor, ...) so no server
    always goes first, then throughput in the order ABC CBA."""
    cell = FilterCell(bodies.n, mode, body_bytes=len(bodies.body(mode)))
    count = plan.requests[(mode, bodies.n)]
    for server in servers:
        await latency_round(session, server, bodies, mode, plan.warmup, [], "filter")
    per_round = max(1, count // plan.rounds)
    REJECTED.clear()
    SENT.clear()
    gc.collect()
    gc.disable()
    try:
        for r in range(plan.rounds):
            k = r % len(servers)
            for server in servers[k:] + servers[:k]:
                out = cell.lat[server.name]
                await latency_round(session, server, bodies, mode, per_round, out, "filter")
        cell.rejected = REJECTED["fast"] / max(1, SENT["fast"])
        order = servers + servers[::-1]  # ABCCBA
        await throughput_turns(session, order, bodies, mode, plan.tput_seconds, cell, "filter")
    finally:
        gc.enable()
    return cell


async def filter_cells(  # type: ignore[no-untyped-def]
    session, floor: Server, workdir: Path, args: argparse.Namespace
) -> list[FilterCell]:
    """Filter, fast path against general path, one cell per node count and mode, with
    a fresh pair of extenders per cell (the same config, the same requests)."""
    plan = FILTER_QUICK if args.quick else FILTER_FULL
    pod_template = make_pod_template()
    cells: list[FilterCell] = []
    modes = [m for m in MODES if m in args.modes.split(",")]
    for n in [int(x) for x in args.filter_nodes.split(",")]:
        bodies = make_bodies(n, pod_template)
        bodies.vary_order = args.vary_order
        for mode in modes:
            pair = [
                await start_extender(
                    workdir, n, name=k, general=k == "general", extra=FILTER_CONFIG
                )
                for k in ("fast", "general")
            ]
            try:
                for ext in pair:
                    await wait_ready(session, ext)
                    if mode == "names":
                        await one(session, ext, bodies, "full", "filter")  # node sizes
                cell = await run_filter_cell(session, [floor, *pair], bodies, mode, plan)
            finally:
                for ext in pair:
                    await ext.stop()
            cells.append(cell)
            print(
                f"  filter, {MODE_LABEL[mode]}, {n} nodes: fast p50 "
                f"{pct(cell.lat['fast'], 50) * 1000:.2f} ms, general p50 "
                f"{pct(cell.lat['general'], 50) * 1000:.2f} ms; {load_average()}",
                flush=True,
            )
    return cells


def filter_report(cells: list[FilterCell]) -> list[str]:
    head = (
        f"{'mode':<27} {'nodes':>5} {'body':>9} {'rej':>4} | {'floor p50':>9} {'p99':>7} | "
        f"{'fast p50':>8} {'p99':>7} {'req/s':>6} | {'general p50':>11} {'p99':>7} "
        f"{'req/s':>6} | {'gen/fast':>8} {'fast/floor':>10}"
    )
    lines = [head, "-" * len(head)]
    for c in cells:
        p50 = {s: pct(c.lat[s], 50) for s in FILTER_SERVERS}
        p99 = {s: pct(c.lat[s], 99) for s in FILTER_SERVERS}
        rate = {s: c.done[s] / c.busy[s] if c.busy[s] else float("nan") for s in FILTER_SERVERS}
        lines.append(
            f"{MODE_LABEL[c.mode]:<27} {c.n:>5} {size(c.body_bytes):>9} {c.rejected:>4.0f} | "
            f"{fmt_ms(p50['floor']):>9} {fmt_ms(p99['floor']):>7} | "
            f"{fmt_ms(p50['fast']):>8} {fmt_ms(p99['fast']):>7} {rate['fast']:>6.0f} | "
            f"{fmt_ms(p50['general']):>11} {fmt_ms(p99['general']):>7} {rate['general']:>6.0f} | "
            f"{p50['general'] / p50['fast']:>8.2f} {p50['fast'] / p50['floor']:>10.2f}"
        )
    return lines


# --------------------------------------------------------------------------- report


def fmt_ms(seconds: float) -> str:
    ms = seconds * 1000
    return f"{ms:7.2f}" if ms < 100 else f"{ms:7.1f}"


def size(nbytes: int) -> str:
    return f"{nbytes / 1024:.0f} KiB" if nbytes < 1024 * 1024 else f"{nbytes / 1024**2:.1f} MiB"


def report(cells: list[Cell]) -> list[str]:
    lines = []
    head = (
        f"{'mode':<27} {'nodes':>5} {'body':>9} | {'floor p50':>9} {'p99':>7} {'req/s':>6} | "
        f"{'ext p50':>7} {'p99':>7} {'req/s':>6} | {'p50 x':>5}"
    )
    lines.append(head)
    lines.append("-" * len(head))
    for c in cells:
        f50, f99 = pct(c.lat["floor"], 50), pct(c.lat["floor"], 99)
        e50, e99 = pct(c.lat["extender"], 50), pct(c.lat["extender"], 99)
        ftp = c.done["floor"] / c.busy["floor"] if c.busy["floor"] else float("nan")
        etp = c.done["extender"] / c.busy["extender"] if c.busy["extender"] else float("nan")
        lines.append(
            f"{MODE_LABEL[c.mode]:<27} {c.n:>5} {size(c.body_bytes):>9} | "
            f"{fmt_ms(f50):>9} {fmt_ms(f99):>7} {ftp:>6.0f} | "
            f"{fmt_ms(e50):>7} {fmt_ms(e99):>7} {etp:>6.0f} | {e50 / f50:>5.2f}"
        )
    return lines


def verdicts(cells: list[Cell]) -> tuple[list[str], bool]:
    by = {(c.mode, c.n): c for c in cells}
    lines, ok = [], True
    for n, goal in GOAL_RATIOS.items():
        c = by.get(("names", n))
        if not c:
            continue
        f50, e50 = pct(c.lat["floor"], 50), pct(c.lat["extender"], 50)
        ratio = e50 / f50
        good = ratio <= goal
        ok &= good
        lines.append(
            f"ratio: cache-capable, {n} nodes: extender p50 {e50 * 1000:.2f} ms / floor p50 "
            f"{f50 * 1000:.2f} ms = {ratio:.2f}x (goal <= {goal}x): "
            + ("PASS" if good else "GOAL MISSED")
        )
    c = by.get(("full", 100))
    if c:
        e99 = pct(c.lat["extender"], 99)
        good = e99 * 1000 < GOAL_FULL_P99_MS
        ok &= good
        lines.append(
            f"full Nodes, 100 realistic nodes ({size(c.body_bytes)} per request): extender p99 "
            f"{e99 * 1000:.2f} ms (goal < {GOAL_FULL_P99_MS:.0f} ms): "
            + ("PASS" if good else "GOAL MISSED")
        )
    return lines, ok


# --------------------------------------------------------------------------- main


def load_average() -> str:
    """The 1/5/15-minute load averages (as uptime prints them): on a shared machine
    the floor slows more than the extender under load, which compresses the ratios,
    so every figure is reported with the load it was taken at."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f}"


def extender_commit() -> str:
    """The commit the measured extender is at, and whether extender/ differs from it."""
    repo = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--", "extender"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "extender commit unknown (no git)"
    return f"extender at commit {head}" + (" with uncommitted changes" if dirty else "")


async def bench(args: argparse.Namespace) -> int:
    import aiohttp

    plan = QUICK if args.quick else FULL
    verbs = args.verbs.split(",")
    counts = [int(x) for x in args.nodes.split(",")] if "prioritize" in verbs else []
    modes = [m for m in MODES if m in args.modes.split(",")]
    started = time.time()
    print(
        f"loadwise prioritize benchmark  {time.strftime('%Y-%m-%d %H:%M:%S %Z')}  "
        f"{'quick' if args.quick else 'full'} run\n"
        f"machine: {os.cpu_count()} cores, {platform.machine()}, {platform.platform(terse=True)}, "
        f"Python {platform.python_version()}; {load_average()}\n"
        f"{extender_commit()}\n"
        f"client: aiohttp {aiohttp.__version__} ClientSession, keep-alive, one connection for "
        f"sequential latency, {CONCURRENCY} concurrent clients for req/s; servers are "
        f"subprocesses on loopback\n"
        "cache-capable cells are warmed with one full-Node request first (no kubeconfig: "
        "the extender knows node sizes only from full-Node requests it has seen)\n"
        + (
            "cache-capable requests rotate the node order (--vary-order)\n"
            if args.vary_order
            else ""
        )
        + (
            "every request carries the same pod (--same-pod): the herding ledger stays at 1\n"
            if args.same_pod
            else "every request carries a distinct pod (own UID), as in a burst; a fresh "
            "extender per cell, so its herding ledger grows from 0 over the cell\n"
        ),
        flush=True,
    )
    pod_template = make_pod_template()
    cells: list[Cell] = []
    fcells: list[FilterCell] = []
    workdir = Path(tempfile.mkdtemp(prefix="loadwise-bench-"))
    floor = await start_floor(workdir)
    servers = [floor]
    try:
        connector = aiohttp.TCPConnector(limit=CONCURRENCY * 2)
        timeout = aiohttp.ClientTimeout(total=60)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            await wait_ready(session, floor)
            for n in counts:
                bodies = make_bodies(n, pod_template)
                bodies.same_pod = args.same_pod
                bodies.vary_order = args.vary_order
                for mode in modes:
                    # A fresh extender per cell: its herding ledger (one assumed placement
                    # per distinct pod, kept 5 minutes) holds only this cell's pods.
                    ext = await start_extender(workdir, n)
                    servers.append(ext)
                    await wait_ready(session, ext)
                    if mode == "names":
                        await one(session, ext, bodies, "full")  # teach it the node sizes
                    cell = await run_cell(session, floor, ext, bodies, mode, plan)
                    cell.pods = 1 if args.same_pod else SENT["extender"]
                    SENT["extender"] = 0
                    cells.append(cell)
                    await ext.stop()
                    servers.remove(ext)
                    e = cell.lat["extender"]
                    first_p50 = pct(e[: cell.per_round], 50) * 1000
                    last_p50 = pct(e[-cell.per_round :], 50) * 1000
                    print(
                        f"  {MODE_LABEL[mode]}, {n} nodes, {len(e)} sequential requests: "
                        f"floor p50 {pct(cell.lat['floor'], 50) * 1000:.2f} ms, extender p50 "
                        f"{pct(e, 50) * 1000:.2f} ms (first round {first_p50:.2f} ms, last "
                        f"{last_p50:.2f} ms); ledger at the end: {cell.pods} pods; "
                        f"{load_average()}",
                        flush=True,
                    )
            if "filter" in verbs:
                fcells = await filter_cells(session, floor, workdir, args)
    except BadAnswer as exc:
        print(f"\nBAD ANSWER: {exc}", file=sys.stderr)
        return 1
    finally:
        for s in servers:
            await s.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    ok = True
    if cells:
        print()
        print("\n".join(report(cells)))
        print(
            "(latency in ms, sequential requests over one keep-alive connection; req/s with "
            f"{CONCURRENCY} concurrent clients; 'p50 x' = extender p50 / floor p50)"
        )
        print()
        lines, ok = verdicts(cells)
        print("\n".join(lines))
    if fcells:
        print("\nfilter: the fast path against the general path (the same extender with its")
        print(f"fast path off), side by side; thresholds {FILTER_CONFIG.split(': ', 1)[1].strip()}")
        print("\n".join(filter_report(fcells)))
        print(
            "(latency in ms, sequential; the three servers take turns in every round; req/s "
            f"with {CONCURRENCY} concurrent clients; 'rej' = nodes rejected per answer; "
            "'gen/fast' = general p50 / fast p50; 'fast/floor' = fast p50 / floor p50)"
        )
    print(
        "\nall answers checked: HTTP 200; prioritize: one integer score 0..10 per node asked; "
        "filter: every node asked kept or rejected; "
        f"sent again on a new connection: {dict(RESENT) or 'none'}; "
        f"run took {time.time() - started:.0f} s; {load_average()} at the end"
    )
    if not ok:
        print("GOAL MISSED (see above); this is a measurement, so the exit code stays 0")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--general-extender"]:
        return general_extender(argv[1:])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="a ~30 s run with fewer requests")
    p.add_argument("--nodes", default=",".join(map(str, NODE_COUNTS)), help="node counts")
    p.add_argument("--modes", default=",".join(MODES), help="names,full")
    p.add_argument(
        "--same-pod",
        action="store_true",
        help="send one pod (same UID) every time, so the extender's herding ledger stays at "
        "one entry (isolates the ledger's cost; default: a distinct pod per request)",
    )
    p.add_argument(
        "--vary-order",
        action="store_true",
        help="cache-capable requests list the nodes in a rotated order each time, as "
        "kube-scheduler's parallel filter does (default: the same list every time)",
    )
    p.add_argument(
        "--verbs",
        default="prioritize,filter",
        help="prioritize: the cells above; filter: the filter's fast path against its "
        "general path, at --filter-nodes",
    )
    p.add_argument(
        "--filter-nodes",
        default=",".join(map(str, FILTER_NODE_COUNTS)),
        help="node counts of the filter cells",
    )
    p.add_argument("--floor-server", metavar="HOST:PORT", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.floor_server:
        with contextlib.suppress(KeyboardInterrupt):
            floor_server(args.floor_server)
        return 0
    return asyncio.run(bench(args))


if __name__ == "__main__":
    sys.exit(main())
