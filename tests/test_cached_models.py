"""``hyperwarm.caches.CachedModels`` on a minimal stack: what a platform team builds from the library alone."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import test_caches_manifests
from aws_cdk.assertions import Template
from stand_ins import imported_cluster
from test_caches_config import IMAGE
from test_caches_manifests import crd_errors

from hyperwarm.caches import (
    CachedModels,
    CachedModelSpec,
    CachedModelsProps,
    ExporterTrigger,
    ExtraImage,
    HyperPodAutoscaling,
    KvCache,
    ModelSource,
    OperatorBuildError,
    Probes,
    PropsError,
    gigabytes,
)
from hyperwarm.caches.typed import bind
from hyperwarm.cluster.instance_group import InstanceGroupSpec, NodeTaint
from hyperwarm.refresh import HyperPodRefreshTarget

crd_schemas = test_caches_manifests.crd_schemas  # the fixture
GROUPS = [InstanceGroupSpec("system", "ml.c5.4xlarge"),
          InstanceGroupSpec("inference", "ml.g5.xlarge", instance_count=2, holds_caches=True)]


def llama(**overrides: Any) -> CachedModelSpec:
    return CachedModelSpec(**{"name": "llama", "source": ModelSource("my-models", "llama-3.1-8b", "v1"),
                               "size": gigabytes(16), "image": IMAGE, "instance_group": "inference", **overrides})


def build(*models: CachedModelSpec, groups: list[InstanceGroupSpec] = GROUPS,
          operator_build: str | None = "v2.0.0-eksbuild.1", **props: Any) -> CachedModels:
    app = cdk.App()
    stack = cdk.Stack(app, "Models", env=cdk.Environment(account="123456789012", region="us-west-2"))
    cluster = imported_cluster(stack, groups, operator_build=operator_build)
    return CachedModels(stack, "Caches", CachedModelsProps(cluster=cluster, models=models, **props))


def test_objects_validate_against_the_operator_crds(crd_schemas) -> None:
    caches = build(llama(weights_cache="node", prepull="both", extra_images=(ExtraImage("public.ecr.aws/x/proxy:1.2"),),
                         autoscaling=HyperPodAutoscaling(2, ExporterTrigger("RequestsWaiting", 8)),
                         probes=Probes(), kv_cache=KvCache(), routing="prefixaware"))
    kinds = [o["kind"] for o in caches.objects]
    assert kinds == ["Namespace", "PriorityClass", "ConfigMap", "ServiceAccount", "Role", "RoleBinding", "ClusterRole",
        "ClusterRoleBinding",
                     "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "DaemonSet", "DaemonSet",
                     "InferenceEndpointConfig"]
    for obj in caches.objects:
        if obj["apiVersion"].startswith("inference.sagemaker.aws.amazon.com/"):
            assert crd_errors(obj, crd_schemas) == [], obj["kind"]


def test_one_manifest_applies_the_objects() -> None:
    # (After the operator add-on: tests/test_caches_stack.py, on a created cluster; an imported one has none.)
    caches = build(llama())
    template = Template.from_stack(cdk.Stack.of(caches))
    (manifest,) = template.find_resources("Custom::AWSCDK-EKS-KubernetesResource").values()
    assert "InferenceEndpointConfig" in json.dumps(manifest["Properties"]["Manifest"])


def test_node_cache_fillers_may_read_the_object_versions_a_manifest_binds() -> None:
    """The filler downloads each file's ``version_id`` (GetObject with VersionId needs s3:GetObjectVersion), of its
    model's prefix alone."""
    caches = build(llama(weights_cache="node"))
    assert caches.filler_role is not None
    role = cdk.Stack.of(caches).get_logical_id(caches.filler_role.node.default_child)
    statements = [s for r in Template.from_stack(cdk.Stack.of(caches)).find_resources("AWS::IAM::Policy").values()
                  if {"Ref": role} in r["Properties"]["Roles"] for s in r["Properties"]["PolicyDocument"]["Statement"]]
    versions = [s["Resource"] for s in statements if "s3:GetObjectVersion" in json.dumps(s["Action"])]
    assert versions == [{"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":s3:::my-models/llama-3.1-8b/*"]]}]


def test_an_exporter_trigger_names_this_cluster_and_model() -> None:
    caches = build(llama(autoscaling=HyperPodAutoscaling(2, ExporterTrigger("RequestsWaiting", 8))))
    (endpoint,) = [o for o in caches.objects if o["kind"] == "InferenceEndpointConfig"]
    trigger = endpoint["spec"]["autoScalingSpec"]["cloudWatchTrigger"]
    assert {d["name"]: d["value"] for d in trigger["dimensions"]} == {"ClusterName": "hyperpod-eks", "Model": "llama"}


def test_durations_and_sizes_render_in_the_operators_units() -> None:
    caches = build(llama(probes=Probes(period=cdk.Duration.minutes(1), timeout=cdk.Duration.seconds(5))))
    (endpoint,) = [o for o in caches.objects if o["kind"] == "InferenceEndpointConfig"]
    assert endpoint["spec"]["worker"]["probes"]["livenessProbe"]["periodSeconds"] == 60


def test_overfull_nvme_fails_naming_the_group() -> None:
    # ml.g5.xlarge: 250 GB NVMe, 225 GB usable at 10 % headroom; 220 GB of weights + a 20 GB image is 240 GB.
    with pytest.raises(PropsError, match=r"Models/Caches: CachedModelsProps: invalid props:\n  caches: instance group "
                                         r"'inference' \(ml\.g5\.xlarge\): need 240 GB, have 225 GB .* does not fit"):
        build(llama(size=gigabytes(220)))
    build(llama(size=gigabytes(220)), nvme_headroom_percent=0)


def test_a_model_on_a_group_that_holds_no_caches_fails_naming_the_field() -> None:
    groups = [InstanceGroupSpec("inference", "ml.g5.xlarge")]
    with pytest.raises(PropsError, match=r"models\[0\].instance_group: 'inference' -- holds_caches is false"):
        build(llama(), groups=groups)


def test_a_tainted_group_is_refused_because_the_endpoint_pods_cannot_tolerate_it() -> None:
    groups = [InstanceGroupSpec("inference", "ml.g5.xlarge", holds_caches=True,
                                taints=(NodeTaint("dedicated", "NoSchedule", "llm"),))]
    with pytest.raises(PropsError, match=r"the group is tainted \(dedicated=llm:NoSchedule\)"):
        build(llama(), groups=groups)


def test_more_gpus_than_the_instance_has_fail() -> None:
    from hyperwarm.caches import WorkerResources

    with pytest.raises(PropsError, match=r"models\[0\].resources.gpus: 4 -- ml.g5.xlarge \(instance group inference\) "
                                         r"has 1 GPU\(s\); allowed: 0..1"):
        build(llama(resources=WorkerResources(gpus=4)))


def test_an_operator_build_before_model_caching_fails() -> None:
    with pytest.raises(OperatorBuildError, match=r"'v1.0.0-eksbuild.1' -- InferenceEndpointConfig.spec."
                                                 r"modelCacheConfig needs operator 3.3 or later"):
        build(llama(), operator_build="v1.0.0-eksbuild.1")


def test_the_operator_readers_may_read_the_model_version_prefix() -> None:
    caches = build(llama())
    template = json.dumps(Template.from_stack(cdk.Stack.of(caches)).to_json())
    assert "my-models/llama-3.1-8b/v1/*" in template


@pytest.mark.parametrize(("build_props", "message"), [
    (lambda: ModelSource("b", "p", "v1"), "bucket = 'b' -- allowed: an S3 bucket name"),
    (lambda: llama(replicas=5000), "replicas = 5000 -- allowed: 0..1000"),
    (lambda: llama(size=gigabytes(0)), "size = 0 GB -- allowed: above 0, up to 100000 GB"),
    (lambda: llama(image=IMAGE.split(":")[0] + ":latest"), "image = '.*:latest' -- a moving tag"),
    (lambda: Probes(period=cdk.Duration.seconds(0)), "period = 0 seconds -- allowed: 1..300 seconds"),
    (lambda: Probes(readiness_failures=5), "readiness_failures = 5 -- must not exceed liveness_failures"),
    (lambda: llama(routing="fastest"), "routing = 'fastest' -- allowed: prefixaware, kvaware, session, roundrobin"),
    (lambda: llama(extra_images=(ExtraImage("public.ecr.aws/x/proxy:1.2"),)),
     r"extra_images = 1 image\(s\) -- pre-pulled by the DaemonSet; set prepull to daemonset or both"),
    (lambda: llama(autoscaling=HyperPodAutoscaling(2, ExporterTrigger("RequestsWaiting", 8)), replicas=3),
     r"replicas = 3 -- the starting count must lie within autoscaling min_replicas..max_replicas; allowed: 1..2"),
])
def test_bad_props_fail_naming_field_value_and_what_is_allowed(build_props, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_props()


def test_model_names_must_be_unique() -> None:
    with pytest.raises(PropsError, match="models = llama -- model names must be unique"):
        build(llama(), llama())


def test_binding_rejects_a_field_the_crd_does_not_know() -> None:
    from hyperwarm.caches import k8s

    with pytest.raises(ValueError, match=r"spec: cacheEverything -- not a field of the operator's CRD"):
        bind(k8s.InferenceEndpointConfigSpec, {"modelName": "m", "cacheEverything": True}, "spec")
    with pytest.raises(ValueError, match=r"spec.intelligentRoutingSpec.routingStrategy = 'fastest' -- not in the "
                                         r"operator's CRD; allowed: .*prefixaware"):
        bind(k8s.InferenceEndpointConfigSpec,
             {"intelligentRoutingSpec": {"enabled": True, "routingStrategy": "fastest"}}, "spec")


# One schema: every range of the library's props is what cdk.json accepts, read from one place.
def _bounded_fields() -> list[tuple[type, str, Any]]:
    import annotated_types

    from hyperwarm._internal.constraints import constraints_of
    from hyperwarm.caches import props

    found = []
    for cls in (props.CachedModelSpec, props.WorkerResources, props.Probes, props.Metrics, props.LoadBalancer,
                props.RequestLimits, props.ExtraImage):
        for name, constraint in constraints_of(cls).items():
            for rule in constraint.constraints:
                if isinstance(rule, annotated_types.Le):
                    found.append((cls, name, rule))
    return found


@pytest.mark.parametrize(("cls", "name", "rule"), _bounded_fields(), ids=lambda v: getattr(v, "__name__", str(v)))
def test_the_library_and_cdk_json_accept_and_reject_the_same_values(cls: type, name: str, rule: Any) -> None:
    from pydantic import ValidationError

    from hyperwarm._internal.constraints import measured_of
    from stacks.config import caches, library

    # The app's cdk.json model of each props class (a model's own, with cdk.json's autoscaling and serving).
    model = caches.CachedModel if cls.__name__ == "CachedModelSpec" else library._derived(cls)
    required = {"RequestLimits": {"max_concurrent_requests": 1}, "ExtraImage": {"image": IMAGE},
                "Probes": {"liveness_failures": 100},
                "CachedModelSpec": {"name": "m", "source": {"bucket": "bkt", "prefix": "p", "version": "v1"},
                                     "size_gb": 1, "image": IMAGE, "instance_group": "g"}}.get(cls.__name__, {})
    measured = measured_of(cls, name)  # a Duration or Size: cdk.json gives its number as <name><key_suffix>
    key = name + measured.key_suffix if measured else name
    for value, accepted in ((rule.le, True), (rule.le + 1, False)):
        raw = {**required, key: value}
        try:
            model.model_validate_json(json.dumps(raw))
            cdk_json = True
        except ValidationError:
            cdk_json = False
        assert cdk_json is accepted, (cls.__name__, name, value)
        try:
            kwargs = model.model_validate_json(json.dumps({**required})).props
            dataclasses.replace(kwargs, **{name: measured.make(value) if measured else value})
            library_accepts = True
        except ValueError:
            library_accepts = False
        assert library_accepts is accepted, (cls.__name__, name, value)


def test_the_crds_ship_with_the_library() -> None:
    import hyperwarm.caches

    crds = Path(hyperwarm.caches.__file__).parent / "crds"
    assert len(list(crds.glob("*.yaml"))) == 4


def test_each_model_has_a_handle_saying_what_follows_from_it() -> None:
    """What a refresh target or a dashboard needs of a model is read from the model, never restated by hand."""
    caches = build(llama(weights_cache="node"), llama(name="qwen", weights_cache="operator"), refreshed=["llama"])
    assert list(caches.models) == ["llama", "qwen"]
    node, operator = caches.model("llama"), caches.model("qwen")
    assert (node.node_cached, node.refreshed, node.kind, node.namespace) == (
        True, True, "InferenceEndpointConfig", "hyperwarm-models")
    assert (operator.node_cached, operator.refreshed) == (False, False)
    assert node.cluster is operator.cluster and node.size.to_bytes() == llama().size.to_bytes()
    assert HyperPodRefreshTarget(node).to_contract().node_cache is not None  # warm, chosen by the model
    assert HyperPodRefreshTarget(operator).to_contract().node_cache is None


def test_a_misspelt_model_name_fails_naming_the_models_there_are() -> None:
    caches = build(llama(), llama(name="qwen"))
    with pytest.raises(KeyError, match=r"Models/Caches: no cached model 'lama'; models: llama, qwen"):
        caches.model("lama")
