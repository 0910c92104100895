"""The manifest that marks a model version complete, and its verification against S3.

Format (``<model>/<version>/manifest.json``, written LAST by the uploader)::

    {"format": "hyperwarm.manifest/v1",
     "files": [{"path": "config.json", "size": 1234, "sha256": "<64 hex>"}, ...]}

``path`` is relative to the version folder. Verification HEADs every listed object: it must exist
with exactly the listed size; where S3 holds a full-object SHA-256 checksum (uploads with
``ChecksumAlgorithm=SHA256``), it must equal the listed one. Composite (multipart) checksums cannot
be compared with a whole-file digest and are not checked; the size check still applies.
"""

from __future__ import annotations

import base64
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
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_TRANSIENT_CODES = {"SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout", "Throttling",
                    "ThrottlingException", "RequestLimitExceeded", "503", "500"}


@dataclass(frozen=True)
class ManifestFile:
    path: str
    size: int
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
        if path in seen:
            raise PermanentError("corrupt-manifest", f"files[{i}].path {path!r} is listed twice")
        seen.add(path)
        out.append(ManifestFile(path, size, digest))
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


def read(s3: Any, bucket: str, key: str, version_id: str | None) -> tuple[ManifestFile, ...]:
    """Read the exact manifest object version the event announced (not a later overwrite)."""
    args = {"Bucket": bucket, "Key": key, **({"VersionId": version_id} if version_id else {})}
    try:
        obj = s3.get_object(**args)
        if obj["ContentLength"] > MAX_MANIFEST_BYTES:
            raise PermanentError("corrupt-manifest", f"manifest is larger than {MAX_MANIFEST_BYTES} bytes")
        return parse(obj["Body"].read())
    except ClientError as exc:
        error = _client_error(exc, f"s3://{bucket}/{key}")
        if isinstance(error, PermanentError) and error.reason == "manifest-object-missing":
            error = PermanentError("manifest-missing", error.message)
        raise error from None


def _check(s3: Any, bucket: str, location: str, item: ManifestFile) -> str | None:
    key = f"{location}/{item.path}"
    try:
        head = s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    except ClientError as exc:
        error = _client_error(exc, f"s3://{bucket}/{key}")
        if isinstance(error, TransientError):
            raise error from None
        return f"{item.path}: {error.message}"
    if head["ContentLength"] != item.size:
        return f"{item.path}: size {head['ContentLength']} != manifest {item.size}"
    checksum = head.get("ChecksumSHA256")
    if checksum and "-" not in checksum and head.get("ChecksumType", "FULL_OBJECT") == "FULL_OBJECT":
        if base64.b64decode(checksum).hex() != item.sha256:
            return f"{item.path}: sha256 differs from the manifest"
    return None


def verify(s3: Any, bucket: str, location: str, files: tuple[ManifestFile, ...]) -> None:
    """Every listed object exists under ``location`` with its listed size (and checksum where known)."""
    with ThreadPoolExecutor(max_workers=min(16, len(files))) as pool:
        problems = [p for p in pool.map(lambda f: _check(s3, bucket, location, f), files) if p]
    if problems:
        reason = "manifest-object-missing" if any(": not found" in p for p in problems) else "manifest-mismatch"
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        raise PermanentError(reason, f"s3://{bucket}/{location}: {shown}")
