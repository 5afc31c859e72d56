"""The process's life: a graceful stop on SIGTERM/SIGINT with a request in flight, its
bound, and the start-up warning without TLS. A real ``loadwise-extender`` process with
real signals, spoken to over loopback sockets."""

from __future__ import annotations

import json
import signal
import socket
import time

import pytest

from .running import Running, filter_body, post_head, read_answer, write_config


@pytest.fixture
def running(tmp_path):
    started: list[Running] = []

    def start(**settings) -> Running:
        proc = Running(write_config(tmp_path, **settings))
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()


def _half_sent(ext: Running, body: bytes) -> socket.socket:
    """A filter request whose header and first half of the body are sent, as
    kube-scheduler's client writes a large body in several writes."""
    sock = socket.create_connection((ext.host, ext.port))
    sock.sendall(post_head("/scheduler/filter", len(body)) + body[: len(body) // 2])
    time.sleep(0.3)  # the server has parsed the header and is reading the body
    return sock


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_body_still_arriving_when_the_signal_comes_is_answered_then_the_process_exits_0(
    running, sig
):
    ext = running()
    body = filter_body(["n1", "n2", "n3"])
    sock = _half_sent(ext, body)
    signalled = time.monotonic()
    ext.signal(sig)
    line = ext.wait_for_line("stopping: listeners closed")
    assert "1 request(s) in flight" in line
    # no new connection once stopping, while the one in flight goes on
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((ext.host, ext.port), timeout=2).close()
    sock.sendall(body[len(body) // 2 :])
    answer = read_answer(sock)  # the server closes the connection after this answer
    sock.close()
    head, _, payload = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), answer[:200]
    assert b"Connection: close" in head
    assert json.loads(payload)["NodeNames"] == ["n1", "n3"]  # n2: memory 93% in the file
    assert ext.exit_code(timeout=5) == 0
    # it exits once the request is answered, not after the 10 s body deadline (the bound
    # leaves a loaded 2-core machine seconds to start and end the process's exit)
    assert time.monotonic() - signalled < 8.0, ext.log
    assert "still in flight" not in ext.log


def test_with_nothing_in_flight_it_exits_at_once_and_closes_idle_connections(running):
    ext = running(shutdown_grace_seconds=30.0)
    idle = socket.create_connection((ext.host, ext.port))  # a keep-alive caller between requests
    signalled = time.monotonic()
    ext.signal()
    assert ext.exit_code(timeout=20) == 0
    assert time.monotonic() - signalled < 10.0, ext.log  # the 30 s grace not waited for
    idle.settimeout(2)
    assert idle.recv(1) == b""  # closed by the server, no answer
    idle.close()
    assert ext.log.count("no TLS (tls.cert_file") == 1  # the start-up warning, once


def test_the_wait_for_requests_in_flight_is_bounded(running):
    ext = running(shutdown_grace_seconds=1.0)
    body = filter_body(["n1"])
    sock = _half_sent(ext, body)  # and the rest never comes
    signalled = time.monotonic()
    ext.signal()
    assert ext.exit_code(timeout=8) == 0
    took = time.monotonic() - signalled
    assert 1.0 <= took < 4.0, ext.log  # the grace period, then at most a second to close
    assert "1 request(s) still in flight; closing them" in ext.log
    assert read_answer(sock, timeout=2) == b""  # closed without an answer
    sock.close()


def test_a_second_signal_cuts_the_wait_short(running):
    ext = running(shutdown_grace_seconds=30.0)
    sock = _half_sent(ext, filter_body(["n1"]))
    signalled = time.monotonic()
    ext.signal()
    ext.wait_for_line("stopping: listeners closed")
    ext.signal()
    assert ext.exit_code(timeout=20) == 0
    assert time.monotonic() - signalled < 10.0, ext.log  # not the 30 s grace
    sock.close()
