from __future__ import annotations

from typing import Protocol

from ..exceptions import SourceError
from ..model import LoadSnapshot

__all__ = ["LoadSource", "SourceError"]


class LoadSource(Protocol):
    name: str

    async def fetch(self) -> LoadSnapshot: ...

    async def close(self) -> None: ...
