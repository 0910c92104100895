"""The node-cache filler: one pod per node keeps one model's listed versions on that node's NVMe.

Run as ``python3 -m hyperwarm.functions.node_cache.fill`` in the filler DaemonSet's pod (the caches construct
ships this package in a ConfigMap; the image brings Python and boto3). Every minute it converges the node on
the list in :data:`~.layout.VERSIONS_ENV`, serving version first:

1. Anything of the model's directory that is not a listed version goes (a retired version, a failed staging's
   partial copy), and so do the ready labels of versions not listed: the NVMe never holds more than the list.
   A version a pod on this node still mounts stays until that pod is gone, whatever the list says (a deploy or a
   stack rollback may apply an older list while pods read the newer version).
2. Each listed version that is not complete is filled: the free space is checked first (the files still to
   download plus the headroom must fit), every file of its manifest is downloaded into ``.partial-<version>``
   (the S3 object version the manifest's ``version_id`` names, where it lists one) and checked for its size and
   SHA-256 (what a fill is from is recorded first and kept until the copy is complete, so one cut short, even while
   it removes the copy it repairs, goes on from that manifest; files the manifest does not list are removed, from a
   complete copy too), the directory is marked complete and renamed to ``<version>``, and only
   then is the node labelled :func:`~.layout.ready_label`. A version that cannot be a copy (a checksum or size
   mismatch, a missing object, no room) is not retried by this pod: the node gets the annotation of the same
   name, ``failed: <why>``, which the warm rollout reads and dead-letters.
3. A complete version is checked against the manifest it was filled from (its completion marker keeps the file list
   and the manifest's SHA-256), not against S3's: a published version never changes, so a manifest rewritten in S3
   later changes no copy. One whose files no longer match those sizes loses its label and is filled again from that
   very manifest (none other: else it stays unlabelled and the node says why); a copy is replaced by another
   manifest only where the refresh pinned that one.

Its Kubernetes rights are its own node's labels and annotations under ``weights.hyperwarm.io/`` (RBAC
``get``/``patch`` on nodes, narrowed by a ValidatingAdmissionPolicy the construct ships) and the list of pods in its
namespace (which versions the pods on its node mount), nothing else.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from ..cache_refresh.errors import PermanentError
from ..cache_refresh.manifest import MAX_MANIFEST_BYTES, ManifestFile, parse
from . import layout

POLL_SECONDS = 60
FILES_AT_ONCE = 4
_CHUNK = 8 * 1024 * 1024
_SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


class Unfillable(Exception):
    """This version cannot become a copy on this node without a change (bad files, no room): not retried."""


class Node(Protocol):
    """The filler's view of its node: its labels and annotations, a merge-patch of them, and its pods."""

    def metadata(self) -> dict[str, Any]: ...

    def patch(self, labels: dict[str, str | None], annotations: dict[str, str | None]) -> None: ...

    def pods(self) -> list[dict[str, Any]]: ...


class InClusterNode:
    """Its own node through the API server, with the pod's service-account token (re-read: it rotates)."""

    def __init__(self, name: str, namespace: str, host: str | None = None, root: str = _SERVICE_ACCOUNT) -> None:
        host = host or f"https://{os.environ['KUBERNETES_SERVICE_HOST']}:{os.environ['KUBERNETES_SERVICE_PORT']}"
        self._node, self._root = f"{host}/api/v1/nodes/{name}", root
        self._pods = f"{host}/api/v1/namespaces/{namespace}/pods?fieldSelector=spec.nodeName%3D{name}"
        self._tls = ssl.create_default_context(cafile=f"{root}/ca.crt")

    def _call(self, url: str, method: str = "GET", body: dict[str, Any] | None = None) -> dict[str, Any]:
        token = Path(self._root, "token").read_text().strip()
        request = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body else None,
                                         headers={"Authorization": f"Bearer {token}", "Accept": "application/json",
                                                  "Content-Type": "application/merge-patch+json"})
        with urllib.request.urlopen(request, context=self._tls, timeout=10) as answer:
            result: dict[str, Any] = json.loads(answer.read())
            return result

    def metadata(self) -> dict[str, Any]:
        return dict(self._call(self._node).get("metadata") or {})

    def patch(self, labels: dict[str, str | None], annotations: dict[str, str | None]) -> None:
        self._call(self._node, "PATCH", {"metadata": {"labels": labels, "annotations": annotations}})

    def pods(self) -> list[dict[str, Any]]:
        return list(self._call(self._pods).get("items") or [])


@dataclass
class Filler:
    """One model's versions on one node (``root``: the model's directory as the pod mounts it)."""

    model: str
    root: Path
    s3: Any
    node: Node
    headroom_percent: int = 10
    status_dir: Path = Path(layout.STATUS_DIR)
    log: Callable[[str], None] = print
    given_up: dict[str, str] = field(default_factory=dict)
    """Version -> why it cannot be filled here (kept until the list changes or the pod restarts)."""

    def converge(self, versions: list[layout.Version]) -> bool:
        """One pass over the node; True when every listed version is complete and labelled."""
        keep = {v.version for v in versions}
        self._remove_strays(keep)
        ready = []
        for version in versions:
            if version.version in self.given_up:
                ready.append(False)
                continue
            try:
                ready.append(self._ensure(version))
            except Unfillable as exc:
                self.given_up[version.version] = str(exc)
                self.log(f"{self.model} {version.version}: cannot be filled here: {exc}")
                self._mark(version.version, failed=str(exc))
                ready.append(False)
        self._ready_file(all(ready) and bool(versions))
        return all(ready) and bool(versions)

    # -- the directory --------------------------------------------------------------------------------------
    def _remove_strays(self, keep: set[str]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        read = self._mounted()
        for entry in self.root.iterdir():
            version = entry.name.removeprefix(layout.PARTIAL)
            if entry.name.startswith(layout.PARTIAL) and version in keep:
                continue  # a fill to resume
            if entry.name in read and entry.name not in keep:
                self.log(f"{self.model}: keeping {entry.name}, not listed, while a pod on this node reads it")
            elif entry.name not in keep:
                self.log(f"{self.model}: removing {entry.name} (not a listed version)")
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        meta = self.node.metadata()
        wanted = {layout.ready_label(self.model, v) for v in keep}
        prefix = layout.label_prefix(self.model)
        labels: dict[str, str | None] = {k: None for k in meta.get("labels") or {}
                                         if k.startswith(prefix) and k not in wanted}
        notes: dict[str, str | None] = {k: None for k in meta.get("annotations") or {}
                                        if k.startswith(prefix) and k not in wanted}
        if labels or notes:
            self.node.patch(labels, notes)

    def _mounted(self) -> set[str]:
        """The versions of this model that pods on this node mount (running, starting or terminating)."""
        versions = set()
        for pod in self.node.pods():
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            for volume in (pod.get("spec") or {}).get("volumes") or []:
                found = layout.model_and_version(str((volume.get("hostPath") or {}).get("path") or ""))
                if found and found[0] == self.model:
                    versions.add(found[1])
        return versions

    def _ensure(self, version: layout.Version) -> bool:
        """The version complete and labelled on this node (filled now if it is not). A complete copy is checked
        against the manifest it was filled from (its marker), not against S3's: a published version never changes,
        so S3 is read again only to fill or to repair a copy from that very manifest, and a copy is replaced by
        another manifest only where the refresh pinned that one (:attr:`~.layout.Version.manifest`). A bucket
        writer who rewrites a version's manifest changes no copy already on a node."""
        target = self.root / version.version
        marker = _marker(target)
        complete = bool(marker)
        if not complete:  # a fill or repair under way (or one killed while it removed the copy it repairs)
            marker = _marker(self.root / f"{layout.PARTIAL}{version.version}", SOURCE) or marker
        filled_from = str(marker.get("manifest_sha256") or "")
        if filled_from and version.manifest in ("", filled_from):
            if complete and _sizes_match(target, _listed(marker)):
                _remove_unlisted(target, _listed(marker))  # what an older filler let through
                self._mark(version.version, ready=True)
                return True
            files, sha = self._manifest(version, filled_from, "the manifest this node filled the version from")
        else:
            files, sha = self._manifest(version, version.manifest, "the manifest the refresh admitted")
            if marker and not version.manifest and marker.get("manifest") != _digest(files):
                raise Unfillable(f"s3://{version.bucket}/{version.location}/manifest.json changed since this node "
                                 "filled the version (a published version never changes): the copy is kept, not "
                                 "replaced; publish a new version")
        if not complete or marker.get("manifest") != _digest(files) or not _sizes_match(target, files):
            self._mark(version.version, ready=False)
            partial = self.root / f"{layout.PARTIAL}{version.version}"
            partial.mkdir(exist_ok=True)
            _write_marker(partial, version.version, files, sha, SOURCE)  # what this fill is from, before any delete
            if target.exists():
                shutil.rmtree(target)
            self._fill(version, files, sha, target)
        elif filled_from != sha:  # the marker of an older filler, or a copy the refresh has pinned since
            _write_marker(target, version.version, files, sha)
        self._mark(version.version, ready=True)
        return True

    def _manifest(self, version: layout.Version, expected: str, which: str) -> tuple[tuple[ManifestFile, ...], str]:
        """The version's files and the SHA-256 of its manifest, which must be ``expected`` (``which`` says what
        that is) where one is given."""
        key = f"{version.location}/manifest.json"
        try:
            obj = self.s3.get_object(Bucket=version.bucket, Key=key)
            if obj["ContentLength"] > MAX_MANIFEST_BYTES:
                raise Unfillable(f"s3://{version.bucket}/{key} is larger than {MAX_MANIFEST_BYTES} bytes")
            body = obj["Body"].read()
            sha = hashlib.sha256(body).hexdigest()
            if expected and sha != expected:
                raise Unfillable(f"s3://{version.bucket}/{key} is not {which} (SHA-256 {expected[:12]}...): it was "
                                 "overwritten since; publish a new version")
            return parse(body), sha
        except PermanentError as exc:
            raise Unfillable(f"s3://{version.bucket}/{key}: {exc.message}") from None
        except self.s3.exceptions.NoSuchKey:
            raise Unfillable(f"s3://{version.bucket}/{key} not found") from None

    def _fill(self, version: layout.Version, files: tuple[ManifestFile, ...], sha: str, target: Path) -> None:
        partial = self.root / f"{layout.PARTIAL}{version.version}"
        partial.mkdir(exist_ok=True)
        _remove_unlisted(partial, files)  # before the room check: a killed download's temp file, an older list's
        todo = [f for f in files if not _verified(partial / f.path, f)]
        self._check_room(version, todo)
        total, started = sum(f.size for f in todo), time.monotonic()
        self.log(f"{self.model} {version.version}: filling {len(todo)} of {len(files)} files, {total / 1e9:.1f} GB")
        with ThreadPoolExecutor(max_workers=FILES_AT_ONCE) as pool:
            problems = [p for p in pool.map(lambda f: self._download(version, f, partial), todo) if p]
        if problems:
            raise Unfillable("; ".join(problems[:3]) + (f"; and {len(problems) - 3} more" if len(problems) > 3 else ""))
        _remove_unlisted(partial, files)
        _write_marker(partial, version.version, files, sha)
        partial.rename(target)
        (target / SOURCE).unlink(missing_ok=True)  # the marker says it now
        seconds = max(time.monotonic() - started, 1e-3)
        self.log(f"{self.model} {version.version}: complete ({total / 1e9:.1f} GB in {seconds:.0f} s, "
                 f"{total * 8 / 1e9 / seconds:.2f} Gbit/s)")

    def _check_room(self, version: layout.Version, todo: list[ManifestFile]) -> None:
        usage = shutil.disk_usage(self.root)
        need = sum(f.size for f in todo) + usage.total * self.headroom_percent // 100
        if need > usage.free:
            raise Unfillable(f"no room: {sum(f.size for f in todo) / 1e9:.1f} GB to download plus "
                             f"{self.headroom_percent} % headroom, {usage.free / 1e9:.1f} GB free")

    def _download(self, version: layout.Version, item: ManifestFile, partial: Path) -> str | None:
        """One file, checked for size and SHA-256; the problem, or None."""
        path = partial / item.path
        path.parent.mkdir(parents=True, exist_ok=True)
        key = f"{version.location}/{item.path}"
        try:
            # The very object the manifest binds (version_id): a file overwritten after admission is not filled.
            pinned = {"ExtraArgs": {"VersionId": item.version_id}} if item.version_id else {}
            self.s3.download_file(version.bucket, key, str(path), **pinned)
        except self.s3.exceptions.ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in ("404", "NoSuchKey", "403", "AccessDenied"):
                return f"{item.path}: s3://{version.bucket}/{key} not found or not readable ({code})"
            raise  # throttling, 5xx: the next pass tries again
        if not _verified(path, item):
            path.unlink(missing_ok=True)
            return f"{item.path}: size or SHA-256 differs from the manifest"
        return None

    # -- what the node says ---------------------------------------------------------------------------------
    def _mark(self, version: str, *, ready: bool = False, failed: str | None = None) -> None:
        key = layout.ready_label(self.model, version)
        meta = self.node.metadata()
        has_label = (meta.get("labels") or {}).get(key) == "true"
        note = (meta.get("annotations") or {}).get(key)
        wanted_note = f"failed: {failed}"[:1000] if failed else None
        if has_label != ready or note != wanted_note:
            self.node.patch({key: "true" if ready else None}, {key: wanted_note})

    def _ready_file(self, ready: bool) -> None:
        self.status_dir.mkdir(parents=True, exist_ok=True)
        marker = self.status_dir / "ready"
        marker.touch() if ready else marker.unlink(missing_ok=True)


def _verified(path: Path, item: ManifestFile) -> bool:
    if not path.is_file() or path.stat().st_size != item.size:
        return False
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest() == item.sha256


def _entries(files: tuple[ManifestFile, ...]) -> list[dict[str, Any]]:
    return [{k: v for k, v in f.__dict__.items() if v is not None} for f in files]


def _digest(files: tuple[ManifestFile, ...]) -> str:
    """The file list's digest in the completion marker (a field left out is not written: markers of copies filled
    before a manifest field existed still match)."""
    return hashlib.sha256(json.dumps(_entries(files), sort_keys=True).encode()).hexdigest()


SOURCE = ".hyperwarm-source"
"""In ``.partial-<version>``, written before anything of a fill or repair is deleted or downloaded: what the fill is
from (as the completion marker), so that one cut short (a throttled download, a restart) goes on from that manifest."""


def _write_marker(directory: Path, version: str, files: tuple[ManifestFile, ...], sha: str,
                  name: str = layout.COMPLETE) -> None:
    """The completion marker (or :data:`SOURCE`): the file list (and its digest, which markers of older fillers hold
    alone) and the SHA-256 of the manifest the copy was filled from; replaced whole (a crash leaves the old one)."""
    tmp = directory / f"{name}.tmp"
    with tmp.open("w") as out:
        out.write(json.dumps({"version": version, "manifest": _digest(files), "manifest_sha256": sha,
                              "files": _entries(files)}))
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, directory / name)


def _marker(target: Path, name: str = layout.COMPLETE) -> dict[str, Any]:
    """A complete copy's marker (or a partial copy's :data:`SOURCE`); empty when there is none, it cannot be read or
    its file list is not the one its digest names (the copy is filled again)."""
    try:
        marker = json.loads((target / name).read_text())
        listed = marker.get("files")
        if listed is not None and (not listed or _digest(_listed(marker)) != marker.get("manifest")):
            # its list is not the one it names: keep only the digest, as an older filler's marker (S3's must match)
            return {"version": marker.get("version"), "manifest": marker.get("manifest")} \
                if isinstance(marker.get("manifest"), str) and marker.get("manifest") else {}
        return marker if isinstance(marker, dict) else {}
    except (OSError, ValueError, AttributeError, TypeError):
        return {}


def _remove_unlisted(copy: Path, files: tuple[ManifestFile, ...]) -> None:
    """Files (and then empty directories) of a copy, partial or complete, its manifest does not list: a killed
    download's temporary file, a file of another list. Never its own records (:data:`SOURCE`, the marker)."""
    keep = {PurePosixPath(f.path) for f in files} | {PurePosixPath(n) for n in (SOURCE, layout.COMPLETE)}
    for extra in [q for q in copy.rglob("*") if (q.is_file() or q.is_symlink())
                  and PurePosixPath(q.relative_to(copy).as_posix()) not in keep]:
        extra.unlink()
    for folder in sorted((q for q in copy.rglob("*") if q.is_dir() and not q.is_symlink()),
                         key=lambda q: len(q.parts), reverse=True):
        if not any(folder.iterdir()):
            folder.rmdir()


def _listed(marker: dict[str, Any]) -> tuple[ManifestFile, ...]:
    return tuple(ManifestFile(**entry) for entry in marker.get("files") or [])


def _sizes_match(target: Path, files: tuple[ManifestFile, ...]) -> bool:
    """A cheap check of a complete copy at every pass: every file there at its size."""
    return all((target / f.path).is_file() and (target / f.path).stat().st_size == f.size for f in files)


def main() -> None:  # pragma: no cover - the pod's entry point; Filler is tested on its own
    import boto3

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    filler = Filler(model=os.environ[layout.MODEL_ENV], root=Path(layout.MOUNT), s3=boto3.client("s3"),
                    node=InClusterNode(os.environ[layout.NODE_ENV], os.environ[layout.NAMESPACE_ENV]),
                    headroom_percent=int(os.environ.get(layout.HEADROOM_ENV, "10")))
    versions = layout.parse_versions(os.environ[layout.VERSIONS_ENV])
    while not stop.is_set():
        try:
            filler.converge(versions)
        except Exception as exc:  # noqa: BLE001 - a transient S3 or API error: the next pass tries again
            filler.log(f"{filler.model}: pass failed, retrying in {POLL_SECONDS} s: {exc!r}")
        stop.wait(POLL_SECONDS)


if __name__ == "__main__":
    main()
