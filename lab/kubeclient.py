"""The official Kubernetes client for one admin kubeconfig, shared by the lab's two clusters:
the lab's own control plane (lab.cluster.Lab) and the real-node cluster (lab.realnodes)."""

from __future__ import annotations

from typing import Any


class AdminClient:
    """kubernetes.client objects for the subclass's `kubeconfig`, made on first use and kept
    until `close()`."""

    _api: Any = None

    @property
    def kubeconfig(self) -> str:
        raise NotImplementedError

    def api_client(self) -> Any:
        """A kubernetes.client.ApiClient for the admin kubeconfig."""
        if self._api is None:
            from kubernetes import config

            # kubernetes.config's functions carry no annotations
            self._api = config.new_client_from_config(  # type: ignore[no-untyped-call]
                config_file=self.kubeconfig
            )
        return self._api

    def core(self) -> Any:
        """A kubernetes.client.CoreV1Api with the admin identity."""
        from kubernetes import client

        return client.CoreV1Api(self.api_client())

    def close(self) -> None:
        if self._api is not None:
            self._api.close()
            self._api = None
