"""The list+watch loop against a scripted fake client: paging, bookmarks, 410, backoff, stop."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import msgspec
import pytest

from loadwise.extender.kubeapi import KubeError
from loadwise.extender.reflector import Backoff, Reflector


def _obj(name: str, version: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": version}}


def _line(kind: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode()


class Script:
    """A fake API client: each call takes the next scripted answer.

    A list answer is a page dict (or an exception to raise); a watch answer is a list
    of lines, possibly ending in an exception raised mid-stream. When the script runs
    out, ``stop`` is set and the watch ends.
    """

    def __init__(self, stop: threading.Event, answers: list[Any]) -> None:
        self.stop = stop
        self.answers = list(answers)
        self.calls: list[tuple[str, dict[str, str]]] = []

    def _next(self) -> Any:
        if not self.answers:
            self.stop.set()
            return []
        return self.answers.pop(0)

    def get(self, path: str, query: Mapping[str, str], timeout: float = 10.0) -> bytes:
        self.calls.append(("list", dict(query)))
        answer = self._next()
        if isinstance(answer, Exception):
            raise answer
        return json.dumps(answer).encode()

    def watch_lines(
        self, path: str, query: Mapping[str, str], timeout_seconds: int
    ) -> Iterator[bytes]:
        self.calls.append(("watch", dict(query)))
        answer = self._next()
        if isinstance(answer, Exception):
            raise answer
        for item in answer:
            if isinstance(item, Exception):
                raise item
            yield item


class Recorder:
    def __init__(self) -> None:
        self.lists: list[list[str]] = []
        self.events: list[tuple[str, str]] = []
        self.errors: list[tuple[Exception, float]] = []

    def on_list(self, items: list[msgspec.Raw]) -> None:
        self.lists.append([json.loads(bytes(i))["metadata"]["name"] for i in items])

    def on_event(self, kind: str, raw: msgspec.Raw) -> None:
        self.events.append((kind, json.loads(bytes(raw))["metadata"]["name"]))

    def on_error(self, exc: Exception, delay: float) -> None:
        self.errors.append((exc, delay))


class NoWait(threading.Event):
    """A stop event whose waits return at once, recording the delays asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout or 0.0)
        return self.is_set()


def _run(answers: list[Any], **kw: Any) -> tuple[Script, Recorder, NoWait]:
    stop = NoWait()
    client = Script(stop, answers)
    seen = Recorder()
    Reflector(
        client,
        "/api/v1/pods",
        on_list=seen.on_list,
        on_event=seen.on_event,
        on_error=seen.on_error,
        stop=stop,
        **kw,
    ).run()
    return client, seen, stop


def _page(names: list[str], *, version: str = "", token: str = "") -> dict[str, Any]:
    meta = {"resourceVersion": version}
    if token:
        meta["continue"] = token
    return {"metadata": meta, "items": [_obj(n, "1") for n in names]}


def test_list_joins_pages_and_watches_from_the_list_version():
    client, seen, _ = _run(
        [
            _page(["a", "b"], token="t1"),
            _page(["c"], token="t2"),
            _page([], version="42"),
            [_line("ADDED", _obj("d", "43")), _line("DELETED", _obj("a", "44"))],
        ],
        field_selector="spec.nodeName!=",
        page_limit=2,
    )
    assert seen.lists == [["a", "b", "c"]]
    assert seen.events == [("ADDED", "d"), ("DELETED", "a")]
    lists = [q for kind, q in client.calls if kind == "list"]
    assert lists == [
        {"fieldSelector": "spec.nodeName!=", "limit": "2"},
        {"fieldSelector": "spec.nodeName!=", "limit": "2", "continue": "t1"},
        {"fieldSelector": "spec.nodeName!=", "limit": "2", "continue": "t2"},
    ]
    first_watch = next(q for kind, q in client.calls if kind == "watch")
    assert first_watch == {
        "fieldSelector": "spec.nodeName!=",
        "resourceVersion": "42",
        "allowWatchBookmarks": "true",
    }


def test_events_and_bookmarks_advance_the_version_to_resume_from():
    client, seen, _ = _run(
        [
            _page(["a"], version="10"),
            [_line("MODIFIED", _obj("a", "11")), _line("BOOKMARK", _obj("", "20"))],
            [_line("ADDED", _obj("b", "21"))],
        ]
    )
    watches = [q["resourceVersion"] for kind, q in client.calls if kind == "watch"]
    assert watches[:3] == ["10", "20", "21"]
    assert seen.events == [("MODIFIED", "a"), ("ADDED", "b")]  # no bookmark delivered
    assert seen.lists == [["a"]]  # a watch ending normally is resumed, not relisted


@pytest.mark.parametrize(
    "expiry",
    [
        KubeError("GET /api/v1/pods: HTTP 410", 410),
        [_line("ERROR", {"kind": "Status", "code": 410, "message": "too old resource version"})],
        [_line("ERROR", {"kind": "Status", "reason": "Expired", "message": "expired"})],
    ],
    ids=["http-410", "error-event-410", "error-event-expired"],
)
def test_410_lists_again_without_backoff(expiry):
    client, seen, stop = _run([_page(["a"], version="5"), expiry, _page(["a", "b"], version="9")])
    assert seen.lists == [["a"], ["a", "b"]]
    assert seen.errors == []
    assert stop.waits == []
    assert [kind for kind, _ in client.calls][:3] == ["list", "watch", "list"]


def test_other_failures_back_off_report_and_list_again():
    # After a failure the reflector lists again, as client-go's does: a caller that
    # marks its view unsynced on on_error learns from on_list that it is whole again.
    client, seen, stop = _run(
        [
            KubeError("GET /api/v1/pods: HTTP 500", 500),
            OSError("connection refused"),
            _page(["a"], version="7"),
            [_line("ADDED", _obj("b", "8")), OSError("connection reset")],
            _page(["a", "b"], version="9"),
            [_line("ERROR", {"kind": "Status", "code": 500, "message": "etcd down"})],
            _page(["a", "b"], version="10"),
            [b"{not json"],
            _page(["b"], version="11"),
        ]
    )
    kinds = [type(exc).__name__ for exc, _ in seen.errors]
    assert kinds == ["KubeError", "OSError", "OSError", "KubeError", "DecodeError"]
    assert seen.errors[3][0].status == 500  # type: ignore[attr-defined]
    assert [delay for _, delay in seen.errors] == stop.waits
    # 1 s, 2 s; the watch event resets it to 1 s, and then 2 s, 4 s: a list alone does
    # not reset it, so watches that keep failing are not followed by a list a second.
    bases = [1, 2, 1, 2, 4]
    assert all(0.8 * b <= wait <= 1.2 * b for b, wait in zip(bases, stop.waits, strict=True))
    assert seen.lists == [["a"], ["a", "b"], ["a", "b"], ["b"]]
    assert seen.events == [("ADDED", "b")]
    assert [kind for kind, _ in client.calls][:6] == ["list", "list", "list", "watch"] + [
        "list",
        "watch",
    ]
    watches = [q["resourceVersion"] for kind, q in client.calls if kind == "watch"]
    assert watches == ["7", "9", "10", "11"]


def test_backoff_doubles_to_the_cap_with_20_percent_jitter_and_resets():
    backoff = Backoff(initial=1.0, cap=30.0)
    bases = [1, 2, 4, 8, 16, 30, 30]
    for base in bases:
        assert base * 0.8 <= backoff.next() <= base * 1.2
    backoff.reset()
    assert 0.8 <= backoff.next() <= 1.2
    delays = {Backoff().next() for _ in range(50)}
    assert len(delays) > 1  # jittered, not fixed


def test_stop_ends_run_between_events():
    stop = threading.Event()
    seen = Recorder()

    class Client:
        def get(self, path, query, timeout=10.0):
            return json.dumps(_page([], version="1")).encode()

        def watch_lines(self, path, query, timeout_seconds):
            yield _line("ADDED", _obj("a", "2"))
            raise AssertionError("read past stop")

    def on_event(kind: str, raw: msgspec.Raw) -> None:
        seen.on_event(kind, raw)
        stop.set()

    Reflector(Client(), "/x", on_list=seen.on_list, on_event=on_event, stop=stop).run()
    assert seen.events == [("ADDED", "a")]


def test_a_stopped_reflector_does_nothing():
    stop = threading.Event()
    stop.set()
    client = Script(stop, [])
    Reflector(client, "/x", on_list=print, on_event=print, stop=stop).run()
    assert client.calls == []


def test_a_watch_closed_at_once_without_events_backs_off():
    page = _page(["a"], version="3")
    client, seen, stop = _run([page, [], page, [], page, [_line("ADDED", _obj("b", "4"))]])
    assert [str(exc) for exc, _ in seen.errors] == [
        "watch /api/v1/pods: closed at once with no events"
    ] * 2
    assert 0.8 <= stop.waits[0] <= 1.2 and 1.6 <= stop.waits[1] <= 2.4
    assert seen.events == [("ADDED", "b")] and seen.lists == [["a"]] * 3
