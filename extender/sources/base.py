from __future__ import annotations

from typing import Protocol

from ..exceptions import SourceError
from ..model import LoadSnapshot

__all__ = ["LoadSource", "SourceError"]


class LoadSource(Protocol):
    """``fetch`` answers a snapshot its decoder passed through ``readings.validated``
    (every figure in 0..100, refused nodes in ``invalid``), or raises SourceError."""

    name: str

    async def fetch(self) -> LoadSnapshot: ...

    async def close(self) -> None: ...
