"""Property-based fuzzing of the request path (hypothesis).

Two properties, over arbitrary JSON, arbitrary bytes, ExtenderArgs-shaped documents
with hostile values and byte-level mutations of a valid request:

- the decoder (``decode_args`` and the Pod check) returns or raises WireError or
  QuantityError, and nothing else;
- the real server over loopback answers 200 or a 4xx, always with a JSON body, never
  a 5xx, and never takes its fail-open path (that path is for our bugs: hitting it
  on a request means a bug, even though the scheduler would get a 200).

Each property is bounded (``max_examples``, ``deadline``) so the file runs in well
under 30 s on two cores.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from loadwise.extender.config import load_settings
from loadwise.extender.estimate import check_pod
from loadwise.extender.exceptions import QuantityError, WireError
from loadwise.extender.server import make_app
from loadwise.extender.service import Extender
from loadwise.extender.sources import LoadFileSource
from loadwise.extender.wire import decode_args

from .helpers import container, node_json, pod_json
from .test_sources import WATCHER_METRICS_SERVER

FUZZ = settings(
    max_examples=150,
    deadline=2000,  # ms per example: a loopback round trip on a busy 2-core machine
    suppress_health_check=[HealthCheck.too_slow],
    # CI replays the same examples (a red build names a reproducible input); a local
    # run draws new ones each time, and keeps failures in .hypothesis/ to replay.
    derandomize=os.environ.get("CI") == "true",
)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
any_json = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)

# Quantities as a hostile client would write them: valid ones, garbage, signs,
# huge exponents, numbers instead of strings.
quantity = st.one_of(
    st.sampled_from(
        ["250m", "1", "8Gi", "1e400", "-5", "abc", "", "1e999999999", "0.5", "7E", "1Ei", "+3k"]
    ),
    st.from_regex(r"\A[+-]?[0-9]{0,25}(\.[0-9]{0,5})?([eE][+-]?[0-9]{1,12}|Ki|Mi|Gi|Ei|m|k|E)?\Z"),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    json_scalars,
)
resources = st.fixed_dictionaries(
    {},
    optional={
        "requests": st.dictionaries(st.sampled_from(["cpu", "memory", "pods", "x"]), quantity),
        "limits": st.dictionaries(st.sampled_from(["cpu", "memory", "x"]), quantity),
    },
)
a_container = st.fixed_dictionaries(
    {"name": st.text(max_size=5)},
    optional={
        "resources": resources | json_scalars,
        "restartPolicy": st.sampled_from(["Always", "OnFailure", "", None]),
    },
)
a_pod = st.fixed_dictionaries(
    {},
    optional={
        "metadata": st.fixed_dictionaries({}, optional={"name": st.text(max_size=5)}),
        "spec": st.fixed_dictionaries(
            {},
            optional={
                "containers": st.lists(a_container, max_size=3),
                "initContainers": st.lists(a_container, max_size=3),
                "overhead": st.dictionaries(st.sampled_from(["cpu", "memory"]), quantity),
                "resources": resources,
            },
        ),
    },
)
a_node = st.builds(
    lambda name, cpu, memory, pods: node_json(name, cpu=cpu, memory=memory, pods=pods),
    st.sampled_from(["n1", "n2", "new", ""]),
    quantity,
    quantity,
    quantity,
)
extender_args = st.fixed_dictionaries(
    {"Pod": a_pod | json_scalars},
    optional={
        "NodeNames": st.lists(st.sampled_from(["n1", "n2", "ghost", ""]), max_size=4)
        | json_scalars,
        "Nodes": st.fixed_dictionaries({"items": st.lists(a_node, max_size=3)}) | st.none(),
    },
)

# A usable Pod with hostile Nodes and names: these reach the decisions, where a Node of
# unusable size must be scored as unknown (200), not break the answer for every node.
good_quantity = st.sampled_from(["100m", "1", "64Mi", "0", "2Gi", "1500m"])
good_resources = st.fixed_dictionaries(
    {},
    optional={
        "requests": st.dictionaries(st.sampled_from(["cpu", "memory"]), good_quantity),
        "limits": st.dictionaries(st.sampled_from(["cpu", "memory"]), good_quantity),
    },
)
good_container = st.fixed_dictionaries(
    {"name": st.text(max_size=5)},
    optional={
        "resources": good_resources,
        "restartPolicy": st.sampled_from(["Always", "OnFailure"]),
    },
)
good_pod = st.fixed_dictionaries(
    {
        "spec": st.fixed_dictionaries(
            {"containers": st.lists(good_container, max_size=3)},
            optional={
                "initContainers": st.lists(good_container, max_size=3),
                "overhead": st.dictionaries(st.sampled_from(["cpu", "memory"]), good_quantity),
                "resources": good_resources,
            },
        )
    }
)
decisions = st.one_of(
    st.fixed_dictionaries(
        {"Pod": good_pod, "Nodes": st.fixed_dictionaries({"items": st.lists(a_node, max_size=4)})}
    ),
    st.fixed_dictionaries(
        {"Pod": good_pod, "NodeNames": st.lists(st.text(max_size=6), max_size=6, unique=True)}
    ),
)

VALID = json.dumps(
    {
        "Pod": pod_json(container({"cpu": "100m", "memory": "64Mi"})),
        "Nodes": {"metadata": {}, "items": [node_json("n1"), node_json("n2", cpu="2")]},
        "NodeNames": None,
    }
).encode()


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """The valid request with a few bytes replaced, inserted or deleted."""
    body = bytearray(VALID)
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(body) - 1))
        op = draw(st.sampled_from(["replace", "insert", "delete"]))
        byte = draw(st.integers(0, 255))
        if op == "replace":
            body[at] = byte
        elif op == "insert":
            body.insert(at, byte)
        else:
            del body[at]
    return bytes(body)


bodies = st.one_of(
    decisions.map(lambda doc: json.dumps(doc).encode()),
    any_json.map(lambda doc: json.dumps(doc).encode()),
    st.binary(max_size=300),
    extender_args.map(lambda doc: json.dumps(doc).encode()),
    mutated(),
)


def _decode(body: bytes, raw_nodes: bool) -> None:
    args = decode_args(body, raw_nodes=raw_nodes)
    assert args.pod is not None
    check_pod(args.pod)


@FUZZ
@given(body=bodies, raw_nodes=st.booleans())
def test_decoder_raises_only_wire_or_quantity_errors(body: bytes, raw_nodes: bool) -> None:
    try:
        _decode(body, raw_nodes)
    except (WireError, QuantityError):
        pass


class _Server:
    """The real app on 127.0.0.1 in a thread of its own, so that hypothesis (which
    runs synchronously) can call it with a plain HTTP client."""

    def __init__(self, app: web.Application) -> None:
        self.loop = asyncio.new_event_loop()
        self.runner = web.AppRunner(app, access_log=None)
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self._call(self.runner.setup())
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        self._call(site.start())
        host, port = self.runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=30)

    def close(self) -> None:
        self._call(self.runner.cleanup())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Extender]]:
    load_file = Path(tmp_path_factory.mktemp("fuzz")) / "watcher.json"
    load_file.write_bytes(WATCHER_METRICS_SERVER)
    config = load_settings(
        None, {"source.kind": "file", "source.file": str(load_file), "max_body_bytes": 64 * 1024}
    )
    ext = Extender(config, LoadFileSource(load_file))
    server = _Server(make_app(ext))
    with httpx.Client(base_url=server.url, timeout=10) as client:
        for _ in range(200):  # the first snapshot, so that decisions really run
            if client.get("/readyz").status_code == 200:
                break
            threading.Event().wait(0.02)
        assert client.get("/readyz").status_code == 200
        yield client, ext
    server.close()


@FUZZ
@given(body=bodies, verb=st.sampled_from(["filter", "prioritize"]))
def test_server_answers_200_or_a_json_4xx_and_never_fails_open(
    served: tuple[httpx.Client, Extender], body: bytes, verb: str
) -> None:
    client, ext = served
    r = client.post(f"/scheduler/{verb}", content=body)
    assert r.status_code == 200 or 400 <= r.status_code < 500, (r.status_code, r.text[:300])
    assert r.headers["content-type"].startswith("application/json")
    doc = r.json()
    event(f"HTTP {r.status_code}")
    if r.status_code != 200:
        assert isinstance(doc, dict) and set(doc) == {"Error"} and doc["Error"]
    internal = ext.metrics.errors.labels(verb, "internal")._value.get()
    assert internal == 0, f"fail-open path taken on {body[:200]!r}"
