"""The refresh identity's admission policy, evaluated as the API server would (CEL, tests/admission.py): the patches
the refresh code makes (its own functions, against the objects the caches construct renders) pass; a change of
any other field, a value outside the refreshed prefix, a create or a delete is denied; and only the refresh's
Kubernetes group is held to it."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from admission import Request, denials
from cluster_model import rendered
from fake_kube import merge_patch

from hyperwarm.caches.objects import inference_endpoint_config
from hyperwarm.caches.props import CachedModelSpec, ModelSource, WorkerResources, gigabytes
from hyperwarm.functions.cache_refresh import events
from hyperwarm.functions.cache_refresh.config import HyperPodTarget, NodeCache
from hyperwarm.functions.cache_refresh.events import ManifestCreated
from hyperwarm.functions.cache_refresh.targets import hyperpod, warm
from hyperwarm.functions.node_cache import layout
from hyperwarm.refresh.access import RBAC_GROUP, rbac_objects
from hyperwarm.refresh.admission import VERSION_PATTERN, admission_objects

BUCKET, NAMESPACE = "models", "models"
WARM = HyperPodTarget("c", NAMESPACE, "llama", node_cache=NodeCache("llama"))
S3 = HyperPodTarget("c", NAMESPACE, "qwen")
JUMPSTART = HyperPodTarget("c", NAMESPACE, "mistral", resource="JumpStartModel")
PREFIXES = {"llama": [WARM], "qwen": [S3], "mistral": [JUMPSTART]}
POLICY, BINDING = admission_objects(RBAC_GROUP, PREFIXES, BUCKET, name="hyperwarm-cache-refresh", labels={})
REFRESH = (RBAC_GROUP, "system:authenticated")
API = {"InferenceEndpointConfig": ("inference.sagemaker.aws.amazon.com", "inferenceendpointconfigs"),
       "JumpStartModel": ("inference.sagemaker.aws.amazon.com", "jumpstartmodels"),
       "ModelWeightsCacheConfig": ("inference.sagemaker.aws.amazon.com", "modelweightscacheconfigs"),
       "DaemonSet": ("apps", "daemonsets")}


def request(kind: str, name: str, *, operation: str = "UPDATE", groups: tuple[str, ...] = REFRESH,
            username: str = "arn:aws:sts::111122223333:assumed-role/refresh/session") -> Request:
    group, resource = API[kind]
    return Request(operation, kind, group, resource, NAMESPACE, name, username=username, groups=groups)


def s3_sourced() -> dict[str, Any]:
    props = CachedModelSpec(name="qwen", source=ModelSource(BUCKET, "qwen", "v1"), size=gigabytes(60),
                             image="763104351884.dkr.ecr.us-west-2.amazonaws.com/vllm:0.27.1-gpu-py312-cu130-ubuntu22.04"
                                   "-sagemaker", instance_group="inference", weights_cache="operator",
                             resources=WorkerResources(gpus=2, cpu="8", memory="64Gi"))
    return inference_endpoint_config(props, namespace=NAMESPACE, region="us-west-2", labels={}, cluster_name="c")


def jumpstart() -> dict[str, Any]:
    return {"apiVersion": "inference.sagemaker.aws.amazon.com/v1", "kind": "JumpStartModel",
            "metadata": {"name": "mistral", "namespace": NAMESPACE},
            "spec": {"model": {"modelId": "huggingface-llm-mistral-7b", "modelVersion": "1.0.0", "acceptEula": True},
                     "server": {"instanceType": "ml.g5.8xlarge"}, "sageMakerEndpoint": {"name": "mistral"}}}


class Server:
    """The API server for the refresh's calls: merge-patch with the server's own changes (a new resourceVersion, the
    generation raised by a spec change, a DaemonSet's template generation), each write admitted by the policy."""

    def __init__(self, *objects: dict[str, Any]) -> None:
        self.objects = {(o["kind"], o["metadata"]["name"]): copy.deepcopy(o) for o in objects}
        for obj in self.objects.values():
            obj["metadata"].update(resourceVersion="1", generation=1)
        self.writes: list[tuple[dict[str, Any], dict[str, Any]]] = []

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any]:
        return copy.deepcopy(self.objects[(kind, name)])

    def merge_patch(self, kind: str, namespace: str, name: str, patch: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        old = self.objects[(kind, name)]
        new = merge_patch(copy.deepcopy(old), patch)
        new["metadata"]["resourceVersion"] = str(int(old["metadata"]["resourceVersion"]) + 1)
        if new["spec"] != old["spec"]:
            new["metadata"]["generation"] += 1
        if kind == "DaemonSet" and new["spec"]["template"] != old["spec"]["template"]:
            annotations = new["metadata"].setdefault("annotations", {})
            annotations["deprecated.daemonset.template.generation"] = str(new["metadata"]["generation"])
        denied = denials(POLICY, request(kind, name), old, new)
        assert denied == [], f"the refresh's own patch of {kind}/{name} was denied: {denied}"
        self.writes.append((old, new))
        self.objects[(kind, name)] = new
        return 200, copy.deepcopy(new)

    def items(self, kind: str, namespace: str) -> list[dict[str, Any]]:
        return []

    def nodes(self, selector: dict[str, str]) -> list[dict[str, Any]]:
        return []


def created(prefix: str, version: str) -> ManifestCreated:
    return ManifestCreated(BUCKET, f"{prefix}/{version}/manifest.json", "1", None, prefix, version, "2026-12-01T00:00:00Z")


def test_the_warm_rollout_s_own_patches_pass() -> None:
    """Stage, switch, retire, and point back: what warm.keep and warm.point send."""
    deployment, filler = rendered(BUCKET, "llama", "v1")
    server = Server(deployment, filler)
    v1, v2 = layout.filler_versions(filler)[0], layout.Version("v2", BUCKET, "llama/v2")
    warm.keep(server, WARM, [v1, v2])
    warm.point(server, WARM, "v2")
    warm.keep(server, WARM, [v2])
    warm.point(server, WARM, "v1")
    warm.keep(server, WARM, [v1])
    assert [new["kind"] for _, new in server.writes] == ["DaemonSet", "InferenceEndpointConfig", "DaemonSet",
                                                          "InferenceEndpointConfig", "DaemonSet"]
    assert all(old["spec"] != new["spec"] for old, new in server.writes)


def test_repointing_an_s3_sourced_deployment_and_a_jumpstart_model_passes() -> None:
    server = Server(s3_sourced(), jumpstart())
    assert hyperpod.repoint(server, "InferenceEndpointConfig", NAMESPACE, "qwen", created("qwen", "v2"))
    assert hyperpod.repoint(server, "JumpStartModel", NAMESPACE, "mistral", created("mistral", "1.2.3"))
    assert len(server.writes) == 2


# -- what else the refresh's identity might try ------------------------------------------------------------------

def _pointed() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(deployment, filler) before and after the refresh's own switch to v2 (via its functions)."""
    deployment, filler = rendered(BUCKET, "llama", "v1")
    server = Server(deployment, filler)
    warm.keep(server, WARM, [layout.filler_versions(filler)[0], layout.Version("v2", BUCKET, "llama/v2")])
    warm.point(server, WARM, "v2")
    (f_old, f_new), (d_old, d_new) = server.writes
    return d_old, d_new, f_old, f_new


def _volumes(d: dict[str, Any]) -> list[dict[str, Any]]:
    return d["spec"]["kubernetes"]["volumes"]


def _terms(d: dict[str, Any]) -> list[dict[str, Any]]:
    return d["spec"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]


def _model_volume(d: dict[str, Any]) -> dict[str, Any]:
    return next(v for v in _volumes(d) if v["name"] == layout.MODEL_VOLUME)


DEPLOYMENT_CHANGES: dict[str, tuple[Callable[[dict[str, Any]], Any], str]] = {
    "image": (lambda d: d["spec"]["worker"].update(image="attacker.example/vllm:evil"), "may change only modelVersion"),
    "env": (lambda d: d["spec"]["worker"]["environmentVariables"].append({"name": "X", "value": "1"}),
            "may change only modelVersion"),
    "resources": (lambda d: d["spec"]["worker"]["resources"]["limits"].update(memory="1Ti"), "may change only"),
    "replicas": (lambda d: d["spec"].update(replicas=40), "may change only modelVersion"),
    "service account": (lambda d: d["spec"]["kubernetes"].update(serviceAccountName="admin"), "may change only"),
    "operator cache": (lambda d: d["spec"]["modelCacheConfig"]["weightsCache"].update(hostPath="/"), "may change only"),
    "another volume": (lambda d: _volumes(d).append({"name": "root", "hostPath": {"path": "/"}}),
                       "the only volume the cache refresh may change"),
    "path outside": (lambda d: _model_volume(d)["hostPath"].update(path="/etc"), "the only volume"),
    "path traversal": (lambda d: _model_volume(d)["hostPath"].update(path="/opt/dlami/nvme/hyperwarm/llama/../../../"
                                                                        "etc"), "the only volume"),
    "another model's copy": (lambda d: _model_volume(d)["hostPath"].update(path="/opt/dlami/nvme/hyperwarm/qwen/v2"),
                             "the only volume"),
    "volume type": (lambda d: _model_volume(d)["hostPath"].update(type="DirectoryOrCreate"), "the only volume"),
    "version name": (lambda d: d["spec"].update(modelVersion="../etc"), "the version must match"),
    "affinity term": (lambda d: _terms(d)[0]["matchExpressions"].append(
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}), "in the node affinity"),
    "label dropped": (lambda d: _terms(d)[0].update(matchExpressions=[
        e for e in _terms(d)[0]["matchExpressions"] if not e["key"].startswith(layout.LABEL_DOMAIN)]),
                      "in the node affinity"),
    "label operator": (lambda d: [e.update(operator="DoesNotExist") for e in _terms(d)[0]["matchExpressions"]
                                  if e["key"].startswith(layout.LABEL_DOMAIN)], "in the node affinity"),
    "preferred affinity": (lambda d: d["spec"]["nodeAffinity"].update(preferredDuringSchedulingIgnoredDuringExecution=[
        {"weight": 1, "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}]),
                           "may change only modelVersion"),
    "label": (lambda d: d["metadata"].setdefault("labels", {}).update(team="x"), "may not change labels"),
    "annotation": (lambda d: d["metadata"].setdefault("annotations", {}).update(x="y"), "may not change labels"),
}


@pytest.mark.parametrize("change", sorted(DEPLOYMENT_CHANGES))
def test_every_other_change_of_a_node_cached_deployment_is_denied(change: str) -> None:
    old, new, _, _ = _pointed()
    mutate, message = DEPLOYMENT_CHANGES[change]
    mutate(new)
    found = denials(POLICY, request("InferenceEndpointConfig", "llama"), old, new)
    assert found and any(message in m for m in found), found


def _template(f: dict[str, Any]) -> dict[str, Any]:
    return f["spec"]["template"]


FILLER_CHANGES: dict[str, tuple[Callable[[dict[str, Any]], Any], str]] = {
    "image": (lambda f: _template(f)["spec"]["containers"][0].update(image="attacker.example/x"), "may change only"),
    "command": (lambda f: _template(f)["spec"]["containers"][0].update(command=["sh"]), "may change only"),
    "host path": (lambda f: _template(f)["spec"]["volumes"][0]["hostPath"].update(path="/"), "may change only"),
    "service account": (lambda f: _template(f)["spec"].update(serviceAccountName="admin"), "may change only"),
    "pod label": (lambda f: _template(f)["metadata"]["labels"].update(x="y"), "may change only"),
    "other annotation": (lambda f: _template(f)["metadata"]["annotations"].update(x="y"), "may change only"),
    "update strategy": (lambda f: f["spec"].update(updateStrategy={"type": "OnDelete"}), "may change only"),
    "another bucket": (lambda f: _template(f)["metadata"]["annotations"].update({layout.VERSIONS_ANNOTATION: layout.
                       versions_json([layout.Version("v2", "attacker", "llama/v2")])}), "must list one or two versions"),
    "another prefix": (lambda f: _template(f)["metadata"]["annotations"].update({layout.VERSIONS_ANNOTATION: layout.
                       versions_json([layout.Version("v2", BUCKET, "qwen/v2")])}), "must list one or two versions"),
    "bad version": (lambda f: _template(f)["metadata"]["annotations"].update({layout.VERSIONS_ANNOTATION: json.dumps(
        [{"bucket": BUCKET, "location": "llama/v2", "version": "../../x"}])}), "must list one or two versions"),
    "three versions": (lambda f: _template(f)["metadata"]["annotations"].update({layout.VERSIONS_ANNOTATION: json.dumps(
        [{"bucket": BUCKET, "location": f"llama/v{i}", "version": f"v{i}"} for i in (1, 2, 3)],
        separators=(",", ":"), sort_keys=True)}), "must list one or two versions"),
    "manifest pin not a digest": (lambda f: _template(f)["metadata"]["annotations"].update({
        layout.VERSIONS_ANNOTATION: json.dumps([{"bucket": BUCKET, "location": "llama/v2", "manifest": "../x",
                                                 "version": "v2"}], separators=(",", ":"))}),
        "must list one or two versions"),
}


@pytest.mark.parametrize("change", sorted(FILLER_CHANGES))
def test_every_other_change_of_a_filler_is_denied(change: str) -> None:
    _, _, old, new = _pointed()
    mutate, message = FILLER_CHANGES[change]
    mutate(new)
    found = denials(POLICY, request("DaemonSet", layout.filler_name("llama")), old, new)
    assert found and any(message in m for m in found), found


def _repointed(obj: dict[str, Any], kind: str, name: str, version: str) -> tuple[dict[str, Any], dict[str, Any]]:
    server = Server(obj)
    hyperpod.repoint(server, kind, NAMESPACE, name, created(name, version))
    ((old, new),) = server.writes
    return old, new


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["spec"]["worker"].update(image="attacker.example/x"), "may change only modelVersion"),
    (lambda d: d["spec"]["modelSourceConfig"].update(modelLocation="other/v2"), "must be qwen/<modelVersion>"),
    (lambda d: d["spec"]["modelSourceConfig"]["s3Storage"].update(bucketName="attacker"), "in bucket models"),
    (lambda d: d["spec"]["modelSourceConfig"]["s3Storage"].update(region="eu-west-1"), "may change only modelVersion"),
    (lambda d: d["spec"]["modelSourceConfig"].update(modelSourceType="fsx"), "may change only modelVersion"),
    (lambda d: d["spec"].update(modelVersion="v3"), "must be qwen/<modelVersion>"),
])
def test_every_other_change_of_an_s3_sourced_deployment_is_denied(mutate: Callable[..., Any], message: str) -> None:
    old, new = _repointed(s3_sourced(), "InferenceEndpointConfig", "qwen", "v2")
    mutate(new)
    found = denials(POLICY, request("InferenceEndpointConfig", "qwen"), old, new)
    assert found and any(message in m for m in found), found


@pytest.mark.parametrize("mutate, message", [
    (lambda j: j["spec"]["model"].update(modelId="attacker-model"), "may change only model.modelVersion"),
    (lambda j: j["spec"]["server"].update(instanceType="ml.p5.48xlarge"), "may change only model.modelVersion"),
    (lambda j: j["spec"]["model"].update(modelVersion="latest"), "the version must match"),
])
def test_every_other_change_of_a_jumpstart_model_is_denied(mutate: Callable[..., Any], message: str) -> None:
    old, new = _repointed(jumpstart(), "JumpStartModel", "mistral", "1.2.3")
    mutate(new)
    found = denials(POLICY, request("JumpStartModel", "mistral"), old, new)
    assert found and any(message in m for m in found), found


@pytest.mark.parametrize("operation", ["CREATE", "DELETE"])
def test_the_refresh_creates_and_deletes_nothing(operation: str) -> None:
    cache = {"apiVersion": "inference.sagemaker.aws.amazon.com/v1", "kind": "ModelWeightsCacheConfig",
             "metadata": {"name": "llama-weights", "namespace": NAMESPACE}, "spec": {"enabled": True}}
    _, filler = rendered(BUCKET, "llama", "v1")
    for kind, obj in (("ModelWeightsCacheConfig", cache), ("DaemonSet", filler), ("InferenceEndpointConfig", s3_sourced())):
        old, new = (None, obj) if operation == "CREATE" else (obj, None)
        found = denials(POLICY, request(kind, obj["metadata"]["name"], operation=operation), old, new)
        assert found and any("creates and deletes nothing" in m for m in found), (kind, found)


def test_objects_that_are_not_its_targets_are_denied() -> None:
    other = s3_sourced()
    other["metadata"]["name"] = "someone-elses"
    changed = copy.deepcopy(other)
    changed["spec"]["modelVersion"] = "v2"
    found = denials(POLICY, request("InferenceEndpointConfig", "someone-elses"), other, changed)
    assert found and any("only its own targets" in m for m in found), found


def test_the_policy_holds_the_refresh_s_group_alone() -> None:
    old, new, _, _ = _pointed()
    DEPLOYMENT_CHANGES["image"][0](new)
    for groups in (("system:masters", "system:authenticated"), ("system:serviceaccounts",), ()):
        assert denials(POLICY, request("InferenceEndpointConfig", "llama", groups=groups), old, new) is None
    assert denials(POLICY, request("InferenceEndpointConfig", "llama", groups=REFRESH), old, new)
    assert denials(POLICY, Request("UPDATE", "Pod", "", "pods", NAMESPACE, "p", groups=REFRESH), {}, {}) is None


def test_the_binding_denies_and_the_objects_validate_against_kubernetes_schemas() -> None:
    import kubernetes_validate

    assert BINDING["spec"] == {"policyName": POLICY["metadata"]["name"], "validationActions": ["Deny"]}
    assert POLICY["spec"]["failurePolicy"] == "Fail"
    for obj in (POLICY, BINDING, *rbac_objects([WARM, S3, JUMPSTART])):
        kubernetes_validate.validate(obj, desired_version="1.33", strict=True)


@pytest.mark.parametrize("version", ["v1", "2026-11-29", "1.2.0", "V_9", "a" * 63, "a" * 64, ".hidden", "-x", "a/b",
                                     "..", "", "v 1", "v1\n"])
def test_the_policy_s_version_names_are_the_refresh_s(version: str) -> None:
    """The same names for the API server's RE2 and the function, a final newline (an S3 key may hold one) refused by
    both: RE2 anchors ``$`` at the end of the text, the function's patterns end in ``\\Z``."""
    assert bool(re.fullmatch(VERSION_PATTERN[1:-1], version)) == events.valid_version(version)
