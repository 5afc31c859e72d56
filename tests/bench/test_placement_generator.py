"""Generated scenarios: a name is one scenario, every one is a scenario the loader accepts,
and none is one no placement could serve."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from benchmarks.placement import generator
from benchmarks.placement.exceptions import ScenarioError
from benchmarks.placement.scenario import Resources, loads, select

SEEDS = range(1, 25)


@pytest.fixture(scope="module")
def drawn() -> list[generator.Generated]:
    return [generator.generate(s, i) for s in SEEDS for i in (1, 2)]


def test_a_name_always_draws_the_same_scenario():
    a, b = generator.generate(11, 3), generator.generate(11, 3)
    assert a.text == b.text and a.scenario == b.scenario
    assert a.scenario.name == "gen-11-3"
    assert generator.generate(11, 4).text != a.text
    assert generator.generate(12, 3).text != a.text


def test_the_development_set_is_what_the_generator_draws():
    files = sorted(generator.DEV_DIR.glob("*.yaml"))
    assert [p.stem for p in files] == [f"gen-{s}-1" for s in generator.DEV_SEEDS]
    for g in generator.dev_set():
        assert (generator.DEV_DIR / f"{g.scenario.name}.yaml").read_text() == g.text, (
            f"{g.scenario.name} differs: rewrite with python -m benchmarks.placement.generator"
        )


def test_the_development_set_is_found_by_name_but_not_run_by_default():
    (sc,) = select(["gen-3-1"], also=[generator.DEV_DIR])
    assert sc == generator.generate(3, 1).scenario
    assert not any(s.name.startswith("gen-") for s in select(None))
    with pytest.raises(ScenarioError, match="gen-3-1"):
        select(["gen-3-1"])


def test_every_draw_is_a_steady_scenario_the_loader_reads_back(drawn):
    for g in drawn:
        sc = g.scenario
        assert loads(g.text, "again") == sc
        assert sc.steady is not None and sc.steady.duration_seconds == generator.DURATION
        # the YAML is plain: only the schema's keys, no Python tags
        assert "!!" not in g.text and yaml.safe_load(g.text)["name"] == sc.name
        assert set(sc.contenders or ()) == set(generator.CONTENDERS)


def test_every_draw_is_feasible(drawn):
    for g in drawn:
        sc = g.scenario
        assert generator.problems(sc) == [], sc.name
        for res in ("cpu", "memory"):
            req = sum(getattr(w.requests, res) * w.replicas for w in sc.workloads)
            cap = sum(getattr(n.capacity, res) for n in sc.nodes)
            assert req <= generator.REQUEST_HEADROOM * cap
        assert all(v < 1 for v in generator.usage_optimum(sc).values())


def test_the_draws_cover_what_a_homelab_has(drawn):
    scs = [g.scenario for g in drawn]
    sizes = {(n.capacity.cpu, n.capacity.memory / 2**30) for sc in scs for n in sc.nodes}
    assert (8.0, 32.0) in sizes and (4.0, 4.0) in sizes and (4.0, 8.0) in sizes
    mixed = [sc for sc in scs if len({n.capacity for n in sc.nodes}) > 1]
    equal = [sc for sc in scs if len({n.capacity for n in sc.nodes}) == 1]
    assert mixed and equal
    ratios = [
        getattr(w.usage, r) / getattr(w.requests, r)
        for sc in scs
        for w in sc.workloads
        for r in ("cpu", "memory")
    ]
    assert min(ratios) >= generator.RATIO_MIN * 0.9 and max(ratios) <= generator.RATIO_MAX * 1.1
    assert min(ratios) < 0.5 and max(ratios) > 3
    assert any(w.limits is None for sc in scs for w in sc.workloads)
    assert any(w.limits is not None for sc in scs for w in sc.workloads)
    # a container never uses more than its limits (throttled on CPU, OOM-killed on memory)
    for sc in scs:
        for w in sc.workloads:
            if w.limits is not None:
                assert w.usage.cpu <= w.limits.cpu and w.usage.memory <= w.limits.memory, w
    assert any(sc.steady and sc.steady.changes for sc in scs)
    assert any(sc.steady and not sc.steady.changes for sc in scs)
    assert {sc.steady.source for sc in scs if sc.steady} == {"metrics-server", "prometheus"}
    for sc in scs:
        assert all(w.background.cpu > 0 and w.background.memory > 0 for w in sc.nodes)


def test_a_longer_stream_keeps_its_changes_inside_it():
    g = generator.generate(4, 1, duration=1800)
    assert g.scenario.steady is not None and g.scenario.steady.duration_seconds == 1800
    assert all(c.at_seconds <= 1800 for c in g.scenario.steady.changes)
    assert max(c.at_seconds for c in g.scenario.steady.changes) > 360


def test_an_infeasible_scenario_is_named_as_such():
    sc = generator.generate(5, 1).scenario
    w = sc.workloads[0]
    heavy = dataclasses.replace(w, requests=Resources(w.requests.cpu * 1000, w.requests.memory))
    assert any("cpu requests" in p for p in generator.problems(
        dataclasses.replace(sc, workloads=(heavy, *sc.workloads[1:]))
    ))  # fmt: skip
    big = max(n.capacity.memory for n in sc.nodes)
    hog = dataclasses.replace(w, usage=Resources(w.usage.cpu, 2 * big))
    assert any("memory at" in p for p in generator.problems(
        dataclasses.replace(sc, workloads=(hog, *sc.workloads[1:]))
    ))  # fmt: skip


def test_bad_arguments_are_refused():
    with pytest.raises(ScenarioError, match="index starts at 1"):
        generator.generate(1, 0)
    with pytest.raises(ScenarioError, match="duration"):
        generator.generate(1, 1, duration=0)


def test_names_parse_back():
    assert generator.parse_name("gen-7-12") == (7, 12)
    assert generator.parse_name("steady-mix") is None
    assert generator.parse_name("gen-7-x") is None
