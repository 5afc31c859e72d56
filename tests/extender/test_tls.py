"""Mutual TLS on the real process over loopback, with certificates made for the test by
the lab's PKI (the openssl command line): only a client certificate from the configured
CA reaches a handler; the plain-HTTP health listener serves only the read-only endpoints."""

from __future__ import annotations

import contextlib
import re
import socket
import ssl
import subprocess
import threading
from pathlib import Path

import httpx
import pytest

from lab.pki import make_ca, make_cert

from .running import Running, extender_command, filter_body, free_port, write_config


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("pki")
    make_ca(d, "ca", "loadwise-extender-ca")
    make_cert(
        d, "server", "ca", "/CN=loadwise-extender", server_sans=["IP:127.0.0.1"], client=False
    )
    make_cert(d, "scheduler", "ca", "/CN=system:kube-scheduler")
    make_ca(d, "other-ca", "someone-else")
    make_cert(d, "other", "other-ca", "/CN=system:kube-scheduler")  # same name, wrong CA
    return d


def _tls_flags(pki: Path) -> list[str]:
    return [
        "--tls-cert-file",
        str(pki / "server.crt"),
        "--tls-key-file",
        str(pki / "server.key"),
        "--tls-client-ca-file",
        str(pki / "ca.crt"),
    ]


@pytest.fixture(scope="module")
def ext(pki, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tls")
    health = f"127.0.0.1:{free_port()}"
    proc = Running(write_config(tmp), *_tls_flags(pki), "--health-listen", health)
    proc.health = f"http://{health}"  # type: ignore[attr-defined]
    yield proc
    proc.stop()


def _client(pki: Path, cert: str | None) -> httpx.Client:
    """A client that pins the extender's CA, as kube-scheduler's tlsConfig.caFile does,
    presenting ``cert`` (a name in ``pki``) or no certificate."""
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    if cert is not None:
        ctx.load_cert_chain(pki / f"{cert}.crt", pki / f"{cert}.key")
    return httpx.Client(verify=ctx, timeout=5)


def _handled(ext: Running) -> int:
    """Filter requests that reached the handler, from the health listener's /metrics."""
    text = httpx.get(f"{ext.health}/metrics").text  # type: ignore[attr-defined]
    found = re.search(
        r'^loadwise_extender_request_duration_seconds_count\{verb="filter"\} (\S+)$', text, re.M
    )
    return int(float(found.group(1))) if found else 0


def test_the_schedulers_certificate_is_answered(ext, pki):
    with _client(pki, "scheduler") as client:
        r = client.post(
            f"https://127.0.0.1:{ext.port}/scheduler/filter", content=filter_body(["n1", "n2"])
        )
        assert r.status_code == 200 and r.json()["NodeNames"] == ["n1"]
        assert client.get(f"https://127.0.0.1:{ext.port}/readyz").status_code == 200
    assert "no TLS" not in ext.log
    assert f"serving on https://127.0.0.1:{ext.port}" in ext.log


@pytest.mark.parametrize("cert", [None, "other"], ids=["no-certificate", "wrong-ca"])
def test_a_caller_without_the_cas_certificate_is_refused_at_the_handshake(ext, pki, cert):
    before = _handled(ext)
    with _client(pki, cert) as client, pytest.raises(httpx.TransportError):
        # TLS 1.3 finishes the client's side of the handshake before the server checks
        # its certificate, so the refusal (an alert) may surface on the first read.
        client.post(f"https://127.0.0.1:{ext.port}/scheduler/filter", content=filter_body(["n1"]))
    assert _handled(ext) == before


def test_plain_http_on_the_tls_port_is_refused(ext):
    before = _handled(ext)
    with pytest.raises(httpx.TransportError):
        httpx.post(
            f"http://127.0.0.1:{ext.port}/scheduler/filter", content=filter_body(["n1"]), timeout=5
        )
    assert _handled(ext) == before


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1 is deprecated:DeprecationWarning")
def test_tls_below_1_2_is_refused(ext, pki):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(pki / "ca.crt")
    ctx.load_cert_chain(pki / "scheduler.crt", pki / "scheduler.key")
    ctx.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
    ctx.maximum_version = ssl.TLSVersion.TLSv1_1
    ctx.set_ciphers("ALL:@SECLEVEL=0")  # let the client offer TLS 1.1 at all

    # The control: this client does speak TLS 1.1 to a server that allows it, so the
    # refusal below is the extender's.
    permissive = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    permissive.load_cert_chain(pki / "server.crt", pki / "server.key")
    permissive.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
    permissive.set_ciphers("ALL:@SECLEVEL=0")
    with socket.create_server(("127.0.0.1", 0)) as listening:

        def accept() -> None:
            conn, _ = listening.accept()
            with contextlib.suppress(OSError), permissive.wrap_socket(conn, server_side=True):
                pass

        threading.Thread(target=accept, daemon=True).start()
        plain = socket.create_connection(listening.getsockname(), timeout=5)
        with ctx.wrap_socket(plain, server_hostname="127.0.0.1") as tls:
            assert tls.version() == "TLSv1.1"

    with httpx.Client(verify=ctx, timeout=5) as client, pytest.raises(httpx.TransportError):
        client.get(f"https://127.0.0.1:{ext.port}/healthz")


def test_the_health_listener_serves_only_the_read_only_endpoints(ext):
    health = ext.health
    assert httpx.get(f"{health}/healthz").text == "ok\n"
    ready = httpx.get(f"{health}/readyz")
    assert ready.status_code == 200 and ready.text.startswith("ok: 3 nodes")
    assert "loadwise_extender_decisions_total" in httpx.get(f"{health}/metrics").text
    for verb in ("filter", "prioritize"):
        r = httpx.post(f"{health}/scheduler/{verb}", content=filter_body(["n1"]))
        assert r.status_code == 404, r.text
        assert r.json() == {"Error": f"no such endpoint: POST /scheduler/{verb}"}
    assert httpx.get(f"{health}/scheduler/filter").status_code == 404


def _exit(tmp_path, *args: str) -> tuple[int, str]:
    r = subprocess.run(
        [*extender_command(), "--config", str(write_config(tmp_path)), *args],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return r.returncode, r.stderr


def test_tls_flags_only_all_three_together(tmp_path, pki):
    code, err = _exit(tmp_path, "--tls-cert-file", str(pki / "server.crt"))
    assert code == 2 and "key_file" in err and "$.tls" in err, err


def test_an_unusable_tls_file_is_a_config_error_naming_it(tmp_path, pki):
    flags = _tls_flags(pki)
    flags[-1] = str(tmp_path / "missing-ca.crt")
    code, err = _exit(tmp_path, *flags)
    assert code == 2 and "client_ca_file" in err and "missing-ca.crt" in err, err
    flags = _tls_flags(pki)
    flags[3] = str(pki / "other.key")  # a key that is not the certificate's
    code, err = _exit(tmp_path, *flags)
    assert code == 2 and "other.key" in err, err
