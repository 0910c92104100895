"""Every bad prop a platform team can give the public API gets one clear error naming the field, the value and
the fix (docs/bad-props.md keeps the table; each of its rows is a case here, and each case a row there).

Driven as a consumer: ``import hyperwarm`` and compose the constructs as examples/my_platform_app.py does."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam, aws_s3 as s3

import hyperwarm
from hyperwarm.caches import gigabytes

DOC = Path(__file__).resolve().parents[1] / "docs" / "bad-props.md"
IMAGE = "763104351884.dkr.ecr.us-west-2.amazonaws.com/djl-inference:0.33.0-lmi15.0.0-cu128"


def _stack() -> cdk.Stack:
    return cdk.Stack(cdk.App(), "Team", env=cdk.Environment(region="us-west-2", account="123456789012"))


def _cluster(stack: cdk.Stack, *groups: hyperwarm.InstanceGroupSpec) -> hyperwarm.HyperPodEksCluster:
    return hyperwarm.HyperPodEksCluster(stack, "Inference", hyperwarm.HyperPodEksClusterProps(
        instance_groups=list(groups) or [
            hyperwarm.InstanceGroupSpec(name="system", instance_type="ml.m5.2xlarge", instance_count=2),
            hyperwarm.InstanceGroupSpec(name="llm", instance_type="ml.g6e.12xlarge", instance_count=2,
                                        holds_caches=True)],
        kubernetes_version="1.34", addon_versions={"amazon-sagemaker-hyperpod-inference": "v2.0.0-eksbuild.1"},
        admin_principals=[iam.Role.from_role_arn(stack, "Ops", "arn:aws:iam::123456789012:role/ops")],
        availability_zones=["us-west-2a", "us-west-2b"]))


def _model(**changes: object) -> hyperwarm.CachedModelSpec:
    props: dict[str, object] = dict(
        name="llama-3-1-8b", source=hyperwarm.ModelSource(bucket="my-team-models", prefix="llama", version="v1"),
        size=cdk.Size.gibibytes(16), image=IMAGE, instance_group="llm", weights_cache="node")
    return hyperwarm.CachedModelSpec(**{**props, **changes})  # type: ignore[arg-type]


def _models(stack: cdk.Stack, cluster: hyperwarm.HyperPodEksCluster, *models: hyperwarm.CachedModelSpec,
            refreshed: tuple[str, ...] = ()) -> hyperwarm.CachedModels:
    return hyperwarm.CachedModels(stack, "Models", hyperwarm.CachedModelsProps(cluster=cluster, models=list(models),
                                                                              refreshed=refreshed))


def _endpoint(stack: cdk.Stack, name: str | None = "my-team-chat", **changes: object) -> hyperwarm.InferenceEndpoint:
    variant: dict[str, object] = dict(
        name="main", instance_type="ml.g6e.12xlarge", instance_count=2, model=hyperwarm.ModelSpec(
            hyperwarm.ServingImage.from_uri("111122223333.dkr.ecr.us-west-2.amazonaws.com/vllm:0.10.1"),
            model_data="s3://my-team-models/llama/v1/", serving=hyperwarm.Serving(framework="vllm")))
    variant_changes = changes.pop("variant", {})
    return hyperwarm.InferenceEndpoint(stack, "Chat", hyperwarm.InferenceEndpointProps(  # type: ignore[arg-type]
        endpoint_name=name, variants=[hyperwarm.ProductionVariant(**{**variant, **variant_changes})], **changes))


def _hook(stack: cdk.Stack, bucket: s3.IBucket | None = None, endpoint_name: str | None = "my-team-chat",
          **changes: object) -> hyperwarm.CacheRefreshHook:
    chat = _endpoint(stack, endpoint_name)
    return hyperwarm.CacheRefreshHook(stack, "Refresh", hyperwarm.CacheRefreshHookProps(  # type: ignore[arg-type]
        bucket=bucket or s3.Bucket.from_bucket_name(stack, "ModelBucket", "my-team-models"),
        models=[hyperwarm.RefreshedPrefix(prefix="llama", endpoints=[
            hyperwarm.EndpointRefreshTarget(chat, hyperwarm.BlueGreen(rollback_alarms=chat.rollback_alarms))])],
        **changes))


def _hyperpod_hook(target: Callable[[hyperwarm.CachedModels], hyperwarm.HyperPodRefreshTarget],
                   refreshed: tuple[str, ...] = ("llama-3-1-8b",), **model: object) -> None:
    stack = _stack()
    caches = _models(stack, _cluster(stack), _model(**model), refreshed=refreshed)
    hyperwarm.CacheRefreshHook(stack, "Refresh", hyperwarm.CacheRefreshHookProps(
        bucket=s3.Bucket.from_bucket_name(stack, "ModelBucket", "my-team-models"),
        models=[hyperwarm.RefreshedPrefix(prefix="llama", hyperpod=[target(caches)])]))


def _dashboard(models: Callable[[hyperwarm.CachedModels], list[object]],
               refreshed: Callable[[hyperwarm.CachedModels], list[object]] = lambda c: []) -> None:
    stack = _stack()
    caches = _models(stack, _cluster(stack), _model(), _model(name="qwen"), refreshed=("llama-3-1-8b", "qwen"))
    hyperwarm.InferenceObservability(stack, "Observability", hyperwarm.InferenceObservabilityProps(
        hyperpod=hyperwarm.HyperPodModels(models=models(caches), refreshed=refreshed(caches))))  # type: ignore[arg-type]


def _imported_bucket_hook_passes_cdk_nag() -> None:
    """A bucket imported by a deploy-time name builds, and cdk-nag finds the function's read of its objects
    acknowledged (the acknowledgment once read the imported bucket's logical id: an AttributeError)."""
    from cdk_nag import AwsSolutionsChecks

    stack = _stack()
    _hook(stack, s3.Bucket.from_bucket_name(stack, "ModelBucket", cdk.Fn.import_value("TeamModelBucket")))
    cdk.Validations.of(stack.node.root).add_plugins(AwsSolutionsChecks(stack.node.root))
    try:
        stack.node.root.synth()  # type: ignore[attr-defined]
        findings = ""
    except RuntimeError as error:  # findings on other resources, not this case's
        findings = str(error)
    assert "s3:::TeamModelBucket/llama/*" not in findings


def _negative_size_in_consumer_code() -> None:
    cdk.Size.gibibytes(-1)


# case id -> (what the consumer does, the error type, what its message says)
CASES: dict[str, tuple[Callable[[], object], type[Exception], str]] = {
    # negative or zero sizes and times
    "negative-size-cdk": (_negative_size_in_consumer_code, RuntimeError,
                          r"Storage amounts cannot be negative. Received: -1"),
    "negative-size-gigabytes": (lambda: gigabytes(-1), ValueError,
                                r"gigabytes\(-1\) -- a size is a number of GB, 0 or more, e.g. gigabytes\(16\)"),
    "zero-model-size": (lambda: _model(size=gigabytes(0)), ValueError,
                        r"CachedModelSpec: invalid props:\n  size = 0 GB -- allowed: above 0, up to 100000 GB"),
    "zero-ebs-volume": (lambda: _cluster(_stack(), hyperwarm.InstanceGroupSpec(
        name="system", instance_type="ml.m5.2xlarge", ebs_volume=cdk.Size.gibibytes(0))), ValueError,
        r"Team/Inference: invalid HyperPodEksClusterProps:\n  instance_groups\[0\]\.ebs_volume = 0 GB -- "
        r"allowed: 1\.\.16384 GB"),
    "zero-refresh-lock": (lambda: _hook(_stack(), lock=cdk.Duration.seconds(0)), ValueError,
                          r"Team/Refresh: invalid CacheRefreshHookProps:\n  lock = 0 seconds -- allowed: 1\.\.900 "
                          r"seconds"),
    # wrong types
    "int-for-size": (lambda: _model(size=16), ValueError,
                     r"CachedModelSpec: invalid props:\n  size = 16 -- wrong type; give a cdk\.Size, e\.g\. "
                     r"cdk\.Size\.gibibytes\(16\) or hyperwarm\.caches\.gigabytes\(16\)"),
    "str-for-size": (lambda: _model(size="16GB"), ValueError, r"size = '16GB' -- wrong type; give a cdk\.Size"),
    "int-for-ebs-volume": (lambda: _cluster(_stack(), hyperwarm.InstanceGroupSpec(
        name="system", instance_type="ml.m5.2xlarge", ebs_volume=500)), ValueError,  # type: ignore[arg-type]
        r"Team/Inference: invalid HyperPodEksClusterProps:\n  instance_groups\[0\]\.ebs_volume = 500 -- wrong "
        r"type; give a cdk\.Size"),
    "int-for-duration": (lambda: hyperwarm.HyperPodAutoscaling(  # type: ignore[arg-type]
        max_replicas=2, trigger=hyperwarm.ExporterTrigger("RequestsWaiting", target_value=8), cooldown=300),
        ValueError, r"HyperPodAutoscaling: invalid props:\n  cooldown = 300 -- wrong type; give a cdk\.Duration, "
                    r"e\.g\. cdk\.Duration\.seconds\(300\)"),
    "int-for-hook-duration": (lambda: _hook(_stack(), max_event_age=300), ValueError,
                              r"Team/Refresh: invalid CacheRefreshHookProps:\n  max_event_age = 300 -- wrong type; "
                              r"give a cdk\.Duration"),
    "int-for-endpoint-duration": (lambda: _endpoint(_stack(), metric_publish_frequency=60), ValueError,
                                  r"Team/Chat \(endpoint my-team-chat\): invalid InferenceEndpoint props:\n  "
                                  r"metric_publish_frequency = 60 -- wrong type; give a cdk\.Duration"),
    "int-for-target-timeout": (lambda: _hyperpod_hook(lambda c: hyperwarm.HyperPodRefreshTarget(
        c.model("llama-3-1-8b"), staging_timeout=600)), ValueError,  # type: ignore[arg-type]
        r"Team/Refresh: invalid CacheRefreshHookProps:\n  models\[0\]\.hyperpod\[0\]\.staging_timeout = 600 -- "
        r"wrong type; give a cdk\.Duration"),
    "str-for-int": (lambda: _endpoint(_stack(), variant={"instance_count": "2"}), ValueError,
                    r"variant 'main': instance_count = '2' -- wrong type; give an int, e\.g\. 2"),
    "str-for-source": (lambda: _model(source="s3://my-team-models/llama/v1"), ValueError,
                       r"source = 's3://my-team-models/llama/v1' -- wrong type; give a ModelSource or a "
                       r"FsxModelSource or a HuggingFaceModelSource or a JumpStartModelSource"),
    "str-outside-choices": (lambda: _model(weights_cache="disk"), ValueError,
                            r"weights_cache = 'disk' -- allowed: node, operator, off"),
    # unresolved tokens
    "token-bucket-refresh": (_imported_bucket_hook_passes_cdk_nag, type(None), ""),
    "token-endpoint-name-refresh": (lambda: _hook(_stack(), endpoint_name=None), ValueError,
                                    r"models\[0\]\.endpoints\[0\]\.endpoint = Team/Chat -- needs an explicit "
                                    r"endpoint_name"),
    "token-source-bucket-refresh": (lambda: _hyperpod_hook(lambda c: hyperwarm.HyperPodRefreshTarget(
        c.model("llama-3-1-8b")), source=hyperwarm.ModelSource(bucket=cdk.Fn.import_value("TeamModelBucket"),
                                                               prefix="llama", version="v1")), type(None), ""),
    "token-reconcile-rate": (lambda: _hook(_stack(), reconcile_every=cdk.Duration.minutes(
        cdk.Token.as_number(cdk.Fn.import_value("TeamReconcileMinutes")))), ValueError,
        r"reconcile_every = a deploy-time value -- needs a literal cdk\.Duration: it is an EventBridge schedule's "
        r"rate, read at synth"),
    # names that point at nothing
    "unknown-instance-group": (lambda: (s := _stack(), _models(s, _cluster(s), _model(instance_group="gpu"))),
                               ValueError, r"Team/Models: CachedModelsProps: invalid props:\n  models\[0\]\."
                               r"instance_group: 'gpu' -- no such instance group; allowed: system, llm"),
    "unknown-fallback-group": (lambda: (s := _stack(), _models(s, _cluster(s), _model(fallback_groups=("gpu",)))),
                               ValueError, r"models\[0\]\.fallback_groups\[0\]: 'gpu' -- no such instance group; "
                               r"allowed: system, llm"),
    "unknown-refresh-target": (lambda: _hyperpod_hook(lambda c: hyperwarm.HyperPodRefreshTarget(
        c.model("llama-3-8b"))), KeyError, r"Team/Models: no cached model 'llama-3-8b'; models: llama-3-1-8b"),
    "name-for-refresh-target": (lambda: _hyperpod_hook(lambda c: hyperwarm.HyperPodRefreshTarget(
        "llama-3-1-8b")), TypeError,  # type: ignore[arg-type]
        r"HyperPodRefreshTarget\('llama-3-1-8b'\) -- allowed: HyperPodRefreshTarget\(model, .*model a cached "
        r"model's handle, CachedModels\.model\(name\)"),
    "name-for-dashboard-model": (lambda: _dashboard(lambda c: ["llama-3-1-8b"]), TypeError,
                                 r"HyperPodModels\.models\[0\] = 'llama-3-1-8b' -- allowed: a cached model's handle"),
    "unknown-refreshed-model": (lambda: _dashboard(lambda c: [c.model("llama-3-1-8b")],
                                                   lambda c: [hyperwarm.HyperPodRefreshTarget(c.model("qwen"))]),
                                ValueError, r"hyperpod\.refreshed = qwen -- a refresh target of a model not in "
                                r"hyperpod\.models \(llama-3-1-8b\)"),
    # impossible pairings
    "node-cache-non-s3-source": (lambda: _model(source=hyperwarm.HuggingFaceModelSource(
        repo_id="meta-llama/Llama-3.1-8B", revision="a" * 40)), ValueError,
        r"weights_cache = 'node' -- the node cache fills from S3; a huggingface source is cached by the operator"),
    "fallback-group-without-nvme": (lambda: (s := _stack(), _models(s, _cluster(s),
                                                                     _model(fallback_groups=("system",)))),
                                    ValueError, r"models\[0\]\.fallback_groups\[0\]: 'system' -- holds_caches is "
                                    r"false for this group; allowed: llm"),
    "refresh-target-reading-another-bucket": (lambda: _hyperpod_hook(lambda c: hyperwarm.HyperPodRefreshTarget(
        c.model("llama-3-1-8b")), source=hyperwarm.ModelSource(bucket="old-team-models", prefix="llama", version="v1")),
        ValueError, r"models\[0\]\.hyperpod\[0\]\.model = llama-3-1-8b -- reads s3://old-team-models/llama/, not the "
        r"refreshed s3://my-team-models/llama/"),
    "refresh-target-without-room": (lambda: _hyperpod_hook(lambda c: hyperwarm.HyperPodRefreshTarget(
        c.model("llama-3-1-8b")), refreshed=()), ValueError,
        r"models\[\]\.hyperpod\[\]\.model = llama-3-1-8b -- a refresh puts a second version beside the one "
        r"serving: name the model in its CachedModelsProps\.refreshed"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_prop_gets_one_clear_error(case: str) -> None:
    build, error, message = CASES[case]
    if error is type(None):  # a token hyperwarm must accept: it builds, no error
        build()
        return
    with pytest.raises(error) as raised:
        build()
    assert type(raised.value) is not AttributeError
    assert re.search(message, str(raised.value)), str(raised.value)


def _doc_cases() -> list[str]:
    return re.findall(r"^\|[^|\n]*\|[^|\n]*\|[^|\n]*\| `([a-z0-9-]+)` \|$", DOC.read_text(), re.M)


def test_every_row_of_the_bad_props_table_names_a_case_and_every_case_has_a_row() -> None:
    named = _doc_cases()
    assert len(named) == len(set(named)) > 20
    assert sorted(named) == sorted(CASES)
