"""The extender's listening sockets: a cap on open connections, and mutual TLS.

aiohttp's own sites listen without a limit on connections, so each ``Listener`` makes
its asyncio server itself, with aiohttp's low-level server (``BaseRunner.server``) as
the protocol factory. A connection beyond ``max_connections`` is closed as soon as it
is accepted, so the caller sees an error at once rather than waiting out its timeout
(kube-scheduler's ``httpTimeout``, 5 s by default) while a full backlog holds it.
With TLS the count is of connections past their handshake, and a handshake must end
within ``HANDSHAKE_SECONDS``.

``close()`` stops accepting and leaves open connections alone, the first step of a
graceful stop (``extender/cli.py``): new connections are refused while the requests
in flight finish.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable

from aiohttp import web

from .config import TLSConfig
from .exceptions import ConfigError
from .throttle import LogThrottle

__all__ = ["HANDSHAKE_SECONDS", "Listener", "tls_context"]

log = logging.getLogger("loadwise.extender.listener")

# As long as a request's header may take (server.HEADER_DEADLINE_SECONDS); asyncio's
# default, 60 s, would let a caller that never completes a handshake hold a socket.
HANDSHAKE_SECONDS = 10.0


def tls_context(tls: TLSConfig) -> ssl.SSLContext:
    """A server context that serves ``cert_file`` and requires a client certificate
    signed by ``client_ca_file`` (only that CA: no system store), TLS 1.2 or later.
    ``ConfigError`` names the file that cannot be used."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.verify_mode = ssl.CERT_REQUIRED
    try:
        ctx.load_cert_chain(tls.cert_file, tls.key_file)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"tls: cannot use cert_file {tls.cert_file} with key_file {tls.key_file}: {exc}"
        ) from None
    try:
        ctx.load_verify_locations(cafile=tls.client_ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"tls: cannot use client_ca_file {tls.client_ca_file}: {exc}") from None
    return ctx


class _Refused(asyncio.Protocol):
    """A connection over the cap: closed as soon as it is made."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.close()


class Listener:
    """Serve ``runner``'s application on ``host:port`` (port 0: any free port)."""

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None = None,
        max_connections: int = 64,
        on_refused: Callable[[], None] | None = None,
        on_accepted: Callable[[], None] | None = None,
    ) -> None:
        self._runner = runner
        self.host = host
        self.port = port
        self._ssl = ssl_context
        self._max = max_connections
        self._on_refused = on_refused
        self._on_accepted = on_accepted
        self._throttle = LogThrottle(60.0)
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self._ssl else 'http'}://{host}:{self.port}"

    def _protocol(self) -> asyncio.BaseProtocol:
        server = self._runner.server
        assert server is not None, "the runner is set up before the listener starts"
        if len(server.connections) < self._max:
            if self._on_accepted is not None:
                self._on_accepted()
            return server()
        if self._on_refused is not None:
            self._on_refused()
        held = self._throttle.allow("refused")
        if held is not None:
            log.warning(
                "%s: %d connections open, the most allowed (max_connections); closing a new one%s",
                self.url,
                self._max,
                f" [{held} more since the last line]" if held else "",
            )
        return _Refused()

    async def start(self) -> None:
        """Listen; raises ``OSError`` when the address cannot be bound."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._protocol,
            self.host,
            self.port,
            ssl=self._ssl,
            ssl_handshake_timeout=HANDSHAKE_SECONDS if self._ssl else None,
            reuse_address=True,
        )
        self.port = self._server.sockets[0].getsockname()[1]

    def close(self) -> None:
        """Stop accepting connections; those open are left to finish."""
        if self._server is not None:
            self._server.close()
