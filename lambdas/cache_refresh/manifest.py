"""The manifest that marks a model version complete, and its verification against S3.

Format (``<model>/<version>/manifest.json``, written LAST by the uploader)::

    {"format": "hyperwarm.manifest/v1",
     "files": [{"path": "config.json", "size": 1234, "sha256": "<64 hex>", "crc64nvme": "<base64>",
                "version_id": "<S3 VersionId>"}, ...]}

``path`` is relative to the version folder; at most :data:`MAX_FILES` files. ``crc64nvme`` (optional) is the
file's CRC64NVME as S3 reports a full-object checksum (base64 of 8 bytes, big-endian): S3 computes it for every new
object, single-part or multipart (its default checksum since December 2024), so it can be compared where a
multipart upload's SHA-256 cannot. ``version_id`` (optional) is the S3 VersionId of the object the publisher
uploaded. ``hyperwarm publish`` writes both; readers that predate a field ignore it.

Verification HEADs every listed object (``ChecksumMode=ENABLED``): it must exist with exactly the listed size, be
the very object the manifest names where it lists a ``version_id`` (an overwrite is a new object, whose VersionId S3
assigns: no writer can choose it), and its contents must be known to equal the manifest's: S3's full-object SHA-256
equal to the listed one, or S3's full-object CRC64NVME equal to the listed one. A checksum only guards accidents: a
CRC is linear, so whoever may write the bucket can make other bytes of the same size and CRC64NVME. So a signed
manifest (its prefix has a publisher key) must list every file's ``version_id``, which the signature then covers;
its files are the publisher's own objects. A file for which S3 holds no comparable checksum (unsigned), or that a
signed manifest does not bind (and whose full-object SHA-256, which cannot be forged, S3 does not hold), is
*unverifiable*, and fails the version, unless every target of the prefix loads
its files through hyperwarm's node cache, whose filler checks each file's SHA-256 before it labels a node ready
(``fill_verified``). Size alone is never enough.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from . import formats
from .errors import PermanentError, RefreshError, TransientError

FORMAT = formats.MANIFEST
MAX_MANIFEST_BYTES = 4 * 1024 * 1024
MAX_FILES = 10_000
"""Files one manifest may list: a bound on the HEADs, the fill and the signature one version costs (a sharded
405B model has a few hundred)."""
_SHA256 = re.compile(r"^[0-9a-f]{64}\Z")
_CRC64 = re.compile(r"^[A-Za-z0-9+/]{11}=\Z")
_VERSION_ID = re.compile(r"^[\x21-\x7e]{1,1024}\Z")
_TRANSIENT_CODES = {"SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout", "Throttling",
                    "ThrottlingException", "RequestLimitExceeded", "503", "500"}


@dataclass(frozen=True)
class ManifestFile:
    path: str
    size: int
    sha256: str
    crc64nvme: str | None = None
    """S3's full-object CRC64NVME of the file (base64), where the publisher listed it."""
    version_id: str | None = None
    """The S3 VersionId of the object the publisher uploaded, where it listed one."""


@dataclass(frozen=True)
class Manifest:
    """A manifest as read: its files and the SHA-256 of its bytes (what a signature and the node cache pin)."""

    files: tuple[ManifestFile, ...]
    sha256: str


def parse(body: bytes) -> tuple[ManifestFile, ...]:
    """Manifest bytes -> files; PermanentError ``corrupt-manifest`` naming what is wrong."""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise PermanentError("corrupt-manifest", f"manifest is not JSON: {exc}") from None
    except RecursionError:
        raise PermanentError("corrupt-manifest", "manifest nests too deeply to be a manifest") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise PermanentError("corrupt-manifest", f"manifest format must be {FORMAT!r}")
    files = doc.get("files")
    if not isinstance(files, list) or not files:
        raise PermanentError("corrupt-manifest", "manifest lists no files")
    if len(files) > MAX_FILES:
        raise PermanentError("corrupt-manifest", f"manifest lists {len(files)} files; at most {MAX_FILES}")
    out, seen = [], set()
    for i, item in enumerate(files):
        if not isinstance(item, dict):
            raise PermanentError("corrupt-manifest", f"files[{i}] is not an object")
        path, size, digest = item.get("path"), item.get("size"), item.get("sha256")
        if (not isinstance(path, str) or not path or path.startswith("/") or ".." in path.split("/")
                or path == "manifest.json"):
            raise PermanentError("corrupt-manifest", f"files[{i}].path {path!r} must be relative to the version")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise PermanentError("corrupt-manifest", f"files[{i}].size {size!r} must be a non-negative integer")
        if not isinstance(digest, str) or not _SHA256.match(digest):
            raise PermanentError("corrupt-manifest", f"files[{i}].sha256 must be 64 lower-case hex digits")
        crc = item.get("crc64nvme")
        if crc is not None and not (isinstance(crc, str) and _CRC64.match(crc)):
            raise PermanentError("corrupt-manifest", f"files[{i}].crc64nvme must be S3's base64 of 8 bytes")
        version_id = item.get("version_id")
        if version_id is not None and not (isinstance(version_id, str) and _VERSION_ID.match(version_id)
                                           and version_id != "null"):
            raise PermanentError("corrupt-manifest", f"files[{i}].version_id must be the S3 VersionId of a versioned "
                                                     "bucket's object (not 'null', which every overwrite shares)")
        if path in seen:
            raise PermanentError("corrupt-manifest", f"files[{i}].path {path!r} is listed twice")
        seen.add(path)
        out.append(ManifestFile(path, size, digest, crc, version_id))
    return tuple(out)


def _client_error(exc: ClientError, what: str) -> RefreshError:
    code = str(exc.response.get("Error", {}).get("Code", ""))
    if code in _TRANSIENT_CODES:
        return TransientError("s3-unavailable", f"{what}: {code}")
    if code in ("404", "NoSuchKey", "NoSuchVersion", "NotFound"):
        return PermanentError("manifest-object-missing", f"{what}: not found")
    if code in ("403", "AccessDenied"):
        # Without s3:ListBucket S3 answers 403, not 404, for a key that does not exist.
        return PermanentError("manifest-object-missing", f"{what}: not found or not readable (HTTP 403; S3 answers "
                              "403 for a missing key to a caller that may not list the bucket)")
    return PermanentError("s3-access", f"{what}: {code}")


def read(s3: Any, bucket: str, key: str, version_id: str | None) -> Manifest:
    """Read the exact manifest object version the event announced (not a later overwrite)."""
    args = {"Bucket": bucket, "Key": key, **({"VersionId": version_id} if version_id else {})}
    try:
        obj = s3.get_object(**args)
        if obj["ContentLength"] > MAX_MANIFEST_BYTES:
            raise PermanentError("corrupt-manifest", f"manifest is larger than {MAX_MANIFEST_BYTES} bytes")
        body = obj["Body"].read()
        return Manifest(parse(body), hashlib.sha256(body).hexdigest())
    except ClientError as exc:
        error = _client_error(exc, f"s3://{bucket}/{key}")
        if isinstance(error, PermanentError) and error.reason == "manifest-object-missing":
            error = PermanentError("manifest-missing", error.message)
        raise error from None


def read_signature(s3: Any, bucket: str, location: str, limit: int) -> bytes:
    """The version's ``model.sig`` (at most ``limit`` bytes); PermanentError ``signature-missing`` without one."""
    key = f"{location}/model.sig"
    try:
        obj = s3.get_object(Bucket=bucket, Key=key)
        if obj["ContentLength"] > limit:
            raise PermanentError("signature-invalid", f"s3://{bucket}/{key} is larger than {limit} bytes")
        body: bytes = obj["Body"].read()
        return body
    except ClientError as exc:
        error = _client_error(exc, f"s3://{bucket}/{key}")
        if isinstance(error, PermanentError) and error.reason == "manifest-object-missing":
            error = PermanentError("signature-missing", f"{error.message}: this prefix admits signed versions only; "
                                                        "publish with `hyperwarm publish`")
        raise error from None


def _check(s3: Any, bucket: str, location: str, item: ManifestFile, fill_verified: bool, signed: bool) -> str | None:
    key = f"{location}/{item.path}"
    try:
        head = s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    except ClientError as exc:
        error = _client_error(exc, f"s3://{bucket}/{key}")
        if isinstance(error, TransientError):
            raise error from None
        return f"{item.path}: {error.message}"
    if item.version_id is not None and head.get("VersionId") != item.version_id:
        return (f"{item.path}: overwritten since it was published (S3 holds VersionId {head.get('VersionId')!r}, the "
                f"manifest {item.version_id!r})")
    if head["ContentLength"] != item.size:
        return f"{item.path}: size {head['ContentLength']} != manifest {item.size}"
    whole = head.get("ChecksumType", "FULL_OBJECT") == "FULL_OBJECT"
    crc, sha = head.get("ChecksumCRC64NVME"), head.get("ChecksumSHA256")
    if whole and sha and "-" not in sha:  # SHA-256 cannot be forged: proof of contents, signed or not
        return None if base64.b64decode(sha).hex() == item.sha256 else f"{item.path}: sha256 differs from the manifest"
    crc_listed = bool(whole and crc and item.crc64nvme)
    if crc_listed and crc != item.crc64nvme:
        return f"{item.path}: CRC64NVME differs from the manifest"
    if (signed and item.version_id is not None) or (crc_listed and not signed) or fill_verified:
        # the publisher's own object (its CRC64NVME an accident check); unsigned, a bucket writer could rewrite the
        # manifest too, so the CRC only catches accidents; node-cached, the filler checks SHA-256 before any pod reads
        return None
    if signed:
        return (f"{item.path}: {UNVERIFIABLE}: the signed manifest lists no version_id, so nothing binds the file to "
                "the object the publisher uploaded (a CRC64NVME can be forged); publish with `hyperwarm publish` to "
                "a versioned bucket")
    held = "CRC64NVME" if crc else "SHA-256" if sha else "no checksum"
    return (f"{item.path}: {UNVERIFIABLE}: S3 holds {held}{' (per part)' if not whole else ''} and the manifest "
            f"{'lists no crc64nvme' if not item.crc64nvme else 'a CRC64NVME S3 does not hold'}")


UNVERIFIABLE = "unverifiable"


def verify(s3: Any, bucket: str, location: str, files: tuple[ManifestFile, ...], *, fill_verified: bool,
           signed: bool = False) -> None:
    """Every listed object exists under ``location`` with its listed size and contents (see the module); ``signed``:
    the publisher's signature covers ``files``, whose objects must then be bound by ``version_id``."""
    with ThreadPoolExecutor(max_workers=min(16, len(files))) as pool:
        problems = [p for p in pool.map(lambda f: _check(s3, bucket, location, f, fill_verified, signed), files) if p]
    if problems:
        reason = ("manifest-object-missing" if any(": not found" in p for p in problems) else
                  "manifest-unverifiable" if all(UNVERIFIABLE in p for p in problems) else "manifest-mismatch")
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        raise PermanentError(reason, f"s3://{bucket}/{location}: {shown}")
