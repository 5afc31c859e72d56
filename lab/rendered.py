"""What the Ansible roles render, for the lab's harness: the same template, the same defaults.

The placement benchmark and the descheduler's end-to-end test run the upstream descheduler
with the policy `roles/loadwise_descheduler` installs. Rather than a copy of that policy that
could drift from the role, this renders the role's own template with its defaults (Jinja2
and Ansible's own filter functions, as ansible-playbook would) and reads the policy out of the
ConfigMap it writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2
import yaml

__all__ = ["descheduler_policy"]

ROLES = Path(__file__).resolve().parents[1] / "roles"


def _defaults(*roles: str) -> dict[str, Any]:
    """The roles' defaults, and the argument-spec defaults of variables several roles share
    but none sets in its defaults (loadwise_image_registry: the roles read it with
    `| default(...)`, which plain Jinja's strict undefined does not reach inside filters)."""
    merged: dict[str, Any] = {}
    for role in roles:
        merged.update(yaml.safe_load((ROLES / role / "defaults" / "main.yml").read_text()))
        specs = yaml.safe_load((ROLES / role / "meta" / "argument_specs.yml").read_text())
        for entry in (specs.get("argument_specs") or {}).values():
            for name, option in (entry.get("options") or {}).items():
                if name not in merged and "default" in option:
                    merged[name] = option["default"]
    return merged


def _environment() -> jinja2.Environment:
    # ansible-core ships no type information
    from ansible.plugins.filter.core import FilterModule as Core  # type: ignore[import-untyped]
    from ansible.plugins.filter.mathstuff import FilterModule as Math  # type: ignore[import-untyped]

    env = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)  # noqa: S701 - YAML, not HTML
    env.filters.update(Core().filters())
    env.filters.update(Math().filters())
    return env


def descheduler_policy(
    minor: int = 36, overrides: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The DeschedulerPolicy roles/loadwise_descheduler renders for Kubernetes 1.`minor`, at
    the roles' defaults updated with `overrides` (role variables)."""
    values = _defaults("loadwise", "loadwise_descheduler")
    values.update(overrides or {})
    values.update(
        ansible_play_hosts=["node"], hostvars={"node": {"loadwise_preflight_minor": minor}}
    )
    template = ROLES / "loadwise_descheduler" / "templates" / "descheduler.yaml.j2"
    text = _environment().from_string(template.read_text()).render(values)
    for doc in yaml.safe_load_all(text):
        if doc and doc.get("kind") == "ConfigMap":
            policy: dict[str, Any] = yaml.safe_load(doc["data"]["policy.yaml"])
            return policy
    raise ValueError(f"{template} rendered no ConfigMap")
