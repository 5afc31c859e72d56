"""The extender's own watch of nodes and pods (with a kubeconfig).

List, then watch from the list's resourceVersion; on ``410 Gone`` list again; on
any other failure back off (1 s doubling to 30 s) and retry. The blocking client
runs in two daemon threads; every change is handed to the event loop with
``call_soon_threadsafe``, so all state is read and written on the loop thread
and the request path never takes a lock or waits.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime

import msgspec

from .estimate import EstimatorArgs, TLPArgs, estimate_usage, predict_tlp_cpu
from .kubeapi import KubeAPI, KubeError
from .model import NodeInfo, Usage
from .nodestate import ClusterFacts
from .wire import Node, Pod

__all__ = ["ClusterWatch"]

log = logging.getLogger("loadwise.extender.cluster")

# Pods that hold resources on a node: bound and not finished.
POD_SELECTOR = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"


class _Meta(msgspec.Struct):
    resourceVersion: str = ""


class _NodeList(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    items: list[Node] = msgspec.field(default_factory=list)


class _PodList(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    items: list[Pod] = msgspec.field(default_factory=list)


class _Status(msgspec.Struct):
    code: int = 0
    message: str = ""
    metadata: _Meta = msgspec.field(default_factory=_Meta)


class _NodeEvent(msgspec.Struct):
    type: str
    object: msgspec.Raw


_node_list = msgspec.json.Decoder(_NodeList)
_pod_list = msgspec.json.Decoder(_PodList)
_event = msgspec.json.Decoder(_NodeEvent)
_node = msgspec.json.Decoder(Node)
_pod = msgspec.json.Decoder(Pod)
_status = msgspec.json.Decoder(_Status)


class _Gone(Exception):
    pass


def scheduled_at(pod: Pod) -> float | None:
    for condition in (pod.status.conditions if pod.status else None) or ():
        if condition.type == "PodScheduled" and condition.status == "True":
            if condition.lastTransitionTime:
                try:
                    return datetime.fromisoformat(
                        condition.lastTransitionTime.replace("Z", "+00:00")
                    ).timestamp()
                except ValueError:
                    return None
    return None


class ClusterWatch:
    def __init__(
        self,
        api: KubeAPI,
        *,
        estimator: EstimatorArgs,
        tlp: TLPArgs,
        on_bind: Callable[[str, str, Usage, float, float], None],
        on_gone: Callable[[str], None],
        watch_timeout: int = 300,
    ) -> None:
        self._api = api
        self._estimator = estimator
        self._tlp = tlp
        self._on_bind = on_bind
        self._on_gone = on_gone
        self._watch_timeout = watch_timeout
        self.nodes: dict[str, NodeInfo] = {}
        self._pods: dict[str, tuple[str, Usage, float]] = {}
        self._facts: ClusterFacts | None = None
        self.nodes_synced = False
        self.pods_synced = False
        self.last_error: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop = threading.Event()

    # -- read side (loop thread) ------------------------------------------------

    @property
    def synced(self) -> bool:
        return self.nodes_synced and self.pods_synced

    def facts(self) -> ClusterFacts:
        if self._facts is None:
            counts: dict[str, int] = {}
            usage: dict[str, Usage] = {}
            tlp: dict[str, float] = {}
            for node, pod_usage, pod_tlp in self._pods.values():
                counts[node] = counts.get(node, 0) + 1
                usage[node] = usage.get(node, Usage()) + pod_usage
                tlp[node] = tlp.get(node, 0.0) + pod_tlp
            self._facts = ClusterFacts(counts, usage, tlp)
        return self._facts

    # -- write side (applied on the loop thread) --------------------------------

    def _set_nodes(self, nodes: list[Node]) -> None:
        self.nodes = {n.metadata.name: NodeInfo.from_node(n) for n in nodes}
        self.nodes_synced = True

    def _node_event(self, kind: str, node: Node) -> None:
        if kind == "DELETED":
            self.nodes.pop(node.metadata.name, None)
        else:
            self.nodes[node.metadata.name] = NodeInfo.from_node(node)

    def _set_pods(self, pods: list[Pod]) -> None:
        gone = set(self._pods)
        for pod in pods:
            gone.discard(pod.key)
            self._pod_event("ADDED", pod)
        for key in gone:
            self._pod_event_deleted(key)
        self.pods_synced = True

    def _pod_event_deleted(self, key: str) -> None:
        if self._pods.pop(key, None) is not None:
            self._facts = None
        self._on_gone(key)

    def _pod_event(self, kind: str, pod: Pod) -> None:
        key = pod.key
        if kind == "DELETED" or not pod.spec.nodeName:
            self._pod_event_deleted(key)
            return
        known = self._pods.get(key)
        if known is not None and known[0] == pod.spec.nodeName:
            return
        usage = estimate_usage(pod, self._estimator)
        tlp = float(predict_tlp_cpu(pod, self._tlp))
        self._pods[key] = (pod.spec.nodeName, usage, tlp)
        self._facts = None
        at = scheduled_at(pod) or time.time()
        self._on_bind(key, pod.spec.nodeName, usage, tlp, at)

    # -- threads ----------------------------------------------------------------

    def _post(self, fn: Callable[..., None], *args: object) -> None:
        assert self._loop is not None
        self._loop.call_soon_threadsafe(fn, *args)

    def _run(self, what: str) -> None:
        path = "/api/v1/nodes" if what == "nodes" else "/api/v1/pods"
        query = {} if what == "nodes" else {"fieldSelector": POD_SELECTOR}
        backoff = 1.0
        while not self._stop.is_set():
            try:
                if what == "nodes":
                    listed = _node_list.decode(self._api.get(path, query, timeout=60))
                    self._post(self._set_nodes, listed.items)
                else:
                    listed = _pod_list.decode(self._api.get(path, query, timeout=60))
                    self._post(self._set_pods, listed.items)
                version = listed.metadata.resourceVersion
                backoff = 1.0
                self.last_error = None
                while not self._stop.is_set():
                    version = self._watch(what, path, query, version)
            except _Gone:
                log.info("%s watch expired (410 Gone); listing again", what)
                continue
            except (KubeError, msgspec.DecodeError, msgspec.ValidationError) as exc:
                self.last_error = f"{what}: {exc}"
                log.warning("watching %s failed: %s; retrying in %.0fs", what, exc, backoff)
            except Exception as exc:  # keep watching whatever happens
                self.last_error = f"{what}: {type(exc).__name__}: {exc}"
                log.exception("watching %s crashed; retrying in %.0fs", what, backoff)
            self._stop.wait(backoff)
            backoff = min(backoff * 2, 30.0)

    def _watch(self, what: str, path: str, query: dict[str, str], version: str) -> str:
        for line in self._api.watch_lines(
            path, dict(query, resourceVersion=version), self._watch_timeout
        ):
            event = _event.decode(line)
            if event.type == "ERROR":
                status = _status.decode(event.object)
                if status.code == 410:
                    raise _Gone()
                raise KubeError(f"watch error: {status.message}", status.code)
            if event.type == "BOOKMARK":
                version = _status.decode(event.object).metadata.resourceVersion or version
                continue
            if what == "nodes":
                node = _node.decode(event.object)
                version = _status.decode(event.object).metadata.resourceVersion or version
                self._post(self._node_event, event.type, node)
            else:
                pod = _pod.decode(event.object)
                version = _status.decode(event.object).metadata.resourceVersion or version
                self._post(self._pod_event, event.type, pod)
            if self._stop.is_set():
                break
        return version

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        for what in ("nodes", "pods"):
            threading.Thread(
                target=self._run, args=(what,), name=f"watch-{what}", daemon=True
            ).start()

    def stop(self) -> None:
        self._stop.set()
