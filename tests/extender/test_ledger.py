"""The herding ledger: which placements and departures a measurement window still counts."""

from __future__ import annotations

import math

import pytest

from loadwise.extender.ledger import Ledger, NodeTotals, Pending, Placement, capped
from loadwise.extender.model import NodeInfo, PodLoad, Usage

MI = 1024**2


def load(cpu: float, memory_mib: float = 0.0, tlp: float | None = None) -> PodLoad:
    usage = Usage(cpu, memory_mib * MI)
    return PodLoad(usage, usage, cpu if tlp is None else tlp)


def figures(totals: object, node: str) -> tuple[int, int, float, float] | None:
    """(pods, departed, cpu, memory MiB) of ``node``, None when the node has no entry."""
    assert isinstance(totals, dict)
    entry = totals.get(node)
    if entry is None:
        return None
    assert isinstance(entry, Pending)
    return entry.pods, entry.departed, entry.cpu_millis, entry.memory_bytes / MI


def test_a_placement_counts_in_a_window_that_starts_before_it_and_not_after():
    ledger = Ledger()
    ledger.assume("ns/a", "n1", load(200, 64), at=100.0)
    assert figures(ledger.recent(99.0), "n1") == (1, 0, 200.0, 64.0)
    # placed exactly at the window's start: the reading holds it already
    assert figures(ledger.recent(100.0), "n1") is None
    assert figures(ledger.everything(), "n1") == (1, 0, 200.0, 64.0)


def test_the_window_moving_back_counts_the_placement_again():
    ledger = Ledger()
    ledger.assume("ns/a", "n1", load(200), at=100.0)
    assert figures(ledger.recent(150.0), "n1") is None
    # a source restarted and its window ends earlier: rebuilt, the pod counts again
    assert figures(ledger.recent(50.0), "n1") == (1, 0, 200.0, 0.0)


def test_a_bind_replaces_the_assumption_on_another_node_and_an_assumption_cannot_undo_it():
    ledger = Ledger()
    ledger.assume("ns/a", "n1", load(100), at=10.0)
    assert figures(ledger.unconfirmed(), "n1") == (1, 0, 100.0, 0.0)
    ledger.bind("ns/a", "n2", load(100), at=11.0)
    assert figures(ledger.everything(), "n1") is None
    assert figures(ledger.everything(), "n2") == (1, 0, 100.0, 0.0)
    assert figures(ledger.unconfirmed(), "n2") is None
    ledger.assume("ns/a", "n1", load(100), at=12.0)  # a later guess: the watch knows better
    placement = ledger.placement("ns/a")
    assert placement is not None and (placement.node, placement.confirmed) == ("n2", True)


def test_a_bind_on_the_assumed_node_keeps_the_earlier_time():
    ledger = Ledger()
    ledger.assume("ns/a", "n1", load(100), at=10.0)
    ledger.bind("ns/a", "n1", load(100), at=14.0)
    placement = ledger.placement("ns/a")
    assert placement is not None and placement.at == 10.0 and placement.confirmed
    assert figures(ledger.recent(12.0), "n1") is None  # the pod was there before 12


def test_a_departed_pod_comes_off_its_node_in_a_window_it_was_placed_before_and_left_after():
    ledger = Ledger()
    ledger.bind("ns/a", "n1", load(300, 100), at=50.0)
    ledger.depart("ns/a", "n1", load(300, 100), at=150.0)
    assert ledger.placement("ns/a") is None
    # the reading of a window starting at 100 holds the pod, which has gone since
    assert figures(ledger.recent(100.0), "n1") == (0, 1, -300.0, -100.0)
    # a window starting after it left does not hold it: nothing to take off
    assert figures(ledger.recent(160.0), "n1") is None
    assert len(ledger.departed_after(100.0)) == 1 and ledger.departed_after(160.0) == []


def test_a_pod_placed_and_gone_within_the_window_is_forgotten():
    ledger = Ledger()
    ledger.bind("ns/a", "n1", load(300), at=120.0)
    ledger.depart("ns/a", "n1", load(300), at=150.0)
    # the window starts at 100: the pod came and went after it, the reading never held it
    assert figures(ledger.recent(100.0), "n1") is None


def test_a_departure_the_ledger_never_saw_placed_counts_in_every_earlier_window():
    ledger = Ledger()
    ledger.depart("ns/old", "n1", load(500), at=150.0)  # placed before anything held
    assert figures(ledger.recent(-1e9), "n1") == (0, 1, -500.0, 0.0)
    assert figures(ledger.recent(149.0), "n1") == (0, 1, -500.0, 0.0)
    assert figures(ledger.recent(150.0), "n1") is None


def test_a_departure_no_later_than_its_placement_counts_nowhere():
    ledger = Ledger()
    ledger.bind("ns/a", "n1", load(100), at=200.0)
    ledger.depart("ns/a", "n1", load(100), at=200.0)
    assert len(ledger) == 0 and ledger.recent(0.0) == {}


def test_a_departure_larger_than_the_placements_leaves_negative_totals():
    ledger = Ledger()
    ledger.depart("ns/big", "n1", load(1000, 512), at=150.0)
    ledger.assume("ns/small", "n1", load(100, 64), at=140.0)
    assert figures(ledger.recent(100.0), "n1") == (1, 1, -900.0, -448.0)
    ledger.forget("ns/small")
    assert figures(ledger.recent(100.0), "n1") == (0, 1, -1000.0, -512.0)


def test_a_placement_counts_at_most_its_nodes_allocatable():
    info = NodeInfo("n1", cpu_allocatable_millis=2000, memory_allocatable_bytes=1024 * MI)
    ledger = Ledger(size_of={"n1": info}.get)
    ledger.assume("ns/huge", "n1", load(64_000, 1024 * 1024), at=10.0)
    assert figures(ledger.everything(), "n1") == (1, 0, 2000.0, 1024.0)
    ledger.assume("ns/elsewhere", "n9", load(64_000), at=10.0)  # size unknown: as given
    assert figures(ledger.everything(), "n9") == (1, 0, 64_000.0, 0.0)


def test_capped_leaves_a_load_within_the_node_as_it_is_and_a_missing_figure_caps_nothing():
    small = load(100, 10)
    info = NodeInfo("n", cpu_allocatable_millis=1000, memory_allocatable_bytes=100 * MI)
    assert capped(small, info) is small
    assert capped(small, None) is small
    big = load(5000, 500, tlp=7000)
    got = capped(big, info)
    assert (got.usage, got.request, got.tlp_cpu_millis) == (
        Usage(1000, 100 * MI),
        Usage(1000, 100 * MI),
        1000,
    )
    no_memory = NodeInfo("n", cpu_allocatable_millis=1000)  # reports no memory: 0
    assert capped(big, no_memory).usage == Usage(1000, 500 * MI)


def test_prune_drops_placements_past_the_horizon_and_unconfirmed_guesses_early():
    ledger = Ledger(horizon=300.0)
    ledger.bind("ns/old", "n1", load(100), at=0.0)
    ledger.bind("ns/bound", "n1", load(100), at=900.0)
    ledger.assume("ns/guess", "n1", load(100), at=900.0)
    ledger.prune(now=1000.0)
    assert ledger.placement("ns/old") is None
    assert ledger.placement("ns/bound") is not None and ledger.placement("ns/guess") is not None
    ledger.prune(now=1000.0, unconfirmed_before=950.0)
    assert ledger.placement("ns/guess") is None
    assert ledger.placement("ns/bound") is not None  # the watch saw it: kept to the horizon
    assert figures(ledger.everything(), "n1") == (1, 0, 100.0, 0.0)


def test_recount_changes_what_an_entry_counts_and_reports_an_unknown_key():
    ledger = Ledger()
    ledger.assume("ns/a", "n1", load(500), at=10.0)
    assert ledger.recount("ns/a", load(120)) is True
    assert figures(ledger.recent(0.0), "n1") == (1, 0, 120.0, 0.0)
    placement = ledger.placement("ns/a")
    assert placement is not None and (placement.at, placement.confirmed) == (10.0, False)
    assert ledger.recount("ns/nobody", load(1)) is False
    ledger.depart("ns/b", "n2", load(400), at=20.0)
    (key, _), *_ = ledger.departed_after(0.0)
    assert ledger.recount(key, load(150)) is True
    assert figures(ledger.recent(0.0), "n2") == (0, 1, -150.0, 0.0)


def test_placed_after_lists_pods_not_departures():
    ledger = Ledger()
    ledger.assume("ns/a", "n1", load(1), at=10.0)
    ledger.assume("ns/b", "n1", load(1), at=30.0)
    ledger.depart("ns/c", "n1", load(1), at=40.0)
    assert [k for k, _ in ledger.placed_after(20.0)] == ["ns/b"]


def test_the_recent_totals_are_one_object_updated_in_place_until_the_window_moves_back():
    ledger = Ledger()
    first = ledger.recent(0.0)
    seen = first.seen()
    ledger.assume("ns/a", "n1", load(1), at=10.0)
    ledger.assume("ns/b", "n2", load(1), at=11.0)
    assert ledger.recent(5.0) is first and first.since(seen) == ["n1", "n2"]
    assert ledger.recent(-5.0) is not first  # rebuilt


def test_node_totals_say_when_a_reader_fell_behind_the_log():
    totals = NodeTotals()
    for i in range(NodeTotals.LOG_MAX + 1):
        totals.log(f"n{i}")
    assert totals.seen() == NodeTotals.LOG_MAX + 1
    assert totals.since(0) is None  # the oldest half went: compare everything again
    assert totals.since(totals.seen() - 1) == [f"n{NodeTotals.LOG_MAX}"]


def test_a_placement_is_in_a_window_by_its_kind():
    pod = Placement("n1", load(1), at=10.0, confirmed=True)
    assert pod.in_window(9.0) and not pod.in_window(10.0)
    gone = Placement("n1", load(1), at=10.0, confirmed=True, left=True, placed_at=5.0)
    assert gone.in_window(5.0) and gone.in_window(9.9)
    assert not gone.in_window(4.9) and not gone.in_window(10.0)
    never = Placement("n1", load(1), at=10.0, confirmed=True, left=True)
    assert never.placed_at == -math.inf and never.in_window(-1e12)


def test_a_ledger_without_room_is_refused():
    with pytest.raises(ValueError, match="max_entries must be >= 1"):
        Ledger(max_entries=0)
