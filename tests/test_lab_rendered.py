"""lab/rendered.py renders the descheduler role's own template, as ansible-playbook would."""

from __future__ import annotations

import yaml

from lab import rendered
from lab.rendered import ROLES


def test_the_policy_follows_the_roles_defaults_and_variables():
    defaults = yaml.safe_load((ROLES / "loadwise" / "defaults" / "main.yml").read_text())
    margin = yaml.safe_load((ROLES / "loadwise_descheduler" / "defaults" / "main.yml").read_text())[
        "loadwise_descheduler_margin"
    ]
    policy = rendered.descheduler_policy(36)
    assert policy["kind"] == "DeschedulerPolicy"
    lnu = policy["profiles"][0]["pluginConfig"][1]
    assert lnu["name"] == "LowNodeUtilization"
    target = defaults["loadwise_filter_thresholds"]
    assert lnu["args"]["targetThresholds"] == target
    assert lnu["args"]["thresholds"] == {k: max(v - margin, 1) for k, v in target.items()}
    assert policy["metricsProviders"] == [{"source": "KubernetesMetrics"}]

    tuned = rendered.descheduler_policy(
        36,
        {
            "loadwise_filter_thresholds": {"cpu": 80, "memory": 20},
            "loadwise_descheduler_margin": 25,
        },
    )
    args = tuned["profiles"][0]["pluginConfig"][1]["args"]
    assert args["thresholds"] == {"cpu": 55, "memory": 1}


def test_descheduler_0_32_gets_its_own_metrics_form():
    policy = rendered.descheduler_policy(32)
    assert policy["metricsCollector"] == {"enabled": True}
    assert "metricsProviders" not in policy
