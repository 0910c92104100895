"""HyperPod targets: point operator objects at the new versioned S3 location through the Kubernetes API.

A deployment that reads S3 is repointed at once: the inference operator notices a changed
``spec.modelSourceConfig.modelLocation`` (never an overwrite under the same path), builds the new weights cache,
rolls the deployment and deletes the old cache (pods may start before the new cache is ready). ``JumpStartModel``
has no S3 source: its ``spec.model.modelVersion`` takes the version folder name (which must then be ``x.y.z``).
A node-cached deployment changes version warm instead (:mod:`.warm`, driven by :mod:`..rollout`).

Authentication is the standard EKS token of the Lambda's role (:mod:`eks_auth`), which an EKS
access entry maps to a namespace-scoped RBAC Role. Writes are JSON
merge-patches carrying the ``metadata.resourceVersion`` read just before, so a concurrent change
makes the API server answer 409 instead of being overwritten.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from dataclasses import dataclass
from typing import Any, Protocol

import urllib3
from botocore.exceptions import ClientError

from ... import eks_auth
from ...node_cache import layout
from ..config import HyperPodTarget
from ..decide import Live
from ..errors import PermanentError, TransientError
from ..events import ManifestCreated, location_version
from ..versions import UnorderableVersion, newer

GROUP_VERSION = "inference.sagemaker.aws.amazon.com/v1"
API = {"InferenceEndpointConfig": (f"/apis/{GROUP_VERSION}", "inferenceendpointconfigs"),
       "JumpStartModel": (f"/apis/{GROUP_VERSION}", "jumpstartmodels"),
       "DaemonSet": ("/apis/apps/v1", "daemonsets"), "Pod": ("/api/v1", "pods")}
"""Kind -> (API path, plural) of every namespaced object the refresh reads or patches."""
_JUMPSTART_VERSION = re.compile(r"^\d{1,4}\.\d{1,4}\.\d{1,4}\Z")
CONFLICT_RETRIES = 3


def cluster_access(cluster: str, region: str) -> tuple[str, str]:
    """(API endpoint, CA bundle PEM) of the cluster; a missing cluster is permanent, any other error transient."""
    try:
        return eks_auth.cluster_access(cluster, region)
    except ClientError as exc:
        code = exc.response["Error"]["Code"]
        if code == "ResourceNotFoundException":
            raise PermanentError("target-not-found", f"EKS cluster {cluster} not found") from None
        raise TransientError("eks-unavailable", f"DescribeCluster {cluster}: {code}") from None


class Kube(Protocol):
    """What a warm version change calls: :class:`KubeApi`, or the tests' cluster model."""

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any]: ...

    def merge_patch(self, kind: str, namespace: str, name: str, patch: dict[str, Any]) -> tuple[int, dict[str, Any]]: ...

    def items(self, kind: str, namespace: str) -> list[dict[str, Any]]: ...

    def nodes(self, selector: dict[str, str]) -> list[dict[str, Any]]: ...


@dataclass
class KubeApi:
    """A minimal Kubernetes API client: GET, list and merge-PATCH of namespaced objects, and a node list."""

    endpoint: str
    ca_pem: str
    token: str
    timeout: float = 10.0

    def __post_init__(self) -> None:
        self._http = urllib3.PoolManager(cert_reqs="CERT_REQUIRED", ca_cert_data=self.ca_pem,
                                         retries=urllib3.Retry(total=2, connect=2, read=0, status=0),
                                         timeout=urllib3.Timeout(total=self.timeout))

    def _path(self, kind: str, namespace: str, name: str = "") -> str:
        api, plural = API[kind]
        collection = f"{self.endpoint.rstrip('/')}{api}/namespaces/{namespace}/{plural}"
        return f"{collection}/{name}" if name else collection

    def _call(self, method: str, url: str, body: dict[str, Any] | None = None,
              content_type: str = "application/json") -> tuple[int, dict[str, Any]]:
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        try:
            resp = self._http.request(method, url, headers=headers,
                                      body=json.dumps(body).encode() if body is not None else None)
        except urllib3.exceptions.HTTPError as exc:
            raise TransientError("target-unreachable", f"{method} {url}: {exc}") from None
        try:
            data = json.loads(resp.data or b"{}")
        except ValueError:
            data = {}
        return resp.status, data

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any]:
        status, data = self._call("GET", self._path(kind, namespace, name))
        _raise_for(status, data, f"{kind} {namespace}/{name}")
        return data

    def merge_patch(self, kind: str, namespace: str, name: str, patch: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        status, data = self._call("PATCH", self._path(kind, namespace, name), patch, "application/merge-patch+json")
        if status != 409:
            _raise_for(status, data, f"{kind} {namespace}/{name}")
        return status, data

    def items(self, kind: str, namespace: str) -> list[dict[str, Any]]:
        """Every object of ``kind`` in ``namespace`` (one page: a namespace's pods fit one answer)."""
        status, data = self._call("GET", self._path(kind, namespace))
        _raise_for(status, data, f"{kind} list in {namespace}")
        return list(data.get("items") or [])

    def nodes(self, selector: dict[str, str]) -> list[dict[str, Any]]:
        """The cluster's nodes carrying every label of ``selector`` (a ``labelSelector`` of equalities)."""
        query = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
        url = f"{self.endpoint.rstrip('/')}/api/v1/nodes" + (f"?labelSelector={urllib.parse.quote(query)}" if query else "")
        status, data = self._call("GET", url)
        _raise_for(status, data, f"nodes {query}")
        return list(data.get("items") or [])


def _raise_for(status: int, data: dict[str, Any], what: str) -> None:
    if 200 <= status < 300:
        return
    message = f"{what}: HTTP {status} {data.get('message', '')}".strip()
    if status == 404:
        raise PermanentError("target-not-found", message)
    if status in (401, 403):
        raise PermanentError("target-forbidden", message)
    if status in (400, 422):
        raise PermanentError("target-rejected", message)
    raise TransientError("target-unavailable", message)


def served_version(kind: str, obj: dict[str, Any], prefix: str, buckets: frozenset[str]) -> str | None:
    """The version folder of ``prefix`` the object's live spec reads (None: it reads none)."""
    spec = obj.get("spec") or {}
    if kind == "JumpStartModel":
        version = (spec.get("model") or {}).get("modelVersion")
        return version if isinstance(version, str) else None
    source = spec.get("modelSourceConfig") or {}
    if (source.get("s3Storage") or {}).get("bucketName") not in buckets:
        return None
    location = source.get("modelLocation")
    return location_version(location, prefix) if isinstance(location, str) else None


def source_patch(kind: str, obj: dict[str, Any], event: ManifestCreated) -> dict[str, Any] | None:
    """The spec change that points ``obj`` at the event's version, or None when it already does or when
    it serves a newer version (a concurrent or later refresh got there first: never move it back)."""
    spec = obj.get("spec", {})
    name = obj.get("metadata", {}).get("name")
    serving = served_version(kind, obj, event.prefix, frozenset({event.bucket}))
    try:
        if serving is not None and serving != event.version and newer(serving, event.version):
            return None
    except UnorderableVersion as exc:
        raise PermanentError("unorderable-version", f"{kind} {name}: {exc}") from None
    if kind == "JumpStartModel":
        if not _JUMPSTART_VERSION.match(event.version):
            raise PermanentError("target-rejected", f"JumpStartModel {name}: version {event.version!r} is not x.y.z")
        if spec.get("model", {}).get("modelVersion") == event.version:
            return None
        return {"model": {"modelVersion": event.version}}
    source = spec.get("modelSourceConfig") or {}
    if source.get("modelSourceType") != "s3":
        raise PermanentError("target-rejected", f"{kind} {name}: model source is {source.get('modelSourceType')!r}, not s3")
    if source.get("modelLocation") == event.location and source.get("s3Storage", {}).get("bucketName") == event.bucket:
        return None
    patch: dict[str, Any] = {"modelSourceConfig": {"s3Storage": {"bucketName": event.bucket},
                                                   "modelLocation": event.location}}
    if kind == "InferenceEndpointConfig":
        patch["modelVersion"] = event.version
    return patch


def repoint(kube: Kube, kind: str, namespace: str, name: str, event: ManifestCreated) -> bool:
    """GET, then merge-patch with the resourceVersion just read; re-read on 409. True if it changed."""
    for _ in range(CONFLICT_RETRIES):
        obj = kube.get(kind, namespace, name)
        spec_patch = source_patch(kind, obj, event)
        if spec_patch is None:
            return False
        patch = {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]}, "spec": spec_patch}
        status, _ = kube.merge_patch(kind, namespace, name, patch)
        if status != 409:
            return True
    raise TransientError("target-conflict", f"{kind} {namespace}/{name}: changed concurrently {CONFLICT_RETRIES} times")


def kube_for(target: HyperPodTarget, region: str) -> KubeApi:
    endpoint, ca = cluster_access(target.cluster, region)
    return KubeApi(endpoint, ca, eks_auth.eks_token(target.cluster, region))


def live(target: HyperPodTarget, prefix: str, buckets: frozenset[str], region: str,
         kube: KubeApi | None = None) -> Live:
    """What the deployment object serves now, from its live spec (a node-cached one: its volume's version)."""
    kube = kube or kube_for(target, region)
    obj = kube.get(target.resource, target.namespace, target.name)
    if target.node_cache is not None:
        return Live(served_from_node_cache(target, obj))
    return Live(served_version(target.resource, obj, prefix, buckets))


def node_cache_volumes(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The deployment's own volumes (``spec.kubernetes.volumes``)."""
    return list((spec.get("kubernetes") or {}).get("volumes") or [])


def served_from_node_cache(target: HyperPodTarget, obj: dict[str, Any]) -> str | None:
    """The version a node-cached deployment's pods read: its model volume's directory (None: not the cache's)."""
    assert target.node_cache is not None
    for volume in node_cache_volumes(obj.get("spec") or {}):
        if volume.get("name") == layout.MODEL_VOLUME:
            path = str((volume.get("hostPath") or {}).get("path") or "")
            return layout.version_of_path(path, target.node_cache.host_path, target.node_cache.model)
    return None


def apply(target: HyperPodTarget, event: ManifestCreated, region: str, kube: KubeApi | None = None) -> list[str]:
    """Repoint the deployment at once (no node cache to stage in); returns the ``Kind/name`` changed."""
    kube = kube or kube_for(target, region)
    changed = repoint(kube, target.resource, target.namespace, target.name, event)
    return [f"{target.resource}/{target.name}"] if changed else []
