"""Objects the parsers cannot read: skipped one at a time, and counted per stream.

A list is "everything there is", so one object that makes a parser raise must not fail
the whole list: the dashboard would show "API server unreachable" for as long as that
object lives, and anyone who may create an Event could keep it there. `read_each` parses
a list object by object and sets aside the ones that raise one of
`tui.objects.UNREADABLE`; `SkipLedger` remembers which objects of a stream are skipped
now, so that the count the dashboard shows ("3 objects skipped") drops again when such
an object is deleted, expires or is replaced by a readable version.

A genuine API failure (connection refused, 401, 403) never passes through here: it is
raised by the transport before any object is parsed, and still shows as unreachable.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ..objects import UNREADABLE

__all__ = ["Read", "SkipLedger", "object_key", "read_each", "read_one"]

log = logging.getLogger("loadwise.tui.skipped")

T = TypeVar("T")

UNKEYED = "?"
"""The key of a skipped watched object whose metadata holds neither a uid nor a name."""


def object_key(obj: object) -> str:
    """The object's uid, else `namespace/name`, else "": never raises, whatever `obj` is."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping):
        return ""
    uid = meta.get("uid")
    if isinstance(uid, str) and uid:
        return uid
    namespace, name = meta.get("namespace"), meta.get("name")
    if isinstance(name, str) and name:
        return f"{namespace}/{name}" if isinstance(namespace, str) and namespace else name
    return ""


def _skipped(what: str, key: str, exc: Exception) -> None:
    # The key and the error's type only: the message may quote megabytes of the object.
    log.warning("skipped an unreadable %s (%s): %s", what, key or "no key", type(exc).__name__)


def read_one(
    parse: Callable[[Any], T], raw: Any, *, decode: Callable[[Any], Any] | None = None
) -> tuple[T | None, str, bool]:
    """(parsed, key, readable): `parse(decode(raw))`, or (None, key, False) if it raised
    one of `UNREADABLE`; `key` is `object_key` of the decoded object ("" if undecodable)."""
    obj: Any = None
    try:
        obj = raw if decode is None else decode(raw)
        return parse(obj), object_key(obj), True
    except UNREADABLE as exc:
        key = object_key(obj)
        _skipped("object", key, exc)
        return None, key, False


@dataclass(frozen=True, slots=True)
class Read(Generic[T]):
    """What `read_each` made of a list: the parsed objects (in order, None results
    dropped) and the keys of the skipped ones."""

    parsed: tuple[T, ...]
    skipped: tuple[str, ...] = field(default=())


def read_each(
    parse: Callable[[Any], T | None],
    items: Iterable[Any],
    *,
    decode: Callable[[Any], Any] | None = None,
) -> Read[T]:
    """Parse every item (after `decode`, if given); skip the ones that raise `UNREADABLE`.

    A skipped object without a key is keyed by its position, `#3`, so that two of them
    count twice.
    """
    parsed: list[T] = []
    skipped: list[str] = []
    for index, raw in enumerate(items):
        result, key, readable = read_one(parse, raw, decode=decode)
        if not readable:
            skipped.append(key or f"#{index}")
        elif result is not None:
            parsed.append(result)
    return Read(tuple(parsed), tuple(skipped))


class SkipLedger:
    """The keys of one stream's objects that are skipped now; `count` is what is shown.

    Each method returns True when the count changed, so that the source sends the
    dashboard a change only then. Used by one thread (one stream's reflector).
    """

    def __init__(self) -> None:
        self._keys: set[str] = set()

    @property
    def count(self) -> int:
        return len(self._keys)

    def listed(self, skipped: Iterable[str]) -> bool:
        """A full list (or a metrics poll): exactly these objects are skipped now."""
        before = len(self._keys)
        self._keys = set(skipped)
        return len(self._keys) != before

    def watched(self, key: str, *, readable: bool) -> bool:
        """An object was added or modified: skipped now if unreadable, else no longer."""
        before = len(self._keys)
        if readable:
            self._keys.discard(key)
        else:
            self._keys.add(key or UNKEYED)
        return len(self._keys) != before

    def deleted(self, key: str) -> bool:
        """An object is gone (deleted, or an Event expired): it no longer counts."""
        before = len(self._keys)
        self._keys.discard(key or UNKEYED)
        return len(self._keys) != before
