"""The example alerts (examples/prometheus-rules.yaml and the PrometheusRule
examples/prometheusrule.yaml) checked by the real promtool, built from the same Prometheus
module as the lab's Prometheus (lab/build's tool `promtool`, lab/go-tools/prometheus).

- `promtool check rules` accepts both (the PrometheusRule's `spec` is a rule file);
- `promtool test rules examples/prometheus-rules.test.yaml` shows each alert firing on the
  series that should fire it and silent on the others, against either file;
- the unit tests can fail: without the clause for a counter's first increment, the
  fail-open alert misses the first fail-open, and promtool says so;
- every extender metric the rules read is one the extender exports.

No lab processes: only the build (here, not under tests/extender, because a cold build of
promtool takes minutes).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from lab.components import build_binaries
from loadwise.extender.metrics import Metrics

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RULES = EXAMPLES / "prometheus-rules.yaml"
OPERATOR_RULE = EXAMPLES / "prometheusrule.yaml"
UNIT_TESTS = EXAMPLES / "prometheus-rules.test.yaml"


@pytest.fixture(scope="module")
def promtool() -> str:
    return build_binaries(["promtool"])["promtool"]


def _promtool(promtool: str, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool, *map(str, args)], capture_output=True, text=True, timeout=120)


@pytest.fixture
def operator_rules(tmp_path: Path) -> Path:
    """The PrometheusRule's groups as a rule file, beside a copy of the unit tests."""
    doc = yaml.safe_load(OPERATOR_RULE.read_text())
    (tmp_path / RULES.name).write_text(yaml.safe_dump(doc["spec"], sort_keys=False))
    shutil.copy(UNIT_TESTS, tmp_path / UNIT_TESTS.name)
    return tmp_path


def test_the_prometheusrule_holds_the_same_groups_as_the_rule_file() -> None:
    doc = yaml.safe_load(OPERATOR_RULE.read_text())
    assert (doc["apiVersion"], doc["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    assert doc["spec"] == yaml.safe_load(RULES.read_text())


def test_promtool_accepts_both_files(promtool: str, operator_rules: Path) -> None:
    for rules in (RULES, operator_rules / RULES.name):
        checked = _promtool(promtool, "check", "rules", rules)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert "SUCCESS: 6 rules found" in checked.stdout, checked.stdout


def test_each_alert_fires_and_stays_silent_as_the_unit_tests_say(
    promtool: str, operator_rules: Path
) -> None:
    for tests in (UNIT_TESTS, operator_rules / UNIT_TESTS.name):
        ran = _promtool(promtool, "test", "rules", tests)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert "SUCCESS" in ran.stdout, ran.stdout


def test_the_unit_tests_catch_an_alert_blind_to_the_first_fail_open(
    promtool: str, tmp_path: Path
) -> None:
    groups = yaml.safe_load(RULES.read_text())
    (failing_open,) = [
        r for r in groups["groups"][0]["rules"] if r["alert"] == "LoadwiseExtenderFailingOpen"
    ]
    # only increase(): a series created by its first increment never shows one
    failing_open["expr"] = failing_open["expr"].split("\nor\n")[0]
    (tmp_path / RULES.name).write_text(yaml.safe_dump(groups, sort_keys=False))
    shutil.copy(UNIT_TESTS, tmp_path / UNIT_TESTS.name)
    ran = _promtool(promtool, "test", "rules", tmp_path / UNIT_TESTS.name)
    assert ran.returncode != 0
    report = ran.stdout + ran.stderr
    assert "LoadwiseExtenderFailingOpen" in report and 'instance="cp2:8889"' in report, report


def test_the_rules_read_only_metrics_the_extender_exports() -> None:
    exported = Metrics().render().decode()
    exprs = [r["expr"] for r in yaml.safe_load(RULES.read_text())["groups"][0]["rules"]]
    read = {name for expr in exprs for name in re.findall(r"\bloadwise_extender_\w+", expr)}
    assert read == {
        "loadwise_extender_errors_total",
        "loadwise_extender_load_stale",
        "loadwise_extender_invalid_reading_nodes",
        "loadwise_extender_certificate_expiry_timestamp_seconds",
        "loadwise_extender_pods_bound_total",
        "loadwise_extender_request_duration_seconds_count",
    }
    for name in read:
        histogram = re.fullmatch(r"(\w+)_(count|sum|bucket)", name)
        if histogram and re.search(rf"^# TYPE {histogram[1]} histogram$", exported, re.MULTILINE):
            continue
        assert re.search(rf"^# TYPE {name} (counter|gauge)$", exported, re.MULTILINE), name
