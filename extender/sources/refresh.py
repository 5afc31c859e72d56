"""Keep the latest snapshot of a source, refreshed in the background.

A failed refresh keeps the previous snapshot (as Trimaran does); it simply ages.
Age is measured from the end of the measurement window, so a source that
answers but whose own data stopped moving also goes stale. A stale snapshot is
still *usable* (read as the last known measurement, see ``nodestate``) up to
``max_stale`` seconds old. Nodes whose reading the source's check refused
(``readings``) are logged when that set changes, not on every refresh.

A node's own reading may be older than the snapshot's newest (``measured_at``): once
it is more than ``max_stale`` seconds old it is refused (``readings.expired``), after
each fetch and, between fetches, at the moment it gets that old (the loop wakes then),
so it is never read as the last known measurement longer than the whole snapshot is.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import traceback
from collections.abc import Callable

from ..model import LoadSnapshot
from ..readings import describe, expired, next_expiry
from ..redact import redact
from ..tasks import cancel
from .base import LoadSource, SourceError

__all__ = ["Refresher"]

log = logging.getLogger("loadwise.extender.sources")


class Refresher:
    def __init__(
        self,
        source: LoadSource,
        *,
        interval: float,
        stale_after: float,
        max_stale: float | None = None,
        on_error: Callable[[str], None] | None = None,
        on_success: Callable[[LoadSnapshot], None] | None = None,
    ) -> None:
        self.source = source
        self.interval = interval
        self.stale_after = stale_after
        self.max_stale = stale_after if max_stale is None else max(max_stale, stale_after)
        self.snapshot: LoadSnapshot | None = None
        self.last_error: str | None = None
        self._on_error = on_error
        self._on_success = on_success
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        # The snapshot as this refresher fetched it (and refused nodes of since), and the
        # monotonic time of that fetch: a node's age is counted on the snapshot's own
        # clock (its fetched_at) plus the time since, so a jump of the wall clock between
        # fetches does not age every node at once, and a snapshot set from outside (a
        # test's, on a clock of its own) is left as it is.
        self._mine: LoadSnapshot | None = None
        self._fetched_mono = 0.0

    def age(self, now: float | None = None) -> float | None:
        if self.snapshot is None:
            return None
        return max(0.0, (time.time() if now is None else now) - self.snapshot.window_end)

    def fresh(self, now: float | None = None) -> bool:
        age = self.age(now)
        if age is None:
            return False
        return self.stale_after <= 0 or age <= self.stale_after

    def usable(self, now: float | None = None) -> bool:
        """The snapshot may still be read as the last known measurement."""
        age = self.age(now)
        if age is None:
            return False
        return self.stale_after <= 0 or age <= self.max_stale

    async def refresh_once(self) -> None:
        try:
            snapshot = await self.source.fetch()
        except SourceError as exc:
            self._failed(str(exc))
            return
        except Exception as exc:
            # The refresh task's top level: a source reports what it expects as
            # SourceError; anything else is a bug in it, which must not end the
            # polling for the life of the process. Logged with its traceback, masked
            # like a SourceError's message: an exception's text may quote the URL.
            log.error(
                "load source %s crashed: %s",
                self.source.name,
                redact("".join(traceback.format_exception(exc)).rstrip()),
            )
            self._failed(redact(f"{type(exc).__name__}: {exc}"))
            return
        self._fetched_mono = time.monotonic()
        snapshot = self._expired(snapshot, snapshot.fetched_at)
        if self.last_error is not None:
            log.info("load source %s recovered", self.source.name)
        before = self.snapshot.invalid if self.snapshot is not None else {}
        # by node and reason: a refused figure that changes each time is not news
        if {n: r.reason for n, r in snapshot.invalid.items()} != {
            n: r.reason for n, r in before.items()
        }:
            if snapshot.invalid:
                log.warning("load source %s: %s", self.source.name, describe(snapshot.invalid))
            else:
                log.info("load source %s: every node's reading is valid again", self.source.name)
        self.snapshot = self._mine = snapshot
        self.last_error = None
        if self._on_success:
            self._on_success(snapshot)

    def _expired(self, snapshot: LoadSnapshot, now: float) -> LoadSnapshot:
        """``snapshot`` without the nodes whose own reading is too old at ``now``."""
        if self.stale_after <= 0:
            return snapshot  # never stale: no node either
        return expired(snapshot, now, self.max_stale)

    def _now(self) -> float | None:
        """Now on the held snapshot's clock; None for a snapshot this refresher did not fetch."""
        snapshot = self.snapshot
        if snapshot is None or snapshot is not self._mine:
            return None
        return snapshot.fetched_at + (time.monotonic() - self._fetched_mono)

    def expire(self) -> None:
        """Refuse, in the snapshot held, every node whose reading has got too old."""
        now = self._now()
        if self.snapshot is not None and now is not None:
            self.snapshot = self._mine = self._expired(self.snapshot, now)

    def _until_expiry(self) -> float:
        """Seconds until the next node's reading gets too old (infinity: none will)."""
        now = self._now()
        if self.snapshot is None or now is None or self.stale_after <= 0:
            return math.inf
        return next_expiry(self.snapshot, self.max_stale) - now

    def _failed(self, message: str) -> None:
        if message != self.last_error:
            log.warning("load source %s: %s", self.source.name, message)
        self.last_error = message
        if self._on_error:
            self._on_error(message)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self.refresh_once()
            self._wake.clear()
            # After a failure, retry sooner than the normal interval.
            wait = self.interval if self.last_error is None else min(self.interval, 5.0)
            deadline = loop.time() + wait
            while (left := deadline - loop.time()) > 0:
                # a node reaching max_stale before the next fetch is refused on time
                # (plus 10 ms: woken a hair early, it would not be over the age yet)
                until = max(self._until_expiry() + 0.01, 0.01)
                try:
                    await asyncio.wait_for(self._wake.wait(), timeout=min(left, until))
                    break  # poked: fetch now
                except asyncio.TimeoutError:
                    self.expire()

    def poke(self) -> None:
        """Refresh now instead of at the next interval (e.g. a file changed)."""
        self._wake.set()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"refresh-{self.source.name}")

    async def stop(self) -> None:
        await cancel(self._task)
        self._task = None
        await self.source.close()
