"""The one gate a version passes before anything moves to it, whoever asks: an S3 event, a replayed letter, a version
that waited in the state table, or a step of a warm rollout (which reads its version back from the table).

Cheapest first:

1. **name** (:func:`name_problem`): the bucket is one the function serves, the prefix has targets, the version
   folder is a version name (``[A-Za-z0-9][A-Za-z0-9_.-]``, at most 63), orderable (:mod:`.versions`) and matches
   the prefix's ``versions`` pattern (:class:`~.contract.Admission`);
2. **move** (:func:`move_problem`): not too far past what the target serves: in the first numeric part that differs
   at most one digit more (``v7`` -> ``v10`` yes, ``v7`` -> ``v999999999`` no) and at most the prefix's ``max_step``;
   a date or timestamp version at most a day ahead of the clock. So one upload cannot put every later version
   behind it;
3. **content** (:func:`content`, the Ports' ``verify``): the exact manifest object the event names (at most
   :data:`~.manifest.MAX_FILES` files), signed by the prefix's publisher key when it has one
   (:mod:`.signature`), and every file's size and contents verified in S3 (:mod:`.manifest`; a signed manifest
   binds each file to the S3 object the publisher uploaded, by its VersionId). Its answer, the
   manifest's SHA-256, is what the node cache's filler pins: it fills from that manifest or not at all.

A refusal of an event for a bucket or prefix the function does not serve is a skip (not ours); every other refusal
is a permanent failure of the version, dead-lettered with its reason, and nothing moves.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from . import manifest, signature
from .config import Settings
from .errors import PermanentError
from .events import ManifestCreated, parse_manifest_created, valid_version
from .versions import UnorderableVersion, parse

TIME_AHEAD_SECONDS = 86_400
"""How far past the clock a date or timestamp version may lie (a publisher's clock and time zone)."""


@dataclass(frozen=True)
class Refusal:
    reason: str
    message: str
    ours: bool = True
    """False: the event is for a bucket or prefix this function does not serve (a skip, no letter)."""


def name_problem(settings: Settings, bucket: str, prefix: str, version: str, *, new: bool = True) -> Refusal | None:
    """Step 1; None when the name passes. ``new=False``: a version that served already (the rollout's way back),
    which the ``versions`` pattern, perhaps newer than it, does not judge."""
    where = f"s3://{bucket}/{prefix}/{version}"
    if bucket not in settings.allowed_buckets:
        return Refusal("unknown-bucket", f"{where}: bucket {bucket} is not configured", ours=False)
    if not settings.targets_for(prefix):
        return Refusal("unknown-prefix", f"{where}: no targets for prefix {prefix}", ours=False)
    problem = version_problem(settings, prefix, version, new=new)
    return None if problem is None else Refusal(problem.reason, f"{where}: {problem.message}")


def version_problem(settings: Settings, prefix: str, version: str, *, new: bool = True) -> Refusal | None:
    """Step 1's rules of the version folder name alone (the pattern only for a ``new`` one); None when it passes."""
    if not isinstance(version, str) or not valid_version(version):
        return Refusal("unorderable-version", f"{version!r}: a version folder is [A-Za-z0-9][A-Za-z0-9_.-], at most "
                                              "63 characters")
    try:
        parse(version)
    except UnorderableVersion as exc:
        return Refusal("unorderable-version", str(exc))
    pattern = settings.admission(prefix).versions
    if new and pattern is not None and not _compiled(pattern).fullmatch(version):
        return Refusal("version-not-allowed", f"{version!r} does not match the prefix's versions pattern {pattern!r}")
    return None


@lru_cache(maxsize=64)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def move_problem(settings: Settings, prefix: str, version: str, serving: str | None, now: float) -> str | None:
    """Step 2 against what the target serves (None: nothing known, only the clock bound applies); None or why not."""
    new = parse(version)
    if new.family == "time":
        ahead = datetime.fromisoformat(new.key[0]).replace(tzinfo=UTC).timestamp() - now
        return (f"{version} lies {ahead / 86400:.1f} days in the future (at most {TIME_AHEAD_SECONDS // 86400} day "
                "ahead of the clock)") if ahead > TIME_AHEAD_SECONDS else None
    if serving is None:
        return None
    try:
        old = parse(serving)
    except UnorderableVersion:
        return None
    if old.family != "numeric":
        return None
    new_parts, old_parts = new.key[0], old.key[0]
    for i in range(max(len(new_parts), len(old_parts))):
        a, b = (new_parts[i] if i < len(new_parts) else 0), (old_parts[i] if i < len(old_parts) else 0)
        if a == b:
            continue
        step, limit = a - b, settings.admission(prefix).max_step
        if len(str(a)) > len(str(b)) + 1:
            return f"{version} jumps from {serving} by more than one digit in part {i + 1} ({b} -> {a})"
        if limit is not None and step > limit:
            return f"{version} is {step} past {serving} in part {i + 1}; the prefix's max_step is {limit}"
        return None
    return None


def content(s3: Any, kms: Any, settings: Settings, created: ManifestCreated) -> str:
    """Step 3: the manifest read, its signature checked (where the prefix has a publisher key) and its files verified;
    the manifest's SHA-256. PermanentError naming what failed, TransientError when S3 or KMS cannot answer now."""
    read = manifest.read(s3, created.bucket, created.key, created.version_id)
    key = settings.admission(created.prefix).publisher_key
    if key is not None:
        signed = signature.read_bundle(manifest.read_signature(s3, created.bucket, created.location,
                                                               signature.MAX_BYTES))
        signature.verify(kms, key, signed)
        signature.check_statement(signed, signature.subject(created.prefix, created.version),
                                  signature.resources(read.files, read.sha256))
    manifest.verify(s3, created.bucket, created.location, read.files,
                    fill_verified=settings.fill_verified(created.prefix), signed=key is not None)
    return read.sha256


def record_problem(settings: Settings, prefix: str, version: Any, bucket: Any, location: Any, *,
                   new: bool = True) -> str | None:
    """A version read back from the state table (a rollout's new or serving version): the name rules, and its
    location is exactly ``<prefix>/<version>`` in a served bucket. None when it passes."""
    if not all(isinstance(v, str) for v in (version, bucket, location)):
        return f"version {version!r} in {bucket!r} at {location!r} is not three strings"
    refusal = name_problem(settings, bucket, prefix, version, new=new)
    if refusal is not None:
        return refusal.message
    if location != f"{prefix}/{version}":
        return f"{version}: location {location!r} is not {prefix}/{version}"
    return None


def recorded_event(settings: Settings, prefix: str, pending: dict[str, Any]) -> ManifestCreated:
    """The upload a rollout record names, read back from the table and checked again (its event and its fields, the
    sequencer too, agree; step 1 passes): what the rollout may stage and switch to (or an endpoint's record commit).
    PermanentError ``refused-record`` otherwise."""
    try:
        created = parse_manifest_created(json.loads(pending["event"]))
    except Exception as exc:  # noqa: BLE001 - a record this function did not write: refused whatever the error
        raise PermanentError("refused-record", f"the rollout record's event is not a manifest event: {exc!r}") from None
    fields = (created.version, created.bucket, created.location, created.prefix, created.sequencer)
    if fields != (pending.get("version"), pending.get("bucket"), pending.get("location"), prefix,
                  pending.get("sequencer")):
        raise PermanentError("refused-record", f"the rollout record names {pending.get('version')!r} at "
                                               f"{pending.get('location')!r} but its event {created.key!r}")
    problem = record_problem(settings, prefix, created.version, created.bucket, created.location)
    if problem is not None:
        raise PermanentError("refused-record", problem)
    return created
