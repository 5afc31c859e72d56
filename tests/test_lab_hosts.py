"""`lab down` removes only the host containers its own lab run made.

Host containers have fixed names (loadwise-lab-kubeadm, loadwise-lab-k3s), so removing by
name would remove another run's: a CI run's k3s stand-in was removed that way by a lab
stopped in another network namespace. A fake podman on PATH records what it is asked.
"""

from __future__ import annotations

from pathlib import Path

from lab import hosts
from tests.ansible.fakes import path_with


def test_destroy_own_removes_the_recorded_ids_only(tmp_path: Path, monkeypatch) -> None:
    calls = tmp_path / "calls"
    env = path_with(tmp_path / "bin", {"podman": f'echo "$@" >> {calls}'})
    monkeypatch.setenv("PATH", env["PATH"])
    run = tmp_path / "run"
    (run / "hosts").mkdir(parents=True)
    (run / "hosts" / "loadwise-lab-k3s").write_text("c0ffee\n")
    hosts.destroy_own(run)
    assert calls.read_text().split() == ["rm", "--force", "--ignore", "--time", "10", "c0ffee"]
    assert not any((run / "hosts").iterdir())  # recorded once, removed once
    calls.unlink()
    hosts.destroy_own(run)  # nothing recorded: nothing asked
    hosts.destroy_own(tmp_path / "never-ran")
    assert not calls.exists()


def test_lab_down_asks_for_the_runs_own_hosts(tmp_path: Path, monkeypatch) -> None:
    from lab import cli

    asked: list[Path] = []
    monkeypatch.setattr(cli, "destroy_own", asked.append)

    class _Lab:
        run = tmp_path

        def down(self) -> list[str]:
            return []

    assert cli.cmd_down(_Lab(), None) == 0  # type: ignore[arg-type]
    assert asked == [tmp_path]
