"""The small part of the Kubernetes API the extender uses, on the official client.

The client handles kubeconfig loading and authentication (client certs, tokens,
exec plugins). Bodies are fetched raw and decoded with msgspec into the few
fields we need: building the client's model objects for every pod in a watch
would cost far more CPU than the decisions themselves.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import msgspec
import urllib3

from .exceptions import KubeError

__all__ = ["KubeAPI", "KubeError"]


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
        self, path: str, query: Mapping[str, str] | None = None, timeout: float = 10.0
    ) -> bytes:
        response = self._request("GET", path, query, timeout=timeout)
        data = response.read()
        if response.status != 200:
            raise KubeError(f"GET {path}: HTTP {response.status}: {data[:300]!r}", response.status)
        return bytes(data)

    def post(self, path: str, obj: Any, timeout: float = 10.0) -> bytes:
        response = self._request("POST", path, body=msgspec.to_builtins(obj), timeout=timeout)
        data = response.read()
        if response.status not in (200, 201):
            raise KubeError(f"POST {path}: HTTP {response.status}: {data[:300]!r}", response.status)
        return bytes(data)

    def watch_lines(
        self, path: str, query: Mapping[str, str], timeout_seconds: int
    ) -> Iterator[bytes]:
        """Yield the newline-delimited watch events of ``GET path?watch=true``."""
        params = dict(query, watch="true", timeoutSeconds=str(timeout_seconds))
        response = self._request("GET", path, params, timeout=(10.0, timeout_seconds + 30.0))
        if response.status != 200:
            data = response.read()
            raise KubeError(
                f"watch {path}: HTTP {response.status}: {data[:300]!r}", response.status
            )
        raw = response.response
        buffer = b""
        try:
            for chunk in raw.stream(65536, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield line
            if buffer.strip():
                yield buffer
        except urllib3.exceptions.HTTPError as exc:  # the stream broke off
            raise KubeError(f"watch {path}: {exc}") from None
        finally:
            raw.release_conn()

    def close(self) -> None:
        # the official client's functions carry no annotations (pyproject: mypy overrides)
        self._client.close()  # type: ignore[no-untyped-call]
