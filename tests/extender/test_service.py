"""The service (``extender.service``) and its composition (``extender.wiring``): the parts
built once from the settings, and the Extender's answers, readiness and housekeeping."""

from __future__ import annotations

import json

import pytest

from loadwise.extender.config import load_settings
from loadwise.extender.fastpath import LeastUsedFastPath
from loadwise.extender.ledger import HORIZON_SECONDS, REPORT_INTERVAL_SECONDS
from loadwise.extender.model import LoadSnapshot, NodeLoad, ResourceLoad
from loadwise.extender.policies import LeastUsed, TargetLoadPacking
from loadwise.extender.service import (
    NEUTRAL_PRIORITY,
    SIZES_UNKNOWN,
    UNCONFIRMED_SECONDS,
    Extender,
    build_inflight,
    build_scoring,
    ledger_horizon,
)
from loadwise.extender.wire import decode_args
from loadwise.extender.wiring import build_extender
from loadwise.extender.workloads import LearnedUsage

from .helpers import StaticSource, container, node_json, pod_json

NOW = 1_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def settings(**overrides: object):
    return load_settings(None, {"source.kind": "file", "source.file": "/dev/null", **overrides})


def reading(**nodes: tuple[float, float]) -> LoadSnapshot:
    loads = {n: NodeLoad(ResourceLoad(c), ResourceLoad(m)) for n, (c, m) in nodes.items()}
    return LoadSnapshot("static", NOW - 5, NOW - 5, loads)


def extender(snap: LoadSnapshot | None, clock: Clock, **overrides: object) -> Extender:
    ext = Extender(settings(**overrides), StaticSource(snap or reading()), clock=clock)
    ext.refresher.snapshot = snap
    return ext


def names_args(names: list[str], namespace: str = "default", cpu: str = "500m"):
    pod = pod_json(container({"cpu": cpu, "memory": "64Mi"}), namespace=namespace)
    return decode_args(json.dumps({"Pod": pod, "NodeNames": names}).encode())


def nodes_args(names: list[str], cpu: str = "500m"):
    pod = pod_json(container({"cpu": cpu, "memory": "64Mi"}))
    body = {"Pod": pod, "Nodes": {"items": [node_json(n) for n in names]}}
    return decode_args(json.dumps(body).encode())


def test_the_composition_root_hands_the_service_the_policy_config_validation_parsed():
    s = settings(
        policy="least-used",
        policy_args={"resources": {"memory": 1}},
        **{"estimator.spread_weight": 0.5},
    )
    ext = build_extender(s)
    assert ext.policy is s.scoring.policy  # parsed once, the very object
    assert isinstance(ext.policy, LeastUsed) and ext.policy.spread_weight == 0.5
    assert ext.policy.weights == {"memory": 1.0}
    assert ext.fast_path is not None and ext.fast_path.policy is ext.policy
    assert ext.tlp is s.scoring.tlp


def test_target_load_packing_has_its_arguments_parsed_once_and_no_fast_path():
    s = settings(
        policy="target-load-packing",
        policy_args={"targetUtilization": 55, "defaultRequests": {"cpu": "250m"}},
    )
    parts = build_scoring(s)
    assert isinstance(parts.policy, TargetLoadPacking) and parts.policy.target_utilization == 55
    assert parts.tlp.default_cpu_millis == 250 and parts.tlp is s.tlp_args()
    assert parts.fast_path is None
    assert isinstance(build_scoring(settings()).fast_path, LeastUsedFastPath)
    assert build_scoring(settings(), fast_path=False).fast_path is None


def test_the_ledger_keeps_placements_while_a_stale_reading_is_still_read():
    assert ledger_horizon(settings()) == 600.0 + REPORT_INTERVAL_SECONDS
    short = settings(**{"source.stale_after_seconds": 10, "source.max_stale_seconds": 20})
    assert ledger_horizon(short) == HORIZON_SECONDS


def test_the_learned_estimates_follow_the_estimator_settings():
    inflight = build_inflight(settings(**{"estimator.delta": False}))
    assert inflight.delta is False
    # a new learner holds no workload, so it is falsy (len 0): it was once taken for
    # "none given" and swapped for one of the default settings
    tuned = build_inflight(
        settings(
            **{
                "estimator.learned_percentile": 75,
                "estimator.learned_window_seconds": 120,
                "estimator.learned_max_workloads": 7,
            }
        )
    )
    assert tuned.learner.settings == LearnedUsage(75.0, 120.0, 7)


def test_readiness_says_what_is_missing_then_what_is_served():
    clock = Clock()
    ext = extender(None, clock)
    ready, why = ext.readiness()
    assert not ready and "no load snapshot from static" in why
    ext.refresher.snapshot = reading(a=(10.0, 10.0), b=(20.0, 20.0))
    ready, why = ext.readiness()
    assert ready and why == "ok: 2 nodes from static, 5s old"
    clock.now += 3600  # far past stale_after_seconds (180)
    ready, why = ext.readiness()
    assert not ready and "is stale: 3605s old > 180s" in why


def test_full_node_requests_teach_the_sizes_a_names_only_request_uses():
    clock = Clock()
    ext = extender(reading(a=(10.0, 10.0), b=(50.0, 50.0)), clock)
    ext.prioritize(names_args(["a", "b"]))
    assert ext.sizes_unknown  # no watch and no full Node seen yet
    ext.sizes_unknown = False
    ext.prioritize(nodes_args(["a", "b"]))
    info = ext.size_of("a")
    assert info is not None and info.cpu_allocatable_millis == 4000
    assert set(ext.seen_nodes) == {"a", "b"}
    ext.prioritize(names_args(["a", "b"]))
    assert not ext.sizes_unknown
    ready, why = ext.readiness()
    assert ready and SIZES_UNKNOWN not in why


def test_the_favourite_is_counted_and_a_request_over_the_nodes_size_is_not():
    clock = Clock()
    ext = extender(reading(a=(10.0, 10.0), b=(80.0, 80.0)), clock)
    hosts = ext.prioritize(nodes_args(["a", "b"]))
    assert max(hosts, key=lambda h: h.score).host == "a"
    assert ext.ledger.everything()["a"].pods == 1
    ext.prioritize(nodes_args(["a", "b"], cpu="64"))  # more than the node's 4 CPUs
    assert ext.ledger.everything()["a"].pods == 1
    assert b"loadwise_extender_placements_refused_total 1.0" in ext.metrics.render()


def test_observe_mode_rejects_nothing_and_answers_equal_priorities():
    clock = Clock()
    ext = extender(reading(a=(99.0, 10.0), b=(10.0, 10.0)), clock, mode="observe")
    assert ext.observe
    out = ext.filter(names_args(["a", "b"]))
    assert out.node_names == ["a", "b"] and not out.failed_and_unresolvable
    hosts = ext.prioritize(names_args(["a", "b"]))
    assert {h.score for h in hosts} == {NEUTRAL_PRIORITY}
    enforcing = extender(reading(a=(99.0, 10.0), b=(10.0, 10.0)), clock)
    assert not enforcing.observe
    assert enforcing.filter(names_args(["a", "b"])).node_names == ["b"]


def test_a_pod_in_an_ignored_namespace_is_left_to_the_scheduler():
    clock = Clock()
    ext = extender(reading(a=(99.0, 10.0), b=(10.0, 10.0)), clock, ignore_namespaces=["batch"])
    args = names_args(["a", "b"], namespace="batch")
    assert ext.filter(args).node_names == ["a", "b"]
    assert {h.score for h in ext.prioritize(args)} == {NEUTRAL_PRIORITY}
    assert len(ext.ledger) == 0  # nothing counted for a pod the extender leaves alone


@pytest.mark.parametrize("watching", [False, True])
def test_housekeeping_drops_an_unconfirmed_guess_early_only_under_a_synced_watch(watching):
    clock = Clock()
    ext = extender(reading(a=(10.0, 10.0)), clock)

    class SyncedWatch:
        synced = True
        nodes: dict[str, object] = {}
        last_error = None

        def facts(self):
            return None

    if watching:
        ext.cluster = SyncedWatch()  # type: ignore[assignment]
    ext.prioritize(names_args(["a"]))
    assert len(ext.ledger) == 1
    clock.now += UNCONFIRMED_SECONDS + 1
    ext.housekeep()
    assert len(ext.ledger) == (0 if watching else 1)


def test_the_fail_open_answers_pass_every_node_at_equal_priority():
    ext = extender(reading(), Clock())
    full = nodes_args(["a", "b"])
    assert [n["metadata"]["name"] for n in _items(ext.fallback_filter(full))] == ["a", "b"]
    assert ext.fallback_filter(names_args(["x"])).node_names == ["x"]
    hosts = ext.fallback_prioritize(full)
    assert [(h.host, h.score) for h in hosts] == [("a", NEUTRAL_PRIORITY), ("b", NEUTRAL_PRIORITY)]


def _items(result) -> list[dict]:
    assert result.nodes is not None
    return [json.loads(bytes(item)) for item in result.nodes.items]
