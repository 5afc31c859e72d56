"""Background task helpers shared by the refresher and the event recorder."""

from __future__ import annotations

import asyncio
import contextlib

__all__ = ["cancel"]


async def cancel(task: asyncio.Task[None] | None) -> None:
    """Cancel ``task`` (if any) and wait until it has finished."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
