"""The extender's listening sockets: a cap on open connections, mutual TLS, and an
accept loop that a hostile local process cannot turn into a memory or log storm.

aiohttp's own sites listen without a limit on connections, so each ``Listener`` accepts
its connections itself and hands each to aiohttp's low-level server
(``BaseRunner.server``) once it is ready to be served:

- Every connection is counted from the moment it is accepted, whatever its stage: a
  connection *opening* (accepted, no byte yet; or, with TLS, in its handshake) or
  *served* (handed to aiohttp). At ``max_connections`` served (callers that passed the
  handshake) a new connection is closed unserved once they have been at the cap for
  ``FULL_GRACE_SECONDS``, so the caller sees an error rather than waiting out its
  timeout (kube-scheduler's ``httpTimeout``, 5 s by default), and a caller that comes
  while closing connections are still counted is not refused for them. At
  ``OPENING_PER_SERVED`` x ``max_connections`` opening, a new one makes room by closing
  the opening connection whose peer has kept the extender waiting longest
  (``peer_wait_ms``, from the kernel's ``TCP_INFO``): since its accept when it has sent
  nothing, since the extender's last bytes when it has not answered them, none while the
  extender owes it an answer; and only once that wait reaches ``PATIENCE_SECONDS``.
  Until one does, accepting pauses and new connections wait in the kernel's backlog.
  The scheduler sends its ClientHello at once and answers the server's flight within
  milliseconds, so its handshake is never closed for room however many connections
  another local process holds or reopens, where a holder's wait grows until it is.
  (Closing the oldest instead let a holder reopening its connections as fast as they
  closed make the scheduler's handshake the oldest within milliseconds.)
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
import math
import socket
import ssl
import struct
import sys
import time
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
    "PATIENCE_SECONDS",
    "Listener",
    "handshake_reason",
    "peer_wait_ms",
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
# struct tcp_info (linux/tcp.h, stable since Linux 2.6; the byte counts since 4.1):
# tcpi_last_data_sent and tcpi_last_data_recv, milliseconds since the last data segment
# each way (since the connection was established when there was none), then the bytes
# the peer acknowledged (tcpi_bytes_acked) and the bytes received from it.
_TCPI_LAST_DATA = struct.Struct("=I4xI")  # last_data_sent, (last_ack_sent), last_data_recv
_TCPI_LAST_DATA_AT = 44
_TCPI_BYTES = struct.Struct("=QQ")  # bytes_acked, bytes_received
_TCPI_BYTES_AT = 120
_TCPI_SIZE = _TCPI_BYTES_AT + _TCPI_BYTES.size
# A connection opening is closed to make room only once its peer has kept the extender
# waiting this long: the scheduler answers each step of its handshake within milliseconds
# (an ECDSA P-256 signature and a verification), so however fast another process opens
# connections, it cannot have the scheduler's handshake closed; it only delays the accept
# of a new one, which waits in the kernel's backlog. Holding every place would take 128
# new connections each 100 ms, each of them answering the server (a TLS client with a
# certificate the CA signed gets through and is served: max_connections).
PATIENCE_SECONDS = 0.1
# How long a new connection waits while max_connections are served before it is closed.
# When a flood of silent connections closes, the 2 x 64 still opening see their peer's
# EOF in one turn of the loop and are all handed to aiohttp, which closes them a turn or
# two later; in between up to 3 x 64 count as served, and the caller whose request came
# right behind them would be refused (closed with its request unread: a reset). Measured
# on this listener, every one of 20 callers was reset without the wait.
FULL_GRACE_SECONDS = 0.5
_TCP_INFO: int | None = getattr(socket, "TCP_INFO", None)  # Linux only
_OUT_OF_RESOURCES = frozenset((errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM))

# The ``reason`` label of failed handshakes: a fixed set, never text from the peer.
HANDSHAKE_REASONS = (
    "timeout",  # nothing, or not a whole handshake, within HANDSHAKE_SECONDS
    "evicted",  # kept the extender waiting longest when a new connection needed room
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


def peer_wait_ms(tcp_info: bytes) -> int | None:
    """How long the peer of an opening connection has kept the extender waiting, in
    milliseconds, from the kernel's ``TCP_INFO`` of the accepted socket: since the accept
    when it has sent nothing (a TLS or HTTP client speaks first); since the extender last
    sent when it has not answered (a handshake stopped after the ClientHello), also when
    both came within one clock tick; 0 when the extender has sent nothing yet or the
    peer's last bytes came later than the extender's: the extender owes the next step. None when
    ``tcp_info`` is too short to tell (a kernel before 4.1)."""
    if len(tcp_info) < _TCPI_SIZE:
        return None
    sent_ago, received_ago = _TCPI_LAST_DATA.unpack_from(tcp_info, _TCPI_LAST_DATA_AT)
    acked, received = _TCPI_BYTES.unpack_from(tcp_info, _TCPI_BYTES_AT)
    if received == 0:
        return int(received_ago)
    if acked == 0:
        # It spoke and the extender has not yet (over loopback its bytes are acknowledged
        # within the millisecond): tcpi_last_data_sent still counts from the connection's
        # start, within a tick of a ClientHello sent right after the connect.
        return 0
    # Equal: the extender answered within the clock tick (1/HZ, 4 ms at HZ=250) its last
    # bytes came in, as it answers a ClientHello over loopback; its turn is the peer's.
    if sent_ago <= received_ago:
        return int(sent_ago)
    return 0


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
        # oldest first: the socket, the peer's address, when it was accepted (monotonic)
        self._opening: dict[asyncio.Task[None], tuple[socket.socket, str, float]] = {}
        self._evicted: set[asyncio.Task[None]] = set()
        self._full_since: float | None = None  # since when max_connections are served
        self._silent: set[asyncio.Task[None]] = set()  # no byte received yet
        # listening sockets not accepting for now, with the timer that resumes them, and
        # the connection each accepted last that waits for room, with its peer
        self._paused: dict[socket.socket, asyncio.TimerHandle] = {}
        self._waiting: dict[socket.socket, tuple[socket.socket, str]] = {}

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
        for handle in self._paused.values():
            handle.cancel()
        self._paused.clear()
        for conn, _ in self._waiting.values():
            conn.close()
        self._waiting.clear()
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
            if not self._room():
                # Every connection opening is still within its patience: this one waits
                # (one per listening socket), the next ones in the kernel's backlog. A
                # client sees a slower connect, not an error.
                self._waiting[sock] = (conn, _peer(peer))
                self._pause(sock, PATIENCE_SECONDS / 4)
                return
            self._admit(conn, _peer(peer))

    def _room(self) -> bool:
        """Whether one more may open, once the patience of one opening ran out if need be;
        True also when ``max_connections`` have been served for ``FULL_GRACE_SECONDS``:
        ``_admit`` refuses it then."""
        if self.served >= self._max:
            now = time.monotonic()
            if self._full_since is None:
                self._full_since = now
            return now - self._full_since >= FULL_GRACE_SECONDS
        self._full_since = None
        full = len(self._opening) - len(self._evicted) >= self._max * OPENING_PER_SERVED
        return not full or self._evict(patient=True)

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
        if not freed:
            self._pause(sock, ACCEPT_RETRY_SECONDS)

    def _pause(self, sock: socket.socket, seconds: float) -> None:
        """Stop accepting on ``sock`` for ``seconds``, or until a connection opening
        finishes (``_forget``)."""
        if sock in self._paused or sock.fileno() < 0:
            return
        loop = asyncio.get_running_loop()
        loop.remove_reader(sock.fileno())
        self._paused[sock] = loop.call_later(seconds, self._resume, sock)

    def _resume(self, sock: socket.socket) -> None:
        handle = self._paused.pop(sock, None)
        if handle is None:
            return
        handle.cancel()
        if sock.fileno() < 0:
            return
        waiting = self._waiting.get(sock)
        if waiting is not None:
            if not self._room():
                self._pause(sock, PATIENCE_SECONDS / 4)
                return
            del self._waiting[sock]
            self._admit(*waiting)
        asyncio.get_running_loop().add_reader(sock.fileno(), self._accept, sock)

    def _evict(self, *, patient: bool = False) -> bool:
        """Close the connection still opening whose peer has kept the extender waiting
        longest (``peer_wait_ms``), the oldest of equals; with ``patient``, only one that
        has kept it waiting ``PATIENCE_SECONDS`` or more. False if there is none.

        One ``getsockopt`` per opening connection (at most ``OPENING_PER_SERVED`` x
        ``max_connections``, a microsecond each), only when one must go."""
        now = time.monotonic()
        chosen: asyncio.Task[None] | None = None
        longest = -math.inf
        for task, (conn, _, accepted) in self._opening.items():
            if task in self._evicted:
                continue
            waited = self._peer_wait(conn)
            if waited is None:
                # no TCP_INFO: a silent one by its age, then the oldest of the others
                waited = (now - accepted) * 1000.0 if task in self._silent else -1.0
            if waited > longest:
                chosen, longest = task, waited
        if chosen is None or (patient and longest < PATIENCE_SECONDS * 1000.0):
            return False
        self._evicted.add(chosen)
        chosen.cancel()
        return True

    @staticmethod
    def _peer_wait(conn: socket.socket) -> float | None:
        if _TCP_INFO is None:
            return None
        try:
            info = conn.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, _TCPI_SIZE)
        except (OSError, ValueError):  # not Linux, not TCP, or already closed
            return None
        waited = peer_wait_ms(info)
        return float(waited) if waited is not None else None

    def _admit(self, conn: socket.socket, peer: str) -> None:
        if self.served >= self._max:
            conn.close()
            self._refused()
            return
        conn.setblocking(False)
        task = asyncio.get_running_loop().create_task(self._open(conn, peer))
        self._opening[task] = (conn, peer, time.monotonic())
        self._silent.add(task)
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[None]) -> None:
        conn, peer, _ = self._opening.pop(task)
        for sock in list(self._paused):  # room for the next one in the backlog
            self._resume(sock)
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
                self._spoke()
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

    def _spoke(self) -> None:
        # Not inline in _open: a cancelled task keeps its CancelledError, whose traceback
        # keeps _open's frame; a local naming the task there would make a cycle that
        # only the garbage collector frees, with the TLS state's 256 KiB buffer in it.
        task = asyncio.current_task()
        if task is not None:
            self._silent.discard(task)

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
                detail = (
                    f"kept the extender waiting longest of {self._max * OPENING_PER_SERVED} "
                    "connections still opening"
                )
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
