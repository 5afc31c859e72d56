"""The listening side against another local process, on the real process over loopback
with certificates made by the lab's PKI (the openssl command line): connections held
open before or inside their TLS handshake, descriptors running out, garbage sent to the
health port, certificates the CA signed for someone else or for another purpose."""

from __future__ import annotations

import faulthandler
import re
import resource
import selectors
import socket
import ssl
import struct
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest

from lab.pki import make_ca, make_cert
from loadwise.extender.certs import not_after
from loadwise.extender.listener import HANDSHAKE_SECONDS, peer_wait_ms

from .running import Running, filter_body, free_port, write_config


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("pki")
    make_ca(d, "ca", "loadwise-extender-ca")
    make_cert(
        d, "server", "ca", "/CN=loadwise-extender", server_sans=["IP:127.0.0.1"], client=False
    )
    make_cert(d, "scheduler", "ca", "/CN=kube-scheduler")
    make_cert(d, "stranger", "ca", "/CN=someone-else")  # the right CA, another name
    return d


def _tls(pki: Path, **more: object) -> dict[str, object]:
    return {
        "cert_file": str(pki / "server.crt"),
        "key_file": str(pki / "server.key"),
        "client_ca_file": str(pki / "ca.crt"),
        **more,
    }


@pytest.fixture(scope="module")
def ext(pki, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    health = f"127.0.0.1:{free_port()}"
    config = write_config(tmp, tls=_tls(pki, client_names=["kube-scheduler"]), health_listen=health)
    proc = Running(config)
    proc.health = f"http://{health}"  # type: ignore[attr-defined]
    yield proc
    proc.stop()


def _client(pki: Path, cert: str) -> httpx.Client:
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    ctx.load_cert_chain(pki / f"{cert}.crt", pki / f"{cert}.key")
    return httpx.Client(verify=ctx, timeout=5)


def _metric(ext: Running, name: str, **labels: str) -> float:
    text = httpx.get(f"{ext.health}/metrics").text  # type: ignore[attr-defined]
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    pattern = rf"^{name}{{{want}}} (\S+)$" if labels else rf"^{name} (\S+)$"
    found = re.search(pattern, text, re.M)
    return float(found.group(1)) if found else 0.0


def _client_hello() -> bytes:
    """The first flight of a TLS client, to send and then never go on with."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_side=False)
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    return outgoing.read()


def _closed(sock: socket.socket) -> bool:
    """Closed by the server: EOF or a reset once what it sent (its handshake) is read."""
    sock.settimeout(0.01)
    try:
        while sock.recv(65536):
            pass
        return True
    except (TimeoutError, BlockingIOError):
        return False
    except OSError:
        return True  # reset


def test_held_connections_neither_block_the_scheduler_nor_stay(ext, pki):
    hello = _client_hello()
    held: list[socket.socket] = []
    try:
        for i in range(300):  # half never send a byte, half stop inside the handshake
            sock = socket.create_connection(("127.0.0.1", ext.port), timeout=5)
            if i % 2:
                sock.sendall(hello)
            held.append(sock)
        started = time.monotonic()
        with _client(pki, "scheduler") as client:
            r = client.post(
                f"https://127.0.0.1:{ext.port}/scheduler/filter", content=filter_body(["n1", "n2"])
            )
        took = time.monotonic() - started
        assert r.status_code == 200 and r.json()["NodeNames"] == ["n1"]
        assert took < 2.5, took  # generous: it is milliseconds on an idle machine
        # the held ones: closed to make room, or after HANDSHAKE_SECONDS at the latest
        time.sleep(HANDSHAKE_SECONDS + 1.0)
        still_open = [sock for sock in held if not _closed(sock)]
        assert not still_open, f"{len(still_open)} of {len(held)} held connections still open"
    finally:
        for sock in held:
            sock.close()
    evicted = _metric(
        ext, "loadwise_extender_handshake_failures_total", listener="scheduler", reason="evicted"
    )
    timed_out = _metric(
        ext, "loadwise_extender_handshake_failures_total", listener="scheduler", reason="timeout"
    )
    assert evicted + timed_out == 300, (evicted, timed_out)
    # one line a minute per reason, not one per connection
    assert len([line for line in ext.lines if "failed (evicted)" in line]) <= 1
    assert "Traceback" not in ext.log


def test_a_certificate_for_another_name_or_purpose_is_refused_and_counted(ext, pki):
    for cert, reason in (("stranger", "name_not_allowed"), ("server", "wrong_purpose")):
        before = _metric(
            ext, "loadwise_extender_handshake_failures_total", listener="scheduler", reason=reason
        )
        with _client(pki, cert) as client, pytest.raises(httpx.TransportError):
            client.post(
                f"https://127.0.0.1:{ext.port}/scheduler/filter", content=filter_body(["n1"])
            )
        for _ in range(50):
            after = _metric(
                ext,
                "loadwise_extender_handshake_failures_total",
                listener="scheduler",
                reason=reason,
            )
            if after > before:
                break
            time.sleep(0.05)
        assert after == before + 1, (cert, reason)
        ext.wait_for_line(f"failed ({reason})", timeout=5)
    # the scheduler's own certificate still gets through
    with _client(pki, "scheduler") as client:
        assert client.get(f"https://127.0.0.1:{ext.port}/healthz").status_code == 200


def test_certificate_expiry_is_exported_as_openssl_reads_it(ext, pki):
    for name, which in (("server", "serving"), ("ca", "client_ca")):
        shown = subprocess.run(
            ["openssl", "x509", "-enddate", "-noout", "-in", str(pki / f"{name}.crt")],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        expected = ssl.cert_time_to_seconds(shown.removeprefix("notAfter="))
        assert not_after(str(pki / f"{name}.crt")) == expected
        exported = _metric(
            ext, "loadwise_extender_certificate_expiry_timestamp_seconds", certificate=which
        )
        assert exported == expected, (which, exported, expected)


def test_malformed_requests_to_the_health_port_log_a_line_not_a_traceback_each(ext):
    host, port = ext.health.removeprefix("http://").split(":")  # type: ignore[attr-defined]
    before = len(ext.lines)
    for i in range(200):
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            # a bad method on the second request of a connection is logged at ERROR by
            # aiohttp (the first one only at DEBUG); a header without a colon every time
            if i % 2:
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nG\x00T / HTTP/1.1\r\n\r\n")
            else:
                sock.sendall(b"GET /healthz HTTP/1.1\r\nbroken header\r\n\r\n")
            sock.settimeout(5)
            while sock.recv(65536):
                pass
    time.sleep(0.2)
    new = ext.lines[before:]
    assert len(new) <= 3, new
    assert not any("Traceback" in line for line in new), new
    assert any("malformed HTTP request" in line for line in new), new
    assert httpx.get(f"{ext.health}/healthz").text == "ok\n"  # type: ignore[attr-defined]
    assert (
        _metric(
            ext,
            "loadwise_extender_client_errors_total",
            reason="malformed_http",
            status="400",
            verb="other",
        )
        >= 200
    )


def test_running_out_of_descriptors_pauses_accepting_quietly(tmp_path):
    config = write_config(tmp_path, max_connections=1000)
    proc = Running(config)
    resource.prlimit(proc.proc.pid, resource.RLIMIT_NOFILE, (64, 64))
    held: list[socket.socket] = []
    try:
        for _ in range(120):  # more than its 64 descriptors
            held.append(socket.create_connection(("127.0.0.1", proc.port), timeout=5))
        proc.wait_for_line("cannot accept a connection", timeout=10)
        time.sleep(2.5)  # accepting pauses and retries, a line a minute
        for sock in held:
            sock.close()
        held.clear()
        for _ in range(100):  # once the held ones are gone, callers are served again
            try:
                r = httpx.post(
                    f"http://127.0.0.1:{proc.port}/scheduler/filter",
                    content=filter_body(["n1", "n2"]),
                    timeout=5,
                )
                break
            except httpx.TransportError:
                time.sleep(0.1)
        assert r.status_code == 200 and r.json()["NodeNames"] == ["n1"]
        assert len([line for line in proc.lines if "cannot accept" in line]) <= 2, proc.log
        assert "Traceback" not in proc.log
    finally:
        for sock in held:
            sock.close()
        proc.stop()


def _tcp_info(sent_ago: int, received_ago: int, acked: int, received: int) -> bytes:
    info = bytearray(232)
    struct.pack_into("=I4xI", info, 44, sent_ago, received_ago)
    struct.pack_into("=QQ", info, 120, acked, received)
    return bytes(info)


@pytest.mark.parametrize(
    ("sent_ago", "received_ago", "acked", "received", "waited"),
    [
        (900, 900, 0, 0, 900),  # nothing from the peer since the accept 900 ms ago
        (60, 60, 0, 517, 0),  # a ClientHello with the connect, not answered yet
        (250, 400, 1300, 517, 250),  # a ClientHello 400 ms ago, answered 250 ms ago
        (7, 7, 1300, 517, 7),  # answered within the tick the ClientHello came in
        (300, 2, 1300, 1400, 0),  # it answered 2 ms ago: the extender's turn
    ],
)
def test_the_wait_on_a_peer_is_read_from_tcp_info(sent_ago, received_ago, acked, received, waited):
    info = _tcp_info(sent_ago, received_ago, acked, received)
    assert peer_wait_ms(info) == waited
    assert peer_wait_ms(info[:100]) is None  # a kernel before 4.1


def test_the_wait_on_a_real_socket_grows_after_the_extender_speaks():
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
        with client, accepted:
            client.sendall(b"hello")
            time.sleep(0.05)
            accepted.recv(5)
            info = accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
            assert peer_wait_ms(info) == 0  # the extender has not answered yet
            accepted.sendall(b"answer")
            time.sleep(0.2)
            info = accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
            waited = peer_wait_ms(info)
            assert waited is not None and 150 <= waited < 2000, waited


def _tls_client(pki: Path, cert: str | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    if cert is not None:
        ctx.load_cert_chain(pki / f"{cert}.crt", pki / f"{cert}.key")
    return ctx


def _server_flight(sock: socket.socket, obj: ssl.SSLObject, incoming: ssl.MemoryBIO) -> None:
    """Read what the server sends after the ClientHello, until the client's side of the
    handshake is done (TLS 1.3) or it fails for want of a certificate."""
    sock.settimeout(5)
    while True:
        data = sock.recv(65536)
        assert data, "closed during the handshake"
        incoming.write(data)
        try:
            obj.do_handshake()
            return
        except ssl.SSLWantReadError:
            continue


def _still_open(sock: socket.socket) -> bool:
    sock.settimeout(0.2)
    try:
        return sock.recv(1, socket.MSG_PEEK) != b""
    except TimeoutError:
        return True
    except OSError:
        return False


# Once in `make test-full` only (no holder closed in 3 of 4 runs beside CPU burners, 7 of 10
# on an idle machine, and now and then a hang): two defects of the test, not of the
# listener. The scheduler's reply came within the kernel's clock tick of the server's flight,
# which reads as the server's turn, so the scheduler, the oldest, was the one closed; and
# the read loop below spun on the b"" an SSLObject returns after close_notify. Both mended:
# 10 of 10 passed beside six lab runs (load 5-7 on the two cores).
def test_the_opening_connection_that_keeps_the_extender_waiting_longest_is_closed(pki, tmp_path):
    # Every call below has a timeout, yet once under two busy xdist workers this test did not
    # end for 8 minutes: a hang is turned into a crash with every thread's traceback.
    faulthandler.dump_traceback_later(120, exit=True)
    # max_connections 2: four may be opening at once
    config = write_config(tmp_path, tls=_tls(pki), max_connections=2)
    proc = Running(config)
    socks: list[socket.socket] = []
    try:
        # the scheduler, accepted first: its ClientHello, the server's flight, and the
        # first bytes of its answer (the rest follows below)
        honest = socket.create_connection(("127.0.0.1", proc.port), timeout=5)
        socks.append(honest)
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        obj = _tls_client(pki, "scheduler").wrap_bio(
            incoming, outgoing, server_hostname="127.0.0.1"
        )
        with pytest.raises(ssl.SSLWantReadError):
            obj.do_handshake()
        honest.sendall(outgoing.read())
        _server_flight(honest, obj, incoming)
        answer = outgoing.read()
        # The kernel dates each direction's last data in clock ticks (1/HZ, 4 ms at HZ=250),
        # so a reply within the tick of the server's flight ties with it, which
        # listener.peer_wait_ms reads as the server having answered last: the peer's turn.
        # A scheduler that then stalls is indistinguishable from a holder; one that replies
        # a tick later (as it does after verifying the chain, or here) is not.
        time.sleep(0.02)
        honest.sendall(answer[:5])
        # three holders, younger: a ClientHello, the server's flight, then nothing
        hello = _client_hello()
        held = []
        for _ in range(3):
            sock = socket.create_connection(("127.0.0.1", proc.port), timeout=5)
            socks.append(sock)
            sock.sendall(hello)
            assert sock.recv(65536)  # the server answered: the holder's turn
            held.append(sock)
        time.sleep(0.3)
        # a fifth: one of the four must go. The oldest is the scheduler, but it has
        # answered; the first holder has kept the extender waiting longest.
        socks.append(socket.create_connection(("127.0.0.1", proc.port), timeout=5))
        # on a busy machine the accept may come late: wait for it, well inside the 3 s
        # handshake timeout that would close every holder anyway
        deadline = time.monotonic() + 1.5
        closed: list[bool] = [False] * len(held)
        while not any(closed) and time.monotonic() < deadline:
            time.sleep(0.05)
            closed = [_closed(sock) for sock in held]
        # one holder goes, the first normally; on a loaded machine the kernel's view of who
        # waited longest can put a later one first, but never the scheduler, which answered
        assert closed.count(True) == 1, closed
        assert _still_open(honest)  # nothing unread there: a peek tells
        # the scheduler finishes its handshake and is answered
        honest.sendall(answer[5:])
        obj.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        honest.sendall(outgoing.read())
        plain = b""
        honest.settimeout(5)
        while b"ok\n" not in plain:
            data = honest.recv(65536)
            assert data, plain
            incoming.write(data)
            try:
                # b"" once the server's close_notify is in: an SSLObject then returns it on
                # every read instead of raising (CPython's _ssl, SSL_RECEIVED_SHUTDOWN);
                # looping on it hung this test whenever the answer and the close_notify
                # came in one segment
                while chunk := obj.read(65536):
                    plain += chunk
            except (ssl.SSLWantReadError, ssl.SSLZeroReturnError):
                pass
        assert plain.startswith(b"HTTP/1.1 200"), plain
        proc.wait_for_line("failed (evicted)", timeout=5)
    finally:
        for sock in socks:
            sock.close()
        proc.stop()
        faulthandler.cancel_dump_traceback_later()


class _Holder(threading.Thread):
    """Holds ``count`` connections, half silent and half stopped after their ClientHello,
    opening another whenever the extender closes one, until ``stop`` is set."""

    def __init__(self, port: int, count: int) -> None:
        super().__init__(daemon=True)
        self.port, self.count = port, count
        self.stop = threading.Event()
        self.reopened = 0
        self._hello = _client_hello()

    def _open(self, sel: selectors.BaseSelector, i: int) -> None:
        try:
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=2)
            if i % 2:
                sock.sendall(self._hello)
        except OSError:
            return
        sock.setblocking(False)
        sel.register(sock, selectors.EVENT_READ, i)

    def run(self) -> None:
        with selectors.DefaultSelector() as sel:
            for i in range(self.count):
                self._open(sel, i)
            while not self.stop.is_set():
                for key, _ in sel.select(timeout=0.05):
                    sock = key.fileobj
                    assert isinstance(sock, socket.socket)
                    try:
                        data = sock.recv(65536)
                    except OSError:
                        data = b""
                    if not data:
                        sel.unregister(sock)
                        sock.close()
                        self._open(sel, key.data)
                        self.reopened += 1
            for key in list(sel.get_map().values()):
                key.fileobj.close()  # type: ignore[union-attr]


def test_a_kept_alive_scheduler_connection_never_fails_under_held_connections(ext, pki):
    evicted = _metric(
        ext, "loadwise_extender_handshake_failures_total", listener="scheduler", reason="evicted"
    )
    url = f"https://127.0.0.1:{ext.port}/scheduler/filter"
    with _client(pki, "scheduler") as client:
        # the connection kube-scheduler keeps (a Go http.Transport reuses it)
        assert client.post(url, content=filter_body(["n1", "n2"])).status_code == 200
        holder = _Holder(ext.port, 300)
        holder.start()
        answers = []
        try:
            deadline = time.monotonic() + 6.0
            while time.monotonic() < deadline:
                # httpx's timeout is kube-scheduler's: 5 s for the whole call
                r = client.post(url, content=filter_body(["n1", "n2"]))
                answers.append((r.status_code, r.json()["NodeNames"]))
                time.sleep(0.05)
        finally:
            holder.stop.set()
            holder.join(10)
    assert answers and all(a == (200, ["n1"]) for a in answers), answers
    # the holder was at work: its connections were closed and reopened
    assert holder.reopened > 0
    assert (
        _metric(
            ext,
            "loadwise_extender_handshake_failures_total",
            listener="scheduler",
            reason="evicted",
        )
        > evicted
    )


def test_the_health_listener_answers_while_flooded_with_idle_connections(ext):
    host, port = ext.health.removeprefix("http://").split(":")  # type: ignore[attr-defined]
    held = []
    try:
        for _ in range(400):  # more than the 64 served and 128 opening together
            held.append(socket.create_connection((host, int(port)), timeout=5))
        for _ in range(5):
            r = httpx.get(f"{ext.health}/healthz", timeout=5)  # type: ignore[attr-defined]
            assert r.status_code == 200 and r.text == "ok\n"
    finally:
        for sock in held:
            sock.close()
    assert (
        _metric(
            ext, "loadwise_extender_handshake_failures_total", listener="health", reason="evicted"
        )
        > 0
    )


def test_callers_right_behind_a_closing_flood_are_served_not_reset(ext):
    # The 128 connections still opening see their peers' EOF in one turn and are handed
    # over together: for a turn or two more than max_connections count as served. The
    # callers queued behind them were refused (reset, request unread) before
    # FULL_GRACE_SECONDS: 20 of 20 on this listener.
    host, port = ext.health.removeprefix("http://").split(":")  # type: ignore[attr-defined]
    refused = _metric(ext, "loadwise_extender_connections_refused_total")
    held = [socket.create_connection((host, int(port)), timeout=5) for _ in range(400)]
    for sock in held:
        sock.close()
    callers = []
    for _ in range(20):
        sock = socket.create_connection((host, int(port)), timeout=5)
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: loadwise\r\nConnection: close\r\n\r\n")
        callers.append(sock)
    answers = []
    for sock in callers:
        with sock:
            try:
                answers.append(sock.recv(4096).split(b"\r\n", 1)[0])
            except OSError as exc:
                answers.append(repr(exc).encode())
    assert answers == [b"HTTP/1.1 200 OK"] * 20, answers
    assert _metric(ext, "loadwise_extender_connections_refused_total") == refused
