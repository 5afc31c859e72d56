"""Keep the latest snapshot of a source, refreshed in the background.

A failed refresh keeps the previous snapshot (as Trimaran does); it simply ages.
Age is measured from the end of the measurement window, so a source that
answers but whose own data stopped moving also goes stale. A stale snapshot is
still *usable* (read as the last known measurement, see ``nodestate``) up to
``max_stale`` seconds old. Nodes whose reading the source's check refused
(``readings``) are logged when that set changes, not on every refresh.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from ..model import LoadSnapshot
from ..readings import describe
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
            # polling for the life of the process. Logged with its traceback.
            log.exception("load source %s crashed", self.source.name)
            self._failed(f"{type(exc).__name__}: {exc}")
            return
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
        self.snapshot = snapshot
        self.last_error = None
        if self._on_success:
            self._on_success(snapshot)

    def _failed(self, message: str) -> None:
        if message != self.last_error:
            log.warning("load source %s: %s", self.source.name, message)
        self.last_error = message
        if self._on_error:
            self._on_error(message)

    async def _run(self) -> None:
        while True:
            await self.refresh_once()
            self._wake.clear()
            try:
                # After a failure, retry sooner than the normal interval.
                wait = self.interval if self.last_error is None else min(self.interval, 5.0)
                await asyncio.wait_for(self._wake.wait(), timeout=wait)
            except asyncio.TimeoutError:
                pass

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
