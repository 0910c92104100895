"""Reading the cluster: the EKS bearer token, the API endpoint, GETs of Kubernetes lists and of pod pages.

The token is the one ``aws eks get-token`` prints: ``k8s-aws-v1.`` + base64url of an STS
GetCallerIdentity URL presigned with the header ``x-k8s-aws-id: <cluster>``. The refresh function has
the same few lines (``cache_refresh.targets.hyperpod``); each function's asset holds only its own
top-level package, so neither can import the other.
"""

from __future__ import annotations

import base64
import json
from functools import lru_cache
from typing import Any

import boto3
import urllib3
from botocore.signers import RequestSigner

TOKEN_SECONDS = 60


class ScrapeError(RuntimeError):
    """A pod's metrics could not be read through the API server's pod proxy."""


def eks_token(cluster: str, region: str) -> str:
    session = boto3.Session()
    sts = session.client("sts", region_name=region)
    signer = RequestSigner(sts.meta.service_model.service_id, region, "sts", "v4",
                           session.get_credentials(), session.events)
    url = signer.generate_presigned_url(
        {"method": "GET", "url": f"https://sts.{region}.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15",
         "body": {}, "headers": {"x-k8s-aws-id": cluster}, "context": {}},
        region_name=region, expires_in=TOKEN_SECONDS, operation_name="")
    return "k8s-aws-v1." + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


@lru_cache(maxsize=4)
def cluster_access(cluster: str, region: str) -> tuple[str, str]:
    """(API endpoint, CA bundle PEM) from eks:DescribeCluster, cached for the container's life."""
    info = boto3.client("eks", region_name=region).describe_cluster(name=cluster)["cluster"]
    return info["endpoint"], base64.b64decode(info["certificateAuthority"]["data"]).decode()


class KubeReader:
    """GETs of Kubernetes lists (no paging: a cluster's caches, pods and nodes fit one answer) and of pods' pages."""

    def __init__(self, endpoint: str, ca_pem: str, token: str, timeout: float = 10.0) -> None:
        self._endpoint = endpoint.rstrip("/")
        self._token = token
        self._http = urllib3.PoolManager(cert_reqs="CERT_REQUIRED", ca_cert_data=ca_pem,
                                         retries=urllib3.Retry(total=2, status=0),
                                         timeout=urllib3.Timeout(total=timeout))

    def items(self, path: str) -> list[dict[str, Any]]:
        resp = self._http.request("GET", self._endpoint + path, headers={
            "Authorization": f"Bearer {self._token}", "Accept": "application/json"})
        if resp.status != 200:
            raise RuntimeError(f"GET {path}: HTTP {resp.status} {resp.data[:200]!r}")
        return json.loads(resp.data)["items"]

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
