"""The extender's listening sockets: a cap on open connections, mutual TLS, and an
accept loop that a hostile local process cannot turn into a memory or log storm.

aiohttp's own sites listen without a limit on connections, so each ``Listener`` accepts
its connections itself and hands each to aiohttp's low-level server
(``BaseRunner.server``) once it is ready to be served:

- Every connection is counted from the moment it is accepted, whatever its stage: a
  connection *opening* (accepted, no byte yet; or, with TLS, in its handshake) or
  *served* (handed to aiohttp). At ``max_connections`` served (callers that passed the
  handshake) a new connection is closed at once, so the caller sees an error rather
  than waiting out its timeout (kube-scheduler's ``httpTimeout``, 5 s by default). At
  ``OPENING_PER_SERVED`` x ``max_connections`` opening, a new one makes room by closing
  the oldest one still opening, a silent one first.
  Closing the oldest opening connection rather than the newest is what keeps the
  scheduler served while another local process holds hundreds of connections open: the
  scheduler's own handshake over loopback takes milliseconds, a held one never ends.
- A connection that has not finished opening within ``HANDSHAKE_SECONDS`` is closed.
- The TLS state (CPython's ``SSLProtocol`` allocates a 256 KiB read buffer for each
  connection, asyncio/sslproto.py) is made only when the first byte arrives, so a
  connection that never sends a ClientHello costs a socket and a small task.
- With ``client_names`` the client certificate's identity must be one of them (its
  common name, or a DNS or URI subject alternative name), on top of its CA.
  OpenSSL already requires the clientAuth extended key usage when the certificate has
  any (the server checks a client against the "ssl_client" purpose): such a
  certificate fails the handshake as ``wrong_purpose``.
- Failed handshakes are counted by reason (``HANDSHAKE_REASONS``) and logged, at most
  one line a minute per reason.
- When ``accept()`` fails for want of descriptors or memory (EMFILE, ENFILE, ENOBUFS,
  ENOMEM) the oldest opening connection is closed to free one; with none to close,
  accepting pauses for ``ACCEPT_RETRY_SECONDS`` (asyncio's own accept loop does the
  same, but logs a traceback each time through the loop's exception handler). Either
  way one line a minute is logged.

``close()`` stops accepting and leaves open connections alone, the first step of a
graceful stop (``extender/cli.py``): new connections are refused while the requests
in flight finish.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import ssl
import sys
from collections.abc import Callable, Collection

from aiohttp import web

from .config import TLSConfig
from .exceptions import ConfigError
from .throttle import LogThrottle

if sys.version_info >= (3, 11):
    from asyncio import timeout
else:  # pragma: no cover
    from async_timeout import timeout

__all__ = [
    "ACCEPT_RETRY_SECONDS",
    "HANDSHAKE_REASONS",
    "HANDSHAKE_SECONDS",
    "OPENING_PER_SERVED",
    "Listener",
    "handshake_reason",
    "tls_context",
]

log = logging.getLogger("loadwise.extender.listener")

# From accept to a finished TLS handshake (or, without TLS, to the first byte). A
# scheduler's handshake over loopback or a LAN takes milliseconds, and its whole call
# has 5 s (kube-scheduler's DefaultExtenderTimeout); a connection still opening after
# 3 s is not a scheduler at work. asyncio's default, 60 s, would let a caller that never
# sends a ClientHello hold a socket and, with TLS, 256 KiB.
HANDSHAKE_SECONDS = 3.0
# As asyncio's accept loop (base_events ACCEPT_RETRY_DELAY): out of descriptors, another
# accept right away would fail again.
ACCEPT_RETRY_SECONDS = 1.0
# Connections still opening, per connection served (max_connections): a silent one costs
# a socket and a small task, one in its TLS handshake about 300 KiB (its 256 KiB buffer),
# so 2 x 64 cost at most 40 MB; with the served ones, 3 x 64 descriptors per listener, two
# listeners within the unit's LimitNOFILE of 512. More room than the served connections
# makes a held connection's turn to be evicted come later, and the scheduler's handshake
# (milliseconds) finishes first.
OPENING_PER_SERVED = 2
_OUT_OF_RESOURCES = frozenset((errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM))

# The ``reason`` label of failed handshakes: a fixed set, never text from the peer.
HANDSHAKE_REASONS = (
    "timeout",  # nothing, or not a whole handshake, within HANDSHAKE_SECONDS
    "evicted",  # still opening when a new connection needed its room
    "closed",  # the peer closed or reset the connection while opening
    "not_tls",  # plain HTTP (or anything but TLS) on the TLS port
    "protocol",  # TLS, but a version, cipher or message the server refuses
    "no_certificate",  # no client certificate
    "untrusted",  # a client certificate the client CA did not sign
    "expired",  # a client certificate out of its validity period
    "wrong_purpose",  # an extended key usage without clientAuth
    "name_not_allowed",  # the CA's, but not one of tls.client_names
)

# X509_V_ERR_* codes (openssl/x509_vfy.h) of a failed client-certificate check
_EXPIRED_CODES = frozenset((9, 10))  # CERT_NOT_YET_VALID, CERT_HAS_EXPIRED
_PURPOSE_CODE = 26  # INVALID_PURPOSE
_NOT_TLS = frozenset(("HTTP_REQUEST", "HTTPS_PROXY_REQUEST", "WRONG_VERSION_NUMBER"))


def handshake_reason(exc: BaseException) -> str:
    """The ``HANDSHAKE_REASONS`` word for the exception a server-side handshake ended with."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        if exc.verify_code in _EXPIRED_CODES:
            return "expired"
        if exc.verify_code == _PURPOSE_CODE:
            return "wrong_purpose"
        return "untrusted"
    if isinstance(exc, ssl.SSLError):
        reason = exc.reason or ""
        if reason in _NOT_TLS:
            return "not_tls"
        if reason == "PEER_DID_NOT_RETURN_A_CERTIFICATE":
            return "no_certificate"
        if isinstance(exc, ssl.SSLEOFError | ssl.SSLZeroReturnError):
            return "closed"
        return "protocol"
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return "timeout"
    # ConnectionResetError, BrokenPipeError, ConnectionAbortedError (asyncio's own
    # handshake timeout, which the outer one precedes), an EOF before the handshake
    return "closed"


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


def _names(peercert: object) -> set[str]:
    """The common names and DNS/URI subject alternative names of a verified peer
    certificate, as ``SSLSocket.getpeercert()`` gives them."""
    if not isinstance(peercert, dict):
        return set()
    found: set[str] = set()
    for rdn in peercert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                found.add(value)
    for kind, value in peercert.get("subjectAltName", ()):
        if kind in ("DNS", "URI"):
            found.add(value)
    return found


class _Gate(asyncio.Protocol):
    """The first protocol of a connection that finished opening: checks the client
    certificate's names, then hands the connection to aiohttp's protocol."""

    def __init__(self, listener: Listener) -> None:
        self._listener = listener

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._listener._serve(transport)


class Listener:
    """Serve ``runner``'s application on ``host:port`` (port 0: any free port)."""

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None = None,
        client_names: Collection[str] | None = None,
        max_connections: int = 64,
        handshake_seconds: float = HANDSHAKE_SECONDS,
        on_refused: Callable[[], None] | None = None,
        on_accepted: Callable[[], None] | None = None,
        on_failed: Callable[[str], None] | None = None,
        on_accept_error: Callable[[], None] | None = None,
        log_interval: float = 60.0,
    ) -> None:
        self._runner = runner
        self.host = host
        self.port = port
        self._ssl = ssl_context
        self._client_names = frozenset(client_names) if client_names else None
        self._max = max_connections
        self._handshake_seconds = handshake_seconds
        self._on_refused = on_refused
        self._on_accepted = on_accepted
        self._on_failed = on_failed
        self._on_accept_error = on_accept_error
        self._throttle = LogThrottle(log_interval)
        self._sockets: list[socket.socket] = []
        # oldest first: the socket and the peer's address
        self._opening: dict[asyncio.Task[None], tuple[socket.socket, str]] = {}
        self._evicted: set[asyncio.Task[None]] = set()
        self._silent: set[asyncio.Task[None]] = set()  # no byte received yet
        self._paused: list[asyncio.TimerHandle] = []

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self._ssl else 'http'}://{host}:{self.port}"

    @property
    def opening(self) -> int:
        """Connections accepted and not yet served (no byte yet, or in the handshake)."""
        return len(self._opening)

    @property
    def served(self) -> int:
        """Connections handed to aiohttp and still open."""
        server = self._runner.server
        return len(server.connections) if server is not None else 0

    # -- accepting -------------------------------------------------------------------

    async def start(self) -> None:
        """Listen; raises ``OSError`` when the address cannot be bound."""
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(
            self.host or None, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        port = self.port
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind((address[0], port, *address[2:]))
                sock.listen(128)
                sock.setblocking(False)
            except OSError:
                sock.close()
                self.close()
                raise
            port = sock.getsockname()[1]  # port 0: every address on the first one's port
            self._sockets.append(sock)
            loop.add_reader(sock.fileno(), self._accept, sock)
        self.port = port

    def close(self) -> None:
        """Stop accepting connections; those open are left to finish."""
        loop = asyncio.get_event_loop()
        for handle in self._paused:
            handle.cancel()
        self._paused.clear()
        for sock in self._sockets:
            if sock.fileno() >= 0:
                loop.remove_reader(sock.fileno())
                sock.close()
        self._sockets.clear()

    def _accept(self, sock: socket.socket) -> None:
        for _ in range(128):  # as many as the backlog holds, then let the loop turn
            try:
                conn, peer = sock.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as exc:
                if exc.errno in _OUT_OF_RESOURCES:
                    self._out_of_resources(sock, exc)
                    return
                raise
            self._admit(conn, _peer(peer))

    def _out_of_resources(self, sock: socket.socket, exc: OSError) -> None:
        if self._on_accept_error is not None:
            self._on_accept_error()
        freed = self._evict()
        held = self._throttle.allow("accept")
        if held is not None:
            log.warning(
                "%s: cannot accept a connection: %s; %s%s",
                self.url,
                exc.strerror or exc,
                "closed the oldest connection still opening"
                if freed
                else f"pausing accepting for {ACCEPT_RETRY_SECONDS:g} s",
                f" [{held} more since the last line]" if held else "",
            )
        if freed:
            return
        loop = asyncio.get_running_loop()
        loop.remove_reader(sock.fileno())

        def resume() -> None:
            self._paused.remove(handle)
            if sock.fileno() >= 0:
                loop.add_reader(sock.fileno(), self._accept, sock)

        handle = loop.call_later(ACCEPT_RETRY_SECONDS, resume)
        self._paused.append(handle)

    def _evict(self) -> bool:
        """Close the oldest connection still opening, a silent one (no byte yet) first:
        a scheduler sends its ClientHello at once. False if there is none."""
        for silent_only in (True, False):
            for task in self._opening:
                if task not in self._evicted and (task in self._silent or not silent_only):
                    self._evicted.add(task)
                    task.cancel()
                    return True
        return False

    def _admit(self, conn: socket.socket, peer: str) -> None:
        if self.served >= self._max:
            conn.close()
            self._refused()
            return
        if len(self._opening) - len(self._evicted) >= self._max * OPENING_PER_SERVED:
            self._evict()
        conn.setblocking(False)
        task = asyncio.get_running_loop().create_task(self._open(conn, peer))
        self._opening[task] = (conn, peer)
        self._silent.add(task)
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[None]) -> None:
        conn, peer = self._opening.pop(task)
        evicted = task in self._evicted
        self._evicted.discard(task)
        self._silent.discard(task)
        if task.cancelled():
            # Cancelled before its first step, a task never runs its body: its socket is
            # closed here (a second close is harmless).
            conn.close()
            if evicted:
                self._failed("evicted", peer, None)

    def _refused(self) -> None:
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

    # -- opening ---------------------------------------------------------------------

    async def _open(self, conn: socket.socket, peer: str) -> None:
        """Wait for the first byte, make the TLS handshake, hand the connection over."""
        loop = asyncio.get_running_loop()
        handed = False
        try:
            async with timeout(self._handshake_seconds):
                await _readable(loop, conn)
                task = asyncio.current_task()
                if task is not None:
                    self._silent.discard(task)
                # asyncio's own handshake timeout, later than the one around it, only
                # so that it never is the one that fires (it would log nothing either).
                await loop.connect_accepted_socket(
                    lambda: _Gate(self),
                    conn,
                    ssl=self._ssl,
                    ssl_handshake_timeout=self._handshake_seconds + 1 if self._ssl else None,
                )
                handed = True
        except (OSError, asyncio.TimeoutError) as exc:
            self._failed(handshake_reason(exc), peer, exc)
        finally:
            if not handed:
                conn.close()

    def _failed(self, reason: str, peer: str, exc: BaseException | None) -> None:
        if self._on_failed is not None:
            self._on_failed(reason)
        held = self._throttle.allow(f"failed:{reason}")
        if held is not None:
            what = "TLS handshake" if self._ssl else "connection"
            detail = str(exc)[:200] if exc is not None and str(exc) else type(exc).__name__
            if reason == "timeout":
                detail = f"not done within {self._handshake_seconds:g} s"
            elif reason == "evicted":
                detail = f"still opening while {self._max} connections were open (max_connections)"
            log.warning(
                "%s: %s from %s failed (%s): %s%s",
                self.url,
                what,
                peer,
                reason,
                detail,
                f" [{held} more since the last line]" if held else "",
            )

    def _serve(self, transport: asyncio.BaseTransport) -> None:
        """The connection is open (past its handshake): check its certificate's names,
        then let aiohttp serve it."""
        if self._client_names is not None:
            names = _names(transport.get_extra_info("peercert"))
            if not names & self._client_names:
                peer = _peer(transport.get_extra_info("peername"))
                shown = ", ".join(sorted(names))[:200] or "none"
                self._failed(
                    "name_not_allowed",
                    peer,
                    ValueError(f"certificate names {shown}; tls.client_names allows none of them"),
                )
                transport.close()  # nothing was read or written: no shutdown to wait for
                return
        server = self._runner.server
        assert server is not None, "the runner is set up before the listener starts"
        protocol = server()
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        if self._on_accepted is not None:
            self._on_accepted()


async def _readable(loop: asyncio.AbstractEventLoop, conn: socket.socket) -> None:
    """Wait until ``conn`` has a byte to read (or its peer closed it)."""
    ready = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    fd = conn.fileno()
    loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        loop.remove_reader(fd)


def _peer(address: object) -> str:
    if isinstance(address, tuple) and len(address) >= 2:
        host, port = address[0], address[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return str(address)
