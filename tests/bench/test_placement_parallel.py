"""Several labs at once (benchmarks/placement/parallel.py): what each run is told."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.placement import parallel


def test_each_run_is_one_contender_of_one_round_in_its_own_namespace() -> None:
    cmd = parallel.command(parallel.Job(301, "stock"), 2, Path("/w"), ["--scenarios", "steady-mix"])
    assert cmd[:4] == ["ip", "netns", "exec", "lwpar2"]
    assert "LOADWISE_LAB_RUN=/tmp/loadwise-lab-lwpar2" in cmd
    tail = cmd[cmd.index("benchmarks.placement") + 1 :]
    assert tail == [
        "--scenarios", "steady-mix",
        "--contenders", "stock", "--repeats", "1", "--seed", "301",
        "--out", "/w/301-stock", "--workdir", "/w/301-stock/work",
    ]  # fmt: skip


def test_fewer_than_one_lab_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parallel.main(["--labs", "0", "--seeds", "1", "--contenders", "stock", "--out", "x"])
    assert "--labs must be at least 1" in capsys.readouterr().err


def test_the_gathered_report_is_measured_as_the_runs_were_told() -> None:
    passthrough = ["--scenarios", "steady-mix", "--optimum-seconds", "3", "--warmup=60"]
    assert parallel.report_settings(passthrough) == ["--optimum-seconds", "3", "--warmup=60"]
    assert parallel.report_settings(["--generated", "1", "--duration", "600"]) == []
