"""Scenario files: the shipped ones load, and a bad key is refused naming it."""

from __future__ import annotations

import pytest

from benchmarks.placement.exceptions import ScenarioError
from benchmarks.placement.scenario import SCENARIOS_DIR, available, loads, select

GOOD = """
name: t
title: t
nodes:
  - {name: a, cpu: "2", memory: 4Gi, background: {cpu: 250m, memory: 1Gi}, hot: true}
  - {name: w, count: 3, cpu: "1", memory: 2Gi}
workloads:
  - {name: web, replicas: 4, requests: {cpu: 100m, memory: 64Mi},
     usage: {cpu: 200m, memory: 96Mi}, rate: 2}
events:
  - {after_pods: 2, join: {name: new, cpu: "2", memory: 4Gi}}
"""


def test_a_scenario_is_read_with_its_quantities_in_base_units():
    sc = loads(GOOD)
    assert [n.name for n in sc.nodes] == ["a", "w-001", "w-002", "w-003"]
    a = sc.nodes[0]
    assert (a.capacity.cpu, a.capacity.memory) == (2.0, 4 * 2**30)
    assert (a.background.cpu, a.background.memory, a.hot) == (0.25, 2**30, True)
    assert sc.nodes[1].background.cpu == 0 and not sc.nodes[1].hot
    (w,) = sc.workloads
    assert w.pod_names() == ["web-0001", "web-0002", "web-0003", "web-0004"]
    assert (w.usage.cpu, w.usage.memory, w.rate) == (0.2, 96 * 2**20, 2)
    assert [j.node.name for j in sc.joins] == ["new"] and sc.joins[0].after_pods == 2
    assert [n.name for n in sc.all_nodes()][-1] == "new"
    assert sc.pod_count == 4


@pytest.mark.parametrize(
    ("edit", "names"),
    [
        (("hot: true", "hott: true"), ["hott", "$.nodes[0]"]),
        (("cpu: 250m", "cpu: lots"), ["$.nodes[0].background.cpu", "lots"]),
        (("replicas: 4", "replicas: four"), ["$.workloads[0].replicas"]),
        (("replicas: 4", "replicas: 0"), ["$.workloads[0].replicas"]),
        (("rate: 2", "rate: -1"), ["$.workloads[0].rate"]),
        (("after_pods: 2", "after_pods: 4"), ["$.events[0].after_pods"]),
        (("count: 3", "count: 0"), ["$.nodes[1].count"]),
        (('cpu: "1"', 'cpu: "0"'), ["$.nodes[1]", "capacity"]),
        (("name: new", "name: a"), ["'a'", "twice"]),
        # descheduler is {seconds, interval_seconds} (a bare boolean is a type error)
        (("title: t", "title: t\ndescheduler: true"), ["$.descheduler"]),
        (
            ("title: t", "title: t\ndescheduler: {interval_seconds: 0}"),
            ["$.descheduler.interval_seconds"],
        ),
        (("title: t", "title: t\ndescheduler: {seconds: .nan}"), ["$.descheduler.seconds"]),
        (("title: t", "title: t\ndescheduler: {}\nbacklog: true"), ["$.backlog", "descheduler"]),
    ],
)
def test_a_bad_key_is_refused_naming_the_file_and_the_key(edit, names):
    refused(GOOD.replace(*edit), names)


def refused(text: str, names: list[str]) -> None:
    """`text` is refused with a message naming the file first, then each of `names`."""
    with pytest.raises(ScenarioError) as exc:
        loads(text, "bad.yaml")
    msg = str(exc.value)
    assert msg.startswith("bad.yaml: "), msg
    for n in names:
        assert n in msg, msg


def test_the_descheduler_and_the_backlog_are_read_with_their_defaults():
    sc = loads(GOOD.replace("title: t", "title: t\ndescheduler: {seconds: 30}"), "d.yaml")
    assert sc.descheduler is not None
    assert (sc.descheduler.seconds, sc.descheduler.interval_seconds) == (30, 10)
    assert loads(GOOD.replace("title: t", "title: t\nbacklog: true"), "b.yaml").backlog
    assert loads(GOOD, "g.yaml").descheduler is None


def test_every_shipped_scenario_loads_and_is_named_after_its_file():
    names = list(available())
    assert {"hog", "strong-weak", "new-node", "burst", "scale-100", "scale-500", "smoke"} <= set(
        names
    )
    scenarios = select(names)
    assert [s.name for s in scenarios] == names
    assert "smoke" not in [s.name for s in select(None)]


def test_an_unknown_scenario_name_is_refused_with_the_choices():
    with pytest.raises(ScenarioError, match="no scenario 'nope'.*hog"):
        select(["nope"], SCENARIOS_DIR)
