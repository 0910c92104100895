"""In-memory stand-ins for everything the refresh flow touches, for the model-based tests.

The flow (lambdas/cache_refresh/flow.py), its decisions, the state transitions and the target code
(targets/endpoint.py, targets/hyperpod.py) run unchanged; only the outermost calls are faked:
a revision-checked item store (DynamoDB), a Kubernetes object API with resourceVersion conflicts,
a SageMaker client with blue/green updates that end in success or rollback, a manifest check, an
SQS queue, and Lambda's asynchronous delivery (retries, then an on-failure record in the queue).
A fault plan can fail or crash any of those calls, or run a second invocation in the middle of one.
"""

from __future__ import annotations

import functools
import json
import pickle
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

import boto3
from botocore.exceptions import ClientError
from cluster_model import NAMESPACE as _NAMESPACE, Cluster, ClusterKube, manifest_digest, rendered
from wire import Count, freeze, fresh, sent, thaw

from hyperwarm.functions.cache_refresh import flow
from hyperwarm.functions.cache_refresh.config import BlueGreen, EndpointTarget, HyperPodTarget, NodeCache, Settings
from hyperwarm.functions.cache_refresh.errors import PermanentError, TransientError
from hyperwarm.functions.cache_refresh.state import StateTable
from hyperwarm.functions.cache_refresh.targets import endpoint as endpoint_target, hyperpod

BUCKET, PREFIX, NAMESPACE = "models-bucket", "models/llama", "models"
HYPERPOD = HyperPodTarget(cluster="c", namespace=NAMESPACE, name="llama")
HYPERPOD_WARM = replace(HYPERPOD, node_cache=NodeCache("llama"))
"""The same deployment, node-cached: its version changes warm (a world with ``warm`` runs it)."""
ENDPOINT = EndpointTarget(endpoint="llama-prod", blue_green=BlueGreen(max_execution_seconds=3600))
SETTINGS = Settings(targets={PREFIX: (HYPERPOD, ENDPOINT)}, state_table="t", allowed_buckets=frozenset({BUCKET}),
                    dlq_url="q", lock_seconds=900)
_SETTINGS = {(dry_run, warm): replace(SETTINGS, dry_run=dry_run, targets={PREFIX: (
    HYPERPOD_WARM if warm else HYPERPOD, ENDPOINT)}) for dry_run in (False, True) for warm in (False, True)}
"""The settings with dry run off and on, the HyperPod target node-cached or not (frozen: every invocation shares
them)."""
VARIANTS = (("main", "cfn-model"), ("second", "cfn-model-b"))
"""Both variants serve the refreshed prefix: each must move, and only forward."""


@functools.cache
def _sagemaker_meta() -> Any:
    """SageMaker's real request shapes (botocore's service model, offline), read when a fake is first asked:
    building the client is most of this module's import, and the warm rollout tests never ask."""
    return boto3.client("sagemaker", region_name="us-west-2").meta


class Crash(BaseException):
    """The invocation dies here (timeout, out of memory): no cleanup code runs."""


@dataclass(frozen=True)
class Mark:
    """A point of a run without faults: before its step ``step``, ``calls`` boundary calls in. A case whose first
    fault, crash or paused-for invocation comes at call ``calls`` or later makes those calls exactly as that run
    did, so it starts from the run as it stood there (``saved``: pickled) instead of making them again."""

    calls: int
    step: int
    saved: bytes


def mark(run: Any, calls: int, step: int) -> None:
    """While ``run`` is recorded (``run.marks`` is a list): add a :class:`Mark` of it."""
    if run.marks is not None:
        marks, run.marks = run.marks, None
        try:
            marks.append(Mark(calls, step, pickle.dumps(run)))
        finally:
            run.marks = marks


def resume(marks: list[Mark], call: int) -> tuple[Any, int] | None:
    """A copy of the recorded run at its last mark before call ``call`` and the step to go on with (None: none is)."""
    before = [m for m in marks if m.calls <= call]
    return (pickle.loads(before[-1].saved), before[-1].step) if before else None


def _not_found(what: str) -> ClientError:
    return ClientError({"Error": {"Code": "ValidationError", "Message": f"Could not find {what}."}}, "op")


FAULT_KINDS = ("error", "lost", "crash", "crash-after")
"""What a planned fault does to one call: ``error`` fails it before it runs; ``lost`` runs it and the
client still sees an error (a timed-out answer); ``crash`` kills the invocation before the call and
``crash-after`` right after it (no cleanup code runs either way)."""


def _api_error(site: str, name: str, *, lost: bool) -> Exception:
    """What each boundary's real client raises for a throttled call, or for a lost answer (what the
    SDK's own retry then sees: an UpdateEndpoint that went through answers "in progress")."""
    if name == "update_endpoint" and lost:
        return ClientError({"Error": {"Code": "ValidationError",
                                      "Message": "Cannot update in-progress endpoint"}}, name)
    if name.startswith(("describe_", "create_", "update_", "delete_")):  # SageMaker, through boto3
        return ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, name)
    if site == "dead_letter":
        return ClientError({"Error": {"Code": "ServiceUnavailable", "Message": "try again"}}, "SendMessage")
    reason = {"state": "state-unavailable", "verify": "s3-unavailable"}
    return TransientError(reason.get(site, "target-unreachable"), f"injected {site}.{name} failure")


class Faults:
    """Per call site: maybe raise a transient or permanent error, crash, or run another invocation first.

    Random faults (``rate``) serve the model tests; a ``plan`` (call index -> one of
    :data:`FAULT_KINDS`) and ``pauses`` (call index -> another invocation run to its end before that
    call) serve the fault sweep, which numbers every boundary call of a run in ``calls``.
    """

    def __init__(self, rng: random.Random, rate: float, interleave_share: float = 0.3) -> None:
        self.rng, self.rate, self.on, self.share = rng, rate, True, interleave_share
        self.interleave: Callable[[], None] | None = None
        self.nesting = 0
        self.permanent_sites = {"live", "apply", "start"}
        self.calls: list[str] = []
        self.plan: dict[int, str] = {}
        self.pauses: dict[int, Callable[[], None]] = {}
        self.on_call: dict[str, str] = {}
        """Method name -> fault kind for its next call (then forgotten): a plan by name."""

    def before(self, site: str, name: str) -> int:
        """Number the call; run a paused-for invocation, a random or a planned fault before it."""
        index = len(self.calls)
        self.calls.append(f"{site}.{name}")
        pause = self.pauses.pop(index, None) if self.pauses else None  # (most runs plan and pause nothing)
        if pause is not None:
            pause()
        if self.on:
            self.at(site)
        if self.on_call and name in self.on_call:
            self.plan[index] = self.on_call.pop(name)
        kind = self.plan.get(index) if self.plan else None
        if kind == "error":
            raise _api_error(site, name, lost=False)
        if kind == "crash":
            raise Crash(f"{site}.{name} #{index}")
        return index

    def after(self, site: str, name: str, index: int) -> None:
        if self.on and self.rate and self.rng.random() < self.rate / 3:  # the call went through; its answer did not
            raise Crash(f"after {site}.{name}") if self.rng.random() < 0.3 else _api_error(site, name, lost=True)
        kind = self.plan.get(index) if self.plan else None
        if kind == "lost":
            raise _api_error(site, name, lost=True)
        if kind == "crash-after":
            raise Crash(f"after {site}.{name} #{index}")

    def at(self, site: str) -> None:
        if not self.on or self.rng.random() >= self.rate:
            return
        roll = self.rng.random()
        if roll < self.share and self.interleave and self.nesting == 0:
            self.nesting += 1
            try:
                self.interleave()
            finally:
                self.nesting -= 1
            return
        roll = self.rng.random()  # the other faults, in fixed proportions
        if roll < 0.5:
            raise TransientError("injected", f"injected transient failure at {site}")
        elif roll < 0.7 and site in self.permanent_sites:
            raise PermanentError("injected", f"injected permanent failure at {site}")
        elif roll < 0.85:
            raise Crash(site)


def boundary(site: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A fake's method is one call at the API boundary ``site``: numbered, and faulted as planned."""
    def wrap(method: Callable[..., Any]) -> Callable[..., Any]:
        name = method.__name__

        @functools.wraps(method)
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            faults = self.faults
            index = faults.before(site, name)
            result = method(self, *args, **kwargs)
            faults.after(site, name, index)
            return result
        return call
    return wrap


class MemStore:
    """The state table: each item kept as JSON decodes it (a put json rejects fails), every get a fresh copy,
    as from DynamoDB. ``items`` is each item's JSON text."""

    def __init__(self, faults: Faults) -> None:
        self.revs: dict[str, int] = {}
        self.faults = faults
        self._items: dict[str, tuple[Any, bytes]] = {}
        """pk -> (the item as JSON decodes it, that frozen: what each read copies)."""
        self._texts: dict[str, str] = {}

    @boundary("state")
    def get(self, pk: str) -> dict[str, Any]:
        return self.item(pk)

    @boundary("state")
    def put(self, pk: str, item: dict[str, Any], expected_rev: int) -> bool:
        if self.revs.get(pk, 0) != expected_rev:
            return False
        value, rev = sent(item), int(item["rev"])
        self._keep(pk, value)
        self.revs[pk] = rev
        return True

    def item(self, pk: str) -> dict[str, Any]:
        """The item as the table holds it (a fresh copy), for a test to look at: no call is counted."""
        kept = self._items.get(pk)
        return thaw(kept[1]) if kept is not None else {}

    def write(self, pk: str, item: dict[str, Any]) -> None:
        """Put ``item`` in place under ``pk`` (a test rewriting a record: no call counted, no revision check)."""
        self._keep(pk, sent(item))

    def _keep(self, pk: str, value: Any) -> None:
        self._items[pk] = (value, freeze(value))
        self._texts.pop(pk, None)

    @property
    def items(self) -> Mapping[str, str]:
        """pk -> the item's JSON text (read-only: :meth:`write` changes an item)."""
        for pk, (value, _) in self._items.items():
            if pk not in self._texts:
                self._texts[pk] = json.dumps(value)
        return MappingProxyType(self._texts)


class FakeKube:
    """GET and merge-patch of the operator objects, with resourceVersion preconditions."""

    def __init__(self, faults: Faults, version: str) -> None:
        self.faults = faults
        self.rv = Count()
        source = {"modelSourceType": "s3", "s3Storage": {"bucketName": BUCKET}, "modelLocation": f"{PREFIX}/{version}"}
        self.objects = {
            (kind, name): {"metadata": {"name": name, "resourceVersion": str(next(self.rv))},
                           "spec": {"modelSourceConfig": dict(source), "modelVersion": version}}
            for kind, name in (("InferenceEndpointConfig", "llama"),)}

    @boundary("live")
    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any]:
        return fresh(self.objects[(kind, name)])

    @boundary("apply")
    def merge_patch(self, kind: str, namespace: str, name: str, patch: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        obj, patch = self.objects[(kind, name)], sent(patch)
        if patch["metadata"]["resourceVersion"] != obj["metadata"]["resourceVersion"]:
            return 409, {}
        spec = patch["spec"]
        if "modelSourceConfig" in spec:
            obj["spec"]["modelSourceConfig"].update(modelLocation=spec["modelSourceConfig"]["modelLocation"])
        if "modelVersion" in spec:
            obj["spec"]["modelVersion"] = spec["modelVersion"]
        obj["metadata"]["resourceVersion"] = str(next(self.rv))
        return 200, obj

    def location(self, kind: str = "InferenceEndpointConfig", name: str = "llama") -> str:
        return self.objects[(kind, name)]["spec"]["modelSourceConfig"]["modelLocation"]

    def restore(self, version: str) -> None:
        """A stack rollback re-applies the caches manifest of an older version to every object."""
        for obj in self.objects.values():
            obj["spec"]["modelSourceConfig"]["modelLocation"] = f"{PREFIX}/{version}"
            obj["spec"]["modelVersion"] = version
            obj["metadata"]["resourceVersion"] = str(next(self.rv))


class ClusterWorldKube:
    """The node-cached target's cluster as the cluster model (tests/refresh/cluster_model.py), behind the same
    numbered, faulted boundary as :class:`FakeKube`; the cluster's time follows the world's clock."""

    def __init__(self, world: World) -> None:
        assert NAMESPACE == _NAMESPACE
        self.faults, self.world = world.faults, world
        deployment, filler = rendered(BUCKET, PREFIX, world.initial, replicas=3)
        self.cluster = Cluster.serving(deployment, filler, ["node-0", "node-1", "node-2"], fill_seconds=300,
                                       start_seconds=60, now=world.clock.now)
        self._kube = ClusterKube(self.cluster)

    @property
    def objects(self) -> dict[tuple[str, str], dict[str, Any]]:
        return {("InferenceEndpointConfig", "llama"): self.cluster.deployment,
                ("DaemonSet", self.cluster.filler["metadata"]["name"]): self.cluster.filler}

    def _now(self) -> ClusterKube:
        self.cluster.tick(max(0.0, self.world.clock.now - self.cluster.now))
        return self._kube

    @boundary("live")
    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any]:
        return self._now().get(kind, namespace, name)

    @boundary("apply")
    def merge_patch(self, kind: str, namespace: str, name: str, patch: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return self.world._alone(HYPERPOD.id, lambda: self._now().merge_patch(kind, namespace, name, patch))

    @boundary("live")
    def items(self, kind: str, namespace: str) -> list[dict[str, Any]]:
        return self._now().items(kind, namespace)

    @boundary("live")
    def nodes(self, selector: dict[str, str]) -> list[dict[str, Any]]:
        return self._now().nodes(selector)

    def location(self, kind: str = "InferenceEndpointConfig", name: str = "llama") -> str:
        self._now()
        return f"{PREFIX}/{self.cluster.reads()}"

    def restore(self, version: str) -> None:
        """A stack rollback applies the caches manifest of the version first deployed: the deployment and the
        filler as rendered then (the filler keeps what pods still read; pods wait for their version's label)."""
        self._now()
        self.cluster.apply(*rendered(BUCKET, PREFIX, version, replicas=3))


class FakeSageMaker:
    """The SageMaker calls the endpoint target makes; blue/green updates end when :meth:`settle` says.

    Deleting a config or model that the endpoint serves or is moving to is an invariant violation (I5).
    """

    @property
    def meta(self) -> Any:
        return _sagemaker_meta()

    def __init__(self, faults: Faults, version: str, clock: Callable[[], float] = lambda: 0.0) -> None:
        self.faults = faults
        self.clock = clock
        self.modified = 0.0  # LastModifiedTime: the endpoint was created before anything here
        self.models = {name: {"ModelName": name, "ExecutionRoleArn": "arn:aws:iam::1:role/r",
                              "PrimaryContainer": {"Image": "img", "ModelDataSource": {"S3DataSource": {
                                  "S3Uri": f"s3://{BUCKET}/{PREFIX}/{version}/", "S3DataType": "S3Prefix",
                                  "CompressionType": "None"}}}} for name in ("cfn-model", "cfn-model-b")}
        self.configs = {"cfn-config": {"EndpointConfigName": "cfn-config", "ProductionVariants": [
            {"VariantName": variant, "ModelName": model, "InstanceType": "ml.g5.xlarge", "InitialInstanceCount": 1}
            for variant, model in VARIANTS]}}
        self.status, self.config, self.updating_to = "InService", "cfn-config", None
        self.emitted: list[dict[str, Any]] = []
        self.violations: list[str] = []
        self._frozen: dict[tuple[str, str], tuple[dict[str, Any], bytes]] = {}
        """(kind, name) -> (a model or config, that frozen): SageMaker never changes one once it is created (an
        update creates another), so each is frozen once, when first described, and every answer thaws a copy."""

    def _described(self, kind: str, name: str, stored: dict[str, Any]) -> dict[str, Any]:
        kept = self._frozen.get((kind, name))
        if kept is None or kept[0] is not stored:
            kept = self._frozen[kind, name] = (stored, freeze(stored))
        return thaw(kept[1])

    def _event(self) -> None:
        self.emitted.append({"version": "0", "id": f"sm-{len(self.emitted)}", "source": "aws.sagemaker",
                             "detail-type": "SageMaker Endpoint State Change", "time": "2026-11-29T12:00:00Z",
                             "detail": {"EndpointName": ENDPOINT.endpoint, "EndpointConfigName": self.config,
                                        "EndpointStatus": self.status}})

    @boundary("live")
    def describe_endpoint(self, EndpointName: str) -> dict[str, Any]:
        described = {"EndpointName": EndpointName, "EndpointStatus": self.status, "EndpointConfigName": self.config,
                     "LastModifiedTime": datetime.fromtimestamp(self.modified, tz=UTC)}
        if self.updating_to:
            described["PendingDeploymentSummary"] = {"EndpointConfigName": self.updating_to}
        return described

    def _changed(self) -> None:
        self.modified = max(self.clock(), self.modified) + 1  # every change a later LastModifiedTime

    @boundary("live")
    def describe_endpoint_config(self, EndpointConfigName: str) -> dict[str, Any]:
        if EndpointConfigName not in self.configs:
            raise _not_found(f"endpoint configuration {EndpointConfigName}")
        return self._described("config", EndpointConfigName, self.configs[EndpointConfigName])

    @boundary("live")
    def describe_model(self, ModelName: str) -> dict[str, Any]:
        if ModelName not in self.models:
            raise _not_found(f"model {ModelName}")
        return self._described("model", ModelName, self.models[ModelName])

    @boundary("start")
    def create_model(self, **spec: Any) -> None:
        if spec["ModelName"] in self.models:
            raise ClientError({"Error": {"Code": "ValidationError", "Message": "Model already exists"}}, "CreateModel")
        self.models[spec["ModelName"]] = sent(spec)

    @boundary("start")
    def create_endpoint_config(self, **spec: Any) -> None:
        if spec["EndpointConfigName"] in self.configs:
            raise ClientError({"Error": {"Code": "ValidationError", "Message": "Config already exists"}}, "Create")
        self.configs[spec["EndpointConfigName"]] = sent(spec)

    @boundary("start")
    def update_endpoint(self, EndpointName: str, EndpointConfigName: str, **_: Any) -> None:
        if self.status != "InService":
            raise ClientError({"Error": {"Code": "ValidationError",
                                         "Message": "Cannot update in-progress endpoint"}}, "UpdateEndpoint")
        self.status, self.updating_to = "Updating", EndpointConfigName
        self._changed()
        self._event()

    def _in_use(self) -> set[str]:
        names = {self.config, self.updating_to} - {None}
        return names | {v["ModelName"] for n in names for v in self.configs[n]["ProductionVariants"]}

    @boundary("delete")
    def delete_endpoint_config(self, EndpointConfigName: str) -> None:
        if EndpointConfigName in self._in_use() or EndpointConfigName.startswith("cfn-config"):
            self.violations.append(f"deleted config {EndpointConfigName} while in use")
        if self.configs.pop(EndpointConfigName, None) is None:
            raise _not_found(EndpointConfigName)

    @boundary("delete")
    def delete_model(self, ModelName: str) -> None:
        if ModelName in self._in_use() or ModelName.startswith("cfn-model"):
            self.violations.append(f"deleted model {ModelName} while in use")
        if self.models.pop(ModelName, None) is None:
            raise _not_found(ModelName)

    def deploy(self, number: int) -> None:
        """A CloudFormation update of the endpoint (same model versions, new config): someone else's update."""
        variants = []
        for variant in self.configs[self.config]["ProductionVariants"]:
            name = f"cfn-{variant['VariantName']}-{number}"
            self.models[name] = {**self.models[variant["ModelName"]], "ModelName": name}
            variants.append({**variant, "ModelName": name})
        self.configs[f"cfn-config-{number}"] = {**self.configs["cfn-config"], "EndpointConfigName": f"cfn-config-{number}",
                                                "ProductionVariants": variants}
        self.status, self.updating_to = "Updating", f"cfn-config-{number}"
        self._changed()
        self._event()

    def restore(self, config: str = "cfn-config") -> None:
        """A stack rollback (or someone's update) puts an older EndpointConfig back: it serves at once."""
        self.status, self.updating_to = "Updating", config
        self._changed()
        self._event()
        self.settle(True)

    def settle(self, succeed: bool) -> None:
        """The blue/green update ends: the new config serves, or the endpoint rolls back to the old one."""
        if self.updating_to is None:
            return  # no update runs
        if succeed:
            self.config = self.updating_to
        self.status, self.updating_to = "InService", None
        self._changed()
        self._event()

    def served(self, variant: int = 0) -> str:
        chosen = self.configs[self.config]["ProductionVariants"][variant]
        return self.models[chosen["ModelName"]]["PrimaryContainer"]["ModelDataSource"]["S3DataSource"]["S3Uri"]

    def served_variants(self) -> dict[str, str]:
        """Variant name -> the version folder its model reads."""
        return {v["VariantName"]: self.models[v["ModelName"]]["PrimaryContainer"]["ModelDataSource"]["S3DataSource"]
                ["S3Uri"].rstrip("/").rsplit("/", 1)[-1] for v in self.configs[self.config]["ProductionVariants"]}


class FakeSqs:
    """Enough of SQS for the dead-letter queue and ``hyperwarm refresh replay``."""

    def __init__(self, faults: Faults) -> None:
        self.faults = faults
        self.messages: dict[str, dict[str, Any]] = {}
        self.ids = Count()
        self.sent: list[tuple[int, dict[str, Any]]] = []  # (invocation number, letter)

    @boundary("dead_letter")
    def send(self, body: dict[str, Any], invocation: int = 0) -> None:
        mid = f"m{next(self.ids)}"
        self.messages[mid] = {"MessageId": mid, "ReceiptHandle": mid, "Body": json.dumps(body), "visible": True}
        self.sent.append((invocation, body))

    def put_raw(self, body: dict[str, Any], mid: str) -> None:
        """A message another sender wrote (Lambda's on-failure destination, EventBridge's DLQ, the deploy guard)."""
        self.messages[mid] = {"MessageId": mid, "ReceiptHandle": mid, "Body": json.dumps(body), "visible": True}

    def receive_message(self, QueueUrl: str, MaxNumberOfMessages: int = 1, **_: Any) -> dict[str, Any]:
        out = [m for m in self.messages.values() if m["visible"]][:MaxNumberOfMessages]
        for m in out:
            m["visible"] = False
        return {"Messages": [{k: v for k, v in m.items() if k != "visible"} for m in out]}

    def change_message_visibility(self, QueueUrl: str, ReceiptHandle: str, VisibilityTimeout: int) -> None:
        if ReceiptHandle in self.messages:
            self.messages[ReceiptHandle]["visible"] = VisibilityTimeout == 0

    def change_message_visibility_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> None:
        for e in Entries:
            self.change_message_visibility(QueueUrl, e["ReceiptHandle"], e["VisibilityTimeout"])

    def delete_message(self, QueueUrl: str, ReceiptHandle: str) -> None:
        self.messages.pop(ReceiptHandle, None)


@dataclass
class Clock:
    now: float = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class World:
    """One account: the targets start on ``initial`` (as a deploy left them, with no state recorded)."""

    rng: random.Random
    fault_rate: float = 0.0
    interleave_share: float = 0.3
    """Of the faults, the share that runs another invocation in the middle of one."""
    initial: str = "v1"
    faults: Faults = field(init=False)
    clock: Clock = field(default_factory=Clock)
    dry_run: bool = False
    metrics: list[tuple[str, str | None, str | None, int]] = field(default_factory=list)
    """(name, reason, target, invocation number) of every metric the function emitted."""
    observer: Callable[[], None] | None = None
    """Called after every invocation, however it ended (the sweep checks its invariants there)."""
    warm: bool = False
    """The HyperPod target is node-cached and changes version warm: its cluster is the cluster model and a
    workflow steps it."""

    def __post_init__(self) -> None:
        self.faults = Faults(self.rng, self.fault_rate, self.interleave_share)
        self.store = MemStore(self.faults)
        self.kube: FakeKube | ClusterWorldKube = ClusterWorldKube(self) if self.warm else FakeKube(self.faults,
                                                                                                    self.initial)
        self.executions: dict[str, int] = {}
        self.execution_names: dict[str, str] = {}
        """Version -> the name its rollout's execution was last started under (what the workflow's steps carry)."""
        """Warm rollouts started (version -> failed attempts of its current step): the workflow's executions."""
        self.sm = FakeSageMaker(self.faults, self.initial, self.clock)
        self.sqs = FakeSqs(self.faults)
        self.files: dict[str, str] = {}  # version -> complete | incomplete | corrupt
        self._request = Count()
        self.running: list[int] = [0]  # invocation numbers, innermost last (one may run inside another)
        self.changing: dict[str, int] = {}  # target id -> the invocation inside a change of it
        self.violations: list[str] = []

    @boundary("verify")
    def verify(self, created: Any) -> str:
        state = self.files.get(created.version, "missing")
        if state == "corrupt":
            raise PermanentError("corrupt-manifest", f"{created.version}: manifest is not JSON")
        if state != "complete":
            raise PermanentError("manifest-object-missing", f"{created.version}: a listed file is missing")
        return manifest_digest(created.version)

    def live(self, target: Any, prefix: str) -> Any:
        if isinstance(target, HyperPodTarget):
            return hyperpod.live(target, prefix, SETTINGS.allowed_buckets, "us-west-2", kube=self.kube)
        return endpoint_target.live(self.sm, target, prefix, SETTINGS.allowed_buckets)

    def ports(self) -> flow.Ports:
        return flow.Ports(
            settings=_SETTINGS[self.dry_run, self.warm], state=StateTable(self.store, self.clock),
            verify=self.verify, live=self.live,
            apply_hyperpod=lambda target, created: self._alone(target.id, lambda: hyperpod.apply(
                target, created, "us-west-2", kube=self.kube)),
            start_endpoint=lambda target, created, reserve: self._alone(target.id, lambda: endpoint_target.start(
                self.sm, target, created, reserve)),
            delete_superseded=lambda cfg, models, serving: self._alone(ENDPOINT.id, lambda: (
                endpoint_target.delete_superseded(self.sm, cfg, models, serving))),
            dead_letter=lambda body: self.sqs.send(body, self.running[-1]),
            metric=lambda name, reason=None, target=None, **_: self.metrics.append(
                (name, reason, target, self.running[-1])),
            request_id=f"req-{self.running[-1]}",
            kube=lambda target: self.kube,
            start_workflow=self._start_workflow if self.warm else None)

    @boundary("workflow")
    def _start_workflow(self, target: Any, version: str, name: str) -> None:
        self.executions.setdefault(version, 0)  # a second start of the same execution is a no-op
        self.execution_names[version] = name

    def step(self, version: str, *, abandon: bool = False) -> tuple[int, str]:
        """One step of the workflow's execution for ``version`` (as Step Functions invokes it): (its number,
        its answer's phase); raises what the step raises (the workflow's Retry, then its Catch, decide)."""
        number = next(self._request)
        self.running.append(number)
        try:
            return number, str(flow.on_rollout_step(self.ports(), {
                "target": HYPERPOD.id, "version": version, "abandon": abandon,
                "execution": self.execution_names.get(version, "")})["phase"])
        finally:
            self.running.pop()
            if self.observer is not None:
                self.observer()

    def _alone(self, target_id: str, change: Callable[[], Any]) -> Any:
        """I0: a change of a target while another running invocation is changing it is a violation
        (what the per-target lock prevents: the outer invocation is interleaved mid-change)."""
        other = self.changing.get(target_id)
        if other is not None and other in self.running:
            self.violations.append(f"I0: invocations {other} and {self.running[-1]} change {target_id} at once")
        self.changing[target_id] = self.running[-1]
        try:
            return change()
        finally:
            if self.changing.get(target_id) == self.running[-1]:
                del self.changing[target_id]

    def invoke(self, event: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """One invocation of the function: (its number, its answer); raises what the handler raises."""
        number = next(self._request)
        self.running.append(number)
        try:
            return number, flow.handle(self.ports(), event)
        finally:
            self.running.pop()
            if self.observer is not None:
                self.observer()

    def served(self) -> dict[str, str]:
        """Target -> the version it serves right now, read from the fakes."""
        return {HYPERPOD.id: self.kube.location().rsplit("/", 1)[-1],
                ENDPOINT.id: self.sm.served().rstrip("/").rsplit("/", 1)[-1]}

    def served_objects(self) -> dict[str, str]:
        """Every HyperPod object and every endpoint variant -> the version it serves (I2 and I3 hold for each)."""
        objects = {f"{HYPERPOD.id}#{kind}/{name}": self.kube.location(kind, name).rsplit("/", 1)[-1]
                   for kind, name in self.kube.objects if kind == "InferenceEndpointConfig"}
        return {**objects, **{f"{ENDPOINT.id}#{v}": version for v, version in self.sm.served_variants().items()}}

    def replay(self, **options: Any) -> list[dict[str, Any]]:
        """``hyperwarm refresh replay`` of the dead-letter queue against this world's function."""
        from hyperwarm.refresh import cli as refresh_cli
        return refresh_cli.replay("q", "fn", sqs=self.sqs, lambda_client=_Lambda(self),
                                  **{"max_messages": 100, **options})

    def deliver_state_changes(self) -> list[dict[str, Any]]:
        """SageMaker's pending state-change events, each delivered once; their answers."""
        events, self.sm.emitted = list(self.sm.emitted), []
        return [self.invoke(event)[1] for event in events]

    def snapshot(self) -> str:
        return json.dumps([dict(self.store.items), sorted(self.kube.objects.items()), self.sm.models, self.sm.configs,
                           self.sm.status, self.sm.config, len(self.sqs.sent)], sort_keys=True, default=str)


def manifest_event(version: str, sequencer: int) -> dict[str, Any]:
    return {"version": "0", "id": f"s3-{version}-{sequencer}", "detail-type": "Object Created", "source": "aws.s3",
            "time": "2026-11-29T12:00:00Z", "detail": {"bucket": {"name": BUCKET}, "object": {
                "key": f"{PREFIX}/{version}/manifest.json", "size": 10, "sequencer": format(sequencer, "X")}}}


def on_failure_record(event: dict[str, Any], error: str) -> dict[str, Any]:
    """What Lambda's on-failure destination sends to SQS when an asynchronous invocation gives up."""
    return {"version": "1.0", "timestamp": "2026-11-29T12:00:00.000Z",
            "requestContext": {"requestId": "r", "functionArn": "arn:aws:lambda:us-west-2:1:function:f:$LATEST",
                               "condition": "RetriesExhausted", "approximateInvokeCount": 3},
            "requestPayload": event, "responseContext": {"statusCode": 200, "executedVersion": "$LATEST",
                                                          "functionError": "Unhandled"},
            "responsePayload": {"errorMessage": error, "errorType": "TransientError"}}


class _Lambda:
    """Lambda's synchronous Invoke of the world's function (what ``hyperwarm refresh replay`` calls)."""

    def __init__(self, world: World) -> None:
        self.world = world

    def invoke(self, FunctionName: str, InvocationType: str, Payload: bytes) -> dict[str, Any]:  # noqa: N803
        try:
            _, result = self.world.invoke(json.loads(Payload))
        except (Exception, Crash) as exc:  # noqa: BLE001 - every way an invocation can end
            return {"FunctionError": "Unhandled", "Payload": _Body(json.dumps({"error": repr(exc)}))}
        return {"Payload": _Body(json.dumps(result))}


class _Body:
    def __init__(self, text: str) -> None:
        self.text = text

    def read(self) -> bytes:
        return self.text.encode()


def scheduled_event(number: int = 0) -> dict[str, Any]:
    """EventBridge's scheduled event, which runs the reconciliation."""
    return {"version": "0", "id": f"schedule-{number}", "detail-type": "Scheduled Event", "source": "aws.events",
            "time": "2026-11-29T12:00:00Z", "resources": ["arn:aws:events:us-west-2:1:rule/reconcile"], "detail": {}}


class AsyncLambda:
    """Lambda's asynchronous delivery over a :class:`World`: an event that raises (or crashes) is retried
    twice, then its on-failure record lands in the dead-letter queue; SageMaker's state changes are
    delivered as they are emitted. :meth:`quiesce` continues as AWS does until nothing changes."""

    RETRIES = 2

    def __init__(self, world: World, outcomes: tuple[bool, ...] = ()) -> None:
        self.world = world
        self.outcomes = list(outcomes)
        """How SageMaker ends its next updates (True: the new config serves; False: rolled back); then True."""
        self.inflight: list[tuple[dict[str, Any], int]] = []
        self.answers: list[tuple[str, Any]] = []  # (event id, answer or repr of what it raised)
        self.schedules = Count()

    def next_outcome(self) -> bool:
        return self.outcomes.pop(0) if self.outcomes else True

    def settle(self) -> None:
        """SageMaker ends the update in progress as planned, and its state change is in flight."""
        if self.world.sm.updating_to is not None:
            self.world.sm.settle(self.next_outcome())
        self.flush()

    def send(self, *events: dict[str, Any]) -> None:
        self.inflight += [(e, 0) for e in events]

    def flush(self) -> None:
        self.inflight += [(e, 0) for e in self.world.sm.emitted]
        self.world.sm.emitted = []

    def deliver_next(self) -> None:
        event, attempts = self.inflight.pop(0)
        self.deliver(event, attempts)

    def deliver(self, event: dict[str, Any], attempts: int = 0) -> None:
        try:
            _, answer = self.world.invoke(event)
            self.answers.append((event["id"], answer))
        except (Exception, Crash) as exc:  # noqa: BLE001 - every way an invocation can end
            self.answers.append((event["id"], repr(exc)))
            if attempts < self.RETRIES:
                self.inflight.append((event, attempts + 1))
            else:
                self.world.sqs.put_raw(on_failure_record(event, repr(exc)), f"failure-{event['id']}-{attempts}")
        self.flush()

    def drain(self) -> None:
        while self.inflight:
            self.deliver_next()

    def reconcile(self) -> None:
        """The scheduled reconciliation (not retried: the next schedule is its retry)."""
        event = scheduled_event(next(self.schedules))
        try:
            self.answers.append((event["id"], self.world.invoke(event)[1]))
        except (Exception, Crash) as exc:  # noqa: BLE001
            self.answers.append((event["id"], repr(exc)))
        self.flush()

    def quiesce(self, *, rounds: int = 30) -> None:
        """Faults off; deliver, end SageMaker's updates, let locks expire, reconcile and replay the
        dead-letter queue until a round changes nothing."""
        w = self.world
        w.faults.on = False
        before = None  # the state at the start of the round: the end of the one before, when nothing ran since
        for _ in range(rounds):
            before = before or (w.snapshot(), len(w.sqs.messages))
            self.drain()
            if w.sm.status == "Updating":
                self.settle()
                before = None
                continue
            w.clock.now += 6000  # invocation locks (900 s) and rollout locks of a lost rollout expire
            self.reconcile()
            self.drain()
            w.replay()
            self.flush()
            self.drain()
            after = (w.snapshot(), len(w.sqs.messages))
            if after == before and not self.inflight and w.sm.status == "InService":
                return
            before = after
        raise AssertionError(f"no quiescence after {rounds} rounds")
