"""Reading the cluster: GETs of Kubernetes lists and of pod pages, with the role's EKS token (:mod:`eks_auth`)."""

from __future__ import annotations

import json
from typing import Any

import urllib3


class ScrapeError(RuntimeError):
    """A pod's metrics could not be read through the API server's pod proxy."""


class KubeReader:
    """GETs of Kubernetes lists (no paging: a cluster's caches, pods and nodes fit one answer) and of pods' pages."""

    def __init__(self, endpoint: str, ca_pem: str, token: str, timeout: float = 10.0, maxsize: int = 1) -> None:
        """``maxsize``: connections kept for reuse, at least the threads that read at once (else urllib3
        discards the surplus, logging "Connection pool is full")."""
        self._endpoint = endpoint.rstrip("/")
        self._token = token
        self._http = urllib3.PoolManager(cert_reqs="CERT_REQUIRED", ca_cert_data=ca_pem, maxsize=maxsize,
                                         retries=urllib3.Retry(total=2, status=0),
                                         timeout=urllib3.Timeout(total=timeout))

    def items(self, path: str) -> list[dict[str, Any]]:
        resp = self._http.request("GET", self._endpoint + path, headers={
            "Authorization": f"Bearer {self._token}", "Accept": "application/json"})
        if resp.status != 200:
            raise RuntimeError(f"GET {path}: HTTP {resp.status} {resp.data[:200]!r}")
        items: list[dict[str, Any]] = json.loads(resp.data)["items"]
        return items

    def pod_text(self, namespace: str, pod: str, port: int, path: str, timeout: float) -> str:
        """A pod's HTTP page through the API server's pod proxy (RBAC: ``get`` on ``pods/proxy``); the
        API server connects to the pod's IP on ``port``. No retries: the next minute tries again."""
        url = f"{self._endpoint}/api/v1/namespaces/{namespace}/pods/{pod}:{port}/proxy{path}"
        try:
            resp = self._http.request("GET", url, headers={"Authorization": f"Bearer {self._token}"},
                                      retries=False, timeout=urllib3.Timeout(total=timeout))
        except urllib3.exceptions.HTTPError as error:
            raise ScrapeError(f"GET {namespace}/{pod}:{port}{path}: {error}") from None
        if resp.status != 200:
            raise ScrapeError(f"GET {namespace}/{pod}:{port}{path}: HTTP {resp.status} {resp.data[:200]!r}")
        return resp.data.decode("utf-8", errors="replace")
