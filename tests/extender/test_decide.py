"""The filter's verdicts and the mapping of scores to priorities (``extender.decide``)."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from loadwise.extender.decide import (
    DEFAULT_THRESHOLDS,
    best,
    filter_nodes,
    node_thresholds,
    over_excess,
    over_reason,
    prioritize,
    to_priorities,
)
from loadwise.extender.estimate import PodFacts
from loadwise.extender.model import NodeInfo, NodeState, Usage
from loadwise.extender.policies import NodeScore

from .helpers import state

GI = 1024**3


def facts(cpu: float = 0.0, memory: float = 0.0) -> PodFacts:
    return PodFacts("ns/p", "p", "ns", Usage(cpu, memory), int(cpu), int(cpu), int(memory))


def node(name: str, cpu: float | None, memory: float | None = 10.0, **kw: object) -> NodeState:
    """A 4-CPU, 8 GiB node measured at ``cpu`` and ``memory`` percent."""
    info = NodeInfo(
        name,
        cpu_capacity_millis=4000,
        memory_capacity_bytes=8 * GI,
        cpu_allocatable_millis=4000,
        memory_allocatable_bytes=8 * GI,
        **kw,  # type: ignore[arg-type]
    )
    return state(info, cpu, memory)


def test_a_node_is_rejected_when_its_rounded_use_after_the_pod_exceeds_the_threshold():
    # 4000m: 85 % measured is 3400m; the pod's 182m makes 89.55 %, 90 rounded: not over 90
    # (Koordinator compares the rounded percent); 222m makes 90.55 %, 91: over
    at_limit = filter_nodes(facts(182), [node("a", 85.0)], DEFAULT_THRESHOLDS)
    assert at_limit.passed == ["a"] and at_limit.failed == {}
    over = filter_nodes(facts(222), [node("a", 85.0), node("b", 20.0)], DEFAULT_THRESHOLDS)
    assert over.passed == ["b"]
    assert over.failed == {"a": "cpu 91% > 90% threshold"}
    assert not over.all_over and over.let_through == {}


def test_a_node_without_load_figures_is_never_rejected_on_them():
    out = filter_nodes(facts(4000), [node("a", None, None)], {"cpu": 10, "memory": 10})
    assert out.passed == ["a"] and out.failed == {}


def test_when_every_candidate_is_over_the_least_over_pass_all_the_same():
    nodes = [node("a", 99.0), node("b", 95.0), node("c", 95.0)]
    out = filter_nodes(facts(), nodes, DEFAULT_THRESHOLDS)
    assert out.all_over
    assert out.passed == ["b", "c"]  # 5 points over, against a's 9; in the candidates' order
    assert set(out.let_through) == {"b", "c"} and set(out.failed) == {"a"}


def test_when_every_candidate_is_over_those_within_the_band_of_the_least_over_pass_too():
    # excess in rounded points: a 9, b 5, c 11, d 10; the band reaches 5 + 5 = 10
    nodes = [node("a", 99.0), node("b", 95.0), node("c", 101.0), node("d", 100.0)]
    out = filter_nodes(facts(), nodes, DEFAULT_THRESHOLDS, band=5)
    assert out.all_over
    assert out.passed == ["a", "b", "d"] and set(out.let_through) == {"a", "b", "d"}
    assert set(out.failed) == {"c"}
    # a node under its thresholds still passes alone: the band is for the all-over case only
    out = filter_nodes(facts(), [node("a", 91.0), node("b", 89.0)], DEFAULT_THRESHOLDS, band=5)
    assert out.passed == ["b"] and not out.all_over and set(out.failed) == {"a"}


def test_an_exempt_pod_has_no_node_rejected_and_is_told_which_were_over():
    nodes = [node("a", 99.0), node("b", 20.0)]
    out = filter_nodes(facts(), nodes, DEFAULT_THRESHOLDS, exempt=True)
    assert out.passed == ["a", "b"] and out.failed == {}
    assert out.let_through == {"a": "cpu 99% > 90% threshold"}
    assert not out.all_over


def test_a_nodes_own_threshold_replaces_the_configured_one_and_is_reported():
    strict = node("a", 50.0, cpu_threshold=40.0)
    out = filter_nodes(facts(), [strict, node("b", 50.0)], DEFAULT_THRESHOLDS)
    assert out.failed == {"a": "cpu 50% > 40% threshold"} and out.passed == ["b"]
    assert out.thresholds == {"a": {"cpu": 40.0, "memory": 90.0}}


def test_node_thresholds_returns_the_default_itself_when_the_node_has_none():
    default = {"cpu": 80.0, "memory": 85.0}
    assert node_thresholds(None, default) is default
    assert node_thresholds(NodeInfo("n"), default) is default
    own = node_thresholds(NodeInfo("n", memory_threshold=50.0), default)
    assert own == {"cpu": 80.0, "memory": 50.0} and default["memory"] == 85.0


def test_a_departure_larger_than_the_reading_counts_the_node_as_empty_not_negative():
    # 10 % of 4000m measured, and 1000m of pods gone since the reading: before the pod the
    # node is at 0 (not -600m), so the pod's 3700m makes 92.5 %, 93 rounded, over 90;
    # read as -600m it would make 77.5 %
    info = NodeInfo("a", 4000, 8 * GI, 4000, 8 * GI)
    gone = msgspec.structs.replace(
        state(info, 10.0, 10.0, pending=Usage(-1000.0, 0.0)), pending_request=Usage(-1000.0, 0.0)
    )
    roomy = state(NodeInfo("b", 16000, 8 * GI, 16000, 8 * GI), 0.0, 10.0)
    out = filter_nodes(facts(3700), [gone, roomy], DEFAULT_THRESHOLDS)
    assert out.failed == {"a": "cpu 93% > 90% threshold"} and out.passed == ["b"]


def test_the_reason_and_the_excess_of_a_node_over_its_thresholds():
    marks = [("cpu", 95, 90.0), ("memory", 99, 85.5)]
    assert over_reason(marks, estimated=True) == (
        "cpu 95% > 90% threshold, estimated; memory 99% > 85.5% threshold, estimated"
    )
    assert over_excess(marks) == 13.5


def test_priorities_never_tie_at_the_top():
    # 10 and 14 share step 1: the winner keeps it, the other drops to 0
    assert to_priorities(["a", "b"], [10, 14]) == ([0, 1], 1)
    # an exact tie goes to the node with the fewest pods placed lately, then the first name
    pending = {"a": 3, "b": 1, "c": 1}.__getitem__
    assert to_priorities(["a", "b", "c"], [70, 70, 70], pending) == ([6, 7, 6], 1)
    assert to_priorities(["c", "b"], [70, 70]) == ([6, 7], 1)
    # everyone at step 0: the winner rises to 1 instead
    assert to_priorities(["a", "b"], [0, 0]) == ([1, 0], 0)
    assert to_priorities([], []) == ([], None)


@dataclass(frozen=True)
class ByCpu:
    """Scores 100 minus the measured CPU; counts the reasons it was asked for."""

    name: str = "by-cpu"

    def score(self, pod: PodFacts, node: NodeState, explain: bool = True) -> NodeScore:
        cpu = node.load.cpu.avg or 0.0
        return NodeScore(int(100 - cpu), f"cpu {cpu:.0f}%" if explain else "")


def test_prioritize_ranks_every_node_and_explains_only_the_winner():
    ranked = prioritize(facts(), [node("a", 60.0), node("b", 20.0), node("c", 90.0)], ByCpu())
    assert [(r.node, r.priority) for r in ranked] == [("a", 4), ("b", 8), ("c", 1)]
    assert [r.detail.why for r in ranked] == ["", "cpu 20%", ""]
    winner = best(ranked)
    assert winner is not None and winner.node == "b"
    assert best([]) is None


def test_the_filter_reads_a_swinging_node_at_its_peak_with_sigmas():
    """Memory at 70 % on average, swinging by a deviation of 15 points: with the pod's 0.5
    GiB (6.25 points) the mean makes 76 %, under 90; one deviation above it, 91 %, over."""
    swinging = msgspec.structs.replace(
        node("a", 10.0), load=state(None, 10.0, 70.0, memory_std=15.0).load
    )
    calm = node("b", 10.0, 80.0)
    pod = facts(100, GI / 2)
    by_mean = filter_nodes(pod, [swinging, calm], DEFAULT_THRESHOLDS)
    assert by_mean.passed == ["a", "b"]
    by_peak = filter_nodes(pod, [swinging, calm], DEFAULT_THRESHOLDS, sigmas=1.0)
    assert by_peak.passed == ["b"]
    assert by_peak.failed == {"a": "memory 91% > 90% threshold"}
