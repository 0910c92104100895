"""hyperwarm's node cache: the filler fills and verifies a node's copies (moto's S3, a temporary directory for
the instance store), labels its node only once a copy is complete, drops what is not listed; its admission policy
lets it change nothing but its own node's weights labels; its code runs from the ConfigMap alone."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections import namedtuple
from pathlib import Path
from typing import Any

import boto3
import botocore.exceptions
import pytest
from admission import Request, denials
from moto import mock_aws

from hyperwarm.caches.node_cache import NODE_NAME_EXTRA, SERVICE_ACCOUNT, code_config_map, filler_access
from hyperwarm.functions.node_cache import fill as fill_module, layout
from hyperwarm.functions.node_cache.fill import Filler, InClusterNode

BUCKET, PREFIX, MODEL = "models", "llama", "llama"
FILES = {"config.json": b'{"layers": 2}', "weights/model-00001.safetensors": b"\x01" * 4096,
         "weights/model-00002.safetensors": b"\x02" * 2048}


Usage = namedtuple("Usage", "total used free")


@pytest.fixture(autouse=True)
def roomy_nvme(monkeypatch: pytest.MonkeyPatch) -> None:
    """The node's NVMe as the filler sees it: a 3.8 TB drive, 3 TB free. The test machine's own disk decides
    nothing (its headroom is 10 % of its size); a test that needs a full drive patches its own."""
    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage(3_800_000_000_000, 800_000_000_000,
                                                                 3_000_000_000_000))


@pytest.fixture(autouse=True)
def aws(monkeypatch: pytest.MonkeyPatch) -> Any:
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-west-2"}.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-west-2")
        s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
        yield s3


def upload(s3: Any, version: str, files: dict[str, bytes] = FILES, *, listed: dict[str, bytes] | None = None) -> \
        layout.Version:
    """The version's files and its manifest (of ``listed``, by default the files themselves)."""
    for path, body in files.items():
        s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}/{version}/{path}", Body=body)
    manifest = {"format": "hyperwarm.manifest/v1", "files": [
        {"path": p, "size": len(b), "sha256": hashlib.sha256(b).hexdigest()} for p, b in (listed or files).items()]}
    s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}/{version}/manifest.json", Body=json.dumps(manifest).encode())
    return layout.Version(version, BUCKET, f"{PREFIX}/{version}")


class Node:
    """The filler's node: labels and annotations, merge-patched."""

    def __init__(self) -> None:
        self.labels: dict[str, str] = {"kubernetes.io/hostname": "n1"}
        self.annotations: dict[str, str] = {}
        self.patches = 0
        self.running: list[tuple[str, str]] = []
        """(version, phase) of the pods on the node that mount this model's cache."""

    def pods(self) -> list[dict[str, Any]]:
        return [{"spec": {"volumes": [layout.volume(layout.version_dir("/opt/dlami/nvme", MODEL, v))]},
                 "status": {"phase": phase}} for v, phase in self.running]

    def metadata(self) -> dict[str, Any]:
        return {"labels": dict(self.labels), "annotations": dict(self.annotations)}

    def patch(self, labels: dict[str, str | None], annotations: dict[str, str | None]) -> None:
        self.patches += 1
        for store, changes in ((self.labels, labels), (self.annotations, annotations)):
            for key, value in changes.items():
                store.pop(key, None) if value is None else store.__setitem__(key, value)


def filler(s3: Any, tmp_path: Path, **options: Any) -> tuple[Filler, Node]:
    node = Node()
    return Filler(MODEL, tmp_path / "cache", s3, node, status_dir=tmp_path / "status", log=lambda line: None,
                  **options), node


def ready(node: Node, version: str) -> bool:
    return node.labels.get(layout.ready_label(MODEL, version)) == "true"


def test_a_version_is_downloaded_verified_and_only_then_labelled(aws: Any, tmp_path: Path) -> None:
    fill, node = filler(aws, tmp_path)
    assert fill.converge([upload(aws, "v1")])
    copy = tmp_path / "cache" / "v1"
    assert {str(p.relative_to(copy)) for p in copy.rglob("*") if p.is_file()} == {*FILES, layout.COMPLETE}
    assert all((copy / p).read_bytes() == body for p, body in FILES.items())
    assert ready(node, "v1") and (tmp_path / "status" / "ready").exists()
    assert not list((tmp_path / "cache").glob(f"{layout.PARTIAL}*")), "renamed whole, no partial copy left"


def test_a_file_that_differs_from_its_manifest_is_never_labelled_and_the_node_says_why(aws: Any, tmp_path: Path) -> None:
    good = upload(aws, "v1")
    bad = upload(aws, "v2", {**FILES, "config.json": b'{"layers": 3}'}, listed=FILES)  # same size, other bytes
    fill, node = filler(aws, tmp_path)
    assert not fill.converge([good, bad])
    assert ready(node, "v1") and not ready(node, "v2")
    note = node.annotations[layout.ready_label(MODEL, "v2")]
    assert note.startswith("failed: ") and "config.json: size or SHA-256 differs" in note
    assert not (tmp_path / "cache" / "v2").exists() and not (tmp_path / "status" / "ready").exists()
    patches = node.patches
    assert not fill.converge([good, bad]) and node.patches == patches, "given up: not downloaded again each pass"


def test_a_manifest_overwritten_since_the_refresh_admitted_it_is_never_filled(aws: Any, tmp_path: Path) -> None:
    """The refresh pins the manifest it admitted (signed, verified); a bucket writer who then swaps files and
    rewrites the manifest to match gets nothing onto a node: the filler fills from that manifest or not at all."""
    admitted = upload(aws, "v2")
    body = aws.get_object(Bucket=BUCKET, Key=f"{PREFIX}/v2/manifest.json")["Body"].read()
    pinned = layout.Version("v2", BUCKET, f"{PREFIX}/v2", manifest=hashlib.sha256(body).hexdigest())
    upload(aws, "v2", {**FILES, "config.json": b'{"layers": 3}'})  # files and manifest rewritten to agree
    fill, node = filler(aws, tmp_path)
    assert not fill.converge([pinned])
    assert not ready(node, "v2")
    assert "not the manifest the refresh admitted" in node.annotations[layout.ready_label(MODEL, "v2")]
    assert not (tmp_path / "cache" / "v2").exists()
    assert admitted.manifest == ""  # a version a deploy names is not pinned


def test_a_file_swapped_after_admission_is_filled_from_the_object_the_manifest_binds(aws: Any, tmp_path: Path) -> None:
    """A signed manifest names each file's S3 VersionId: a bucket writer who overwrites a file after the refresh
    admitted the version does not change what the node gets (nor fail its fill): the filler downloads the object
    the publisher uploaded."""
    aws.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    ids = {p: aws.put_object(Bucket=BUCKET, Key=f"{PREFIX}/v2/{p}", Body=b)["VersionId"] for p, b in FILES.items()}
    manifest = {"format": "hyperwarm.manifest/v1", "files": [
        {"path": p, "size": len(b), "sha256": hashlib.sha256(b).hexdigest(), "version_id": ids[p]}
        for p, b in FILES.items()]}
    aws.put_object(Bucket=BUCKET, Key=f"{PREFIX}/v2/manifest.json", Body=json.dumps(manifest).encode())
    aws.put_object(Bucket=BUCKET, Key=f"{PREFIX}/v2/config.json", Body=b'{"layers": 3}')  # swapped after admission
    fill, node = filler(aws, tmp_path)
    assert fill.converge([layout.Version("v2", BUCKET, f"{PREFIX}/v2")])
    assert ready(node, "v2") and (tmp_path / "cache" / "v2" / "config.json").read_bytes() == FILES["config.json"]


def test_a_missing_listed_file_fails_the_version(aws: Any, tmp_path: Path) -> None:
    missing = upload(aws, "v2", {p: b for p, b in FILES.items() if p != "config.json"}, listed=FILES)
    fill, node = filler(aws, tmp_path)
    assert not fill.converge([missing])
    assert "config.json: s3://models/llama/v2/config.json not found" in node.annotations[layout.ready_label(MODEL, "v2")]


def test_a_version_without_room_is_refused_before_anything_is_downloaded(aws: Any, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage(100_000, 94_000, 6_000))  # 10 % headroom = 10,000
    fill, node = filler(aws, tmp_path)
    assert not fill.converge([upload(aws, "v1")])
    assert "no room" in node.annotations[layout.ready_label(MODEL, "v1")]
    assert not list((tmp_path / "cache").rglob("*.safetensors"))


def test_what_is_not_listed_leaves_the_node_and_the_list_never_grows_past_two(aws: Any, tmp_path: Path) -> None:
    v1, v2, v3 = upload(aws, "v1"), upload(aws, "v2"), upload(aws, "v3")
    fill, node = filler(aws, tmp_path)
    fill.converge([v1, v2])
    assert ready(node, "v1") and ready(node, "v2")
    (tmp_path / "cache" / f"{layout.PARTIAL}v0").mkdir()  # a failed staging's partial copy
    fill.converge([v2, v3])
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["v2", "v3"]
    assert not ready(node, "v1") and ready(node, "v3")
    assert node.labels["kubernetes.io/hostname"] == "n1", "other labels are not the filler's"
    with pytest.raises(ValueError, match="1..2 distinct versions"):
        layout.versions_json([v1, v2, v3])


def test_a_version_a_pod_on_the_node_reads_stays_until_the_pod_is_gone(aws: Any, tmp_path: Path) -> None:
    """A deploy or a stack rollback applies an older list while pods read the newer version: the copy stays."""
    v1, v2 = upload(aws, "v1"), upload(aws, "v2")
    fill, node = filler(aws, tmp_path)
    fill.converge([v1, v2])
    node.running = [("v2", "Running"), ("v1", "Failed")]  # an evicted pod reads nothing
    fill.converge([v1])
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["v1", "v2"]
    node.running = []
    fill.converge([v1])
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["v1"]


def test_a_manifest_rewritten_in_s3_changes_no_copy_on_a_node(aws: Any, tmp_path: Path) -> None:
    """A published version never changes: a bucket writer who swaps a deployed version's files and rewrites its
    manifest to match (no signing key needed where the entry is not pinned: the version a deploy names) changes no
    copy a node holds, nor drops its label (new or rescheduled pods need it); the copy is checked against the
    manifest it was filled from, and S3 is not read for it."""
    version = upload(aws, "v1")
    fill, node = filler(aws, tmp_path)
    assert fill.converge([version])
    upload(aws, "v1", {**FILES, "weights/model-00001.safetensors": b"\x66" * 4096})  # files and manifest agree
    reads: list[str] = []
    real = aws.get_object
    aws.get_object = lambda **kw: (reads.append(kw["Key"]), real(**kw))[1]
    assert fill.converge([version]) and ready(node, "v1")
    copy = tmp_path / "cache" / "v1"
    assert all((copy / path).read_bytes() == body for path, body in FILES.items()) and reads == []
    aws.put_object(Bucket=BUCKET, Key=f"{PREFIX}/v1/manifest.json", Body=b'{"junk": 1}')  # or one that is no manifest
    pinned = layout.Version("v1", BUCKET, f"{PREFIX}/v1", manifest=_marker_of(copy)["manifest_sha256"])
    assert fill.converge([pinned]) and ready(node, "v1"), "the refresh's pin of the same manifest keeps it too"


def test_a_damaged_copy_is_repaired_only_from_the_manifest_it_was_filled_from(aws: Any, tmp_path: Path) -> None:
    version = upload(aws, "v1")
    fill, node = filler(aws, tmp_path)
    assert fill.converge([version])
    (tmp_path / "cache" / "v1" / "config.json").unlink()
    upload(aws, "v1", {**FILES, "config.json": b'{"layers": 9}'})  # rewritten meanwhile
    assert not fill.converge([version]) and not ready(node, "v1")
    assert "is not the manifest this node filled the version from" in \
        node.annotations[layout.ready_label(MODEL, "v1")]
    assert (tmp_path / "cache" / "v1" / "weights/model-00001.safetensors").exists(), "kept, not replaced"


def test_a_copy_is_replaced_by_another_manifest_only_where_the_refresh_pinned_it(aws: Any, tmp_path: Path) -> None:
    """A copy filled unpinned from one manifest, then the refresh admits (pins) another one for the version: the
    node holds the admitted one."""
    fill, node = filler(aws, tmp_path)
    assert fill.converge([upload(aws, "v1")])
    admitted = {**FILES, "config.json": b'{"layers": 4}'}
    upload(aws, "v1", admitted)
    body = aws.get_object(Bucket=BUCKET, Key=f"{PREFIX}/v1/manifest.json")["Body"].read()
    pinned = layout.Version("v1", BUCKET, f"{PREFIX}/v1", manifest=hashlib.sha256(body).hexdigest())
    assert fill.converge([pinned]) and ready(node, "v1")
    assert (tmp_path / "cache" / "v1" / "config.json").read_bytes() == admitted["config.json"]
    assert _marker_of(tmp_path / "cache" / "v1")["manifest_sha256"] == pinned.manifest


def test_a_copy_an_older_filler_completed_is_kept_and_its_marker_completed(aws: Any, tmp_path: Path) -> None:
    """Markers written before they recorded the manifest's SHA-256 and files hold the file list's digest alone:
    a copy whose manifest is unchanged is kept and its marker completed; one whose manifest changed is kept but not
    labelled (the manifest it was filled from is not known to repair or serve it), and the node says why."""
    version = upload(aws, "v1")
    fill, node = filler(aws, tmp_path)
    assert fill.converge([version])
    marker = tmp_path / "cache" / "v1" / layout.COMPLETE
    old = {k: v for k, v in json.loads(marker.read_text()).items() if k in ("version", "manifest")}
    marker.write_text(json.dumps(old))
    assert fill.converge([version]) and ready(node, "v1")
    assert set(_marker_of(tmp_path / "cache" / "v1")) == {"version", "manifest", "manifest_sha256", "files"}
    marker.write_text(json.dumps(old))
    upload(aws, "v1", {**FILES, "config.json": b'{"layers": 5}'})
    fresh, node = filler(aws, tmp_path)
    assert not fresh.converge([version]) and not ready(node, "v1")
    assert "changed since this node filled the version" in node.annotations[layout.ready_label(MODEL, "v1")]
    assert (tmp_path / "cache" / "v1" / "config.json").read_bytes() == FILES["config.json"]


def test_an_interrupted_repair_goes_on_from_the_manifest_the_copy_was_filled_from(aws: Any, tmp_path: Path) -> None:
    """A repair or first fill records what it fills from before it deletes anything: a throttled download (or a
    restart) half-way, then a rewritten manifest, fills nothing of the rewrite."""
    version = upload(aws, "v1")
    fill, node = filler(aws, tmp_path)
    assert fill.converge([version])
    (tmp_path / "cache" / "v1" / "config.json").unlink()
    real, thrown = aws.download_file, []

    def throttled(bucket: str, key: str, path: str, **extra: Any) -> None:
        if key.endswith("model-00001.safetensors") and not thrown:
            thrown.append(key)
            raise botocore.exceptions.ClientError({"Error": {"Code": "SlowDown"}}, "GetObject")
        return real(bucket, key, path, **extra)

    aws.download_file = throttled
    with pytest.raises(botocore.exceptions.ClientError):
        fill.converge([version])  # the pod's loop logs it and tries again next pass
    upload(aws, "v1", {**FILES, "weights/model-00001.safetensors": b"\x66" * 4096})
    fresh, node = filler(aws, tmp_path)  # a restarted filler too
    assert not fresh.converge([version]) and not ready(node, "v1")
    assert "is not the manifest this node filled the version from" in \
        node.annotations[layout.ready_label(MODEL, "v1")]


def test_a_marker_is_replaced_whole_or_not_at_all(aws: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Completing an older filler's marker rewrites it in a complete copy: a crash before the rename leaves the old
    one readable, never a torn one (which would read as no copy)."""
    version = upload(aws, "v1")
    fill, node = filler(aws, tmp_path)
    assert fill.converge([version])
    marker = tmp_path / "cache" / "v1" / layout.COMPLETE
    old = json.dumps({k: v for k, v in json.loads(marker.read_text()).items() if k in ("version", "manifest")})
    marker.write_text(old)

    def crash(source: Any, target: Any) -> None:
        raise OSError("power lost")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        fill.converge([version])
    assert marker.read_text() == old


def test_a_marker_that_does_not_list_what_it_names_is_no_marker(aws: Any, tmp_path: Path) -> None:
    version = upload(aws, "v1")
    fill, node = filler(aws, tmp_path)
    assert fill.converge([version])
    copy = tmp_path / "cache" / "v1"
    for path in FILES:
        (copy / path).unlink()
    (copy / layout.COMPLETE).write_text(json.dumps({**_marker_of(copy), "files": []}))
    fresh, node = filler(aws, tmp_path)
    assert fresh.converge([version]) and all((copy / path).read_bytes() == body for path, body in FILES.items())


def test_files_the_manifest_does_not_list_never_reach_a_copy(aws: Any, tmp_path: Path) -> None:
    """A first fill of a rewritten manifest that lists an extra file fails; the refresh then pins the admitted
    manifest: the copy completes from it without the file the failed attempt left in its partial copy."""
    upload(aws, "v1")
    body = aws.get_object(Bucket=BUCKET, Key=f"{PREFIX}/v1/manifest.json")["Body"].read()
    upload(aws, "v1", {**FILES, "chat_template.jinja": b"evil", "config.json": b'{"layers": 2}'},
           listed={**FILES, "chat_template.jinja": b"evil", "config.json": b'{"layers": 7}'})  # fails on config.json
    fill, node = filler(aws, tmp_path)
    assert not fill.converge([layout.Version("v1", BUCKET, f"{PREFIX}/v1")])
    aws.put_object(Bucket=BUCKET, Key=f"{PREFIX}/v1/manifest.json", Body=body)
    pinned = layout.Version("v1", BUCKET, f"{PREFIX}/v1", manifest=hashlib.sha256(body).hexdigest())
    fresh, node = filler(aws, tmp_path)
    assert fresh.converge([pinned]) and not (tmp_path / "cache" / "v1" / "chat_template.jinja").exists()


REWRITE = {**FILES, "weights/model-00001.safetensors": b"\x66" * 4096}
"""A bucket writer's files, with a manifest that agrees with them."""


def _the_rewrite_is_refused(aws: Any, tmp_path: Path, version: layout.Version) -> None:
    upload(aws, "v1", REWRITE)
    fresh, node = filler(aws, tmp_path)  # the restarted filler
    fresh.converge([version])
    copy = tmp_path / "cache" / "v1" / "weights" / "model-00001.safetensors"
    assert not (ready(node, "v1") and copy.read_bytes() == REWRITE["weights/model-00001.safetensors"])


def _killed_in_rmtree(path: Any, *args: Any, **kwargs: Any) -> None:
    """A kill (SIGKILL after the grace period, a reboot) while the copy is being removed: its marker gone first."""
    (Path(path) / layout.COMPLETE).unlink()
    raise KeyboardInterrupt("killed")


def _a_damaged_copy(aws: Any, tmp_path: Path) -> tuple[layout.Version, Filler]:
    """v1 filled, then one of its files lost: the next pass repairs it."""
    version = upload(aws, "v1")
    fill, _ = filler(aws, tmp_path)
    assert fill.converge([version])
    (tmp_path / "cache" / "v1" / "config.json").unlink()
    return version, fill


def test_a_repair_killed_while_it_removes_the_copy_goes_on_from_its_record(aws: Any, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    version, fill = _a_damaged_copy(aws, tmp_path)
    monkeypatch.setattr(fill_module.shutil, "rmtree", _killed_in_rmtree)
    with pytest.raises(KeyboardInterrupt):
        fill.converge([version])
    monkeypatch.undo()
    _the_rewrite_is_refused(aws, tmp_path, version)


def test_a_fill_killed_before_its_marker_goes_on_from_its_record(aws: Any, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The record stays through the removal of unlisted files until the copy is complete."""
    version, fill = _a_damaged_copy(aws, tmp_path)
    write = fill_module._write_marker

    def killed(directory: Path, version: str, files: Any, sha: str, name: str = layout.COMPLETE) -> None:
        if name == layout.COMPLETE:
            raise KeyboardInterrupt("killed")
        write(directory, version, files, sha, name)

    monkeypatch.setattr(fill_module, "_write_marker", killed)
    with pytest.raises(KeyboardInterrupt):
        fill.converge([version])
    monkeypatch.undo()
    _the_rewrite_is_refused(aws, tmp_path, version)


def test_a_pin_change_killed_while_it_removes_the_copy_never_labels_the_old_files(
        aws: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    version = upload(aws, "v1")
    fill, node = filler(aws, tmp_path)
    assert fill.converge([version])
    admitted = {**FILES, "config.json": b'{"layers": 9}'}  # same sizes, other bytes
    upload(aws, "v1", admitted)
    body = aws.get_object(Bucket=BUCKET, Key=f"{PREFIX}/v1/manifest.json")["Body"].read()
    pinned = layout.Version("v1", BUCKET, f"{PREFIX}/v1", manifest=hashlib.sha256(body).hexdigest())
    monkeypatch.setattr(fill_module.shutil, "rmtree", _killed_in_rmtree)
    with pytest.raises(KeyboardInterrupt):
        fill.converge([pinned])
    monkeypatch.undo()
    fresh, node = filler(aws, tmp_path)
    assert fresh.converge([pinned])
    assert (tmp_path / "cache" / "v1" / "config.json").read_bytes() == admitted["config.json"]


def test_a_marker_whose_list_is_not_its_digest_keeps_the_digest(aws: Any, tmp_path: Path) -> None:
    version = upload(aws, "v1")
    fill, node = filler(aws, tmp_path)
    assert fill.converge([version])
    marker = tmp_path / "cache" / "v1" / layout.COMPLETE
    marker.write_text(json.dumps({**json.loads(marker.read_text()), "files": []}))
    _the_rewrite_is_refused(aws, tmp_path, version)


def test_a_manifest_path_with_a_dot_segment_is_filled_once(aws: Any, tmp_path: Path) -> None:
    """The manifest format admits ``./config.json``: files are compared as paths, not strings."""
    version = upload(aws, "v1", {"./config.json": FILES["config.json"],
                                 "weights/model-00001.safetensors": FILES["weights/model-00001.safetensors"]})
    fill, node = filler(aws, tmp_path)
    real, fetched = aws.download_file, []
    aws.download_file = lambda bucket, key, path, **extra: (fetched.append(key), real(bucket, key, path, **extra))[1]
    assert fill.converge([version])
    first = len(fetched)
    assert fill.converge([version]) and fill.converge([version]) and len(fetched) == first == 2


def test_what_a_partial_copy_holds_unlisted_does_not_count_against_the_room(aws: Any, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A killed download's temporary file (s3transfer's name), or a file of another list, goes before the room
    is checked."""
    version = upload(aws, "v1")
    root = tmp_path / "cache"
    (root / f"{layout.PARTIAL}v1" / "weights").mkdir(parents=True)
    (root / f"{layout.PARTIAL}v1" / "weights" / "model-00001.safetensors.a1B2c3d4").write_bytes(b"\0" * 6000)

    def usage(path: Any) -> Usage:
        used = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
        return Usage(100_000, used, 100_000 - used - 80_000)  # 20 kB for the cache, 10 kB of it headroom

    monkeypatch.setattr(shutil, "disk_usage", usage)
    fill, node = filler(aws, tmp_path)
    assert fill.converge([version]), node.annotations


def test_an_unlisted_file_in_a_complete_copy_goes(aws: Any, tmp_path: Path) -> None:
    """A copy an older filler completed from a partial copy with another list's leftovers loses them."""
    version = upload(aws, "v1")
    fill, node = filler(aws, tmp_path)
    assert fill.converge([version])
    (tmp_path / "cache" / "v1" / "chat_template.jinja").write_bytes(b"evil")
    fresh, node = filler(aws, tmp_path)
    assert fresh.converge([version]) and not (tmp_path / "cache" / "v1" / "chat_template.jinja").exists()
    assert (tmp_path / "cache" / "v1" / layout.COMPLETE).exists()


def _marker_of(copy: Path) -> dict[str, Any]:
    marker: dict[str, Any] = json.loads((copy / layout.COMPLETE).read_text())
    return marker


def test_a_complete_copy_that_lost_a_file_is_unlabelled_and_filled_again(aws: Any, tmp_path: Path) -> None:
    version = upload(aws, "v1")
    fill, node = filler(aws, tmp_path)
    fill.converge([version])
    (tmp_path / "cache" / "v1" / "config.json").unlink()
    labels_seen: list[bool] = []
    original = node.patch
    node.patch = lambda labels, notes: (labels_seen.append(labels.get(layout.ready_label(MODEL, "v1")) == "true"),  # type: ignore[method-assign]
                                        original(labels, notes))[1]
    assert fill.converge([version])
    assert labels_seen == [False, True], "unlabelled before the download, labelled after it"
    assert (tmp_path / "cache" / "v1" / "config.json").read_bytes() == FILES["config.json"]


def test_an_interrupted_fill_resumes_with_the_files_it_verified(aws: Any, tmp_path: Path) -> None:
    version = upload(aws, "v1")
    partial = tmp_path / "cache" / f"{layout.PARTIAL}v1" / "weights"
    partial.mkdir(parents=True)
    (partial / "model-00001.safetensors").write_bytes(FILES["weights/model-00001.safetensors"])
    fill, node = filler(aws, tmp_path)
    downloads: list[str] = []
    real = aws.download_file
    aws.download_file = lambda bucket, key, path: (downloads.append(key), real(bucket, key, path))[1]
    assert fill.converge([version])
    assert sorted(downloads) == [f"{PREFIX}/v1/config.json", f"{PREFIX}/v1/weights/model-00002.safetensors"]


def test_the_filler_labels_its_node_through_the_api_with_its_service_account_token(tmp_path: Path) -> None:
    """In the pod: the token and CA it is given, merge-patches of its own node (the HTTPS stand-in)."""
    sys.path.insert(0, str(Path(__file__).parent / "refresh"))
    import fake_kube

    kube = fake_kube.FakeKube()
    try:
        kube.tokens.add("sa-token")
        kube.add({"kind": "Node", "metadata": {"name": "n1", "labels": {"a": "b"}}})
        (tmp_path / "token").write_text("sa-token\n")
        (tmp_path / "ca.crt").write_bytes(kube.ca_pem)
        node = InClusterNode("n1", "models", host=kube.url, root=str(tmp_path))
        node.patch({layout.ready_label(MODEL, "v1"): "true"}, {})
        assert node.metadata()["labels"] == {"a": "b", layout.ready_label(MODEL, "v1"): "true"}
        node.patch({layout.ready_label(MODEL, "v1"): None}, {})
        assert kube.get("Node", "", "n1")["metadata"]["labels"] == {"a": "b"}
        for name, where in (("p1", "n1"), ("p2", "n2")):
            kube.add({"kind": "Pod", "metadata": {"name": name, "namespace": "models"}, "spec": {"nodeName": where}})
        assert [p["metadata"]["name"] for p in node.pods()] == ["p1"], "the pods on its own node"
    finally:
        kube.close()


# -- the admission policy, evaluated as the API server would (CEL) -----------------------------------------------

POLICY = next(o for o in filler_access("models", {}) if o["kind"] == "ValidatingAdmissionPolicy")
FILLER_USER = f"system:serviceaccount:models:{SERVICE_ACCOUNT}"
LABEL = layout.ready_label(MODEL, "v1")


def admitted(old: dict[str, Any], new: dict[str, Any], *, user: str = FILLER_USER, node: str = "n1") -> list[str]:
    """The messages of the policy's validations that deny this UPDATE of a node (empty: allowed; none apply to
    another user)."""
    request = Request("UPDATE", "Node", "", "nodes", "", new["metadata"]["name"], username=user,
                      extra={NODE_NAME_EXTRA: [node]})
    return denials(POLICY, request, old, new) or []


def node(name: str = "n1", labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
         taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": {"taints": taints or []}}


def test_the_filler_may_set_and_remove_weights_labels_and_notes_on_its_own_node() -> None:
    assert admitted(node(), node(labels={LABEL: "true"})) == []
    assert admitted(node(labels={LABEL: "true"}), node()) == []
    assert admitted(node(), node(annotations={LABEL: "failed: no room"})) == []


@pytest.mark.parametrize("change, message", [
    (lambda: (node("n2"), node("n2", labels={LABEL: "true"})), "only the node its pod runs on"),
    (lambda: (node(), node(taints=[{"key": "x", "effect": "NoSchedule"}])), "may not change a node's spec"),
    (lambda: (node(), node(labels={"node.kubernetes.io/exclude-from-external-load-balancers": "true"})),
     "only labels under weights.hyperwarm.io/"),
    (lambda: (node(labels={"team": "a"}), node()), "only labels under weights.hyperwarm.io/"),
    (lambda: (node(), node(annotations={"other": "x"})), "only annotations under weights.hyperwarm.io/"),
])
def test_anything_else_the_filler_tries_on_a_node_is_denied(change: Any, message: str) -> None:
    old, new = change()
    denied = admitted(old, new)
    assert denied and any(message in m for m in denied), denied


def test_the_policy_applies_to_the_filler_alone() -> None:
    assert admitted(node(), node(taints=[{"key": "x", "effect": "NoSchedule"}]), user="kubernetes-admin") == []


# -- the code the ConfigMap ships -------------------------------------------------------------------------------

def test_the_filler_runs_from_the_configmap_alone(tmp_path: Path) -> None:
    """The ConfigMap's files, laid out as the DaemonSet mounts them, import on their own (with boto3 beside): the
    filler's package layout is complete, and it is the code of this checkout."""
    config_map = code_config_map("models", {})
    daemonset_items = [{"key": k, "path": p} for k, p in sorted(__import__(
        "hyperwarm.caches.node_cache", fromlist=["_CODE"])._CODE.items())]
    for item in daemonset_items:
        path = tmp_path / item["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(config_map["data"][item["key"]])
    probe = ("import hyperwarm.functions.node_cache.fill as f, hyperwarm.functions.node_cache.layout as l; "
             "print(f.__file__); print(l.ready_label('m', 'v1'))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"}).stdout
    where, label = out.split()
    assert where.startswith(str(tmp_path)) and label == layout.ready_label("m", "v1")
    assert config_map["metadata"]["name"].startswith("hyperwarm-node-cache-code-")


def test_new_filler_code_is_a_new_configmap_so_the_fillers_restart_onto_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from hyperwarm.caches import node_cache

    before = code_config_map("models", {})["metadata"]["name"]
    monkeypatch.setattr(node_cache, "_source", lambda package, name: "# changed\n")
    assert code_config_map("models", {})["metadata"]["name"] != before
