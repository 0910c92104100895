"""A node-cached model reads its verified copy the way AWS documents local NVMe, and nowhere else."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hyperwarm.functions.node_cache import layout
from rehearsal.core import Assembly, Finding, rule

RULE = "serving.node-cache-volume"


@rule(RULE, source="https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-deploy-nvme.html")
def node_cached_models_read_only_verified_copies(assembly: Assembly) -> Iterator[Finding]:
    """Every ``InferenceEndpointConfig`` with ``modelSourceType: kubernetesVolume`` follows AWS's NVMe page: a
    ``kubernetes.volumes`` entry named like ``worker.modelVolumeMount.name`` (else the operator rejects it with
    ``KubernetesVolumeValidationFailed``) and no ``modelLocation`` (a validation error). For hyperwarm's node cache
    that volume is a hostPath of type ``Directory`` (a pod on a node without the copy does not start: Kubernetes'
    hostPath types) under ``/hyperwarm/<model>/<version>``, and the pods require that version's ready label (required
    node affinity: no pod runs where the filler has not verified the copy), with the operator's own weights cache off
    (a second copy of every version on the NVMe). Each deployment also has its model's filler beside it."""
    fillers = {(stack, obj["metadata"].get("name")) for stack, _, obj in assembly.kubernetes_objects()
               if obj.get("kind") == "DaemonSet"}
    for stack, logical_id, obj in assembly.kubernetes_objects():
        spec = obj.get("spec") or {}
        if obj.get("kind") != "InferenceEndpointConfig" or \
                (spec.get("modelSourceConfig") or {}).get("modelSourceType") != "kubernetesVolume":
            continue
        where = f"{logical_id}/InferenceEndpointConfig/{obj['metadata'].get('name')}"
        for problem in _problems(spec, stack, fillers):
            yield Finding(RULE, stack, where, problem)


def _problems(spec: dict[str, Any], stack: str, fillers: set[tuple[str, Any]]) -> Iterator[str]:
    source = spec.get("modelSourceConfig") or {}
    if "modelLocation" in source:
        yield "modelLocation is set with a kubernetesVolume source: the operator rejects it"
    mount = ((spec.get("worker") or {}).get("modelVolumeMount") or {}).get("name")
    volume = next((v for v in (spec.get("kubernetes") or {}).get("volumes") or [] if v.get("name") == mount), None)
    if volume is None:
        yield f"no kubernetes.volumes entry named {mount!r} (worker.modelVolumeMount.name): KubernetesVolumeValidationFailed"
        return
    host = volume.get("hostPath") or {}
    found = layout.model_and_version(str(host.get("path") or ""))
    if found is None or host.get("type") != "Directory":
        yield (f"the model volume is not a node-cache directory of type Directory ({host}): a pod on a node without "
               "the copy would start on an empty or missing directory")
        return
    model, version = found
    terms = ((spec.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get(
        "nodeSelectorTerms") or []
    if not terms or not all(layout.ready_requirement(model, version) in (t.get("matchExpressions") or [])
                            for t in terms):
        yield (f"the pods do not require {layout.ready_label(model, version)}: they could start where the copy of "
               f"{version} is not verified")
    if ((spec.get("modelCacheConfig") or {}).get("weightsCache") or {}).get("enabled"):
        yield "the operator's weights cache is on beside the node cache: a second copy of every version"
    if (stack, layout.filler_name(model)) not in fillers:
        yield f"no filler {layout.filler_name(model)} in the stack: no node would ever hold {version}"
