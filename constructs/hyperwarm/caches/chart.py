"""The cdk8s chart of cached models: every object of :mod:`hyperwarm.caches.objects`, in apply order.

The operator's kinds are built from the types generated from its CRDs (``hyperwarm.caches.k8s``), the built-in
kinds (Namespace, PriorityClass, DaemonSet) as plain ``ApiObject``s. The same chart serves
:class:`~hyperwarm.caches.CachedModels` (applied to the cluster) and an app that writes the manifests to files
for review or GitOps.
"""

from __future__ import annotations

import typing
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from constructs import Construct

from hyperwarm._internal.extras import missing_extra
from hyperwarm.caches import pod_security
from hyperwarm.caches.cold_start import ColdStart
from hyperwarm.caches.fsx import file_system_readers
from hyperwarm.caches.hub import token_secret
from hyperwarm.caches.jumpstart import is_jumpstart
from hyperwarm.caches.jumpstart_objects import jumpstart_model
from hyperwarm.caches.node_cache import code_config_map, filler_access, filler_daemonset
from hyperwarm.caches.objects import inference_endpoint_config, prepull_daemonset, priority_class
from hyperwarm.caches.props import DEFAULT_FILLER_IMAGE, MANAGED_BY, CachedModelSpec
from hyperwarm.caches.typed import bind
from hyperwarm.cluster.instance_group import NodeTaint

try:
    import cdk8s
except ModuleNotFoundError as error:
    raise missing_extra(error, "caches", "hyperwarm.caches (CachedModels, CachesChart)") from None

MODEL_LABEL = "hyperwarm.io/model"


@dataclass(frozen=True)
class CachesChartProps:
    """What the chart renders: the models, where, and the names only the cluster knows."""

    models: Sequence[CachedModelSpec]
    region: str
    """The default region of the models' buckets (a model's ``source.region`` wins)."""
    cluster_name: str
    """The EKS cluster's name, for exporter triggers (a token in a stack)."""
    namespace: str = "hyperwarm-models"
    """Default: hyperwarm-models."""
    labels: Mapping[str, str] = field(default_factory=lambda: dict(MANAGED_BY))
    """Labels of every object; a model's objects also get ``hyperwarm.io/model``. Default: managed-by hyperwarm."""
    group_taints: Mapping[str, Sequence[NodeTaint]] = field(default_factory=dict)
    """Instance group -> its taints, which the node agents (pre-pull, node-cache fill) tolerate. Default: none."""
    filler_image: str = DEFAULT_FILLER_IMAGE
    """The node-cache fillers' image (Python 3 with boto3). Default: AWS's Lambda base image for Python 3.13."""
    nvme_headroom_percent: int = 10
    """Share of each node's NVMe a filler leaves free. Default: 10."""
    instance_types: Mapping[str, str] = field(default_factory=dict)
    """Instance group -> its instance type, which a JumpStart model's ``server.instanceType`` names (required for
    each JumpStart model's group). Default: none."""
    group_nodes: Mapping[str, int] = field(default_factory=dict)
    """Instance group -> its node count: every node of a cached model's groups reads an FSx model at once (the
    operator fills their caches), which sizes the startup probe (:func:`hyperwarm.caches.fsx.file_system_readers`).
    Default: none (a model's ``max_replicas``)."""
    jumpstart_gated_role_arn: str | None = None
    """The role gated JumpStart models download with (``spec.model.gatedModelDownloadRole``;
    :class:`~hyperwarm.caches.CachedModels` creates it). Default: none (the add-on's own, if configured)."""


def cache_objects(props: CachesChartProps) -> list[dict[str, Any]]:
    """Every Kubernetes object of the models' caches, in apply order, as JSON; empty without models."""
    if not props.models:
        return []
    ns, labels = props.namespace, dict(props.labels)
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}}]
    # A Hub source's token Secret, empty: filled at deploy time from Secrets Manager (hyperwarm.caches.hub).
    objects += [secret for m in props.models
                if (secret := token_secret(m, namespace=ns, labels={**labels, MODEL_LABEL: m.name}))]
    daemonset_images: dict[str, set[str]] = defaultdict(set)
    for model in props.models:
        for group in model.instance_groups:
            daemonset_images[group].update(model.daemonset_images)
    node_cached = [m for m in props.models if m.weights_cache == "node"]
    if any(daemonset_images.values()) or node_cached:
        objects.append(priority_class(labels))
    if node_cached:
        code = code_config_map(ns, labels)
        objects += [code, *filler_access(ns, labels)]
        objects += [filler_daemonset(m, namespace=ns, labels={**labels, MODEL_LABEL: m.name}, region=props.region,
                                     image=props.filler_image, code=code["metadata"]["name"],
                                     headroom_percent=props.nvme_headroom_percent,
                                     group_taints=tuple(t for g in m.instance_groups
                                                        for t in props.group_taints.get(g, ())))
                    for m in node_cached]
    for group, images in sorted(daemonset_images.items()):
        if images:
            objects.append(prepull_daemonset(group, sorted(images), namespace=ns, labels=labels,
                                             group_taints=props.group_taints.get(group, ())))
    cold_start = ColdStart(fsx_readers=file_system_readers(props.models, props.group_nodes))
    for model in props.models:
        model_labels = {**labels, MODEL_LABEL: model.name}
        if is_jumpstart(model):
            if model.instance_group not in props.instance_types:
                raise ValueError(f"model {model.name!r}: instance_types has no type for its instance group "
                                 f"{model.instance_group!r} (a JumpStartModel names its instance type)")
            objects.append(jumpstart_model(model, namespace=ns, labels=model_labels,
                                           instance_type=props.instance_types[model.instance_group],
                                           cluster_name=props.cluster_name,
                                           gated_role_arn=props.jumpstart_gated_role_arn))
            continue
        objects.append(inference_endpoint_config(model, namespace=ns, region=props.region, labels=model_labels,
                                                 cluster_name=props.cluster_name, cold_start=cold_start))
    # Pod Security admission at the highest level the namespace's pods meet (hyperwarm.caches.pod_security).
    objects[0]["metadata"]["labels"] = {**labels, **pod_security.labels(pod_security.enforce_level(objects[1:]))}
    return objects


def _generated(kind: str) -> Any:
    """The class generated from the operator's CRD for ``kind`` (loaded on first use: a large jsii assembly)."""
    from hyperwarm.caches import k8s

    return getattr(k8s, kind)


class CachesChart(cdk8s.Chart):
    """The cache objects as a cdk8s chart (names kept as given)."""

    def __init__(self, scope: Construct, id: str, props: CachesChartProps) -> None:
        super().__init__(scope, id, disable_resource_name_hashes=True)
        for obj in cache_objects(props):
            name = obj["metadata"]["name"]
            object_id = f"{obj['kind']}-{name}"
            if obj["apiVersion"].startswith("inference.sagemaker.aws.amazon.com/"):
                cls = _generated(obj["kind"])
                spec_hint = _spec_type(cls)
                cls(self, object_id, metadata=cdk8s.ApiObjectMetadata(**_metadata(obj["metadata"])),
                    spec=bind(spec_hint, obj["spec"], f"{obj['kind']}({name}).spec"))
                continue
            api_object = cdk8s.ApiObject(self, object_id, api_version=obj["apiVersion"], kind=obj["kind"],
                                         metadata=obj["metadata"])
            for key, value in obj.items():
                if key not in ("apiVersion", "kind", "metadata"):
                    api_object.add_json_patch(cdk8s.JsonPatch.add(f"/{key}", value))


def _spec_type(cls: type) -> Any:
    return typing.get_type_hints(vars(cls)["__init__"])["spec"]


def _metadata(meta: Mapping[str, Any]) -> dict[str, Any]:
    return {"name": meta["name"], "namespace": meta.get("namespace"), "labels": meta.get("labels"),
            "annotations": meta.get("annotations")}
