"""The cache chart: every object validates against its schema, and scheduling is what it must be."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from test_caches_config import IMAGE, default_groups, environment, model

from hyperwarm import HEALTH_TAINT_KEY, INSTANCE_GROUP_LABEL, NVME_PATH
from hyperwarm.caches.objects import IMAGE_READY_LABEL_PREFIX, PRIORITY_CLASS, WEIGHTS_READY_LABEL_PREFIX, cache_ready_preferences
from hyperwarm.functions.node_cache import layout
from manifests import build_chart, write_manifests
from stacks.caches_stack import chart_props
from stacks.config.environment import parse_environment, parse_environments

ENVIRONMENTS = ("dev", "staging", "prod")
SIDECAR = "public.ecr.aws/example/proxy:1.2.0"
REPO = Path(__file__).resolve().parent.parent


def objects_of(raw: dict[str, Any], env: str = "dev") -> list[dict[str, Any]]:
    return build_chart(env, chart_props(env, parse_environment(env, raw))).to_json()


def of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


@pytest.fixture(scope="module")
def project_objects() -> dict[str, list[dict[str, Any]]]:
    environments = parse_environments(json.loads((REPO / "cdk.json").read_text())["context"]["environments"])
    return {env: build_chart(env, chart_props(env, environments[env])).to_json() for env in ENVIRONMENTS}


@pytest.fixture(scope="module")
def crd_schemas(crds_dir: Path) -> dict[str, dict[str, Any]]:
    """kind -> the v1 openAPIV3Schema of the published operator CRDs."""
    schemas = {}
    for path in crds_dir.glob("*.yaml"):
        crd = yaml.safe_load(path.read_text())
        version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
        schemas[crd["spec"]["names"]["kind"]] = version["schema"]["openAPIV3Schema"]
    return schemas


def unknown_fields(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Fields the API server would silently prune: not declared by a structural schema."""
    if isinstance(value, dict) and "properties" in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
        return [problem for key, item in value.items()
                for problem in ([f"{path}/{key}: unknown field"] if key not in schema["properties"]
                                else unknown_fields(item, schema["properties"][key], f"{path}/{key}"))]
    if isinstance(value, list) and "items" in schema:
        return [p for i, item in enumerate(value) for p in unknown_fields(item, schema["items"], f"{path}/{i}")]
    return []


def crd_errors(obj: dict[str, Any], schemas: dict[str, dict[str, Any]]) -> list[str]:
    schema = schemas[obj["kind"]]
    validator = jsonschema.Draft7Validator(schema)
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(obj)]
    return errors + unknown_fields(obj, schema)


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_custom_kinds_validate_against_the_operator_crds(project_objects, crd_schemas, env) -> None:
    custom = [o for o in project_objects[env] if o["apiVersion"].startswith("inference.sagemaker.aws.amazon.com/")]
    assert custom
    for obj in custom:
        assert obj["apiVersion"] == "inference.sagemaker.aws.amazon.com/v1"
        assert crd_errors(obj, crd_schemas) == [], obj["metadata"]["name"]


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_builtin_kinds_validate_against_kubernetes_schemas(project_objects, env) -> None:
    builtin = [o for o in project_objects[env] if not o["apiVersion"].startswith("inference.")]
    assert {o["kind"] for o in builtin} >= {"Namespace"}
    for obj in builtin:
        kubernetes_validate.validate(obj, "1.33", strict=True)


def test_every_kind_is_emitted_and_validates(crd_schemas) -> None:
    raw = environment(model(name="a", size_gb=5, weights_cache="node", prepull="both", routing="session",
                            extra_images=[{"image": SIDECAR}]),
                      model(name="b", size_gb=5, weights_cache="node"))
    raw["instance_groups"] = default_groups(instance_count=2)  # one node per model
    objects = objects_of(raw)
    assert [o["kind"] for o in objects] == [
        "Namespace", "PriorityClass", "ConfigMap", "ServiceAccount", "Role", "RoleBinding", "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "DaemonSet", "DaemonSet", "DaemonSet",
        "InferenceEndpointConfig", "InferenceEndpointConfig"]
    for obj in objects:
        if obj["apiVersion"].startswith("inference."):
            assert crd_errors(obj, crd_schemas) == []
        else:  # ValidatingAdmissionPolicy is GA (admissionregistration.k8s.io/v1) from 1.30, the oldest EKS hyperwarm takes
            kubernetes_validate.validate(obj, "1.30", strict=True)


def test_endpoint_caches_weights_on_the_group_nvme_and_the_image() -> None:
    spec = of_kind(objects_of(environment(model())), "InferenceEndpointConfig")[0]["spec"]
    assert spec["modelCacheConfig"] == {"weightsCache": {"enabled": True, "hostPath": NVME_PATH},
                                        "imageCache": {"enabled": True}}
    assert spec["worker"]["image"] == IMAGE
    assert spec["worker"]["resources"]["limits"]["nvidia.com/gpu"] == 1


def test_model_source_is_the_versioned_s3_location_in_the_environment_region() -> None:
    spec = of_kind(objects_of(environment(model())), "InferenceEndpointConfig")[0]["spec"]
    assert spec["modelSourceConfig"] == {"modelSourceType": "s3", "modelLocation": "qwen2.5-7b/v1",
                                         "s3Storage": {"bucketName": "my-models", "region": "us-west-2"}}
    assert spec["modelVersion"] == "v1"


def test_routing_is_emitted_only_when_configured() -> None:
    assert "intelligentRoutingSpec" not in of_kind(objects_of(environment(model())), "InferenceEndpointConfig")[0][
        "spec"]
    spec = of_kind(objects_of(environment(model(routing="kvaware"))), "InferenceEndpointConfig")[0]["spec"]
    assert spec["intelligentRoutingSpec"] == {"enabled": True, "routingStrategy": "kvaware"}


def _required_keys(raw: dict[str, Any]) -> set[str]:
    affinity = of_kind(objects_of(raw), "InferenceEndpointConfig")[0]["spec"]["nodeAffinity"]
    return {e["key"] for term in affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            for e in term["matchExpressions"]}


def test_operator_cached_pods_never_require_a_cache_ready_node() -> None:
    """The operator's own affinity to its cache is preferred: a pod on a cold node downloads instead of waiting."""
    assert _required_keys(environment(model(weights_cache="operator"))) == {INSTANCE_GROUP_LABEL}


def test_node_cached_pods_require_their_versions_ready_label_and_read_its_directory() -> None:
    """A node-cached pod runs only where the filler labelled its version ready, and reads that version's directory
    (the documented ``kubernetesVolume`` source: a hostPath volume named as the model volume mount, no location)."""
    raw = environment(model(weights_cache="node"))
    assert _required_keys(raw) == {INSTANCE_GROUP_LABEL, layout.ready_label("qwen", "v1")}
    spec = of_kind(objects_of(raw), "InferenceEndpointConfig")[0]["spec"]
    assert spec["modelSourceConfig"] == {"modelSourceType": "kubernetesVolume"}
    assert spec["kubernetes"]["volumes"] == [{"name": spec["worker"]["modelVolumeMount"]["name"], "hostPath": {
        "path": f"{NVME_PATH}/hyperwarm/qwen/v1", "type": "Directory"}}]
    assert spec["modelCacheConfig"]["weightsCache"]["enabled"] is False, "the operator's own cache would be a 2nd copy"


def test_cache_ready_affinity_is_preferred() -> None:
    preferences = cache_ready_preferences(["uid-1"])
    assert [p["preference"]["matchExpressions"][0] for p in preferences] == [
        {"key": f"{WEIGHTS_READY_LABEL_PREFIX}uid-1", "operator": "Exists"},
        {"key": f"{IMAGE_READY_LABEL_PREFIX}uid-1", "operator": "Exists"}]
    assert all(1 <= p["weight"] <= 100 for p in preferences)


def test_a_node_cached_model_gets_a_filler_on_its_group_keeping_its_deployed_version() -> None:
    filler = of_kind(objects_of(environment(model(weights_cache="node"))), "DaemonSet")[0]
    assert filler["metadata"]["name"] == layout.filler_name("qwen")
    assert layout.filler_versions(filler) == [layout.Version("v1", "my-models", "qwen2.5-7b/v1", "")]
    assert filler["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": INSTANCE_GROUP_LABEL, "operator": "In", "values": ["inference"]}]}]


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_no_object_fills_nvme_that_no_pod_reads(project_objects, env) -> None:
    """No stand-alone weights cache: AWS documents a per-deployment cache directory, and nothing says a deployment
    reads a stand-alone one's. The node cache's directory is the pods' own volume."""
    assert not of_kind(project_objects[env], "ModelWeightsCacheConfig")
    assert not of_kind(project_objects[env], "ModelImageCache")


def test_prepull_operator_uses_the_image_cache_and_no_daemonset() -> None:
    objects = objects_of(environment(model(prepull="operator")))
    assert of_kind(objects, "InferenceEndpointConfig")[0]["spec"]["modelCacheConfig"]["imageCache"] == {
        "enabled": True}
    assert not of_kind(objects, "DaemonSet") and not of_kind(objects, "PriorityClass")


def test_prepull_daemonset_turns_the_operator_image_cache_off() -> None:
    objects = objects_of(environment(model(prepull="daemonset", extra_images=[{"image": SIDECAR}])))
    assert of_kind(objects, "InferenceEndpointConfig")[0]["spec"]["modelCacheConfig"]["imageCache"] == {
        "enabled": False}
    containers = of_kind(objects, "DaemonSet")[0]["spec"]["template"]["spec"]["containers"]
    assert sorted(c["image"] for c in containers) == sorted([IMAGE, SIDECAR])


def test_prepull_both_uses_image_cache_and_daemonset() -> None:
    objects = objects_of(environment(model(prepull="both")))
    assert of_kind(objects, "InferenceEndpointConfig")[0]["spec"]["modelCacheConfig"]["imageCache"]["enabled"]
    assert of_kind(objects, "DaemonSet")


def daemonset_pod(raw: dict[str, Any]) -> dict[str, Any]:
    return of_kind(objects_of(raw), "DaemonSet")[0]["spec"]["template"]["spec"]


def test_daemonset_tolerates_the_health_check_taint() -> None:
    assert {"key": HEALTH_TAINT_KEY, "operator": "Equal", "value": "Unschedulable", "effect": "NoSchedule"} in \
        daemonset_pod(environment(model(prepull="both")))["tolerations"]


def test_daemonset_tolerates_the_group_taints() -> None:
    raw = environment(model(prepull="both"))
    raw["instance_groups"] = default_groups(taints=[{"key": "gpu", "value": "yes", "effect": "PreferNoSchedule"}])
    assert {"key": "gpu", "operator": "Equal", "value": "yes", "effect": "PreferNoSchedule"} in \
        daemonset_pod(raw)["tolerations"]


def test_daemonset_is_limited_to_its_instance_group() -> None:
    affinity = daemonset_pod(environment(model(prepull="both")))["affinity"]["nodeAffinity"]
    assert affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": INSTANCE_GROUP_LABEL, "operator": "In", "values": ["inference"]}]}]


def test_daemonset_keeps_images_in_use_with_tiny_requests_and_a_priority_class() -> None:
    raw = environment(model(prepull="both"))
    pod = daemonset_pod(raw)
    assert pod["priorityClassName"] == PRIORITY_CLASS
    container = pod["containers"][0]
    assert container["command"] == ["sleep", "infinity"]
    assert container["resources"] == {"requests": {"cpu": "1m", "memory": "8Mi"},
                                      "limits": {"cpu": "10m", "memory": "32Mi"}}
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    priority = of_kind(objects_of(raw), "PriorityClass")[0]
    assert (priority["metadata"]["name"], priority["preemptionPolicy"]) == (PRIORITY_CLASS, "Never")


def test_object_names_are_deterministic() -> None:
    raw = environment(model(prewarm=True, prepull="both"))
    names = [(o["kind"], o["metadata"]["name"]) for o in objects_of(raw)]
    assert names == [(o["kind"], o["metadata"]["name"]) for o in objects_of(raw)]
    assert ("InferenceEndpointConfig", "qwen") in names and ("DaemonSet", "prepull-inference") in names


def test_no_models_no_objects() -> None:
    assert objects_of({}) == []


def test_write_manifests_writes_one_file_per_object_and_removes_stale_ones(tmp_path) -> None:
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "old.yaml").write_text("stale")
    config = parse_environment("dev", environment(model(prepull="both")))
    written = write_manifests("dev", chart_props("dev", config), tmp_path)
    assert sorted(p.name for p in (tmp_path / "dev").glob("*.yaml")) == sorted(p.name for p in written)
    assert [yaml.safe_load(p.read_text()) for p in written] == build_chart("dev", chart_props("dev", config)).to_json()


# -- what the worker is told ---------------------------------------------------------------


def worker_env(obj: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in obj["spec"]["worker"]["environmentVariables"]}


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_every_project_worker_is_told_its_mounted_model_and_its_gpus(project_objects, env) -> None:
    """Fails on the old chart, whose workers had no environmentVariables: vLLM started its default model."""
    endpoints = of_kind(project_objects[env], "InferenceEndpointConfig")
    assert endpoints
    for obj in endpoints:
        worker = obj["spec"]["worker"]
        told = worker_env(obj)
        assert told["SM_VLLM_MODEL"] == worker["modelVolumeMount"]["mountPath"] == "/opt/ml/model"
        assert told["SM_VLLM_TENSOR_PARALLEL_SIZE"] == str(worker["resources"]["limits"]["nvidia.com/gpu"])


def test_serving_overrides_reach_the_worker_as_the_variables_the_entrypoint_reads() -> None:
    raw = environment(model(port=9000,
                            serving={"args": ["--max-model-len", "8192"], "environment": {"SM_VLLM_DTYPE": "half"}}))
    (obj,) = of_kind(objects_of(raw), "InferenceEndpointConfig")
    assert worker_env(obj) == {"SM_VLLM_DTYPE": "half", "SM_VLLM_MAX_MODEL_LEN": "8192", "SM_VLLM_MODEL": "/opt/ml/model",
                               "SM_VLLM_PORT": "9000", "SM_VLLM_TENSOR_PARALLEL_SIZE": "1"}
    assert "args" not in obj["spec"]["worker"]  # the DLC entrypoint ignores container arguments
    assert json.loads(obj["metadata"]["annotations"]["hyperwarm.io/serving"]) == {"framework": "vllm"}


def test_a_custom_server_gets_its_own_variables_and_arguments_and_validates(crd_schemas) -> None:
    raw = environment(model(image="123456789012.dkr.ecr.us-west-2.amazonaws.com/my-server:1.0",
                            serving={"model_env": "MODEL_DIR", "parallel_env": "NUM_GPUS", "args": ["--verbose"]}))
    (obj,) = of_kind(objects_of(raw), "InferenceEndpointConfig")
    assert worker_env(obj) == {"MODEL_DIR": "/opt/ml/model", "NUM_GPUS": "1"}
    assert obj["spec"]["worker"]["args"] == ["--verbose"]
    assert crd_errors(obj, crd_schemas) == []


def test_the_cdk_json_override_reaches_the_prod_70b_worker(project_objects) -> None:
    (obj,) = [o for o in of_kind(project_objects["prod"], "InferenceEndpointConfig") if o["metadata"]["name"] ==
              "llama-3-1-70b"]
    assert worker_env(obj)["SM_VLLM_MAX_MODEL_LEN"] == "32768"
