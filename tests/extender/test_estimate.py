"""Koordinator's default estimator and Trimaran's PredictUtilisation vectors."""

from extender.estimate import (
    EstimatorArgs,
    TLPArgs,
    estimate_usage,
    go_round,
    pod_requests,
    predict_tlp_cpu,
)

from .helpers import container, pod


def test_go_round_is_half_away_from_zero():
    assert go_round(2.5) == 3 and go_round(3.5) == 4 and go_round(-2.5) == -3
    assert round(2.5) == 2  # why go_round exists


# koordinator default_estimator_test.go, default factors cpu 85 / memory 70
def test_koordinator_request_equals_limit():
    u = estimate_usage(pod(container({"cpu": "4", "memory": "8Gi"}, {"cpu": "4", "memory": "8Gi"})))
    assert (u.cpu_millis, u.memory_bytes) == (3400, 6012954214)


def test_koordinator_limit_above_request_uses_limit():
    u = estimate_usage(pod(container({"cpu": "4", "memory": "8Gi"}, {"cpu": "8", "memory": "8Gi"})))
    assert (u.cpu_millis, u.memory_bytes) == (6800, 6012954214)


def test_koordinator_empty_pod_gets_defaults_unscaled():
    u = estimate_usage(pod(container()))
    assert (u.cpu_millis, u.memory_bytes) == (250, 209715200)


def test_koordinator_estimate_capped_at_limit():
    u = estimate_usage(pod(container({"cpu": "4"}, {"cpu": "4"})), EstimatorArgs(cpu_factor=110))
    assert u.cpu_millis == 4000


def test_koordinator_requests_only_with_80_80():
    u = estimate_usage(
        pod(container({"cpu": "4", "memory": "8Gi"})),
        EstimatorArgs(cpu_factor=80, memory_factor=80),
    )
    assert (u.cpu_millis, u.memory_bytes) == (3200, 6871947674)


def test_tlp_predict_limit_then_request_times_multiplier_then_default():
    p = pod(
        container(limits={"cpu": "1"}),
        container({"cpu": "500m"}, name="b"),
        container(name="c"),
        overhead={"cpu": "100m"},
    )
    assert predict_tlp_cpu(p) == 1000 + 750 + 1000 + 100
    assert predict_tlp_cpu(p, TLPArgs(default_cpu_millis=200, requests_multiplier=2.0)) == (
        1000 + 1000 + 200 + 100
    )


def test_pod_requests_take_init_containers_and_overhead():
    p = pod(
        container({"cpu": "200m"}),
        container({"cpu": "300m"}, name="b"),
        init=[container({"cpu": "1"}, name="init")],
        overhead={"cpu": "50m"},
    )
    assert pod_requests(p, "cpu") == 1000 + 50
