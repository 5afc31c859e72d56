from __future__ import annotations

from typing import Protocol, TypeVar

import msgspec

from ..exceptions import SourceError
from ..model import LoadSnapshot

__all__ = ["LoadSource", "SourceError", "decode_document"]

T = TypeVar("T")
U = TypeVar("U")


class LoadSource(Protocol):
    """``fetch`` answers a snapshot its decoder passed through ``readings.validated``
    (every figure in 0..100, refused nodes in ``invalid``), or raises SourceError."""

    name: str

    async def fetch(self) -> LoadSnapshot: ...

    async def close(self) -> None: ...


def decode_document(
    body: bytes, strict: msgspec.json.Decoder[T], lenient: msgspec.json.Decoder[U], what: str
) -> T | U:
    """``body`` decoded in one pass by ``strict``; when some part does not fit, by
    ``lenient``: the same shape with each node's entry left as ``msgspec.Raw``, for the
    caller to decode one by one and refuse only the node whose entry does not fit.
    SourceError ``not {what}: ...`` when the body is not JSON or its frame does not fit."""
    try:
        return strict.decode(body)
    except msgspec.ValidationError:
        pass  # the frame does not fit, or only an entry: the lenient pass tells which
    except msgspec.DecodeError as exc:
        raise SourceError(f"not {what}: {exc}") from None
    try:
        return lenient.decode(body)
    except msgspec.DecodeError as exc:  # ValidationError included
        raise SourceError(f"not {what}: {exc}") from None
