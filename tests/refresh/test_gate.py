"""The one gate, driven as an attacker would: whoever can write the model bucket, the state table or the workflow's
input tries to move production. On moto's S3, KMS (digest signing: moto_ext), DynamoDB and SQS, the refresh
function run in-process, versions uploaded by ``hyperwarm publish`` itself."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from refresh_world import BUCKET, PREFIX, TABLE, s3_event

from hyperwarm.functions.cache_refresh import contract, gate, handler, manifest, signature
from hyperwarm.functions.cache_refresh.config import Admission, Settings
from hyperwarm.functions.cache_refresh.errors import PermanentError
from hyperwarm.functions.cache_refresh.events import parse_manifest_created
from hyperwarm.functions.cache_refresh.state import DynamoStore, StateTable
from hyperwarm.refresh import publish as publishing, reset as resetting

MB = 1024 * 1024


def _key(spec: str = "ECC_NIST_P256") -> str:
    return boto3.client("kms", region_name="us-west-2").create_key(KeySpec=spec, KeyUsage="SIGN_VERIFY")[
        "KeyMetadata"]["Arn"]


@pytest.fixture
def signed(world: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The world with its prefix admitting only versions the publisher key signed."""
    world.key = _key()
    monkeypatch.setenv(contract.ADMISSION, json.dumps({PREFIX: {"publisher_key": world.key}}))
    handler._settings = None
    return world


def _publish(world: Any, tmp_path: Path, version: str, key: str | None, files: dict[str, bytes] | None = None) -> Any:
    """``hyperwarm publish`` of a version, then the manifest's event as S3 sends it."""
    folder = tmp_path / version
    for name, body in (files or {"config.json": json.dumps({"v": version}).encode(),
                                 "weights/model.safetensors": version.encode() * 64}).items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(body)
    publishing.publish(folder, f"s3://{BUCKET}/{PREFIX}/{version}", key, s3=world.s3,
                       kms=boto3.client("kms", region_name="us-west-2"), say=lambda text: None)
    return _event(world, version)


def _event(world: Any, version: str, sequencer: str = "5F00000000000000A1") -> dict[str, Any]:
    head = world.s3.head_object(Bucket=BUCKET, Key=f"{PREFIX}/{version}/manifest.json")
    return s3_event(f"{PREFIX}/{version}/manifest.json", sequencer, head.get("VersionId"))


def _copy(world: Any, source: str, version: str) -> None:
    """A bucket writer copies every object of one version folder under another."""
    for obj in world.s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{PREFIX}/{source}/")["Contents"]:
        name = obj["Key"].split(f"/{source}/", 1)[1]
        world.s3.copy_object(Bucket=BUCKET, Key=f"{PREFIX}/{version}/{name}", ChecksumAlgorithm="CRC64NVME",
                             CopySource={"Bucket": BUCKET, "Key": obj["Key"]})


def _deployed_function() -> str:
    """The refresh function as deployed, with the environment the in-process handler reads (what a reset checks)."""
    import io
    import os
    import zipfile

    role = boto3.client("iam", region_name="us-west-2").create_role(
        RoleName="refresh", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("handler.py", "def lambda_handler(event, context):\n    return None\n")
    variables = {k: v for k, v in os.environ.items() if k.startswith("HYPERWARM_")}
    boto3.client("lambda", region_name="us-west-2").create_function(
        FunctionName="hyperwarm-cache-refresh", Runtime="python3.13", Role=role, Handler="handler.lambda_handler",
        Code={"ZipFile": code.getvalue()}, Environment={"Variables": variables})
    return "hyperwarm-cache-refresh"


def _refused(world: Any, answer: dict[str, Any], reason: str) -> None:
    assert answer["status"] == "failed" and answer["reason"] == reason, answer
    assert world.served_hyperpod() == f"{PREFIX}/v1" and world.served_endpoint() == f"s3://{BUCKET}/{PREFIX}/v1/"
    assert {letter["reason"] for letter in world.dead_letters()} == {reason}


# -- publisher identity ------------------------------------------------------------------------------------------

def test_a_version_the_publisher_signed_moves_every_target(signed: Any, context: Any, tmp_path: Path) -> None:
    answer = handler.lambda_handler(_publish(signed, tmp_path, "v2", signed.key), context)
    assert answer["status"] == "refreshed" and signed.served_hyperpod() == f"{PREFIX}/v2"
    body = signed.s3.get_object(Bucket=BUCKET, Key=f"{PREFIX}/v2/model.sig")["Body"].read()
    statement = json.loads(signature.read_bundle(body).payload)
    assert statement["predicateType"] == "https://model_signing/signature/v1.0"
    assert statement["subject"][0]["name"] == f"{PREFIX}/v2"
    assert {r["name"] for r in statement["predicate"]["resources"]} == {
        "config.json", "weights/model.safetensors", "manifest.json"}


def test_an_unsigned_version_is_dead_lettered_and_nothing_moves(signed: Any, context: Any, tmp_path: Path) -> None:
    _refused(signed, handler.lambda_handler(_publish(signed, tmp_path, "v2", None), context), "signature-missing")


def test_a_version_signed_with_another_key_is_refused(signed: Any, context: Any, tmp_path: Path) -> None:
    _refused(signed, handler.lambda_handler(_publish(signed, tmp_path, "v2", _key()), context), "signature-invalid")


def test_a_signed_version_copied_under_another_folder_is_refused(signed: Any, context: Any, tmp_path: Path) -> None:
    """Every object of a real signed version, signature included, copied to v3 (or a far higher number): the
    signature names the folder it was made for."""
    handler.lambda_handler(_publish(signed, tmp_path, "v2", signed.key), context)
    _copy(signed, "v2", "v3")
    answer = handler.lambda_handler(_event(signed, "v3", "5F00000000000000B1"), context)
    assert answer["reason"] == "signature-mismatch" and signed.served_hyperpod() == f"{PREFIX}/v2"
    assert "signed for 'models/llama/v2'" in signed.dead_letters()[0]["message"]


def test_a_shard_swapped_after_signing_is_refused_even_with_a_matching_manifest(signed: Any, context: Any,
                                                                                 tmp_path: Path) -> None:
    """The writer swaps a weights file for one of the same size and rewrites the manifest to match it: the
    signature covers the manifest's digest."""
    _publish(signed, tmp_path, "v2", signed.key)
    evil = b"E" * len(b"v2" * 64)
    signed.s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}/v2/weights/model.safetensors", Body=evil,
                         ChecksumAlgorithm="CRC64NVME")
    read = manifest.read(signed.s3, BUCKET, f"{PREFIX}/v2/manifest.json", None)
    files = [publishing.Hashed(f.path, f.size, f.sha256, f.crc64nvme or "") for f in read.files]
    crc = signed.s3.head_object(Bucket=BUCKET, Key=f"{PREFIX}/v2/weights/model.safetensors",
                                ChecksumMode="ENABLED")["ChecksumCRC64NVME"]
    import hashlib
    files = [publishing.Hashed(f.path, f.size, hashlib.sha256(evil).hexdigest(), crc)
             if f.path.startswith("weights/") else f for f in files]
    signed.s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}/v2/manifest.json", Body=publishing.manifest_bytes(files))
    _refused(signed, handler.lambda_handler(_event(signed, "v2"), context), "signature-mismatch")


def _same_crc64nvme(genuine: bytes, fill: bytes = b"E") -> bytes:
    """Other bytes of ``genuine``'s size and CRC64NVME: CRC is linear, so flipping some of the last 128 bits (found
    by elimination over GF(2)) moves the CRC to any value. What a bucket writer who cannot sign computes in a
    millisecond."""
    from awscrt.checksums import crc64nvme

    evil = bytearray(fill * len(genuine))
    base, n, basis = crc64nvme(bytes(evil)), len(evil), []
    for i in range(128):
        flipped = bytearray(evil)
        flipped[n - 16 + i // 8] ^= 1 << (i % 8)
        v, m = crc64nvme(bytes(flipped)) ^ base, 1 << i
        for bv, bm in basis:
            if v ^ bv < v:
                v, m = v ^ bv, m ^ bm
        if v:
            basis = sorted([*basis, (v, m)], reverse=True)
    v, m = base ^ crc64nvme(genuine), 0
    for bv, bm in basis:
        if v ^ bv < v:
            v, m = v ^ bv, m ^ bm
    assert v == 0
    for i in range(128):
        if m >> i & 1:
            evil[n - 16 + i // 8] ^= 1 << (i % 8)
    assert bytes(evil) != genuine and crc64nvme(bytes(evil)) == crc64nvme(genuine)
    return bytes(evil)


SHARD = f"{PREFIX}/v2/weights/model.safetensors"


def _swap_shard(world: Any) -> bytes:
    """A bucket writer overwrites v2's shard with bytes of its size and CRC64NVME; manifest and model.sig untouched."""
    genuine = world.s3.get_object(Bucket=BUCKET, Key=SHARD)["Body"].read()
    evil = _same_crc64nvme(genuine)
    world.s3.put_object(Bucket=BUCKET, Key=SHARD, Body=evil, ChecksumAlgorithm="CRC64NVME")
    assert world.s3.head_object(Bucket=BUCKET, Key=SHARD, ChecksumMode="ENABLED")["ChecksumCRC64NVME"] == \
        manifest.read(world.s3, BUCKET, f"{PREFIX}/v2/manifest.json", None).files[1].crc64nvme
    return evil


def test_publish_binds_every_file_to_the_s3_object_it_uploaded(signed: Any, tmp_path: Path) -> None:
    """Single-part and multipart (over boto3's 8 MiB threshold) uploads alike: the VersionId S3 answered."""
    _publish(signed, tmp_path, "v2", signed.key, {"config.json": b"{}", "weights/model.safetensors": b"w" * 9 * MB})
    files = manifest.read(signed.s3, BUCKET, f"{PREFIX}/v2/manifest.json", None).files
    assert [f.path for f in files] == ["config.json", "weights/model.safetensors"]
    assert signed.s3.head_object(Bucket=BUCKET, Key=SHARD, PartNumber=1)["PartsCount"] == 2
    for f in files:
        head = signed.s3.head_object(Bucket=BUCKET, Key=f"{PREFIX}/v2/{f.path}")
        assert f.version_id and f.version_id == head["VersionId"], f


def test_publish_refuses_to_sign_without_version_ids(signed: Any, tmp_path: Path) -> None:
    """A bucket whose versioning is suspended (or never enabled) gives every new object the VersionId 'null' (moto:
    none), which an overwrite shares: nothing to bind, so no manifest is written."""
    signed.s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Suspended"})
    with pytest.raises(publishing.PublishError, match="answered no VersionId: .* needs a versioned bucket"):
        _publish(signed, tmp_path, "v2", signed.key)
    assert "Contents" not in signed.s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{PREFIX}/v2/manifest.json")


def test_a_signed_shard_swapped_for_one_of_its_size_and_crc64nvme_is_refused(signed: Any, context: Any,
                                                                             tmp_path: Path) -> None:
    """CRC64NVME guards accidents, not a forger: the signed manifest names the object S3 stored for each file, and an
    overwrite is another object (S3 assigns its VersionId; no writer chooses it)."""
    _publish(signed, tmp_path, "v2", signed.key)
    _swap_shard(signed)
    _refused(signed, handler.lambda_handler(_event(signed, "v2"), context), "manifest-mismatch")
    assert "weights/model.safetensors: overwritten since it was published" in signed.dead_letters()[0]["message"]


def test_a_signed_manifest_without_version_ids_is_unverifiable_unless_the_fill_checks_it(signed: Any, context: Any,
                                                                                         tmp_path: Path) -> None:
    """A publisher who signed a manifest without version_id (another tool, or an unversioned bucket): its files could
    be swapped for CRC collisions, so it is refused, except where every target loads through the node cache."""
    _publish(signed, tmp_path, "v2", signed.key)
    read = manifest.read(signed.s3, BUCKET, f"{PREFIX}/v2/manifest.json", None)
    unbound = [publishing.Hashed(f.path, f.size, f.sha256, f.crc64nvme or "") for f in read.files]
    body = publishing.manifest_bytes(unbound)
    kms = boto3.client("kms", region_name="us-west-2")
    payload = signature.statement(signature.subject(PREFIX, "v2"), signature.resources(
        unbound, hashlib.sha256(body).hexdigest()))
    signed.s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}/v2/model.sig", Body=signature.bundle(
        signature.sign(kms, signed.key, payload), publishing.public_key_hint(kms, signed.key)))
    signed.s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}/v2/manifest.json", Body=body)
    _refused(signed, handler.lambda_handler(_event(signed, "v2"), context), "manifest-unverifiable")
    assert "no version_id" in signed.dead_letters()[0]["message"]
    for f in read.files:  # the same bytes again, S3 keeping their SHA-256 (which no one can forge): proof enough
        key = f"{PREFIX}/v2/{f.path}"
        body_of = signed.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        signed.s3.put_object(Bucket=BUCKET, Key=key, Body=body_of, ChecksumAlgorithm="SHA256")
    kept = Settings(targets=handler.settings().targets, state_table=TABLE, allowed_buckets=frozenset({BUCKET}),
                    admissions={PREFIX: Admission(publisher_key=signed.key)})
    assert gate.content(signed.s3, kms, kept, parse_manifest_created(_event(signed, "v2"))) == \
        hashlib.sha256(body).hexdigest()
    node_cached = contract.HyperPodTarget("c", "ns", "llama", node_cache=contract.NodeCache("llama"))
    settings = Settings(targets={PREFIX: (node_cached,)}, state_table=TABLE, allowed_buckets=frozenset({BUCKET}),
                        admissions={PREFIX: Admission(publisher_key=signed.key)})
    created = parse_manifest_created(_event(signed, "v2"))
    assert gate.content(signed.s3, kms, settings, created) == hashlib.sha256(body).hexdigest()


def test_an_unsigned_version_is_checked_as_before(world: Any, context: Any, tmp_path: Path) -> None:
    """Without a publisher key a bucket writer could rewrite the manifest too: version_id is optional there and the
    checksums catch accidents (a truncated or different upload)."""
    _publish(world, tmp_path, "v2", None, {"config.json": b"{}", "weights/model.safetensors": b"w" * 128})
    body = json.loads(world.s3.get_object(Bucket=BUCKET, Key=f"{PREFIX}/v2/manifest.json")["Body"].read())
    for item in body["files"]:
        del item["version_id"]
    world.s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}/v2/manifest.json", Body=json.dumps(body).encode())
    assert handler.lambda_handler(_event(world, "v2"), context)["status"] == "refreshed"
    world.s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}/v3/weights/model.safetensors", Body=b"x" * 128,
                        ChecksumAlgorithm="CRC64NVME")
    world.s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}/v3/config.json", Body=b"{}", ChecksumAlgorithm="CRC64NVME")
    event = _manifest_of(world, "v3", {"config.json": b"{}", "weights/model.safetensors": b"w" * 128})
    assert handler.lambda_handler(event, context)["reason"] == "manifest-mismatch"
    assert world.served_hyperpod() == f"{PREFIX}/v2"


# -- contents verified -------------------------------------------------------------------------------------------

def _multipart(world: Any, key: str, parts: list[bytes], algorithm: str = "CRC64NVME") -> None:
    upload = world.s3.create_multipart_upload(Bucket=BUCKET, Key=key, ChecksumAlgorithm=algorithm)["UploadId"]
    done = [{"PartNumber": n, **{k: v for k, v in world.s3.upload_part(
        Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=n, Body=body, ChecksumAlgorithm=algorithm).items()
        if k in ("ETag", f"Checksum{algorithm}")}} for n, body in enumerate(parts, 1)]
    world.s3.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload, MultipartUpload={"Parts": done})


def _manifest_of(world: Any, version: str, files: dict[str, bytes]) -> dict[str, Any]:
    hashed = []
    for name, body in files.items():
        path = Path("/tmp") / f"hyperwarm-gate-{version}-{name.replace('/', '_')}"
        path.write_bytes(body)
        hashed.append(publishing.hash_file(path, name))
    put = world.s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}/{version}/manifest.json",
                              Body=publishing.manifest_bytes(hashed))
    return s3_event(f"{PREFIX}/{version}/manifest.json", "5F00000000000000C1", put.get("VersionId"))


def test_a_multipart_shard_is_checked_by_its_full_object_crc64nvme(world: Any, context: Any) -> None:
    shard = [b"a" * (5 * MB), b"b" * MB]
    _multipart(world, f"{PREFIX}/v2/weights/model.safetensors", shard)
    world.s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}/v2/config.json", Body=b"{}", ChecksumAlgorithm="CRC64NVME")
    event = _manifest_of(world, "v2", {"config.json": b"{}", "weights/model.safetensors": b"".join(shard)})
    assert handler.lambda_handler(event, context)["status"] == "refreshed"


def test_a_multipart_shard_swapped_for_one_of_its_size_is_refused(world: Any, context: Any) -> None:
    shard = [b"a" * (5 * MB), b"b" * MB]
    _multipart(world, f"{PREFIX}/v2/weights/model.safetensors", [b"a" * (5 * MB), b"X" * MB])
    world.s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}/v2/config.json", Body=b"{}", ChecksumAlgorithm="CRC64NVME")
    event = _manifest_of(world, "v2", {"config.json": b"{}", "weights/model.safetensors": b"".join(shard)})
    _refused(world, handler.lambda_handler(event, context), "manifest-mismatch")


@pytest.mark.parametrize("fill_verified", [False, True])
def test_a_file_s3_holds_only_a_per_part_checksum_for_is_unverifiable_unless_the_fill_checks_it(
        world: Any, fill_verified: bool) -> None:
    """Size alone is never enough: a multipart upload with CRC32 parts (a composite checksum) cannot be compared with
    the manifest, so the version fails, except where every target loads through the node cache, whose filler
    checks SHA-256 before any pod may read the file."""
    shard = [b"a" * (5 * MB), b"b" * MB]
    _multipart(world, f"{PREFIX}/v2/weights/model.safetensors", shard, algorithm="CRC32")
    event = _manifest_of(world, "v2", {"weights/model.safetensors": b"".join(shard)})
    node_cached = contract.HyperPodTarget("c", "ns", "llama", node_cache=contract.NodeCache("llama"))
    settings = Settings(targets={PREFIX: (node_cached,) if fill_verified else handler.settings().targets[PREFIX]},
                        state_table=TABLE, allowed_buckets=frozenset({BUCKET}))
    created = parse_manifest_created(event)
    if fill_verified:
        assert len(gate.content(world.s3, None, settings, created)) == 64
    else:
        with pytest.raises(PermanentError, match="weights/model.safetensors: unverifiable: S3 holds") as raised:
            gate.content(world.s3, None, settings, created)
        assert raised.value.reason == "manifest-unverifiable"


def test_a_manifest_of_more_files_than_the_cap_is_corrupt() -> None:
    files = [{"path": f"f{i}", "size": 1, "sha256": "0" * 64} for i in range(manifest.MAX_FILES + 1)]
    with pytest.raises(PermanentError, match=f"lists {manifest.MAX_FILES + 1} files; at most {manifest.MAX_FILES}"):
        manifest.parse(json.dumps({"format": "hyperwarm.manifest/v1", "files": files}).encode())


@pytest.mark.parametrize("version_id", ["null", "", 7, "a b"])
def test_a_version_id_that_binds_nothing_is_corrupt(version_id: Any) -> None:
    files = [{"path": "f", "size": 1, "sha256": "0" * 64, "version_id": version_id}]
    with pytest.raises(PermanentError, match=r"files\[0\].version_id must be the S3 VersionId") as raised:
        manifest.parse(json.dumps({"format": "hyperwarm.manifest/v1", "files": files}).encode())
    assert raised.value.reason == "corrupt-manifest"


# -- order that cannot be hijacked -------------------------------------------------------------------------------

def test_a_far_jump_is_refused_and_the_next_real_version_still_moves(world: Any, context: Any, tmp_path: Path) -> None:
    """The 18-digit upload that would put every later version behind it is a failure of its own."""
    _refused(world, handler.lambda_handler(_publish(world, tmp_path, "v999999999999999999", None), context),
             "version-jump")
    assert handler.lambda_handler(_publish(world, tmp_path, "v2", None), context)["status"] == "refreshed"
    assert world.served_hyperpod() == f"{PREFIX}/v2"


def test_a_far_jump_is_refused_before_its_manifest_signature_or_files_are_read(signed: Any, context: Any,
                                                                              tmp_path: Path) -> None:
    """Name, then move, then content: a far jump costs no S3 read and no kms:Verify (a flood of them spends none)."""
    event = _publish(signed, tmp_path, "v999999999999999999", signed.key)
    calls: list[str] = []
    for service in ("s3", "kms"):
        handler.client(service).meta.events.register(f"before-call.{service}",
                                                     lambda model, **kwargs: calls.append(model.name))
    _refused(signed, handler.lambda_handler(event, context), "version-jump")
    assert calls == []
    assert handler.lambda_handler(_publish(signed, tmp_path, "v2", signed.key), context)["status"] == "refreshed"
    assert {"HeadObject", "Verify"} <= set(calls)  # the hooks see what a version that moves is checked with


@pytest.mark.parametrize("version, serving, max_step, refused", [
    ("v10", "v9", None, None), ("v99", "v9", None, None), ("v100", "v9", None, "more than one digit"),
    ("1.10.0", "1.9.3", None, None), ("2.0.0", "1.9.3", None, None), ("v9", "v7", 1, "max_step is 1"),
    ("20261205", "20261101", None, None), ("v5", None, None, None),
    ("2026-12-04", None, None, None), ("2026-12-06", None, None, "in the future"),
])
def test_how_far_a_version_may_move(version: str, serving: str | None, max_step: int | None,
                                    refused: str | None) -> None:
    settings = Settings(targets={PREFIX: ()}, state_table=TABLE, allowed_buckets=frozenset(),
                        admissions={PREFIX: Admission(max_step=max_step)})
    now = 1_796_300_000  # 2026-12-03
    problem = gate.move_problem(settings, PREFIX, version, serving, now)
    assert (problem is None) if refused is None else (refused in (problem or "")), problem


def test_a_version_outside_the_prefixs_pattern_is_refused(world: Any, context: Any, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(contract.ADMISSION, json.dumps({PREFIX: {"versions": "v\\d{1,4}"}}))
    handler._settings = None
    _refused(world, handler.lambda_handler(_publish(world, tmp_path, "2.0", None), context),
             "version-not-allowed")


def test_an_operator_resets_a_poisoned_record_and_who_did_it_is_kept(world: Any, context: Any,
                                                                    tmp_path: Path) -> None:
    """A record a bad version moved (here written by hand) skips every real version as older, until a reset."""
    handler.lambda_handler(_publish(world, tmp_path, "v2", None), context)
    state = StateTable(DynamoStore(boto3.resource("dynamodb", region_name="us-west-2"), TABLE))
    target = handler.settings().targets[PREFIX][0].id
    item = state.get(target)
    state.store.put(state.key(target), {**item, "current_version": "v99", "current_location": f"{PREFIX}/v99"},
                    int(item["rev"]))
    assert handler.lambda_handler(_publish(world, tmp_path, "v3", None), context)["targets"][target]["reason"] == \
        "older-version"
    function = _deployed_function()
    with pytest.raises(ValueError, match=r"--version 'v98': the refresh's gate refuses it \(manifest-missing"):
        resetting.reset(TABLE, target, "v98", "a version never published", function, region="us-west-2")
    record = resetting.reset(TABLE, target, "v2", "v99 was never served; pointed back by hand", function,
                             region="us-west-2")
    assert record["current_version"] == "v2" and record["resets"][-1]["from"] == "v99"
    assert record["resets"][-1]["by"].startswith("arn:aws:sts::123456789012:") and record["resets"][-1]["reason"]
    assert handler.lambda_handler(_publish(world, tmp_path, "v4", None), context)["status"] == "refreshed"
    assert world.served_hyperpod() == f"{PREFIX}/v4"


def test_a_reset_is_refused_while_a_rollout_is_in_flight(world: Any, context: Any, tmp_path: Path) -> None:
    handler.lambda_handler(_publish(world, tmp_path, "v2", None), context)  # the endpoint's update runs
    endpoint = handler.settings().targets[PREFIX][1].id
    with pytest.raises(ValueError, match="in flight; let it end"):
        resetting.reset(TABLE, endpoint, "v1", "why", _deployed_function(), region="us-west-2")


# -- one gate for every action -----------------------------------------------------------------------------------

def test_a_version_queued_in_the_table_passes_the_gate_again(signed: Any, context: Any, tmp_path: Path) -> None:
    """A table writer plants an unsigned version as waiting behind the endpoint's rollout: when the rollout ends,
    the version is checked as an upload would be, and refused."""
    handler.lambda_handler(_publish(signed, tmp_path, "v2", signed.key), context)
    planted = _publish(signed, tmp_path, "v3", None)
    state = StateTable(DynamoStore(boto3.resource("dynamodb", region_name="us-west-2"), TABLE))
    endpoint = handler.settings().targets[PREFIX][1].id
    item = state.get(endpoint)
    queued = {"version": "v3", "sequencer": "5F00000000000000D1", "event": json.dumps(planted)}
    assert state.store.put(state.key(endpoint), {**item, "queued": queued}, int(item["rev"]))
    import moto_ext
    moto_ext.settle(moto_ext.backend(), "llama-prod")
    handler.on_endpoint_state_change(moto_ext.state_change_event(signed.sm, "llama-prod"), context)
    assert signed.served_endpoint() == f"s3://{BUCKET}/{PREFIX}/v2/"
    assert [letter["reason"] for letter in signed.dead_letters()] == ["signature-missing"]
    assert "queued" not in state.get(endpoint)


def test_publish_refuses_a_version_that_exists(world: Any, tmp_path: Path) -> None:
    _publish(world, tmp_path, "v2", None)
    with pytest.raises(publishing.PublishError, match="holds a manifest already"):
        _publish(world, tmp_path, "v2", None)
    with pytest.raises(publishing.PublishError, match="give s3://<bucket>/<prefix>/<version>"):
        publishing.split_target("s3://bucket/only-a-version")


def test_a_replayed_letter_of_an_unsigned_version_is_refused_by_the_same_gate(signed: Any, context: Any,
                                                                             tmp_path: Path) -> None:
    """What ``hyperwarm refresh replay`` sends: the letter's event plus the replay key. It is refused as the event
    was, nothing moves and no second letter is written (the replayed one stays)."""
    event = _publish(signed, tmp_path, "v2", None)
    _refused(signed, handler.lambda_handler(event, context), "signature-missing")
    answer = handler.lambda_handler({**event, contract.REPLAY_KEY: {"message_id": "m-1"}}, context)
    assert (answer["status"], answer["reason"]) == ("failed", "signature-missing"), answer
    assert signed.served_hyperpod() == f"{PREFIX}/v1" and len(signed.dead_letters()) == 1
