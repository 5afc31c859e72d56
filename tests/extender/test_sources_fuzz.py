"""Property-based tests of every load source's decoder (hypothesis).

A metrics source is untrusted: over arbitrary bytes, arbitrary JSON and documents of the
right shape carrying hostile values (NaN, infinities, negatives, 1e308, garbage text,
wrong types, timestamps far in the future), each decoder

- returns, or raises SourceError (its documented error) and nothing else;
- returns only nodes whose every figure is None or a finite percentage in 0..100, a
  ``window_end`` no later than the fetch, and each refused node in ``invalid`` (not
  in ``nodes``) with one of the documented reasons;
- keeps every well-formed node it was given with its value (one bad node never
  costs the others their reading).

Settings (``FUZZ``: bounded examples, derandomized under CI) and the JSON strategies
are test_fuzz's.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from hypothesis import event, example, given
from hypothesis import strategies as st

from loadwise.extender.model import InvalidReading, LoadSnapshot, NodeInfo, NodeLoad, ResourceLoad
from loadwise.extender.readings import (
    CLOCK_SKEW_SECONDS,
    FUTURE,
    REASONS,
    SATURATED,
    SLACK,
    validated,
)
from loadwise.extender.sources import (
    LoadFileSource,
    SourceError,
    parse_node_metrics,
    parse_vectors,
    parse_watcher,
)

from .test_fuzz import FUZZ, any_json, quantity

FETCHED = 1_800_000_000.0
NAMES = ["a", "b", "c", "", "node-\n1"]

# Numbers as hostile sources send them: the usual range, its edges, the jitter just
# outside it, non-finite values and absurd magnitudes.
hostile_float = st.one_of(
    st.floats(min_value=-2 * SLACK, max_value=100 + 2 * SLACK),
    st.floats(min_value=SATURATED - 1, max_value=SATURATED + 1),
    st.sampled_from([0.0, 100.0, -SLACK, 100 + SLACK, SATURATED, 1e308, -1e308, 5e-324]),
    st.floats(),  # NaN and the infinities included
)


def assert_checked(snap: LoadSnapshot, fetched_at: float) -> None:
    """What every decoder's answer must be, whatever it was given."""
    assert math.isfinite(snap.window_end) and snap.window_end <= fetched_at
    assert not snap.nodes.keys() & snap.invalid.keys()
    assert snap.measured_at.keys() <= snap.nodes.keys()
    assert all(math.isfinite(t) and t <= fetched_at for t in snap.measured_at.values())
    for load in snap.nodes.values():
        for resource in (load.cpu, load.memory):
            # a use may be over capacity (up to SATURATED); a standard deviation may not
            for figure, high in ((resource.avg, SATURATED), (resource.std, 100.0)):
                assert figure is None or (math.isfinite(figure) and 0 <= figure <= high), load
    for reading in snap.invalid.values():
        assert reading.reason in REASONS and reading.detail
    event(f"{len(snap.invalid)} refused" if snap.invalid else "none refused")


# -- load-watcher ----------------------------------------------------------------------


def _metric_json(kind: str, operator: str, value: Any) -> dict[str, Any]:
    return {"type": kind, "operator": operator, "value": value}


watcher_metric = st.builds(
    _metric_json,
    st.sampled_from(["CPU", "Memory", "cpu", "Disk"]),
    st.sampled_from(["AVG", "STD", "Latest", "", "MAX"]),
    hostile_float | st.integers(-(2**70), 2**70) | st.text(max_size=4) | st.none(),
)
watcher_node = st.one_of(
    st.fixed_dictionaries({"metrics": st.lists(watcher_metric, max_size=5)}),
    any_json,
)
timestamp = st.integers(-(2**64), 2**65) | st.floats() | st.none()
watcher_doc = st.fixed_dictionaries(
    {
        "data": st.fixed_dictionaries(
            {"NodeMetricsMap": st.dictionaries(st.sampled_from(NAMES), watcher_node, max_size=4)}
        )
    },
    optional={
        "timestamp": timestamp,
        "window": st.fixed_dictionaries({}, optional={"end": timestamp, "start": timestamp}),
        "source": st.text(max_size=5),
    },
)


def _watcher_bytes(doc: Any) -> bytes:
    # json.dumps writes NaN/Infinity literally, which is not JSON: the decoder must
    # refuse such a document as a whole (SourceError), never crash on it
    return json.dumps(doc).encode()


watcher_bodies = st.one_of(
    watcher_doc.map(_watcher_bytes),
    # numbers no float64 holds, in one node's entry
    watcher_doc.map(lambda d: _watcher_bytes(d).replace(b'"value": 0.0', b'"value": 1e400')),
    any_json.map(_watcher_bytes),
    st.binary(max_size=200),
)


@FUZZ
@given(body=watcher_bodies)
# a node of the wrong shape first, then a token that is not JSON: the per-node pass
# must refuse the document (SourceError), not raise msgspec's DecodeError
@example(body=b'{"data": {"NodeMetricsMap": {"a": null, "b": {"v": Infinity}}}}')
def test_watcher_decoder_refuses_bad_nodes_alone(body: bytes) -> None:
    try:
        snap = parse_watcher(body, fetched_at=FETCHED)
    except SourceError:
        event("SourceError")
        return
    assert_checked(snap, FETCHED)


@FUZZ
@given(
    good=st.floats(0, 100),
    bad=st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([1e400, -1e400]),
    resource=st.sampled_from(["CPU", "Memory"]),
)
def test_watcher_good_node_keeps_its_value_beside_any_bad_one(
    good: float, bad: float, resource: str
) -> None:
    nodes = {
        "good": {"metrics": [_metric_json("CPU", "AVG", good)]},
        "bad": {"metrics": [_metric_json(resource, "AVG", "BAD")]},
    }
    # 1e400 (beyond float64) is valid JSON that json.dumps cannot write: spliced in
    token = repr(bad) if math.isfinite(bad) else ("1e400" if bad > 0 else "-1e400")
    body = json.dumps({"window": {"end": 1}, "data": {"NodeMetricsMap": nodes}})
    snap = parse_watcher(body.replace('"BAD"', token).encode(), fetched_at=FETCHED)
    assert_checked(snap, FETCHED)
    assert snap.nodes["good"].cpu.avg == good
    if -SLACK <= bad <= SATURATED:  # jitter clamped; a use over capacity, up to SATURATED, kept
        kept = snap.nodes["bad"].cpu if resource == "CPU" else snap.nodes["bad"].memory
        assert kept.avg == (bad if bad > 100 + SLACK else min(max(bad, 0.0), 100.0))
    else:
        assert "bad" not in snap.nodes
        want = "malformed" if math.isinf(bad) else "negative" if bad < 0 else "over_capacity"
        assert snap.invalid["bad"].reason == want


# -- Prometheus ----------------------------------------------------------------------


def _float_text(value: float) -> str:
    """A float as Prometheus' HTTP API writes a sample value (strconv 'g', NaN, +Inf)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


sample_text = st.one_of(
    hostile_float.map(lambda v: _float_text(v / 100)),
    st.sampled_from(["NaN", "+Inf", "-Inf", "1e400", "-1e400", "abc", "", "0x10", " 0.5 "]),
    st.text(max_size=6),
)
sample = st.fixed_dictionaries(
    {
        "metric": st.fixed_dictionaries({}, optional={"instance": st.sampled_from(NAMES)}),
        "value": st.tuples(st.floats(allow_nan=False) | st.integers(-(2**60), 2**60), sample_text),
    }
)
prometheus_doc = st.fixed_dictionaries(
    {
        "status": st.sampled_from(["success", "success", "error"]),
        "data": st.fixed_dictionaries(
            {
                "resultType": st.sampled_from(["vector", "vector", "matrix"]),
                "result": st.lists(sample | any_json, max_size=5),
            }
        ),
    }
)
prometheus_bodies = st.one_of(
    prometheus_doc.map(lambda d: json.dumps(d).encode()),
    any_json.map(lambda d: json.dumps(d).encode()),
    st.binary(max_size=200),
)


@FUZZ
@given(cpu=prometheus_bodies, memory=prometheus_bodies)
@example(cpu=b'{"status": "success", "data": {"result": [7, NaN]}}', memory=b"{}")
def test_prometheus_decoder_refuses_bad_nodes_alone(cpu: bytes, memory: bytes) -> None:
    try:
        snap = parse_vectors(cpu, memory, "instance", fetched_at=FETCHED)
    except SourceError:
        event("SourceError")
        return
    assert_checked(snap, FETCHED)


def _vector(values: dict[str, str], at: float = FETCHED - 10) -> bytes:
    result = [{"metric": {"instance": n}, "value": [at, v]} for n, v in values.items()]
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})


@FUZZ
@given(good=st.floats(0, 1), bad=sample_text, at=st.floats(1, 2 * FETCHED))
def test_prometheus_good_node_keeps_its_value_beside_any_bad_one(
    good: float, bad: str, at: float
) -> None:
    cpu = _vector({"good": repr(good), "bad": bad}, at)
    memory = _vector({"good": "0.5", "bad": "0.5"}, at)
    snap = parse_vectors(cpu.encode(), memory.encode(), "instance", fetched_at=FETCHED)
    assert_checked(snap, FETCHED)
    assert ("bad" in snap.nodes) != ("bad" in snap.invalid)
    if at > FETCHED + CLOCK_SKEW_SECONDS:  # dated beyond clock skew: refused, not fresh
        assert snap.invalid["good"].reason == FUTURE
        return
    assert snap.nodes["good"].cpu.avg == good * 100
    assert snap.window_end == min(at, FETCHED)  # a sample time within the skew is clamped
    assert snap.measured_at["good"] == min(at, FETCHED)


# -- metrics-server -----------------------------------------------------------------

infos = {
    "a": NodeInfo("a", cpu_capacity_millis=4000, memory_capacity_bytes=8 * 2**30),
    "b": NodeInfo("b", cpu_capacity_millis=1, memory_capacity_bytes=1),
    "c": NodeInfo("c"),  # capacity unknown (0): no percentage can be formed
}
node_metrics = st.fixed_dictionaries(
    {"metadata": st.fixed_dictionaries({"name": st.sampled_from(NAMES)})},
    optional={
        "timestamp": st.sampled_from(["2026-11-22T10:00:00Z", "2999-01-01T00:00:00Z", "x", ""]),
        "usage": st.dictionaries(st.sampled_from(["cpu", "memory", "x"]), quantity, max_size=3),
    },
)
metrics_bodies = st.one_of(
    st.fixed_dictionaries({"items": st.lists(node_metrics | any_json, max_size=4)}).map(
        lambda d: json.dumps(d).encode()
    ),
    any_json.map(lambda d: json.dumps(d).encode()),
    st.binary(max_size=200),
)


@FUZZ
@given(body=metrics_bodies)
@example(body=b'{"items": [7, NaN]}')
def test_metrics_server_decoder_refuses_bad_nodes_alone(body: bytes) -> None:
    try:
        snap = parse_node_metrics(body, infos, fetched_at=FETCHED)
    except SourceError:
        event("SourceError")
        return
    assert_checked(snap, FETCHED)
    assert snap.nodes.keys() | snap.invalid.keys() <= infos.keys()


@FUZZ
@given(usage=quantity)
def test_metrics_server_good_node_keeps_its_value_beside_any_bad_one(usage: Any) -> None:
    items = [
        {"metadata": {"name": "a"}, "usage": {"cpu": "1", "memory": "2Gi"}},
        {"metadata": {"name": "b"}, "usage": {"cpu": usage}},
    ]
    snap = parse_node_metrics(json.dumps({"items": items}).encode(), infos, fetched_at=FETCHED)
    assert_checked(snap, FETCHED)
    assert snap.nodes["a"] == NodeLoad(ResourceLoad(25.0), ResourceLoad(25.0))
    assert ("b" in snap.nodes) != ("b" in snap.invalid)


# -- the file source -----------------------------------------------------------------


@FUZZ
@given(body=watcher_bodies, ahead=st.floats(0, 10 * 365 * 86400))
def test_load_file_never_dates_its_data_after_the_read(body: bytes, ahead: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "load.json"
        path.write_bytes(body)
        later = time.time() + ahead
        os.utime(path, (later, later))  # touched with a clock ahead of ours
        try:
            snap = LoadFileSource(path).read()
        except SourceError:
            event("SourceError")
            return
        assert_checked(snap, snap.fetched_at)
        assert snap.fetched_at <= time.time()


# -- the check itself, on any snapshot a source might build ----------------------------

figure = hostile_float | st.none()
resource_load = st.builds(ResourceLoad, figure, figure)
node_load = st.builds(NodeLoad, resource_load, resource_load)


@FUZZ
@given(
    nodes=st.dictionaries(st.sampled_from(NAMES), node_load, max_size=5),
    refused=st.dictionaries(
        st.sampled_from(NAMES),
        st.builds(InvalidReading, st.sampled_from(REASONS), st.just("decoder said so")),
        max_size=2,
    ),
    window_end=hostile_float | st.floats(0, 2 * FETCHED),
    measured_at=st.dictionaries(
        st.sampled_from(NAMES), hostile_float | st.floats(0, 2 * FETCHED), max_size=5
    ),
)
def test_validated_partitions_the_nodes_and_is_idempotent(
    nodes: dict[str, NodeLoad],
    refused: dict[str, InvalidReading],
    window_end: float,
    measured_at: dict[str, float],
) -> None:
    raw = LoadSnapshot("s", window_end, FETCHED, nodes, invalid=refused, measured_at=measured_at)
    snap = validated(raw)
    assert_checked(snap, FETCHED)
    assert snap.nodes.keys() | snap.invalid.keys() == nodes.keys() | refused.keys()
    assert all(snap.invalid[name] == reading for name, reading in refused.items())
    assert validated(snap) is snap
