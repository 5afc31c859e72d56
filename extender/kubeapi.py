"""The small part of the Kubernetes API the extender uses, on the official client.

The client handles kubeconfig loading and authentication (client certs, tokens,
exec plugins). Bodies are fetched raw and decoded with msgspec into the few
fields we need: building the client's model objects for every pod in a watch
would cost far more CPU than the decisions themselves.

Every body is read in chunks up to a byte cap, and the read stops there: the API
server is authenticated, but an aggregated API (metrics.k8s.io is metrics-server
behind it) answers with whatever its own server sends, and the client would otherwise
hold all of it in memory before anyone could look at its size.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import msgspec
import urllib3

from .exceptions import KubeError

__all__ = ["CHUNK_BYTES", "DEFAULT_MAX_READ_BYTES", "KubeAPI", "KubeError", "mebibytes"]

CHUNK_BYTES = 64 * 1024
"""What one read takes from a response stream at most."""

DEFAULT_MAX_READ_BYTES = 64 * 1024 * 1024
"""The cap of a read whose caller names none: a list page of the reflector (500 objects;
etcd refuses an object over 1.5 MiB, its default --max-request-bytes, but a Pod or Node
is a few KiB, so a page is a few MiB) and a POST's answer. The load sources pass their
own, source.max_response_bytes."""


def mebibytes(count: int) -> str:
    """``16 MiB``, or the bytes when not a whole number of MiB."""
    return f"{count // 2**20} MiB" if count % 2**20 == 0 else f"{count} bytes"


class KubeAPI:
    def __init__(self, kubeconfig: str | None, context: str | None = None) -> None:
        import yaml
        from kubernetes import client, config
        from kubernetes.client.exceptions import ApiException

        configuration = client.Configuration()
        try:
            if kubeconfig:
                # the official client's loaders carry no annotations
                config.load_kube_config(  # type: ignore[no-untyped-call]
                    config_file=kubeconfig, context=context, client_configuration=configuration
                )
            else:
                config.load_incluster_config(  # type: ignore[no-untyped-call]
                    client_configuration=configuration
                )
        except (config.ConfigException, OSError, ValueError, yaml.YAMLError) as exc:
            raise KubeError(
                f"cannot load kubeconfig {kubeconfig or '(in-cluster)'}: {exc}"
            ) from None
        # What a request can raise: the client's own error (it wraps SSL errors),
        # urllib3's (timeouts, refused connections, broken streams), sockets'.
        self._failures = (ApiException, urllib3.exceptions.HTTPError, OSError)
        self.host = configuration.host
        self._client = client.ApiClient(configuration)

    def _request(
        self,
        method: str,
        path: str,
        query: Mapping[str, str | int] | None = None,
        body: Any = None,
        timeout: float | tuple[float, float] = 10.0,
    ) -> Any:
        params = self._client.param_serialize(
            method,
            path,
            query_params=list((query or {}).items()),
            header_params={"Accept": "application/json", "Content-Type": "application/json"},
            body=body,
            auth_settings=["BearerToken"],
        )
        method_, url, headers, body_, post = params
        try:
            return self._client.call_api(
                method_,
                url,
                header_params=headers,
                body=body_,
                post_params=post,
                _request_timeout=timeout,
            )
        except self._failures as exc:
            raise KubeError(f"{method} {path}: {exc}") from None

    def get(
        self,
        path: str,
        query: Mapping[str, str] | None = None,
        timeout: float = 10.0,
        *,
        max_bytes: int = DEFAULT_MAX_READ_BYTES,
        cap_name: str = "the API client's read cap",
    ) -> bytes:
        """The body of a 200 answer to ``GET path?query``, read up to ``max_bytes``;
        KubeError for anything else, one naming ``max_bytes`` and ``cap_name`` (the setting
        that sets it) when the body is larger: the read stops there."""
        response = self._request("GET", path, query, timeout=timeout)
        if response.status != 200:
            data = self._read(response, f"GET {path}", 300, "")
            raise KubeError(f"GET {path}: HTTP {response.status}: {data[:300]!r}", response.status)
        return self._read(response, f"GET {path}", max_bytes, cap_name)

    def _read(self, response: Any, request: str, max_bytes: int, cap_name: str) -> bytes:
        """At most ``max_bytes`` of the body; KubeError past it, unless ``cap_name`` is
        empty (an error page's excerpt: what fits is all that is wanted)."""
        raw = response.response
        too_big = KubeError(
            f"{request}: response over {mebibytes(max_bytes)} ({cap_name}); the read stopped there",
            response.status,
        )
        body = bytearray()
        try:
            length = raw.headers.get("Content-Length")
            if cap_name and length is not None and length.isdigit() and int(length) > max_bytes:
                raise too_big
            # counted as decoded: the client sends no Accept-Encoding, so the API server
            # answers uncompressed, and a compressed answer is counted after inflating
            for chunk in raw.stream(CHUNK_BYTES, decode_content=True):
                if len(body) + len(chunk) > max_bytes:
                    if not cap_name:
                        body += chunk[: max_bytes - len(body)]
                        break
                    raise too_big
                body += chunk
        except self._failures as exc:  # the stream broke off
            raise KubeError(f"{request}: {exc}") from None
        finally:
            raw.release_conn()
        return bytes(body)

    def post(self, path: str, obj: Any, timeout: float = 10.0) -> bytes:
        response = self._request("POST", path, body=msgspec.to_builtins(obj), timeout=timeout)
        if response.status not in (200, 201):
            data = self._read(response, f"POST {path}", 300, "")
            raise KubeError(f"POST {path}: HTTP {response.status}: {data[:300]!r}", response.status)
        return self._read(
            response, f"POST {path}", DEFAULT_MAX_READ_BYTES, "the API client's read cap"
        )

    def watch_lines(
        self, path: str, query: Mapping[str, str], timeout_seconds: int
    ) -> Iterator[bytes]:
        """Yield the newline-delimited watch events of ``GET path?watch=true``."""
        params = dict(query, watch="true", timeoutSeconds=str(timeout_seconds))
        response = self._request("GET", path, params, timeout=(10.0, timeout_seconds + 30.0))
        if response.status != 200:
            data = self._read(response, f"watch {path}", 300, "")
            raise KubeError(
                f"watch {path}: HTTP {response.status}: {data[:300]!r}", response.status
            )
        raw = response.response
        buffer = b""
        try:
            for chunk in raw.stream(CHUNK_BYTES, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield line
                # one event is one object: a line longer than any read may be is not one
                if len(buffer) > DEFAULT_MAX_READ_BYTES:
                    raise KubeError(
                        f"watch {path}: an event over {mebibytes(DEFAULT_MAX_READ_BYTES)} "
                        "(the API client's read cap); the read stopped there"
                    )
            if buffer.strip():
                yield buffer
        except urllib3.exceptions.HTTPError as exc:  # the stream broke off
            raise KubeError(f"watch {path}: {exc}") from None
        finally:
            raw.release_conn()

    def close(self) -> None:
        # the official client's functions carry no annotations (pyproject: mypy overrides)
        self._client.close()  # type: ignore[no-untyped-call]
