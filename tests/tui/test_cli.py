"""`loadwise-tui` turns each error of the tree in `tui.exceptions` into a message and exit code."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadwise.tui.cli import main, parse_args
from loadwise.tui.exceptions import KubeconfigError, RecordedClusterError


def test_missing_demo_directory_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--demo", str(tmp_path / "missing")]) == RecordedClusterError.exit_code == 2
    assert "loadwise-tui: " in capsys.readouterr().err


def test_unreadable_recorded_file_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "nodes.json").write_text("{not json")
    assert main(["--demo", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "cannot read" in err and "nodes.json" in err


def test_missing_kubeconfig_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--kubeconfig", str(tmp_path / "nope")]) == KubeconfigError.exit_code == 2
    assert "cannot load kubeconfig" in capsys.readouterr().err


def test_unknown_context_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: lab\n"
        "contexts: [{name: lab, context: {cluster: lab, user: lab}}]\n"
        "clusters: [{name: lab, cluster: {server: 'https://127.0.0.1:6443'}}]\n"
        "users: [{name: lab, user: {token: t}}]\n"
    )
    assert main(["--kubeconfig", str(kubeconfig), "--context", "elsewhere"]) == 2
    assert "elsewhere" in capsys.readouterr().err


def test_refresh_below_one_second_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_args(["--refresh", "0.5"])
    assert exit_info.value.code == 2
