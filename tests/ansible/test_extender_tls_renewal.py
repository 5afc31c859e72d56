"""The renewal window as the one command docs/ansible.md gives for it decides it: a leaf
certificate is re-issued once it expires within ``loadwise_extender_tls_renew_days`` and
kept before, on a run of tasks/tls.yml (the task file, run without hosts)."""

from __future__ import annotations

from pathlib import Path

import yaml

from .test_extender_tls import CERTS, KEYS, _files, _tls

ROOT = Path(__file__).resolve().parents[2]


def test_a_certificate_is_kept_outside_the_window_and_renewed_inside_it(tmp_path: Path) -> None:
    first, _ = _tls(tmp_path, loadwise_extender_tls_valid_days=20)
    assert first.returncode == 0, first.stdout
    issued = _files(tmp_path)
    # 20 days left, a 10-day window: nothing to do
    kept, restarts = _tls(tmp_path, loadwise_extender_tls_renew_days=10)
    assert kept.returncode == 0, kept.stdout
    assert _files(tmp_path) == issued and restarts == 0
    # a 25-day window: both leaves, with new keys; the CA (3650 days) stays
    renewed, restarts = _tls(tmp_path, loadwise_extender_tls_renew_days=25)
    assert renewed.returncode == 0, renewed.stdout
    new = _files(tmp_path)
    changed = [name for name in KEYS + CERTS if new[name] != issued[name]]
    assert changed == ["server.key", "scheduler/client.key", "server.crt", "scheduler/client.crt"]
    assert restarts == 1


def test_the_documented_renewal_command_selects_both_plays() -> None:
    """docs/ansible.md's command: its tags name the extender's play (which runs tls.yml)
    and the scheduler configuration's play (which restarts kube-scheduler on a new
    certificate), and the role's default window is 30 days."""
    doc = (ROOT / "docs/ansible.md").read_text()
    command = "--tags loadwise_extender,loadwise_scheduler_config"
    assert f"ansible-playbook -i INVENTORY loadwise.loadwise.site {command}" in doc
    plays = yaml.safe_load((ROOT / "playbooks/site.yml").read_text())
    tagged = {
        role["role"]: set(role.get("tags", []))
        for play in plays
        for role in play.get("roles", [])
        if isinstance(role, dict)
    }
    assert "loadwise_extender" in tagged["loadwise_extender"]
    assert "loadwise_scheduler_config" in tagged["loadwise_scheduler_config"]
    main = yaml.safe_load((ROOT / "roles/loadwise_extender/tasks/node.yml").read_text())
    assert any("tls.yml" in str(task) for task in main), "node.yml no longer runs tls.yml"
    defaults = yaml.safe_load((ROOT / "roles/loadwise_extender/defaults/main.yml").read_text())
    assert defaults["loadwise_extender_tls_renew_days"] == 30
    specs = yaml.safe_load((ROOT / "roles/loadwise_extender/meta/argument_specs.yml").read_text())
    options = specs["argument_specs"]["main"]["options"]
    assert options["loadwise_extender_tls_renew_days"]["default"] == 30
