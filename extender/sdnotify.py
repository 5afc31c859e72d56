"""systemd's service notification protocol, for a ``Type=notify`` unit with ``WatchdogSec=``.

The service manager puts the address of a datagram socket in ``NOTIFY_SOCKET``: a
file system path, or a name in Linux's abstract socket namespace when it starts with
``@``. Each notification is one datagram of newline-separated ``KEY=VALUE`` lines:
``READY=1`` once serving (``systemctl start`` returns then), ``WATCHDOG=1`` as a
keep-alive, ``STOPPING=1``, ``STATUS=...`` (shown by ``systemctl status``). With
``WatchdogSec=`` the manager sets ``WATCHDOG_USEC`` (and ``WATCHDOG_PID``, the process
meant); a service that sends no ``WATCHDOG=1`` for that long is killed and, with
``Restart=on-failure``, started again. sd_watchdog_enabled(3) advises a keep-alive
every half of ``WATCHDOG_USEC``. sd_notify(3) documents the protocol as stable and
gives a stand-alone reimplementation in its NOTES, which this follows; ``vsock:``
addresses (virtual machines) are not supported.

The keep-alive runs as a task on the event loop, so it stops when the loop stops
making progress: a hung loop is restarted by systemd, a busy one is not.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable, Mapping

from .redact import redact

__all__ = ["Notifier", "keep_alive", "watchdog_interval"]

log = logging.getLogger("loadwise.extender.sdnotify")


class Notifier:
    """Sends notifications to ``address`` (``NOTIFY_SOCKET``); does nothing without one."""

    def __init__(self, address: str | None) -> None:
        self.address = address or None
        self._sock: socket.socket | None = None
        self._failed = False

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Notifier:
        return cls(environ.get("NOTIFY_SOCKET"))

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def notify(self, *assignments: str) -> bool:
        """Send ``KEY=VALUE`` assignments in one datagram; False if it could not be sent
        (logged once until a send succeeds again: a notification is never worth failing
        a request or the process for)."""
        if self.address is None:
            return False
        target = "\0" + self.address[1:] if self.address.startswith("@") else self.address
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
                self._sock.setblocking(False)
            self._sock.sendto("\n".join(assignments).encode(), target)
        except OSError as exc:
            if not self._failed:
                log.warning("cannot notify systemd at %s: %s", self.address, exc)
            self._failed = True
            return False
        self._failed = False
        return True

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def watchdog_interval(environ: Mapping[str, str], pid: int | None = None) -> float | None:
    """Seconds between keep-alives (half of ``WATCHDOG_USEC``), or None when the service
    manager expects none: no ``WATCHDOG_USEC``, or ``WATCHDOG_PID`` names another process
    (sd_watchdog_enabled(3))."""
    usec = environ.get("WATCHDOG_USEC", "")
    if not usec.isdigit() or int(usec) == 0:
        return None
    meant = environ.get("WATCHDOG_PID", "")
    if meant and meant != str(os.getpid() if pid is None else pid):
        return None
    return int(usec) / 2e6


async def keep_alive(notifier: Notifier, interval: float, status: Callable[[], str]) -> None:
    """Send ``WATCHDOG=1`` every ``interval`` seconds until cancelled, with ``STATUS=``
    whenever ``status()`` (one line for ``systemctl status``) has changed. The line is
    masked once more (``redact``): ``systemctl status`` shows it to every user, and the
    readiness text it is made of quotes source errors."""
    shown = ""
    while True:
        line = redact(status().replace("\n", " "))
        if line == shown:
            notifier.notify("WATCHDOG=1")
        elif notifier.notify("WATCHDOG=1", f"STATUS={line}"):
            shown = line
        await asyncio.sleep(interval)
