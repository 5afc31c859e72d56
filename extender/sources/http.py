"""One bounded HTTP GET for the load sources that speak HTTP (load-watcher, Prometheus).

Bounded three ways, because whoever answers on the source's address decides what the
extender reads (in service mode load-watcher listens on 127.0.0.1:2020, a port any
local user can bind while load-watcher restarts):

- the body is read in chunks and the read stops past ``max_bytes``, counted after
  decompression (aiohttp inflates gzip and deflate as it reads, so a small compressed
  answer cannot grow past the cap either); a ``Content-Length`` above it fails before
  any of the body is read. An unbounded ``read()`` of a 300 MB document took the
  extender to 653 MB;
- the time: ``timeout`` for the whole exchange;
- redirects are not followed: credentials go to the configured address and nowhere
  else, and neither load-watcher nor Prometheus' query API redirects.

Every error is a SourceError whose message shows the URL without credentials or query
values (``redact``), and masks the secrets the credentials hold.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from urllib.parse import parse_qsl, unquote, urlsplit

import aiohttp

from ..exceptions import SourceError
from ..kubeapi import mebibytes
from ..redact import redact_url
from .credentials import Credentials

__all__ = ["CHUNK_BYTES", "HTTPReader", "mebibytes"]

CHUNK_BYTES = 64 * 1024
"""What one read takes from the stream at most (aiohttp's own buffer limit is 64 KiB)."""


def _url_secrets(url: str) -> tuple[str, ...]:
    """The password and query values ``url`` holds, as sent (decoded) and as written."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return ()
    values = [value for _key, value in parse_qsl(parts.query)]
    raw = [pair.partition("=")[2] for pair in parts.query.split("&")]
    secrets = (password, unquote(password or ""), *values, *raw)
    return tuple(v for v in secrets if v)


class HTTPReader:
    """GETs of ``url`` with the credentials' header, each answer read up to ``max_bytes``.
    ``what`` names the source in messages (``load-watcher``, ``Prometheus``)."""

    def __init__(
        self,
        url: str,
        *,
        what: str,
        timeout: float,
        max_bytes: int,
        credentials: Credentials | None = None,
    ) -> None:
        self.url = url
        self.shown_url = redact_url(url)
        self._url_secrets = _url_secrets(url)
        self.what = what
        self.max_bytes = max_bytes
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._credentials = credentials or Credentials()
        self._session: aiohttp.ClientSession | None = None

    def _error(self, message: str) -> SourceError:
        # a server may echo what it was sent (its error page quoting the request)
        return SourceError(message, secrets=self._credentials.secrets() + self._url_secrets)

    def _too_big(self) -> SourceError:
        return self._error(
            f"{self.what} response over {mebibytes(self.max_bytes)} "
            f"(source.max_response_bytes): GET {self.shown_url}"
        )

    async def get(self, params: Mapping[str, str] | None = None) -> bytearray:
        """The body of a 200 answer; SourceError for anything else."""
        headers = {}
        auth = self._credentials.header()  # SourceError when a file is unusable
        if auth is not None:
            headers["Authorization"] = auth
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        try:
            async with self._session.get(
                self.url, params=params, headers=headers, allow_redirects=False
            ) as response:
                if response.status != 200:
                    excerpt = await response.content.read(200)
                    raise self._error(
                        f"GET {self.shown_url}: HTTP {response.status}: "
                        f"{excerpt.decode(errors='replace')!r}"
                    )
                length = response.content_length
                if length is not None and length > self.max_bytes:
                    raise self._too_big()
                body = bytearray()
                async for chunk in response.content.iter_chunked(CHUNK_BYTES):
                    if len(body) + len(chunk) > self.max_bytes:
                        raise self._too_big()
                    body += chunk
        except aiohttp.ClientError as exc:
            # str(exc) may quote the URL with its credentials: masked by SourceError
            raise self._error(f"GET {self.shown_url}: {exc}") from None
        except asyncio.TimeoutError:
            raise self._error(f"GET {self.shown_url}: timed out") from None
        return body

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
