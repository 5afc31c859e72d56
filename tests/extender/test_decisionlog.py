"""The decision log's record: what the scores, the filter and the reading say of each node."""

from __future__ import annotations

from loadwise.extender.decisionlog import decision_record
from loadwise.extender.estimate import PodFacts
from loadwise.extender.model import NodeInfo, NodeLoad, NodeState, PodLoad, ResourceLoad, Usage

MI = 1024 * 1024


def test_a_record_holds_the_scores_the_filter_and_the_reading_apart():
    """A pod asking 100m with a 500m limit counts 425m for the scores and 100m for the
    filter; the node holds 2 such pods in flight beside a reading of 25 % of 4 cores."""
    guess = Usage(425.0, 128 * MI)
    pod = PodFacts(
        "default/p",
        "p",
        "default",
        guess,
        0,
        100,
        128 * MI,
        load=PodLoad(guess, Usage(100.0, 128 * MI), 0.0),
    )
    node = NodeState(
        "n",
        NodeInfo("n", 4000, 4096 * MI, 4000, 4096 * MI, 110),
        NodeLoad(ResourceLoad(25.0), ResourceLoad(50.0)),
        pending=Usage(850.0, 256 * MI),
        pending_request=Usage(200.0, 256 * MI),
    )
    record = decision_record(10.0, pod, "request rule", "learned", "n", [node])
    # 1000 read + 850 in flight + 425 the pod, of 4000; 2048 + 256 + 128 MiB of 4096 MiB
    assert record["nodes"] == {"n": [56.88, 59.38]}
    assert record["filter"] == {"n": [32.5, 59.38]}  # 1000 + 200 + 100
    assert record["read"] == {"n": [25.0, 50.0]}
