"""End to end: the real kube-scheduler calls the real extender, fed by real metrics
(kwok -> metrics-server -> load-watcher -> extender), and binds pods accordingly.

Each test places a workload and counts where the pods went. The comparisons run the
same workload under the stock scheduler too, so that each claim can fail.
"""

from __future__ import annotations

import time

import pytest

from lab import NodeSpec, delete, deploy, placements, scored_events
from tests.lab.e2e import COOL, HOT, decisions, restart_scheduler, scheduler_config

pytestmark = pytest.mark.lab


def test_memory_hog_gets_no_pods_with_the_extender(lab, extender, workdir):
    """lab-hog: 6Gi of its 8Gi used by something no pod requests (low requests, high usage)."""
    restart_scheduler(lab, scheduler_config(workdir, with_extender=True))
    before = extender.requests("prioritize")
    deploy(lab, "hog", 30)
    try:
        where = placements(lab, "hog", 30)
    finally:
        delete(lab, "hog")
    assert extender.requests("prioritize") > before, "the scheduler never called the extender"
    assert where[HOT] == 0, f"pods landed on the memory hog: {dict(where)}"
    assert set(where) <= COOL


def test_stock_scheduler_does_place_pods_on_the_hog(lab, extender, workdir):
    """The control: without the extender, requests-based scheduling favours the hog."""
    restart_scheduler(lab, scheduler_config(workdir, with_extender=False))
    deploy(lab, "stock", 30)
    try:
        where = placements(lab, "stock", 30)
    finally:
        delete(lab, "stock")
    assert where[HOT] > 0, f"the stock scheduler avoided the hog on its own: {dict(where)}"


def test_herding_a_burst_of_50_spreads_over_the_cool_nodes(lab, extender, workdir):
    restart_scheduler(lab, scheduler_config(workdir, with_extender=True))
    deploy(lab, "burst", 50, cpu="50m", memory="64Mi")
    try:
        where = placements(lab, "burst", 50)
    finally:
        delete(lab, "burst")
    assert where[HOT] == 0, dict(where)
    assert len([n for n in COOL if where[n] > 0]) == 3, f"burst piled up: {dict(where)}"
    assert max(where.values()) <= 35, f"burst piled onto one node: {dict(where)}"


def test_a_new_empty_node_receives_pods(lab, extender, workdir):
    """The new node has no metrics yet (load-watcher collects once a minute): Trimaran
    scores missing metrics as 0, so such a node would stay empty; loadwise estimates its load.
    20 pods: it is one of four equal-looking nodes, so its fair share is about five and a
    random tie-break alone is most unlikely to leave it empty (a CI run once gave it 0 of
    12; not reproduced since, hence the extender's reasons in the message)."""

    restart_scheduler(lab, scheduler_config(workdir, with_extender=True))
    lab.add_node(NodeSpec("lab-new", cpu="4", memory="8Gi"))
    try:
        since = time.time()
        deploy(lab, "fresh", 20)
        try:
            where = placements(lab, "fresh", 20)
            ok = where["lab-new"] > 0 and where[HOT] == 0
            why = "" if ok else "\n".join(decisions(lab, "fresh", since, at_least=20))
            if not ok:  # the node now: its taints and conditions decide what the filters let in
                node = lab.core().read_node("lab-new")
                taints = [f"{t.key}:{t.effect}" for t in node.spec.taints or []]
                conditions = [f"{c.type}={c.status}" for c in node.status.conditions or []]
                why += f"\nlab-new now: taints {taints}, conditions {conditions}"
        finally:
            delete(lab, "fresh")
        assert where["lab-new"] > 0, f"the new node got nothing: {dict(where)}\n{why}"
        assert where[HOT] == 0, f"pods landed on the memory hog: {dict(where)}\n{why}"
    finally:
        lab.core().delete_node("lab-new")


def test_extender_down_scheduling_goes_on_and_recovers(lab, extender, workdir):
    restart_scheduler(lab, scheduler_config(workdir, with_extender=True))
    extender.stop()
    try:
        deploy(lab, "nodown", 8)
        where = placements(lab, "nodown", 8, timeout=120)
        assert sum(where.values()) == 8  # ignorable: true keeps scheduling alive
    finally:
        delete(lab, "nodown")
        extender.start()
    before = extender.requests("prioritize")
    deploy(lab, "back", 20)
    try:
        where = placements(lab, "back", 20)
    finally:
        delete(lab, "back")
    assert extender.requests("prioritize") > before
    assert where[HOT] == 0, f"not load-aware again after the extender returned: {dict(where)}"


def test_extender_records_why_on_the_pod(lab, extender, workdir):
    restart_scheduler(lab, scheduler_config(workdir, with_extender=True))
    since = time.time()
    deploy(lab, "why", 3)
    try:
        placements(lab, "why", 3)
        mine = scored_events(lab, "why", since=since, timeout=30)
        assert mine, "no LoadwiseScored Event recorded"
        import json

        decision = json.loads(mine[0].metadata.annotations["loadwise.dev/decision"])
        assert decision["source"].startswith("load-watcher") and decision["scores"]
        assert HOT not in (decision.get("best") or "")
    finally:
        delete(lab, "why")
