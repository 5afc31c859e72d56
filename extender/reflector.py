"""One Kubernetes list+watch loop, the shape of client-go's reflector.

``Reflector.run`` keeps one collection (nodes, pods, Events …) in step with the API
server until its ``stop`` event is set:

1. list the collection in pages (``limit`` / ``continue``) and hand every item, all
   pages joined, to ``on_list``; remember the list's ``resourceVersion``;
2. watch from that version with ``allowWatchBookmarks=true``; hand each ADDED /
   MODIFIED / DELETED object to ``on_event``; every event and every BOOKMARK advances
   the version to resume from;
3. when the server ends the watch (its ``timeoutSeconds``), watch again from the last
   version; when the version is too old (HTTP ``410 Gone`` or a watch ERROR event with
   code 410, see the API concepts page "Efficient detection of changes") list again;
4. on any other failure (a watch closed at once with no events counts as one) call
   ``on_error(exc, delay)``, wait ``delay`` from a capped,
   jittered exponential ``Backoff`` (stop-aware), and list again: the caller cannot
   tell otherwise when its view is whole again. client-go's reflector does the same
   (tools/cache/reflector.go: ``ListAndWatch`` returns on a broken watch and its
   ``Run`` loop starts over with a list). A watch the server ends normally is resumed
   from the last version, with no list.

Objects are passed on as undecoded ``msgspec.Raw`` bytes: each caller decodes only the
fields it needs, with its own types.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Protocol

import msgspec

from .exceptions import KubeError

__all__ = ["Backoff", "ListWatchClient", "Reflector"]

log = logging.getLogger("loadwise.extender.reflector")

GONE = 410
SHORT_WATCH = 1.0  # seconds: a watch ending sooner, with no event, counts as a failure


class Backoff:
    """Capped exponential backoff with jitter: 1 s, 2 s, 4 s … 30 s, each ±20 %.

    The jitter keeps many clients that failed together from retrying together.
    """

    def __init__(self, initial: float = 1.0, cap: float = 30.0) -> None:
        self.initial = initial
        self.cap = cap
        self._current = 0.0

    def next(self) -> float:
        """The delay before the next retry; each call doubles the base, up to ``cap``."""
        self._current = self.initial if not self._current else min(self.cap, self._current * 2)
        return self._current * random.uniform(0.8, 1.2)

    def reset(self) -> None:
        """Start again from ``initial`` (after a success)."""
        self._current = 0.0


class ListWatchClient(Protocol):
    """What a reflector needs from an API client (``extender.kubeapi.KubeAPI`` is one).

    Both methods raise ``KubeError`` (with the HTTP ``.status``) for a non-200 answer and
    may raise ``OSError`` for a broken connection.
    """

    def get(self, path: str, query: Mapping[str, str], timeout: float = 10.0) -> bytes:
        """The body of ``GET path?query``."""
        ...

    def watch_lines(
        self, path: str, query: Mapping[str, str], timeout_seconds: int
    ) -> Iterator[bytes]:
        """The newline-delimited events of ``GET path?query&watch=true&timeoutSeconds=…``.

        The client adds ``watch`` and ``timeoutSeconds``; ``query`` carries
        ``resourceVersion``, ``allowWatchBookmarks`` and any ``fieldSelector``.
        """
        ...


class _ListMeta(msgspec.Struct):
    resourceVersion: str = ""
    continue_: str = msgspec.field(default="", name="continue")


class _Page(msgspec.Struct):
    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)
    items: list[msgspec.Raw] | None = None


class _ObjectMeta(msgspec.Struct):
    resourceVersion: str = ""


class _Object(msgspec.Struct):
    metadata: _ObjectMeta = msgspec.field(default_factory=_ObjectMeta)


class _Status(msgspec.Struct):
    code: int = 0
    reason: str = ""
    message: str = ""


class _Event(msgspec.Struct):
    type: str
    object: msgspec.Raw


_page = msgspec.json.Decoder(_Page)
_object = msgspec.json.Decoder(_Object)
_status = msgspec.json.Decoder(_Status)
_event = msgspec.json.Decoder(_Event)


class _Expired(Exception):
    """The resourceVersion to watch from is too old: list again."""


class Reflector:
    """Keep one collection in step with the API server; see the module docstring."""

    def __init__(
        self,
        client: ListWatchClient,
        path: str,
        *,
        field_selector: str = "",
        on_list: Callable[[list[msgspec.Raw]], None],
        on_event: Callable[[str, msgspec.Raw], None],
        on_error: Callable[[Exception, float], None] | None = None,
        stop: threading.Event,
        page_limit: int = 500,
        watch_timeout: int = 300,
        backoff: Backoff | None = None,
    ) -> None:
        self._client = client
        self._path = path
        self._selector = {"fieldSelector": field_selector} if field_selector else {}
        self._on_list = on_list
        self._on_event = on_event
        self._on_error = on_error
        self._stop = stop
        self._page_limit = page_limit
        self._watch_timeout = watch_timeout
        self._backoff = backoff if backoff is not None else Backoff()
        self._version = ""  # to watch from; empty: list first

    def run(self) -> None:
        """List and watch until ``stop`` is set."""
        while not self._stop.is_set():
            try:
                if not self._version:
                    # No backoff reset here: a server whose every watch fails at once
                    # would otherwise be listed in full every second. An event resets it.
                    self._list()
                self._watch()
            except _Expired:
                log.info("watch of %s expired (410 Gone); listing again", self._path)
                self._version = ""
            except KubeError as exc:
                if exc.status == GONE:
                    log.info("%s answered 410 Gone; listing again", self._path)
                    self._version = ""
                else:
                    self._failed(exc)
            except (OSError, msgspec.DecodeError) as exc:
                self._failed(exc)

    def _failed(self, exc: Exception) -> None:
        self._version = ""  # list again after the wait (step 4)
        delay = self._backoff.next()
        if self._on_error is not None:
            self._on_error(exc, delay)
        else:
            log.warning("list/watch of %s failed: %s; retrying in %.1fs", self._path, exc, delay)
        self._stop.wait(delay)

    def _list(self) -> None:
        """List every page; hand the joined items to ``on_list``; keep the version."""
        items: list[msgspec.Raw] = []
        token = ""
        while True:
            query = dict(self._selector, limit=str(self._page_limit))
            if token:
                query["continue"] = token
            page = _page.decode(self._client.get(self._path, query, timeout=60.0))
            items.extend(page.items or ())
            token = page.metadata.continue_
            if not token:
                self._on_list(items)
                self._version = page.metadata.resourceVersion
                return

    def _watch(self) -> None:
        """Follow one watch, advancing the version to resume from as events arrive."""
        query = dict(self._selector, resourceVersion=self._version, allowWatchBookmarks="true")
        # Spread the reconnections of many watchers, as client-go does.
        timeout = int(self._watch_timeout * random.uniform(1.0, 1.2))
        started, seen = time.monotonic(), False
        for line in self._client.watch_lines(self._path, query, timeout):
            seen = True
            event = _event.decode(line)
            if event.type == "ERROR":
                status = _status.decode(event.object)
                if status.code == GONE or status.reason in ("Expired", "Gone"):
                    raise _Expired()
                raise KubeError(f"watch {self._path}: {status.message}", status.code)
            self._version = _object.decode(event.object).metadata.resourceVersion or self._version
            if event.type != "BOOKMARK":
                self._on_event(event.type, event.object)
            self._backoff.reset()
            if self._stop.is_set():
                break
        if not seen and time.monotonic() - started < SHORT_WATCH and not self._stop.is_set():
            # A server that closes every watch at once would otherwise be asked again
            # in a tight loop; client-go treats such a "very short watch" as a failure.
            raise KubeError(f"watch {self._path}: closed at once with no events")
