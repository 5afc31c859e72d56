"""The loadwise_extender role's keys and certificates (tasks/tls.yml), made on this machine.

The task file runs as the role includes it, by ansible-playbook over the local connection,
into a directory of the test's; systemctl is a stand-in on PATH that records the restarts
the role asks for. What it makes is then used as the scheduler and the extender use it: the
REAL extender process serves with the config file the role renders, and Python's ssl
(OpenSSL, as kube-scheduler's Go client would: CA pinned, host name checked) calls it.
"""

from __future__ import annotations

import json
import os
import re
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.ansible.fakes import path_with
from tests.ansible.test_extender_role import _play, _render

KEYS = ["ca.key", "server.key", "scheduler/client.key"]
CERTS = ["ca.crt", "server.crt", "scheduler/ca.crt", "scheduler/client.crt"]
# A group every Debian/Ubuntu machine has, standing in for the service's own account.
SERVICE_GROUP = "daemon"
SHOW = "Id=loadwise-extender.service\\nLoadState=loaded\\nActiveState=active\\nSubState=running\\n"


def _tls(
    tmp_path: Path, *extra: str, **variables: Any
) -> tuple[subprocess.CompletedProcess[str], int]:
    """tasks/tls.yml into tmp_path/tls; the run and how many restarts it asked systemctl for."""
    calls = tmp_path / "systemctl.calls"
    calls.touch()
    env = path_with(
        tmp_path / "bin",
        {"systemctl": f'echo "$*" >> {calls}\ncase "$*" in *show*) printf "{SHOW}";; esac'},
    )
    before = calls.read_text().count("restart")
    run = _play(
        tmp_path,
        "tls.yml",
        {
            "loadwise_extender_tls_dir": str(tmp_path / "tls"),
            "loadwise_extender_user": SERVICE_GROUP,
            **variables,
        },
        [],
        *extra,
        base_env=env,
    )
    return run, calls.read_text().count("restart") - before


def _files(tmp_path: Path) -> dict[str, bytes]:
    return {name: (tmp_path / "tls" / name).read_bytes() for name in KEYS + CERTS}


def _changed(run: subprocess.CompletedProcess[str]) -> int:
    found = re.search(r"localhost\s*:\s*ok=\d+\s+changed=(\d+)", run.stdout)
    assert found, run.stdout
    return int(found[1])


def _enddate(path: Path) -> str:
    out = subprocess.run(
        ["openssl", "x509", "-noout", "-enddate", "-in", str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def _days_valid(path: Path) -> int:
    """Whole days from now until the certificate expires."""
    seconds = 0
    for days in (1, 10, 30, 100, 400, 4000):
        ok = subprocess.run(
            ["openssl", "x509", "-noout", "-checkend", str(days * 86400), "-in", str(path)],
            capture_output=True,
        )
        if ok.returncode != 0:
            return seconds
        seconds = days
    return seconds


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run of tls.yml with the role's defaults; its directory."""
    tmp = tmp_path_factory.mktemp("made")
    run, restarts = _tls(tmp)
    assert run.returncode == 0, run.stdout + run.stderr
    assert restarts == 1, "the extender restarts on its new keys"
    return tmp


def test_a_first_run_makes_a_ca_and_two_certificates_root_only_where_secret(made: Path) -> None:
    tls = made / "tls"
    modes = {name: (tls / name).stat() for name in KEYS + CERTS + ["scheduler"]}
    assert {n: oct(s.st_mode & 0o777) for n, s in modes.items()} == {
        "ca.key": "0o600",
        "server.key": "0o640",  # the service reads it, only root writes it
        "scheduler/client.key": "0o600",
        "ca.crt": "0o644",
        "server.crt": "0o644",
        "scheduler/ca.crt": "0o644",
        "scheduler/client.crt": "0o644",
        "scheduler": "0o700",
    }
    assert all(s.st_uid == 0 for s in modes.values())
    import grp

    assert grp.getgrgid(modes["server.key"].st_gid).gr_name == SERVICE_GROUP
    assert oct(tls.stat().st_mode & 0o777) == "0o750"
    assert grp.getgrgid(tls.stat().st_gid).gr_name == SERVICE_GROUP
    # the scheduler pins the same CA the extender checks clients against
    assert (tls / "ca.crt").read_bytes() == (tls / "scheduler/ca.crt").read_bytes()
    # the role's defaults: CA 3650 days, certificates 365
    assert 400 <= _days_valid(tls / "ca.crt") <= 4000
    assert 100 <= _days_valid(tls / "server.crt") < 400
    assert 100 <= _days_valid(tls / "scheduler/client.crt") < 400


def test_a_second_run_changes_nothing_and_restarts_nothing(made: Path) -> None:
    before = _files(made)
    run, restarts = _tls(made)
    assert run.returncode == 0, run.stdout
    assert _changed(run) == 0, run.stdout
    assert restarts == 0
    assert _files(made) == before
    check, _ = _tls(made, "--check", "--diff")
    assert check.returncode == 0 and _changed(check) == 0, check.stdout


def test_check_mode_writes_nothing_and_shows_the_certificates(tmp_path: Path) -> None:
    run, _ = _tls(tmp_path, "--check", "--diff")
    assert run.returncode == 0, run.stdout + run.stderr
    assert not (tmp_path / "tls").exists()
    assert _changed(run) >= 6, run.stdout  # two directories, three keys, the certificates
    assert run.stdout.count("+-----BEGIN CERTIFICATE-----") == 4, run.stdout


def _assert_no_key_in(out: str, tls: Path) -> None:
    assert "PRIVATE KEY" not in out
    for name in KEYS:
        body = (tls / name).read_text().splitlines()[1]
        assert body[:40] not in out, name


def test_no_private_key_reaches_the_output_of_a_first_run(tmp_path: Path) -> None:
    run, _ = _tls(tmp_path, "-vvv", "--diff")
    assert run.returncode == 0, run.stdout + run.stderr
    _assert_no_key_in(run.stdout + run.stderr, tmp_path / "tls")


def test_rotate_replaces_every_key_and_certificate_and_shows_none(
    made: Path, tmp_path: Path
) -> None:
    # a copy: the module's other tests keep the first run's files
    subprocess.run(["cp", "-a", str(made / "tls"), str(tmp_path / "tls")], check=True)
    old = _files(tmp_path)
    run, restarts = _tls(tmp_path, "-vvv", "--diff", loadwise_extender_tls_rotate=True)
    assert run.returncode == 0, run.stdout + run.stderr
    _assert_no_key_in(run.stdout + run.stderr, tmp_path / "tls")
    new = _files(tmp_path)
    assert [n for n in KEYS + CERTS if new[n] == old[n]] == []
    assert restarts == 1
    _verify_chain(tmp_path / "tls")


def test_a_certificate_within_the_renew_window_gets_a_new_key_the_ca_stays(
    tmp_path: Path,
) -> None:
    first, _ = _tls(tmp_path, loadwise_extender_tls_valid_days=20)
    assert first.returncode == 0, first.stdout
    old = _files(tmp_path)
    # defaults: renew what expires within 30 days
    run, restarts = _tls(tmp_path)
    assert run.returncode == 0, run.stdout
    new = _files(tmp_path)
    assert [n for n in KEYS + CERTS if new[n] != old[n]] == [
        "server.key",
        "scheduler/client.key",
        "server.crt",
        "scheduler/client.crt",
    ]
    assert restarts == 1
    assert _days_valid(tmp_path / "tls/server.crt") >= 100
    # the scheduler still running with its old certificate: the CA it pins is the same one
    said = " ".join(run.stdout.split())
    assert "client certificate was (re)issued" in said, run.stdout
    assert "(still valid)" in said

    # A new loadwise_listen: a server certificate for that address, nothing else new.
    moved, _ = _tls(tmp_path, loadwise_listen="127.0.0.2:8888")
    assert moved.returncode == 0, moved.stdout
    last = _files(tmp_path)
    assert [n for n in KEYS + CERTS if last[n] != new[n]] == ["server.crt"]
    sans = subprocess.run(
        [
            "openssl",
            "x509",
            "-noout",
            "-ext",
            "subjectAltName",
            "-in",
            str(tmp_path / "tls/server.crt"),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "IP Address:127.0.0.1" in sans and "IP Address:127.0.0.2" in sans, sans


def test_a_ca_within_the_renew_window_renews_everything(tmp_path: Path) -> None:
    first, _ = _tls(
        tmp_path, loadwise_extender_tls_ca_valid_days=20, loadwise_extender_tls_valid_days=20
    )
    assert first.returncode == 0, first.stdout
    old = _files(tmp_path)
    run, _ = _tls(tmp_path)
    assert run.returncode == 0, run.stdout
    new = _files(tmp_path)
    assert [n for n in KEYS + CERTS if new[n] == old[n]] == []
    assert "which the extender no longer accepts" in " ".join(run.stdout.split())
    _verify_chain(tmp_path / "tls")


def _verify_chain(tls: Path) -> None:
    for leaf in ("server.crt", "scheduler/client.crt"):
        out = subprocess.run(
            ["openssl", "verify", "-CAfile", str(tls / "ca.crt"), str(tls / leaf)],
            capture_output=True,
            text=True,
        )
        assert out.returncode == 0, out.stdout + out.stderr


# --- what the role made, used by the real extender and a client in the scheduler's place ---


@pytest.fixture(scope="module")
def serving(made: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The real extender, started with the config file the role renders for these keys."""
    from tests.extender.running import LOAD, Running, free_port, watcher_document

    tmp = tmp_path_factory.mktemp("serving")
    (tmp / "watcher.json").write_text(watcher_document(LOAD))
    listen, health = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    settings = {
        "loadwise_listen": listen,
        "loadwise_extender_health_listen": health,
        "loadwise_extender_tls_dir": str(made / "tls"),
        "loadwise_extender_source": "file",
        "loadwise_extender_source_file": str(tmp / "watcher.json"),
        "loadwise_cluster_objects": False,
    }
    config = _render(tmp, "-e", json.dumps(settings))
    proc = Running(config)
    try:
        yield {"proc": proc, "url": f"https://{listen}", "health": f"http://{health}"}
    finally:
        proc.stop()


def _scheduler_client(tls: Path, cert: str | None, key: str | None = None) -> httpx.Client:
    """As kube-scheduler with tlsConfig.caFile = scheduler/ca.crt (the host name checked
    against the server certificate's SANs) and certFile/keyFile = ``cert``/``key``."""
    ctx = ssl.create_default_context(cafile=str(tls / "scheduler/ca.crt"))
    if cert is not None:
        ctx.load_cert_chain(tls / cert, tls / (key or cert.replace(".crt", ".key")))
    return httpx.Client(verify=ctx, timeout=5)


BODY = '{"Pod": {"metadata": {"name": "p", "namespace": "default"}}, "NodeNames": ["n1", "n3"]}'


def test_the_scheduler_certificate_reaches_the_extender(
    serving: dict[str, Any], made: Path
) -> None:
    with _scheduler_client(made / "tls", "scheduler/client.crt") as client:
        r = client.post(f"{serving['url']}/scheduler/filter", content=BODY)
    assert r.status_code == 200, r.text
    assert sorted(r.json()["NodeNames"]) == ["n1", "n3"]
    # the same host name works as "localhost" (the certificate's other SAN)
    port = serving["url"].rsplit(":", 1)[1]
    with _scheduler_client(made / "tls", "scheduler/client.crt") as client:
        assert (
            client.post(f"https://localhost:{port}/scheduler/filter", content=BODY).status_code
            == 200
        )


@pytest.mark.parametrize(
    ("cert", "key"),
    [
        (None, None),
        # the extender's own certificate: the CA signed it, but for serverAuth only
        ("server.crt", "server.key"),
    ],
    ids=["no-certificate", "server-certificate-as-client"],
)
def test_other_callers_are_refused_over_tls(
    serving: dict[str, Any], made: Path, cert: str | None, key: str | None
) -> None:
    with _scheduler_client(made / "tls", cert, key) as client:
        with pytest.raises((httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)):
            client.post(f"{serving['url']}/scheduler/filter", content=BODY)


def test_a_certificate_from_another_ca_is_refused(
    serving: dict[str, Any], made: Path, tmp_path: Path
) -> None:
    """Another CA's scheduler certificate with the same name (another node's, or one made by
    whoever can write files somewhere): the extender checks who signed it, not the name."""
    from lab.pki import make_ca, make_cert

    make_ca(tmp_path, "other-ca", "loadwise extender CA (another node)")
    make_cert(tmp_path, "other", "other-ca", "/CN=kube-scheduler")
    ctx = ssl.create_default_context(cafile=str(made / "tls/ca.crt"))
    ctx.load_cert_chain(tmp_path / "other.crt", tmp_path / "other.key")
    with httpx.Client(verify=ctx, timeout=5) as client:
        with pytest.raises((httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)):
            client.post(f"{serving['url']}/scheduler/filter", content=BODY)
    # and a scheduler pinning that other CA does not trust this extender
    other = ssl.create_default_context(cafile=str(tmp_path / "other-ca.crt"))
    with httpx.Client(verify=other, timeout=5) as client:
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            client.post(f"{serving['url']}/scheduler/filter", content=BODY)


def test_plain_http_on_the_schedulers_port_is_refused(serving: dict[str, Any]) -> None:
    plain = serving["url"].replace("https://", "http://")
    try:
        r = httpx.post(f"{plain}/scheduler/filter", content=BODY, timeout=5)
    except (httpx.ReadError, httpx.RemoteProtocolError, httpx.ConnectError):
        return
    assert r.status_code == 400 and "NodeNames" not in r.text, r.text


def test_the_health_listener_answers_readiness_and_nothing_else(serving: dict[str, Any]) -> None:
    ready = httpx.get(f"{serving['health']}/readyz", timeout=5)
    assert ready.status_code == 200, ready.text
    assert httpx.get(f"{serving['health']}/metrics", timeout=5).status_code == 200
    filtered = httpx.post(f"{serving['health']}/scheduler/filter", content=BODY, timeout=5)
    assert filtered.status_code == 404, filtered.text


def test_the_role_config_file_names_the_keys_it_made(serving: dict[str, Any], made: Path) -> None:
    config = serving["proc"].config
    tls = made / "tls"
    assert config["tls"] == {
        "cert_file": str(tls / "server.crt"),
        "key_file": str(tls / "server.key"),
        "client_ca_file": str(tls / "ca.crt"),
        "client_names": ["kube-scheduler"],
    }
    # the one name the extender accepts is the common name of the client certificate made here
    subject = subprocess.run(
        ["openssl", "x509", "-noout", "-subject", "-nameopt", "multiline"],
        input=(tls / "scheduler/client.crt").read_text(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert re.search(r"commonName\s*=\s*kube-scheduler$", subject, re.MULTILINE), subject
    assert os.path.exists(config["tls"]["key_file"])
