"""The refresh tests' world: moto-backed AWS, a fake Kubernetes API, model uploads, and their fixtures.

A module of its own (re-exported by this folder's conftest) so tests import helpers by a name no
other conftest shares."""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from stand_ins import pk_table

# The folder holding the package folder ``cache_refresh/``, as the function's asset does: what a child
# process puts on PYTHONPATH to run the handlers under their Lambda name. In this process the package is
# only ever ``hyperwarm.functions.cache_refresh``.
LAMBDAS = Path(__file__).resolve().parents[2] / "lambdas"
sys.path.insert(0, str(Path(__file__).resolve().parent))

import fake_kube  # noqa: E402
import moto_ext  # noqa: E402

BUCKET = "hyperwarm-models-test"
PREFIX = "models/llama"
CLUSTER = "hyperwarm-test"
NAMESPACE = "hyperwarm-models"
ENDPOINT = "llama-prod"
TABLE = "hyperwarm-refresh-state"
ROLE = "arn:aws:iam::123456789012:role/sagemaker-exec"
ROUTING = {"RoutingStrategy": "PREFIX_AWARE",
           "PrefixAwareRoutingConfig": {"PrefixLength": 4096, "ConcurrencyThreshold": 8}}
METRICS = {"EnableDetailedObservability": True, "MetricPublishFrequencyInSeconds": 30}
"""The live config's MetricsConfig, as hyperwarm's EndpointConfiguration writes it (TTFT alarms need it)."""
_SEQUENCER = itertools.count(0x5F0000000000000001)



def late_body(size: int) -> bytes:
    """The bytes a manifest lists for a file uploaded after it (``upload(listed=...)``, ``upload_late``)."""
    return b"x" * size

@dataclass
class LambdaContext:
    function_name: str = "hyperwarm-cache-refresh"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-west-2:123456789012:function:hyperwarm-cache-refresh"
    aws_request_id: str = "req-1"

    def get_remaining_time_in_millis(self) -> int:
        return 300_000


def s3_event(key: str, sequencer: str, version_id: str | None = None, bucket: str = BUCKET) -> dict[str, Any]:
    """An EventBridge S3 "Object Created" event, as S3 sends it."""
    obj: dict[str, Any] = {"key": key, "size": 100, "etag": "e", "sequencer": sequencer}
    if version_id:
        obj["version-id"] = version_id
    return {"version": "0", "id": f"evt-{sequencer}", "detail-type": "Object Created", "source": "aws.s3",
            "account": "123456789012", "time": "2026-11-29T12:00:00Z", "region": "us-west-2",
            "resources": [f"arn:aws:s3:::{bucket}"],
            "detail": {"version": "0", "bucket": {"name": bucket}, "object": obj, "request-id": "r",
                       "requester": "123456789012", "reason": "PutObject"}}


def model_files(version: str) -> dict[str, bytes]:
    return {"config.json": json.dumps({"v": version}).encode(), "weights/model.safetensors": version.encode() * 64}


@dataclass
class World:
    """The moto-backed account, the fake cluster, and helpers to upload versions and read what serves."""

    kube: fake_kube.FakeKube
    s3: Any = None
    sm: Any = None
    sqs: Any = None
    ddb: Any = None
    dlq_url: str = ""
    events: list[dict[str, Any]] = field(default_factory=list)

    def upload(self, version: str, *, files: dict[str, bytes] | None = None, manifest: bool = True,
               listed: dict[str, int] | None = None) -> dict[str, Any] | None:
        """Upload a version's files, then (unless ``manifest=False``) its manifest; return the manifest event.

        ``listed`` overrides sizes in the manifest, or lists files that were never uploaded.
        """
        files = model_files(version) if files is None else files
        for name, body in files.items():
            self.s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}/{version}/{name}", Body=body, ChecksumAlgorithm="SHA256")
        if not manifest:
            return None
        entries = [{"path": n, "size": len(b), "sha256": hashlib.sha256(b).hexdigest()} for n, b in files.items()]
        for name, size in (listed or {}).items():
            entries = [e for e in entries if e["path"] != name] + [
                {"path": name, "size": size, "sha256": hashlib.sha256(late_body(size)).hexdigest()}]
        key = f"{PREFIX}/{version}/manifest.json"
        put = self.s3.put_object(Bucket=BUCKET, Key=key,
                                 Body=json.dumps({"format": "hyperwarm.manifest/v1", "files": entries}).encode())
        return s3_event(key, format(next(_SEQUENCER), "X"), put.get("VersionId"))

    def upload_late(self, version: str, name: str, size: int) -> None:
        """The file ``upload(listed={name: size})`` listed but left out, uploaded now as the manifest says."""
        self.s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}/{version}/{name}", Body=late_body(size),
                           ChecksumAlgorithm="SHA256")

    def served_hyperpod(self) -> str:
        return self.kube.get("InferenceEndpointConfig", NAMESPACE, "llama")["spec"]["modelSourceConfig"]["modelLocation"]

    def endpoint_config(self) -> dict[str, Any]:
        name = self.sm.describe_endpoint(EndpointName=ENDPOINT)["EndpointConfigName"]
        return self.sm.describe_endpoint_config(EndpointConfigName=name)

    def served_endpoint(self) -> str:
        variant = next(v for v in self.endpoint_config()["ProductionVariants"] if v["VariantName"] == "main")
        model = self.sm.describe_model(ModelName=variant["ModelName"])
        return model["PrimaryContainer"]["ModelDataSource"]["S3DataSource"]["S3Uri"]

    def dead_letters(self) -> list[dict[str, Any]]:
        msgs = self.sqs.receive_message(QueueUrl=self.dlq_url, MaxNumberOfMessages=10,
                                        VisibilityTimeout=0).get("Messages", [])  # looking hides nothing
        return [json.loads(m["Body"]) for m in msgs]


def kube_objects(version: str = "v1") -> list[dict[str, Any]]:
    source = {"modelSourceType": "s3", "s3Storage": {"bucketName": BUCKET, "region": "us-west-2"},
              "modelLocation": f"{PREFIX}/{version}"}
    api = "inference.sagemaker.aws.amazon.com/v1"
    return [
        {"apiVersion": api, "kind": "InferenceEndpointConfig", "metadata": {"name": "llama", "namespace": NAMESPACE},
         "spec": {"modelName": "llama", "modelVersion": version, "modelSourceConfig": source, "replicas": 2,
                  "modelCacheConfig": {"weightsCache": {"enabled": True, "hostPath": "/opt/dlami/nvme"}}}},
    ]


def targets(hyperpod: bool = True, endpoint: bool = True) -> dict[str, Any]:
    items = []
    if hyperpod:
        items.append({"kind": "hyperpod", "cluster": CLUSTER, "namespace": NAMESPACE,
                      "resource": "InferenceEndpointConfig", "name": "llama"})
    if endpoint:
        items.append({"kind": "endpoint", "endpoint": ENDPOINT,
                      "blue_green": {"traffic": "CANARY", "step_percent": 10, "wait_seconds": 600,
                                     "rollback_alarms": ["llama-prod-5xx"]}})
    return {PREFIX: items}


def create_account(world: World, refresh_targets: dict[str, Any]) -> None:
    """Bucket, state table, DLQ, EKS cluster pointing at the fake API, and a live endpoint on v1."""
    world.s3 = s3 = boto3.client("s3", region_name="us-west-2")
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    pk_table(TABLE, "us-west-2")
    world.ddb = boto3.resource("dynamodb", region_name="us-west-2")
    world.sqs = boto3.client("sqs", region_name="us-west-2")
    world.dlq_url = world.sqs.create_queue(QueueName="hyperwarm-refresh-dlq")["QueueUrl"]
    eks = boto3.client("eks", region_name="us-west-2")
    eks.create_cluster(name=CLUSTER, roleArn=ROLE, resourcesVpcConfig={"subnetIds": ["subnet-1"]})
    from moto.eks.models import eks_backends
    cluster = eks_backends["123456789012"]["us-west-2"].clusters[CLUSTER]
    cluster.endpoint = world.kube.url
    cluster.certificate_authority = {"data": base64.b64encode(world.kube.ca_pem).decode()}
    world.sm = sm = boto3.client("sagemaker", region_name="us-west-2")
    sm.create_model(ModelName="llama-v1", ExecutionRoleArn=ROLE, PrimaryContainer={
        "Image": "763104351884.dkr.ecr.us-west-2.amazonaws.com/vllm:0.11-gpu",
        "ModelDataSource": {"S3DataSource": {"S3Uri": f"s3://{BUCKET}/{PREFIX}/v1/", "S3DataType": "S3Prefix",
                                             "CompressionType": "None"}}})
    sm.create_model(ModelName="embedder", ExecutionRoleArn=ROLE, PrimaryContainer={
        "Image": "763104351884.dkr.ecr.us-west-2.amazonaws.com/tei:1.8", "ModelDataUrl": f"s3://{BUCKET}/other/e.tar.gz"})
    sm.create_endpoint_config(
        EndpointConfigName="llama-prod-cfn", KmsKeyId="arn:aws:kms:us-west-2:123456789012:key/abc",
        MetricsConfig=METRICS,
        DataCaptureConfig={"EnableCapture": True, "InitialSamplingPercentage": 5,
                           "DestinationS3Uri": "s3://capture-bucket/llama", "CaptureOptions": [{"CaptureMode": "Input"}]},
        ProductionVariants=[
            {"VariantName": "main", "ModelName": "llama-v1", "InstanceType": "ml.m5.large",
             "InitialInstanceCount": 2, "InitialVariantWeight": 0.9, "RoutingConfig": ROUTING},
            {"VariantName": "embed", "ModelName": "embedder", "InstanceType": "ml.m5.large",
             "InitialInstanceCount": 1, "InitialVariantWeight": 0.1,
             "RoutingConfig": {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}}])
    sm.create_endpoint(EndpointName=ENDPOINT, EndpointConfigName="llama-prod-cfn")
    for obj in kube_objects():
        world.kube.add(obj)


@pytest.fixture(scope="session")
def kube_server():
    server = fake_kube.FakeKube(CLUSTER)
    yield server
    server.close()


def environment(refresh_targets: dict[str, Any], dlq_url: str, dry_run: bool = False) -> dict[str, str]:
    return {"HYPERWARM_REFRESH_TARGETS": json.dumps(refresh_targets), "HYPERWARM_STATE_TABLE": TABLE,
            "HYPERWARM_ALLOWED_BUCKETS": BUCKET, "HYPERWARM_DLQ_URL": dlq_url,
            "HYPERWARM_DRY_RUN": "true" if dry_run else "false", "POWERTOOLS_METRICS_NAMESPACE": "Hyperwarm"}


def start_world(kube: fake_kube.FakeKube, monkeypatch: pytest.MonkeyPatch, refresh_targets: dict[str, Any],
                dry_run: bool = False) -> World:
    """Fresh account state (call inside mock_aws): objects reset, Lambda settings re-read."""
    from hyperwarm.functions import eks_auth
    from hyperwarm.functions.cache_refresh import handler

    for state in (kube.objects, kube.patches, kube.fail_next, kube.race_next):
        state.clear()
    moto_ext.install()
    moto_ext.UPDATES.clear()
    world = World(kube)
    create_account(world, refresh_targets)
    for key, value in environment(refresh_targets, world.dlq_url, dry_run).items():
        monkeypatch.setenv(key, value)
    handler._settings = None
    handler.client.cache_clear()
    eks_auth.cluster_access.cache_clear()
    return world


@pytest.fixture
def world(kube_server, monkeypatch):
    with mock_aws():
        yield start_world(kube_server, monkeypatch, targets())


@pytest.fixture
def context() -> LambdaContext:
    return LambdaContext()
