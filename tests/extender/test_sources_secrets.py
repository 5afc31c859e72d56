"""A load source's credentials appear in no text the extender writes.

Each HTTP source (load-watcher, Prometheus) is given credentials three ways: in its URL
(``user:SECRET@``, as a source built without the config's check would have it), a
bearer token file, a basic-auth password file. Then it is made to
fail every way it can: nothing listening on its loopback port, an answer that is not
JSON, 401 and 500 with a body quoting what was sent (some servers do), no answer
within the timeout, an answer over the byte cap. ``SECRET`` must not be in the
exception, any log record, the /readyz body (served by the real app) or the status
line systemd would show (received on a real datagram socket).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import socket
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from loadwise.extender.config import load_settings
from loadwise.extender.exceptions import ConfigError, SourceError
from loadwise.extender.redact import redact, redact_url
from loadwise.extender.sdnotify import Notifier, keep_alive
from loadwise.extender.server import make_app
from loadwise.extender.service import Extender
from loadwise.extender.sources import LoadWatcherSource, PrometheusSource, Refresher
from loadwise.extender.sources.credentials import Credentials

SECRET = "Zq7-s3cret-Vx"
"""In every credential; a string no message would hold by chance."""

MODES = ["refused", "not-json", "401", "500", "timeout", "too-big"]
EXPECTED = {  # what the message says instead, so the failure is known to be the one meant
    "refused": "Cannot connect",
    "not-json": "not a ",
    "401": "HTTP 401",
    "500": "HTTP 500",
    "timeout": "timed out",
    "too-big": "(source.max_response_bytes)",
}


class Failing:
    """A source's server that fails as ``mode`` says, quoting back what it was sent."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.seen: list[str] = []

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/watcher", self.answer)
        app.router.add_get("/api/v1/query", self.answer)
        return app

    async def answer(self, request: web.Request) -> web.StreamResponse:
        auth = request.headers.get("Authorization", "")
        self.seen.append(auth)
        decoded = ""
        if auth.startswith("Basic "):
            decoded = base64.b64decode(auth[6:]).decode()
        echo = f"denied {auth!r} ({decoded}) for {request.path_qs}"
        if self.mode == "not-json":
            return web.Response(text=f"<html>{echo}</html>", content_type="text/html")
        if self.mode == "401":
            return web.Response(status=401, text=echo)
        if self.mode == "500":
            return web.Response(status=500, text=echo)
        if self.mode == "timeout":
            await asyncio.sleep(5)
        response = web.StreamResponse()  # too-big: 2 MiB of quoted secrets, streamed
        await response.prepare(request)
        with contextlib.suppress(ConnectionError):
            for _ in range(2 * 1024 * 1024 // 4096):
                await response.write((echo * 64)[:4096].encode())
        return response


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def build_source(
    kind: str, url: str, style: str, tmp_path: Path, timeout: float
) -> LoadWatcherSource | PrometheusSource:
    credentials = None
    if style == "url":
        host = url.split("://", 1)[1]
        url = f"http://user:{SECRET}@{host}"
    elif style == "bearer":
        (tmp_path / "token").write_text(SECRET + "\n")
        credentials = Credentials(bearer_token_file=str(tmp_path / "token"))
    else:
        (tmp_path / "password").write_text(SECRET + "\n")
        credentials = Credentials(username="user", password_file=str(tmp_path / "password"))
    if kind == "load-watcher":
        return LoadWatcherSource(
            url, timeout=timeout, credentials=credentials, max_bytes=1024 * 1024
        )
    return PrometheusSource(url, timeout=timeout, credentials=credentials, max_bytes=1024 * 1024)


@contextlib.asynccontextmanager
async def serving(app: web.Application | None) -> AsyncIterator[str]:
    """The base URL of ``app`` on loopback, or of a closed port when None."""
    if app is None:
        yield f"http://127.0.0.1:{closed_port()}"
        return
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield str(server.make_url("")).rstrip("/")
    finally:
        await server.close()


async def status_line(ext: Extender) -> str:
    """The STATUS= line keep_alive sends systemd, read from a real datagram socket."""
    short = tempfile.mkdtemp(prefix="lw-")  # a socket path fits in 108 bytes
    address = str(Path(short) / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as receiver:
        receiver.bind(address)
        receiver.settimeout(5)
        notifier = Notifier(address)
        task = asyncio.create_task(keep_alive(notifier, 60, lambda: ext.readiness()[1]))
        try:
            data = await asyncio.to_thread(receiver.recv, 65536)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            notifier.close()
    Path(address).unlink()
    Path(short).rmdir()
    lines = [line for line in data.decode().split("\n") if line.startswith("STATUS=")]
    assert lines, data
    return lines[0]


@pytest.mark.parametrize("style", ["url", "bearer", "basic"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", ["load-watcher", "prometheus"])
async def test_no_secret_in_any_text_whatever_the_failure(
    kind: str, mode: str, style: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    failing = Failing(mode)
    async with serving(None if mode == "refused" else failing.app()) as base:
        timeout = 0.5 if mode == "timeout" else 10.0
        source = build_source(kind, base, style, tmp_path, timeout)
        settings = load_settings(None, {"source.kind": kind, "source.url": base})
        ext = Extender(settings, source)
        try:
            with pytest.raises(SourceError) as raised:
                await source.fetch()
            await ext.refresher.refresh_once()  # the refresher logs the failure
            server = TestServer(make_app(ext), host="127.0.0.1")
            await server.start_server()
            try:
                async with httpx.AsyncClient(base_url=str(server.make_url(""))) as client:
                    readyz = (await client.get("/readyz")).text
            finally:
                await server.close()
            status = await status_line(ext)
        finally:
            await source.close()
    if mode != "refused":  # the credentials were sent: the test is not vacuous
        sent = failing.seen[0]
        if sent.startswith("Basic "):
            sent = base64.b64decode(sent[6:]).decode()
        assert sent in (f"Bearer {SECRET}", f"user:{SECRET}"), failing.seen
    message = str(raised.value)
    assert EXPECTED[mode] in message, message
    logged = [record.getMessage() for record in caplog.records]
    assert any(EXPECTED[mode] in text for text in logged), logged
    # the refresher polls on in the served app: its latest error is of the same kind
    assert f"no load snapshot from {kind}: " in readyz, readyz
    assert status.startswith(f"STATUS=no load snapshot from {kind}: "), status
    logged += [caplog.text]
    for text in (message, readyz, status, *logged):
        assert SECRET not in text, text
    if style == "url" and mode != "not-json":  # (a decoding error quotes no URL)
        assert "http://***@127.0.0.1:" in message, message  # shown, credentials masked


async def test_a_crashing_source_is_logged_without_its_secret(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Crashing:
        name = "crashing"

        async def fetch(self) -> None:
            raise RuntimeError(f"bug while reading http://user:{SECRET}@127.0.0.1:1/watcher")

        async def close(self) -> None:
            return None

    refresher = Refresher(Crashing(), interval=1, stale_after=1)  # type: ignore[arg-type]
    caplog.set_level(logging.DEBUG)
    await refresher.refresh_once()
    assert refresher.last_error and "RuntimeError: bug while reading" in refresher.last_error
    assert "Traceback" in caplog.text  # the traceback is still logged, masked
    assert SECRET not in caplog.text and SECRET not in refresher.last_error


def test_a_url_with_credentials_is_refused_by_the_config_without_showing_them() -> None:
    for url in (f"http://user:{SECRET}@127.0.0.1:2020", f"https://{SECRET}@prom:9090"):
        with pytest.raises(ConfigError) as raised:
            load_settings(None, {"source.kind": "prometheus", "source.url": url})
        message = str(raised.value)
        assert SECRET not in message
        assert "source.basic_auth.password_file" in message and "bearer_token_file" in message


@pytest.mark.parametrize(
    ("settings", "needle"),
    [
        (
            {
                "source.bearer_token_file": "/t",
                "source.basic_auth": {"username": "u", "password_file": "/p"},
            },
            "set one, not both",
        ),
        ({"source.basic_auth": {"username": "u:v", "password_file": "/p"}}, "must not hold ':'"),
        ({"source.basic_auth": {"username": "u", "password_file": ""}}, "empty path"),
        ({"source.kind": "file", "source.file": "/f", "source.bearer_token_file": "/t"}, "only"),
        ({"source.max_response_bytes": 100}, "source.max_response_bytes must be >= 1024"),
        ({"source.max_nodes": 0}, "source.max_nodes must be >= 1"),
    ],
)
def test_source_access_settings_are_checked(settings: dict[str, object], needle: str) -> None:
    base: dict[str, object] = {"source.kind": "load-watcher", "source.url": "http://127.0.0.1:2020"}
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        load_settings(None, {**base, **settings})


def test_credential_files_reach_the_source_through_the_config(tmp_path: Path) -> None:
    (tmp_path / "pw").write_text(SECRET)
    settings = load_settings(
        None,
        {
            "source.kind": "prometheus",
            "source.url": "http://127.0.0.1:9090",
            "source.basic_auth": {"username": "me", "password_file": str(tmp_path / "pw")},
        },
    )
    assert settings.source.basic_auth is not None
    assert settings.source.basic_auth.password_file == str(tmp_path / "pw")
    assert SECRET not in repr(settings)  # the config holds the file's name, not the secret


async def test_a_rotated_token_is_sent_from_the_next_request_on(tmp_path: Path) -> None:
    seen: list[str] = []

    async def watcher(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        return web.Response(status=503, text="warming up")

    app = web.Application()
    app.router.add_get("/watcher", watcher)
    token = tmp_path / "token"
    token.write_text("first-token\n")
    async with serving(app) as base:
        source = LoadWatcherSource(
            base, timeout=2, credentials=Credentials(bearer_token_file=str(token))
        )
        try:
            for _ in range(2):
                with pytest.raises(SourceError, match="HTTP 503"):
                    await source.fetch()
            rotated = tmp_path / "token.new"  # as a rotation writes it: a new file, renamed
            rotated.write_text("second-token\n")
            rotated.replace(token)
            with pytest.raises(SourceError, match="HTTP 503"):
                await source.fetch()
            token.unlink()
            with pytest.raises(SourceError, match="source.bearer_token_file .*token: No such file"):
                await source.fetch()
        finally:
            await source.close()
    assert seen == ["Bearer first-token"] * 2 + ["Bearer second-token"]


@pytest.mark.parametrize(
    ("content", "needle"),
    [("", "empty"), ("a\nb", "line break"), (b"\xff\xfe", "not UTF-8")],
)
def test_an_unusable_secret_file_is_named_not_shown(
    tmp_path: Path, content: str | bytes, needle: str
) -> None:
    path = tmp_path / "token"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with pytest.raises(SourceError, match=needle) as raised:
        Credentials(bearer_token_file=str(path)).header()
    assert str(path) in str(raised.value)
    assert "a\nb" not in str(raised.value)


def test_redact_masks_user_info_query_values_and_named_secrets() -> None:
    url = f"https://user:{SECRET}@prom.example:9090/api/v1/query?token={SECRET}&x#frag"
    assert redact_url(url) == "https://***@prom.example:9090/api/v1/query?token=***&***"
    text = f"GET {url}: HTTP 401 (token was {SECRET!r})."
    shown = redact(text, (SECRET,))
    assert SECRET not in shown
    assert shown.endswith("HTTP 401 (token was '***').")
    assert redact("no URL here: HTTP 500") == "no URL here: HTTP 500"
    assert redact_url("http://[::1") == "<URL not shown: not parseable>"
