"""A file holding a load-watcher ``/watcher`` document: demos, tests, air-gapped debugging.

The file is re-read whenever its modification time or size changes. Its data is
taken as current as of the file's modification time, so an unchanged file goes
stale like any other source (``touch`` it, or set ``stale_after_seconds: 0``). A
modification time in the future counts as the time of the read (``readings``).
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from pathlib import Path

from msgspec.structs import replace

from ..model import LoadSnapshot
from ..readings import validated
from .base import SourceError
from .watcher import parse_watcher

__all__ = ["LoadFileSource"]


class LoadFileSource:
    name = "file"

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._stamp: tuple[int, int] | None = None
        self._snapshot: LoadSnapshot | None = None

    def read(self) -> LoadSnapshot:
        try:
            stat = self.path.stat()
        except OSError as exc:
            raise SourceError(f"load file {self.path}: {exc.strerror}") from None
        stamp = (stat.st_mtime_ns, stat.st_size)
        if self._snapshot is None or stamp != self._stamp:
            try:
                body = self.path.read_bytes()
            except OSError as exc:
                raise SourceError(f"load file {self.path}: {exc.strerror}") from None
            try:
                # read at an infinite time: the document's own window.end is replaced by
                # the file's time below, so a future one must not refuse its nodes here
                parsed = parse_watcher(body, fetched_at=math.inf)
            except SourceError as exc:
                raise SourceError(f"load file {self.path}: {exc}") from None
            self._snapshot = replace(parsed, source=f"file:{self.path.name}")
            self._stamp = stamp
        now = time.time()
        # the file's time, not the document's: a future one counts as now (not refused:
        # the file's owner chose it, and it still ages from the read on)
        return validated(
            replace(self._snapshot, window_end=min(stat.st_mtime, now), fetched_at=now)
        )

    async def fetch(self) -> LoadSnapshot:
        return await asyncio.to_thread(self.read)

    async def close(self) -> None:
        return None
