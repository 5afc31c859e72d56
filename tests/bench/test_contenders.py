"""The placement benchmark's contenders produce configs their real counterparts accept:
one profile per scheduler under the contender's own schedulerName (so a scenario's pods are
bound by that contender alone), client QPS raised, the extender on loopback and configured
as extender/config.py validates it."""

from __future__ import annotations

import json
import re
import socket
import sys
import urllib.request
from ipaddress import ip_address
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from aiohttp.test_utils import TestClient, TestServer

from benchmarks.placement.contenders import (
    CONTENDERS,
    FAIR_TRIMARAN_WEIGHT,
    REPO,
    SCHEDULER_BURST,
    SCHEDULER_QPS,
    Contender,
    ContenderError,
    _build,
    extender_settings,
    extender_weight,
    null_app,
    null_filter,
    null_prioritize,
    scheduler_config,
)
from lab.processes import http_probe, start
from loadwise.extender.config import load_settings
from loadwise.extender.policies import POLICY_NAMES

WATCHER = "http://127.0.0.1:2020"
WANTED = {
    "stock",
    "loadwise-least-used",
    "loadwise-least-used-lw",
    "loadwise-tlp",
    "loadwise-lvrb",
    "trimaran-tlp",
    "trimaran-lvrb",
    "trimaran-tlp-w3",
    "trimaran-tlp-w10",
    "trimaran-lvrb-w3",
    "trimaran-lvrb-w10",
    "null-extender",
    "stock-nobatch",
    "loadwise-prioritize-only",
    "null-prioritize-only",
    "stock+descheduler",
}


def test_the_contenders_the_issue_names():
    assert set(CONTENDERS) == WANTED
    assert all(c.name == name for name, c in CONTENDERS.items())
    assert len({c.scheduler_name for c in CONTENDERS.values()}) == len(CONTENDERS)


@pytest.mark.parametrize("name", sorted(WANTED))
def test_one_profile_under_its_own_scheduler_name(name):
    c = CONTENDERS[name]
    cfg = scheduler_config(c, WATCHER, "/run/scheduler.kubeconfig")
    assert cfg["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert cfg["kind"] == "KubeSchedulerConfiguration"
    [profile] = cfg["profiles"]
    assert profile["schedulerName"] == c.scheduler_name != "default-scheduler"
    cc = cfg["clientConnection"]
    # above the v1 defaults (qps 50, burst 100) that would throttle every contender alike
    assert cc["qps"] == SCHEDULER_QPS > 50
    assert cc["burst"] == SCHEDULER_BURST > 100
    assert cc["kubeconfig"] == "/run/scheduler.kubeconfig"
    assert cfg["leaderElection"] == {"leaderElect": False}


@pytest.mark.parametrize("name", sorted(n for n in WANTED if n.startswith("loadwise-")))
def test_loadwise_contenders_call_their_extender_on_loopback(name):
    c = CONTENDERS[name]
    cfg = scheduler_config(c, WATCHER)
    [ext] = cfg["extenders"]
    url = urlsplit(ext["urlPrefix"])
    assert url.scheme == "http" and ip_address(url.hostname or "").is_loopback
    assert url.path == "/scheduler"
    assert ext.get("filterVerb") == ("filter" if c.filter_verb else None)
    assert ext["prioritizeVerb"] == "prioritize"
    assert ext["weight"] == extender_weight() >= 1
    assert ext["ignorable"] is True and ext["nodeCacheCapable"] is True
    # no plugin changes: stock kube-scheduler plus the extender
    assert set(cfg["profiles"][0]) == {"schedulerName"}

    role = yaml.safe_load((REPO / "roles/loadwise_extender/defaults/main.yml").read_text())
    for source in ("metrics-server", "prometheus"):
        got = extender_settings(c, WATCHER, "/run/admin.kubeconfig", source)
        settings = load_settings(overrides=got)
        assert settings.policy == c.policy and settings.policy in POLICY_NAMES
        # the extender scores nodes over their thresholds lowest exactly when nothing filters
        assert settings.filter.enabled is c.filter_verb
        # where the role points it by default, but for the mean and deviation of a
        # Prometheus-backed load-watcher; the "-lw" contender reads load-watcher always
        if source == "prometheus" or c.watcher_only:
            assert settings.source.kind == "load-watcher" and settings.source.url == WATCHER
        else:
            assert settings.source.kind == role["loadwise_extender_source"] == "metrics-server"
        assert settings.source.refresh_seconds == role["loadwise_extender_refresh_seconds"]
        # the scheduler calls the address the extender listens on
        assert settings.host_port == (url.hostname, url.port)


def test_the_three_loadwise_policies_are_all_covered():
    policies = {c.policy for c in CONTENDERS.values() if c.kind == "loadwise"}
    assert policies == set(POLICY_NAMES)


@pytest.mark.parametrize(
    ("name", "plugin", "weight"),
    [
        ("trimaran-tlp", "TargetLoadPacking", 1),
        ("trimaran-lvrb", "LoadVariationRiskBalancing", 1),
        ("trimaran-tlp-w3", "TargetLoadPacking", 3),
        ("trimaran-lvrb-w10", "LoadVariationRiskBalancing", 10),
    ],
)
def test_trimaran_contenders_enable_one_plugin_reading_load_watcher(name, plugin, weight):
    c = CONTENDERS[name]
    assert c.binary == "trimaran-scheduler"
    cfg = scheduler_config(c, WATCHER)
    assert "extenders" not in cfg
    [profile] = cfg["profiles"]
    assert profile["plugins"]["score"]["enabled"] == [{"name": plugin, "weight": weight}]
    # defaults: only the load-watcher address is set
    assert profile["pluginConfig"] == [{"name": plugin, "args": {"watcherAddress": WATCHER}}]


def test_stock_is_the_lab_scheduler_unchanged():
    c = CONTENDERS["stock"]
    assert c.binary == "kube-scheduler"
    cfg = scheduler_config(c, WATCHER)
    assert "extenders" not in cfg
    assert cfg["profiles"] == [{"schedulerName": "stock"}]


def test_no_extender_config_for_a_contender_without_one():
    with pytest.raises(ContenderError, match="trimaran-tlp has no extender"):
        extender_settings(CONTENDERS["trimaran-tlp"], WATCHER, "")
    with pytest.raises(ContenderError, match="x has no extender"):
        extender_settings(Contender("x", "x", "loadwise"), WATCHER, "")


def test_a_binary_that_cannot_be_built_gives_lab_builds_reason():
    # the real lab/build, which refuses an unknown name before building anything
    with pytest.raises(ContenderError) as exc:
        _build("no-such-scheduler")
    msg = str(exc.value)
    assert msg.startswith("lab/build no-such-scheduler failed:") and "exited 1" in msg
    assert "unknown binary 'no-such-scheduler'" in msg
    assert "trimaran-scheduler" in msg  # lab/build lists the names it knows, tools included


def _args(names: list[str] | None = None, nodes: list[str] | None = None) -> bytes:
    """ExtenderArgs as kube-scheduler sends them: names (nodeCacheCapable) or Node objects."""
    pod = {"metadata": {"name": "p", "namespace": "default", "uid": "u"}, "spec": {}}
    items = None if nodes is None else {"items": [{"metadata": {"name": n}} for n in nodes]}
    return json.dumps({"Pod": pod, "Nodes": items, "NodeNames": names}).encode()


def test_the_null_extender_keeps_every_candidate_and_scores_them_zero():
    assert json.loads(null_filter(_args(["b", "a"]))) == {
        "NodeNames": ["b", "a"],
        "FailedNodes": {},
        "Error": "",
    }
    kept = json.loads(null_filter(_args(nodes=["b", "a"])))
    assert kept["Nodes"]["items"] == [{"metadata": {"name": "b"}}, {"metadata": {"name": "a"}}]
    assert json.loads(null_prioritize(_args(["b", "a"]))) == [
        {"Host": "b", "Score": 0},
        {"Host": "a", "Score": 0},
    ]
    assert json.loads(null_prioritize(_args(nodes=["c"]))) == [{"Host": "c", "Score": 0}]
    assert json.loads(null_prioritize(_args([]))) == []


async def test_the_null_extender_answers_over_http():
    async with TestClient(TestServer(null_app(), host="127.0.0.1")) as client:
        ready = await client.get("/readyz")
        assert ready.status == 200
        got = await client.post("/scheduler/filter", data=_args(["n1", "n2"]))
        assert got.status == 200 and got.content_type == "application/json"
        assert (await got.json())["NodeNames"] == ["n1", "n2"]
        got = await client.post("/scheduler/prioritize", data=_args(["n1", "n2"]))
        assert await got.json() == [{"Host": "n1", "Score": 0}, {"Host": "n2", "Score": 0}]
        assert (await client.post("/scheduler/preempt", data=_args(["n1"]))).status == 404


def test_the_null_extender_runs_as_its_own_process():
    """``python -m benchmarks.placement.contenders --null-extender`` (what Contender.start
    launches), on a free port rather than EXTENDER_PORT, which a benchmark may hold."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    repo = Path(__file__).resolve().parents[2]
    argv = [sys.executable, "-m", "benchmarks.placement.contenders", "--null-extender"]
    with start("the null extender", [*argv, f"127.0.0.1:{port}"], cwd=repo) as proc:
        proc.wait_ready(http_probe(f"http://127.0.0.1:{port}/readyz"), 30, interval=0.2)
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/scheduler/prioritize", data=_args(["x"]), method="POST"
        )
        with urllib.request.urlopen(request, timeout=5) as r:
            assert json.loads(r.read()) == [{"Host": "x", "Score": 0}]


def test_the_null_extender_is_configured_as_loadwise_is():
    null = scheduler_config(CONTENDERS["null-extender"], WATCHER)
    loadwise = scheduler_config(CONTENDERS["loadwise-least-used"], WATCHER)
    assert null["extenders"] == loadwise["extenders"]
    assert null["profiles"] == [{"schedulerName": "null-extender"}]
    assert CONTENDERS["null-extender"].binary == "kube-scheduler"
    with pytest.raises(ContenderError, match="null-extender has no extender"):
        extender_settings(CONTENDERS["null-extender"], WATCHER, "")  # no loadwise config


def test_stock_nobatch_is_stock_with_opportunistic_batching_off():
    c = CONTENDERS["stock-nobatch"]
    assert c.kind == "stock" and c.binary == "kube-scheduler"
    assert c.scheduler_args == ("--feature-gates=OpportunisticBatching=false",)
    assert scheduler_config(c, WATCHER) == {
        **scheduler_config(CONTENDERS["stock"], WATCHER),
        "profiles": [{"schedulerName": "stock-nobatch"}],
    }
    assert CONTENDERS["stock"].scheduler_args == ()


def test_prioritize_only_contenders_differ_from_their_twins_by_the_filter_verb_alone():
    for one, both in (
        ("loadwise-prioritize-only", "loadwise-least-used"),
        ("null-prioritize-only", "null-extender"),
    ):
        a, b = (
            scheduler_config(CONTENDERS[one], WATCHER),
            scheduler_config(CONTENDERS[both], WATCHER),
        )
        assert "filterVerb" not in a["extenders"][0] and b["extenders"][0]["filterVerb"] == "filter"
        del b["extenders"][0]["filterVerb"]
        assert a["extenders"] == b["extenders"]
        assert CONTENDERS[one].policy == CONTENDERS[both].policy


def test_the_fair_trimaran_weight_gives_the_plugin_the_extenders_say():
    # kube-scheduler adds an extender's priority (0..10) x its weight x MaxNodeScore /
    # MaxExtenderPriority (100 / 10); a score plugin adds its score (0..100) x its weight.
    extender_most = 10 * extender_weight() * (100 // 10)
    assert 100 * FAIR_TRIMARAN_WEIGHT == extender_most
    fair = [c for c in CONTENDERS.values() if c.plugin_weight == FAIR_TRIMARAN_WEIGHT]
    assert {c.policy for c in fair} == {"TargetLoadPacking", "LoadVariationRiskBalancing"}


def test_every_scheduler_name_can_name_kubernetes_objects():
    """A pod's spec.schedulerName must be a DNS-1123 subdomain (the API server's pod
    validation), and the lab tests name pods after it; a contender's own name may hold more
    ("stock+descheduler")."""
    label = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
    bad = [c.scheduler_name for c in CONTENDERS.values() if not label.fullmatch(c.scheduler_name)]
    assert not bad, bad
