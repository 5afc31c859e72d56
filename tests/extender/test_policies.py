"""Every published scoring vector from the reference, plus the single-resource
least-used variants (memory really in use; free pod slots)."""

import msgspec
import pytest

from loadwise.extender.decide import best, prioritize
from loadwise.extender.estimate import TLPArgs, peak_percent, pod_facts
from loadwise.extender.model import ResourceLoad, Usage
from loadwise.extender.policies import (
    MAX_SCORE,
    LeastUsed,
    LoadVariationRiskBalancing,
    PolicyError,
    TargetLoadPacking,
    make_policy,
    to_extender_priority,
)
from loadwise.extender.policies import least_used as least_used_module
from loadwise.extender.policies.least_used import (
    HOTTEST_FLOOR,
    HOTTEST_LEVEL_POWER,
    HOTTEST_WEIGHT,
    OVERALL_WEIGHT,
    RAISED_CEILING,
    RAISED_GAP,
    RAISED_POINTS,
    beyond_least,
    full_by_guess,
    hottest_raises,
    least_used,
    less_for_raising,
    level_weights,
    lower_for_raising,
    raised_ceiling,
)
from loadwise.extender.policies.load_variation import compute_score
from loadwise.extender.policies.spread import near_best, spread_score
from loadwise.extender.policies.target_load_packing import tlp_score

from .helpers import GI, container, node_info, pod, state

EMPTY = pod_facts(pod())


# -- TargetLoadPacking: scheduler-plugins targetloadpacking_test.go (cap 1000m, X=40) ----------


@pytest.mark.parametrize(
    ("util", "the_pod", "expected"),
    [
        (0, EMPTY, 40),
        (50, EMPTY, 33),
        (30, pod_facts(pod(container({"cpu": "1"}, {"cpu": "1"}))), 0),
    ],
    ids=["new node", "hot node", "excess utilization returns min score"],
)
def test_tlp_scheduler_plugins_vectors(util, the_pod, expected):
    info = node_info(cpu="1", memory="1Gi")
    assert TargetLoadPacking(40).score(the_pod, state(info, util)).score == expected


def test_tlp_kep_vectors():
    # kep/61: 3 nodes x 4 cores using 1/2/3 cores, a 0-core pod, X=50 -> 75, 100, 25
    info = node_info(cpu="4")
    scores = [TargetLoadPacking(50).score(EMPTY, state(info, pct)).score for pct in (25, 50, 75)]
    assert scores == [75, 100, 25]


def test_tlp_counts_recent_pods_and_multiplies_requests():
    info = node_info(cpu="4")
    p = pod_facts(pod(container({"cpu": "500m"})))
    assert p.tlp_cpu_millis == 750
    assert TargetLoadPacking(40).score(p, state(info, 25, pending_tlp=1000)).score == 21
    assert TargetLoadPacking(40).score(p, state(info, 25)).score == 38
    # The reference's derived "util 10 % -> 74" adds the bare 500m request (22.5 %), which
    # contradicts its own multiplier rule; with the 1.5x prediction it is 28.75 % -> 83.
    assert TargetLoadPacking(40).score(p, state(info, 10)).score == 83
    limited = pod_facts(pod(container({"cpu": "500m"}, {"cpu": "500m"})))
    assert TargetLoadPacking(40).score(limited, state(info, 10)).score == 74


def test_tlp_score_edges():
    assert tlp_score(101, 40) == 0
    assert tlp_score(100, 40) == 0
    assert tlp_score(40, 40) == 100


# -- LoadVariationRiskBalancing: analysis_test.go TestComputeScore (Capacity 100, Req 10) ------


@pytest.mark.parametrize(
    ("margin", "sens", "cap", "avg", "std", "expected"),
    [
        (1, 1, 100, 40, 36, 57),
        (1, 2, 0, 40, 36, 0),
        (1, 2, 100, -40, 36, 65),
        (1, 2, 100, 200, 36, 20),
        (1, 2, 100, 40, -36, 75),
        (1, 2, 100, 40, 120, 25),
        (-1, 1, 100, 40, 36, 75),
        (1, -1, 100, 40, 36, 57),
        (1, 0, 100, 40, 36, 75),
    ],
)
def test_lvrb_compute_score(margin, sens, cap, avg, std, expected):
    from loadwise.extender.estimate import go_round

    assert go_round(compute_score(cap, 10, avg, std, margin, sens)) == expected


# loadvariationriskbalancing_test.go TestScore: node 1000m / 1Gi, margin = sensitivity = 1
@pytest.mark.parametrize(
    ("cpu", "cpu_std", "mem", "mem_std", "requests", "expected"),
    [
        (50, None, None, None, None, 75),
        (100, None, None, None, None, 50),
        (30, 16, None, None, {"cpu": "200m", "memory": "256Mi"}, 67),
        (40, 16, 50, 10, {"cpu": "100m", "memory": "512Mi"}, 45),
        (80, 20, 25, 15, {"cpu": "100m", "memory": "512Mi"}, 45),
    ],
    ids=["new node", "hot node", "average and stDev", "CPU and Memory", "pick worst case"],
)
def test_lvrb_scheduler_plugins_vectors(cpu, cpu_std, mem, mem_std, requests, expected):
    info = node_info(cpu="1", memory="1Gi")
    p = pod_facts(pod(container(requests))) if requests else EMPTY
    s = state(info, cpu, mem, cpu_std=cpu_std, memory_std=mem_std)
    assert LoadVariationRiskBalancing(1, 1).score(p, s).score == expected


def test_lvrb_kep_example_with_current_formula():
    # kep/61 example (pod 0.5 cpu / 1 GB, nodes 4 cpu / 8 GB); values from the reference
    from loadwise.extender.estimate import go_round

    def node(m_cpu, m_mem, v_cpu, v_mem):
        cpu = compute_score(4, 0.5, m_cpu, v_cpu)
        mem = compute_score(8, 1, m_mem, v_mem)
        return go_round(min(cpu, mem))

    assert [node(0.8, 1.6, 3.2, 4.8), node(2, 6.4, 0.04, 0.004), node(1.2, 3.2, 0.4, 0.4)] == [
        44,
        54,
        71,
    ]


# -- least-used: Koordinator load_aware_test.go TestScore (96 CPU / 512Gi, pod 16 / 32Gi) ------


def test_least_used_koordinator_vectors():
    info = node_info(cpu="96", memory="512Gi")
    p = pod_facts(pod(container({"cpu": "16", "memory": "32Gi"}, {"cpu": "16", "memory": "32Gi"})))
    policy = LeastUsed({"cpu": 1, "memory": 1})
    assert policy.score(p, state(info, 0, 0)).score == 90
    used_cpu, used_mem = 100 * 32 / 96, 100 * 10 / 512
    assert policy.score(p, state(info, used_cpu, used_mem)).score == 72
    assigned = Usage(p.usage.cpu_millis, p.usage.memory_bytes)
    assert policy.score(p, state(info, used_cpu, used_mem, pending=assigned)).score == 63


def test_memory_only_weights_score_memory_really_in_use():
    # A node with plenty of unrequested memory in use scores low however few requests it has.
    policy = LeastUsed({"memory": 1})
    hog = state(node_info("hog", memory="8Gi"), cpu=5, memory=85)
    cool = state(node_info("cool", memory="8Gi"), cpu=80, memory=20)
    assert policy.score(EMPTY, hog).score < policy.score(EMPTY, cool).score
    assert "cpu" not in policy.score(EMPTY, hog).why


def test_pods_only_weights_score_free_pod_slots():
    policy = LeastUsed({"pods": 1})
    full = state(node_info(pods="110"), 10, 10, pod_count=99)
    empty = state(node_info(pods="110"), 90, 90, pod_count=9)
    assert policy.score(EMPTY, full).score == (110 - 100) * 100 // 110
    assert policy.score(EMPTY, empty).score == (110 - 10) * 100 // 110


def test_least_used_without_node_size_uses_percentages():
    assert LeastUsed().score(EMPTY, state(None, 30, 50)).score == 60


def test_least_used_over_capacity_scores_below_0_by_how_far_and_no_data_lowest():
    info = node_info(cpu="1", memory="1Gi")
    cpu = LeastUsed({"cpu": 1})  # the pod counts at 250m: 25 points of this node
    assert cpu.score(EMPTY, state(info, 150, 10)).score == -75
    assert cpu.score(EMPTY, state(info, 75, 10)).score == 0
    assert least_used(1000, 2000) == least_used(1000, 5000) == -MAX_SCORE  # twice and more
    # no data at all: below every measured node, even one far over capacity
    no_data = LeastUsed({"pods": 1}).score(EMPTY, state(info, 1, 1)).score  # no pod count
    assert no_data < cpu.score(EMPTY, state(info, 199, 10)).score
    assert no_data < 0


def test_a_node_further_over_capacity_loses_to_one_less_over_whatever_its_free_memory():
    """150 % CPU with 20 % memory used against 110 % with 30 %: both over on CPU. Scored 0
    over capacity, as Koordinator's leastUsedScore, the free memory decided and the node
    further over won (0 + 78 against 0 + 68, the pod's 250m and 200 MiB on them)."""
    info = node_info(cpu="4", memory="8Gi")
    far = state(info, 150.0, 20.0)
    near = state(msgspec.structs.replace(info, name="near"), 110.0, 30.0)
    for policy in (LeastUsed(), LeastUsed(dominant_weight=0)):
        assert policy.score(EMPTY, near).score > policy.score(EMPTY, far).score
        ranked = prioritize(EMPTY, [far, near], policy)
        assert best(ranked).node == "near"
        assert ranked[1].priority > ranked[0].priority


def test_a_node_the_pod_takes_over_capacity_loses_to_any_it_fits_whatever_else_is_free():
    """A pod counted at 2.2 cores (a 2600m limit x 0.85): on a 2-core node with its memory
    nearly free it takes CPU to 118 %; on a busy 8-core node it fits at 98 % CPU and 71 %
    memory. In the mean of free shares the small node won (-18 and 90: 36, against 15);
    over capacity is throttling or OOM kills, so no free memory makes up for it."""
    shape = {"cpu": "2600m", "memory": "256Mi"}
    p = pod_facts(pod(container(shape, shape)))
    small = state(node_info("small", cpu="2", memory="4Gi"), 7.0, 5.0)
    big = state(node_info("big", cpu="8", memory="16Gi"), 70.0, 70.0)
    assert (LeastUsed().score(p, small).score, LeastUsed().score(p, big).score) == (-18, 15)
    for policy in (LeastUsed(), LeastUsed(dominant_weight=2)):
        ranked = prioritize(p, [small, big], policy)
        assert best(ranked).node == "big"
        assert ranked[0].priority == 0 < ranked[1].priority


def test_a_resource_every_node_is_over_on_by_the_request_rule_s_guess_weighs_in_the_mean():
    """strong-weak's pods (benchmarks/scenarios/strong-weak.yaml: 100m / 128 MiB requested,
    500m / 512 MiB limits): the request rule counts 425m and 358 MiB. Late in the stream
    the pods counted since the readings take both nodes over capacity on CPU by that
    guess, the small one less so (141 % against 143 %), and its memory would run at 84 %
    against 62 %. Ranked by how far over, the small node won; with the guessed CPU out of
    the ranking, the big one. A figure measured for the workload keeps the ranking, and
    so do a node the pod fits on and nodes whose readings alone are over capacity."""
    limits = {"cpu": "500m", "memory": "512Mi"}
    guessed = pod_facts(pod(container({"cpu": "100m", "memory": "128Mi"}, limits)))
    assert guessed.guessed == ("cpu", "memory")
    assert (guessed.usage.cpu_millis, guessed.usage.memory_bytes) == (425, 375809638)  # 0.7 x
    big = state(node_info("big", cpu="8", memory="16Gi"), 40.0, 60.0, pending=Usage(7800, 0))
    small = state(node_info("small", cpu="2", memory="4Gi"), 20.0, 75.0, pending=Usage(2000, 0))
    policy = LeastUsed()
    uses = [policy.uses(guessed, n) for n in (big, small)]
    assert [round(u[0][0], 1) for u in uses] == [142.8, 141.2]
    fits = [policy.read_within(n) for n in (big, small)]
    assert fits == [(True, True), (True, True)]
    assert full_by_guess(uses, guessed.guessed, fits.__getitem__) == {"cpu"}
    ranked = prioritize(guessed, [big, small], policy)
    assert best(ranked).node == "big"
    assert "cpu over capacity on every node by the request rule" in best(ranked).detail.why
    measured = msgspec.structs.replace(guessed, guessed=())
    assert full_by_guess(uses, measured.guessed, fits.__getitem__) == frozenset()
    assert best(prioritize(measured, [big, small], policy)).node == "small"
    # a node the pod fits on: over capacity ranks below it again, guessed or not
    roomy = state(node_info("roomy", cpu="2", memory="4Gi"), 40.0, 90.0)
    nodes = [big, small, roomy]
    uses = [policy.uses(guessed, n) for n in nodes]
    assert full_by_guess(uses, guessed.guessed, lambda i: policy.read_within(nodes[i])) == set()
    assert best(prioritize(guessed, nodes, policy)).node == "roomy"
    # read over capacity, nothing counted since: over by what was measured
    big_read = state(node_info("big", cpu="8", memory="16Gi"), 143.0, 60.0)
    small_read = state(node_info("small", cpu="2", memory="4Gi"), 120.0, 75.0)
    nodes = [big_read, small_read]
    assert [policy.read_within(n) for n in nodes] == [(False, True), (False, True)]
    assert best(prioritize(guessed, nodes, policy)).node == "small"


def test_extender_priority_mapping():
    assert [to_extender_priority(s) for s in (0, 4, 5, 44, 45, 95, 100, 150, -3)] == [
        0,
        0,
        1,
        4,
        5,
        10,
        10,
        10,
        0,
    ]


def test_make_policy_validates_arguments():
    assert make_policy("least-used", {"resources": {"memory": 1}}).weights == {"memory": 1.0}
    assert make_policy("target-load-packing", {"targetUtilization": 0}).target_utilization == 40
    lvrb = make_policy("load-variation-risk-balancing", {"safeVarianceMargin": -2})
    assert lvrb.safe_variance_margin == 1.0
    with pytest.raises(PolicyError, match="unknown policy 'nope'"):
        make_policy("nope")
    with pytest.raises(PolicyError, match="unknown resource"):
        make_policy("least-used", {"resources": {"gpu": 1}})
    with pytest.raises(PolicyError, match="must be a number"):
        make_policy("target-load-packing", {"targetUtilization": "high"})
    with pytest.raises(PolicyError, match="unknown policy_args"):
        make_policy("target-load-packing", {"targetUtilisation": 50})


def test_tlp_args_change_prediction():
    p = pod_facts(pod(container({"cpu": "1"})), tlp=TLPArgs(requests_multiplier=2.0))
    assert p.tlp_cpu_millis == 2000
    assert GI == 2**30


def test_least_used_unexplained_score_equals_explained_score():
    import random

    rng = random.Random(3)
    for weights in (
        {"cpu": 1, "memory": 1, "dominant": 2},
        {"memory": 1},
        {"pods": 1},
        {"cpu": 2, "memory": 1, "pods": 3},
    ):
        dominant = weights.pop("dominant", 0)
        policy = LeastUsed(weights, dominant_weight=dominant)
        nodes = []
        for i in range(300):
            info = (
                None
                if i % 7 == 0
                else node_info(
                    f"n{i}",
                    cpu=str(rng.choice([1, 2, 4, 96])),
                    memory=rng.choice(["1Gi", "8Gi", "512Gi"]),
                    pods=rng.choice(["0", "10", "110"]),
                )
            )
            nodes.append(
                state(
                    info,
                    rng.choice([None, rng.uniform(0, 120)]),
                    rng.choice([None, rng.uniform(0, 120)]),
                    pending=Usage(rng.uniform(0, 5000), rng.uniform(0, 4 * GI)),
                    pending_pods=rng.randrange(5),
                    pod_count=rng.choice([None, rng.randrange(120)]),
                )
            )
        p = pod_facts(pod(container({"cpu": f"{rng.randrange(1, 4000)}m", "memory": "300Mi"})))
        quick = [policy.score(p, n, False).score for n in nodes]
        assert quick == [policy.score(p, n).score for n in nodes]


def test_dominant_resource_weight_sinks_a_node_short_of_one_resource():
    info = node_info(cpu="4", memory="8Gi")
    hog = state(info, 10, 80)
    plain, drf = LeastUsed(), LeastUsed(dominant_weight=1)
    # an empty pod is estimated at 250m / 200Mi: cpu 83, memory 17
    assert plain.score(EMPTY, hog).score == (83 + 17) // 2
    assert drf.score(EMPTY, hog).score == (83 + 17 + 17) // 3
    assert make_policy("least-used").dominant_weight == 1.0  # our default, see policies/__init__.py
    assert make_policy("least-used", {"dominantResourceWeight": 0}).dominant_weight == 0.0
    with pytest.raises(PolicyError, match="unknown policy_args"):
        make_policy("least-used", {"dominant": 1})


# -- spreading among the near-best -----------------------------------------------------


def test_near_best_judges_a_sole_holder_over_the_set_on_every_node_not_the_candidates():
    # a mini PC (score 40) holds 2 of a set of 4; a small node (12, held down by the raise
    # rule) holds none; the two nodes holding the other 2 were filtered out. Among the
    # candidates the mini PC looks like the only holder; it is not, and stays the best.
    assert near_best([40, 12], [2, 0], total=4) == [40, 12]
    # all the set's pods there: it comes just below the best other node, as before
    assert near_best([40, 12], [2, 0], total=2) == [11, 12]
    assert near_best([40, 12], [2, 0]) == [11, 12]  # total unknown: the candidates' sum
    # the other node has no room for the pod (it would end over the room bounds): the set
    # stays together rather than spread onto it; with room, it goes there as above
    assert near_best([40, 12], [2, 0], total=2, room=[True, False]) == [40, 12]
    assert near_best([40, 12], [2, 0], total=2, room=[True, True]) == [11, 12]
    assert near_best([40, 12, 30], [2, 0, 0], total=2, room=[True, False, True]) == [29, 12, 30]


def test_near_best_lowers_only_near_best_nodes_holding_more_and_never_past_the_band():
    # a and b within 5 of the best (80); a holds 2 more of the set than b: down to the floor
    assert near_best([80, 78, 60], [3, 1, 0]) == [75, 78, 60]
    # one more: 5 points down, at most to the floor
    assert near_best([80, 79, 40], [2, 1, 9]) == [75, 79, 40]
    # a node outside the band is not lifted, nor passed by a lowered one
    assert near_best([80, 70, 60], [4, 1, 0]) == [80, 70, 60]
    # but a node holding every pod of the set comes just below the best other node ...
    assert near_best([80, 70, 60], [4, 0, 0]) == [69, 70, 60]
    # ... that has data and room (0 or below: full, over capacity, or unmeasured)
    assert near_best([80, 0], [2, 0]) == [80, 0]
    assert near_best([80], [2]) == [80]
    # the fewest within the band decides, not the fewest anywhere
    assert near_best([80, 77, 10], [2, 2, 0]) == [80, 77, 10]
    # nothing of the set anywhere, or the band off: unchanged
    assert near_best([80, 79], [0, 0]) == [80, 79]
    assert near_best([80, 79], [3, 0], band=0) == [80, 79]
    # never below 0
    assert near_best([3, 2, 1], [5, 0, 1]) == [0, 2, 0]
    # a node over capacity (below 0) in the band stays where it is, not lifted to 0
    assert near_best([3, -1, 2], [0, 4, 1]) == [3, -1, 0]
    assert spread_score(-20, 3, 4, 1.0) == -20 and spread_score(40, 2, 4, 1.0) == 20


def test_two_replicas_on_near_equal_nodes_go_to_two_nodes():
    """b is 3 points of CPU busier than a: least-used alone scores a higher for both
    replicas (a's first one moves it by 1 point); among the near-best, the second goes to
    the node holding none."""
    facts = pod_facts(pod(container(requests={"cpu": "100m", "memory": "128Mi"})))
    nodes = [state(node_info("a"), 20.0, 20.0), state(node_info("b"), 23.0, 20.0)]
    second = [msgspec.structs.replace(nodes[0], same_owner=1, owner_pods=1), nodes[1]]
    alone = LeastUsed(spread_band=0)
    assert best(prioritize(facts, nodes, alone)).node == "a"
    assert best(prioritize(facts, second, alone)).node == "a"  # both on a
    assert best(prioritize(facts, nodes, LeastUsed())).node == "a"
    ranked = prioritize(facts, second, LeastUsed())
    assert best(ranked).node == "b"
    assert prioritize(facts, [], LeastUsed()) == []  # no candidates: nothing to rank
    assert "spread: 1 of its set here" in ranked[0].detail.why


def test_hottest_raises_counts_only_what_goes_above_the_hottest_before_placement():
    # (after, before) per resource; the hottest before placement: CPU 70, memory 60
    uses = [((80.0, 70.0), (40.0, 30.0)), ((75.0, 50.0), (65.0, 60.0)), (None, (20.0, 10.0))]
    memory = (60 / 70) ** HOTTEST_LEVEL_POWER  # a point of memory, the cooler resource
    # per resource, and again what goes above 70, the hottest level of all
    assert hottest_raises(uses, overall=0.0) == [10.0, 5.0 + 5.0 * memory, 0.0]
    assert hottest_raises(uses, overall=1.0) == [20.0, 5.0 + 5.0 * memory + 5.0, 0.0]
    assert hottest_raises(uses) == hottest_raises(uses, overall=OVERALL_WEIGHT)
    # memory raised to 68, above its own hottest (60) but not above CPU's 70: once
    assert hottest_raises([((50.0, 50.0), (68.0, 60.0)), ((70.0, 70.0), (60.0, 60.0))]) == [
        8.0 * memory,
        0.0,
    ]
    assert hottest_raises([]) == []


def test_a_raise_of_the_hottest_level_of_all_outweighs_one_of_a_cooler_resource(monkeypatch):
    """The one-shot hog scenario's 29th pod, as the lab's decision records and the simulator
    (``python tests/extender/steady_sim.py 1 11 --one-shot hog --classes``) showed it: two
    nodes at 62 % CPU and 34 % memory, the hog's at 12.5 % CPU and 75 % memory; the pod,
    170m / 179 MiB by the request rule, raises the two's CPU to 66.25 % and the hog's memory
    to 77.2. Counted per resource only (``OVERALL_WEIGHT`` 0), the hog's node took it; it
    is the only placement that makes the cluster's hottest node hotter. At the shipped
    dominantResourceWeight (1); at 0 the mean alone prefers the hog's node by 4 points
    (52 against 48), more than the term at 1 takes off it (3)."""
    p = pod_facts(pod(container({"cpu": "200m", "memory": "256Mi"})))
    nodes = [
        state(node_info("a"), 62.0, 33.75),
        state(node_info("b"), 62.0, 33.75),
        state(node_info("hog"), 12.5, 75.0),
    ]
    policy = LeastUsed(dominant_weight=1)
    assert best(prioritize(p, nodes, policy)).node in ("a", "b")
    monkeypatch.setattr(least_used_module, "OVERALL_WEIGHT", 0.0)
    assert best(prioritize(p, nodes, policy)).node == "hog"


def test_level_weights_count_a_cooler_resource_s_points_for_less():
    assert level_weights([62.0, 77.0], 2.0) == [(62 / 77) ** 2, 1.0]
    assert level_weights([62.0, 77.0], 0.0) == [1.0, 1.0]  # off: one currency
    assert level_weights([0.0, 0.0]) == [1.0, 1.0]  # nothing in use yet
    assert level_weights([]) == []


def test_the_term_does_not_send_pods_beside_a_memory_hog_to_keep_cpu_cool():
    """A decision of the one-shot hog scenario's kind (docs/history/oneshot-cf91784/): two nodes at
    62 % CPU, a node whose memory a process nobody requested holds at 77 %. The pod raises the
    hottest CPU by 4.3 points on a node of the two, the hog's memory by 2.2 on the hog.
    Summed as one currency the hog's node lost fewer points and took the pod."""
    p = pod_facts(pod(container({"cpu": "200m", "memory": "256Mi"})))
    nodes = [
        state(node_info("a"), 62.0, 30.0),
        state(node_info("b"), 62.0, 35.0),
        state(node_info("hog"), 21.0, 77.0),
    ]
    for policy in (LeastUsed(), LeastUsed(dominant_weight=1)):
        assert best(prioritize(p, nodes, policy)).node == "a"


def test_a_raise_counts_beyond_the_least_any_measured_node_makes():
    assert beyond_least([10.0, 5.0, 0.0]) == [10.0, 5.0, 0.0]  # a node raises nothing
    assert beyond_least([4.0, 1.0, 1.5]) == [3.0, 0.0, 0.5]
    # a node without data (no raise) does not set the least
    assert beyond_least([0.0, 2.0, 3.0], [False, True, True]) == [0.0, 0.0, 1.0]
    assert beyond_least([]) == []


def test_a_raise_of_raised_points_or_more_keeps_the_score_at_the_ceiling():
    assert less_for_raising(60, RAISED_POINTS - 0.1) == int(60 - (RAISED_POINTS - 0.1) * 2)
    assert less_for_raising(60, RAISED_POINTS) == RAISED_CEILING
    assert less_for_raising(15, 8.0) == HOTTEST_FLOOR  # below the ceiling: the floor's rule
    assert less_for_raising(-5, 8.0) == -5  # over capacity: as it was


def test_the_memory_hog_s_node_stays_four_steps_below_the_best(monkeypatch):
    """steady-hog's decision (docs/history/placement-54659f3/placement/prediction.md): once
    a reading shows the hog, its node holds few pods, so kube-scheduler's own scores (requests, the
    workload's spread) favour it by more than two priority steps. The pod raises its
    memory, the hottest, by 6 points beyond what the others raise; lowered by the weight
    alone it stays a step below the best; at ``RAISED_CEILING`` alone (20, priority 2) two
    steps, and kube-scheduler bound a pod there in every run at 54659f3; ``RAISED_GAP``
    below the best (44) it answers 0, four steps."""
    from loadwise.extender.policies import least_used

    p = pod_facts(pod(container({"cpu": "150m", "memory": "512Mi"}, {"memory": "512Mi"})))
    nodes = [
        state(node_info("sh-1"), 40.0, 66.0),
        state(node_info("sh-2"), 39.0, 63.0),
        state(node_info("sh-3"), 38.0, 63.0),
        state(node_info("sh-4"), 2.0, 75.0),
    ]

    def steps() -> tuple[int, int]:
        ranked = {r.node: r.priority for r in prioritize(p, nodes, LeastUsed(dominant_weight=1))}
        return max(ranked.values()), ranked["sh-4"]

    assert steps() == (4, 0)
    monkeypatch.setattr(least_used, "RAISED_GAP", 0)
    assert steps() == (4, 2)
    monkeypatch.setattr(least_used, "RAISED_POINTS", 0.0)
    top, hog = steps()
    assert top - hog == 1


def test_the_ceiling_keeps_a_raising_node_raised_gap_below_the_best_of_the_rest():
    assert raised_ceiling([]) == RAISED_CEILING  # nothing to keep below
    assert raised_ceiling([90, 40]) == RAISED_CEILING  # the best far above: the ceiling
    assert raised_ceiling([44, 30]) == 44 - RAISED_GAP
    assert raised_ceiling([30, -101]) == 1  # above every node over capacity or without data
    # the held node is lowered last, below the rest as lowered; a small raise is not held
    got = lower_for_raising([80, 90, 60], {0: 10.0, 2: 1.0})
    assert got == {0: RAISED_CEILING, 2: 58}
    got = lower_for_raising([70, 44, 50], {0: 10.0, 2: 2.0})
    assert got == {0: 46 - RAISED_GAP, 2: 46}
    assert lower_for_raising([70, 44], {0: 10.0}, 0.0) == {}  # the term off


def test_less_for_raising_keeps_a_node_that_fits_above_every_node_over_capacity():
    assert less_for_raising(60, 0.0) == 60
    assert less_for_raising(60, 2.0, 3.0) == 54
    assert less_for_raising(60, 2.5) == 60 - 2.5 * HOTTEST_WEIGHT
    assert less_for_raising(60, 30.0, 3.0) == HOTTEST_FLOOR  # never below min(score, 10)
    assert less_for_raising(6, 30.0, 3.0) == 6
    assert less_for_raising(-20, 30.0, 3.0) == -20  # over capacity: ordered as it was
    assert less_for_raising(60, 30.0, 0.0) == 60  # the term off


def test_free_memory_does_not_buy_a_placement_that_raises_the_hottest_cpu():
    """A cluster hot on CPU, cool on memory. ``busy`` holds the hottest CPU (70 %) and
    little memory; ``roomy`` has CPU to spare and its memory half used. The mean of free
    shares prefers ``busy`` (its free memory outweighs the CPU it lacks), which takes the
    hottest node to 81 %; with the term the pod goes where no node gets hotter."""
    p = pod_facts(pod(container({"cpu": "500m", "memory": "256Mi"})))
    busy = state(node_info("busy"), 70.0, 5.0)
    roomy = state(node_info("roomy"), 45.0, 55.0)
    plain = LeastUsed(hottest_weight=0)
    assert best(prioritize(p, [busy, roomy], plain)).node == "busy"
    ranked = prioritize(p, [busy, roomy], LeastUsed(), explain=True)
    assert best(ranked).node == "roomy"
    # 10.6 points of CPU (425m of 4000m by the request rule), counted again as the hottest
    # level of all (OVERALL_WEIGHT), less roomy's 1.4 of memory at its level weight
    raised = 10.625 * (1 + OVERALL_WEIGHT) - 2.1875 * (55 / 70) ** HOTTEST_LEVEL_POWER
    note = f"raises the hottest node {raised:.0f} points more than another node would"
    assert note in ranked[0].detail.why


def test_peak_percent_adds_deviations_only_where_the_source_reports_one():
    assert peak_percent(ResourceLoad(40.0, 10.0), 1.0) == 50.0
    assert peak_percent(ResourceLoad(40.0, 10.0), 2.0) == 60.0
    assert peak_percent(ResourceLoad(40.0, 10.0), 0.0) == 40.0
    assert peak_percent(ResourceLoad(40.0), 1.0) == 40.0
    assert peak_percent(ResourceLoad(None, 10.0), 1.0) is None


def _stream(policy: LeastUsed) -> dict[str, int]:
    """The lab's steady-vary at one instant, in the extender's terms (benchmarks/scenarios/
    steady-vary.yaml): four 4-core / 8 GiB nodes, each 37.5 % of memory in use on
    average; on two it swings between 1 and 5 GiB (a deviation of 25 points), on two it
    holds. 24 pods of one shape placed one by one, each counted where it went."""
    p = pod_facts(pod(container({"cpu": "100m", "memory": "512Mi"}, {"memory": "512Mi"})))
    placed = {"calm-1": 0, "calm-2": 0, "bursty-1": 0, "bursty-2": 0}
    for _ in range(24):
        nodes = [
            state(
                node_info(name),
                5.0,
                37.5,
                memory_std=25.0 if name.startswith("bursty") else None,
                pending=Usage(n * p.usage.cpu_millis, n * p.usage.memory_bytes),
            )
            for name, n in placed.items()
        ]
        winner = best(prioritize(p, nodes, policy))
        assert winner is not None
        placed[winner.node] += 1
    return placed


def test_with_the_deviation_swinging_nodes_get_fewer_pods_and_the_peak_stays_lower():
    """Judged by the scenario, not by the scores: the swinging nodes' memory at their peak
    (5 GiB and their pods) against the calm ones' (3 GiB and theirs). The best split of 24
    pods of 358 MiB (the estimate of a 512 MiB limit, x 0.7) puts 2 GiB more on the calm
    ones: peaks of 3 GiB + 17 pods / 2 x 358 MiB, some 6 GiB, on every node. By the mean
    alone the four nodes look alike and get 6 pods each: the swinging ones peak at 7.1 GiB."""
    mib = 1024**2
    estimate = pod_facts(pod(container({"memory": "512Mi"}, {"memory": "512Mi"}))).usage

    def hottest_peak(placed: dict[str, int]) -> float:
        base = {"calm": 3 * 1024 * mib, "bursty": 5 * 1024 * mib}
        return max(base[n.split("-")[0]] + k * estimate.memory_bytes for n, k in placed.items())

    by_mean = _stream(LeastUsed())
    assert sorted(by_mean.values()) == [6, 6, 6, 6]
    by_peak = _stream(LeastUsed(peak_sigmas=1.0))
    assert by_peak["calm-1"] + by_peak["calm-2"] >= 16
    # within one pod of the best split's hottest peak (17 pods on two 3 GiB nodes)
    best_split = 3 * 1024 * mib + 17 / 2 * estimate.memory_bytes
    assert hottest_peak(by_peak) <= best_split + estimate.memory_bytes
    assert hottest_peak(by_mean) > hottest_peak(by_peak) + 2 * estimate.memory_bytes


def test_the_reason_says_when_a_use_was_read_at_its_peak():
    p = pod_facts(pod(container({"cpu": "100m", "memory": "512Mi"})))
    swinging = state(node_info("a"), 10.0, 40.0, memory_std=20.0)
    why = LeastUsed(peak_sigmas=1.0).score(p, swinging, True).why
    assert "memory 64% (at mean + 1 sd)" in why and "cpu 12%," in why
    assert "sd" not in LeastUsed().score(p, swinging, True).why
