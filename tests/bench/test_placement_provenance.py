"""Provenance of placement runs: each result records its commit, tree state,
time and load; old results still load; the report refuses to mix commits unless told to."""

from __future__ import annotations

import json
import re

import pytest

from benchmarks.placement import report
from benchmarks.placement.__main__ import main
from benchmarks.placement.runner import RunResult, provenance, stamp
from benchmarks.placement.scenario import select

A, B = "a" * 40, "b" * 40


def hog(contender: str, commit: str | None, *, clean: bool | None = True) -> RunResult:
    r = RunResult("hog", contender, commit=commit, clean=clean, ran_at="2026-11-26T04:00:00Z")
    for i in range(30):
        r.bindings[f"web-{i + 1:04d}"] = ("hog-a", "hog-b")[i % 2]
        r.created[f"web-{i + 1:04d}"] = i * 0.01
        r.bound_at[f"web-{i + 1:04d}"] = i * 0.01 + 0.05
    r.load_start, r.load_end = [0.5, 0.6, 0.7], [1.5, 1.0, 0.8]
    return r


PROVENANCE_KEYS = ("commit", "clean", "ran_at", "load_start", "load_end")


def test_results_written_before_provenance_load_as_unknown():
    # Runs written before provenance existed (docs/placement/results.json held some until
    # every pair was measured again at e13ff5b): the same JSON without those keys.
    legacy = [
        {k: v for k, v in hog(c, A).to_json().items() if k not in PROVENANCE_KEYS}
        for c in ("stock", "loadwise-least-used")
    ]
    assert set(PROVENANCE_KEYS) <= set(hog("stock", A).to_json())  # what a newer run writes
    old = [RunResult.from_json(json.loads(json.dumps(r))) for r in legacy]
    assert all(r.commit is None and r.clean is None and r.ran_at is None for r in old)
    assert all(r.load_start is None and r.load_end is None for r in old)
    lines = report.provenance_lines(old)
    assert lines == [
        "- commit unknown (recorded before runs kept their commit; they may span commits): "
        f"{len(old)} runs, tree state unknown, time unknown; "
        "load average (1 min) at start unknown, at end unknown"
    ]


def test_a_result_round_trips_through_json_with_its_provenance():
    r = hog("stock", A, clean=False)
    back = RunResult.from_json(json.loads(json.dumps(r.to_json())))
    assert back == r


def test_provenance_of_this_checkout_names_head():
    p = provenance()
    assert p.commit is not None and re.fullmatch(r"[0-9a-f]{40}", p.commit)
    assert p.clean in (True, False)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", p.ran_at)
    r = stamp(RunResult("hog", "stock"), p, [9.0, 9.0, 9.0])
    assert r.commit == p.commit and r.load_start == [9.0, 9.0, 9.0]
    assert r.load_end is not None and len(r.load_end) == 3


def test_the_report_refuses_two_commits_and_names_them(tmp_path):
    (sc,) = select(["hog"])
    mixed = [hog("stock", A), hog("loadwise-least-used", B)]
    with pytest.raises(report.MixedCommitsError, match="aaaaaaa: 1 runs .*bbbbbbb: 1 runs"):
        report.write(tmp_path, [sc], mixed)
    # Unknown (results from before provenance) is a commit of its own.
    with pytest.raises(report.MixedCommitsError, match="unknown"):
        report.check_commits([hog("stock", A), hog("loadwise-least-used", None)])
    md = report.write(tmp_path, [sc], mixed, allow_mixed_commits=True).read_text()
    assert "- commit aaaaaaa: 1 runs, clean tree" in md
    assert "- commit bbbbbbb: 1 runs, clean tree" in md


def test_a_dirty_tree_is_shown(tmp_path):
    (sc,) = select(["hog"])
    runs = [hog("stock", A), hog("loadwise-least-used", A, clean=False)]
    md = report.write(tmp_path, [sc], runs).read_text()
    assert (
        "- commit aaaaaaa: 2 runs, **tree dirty** (uncommitted changes) in 1 of 2 runs, "
        "2026-11-26T04:00:00Z to 2026-11-26T04:00:00Z; load average (1 min) at start 0.5, "
        "at end 1.5" in md
    ), md


def test_the_command_line_refuses_mixed_results_and_accepts_the_flag(tmp_path, capsys):
    doc = {"started": "t", "notes": [], "results": [hog("stock", A).to_json()]}
    doc["results"].append(hog("loadwise-least-used", B).to_json())
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    assert main(["--from-results", str(path), "--out", str(tmp_path)]) == 2
    assert "2 commits (aaaaaaa" in capsys.readouterr().err
    args = ["--from-results", str(path), "--out", str(tmp_path), "--allow-mixed-commits"]
    assert main(args) == 0


def test_append_refuses_results_of_another_commit_before_the_lab_starts(tmp_path, monkeypatch):
    import benchmarks.placement.__main__ as entry

    def no_lab(*_a, **_k):
        raise AssertionError("the lab was started")

    monkeypatch.setattr(entry, "session", no_lab)
    path = tmp_path / "results.json"
    old = hog("stock", A)  # not this checkout's HEAD
    path.write_text(json.dumps({"started": "t", "notes": [], "results": [old.to_json()]}))
    scs = select(["burst"])  # hog's results are kept, burst would be run
    with pytest.raises(report.MixedCommitsError, match="aaaaaaa: 1 runs"):
        entry.measure(scs, ["stock"], path, append=True)
    with pytest.raises(AssertionError, match="the lab was started"):
        entry.measure(scs, ["stock"], path, append=True, allow_mixed_commits=True)
