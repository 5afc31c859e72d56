"""At most one log line per key per interval, with the count of lines held back.

A hostile or broken client can send thousands of bad requests a second; each is
answered, but logging each would fill the journal and hide everything else.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

__all__ = ["LogThrottle", "loop_exception_handler"]


class LogThrottle:
    """``allow(key)`` says whether to log now and how many were held back since.

    Keys are expected to be few (a reason word, a node name); the table holds one
    entry per key seen, and is cleared when it grows past ``max_keys`` so that a
    client inventing keys cannot grow it without bound.
    """

    def __init__(
        self,
        interval: float = 60.0,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = 1024,
    ) -> None:
        self.interval = interval
        self._clock = clock
        self._max_keys = max_keys
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def allow(self, key: str) -> int | None:
        """None: hold this line back. Else log it, with the returned count of
        lines held back for ``key`` since the last one logged."""
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self.interval:
            self._held[key] = self._held.get(key, 0) + 1
            return None
        if last is None and len(self._last) >= self._max_keys:
            self._last.clear()
            self._held.clear()
        self._last[key] = now
        return self._held.pop(key, 0)

    def warning(self, logger: logging.Logger, key: str, message: str, *args: object) -> None:
        """``logger.warning(message, *args)`` unless held back for ``key``, ending with how
        many lines were held back since the last one."""
        held = self.allow(key)
        if held is not None:
            more = f" ({held} more times since the last line)" if held else ""
            logger.warning(message + "%s", *args, more)


def loop_exception_handler(
    logger: logging.Logger,
    on_error: Callable[[], None] | None = None,
    *,
    interval: float = 60.0,
) -> Callable[[asyncio.AbstractEventLoop, dict[str, Any]], None]:
    """An event loop exception handler (``loop.set_exception_handler``) that counts each
    report and logs at most one line per message per ``interval``, its traceback
    included. asyncio's default handler logs every report with its traceback: its
    accept loop reports each failed ``accept()``, an SSL transport each fatal error, so a
    caller that provokes them fills the journal (and journald then drops the rest)."""
    throttle = LogThrottle(interval)

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if on_error is not None:
            on_error()
        message = str(context.get("message") or "unhandled exception in the event loop")
        held = throttle.allow(message[:80])
        if held is None:
            return
        exc = context.get("exception")
        logger.error(
            "event loop: %s%s%s",
            message,
            f" ({type(exc).__name__}: {exc})" if exc is not None else "",
            f" [{held} more since the last line]" if held else "",
            exc_info=exc if isinstance(exc, BaseException) else None,
        )

    return handle
