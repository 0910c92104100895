"""hyperwarm's node cache: where a model version lies on a node, how a node says it is complete, and which
versions a model's filler keeps. One definition for the three programs that share it (standard library only):

- the caches construct renders each model's filler DaemonSet and the deployment that reads the cache;
- the filler (:mod:`.fill`, one pod per node) fills ``<hostPath>/hyperwarm/<model>/<version>``, verifies every
  file against the version's manifest, and only then labels its node :func:`ready_label`;
- the refresh's warm rollout adds the new version to the filler's list, waits for the labels, repoints the
  deployment (volume path and required node affinity), and drops the old version from the list.

Why a directory of our own: AWS documents the operator's weights cache as a per-deployment directory that the
deployment's own pods read, and ``modelSourceType: kubernetesVolume`` as reading a hostPath you fill yourself
("Deploy models from local NVMe storage", SageMaker developer guide). A pod of a version is placed only on a
node labelled ready for that version (required affinity), so it never starts cold.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

ROOT = "hyperwarm"
"""Below the instance store's mount (``hostPath``): ``<hostPath>/hyperwarm/<model>/<version>``."""
LABEL_DOMAIN = "weights.hyperwarm.io"
"""Node labels ``weights.hyperwarm.io/<model>.<version slug>-<digest>``: the only labels a filler may change."""
VERSIONS_ANNOTATION = "hyperwarm.io/versions"
"""On the filler's pod template: the versions to keep on every node, serving first (JSON, :func:`versions_json`)."""
VERSIONS_ENV = "HYPERWARM_NODE_CACHE_VERSIONS"
"""The filler reads :data:`VERSIONS_ANNOTATION` through the downward API into this variable."""
MODEL_ENV = "HYPERWARM_NODE_CACHE_MODEL"
NODE_ENV = "HYPERWARM_NODE_NAME"
NAMESPACE_ENV = "HYPERWARM_NAMESPACE"
HEADROOM_ENV = "HYPERWARM_NVME_HEADROOM_PERCENT"
MOUNT = "/cache"
"""Where the filler sees ``<hostPath>/hyperwarm/<model>``."""
STATUS_DIR = "/run/hyperwarm"
"""The filler's own scratch (an emptyDir): :data:`READY_FILE` while every listed version is complete and labelled."""
READY_FILE = f"{STATUS_DIR}/ready"
COMPLETE = ".hyperwarm-complete"
"""Written last into a version's directory: its file list (and the list's digest) and the SHA-256 of the manifest it
was filled from. A directory without it is not a copy."""
PARTIAL = ".partial-"
"""A version being filled is ``.partial-<version>``, renamed to ``<version>`` once verified (an atomic rename)."""
MODEL_VOLUME = "model-weights"
"""The deployment's volume (``worker.modelVolumeMount.name`` = a ``kubernetes.volumes`` entry: the operator
requires the two names to match, and rejects ``modelLocation`` with ``kubernetesVolume``)."""
MAX_VERSIONS = 2
"""The serving version and the one staged beside it: what the NVMe capacity guard reserves for a refreshed model."""
FILLER_PREFIX = "hyperwarm-fill-"
GROUP_LABEL = "sagemaker.amazonaws.com/instance-group-name"
"""HyperPod's label of a node's instance group: the filler and the deployment both require their group's nodes."""
DEFAULT_HOST_PATH = "/opt/dlami/nvme"
"""Where HyperPod mounts the local NVMe instance store."""
_NAME_MAX = 63
_DIGEST = 8
_NOT_LABEL = re.compile(r"[^a-z0-9]+")


def model_dir(host_path: str, model: str) -> str:
    """``<hostPath>/hyperwarm/<model>``: the filler's whole world on a node."""
    return f"{host_path.rstrip('/')}/{ROOT}/{model}"


def version_dir(host_path: str, model: str, version: str) -> str:
    """The directory one version's files lie in on every node (the deployment's hostPath volume)."""
    return f"{model_dir(host_path, model)}/{version}"


def version_of_path(path: str, host_path: str, model: str) -> str | None:
    """The version a hostPath volume of ``model`` reads, or None when it is not one of this cache's directories."""
    stem = model_dir(host_path, model) + "/"
    rest = path[len(stem):] if path.startswith(stem) else ""
    return rest if rest and "/" not in rest and not rest.startswith(".") else None


def model_and_version(path: str) -> tuple[str, str] | None:
    """(model, version) of any node-cache directory ``.../hyperwarm/<model>/<version>``, whatever its hostPath."""
    parts = path.rstrip("/").split("/")
    if len(parts) >= 3 and parts[-3] == ROOT and parts[-2] and parts[-1] and not parts[-1].startswith("."):
        return parts[-2], parts[-1]
    return None


def label_prefix(model: str) -> str:
    """Every ready label of ``model``'s versions starts with this (model names hold no dot)."""
    return f"{LABEL_DOMAIN}/{model}."


@functools.lru_cache(maxsize=256)  # asked for every node and version on every step; a pure function of both
def ready_label(model: str, version: str) -> str:
    """The node label that says ``version`` of ``model`` is complete and verified on that node (value ``true``).
    Its name part is at most 63 characters: the model, a slug of the version, a digest of both."""
    digest = hashlib.sha256(f"{model}|{version}".encode()).hexdigest()[:_DIGEST]
    room = _NAME_MAX - len(model) - 1 - 1 - _DIGEST
    slug = _NOT_LABEL.sub("-", version.lower()).strip("-")[:max(room, 0)].strip("-")
    return f"{label_prefix(model)}{slug}-{digest}" if slug else f"{label_prefix(model)}{digest}"


def filler_name(model: str) -> str:
    """The model's filler DaemonSet (model names are at most 40 characters)."""
    return f"{FILLER_PREFIX}{model}"[:_NAME_MAX]


@dataclass(frozen=True)
class Version:
    """One version a filler keeps: ``s3://<bucket>/<location>/`` with its ``manifest.json``."""

    version: str
    bucket: str
    location: str
    region: str = ""
    """The bucket's region. Default: the filler's own (``AWS_REGION``)."""
    manifest: str = ""
    """SHA-256 (hex) of the one manifest the filler may fill from: the one the refresh admitted (signed, verified);
    a manifest overwritten since is refused. Default: none pinned (the version a deploy names)."""

    def to_json(self) -> dict[str, str]:
        out = {"version": self.version, "bucket": self.bucket, "location": self.location}
        return {**out, **({"region": self.region} if self.region else {}),
                **({"manifest": self.manifest} if self.manifest else {})}

    @classmethod
    def from_json(cls, raw: Any) -> Version:
        if not isinstance(raw, dict) or not all(isinstance(raw.get(k), str) and raw.get(k)
                                                for k in ("version", "bucket", "location")):
            raise ValueError(f"a node-cache version needs the strings version, bucket and location, got {raw!r}")
        manifest = str(raw.get("manifest") or "")
        if manifest and not re.fullmatch(r"[0-9a-f]{64}", manifest):
            raise ValueError(f"a node-cache version's manifest is a SHA-256 in hex, got {manifest!r}")
        return cls(raw["version"], raw["bucket"], raw["location"], str(raw.get("region") or ""), manifest)


def versions_json(versions: list[Version]) -> str:
    """The :data:`VERSIONS_ANNOTATION` value: at most :data:`MAX_VERSIONS`, no version twice, serving first."""
    names = [v.version for v in versions]
    if not versions or len(versions) > MAX_VERSIONS or len(set(names)) != len(names):
        raise ValueError(f"a node cache keeps 1..{MAX_VERSIONS} distinct versions, got {names}")
    return json.dumps([v.to_json() for v in versions], separators=(",", ":"), sort_keys=True)


def parse_versions(text: str) -> list[Version]:
    """The versions of a :data:`VERSIONS_ANNOTATION` value; ValueError naming what is wrong."""
    return list(_parsed_versions(text))


@functools.lru_cache(maxsize=64)  # the same annotation is read on every step (errors are not cached)
def _parsed_versions(text: str) -> tuple[Version, ...]:
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{VERSIONS_ANNOTATION} is not JSON: {exc}") from None
    if not isinstance(raw, list):
        raise ValueError(f"{VERSIONS_ANNOTATION} must be a JSON list of versions")
    versions = [Version.from_json(item) for item in raw]
    versions_json(versions)  # the same bounds as written
    return tuple(versions)


def filler_versions(daemonset: dict[str, Any]) -> list[Version]:
    """The versions a filler DaemonSet keeps now (from its pod template)."""
    annotations = ((((daemonset.get("spec") or {}).get("template") or {}).get("metadata") or {})
                   .get("annotations") or {})
    text = annotations.get(VERSIONS_ANNOTATION)
    return parse_versions(text) if isinstance(text, str) else []


def filler_patch(versions: list[Version]) -> dict[str, Any]:
    """The merge-patch that makes a filler keep ``versions`` (its pods restart with the new list)."""
    return {"spec": {"template": {"metadata": {"annotations": {VERSIONS_ANNOTATION: versions_json(versions)}}}}}


def volume(path: str) -> dict[str, Any]:
    """The deployment's model volume: the version's directory, which must exist (``Directory``: a pod on a node
    without it fails to start instead of serving an empty model)."""
    return {"name": MODEL_VOLUME, "hostPath": {"path": path, "type": "Directory"}}


def ready_requirement(model: str, version: str) -> dict[str, Any]:
    """The match expression that places a pod only on nodes where ``version`` is ready."""
    return {"key": ready_label(model, version), "operator": "Exists"}
