"""Results as an index and one compressed file per run (store.py), read beside the old
single results.json."""

from __future__ import annotations

import json

import pytest

from benchmarks.placement import store
from benchmarks.placement.__main__ import main
from benchmarks.placement.exceptions import PlacementError
from benchmarks.placement.runner import RunResult


def run(contender: str, seed: int, at: str = "2026-11-28T05:00:00Z") -> RunResult:
    return RunResult(
        "hog",
        contender,
        bindings={"web-0001": "hog-a"},
        bound_at={"web-0001": 1.5},
        created={"web-0001": 1.0},
        seed=seed,
        repeat=0,
        ran_at=at,
        commit="a" * 40,
        clean=True,
    )


def old_index(path, runs):
    path.write_text(
        json.dumps({"started": "t", "notes": ["n"], "results": [r.to_json() for r in runs]})
    )


def test_an_old_results_json_loads_as_before(tmp_path):
    path = tmp_path / "results.json"
    old_index(path, [run("stock", 1)])
    started, notes, runs = store.load(path)
    assert (started, notes) == ("t", ["n"])
    assert [r.to_json() for r in runs] == [run("stock", 1).to_json()]


def test_a_run_appends_its_own_file_and_leaves_the_others_alone(tmp_path):
    path = tmp_path / "results.json"
    idx = store.Index("t", [], [], [])
    store.append(path, idx, run("stock", 1))
    first = tmp_path / idx.runs[0]
    assert idx.runs[0] == "runs/hog/stock-1-0-20261128T050000Z.json.gz"
    before = first.read_bytes()
    mtime = first.stat().st_mtime_ns
    store.append(path, idx, run("loadwise-least-used", 1))
    assert first.read_bytes() == before and first.stat().st_mtime_ns == mtime
    _, _, runs = store.load(path)
    assert [r.contender for r in runs] == ["stock", "loadwise-least-used"]
    assert json.loads(path.read_text())["seeds"] == [1]


def test_two_runs_of_a_pair_in_one_second_keep_both(tmp_path):
    path = tmp_path / "results.json"
    idx = store.Index("t", [], [], [])
    store.append(path, idx, run("stock", 1))
    store.append(path, idx, run("stock", 1))
    assert len(set(idx.runs)) == 2 and len(store.load(path)[2]) == 2


def test_migrate_moves_inline_runs_into_files_and_reads_the_same(tmp_path):
    path = tmp_path / "results.json"
    runs = [run("stock", 1), run("stock", 2, "2026-11-28T06:00:00Z")]
    old_index(path, runs)
    assert store.migrate(path) == 2
    doc = json.loads(path.read_text())
    assert "results" not in doc and len(doc["runs"]) == 2 and doc["seeds"] == [1, 2]
    assert [r.to_json() for r in store.load(path)[2]] == [r.to_json() for r in runs]
    assert store.migrate(path) == 0  # nothing left inline


def test_keep_drops_the_pairs_measured_again_but_not_their_files(tmp_path):
    path = tmp_path / "results.json"
    idx = store.Index("t", [], [], [run("burst-like", 3)])
    store.append(path, idx, run("stock", 1))
    store.append(path, idx, run("trimaran-tlp", 1))
    kept = store.keep(idx, tmp_path, [("hog", "stock")])
    assert [store.read_run(tmp_path / n).contender for n in kept.runs] == ["trimaran-tlp"]
    assert len(kept.inline) == 1  # another pair
    assert (tmp_path / idx.runs[0]).exists()


def test_a_missing_or_broken_run_file_is_named(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"started": "t", "notes": [], "runs": ["runs/x.json.gz"]}))
    with pytest.raises(PlacementError, match="runs/x.json.gz, which does not exist"):
        store.load(path)
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs/x.json.gz").write_text("not gzip")
    with pytest.raises(PlacementError, match="x.json.gz: not a gzip"):
        store.load(path)


def test_the_command_line_renders_from_an_index_of_run_files(tmp_path):
    path = tmp_path / "placement" / "results.json"
    idx = store.Index("t", [], [], [])
    store.append(path, idx, run("stock", 1))
    assert main(["--from-results", str(path), "--out", str(tmp_path)]) == 0
    assert "## hog" in (tmp_path / "placement.md").read_text()


def test_merge_gathers_the_runs_of_labs_run_side_by_side(tmp_path):
    a, b = tmp_path / "a" / "results.json", tmp_path / "b" / "results.json"
    ia, ib = store.Index("10:00", ["lab a"], [], []), store.Index("10:05", ["lab b"], [], [])
    store.append(a, ia, run("stock", 1))
    store.append(b, ib, run("stock", 2))
    store.append(b, ib, run("loadwise-least-used", 2))
    (b.parent / "generated").mkdir()
    (b.parent / "generated" / "gen-2-1.yaml").write_text("name: gen-2-1\n")
    out = tmp_path / "docs" / "results.json"
    assert store.main(["merge", str(out), str(a), str(b), "--note", "merged"]) == 0
    started, notes, runs = store.load(out)
    assert notes == ["merged", "lab a", "lab b"] and started == "10:00 / 10:05"
    assert sorted((r.contender, r.seed) for r in runs) == [
        ("loadwise-least-used", 2),
        ("stock", 1),
        ("stock", 2),
    ]
    assert json.loads(out.read_text())["seeds"] == [1, 2]
    assert (out.parent / "generated" / "gen-2-1.yaml").read_text() == "name: gen-2-1\n"


def test_merge_refuses_one_run_name_with_two_contents(tmp_path):
    a, b = tmp_path / "a" / "results.json", tmp_path / "b" / "results.json"
    ia, ib = store.Index("t", [], [], []), store.Index("t", [], [], [])
    store.append(a, ia, run("stock", 1))
    other = run("stock", 1)
    other.bindings["web-0001"] = "hog-b"
    store.append(b, ib, other)
    with pytest.raises(PlacementError, match="differs between"):
        store.merge(tmp_path / "out" / "results.json", [a, b])


def test_the_command_names_a_bad_index_without_a_traceback(tmp_path, capsys):
    from benchmarks.placement.store import main

    assert main(["--help"]) == 0 and "usage:" in capsys.readouterr().out
    assert main([str(tmp_path / "none.json")]) == 1
    assert "cannot read the results index" in capsys.readouterr().err
    assert main(["merge", str(tmp_path / "out.json"), str(tmp_path / "none.json")]) == 1
    assert "cannot read the results index" in capsys.readouterr().err
