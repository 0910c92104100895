"""``hyperwarm publish``: upload a model version the way the cache refresh admits it, signed.

One command does, in this order (the manifest last: its arrival is what starts a refresh)::

    hyperwarm publish ./llama-3.1-70b-instruct s3://hyperwarm-models-prod/llama-3.1-70b-instruct/v8 \\
        --key arn:aws:kms:us-east-1:111122223333:key/...

1. hashes every file of the directory: SHA-256 (what the signature and the node cache's filler check) and CRC64NVME
   (what S3 keeps as a full-object checksum, single-part or multipart, so the refresh can compare every file
   without reading it);
2. uploads the files with ``ChecksumAlgorithm=CRC64NVME`` (S3 checks each against what was sent), keeps the
   VersionId S3 answers for each and checks that S3 holds that very object with the CRC64NVME hashed;
3. writes the manifest with each file's ``version_id`` (what binds the file to the object uploaded: a CRC is no
   proof against a forger) and signs the version with the publisher key (``kms:Sign``, ``ECDSA_SHA_256``): an
   OpenSSF model-signing bundle over every file and the manifest, for ``<prefix>/<version>`` alone
   (:mod:`hyperwarm.functions.cache_refresh.signature`); uploads ``model.sig``, then ``manifest.json``.

A version folder that already holds a manifest is refused: a version, once published, never changes (publish the
next one). Without ``--key`` the version is published unsigned, which a prefix with a publisher key refuses. A
signed version needs a versioned bucket (hyperwarm's model buckets are): without VersionIds nothing is written.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import re
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hyperwarm._internal.aws_cli import run_aws
from hyperwarm.functions.cache_refresh import formats, signature
from hyperwarm.functions.cache_refresh.events import valid_version

CHUNK = 8 * 1024 * 1024
_TARGET = re.compile(r"^s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/(?P<prefix>.+)/(?P<version>[^/]+)/?$")


Progress = Callable[[str, int], AbstractContextManager[Callable[[int], None]]]


class PublishError(ValueError):
    """Nothing was published (or, once uploads began, no manifest was written): the reason, for a person."""


@dataclass(frozen=True)
class Hashed:
    path: str
    size: int
    sha256: str
    crc64nvme: str
    version_id: str | None = None
    """The S3 VersionId of the object uploaded (None: not uploaded yet, or the bucket is not versioned)."""


def split_target(uri: str) -> tuple[str, str, str]:
    """``s3://bucket/<prefix>/<version>`` -> (bucket, prefix, version); PublishError naming what is allowed."""
    match = _TARGET.match(uri)
    if match is None or not valid_version(match["version"]):
        raise PublishError(f"{uri!r}: give s3://<bucket>/<prefix>/<version>, the version a folder name like v8 "
                           "([A-Za-z0-9][A-Za-z0-9_.-], at most 63 characters)")
    return match["bucket"], match["prefix"], match["version"]


def model_files(directory: Path) -> list[Path]:
    """Every regular file below ``directory`` (sorted), without a manifest or signature of an earlier publish."""
    if not directory.is_dir():
        raise PublishError(f"{directory}: not a directory")
    files = sorted(p for p in directory.rglob("*") if p.is_file() and not p.is_symlink()
                   and p.relative_to(directory).as_posix() not in (signature.MANIFEST, signature.NAME))
    if not files:
        raise PublishError(f"{directory}: no files to publish")
    return files


def hash_file(path: Path, relative: str, progress: Callable[[int], None] = lambda n: None) -> Hashed:
    """SHA-256 and CRC64NVME (S3's base64 of its 8 bytes) of one file, read once."""
    from awscrt import checksums

    sha, crc = hashlib.sha256(), 0
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK), b""):
            sha.update(chunk)
            crc = checksums.crc64nvme(chunk, crc)
            progress(len(chunk))
    return Hashed(relative, path.stat().st_size, sha.hexdigest(), base64.b64encode(crc.to_bytes(8, "big")).decode())


def manifest_bytes(hashed: list[Hashed]) -> bytes:
    return json.dumps({"format": formats.MANIFEST, "files": [
        {"path": h.path, "size": h.size, "sha256": h.sha256, "crc64nvme": h.crc64nvme,
         **({"version_id": h.version_id} if h.version_id else {})} for h in hashed]}, indent=1).encode()


def public_key_hint(kms: Any, key: str) -> str:
    """SHA-256 hex of the key's public PEM, as the OpenSSF tool records it (its verifier compares it)."""
    der = kms.get_public_key(KeyId=key)["PublicKey"]
    body = base64.b64encode(der).decode()
    pem = "-----BEGIN PUBLIC KEY-----\n" + "\n".join(body[i:i + 64] for i in range(0, len(body), 64)) + \
        "\n-----END PUBLIC KEY-----\n"
    return hashlib.sha256(pem.encode()).hexdigest()


def publish(directory: Path, uri: str, key: str | None, *, s3: Any, kms: Any,
            say: Callable[[str], None] = print, progress: Progress | None = None) -> dict[str, Any]:
    """Hash, upload, check and sign one version (module docstring); returns what was published. ``progress``
    (what, total bytes) -> a context whose value advances a bar by bytes done. Default: none."""
    steps = progress or _no_progress
    bucket, prefix, version = split_target(uri)
    location = f"{prefix}/{version}"
    if _exists(s3, bucket, f"{location}/{signature.MANIFEST}"):
        raise PublishError(f"s3://{bucket}/{location}/ holds a manifest already: a published version never changes; "
                           "publish the next version")
    files = model_files(directory)
    total = sum(p.stat().st_size for p in files)
    say(f"hashing {len(files)} files, {total / 1e9:.2f} GB")
    hashed = []
    with steps("hashing", total) as advance:
        for path in files:
            hashed.append(hash_file(path, path.relative_to(directory).as_posix(), advance))
    with steps("uploading", total) as advance, _version_ids(s3) as uploaded:
        for path, item in zip(files, hashed, strict=True):
            s3.upload_file(str(path), bucket, f"{location}/{item.path}", ExtraArgs={"ChecksumAlgorithm": "CRC64NVME"},
                           Callback=advance)
    hashed = [replace(h, version_id=uploaded.get(f"{location}/{h.path}")) for h in hashed]
    if key is not None and not all(h.version_id for h in hashed):
        raise PublishError(f"s3://{bucket} answered no VersionId: a signed version binds each file to the object "
                           "uploaded, which needs a versioned bucket (enable versioning); no manifest written")
    wrong = [h.path for h in hashed if _changed(s3.head_object(Bucket=bucket, Key=f"{location}/{h.path}",
                                                               ChecksumMode="ENABLED"), h)]
    if wrong:
        raise PublishError(f"S3 holds another object or CRC64NVME than uploaded for {', '.join(wrong[:5])}: a file "
                           "changed while it was published; no manifest written, publish again")
    manifest = manifest_bytes(hashed)
    if key is not None:
        payload = signature.statement(signature.subject(prefix, version), signature.resources(
            hashed, hashlib.sha256(manifest).hexdigest()))
        sig = signature.bundle(signature.sign(kms, key, payload), public_key_hint(kms, key))
        say(f"signed {location} with {key}")
        s3.put_object(Bucket=bucket, Key=f"{location}/{signature.NAME}", Body=sig, ChecksumAlgorithm="CRC64NVME")
    s3.put_object(Bucket=bucket, Key=f"{location}/{signature.MANIFEST}", Body=manifest, ChecksumAlgorithm="CRC64NVME")
    say(f"published s3://{bucket}/{location}/ ({len(hashed)} files{', signed' if key else ', unsigned'}): the refresh "
        "starts on its manifest")
    return {"bucket": bucket, "location": location, "files": len(hashed), "bytes": total, "signed": key is not None}


def _changed(head: dict[str, Any], item: Hashed) -> bool:
    return head.get("ChecksumCRC64NVME") != item.crc64nvme or (item.version_id is not None
                                                              and head.get("VersionId") != item.version_id)


@contextmanager
def _version_ids(s3: Any) -> Iterator[dict[str, str]]:
    """Key -> the VersionId S3 answered for each object ``s3`` writes meanwhile (``upload_file`` returns none): the
    PutObject or CompleteMultipartUpload response itself, not a later HEAD that an overwrite could answer."""
    found: dict[str, str] = {}

    def remember(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["hyperwarm_key"] = params.get("Key")

    def record(parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        version = parsed.get("VersionId")
        if context.get("hyperwarm_key") and version and version != "null":
            found[context["hyperwarm_key"]] = version

    hooks = [(f"{when}.s3.{operation}", hook) for operation in ("PutObject", "CompleteMultipartUpload")
             for when, hook in (("before-parameter-build", remember), ("after-call", record))]
    for event, hook in hooks:
        s3.meta.events.register(event, hook)
    try:
        yield found
    finally:
        for event, hook in hooks:
            s3.meta.events.unregister(event, hook)


def _exists(s3: Any, bucket: str, key: str) -> bool:
    from botocore.exceptions import ClientError

    try:
        s3.head_object(Bucket=bucket, Key=key)
        return True
    except ClientError as exc:
        if str(exc.response.get("Error", {}).get("Code")) in ("404", "NoSuchKey", "NotFound"):
            return False
        raise


@contextmanager
def _no_progress(what: str, total: int) -> Iterator[Callable[[int], None]]:
    yield lambda n: None


@contextmanager
def _rich_progress(what: str, total: int) -> Iterator[Callable[[int], None]]:
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                  transient=True) as bar:
        task = bar.add_task(what, total=total)
        yield lambda n: bar.advance(task, n)


def _run(args: argparse.Namespace) -> int:
    import boto3

    return run_aws("hyperwarm publish", lambda: publish(
        Path(args.directory), args.target, args.key, s3=boto3.client("s3", region_name=args.region),
        kms=boto3.client("kms", region_name=args.region), progress=_rich_progress), refused=(PublishError,))[1]


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("publish", help="upload a model version signed, manifest last (what the cache "
                                                   "refresh admits)")
    parser.add_argument("directory", help="the model's files (config, tokenizer, weights)")
    parser.add_argument("target", help="s3://<bucket>/<prefix>/<version>, e.g. s3://models/llama-3.1-70b-instruct/v8")
    parser.add_argument("--key", help="the publisher key's ARN (the refresh stack's PublisherKeyArn output); without "
                                      "it the version is unsigned, which a prefix with a publisher key refuses")
    parser.add_argument("--region", default=None, help="the bucket's and key's region (default: boto3's)")
    parser.set_defaults(func=_run)
