"""Koordinator's default estimator and Trimaran's PredictUtilisation vectors; pod
requests and limits as Kubernetes computes them."""

import re

import msgspec
import pytest

from loadwise.extender.estimate import (
    EstimatorArgs,
    TLPArgs,
    check_pod,
    estimate_usage,
    go_round,
    pod_facts,
    pod_limits,
    pod_requests,
    predict_tlp_cpu,
)
from loadwise.extender.exceptions import QuantityError
from loadwise.extender.wire import Pod

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


# Pod requests and limits as Kubernetes computes them. The expected numbers are worked
# out by hand from the rule in the Kubernetes docs ("Sidecar containers", resource
# sharing; "Effective Pod requests and limits"): while init container i runs, the pod
# needs its amount plus every sidecar listed before it; afterwards, the app containers
# plus all sidecars; the effective amount is the larger, plus the pod overhead.


def _c(name, requests=None, limits=None, restart=None):
    out = {"name": name, "resources": {}}
    if requests:
        out["resources"]["requests"] = requests
    if limits:
        out["resources"]["limits"] = limits
    if restart:
        out["restartPolicy"] = restart
    return out


def _pod(containers, init=(), resources=None, overhead=None):
    spec = {"containers": list(containers), "initContainers": list(init)}
    if resources is not None:
        spec["resources"] = resources
    if overhead is not None:
        spec["overhead"] = overhead
    return msgspec.convert({"metadata": {"name": "p"}, "spec": spec}, type=Pod)


SIDECAR = "Always"


def test_native_sidecar_adds_to_the_app_containers():
    p = _pod([_c("app", {"cpu": "500m"})], init=[_c("proxy", {"cpu": "200m"}, restart=SIDECAR)])
    assert pod_requests(p, "cpu") == 700


def test_a_regular_init_container_larger_than_the_sum_sets_the_request():
    p = _pod([_c("app", {"cpu": "500m"})], init=[_c("migrate", {"cpu": "2"})])
    assert pod_requests(p, "cpu") == 2000


def test_init_container_after_a_sidecar_runs_beside_it():
    # init: proxy alone 300m, then migrate 1000m + proxy 300m = 1300m; after: 100m + 300m
    p = _pod(
        [_c("app", {"cpu": "100m"})],
        init=[_c("proxy", {"cpu": "300m"}, restart=SIDECAR), _c("migrate", {"cpu": "1"})],
    )
    assert pod_requests(p, "cpu") == 1300


def test_init_container_before_a_sidecar_runs_alone():
    # init: migrate 1000m, then proxy 300m; after: 100m + 300m = 400m
    p = _pod(
        [_c("app", {"cpu": "100m"})],
        init=[_c("migrate", {"cpu": "1"}), _c("proxy", {"cpu": "300m"}, restart=SIDECAR)],
    )
    assert pod_requests(p, "cpu") == 1000


def test_each_resource_is_taken_on_its_own():
    # cpu: init 2 + sidecar 0.5 = 2.5 > 1 + 0.5; memory: 1Gi + 256Mi > init 512Mi + 256Mi
    p = _pod(
        [_c("app", {"cpu": "1", "memory": "1Gi"})],
        init=[
            _c("log", {"cpu": "500m", "memory": "256Mi"}, restart=SIDECAR),
            _c("warm", {"cpu": "2", "memory": "512Mi"}),
        ],
        overhead={"cpu": "100m", "memory": "64Mi"},
    )
    assert pod_requests(p, "cpu") == 2500 + 100
    assert pod_requests(p, "memory") == (1024 + 256 + 64) * 2**20


def test_two_sidecars_accumulate_in_order():
    # init steps: a 100m; b 100m + 200m; job 1000m + 300m = 1300m; after: 50m + 300m
    p = _pod(
        [_c("app", {"cpu": "50m"})],
        init=[
            _c("a", {"cpu": "100m"}, restart=SIDECAR),
            _c("b", {"cpu": "200m"}, restart=SIDECAR),
            _c("job", {"cpu": "1"}),
        ],
    )
    assert pod_requests(p, "cpu") == 1300


def test_pod_level_resources_replace_the_container_sum_per_resource():
    p = _pod(
        [_c("app", {"cpu": "500m", "memory": "1Gi"}), _c("side", {"cpu": "500m"})],
        resources={"requests": {"cpu": "3"}, "limits": {"cpu": "4", "memory": "2Gi"}},
        overhead={"cpu": "100m"},
    )
    assert pod_requests(p, "cpu") == 3000 + 100  # pod-level, plus overhead
    assert pod_requests(p, "memory") == 2**30  # not set at pod level: the containers'
    assert pod_limits(p, "cpu") == 4000 + 100
    assert pod_limits(p, "memory") == 2 * 2**30


def test_overhead_is_added_to_requests_always_and_only_to_limits_that_exist():
    p = _pod([_c("app", {"cpu": "1"}, {"cpu": "2"})], overhead={"cpu": "250m", "memory": "120Mi"})
    assert pod_requests(p, "cpu") == 1250
    assert pod_requests(p, "memory") == 120 * 2**20
    assert pod_limits(p, "cpu") == 2250
    assert pod_limits(p, "memory") == 0  # no memory limit: overhead does not create one


def test_limits_follow_the_same_sidecar_rule():
    p = _pod(
        [_c("app", limits={"memory": "1Gi"})],
        init=[
            _c("proxy", limits={"memory": "512Mi"}, restart=SIDECAR),
            _c("load", limits={"memory": "2Gi"}),
        ],
    )
    assert pod_limits(p, "memory") == (2048 + 512) * 2**20


def test_estimator_sees_the_sidecar():
    # Koordinator's estimator on the pod's request: (1 + 1) cores x 85 %
    p = _pod([_c("app", {"cpu": "1"})], init=[_c("mesh", {"cpu": "1"}, restart=SIDECAR)])
    assert estimate_usage(p).cpu_millis == 1700
    assert pod_facts(p).cpu_request_millis == 2000


@pytest.mark.parametrize(
    ("pod", "message"),
    [
        (
            _pod([_c("app")], init=[_c("a"), _c("b", limits={"memory": "lots"})]),
            'pod.spec.initContainers[1].resources.limits.memory: "lots" is not a quantity',
        ),
        (
            _pod([_c("app")], resources={"requests": {"cpu": "-2"}}),
            'pod.spec.resources.requests.cpu: "-2" is negative',
        ),
        (
            _pod([_c("app")], overhead={"cpu": "1e400"}),
            'pod.spec.overhead.cpu: "1e400" is out of range',
        ),
    ],
)
def test_unusable_amounts_name_the_field(pod, message):
    with pytest.raises(QuantityError, match=re.escape(message)):
        check_pod(pod)
