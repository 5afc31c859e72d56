from __future__ import annotations

from typing import Protocol

from ..model import LoadSnapshot

__all__ = ["LoadSource", "SourceError"]


class SourceError(RuntimeError):
    """The source could not be read or answered something unusable."""


class LoadSource(Protocol):
    name: str

    async def fetch(self) -> LoadSnapshot: ...

    async def close(self) -> None: ...
