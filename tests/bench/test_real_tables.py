"""docs/placement.md's tables of the runs on real kubelets are the ones the recorded results
give: the burst beside a hog (benchmarks/realplacement.py) and the churn
(benchmarks/realchurn.py), each printed again by the script's ``--table`` from the
results.json beside the report, with the commit the section names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import realchurn, realcount, realplacement

DOCS = Path(__file__).resolve().parents[2] / "docs"
REPORT = DOCS / "placement.md"


def _churn_table(path: Path) -> str:
    """What ``python -m benchmarks.realchurn --table PATH`` prints."""
    return realcount.markdown_table(realchurn.recorded(path), realchurn.columns())


def _section(text: str, heading: str) -> str:
    """From ``heading`` to the next heading of any level: the churn's subsection is not part
    of the burst's section, so each table and commit is looked for in its own text."""
    lines = text[text.index(heading + "\n") :].splitlines(keepends=True)
    end = next((i for i, line in enumerate(lines) if i and line.startswith("#")), len(lines))
    return "".join(lines[:end])


@pytest.mark.parametrize(
    ("heading", "results", "render"),
    [
        (
            "## On real kubelets",
            "realnodes-results.json",
            lambda p: realplacement.table(realplacement.recorded(p)),
        ),
        (
            "#### loadwise again at commit 428fcd9 (the fair-share term)",
            "realnodes-428fcd9-results.json",
            lambda p: realplacement.table(realplacement.recorded(p)),
        ),
        (
            "### Pods that come and go, on workers of different sizes",
            "realchurn-results.json",
            _churn_table,
        ),
        (
            "#### loadwise again at commit b0b7457 (the fair-share term), the same seed",
            "realchurn-b0b7457-results.json",
            _churn_table,
        ),
        (
            "#### loadwise again at commit 38b1233 (raises beyond the least, with a ceiling),"
            " the same seed",
            "realchurn-38b1233-results.json",
            _churn_table,
        ),
        (
            "#### loadwise again at commit d89f439 (a pod counted from its containers' start),"
            " the same seed",
            "realchurn-d89f439-results.json",
            _churn_table,
        ),
        (
            "#### loadwise again at commit 54659f3 (spreading onto CPU up to 85 %), the same seed",
            "realchurn-54659f3-results.json",
            _churn_table,
        ),
        (
            "#### loadwise again at commit 425727a and at commit c6a0558 (the same extender),"
            " the same seed, under load",
            "realchurn-425727a-results.json",
            _churn_table,
        ),
        (
            "#### loadwise again at commit 425727a and at commit c6a0558 (the same extender),"
            " the same seed, under load",
            "realchurn-c6a0558-results.json",
            _churn_table,
        ),
        (
            "#### loadwise again at commit 25eed7c (a raising node four priority steps below the"
            " best), the same seed",
            "realchurn-25eed7c-results.json",
            _churn_table,
        ),
        (
            "#### loadwise again at commit 17ee217 (learned and implied estimates, reading every"
            " 15 s), the same seed, under load",
            "realchurn-17ee217-results.json",
            _churn_table,
        ),
    ],
)
def test_the_real_kubelet_tables_are_the_recorded_runs(heading, results, render) -> None:
    path = DOCS / "placement" / results
    section = _section(REPORT.read_text(), heading)
    table = render(path).strip()
    assert table in section, f"{heading}: the table is not what --table {path} prints"
    commit = json.loads(path.read_text())["commit"]
    assert f"commit {commit[:7]}" in " ".join(section.split()), (heading, commit)


def test_realplacement_prints_its_table_again_from_a_results_file(capsys) -> None:
    path = DOCS / "placement" / "realnodes-results.json"
    runs = realplacement.recorded(path)
    assert {r.contender for r in runs} == {"stock", "loadwise"}
    assert realplacement.main(["--table", str(path)]) == 0
    assert capsys.readouterr().out.strip() == realplacement.table(runs).strip()
