"""The loadwise_extender role's observe mode and opted-out namespaces reach the extender:
the config file as the role renders it, read by the extender's own loader."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.ansible.test_extender_role import FILE_SOURCE, _render


def test_the_defaults_enforce_and_opt_no_namespace_out(tmp_path: Path) -> None:
    from loadwise.extender.config import load_settings

    dest = _render(tmp_path, *FILE_SOURCE)
    settings = load_settings(dest)
    assert settings.mode == "enforce" and settings.ignore_namespaces == []


def test_observe_mode_and_ignored_namespaces_reach_the_extender(tmp_path: Path) -> None:
    from loadwise.extender.config import load_settings

    chosen = {"loadwise_extender_mode": "observe", "loadwise_extender_ignore_namespaces": ["batch"]}
    dest = _render(tmp_path, *FILE_SOURCE, "-e", json.dumps(chosen))
    written = yaml.safe_load(dest.read_text())
    assert written["mode"] == "observe" and written["ignore_namespaces"] == ["batch"]
    settings = load_settings(dest)
    assert settings.mode == "observe" and settings.ignore_namespaces == ["batch"]
