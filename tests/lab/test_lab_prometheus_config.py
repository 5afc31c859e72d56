"""The lab's Prometheus configuration (lab/prometheus.py), for the real kubelets and for kwok's
fake ones, accepted by the real promtool (lab/build's tool, from the same module as the lab's
Prometheus) and scraping each node at its own path under the node's name.

No lab processes: only the build (tests/lab/test_alert_rules.py says why it lives here).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from lab import prometheus
from lab.components import build_binaries

KWOK = {n: ("127.0.0.1:20247", f"/metrics/nodes/{n}") for n in ("calm-001", "bursty-001")}
REAL = {"loadwise-real-w1": ("10.88.0.3:10250", ""), "loadwise-real-w2": ("10.88.0.4:10250", "")}


@pytest.fixture(scope="module")
def promtool() -> str:
    return build_binaries(["promtool"])["promtool"]


@pytest.mark.parametrize(("targets", "token"), [(KWOK, False), (REAL, True)], ids=["kwok", "real"])
def test_promtool_accepts_the_config_and_each_node_has_its_path_and_name(
    promtool: str, tmp_path: Path, targets: dict[str, tuple[str, str]], token: bool
) -> None:
    rules, token_file = tmp_path / "rules.yml", tmp_path / "token"
    rules.write_text(yaml.safe_dump(prometheus.rules(), sort_keys=False))
    token_file.write_text("t")
    cfg = prometheus.config(targets, token_file if token else None, rules)
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    r = subprocess.run(
        [promtool, "check", "config", str(path)], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stdout + r.stderr
    endpoints = ("/metrics/resource", "/metrics/cadvisor")
    for job, endpoint in zip(cfg["scrape_configs"], endpoints, strict=True):
        assert ("authorization" in job) == token
        got = {
            sc["labels"]["node"]: (sc["targets"], sc["labels"]["__metrics_path__"])
            for sc in job["static_configs"]
        }
        assert got == {n: ([addr], prefix + endpoint) for n, (addr, prefix) in targets.items()}
        assert job["relabel_configs"] == [{"source_labels": ["node"], "target_label": "instance"}]
