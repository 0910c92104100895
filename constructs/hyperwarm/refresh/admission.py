"""What the cache refresh's Kubernetes identity may change, field by field: a ValidatingAdmissionPolicy.

RBAC names the objects (:func:`~hyperwarm.refresh.access.rbac_objects`: ``get``/``patch`` by name) but cannot narrow
a patch: with it alone the refresh's role could set a worker image, environment, service account or any hostPath.
This policy, bound with ``Deny`` and matched the way the cluster knows the identity (the Kubernetes group its EKS
access entries map the refresh and rollout-step roles to; EKS generates their user names per session), admits only
what the refresh code patches (``targets/hyperpod.py``, ``targets/warm.py``), and only values of the refreshed prefix:

- an S3-sourced ``InferenceEndpointConfig``: ``modelVersion``, ``modelSourceConfig.modelLocation``
  (``<prefix>/<modelVersion>``) and ``modelSourceConfig.s3Storage.bucketName`` (the refresh's bucket);
- a ``JumpStartModel``: ``model.modelVersion`` (``x.y.z``);
- a node-cached ``InferenceEndpointConfig``: ``modelVersion``, the model volume's hostPath path
  (``<hostPath>/hyperwarm/<model>/<modelVersion>``, type ``Directory``) and, in each required node-selector term,
  the ``Exists`` requirement on the model's ready label; every other volume and affinity term as it was;
- the model's filler DaemonSet: its pod template's versions annotation, listing versions of the prefix.

Metadata (labels, annotations, finalizers, owners) stays as it was. The refresh creates and deletes nothing (the
operator builds its own caches): creates and deletes of the operator's kinds and of DaemonSets are refused.
Objects of other kinds get no write right from RBAC and are not matched here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from hyperwarm.functions.cache_refresh import contract
from hyperwarm.functions.node_cache import layout

OPERATOR_GROUP = "inference.sagemaker.aws.amazon.com"
VERSION_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"
"""A version folder name the refresh acts on (``events.valid_version``; a test holds the two together)."""
JUMPSTART_VERSION_PATTERN = r"^\d{1,4}\.\d{1,4}\.\d{1,4}$"
"""What a ``JumpStartModel``'s ``model.modelVersion`` takes (``targets.hyperpod``)."""
TEMPLATE_GENERATION = "deprecated.daemonset.template.generation"
"""The annotation the API server raises on a DaemonSet whose pod template changed, before validation."""
_REGION = "[a-z0-9-]{1,32}"


def _lit(value: Any) -> str:
    """A CEL literal (CEL string and list literals read as JSON's)."""
    return json.dumps(value)


def _or_empty(path: str, empty: str = "{}") -> str:
    """``path`` when set, else an empty map (or list): absent and empty compare alike."""
    parent, _, field = path.rpartition(".")
    return f"(has({parent}.{field}) ? {path} : {empty})"


def _same_except(new: str, old: str, changeable: Sequence[str]) -> str:
    """Every key of the two maps but ``changeable`` is present in both with equal values, or in neither."""
    keys = _lit(sorted(changeable))
    return (f"{new}.all(k, k in {keys} || (k in {old} && {new}[k] == {old}[k])) && "
            f"{old}.all(k, k in {keys} || k in {new})")


def _check(applies: str, expression: str, message: str) -> dict[str, Any]:
    """One validation that holds for requests ``applies`` does not cover (``||`` absorbs their errors)."""
    return {"expression": f"!({applies}) || ({expression})", "message": message, "reason": "Forbidden"}


def admission_objects(group: str, hyperpod: Mapping[str, Sequence[contract.HyperPodTarget]], bucket: str | None,
                      *, name: str, labels: Mapping[str, str]) -> list[dict[str, Any]]:
    """The policy and its binding for ``group`` refreshing ``hyperpod`` (prefix -> its targets) from ``bucket``
    (None: any bucket, for a name known only at deploy time)."""
    keys: list[str] = []
    checks: list[dict[str, Any]] = []
    for prefix, targets in sorted(hyperpod.items()):
        for target in targets:
            key = _key(target.resource, target.namespace, target.name)
            keys.append(key)
            applies = f"variables.key == {_lit(key)}"
            if target.node_cache is not None:
                filler = _key("DaemonSet", target.namespace, layout.filler_name(target.node_cache.model))
                keys.append(filler)
                checks += _node_cached(applies, key, target.node_cache)
                checks += _filler(f"variables.key == {_lit(filler)}", filler, prefix, bucket)
            elif target.resource == "JumpStartModel":
                checks += _jumpstart(applies, key)
            else:
                checks += _s3_sourced(applies, key, prefix, bucket)
    validations = [
        {"expression": "request.operation == 'UPDATE'", "reason": "Forbidden",
         "message": "the cache refresh creates and deletes nothing: it repoints its deployments and their "
                    "node-cache fillers, and the operator builds its own caches"},
        _check("request.operation == 'UPDATE'", f"variables.key in {_lit(sorted(keys))}",
               "the cache refresh may change only its own targets: " + ", ".join(sorted(keys))),
        _check("request.operation == 'UPDATE'", " && ".join([
            f"{_or_empty('object.metadata.labels')} == {_or_empty('oldObject.metadata.labels')}",
            _same_except(_or_empty("object.metadata.annotations"), _or_empty("oldObject.metadata.annotations"),
                         [TEMPLATE_GENERATION]),
            f"{_or_empty('object.metadata.finalizers', '[]')} == {_or_empty('oldObject.metadata.finalizers', '[]')}",
            f"{_or_empty('object.metadata.ownerReferences', '[]')} == "
            f"{_or_empty('oldObject.metadata.ownerReferences', '[]')}"]),
            "the cache refresh may not change labels, annotations, finalizers or owners"),
        *checks,
    ]
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [
                {"apiGroups": [OPERATOR_GROUP], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE", "DELETE"],
                 "resources": ["*"]},
                {"apiGroups": ["apps"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE", "DELETE"],
                 "resources": ["daemonsets"]}]},
            "matchConditions": [{"name": "cache-refresh",
                                 "expression": f"has(request.userInfo.groups) && {_lit(group)} in request.userInfo.groups"}],
            "variables": [{"name": "key", "expression": "request.kind.kind + '/' + request.namespace + '/' + request.name"}],
            "validations": validations,
        },
    }
    binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": name, "labels": dict(labels)},
               "spec": {"policyName": name, "validationActions": ["Deny"]}}
    return [policy, binding]


def _key(kind: str, namespace: str, name: str) -> str:
    return f"{kind}/{namespace}/{name}"


def _version(applies: str, path: str, pattern: str, what: str) -> dict[str, Any]:
    return _check(applies, f"has({path}) && {path}.matches({_lit(pattern)})",
                  f"{what}: the version must match {pattern}")


def _s3_sourced(applies: str, key: str, prefix: str, bucket: str | None) -> list[dict[str, Any]]:
    source, old_source = "object.spec.modelSourceConfig", "oldObject.spec.modelSourceConfig"
    s3, old_s3 = _or_empty(f"{source}.s3Storage"), _or_empty(f"{old_source}.s3Storage")
    at = [f"{_or_empty(f'{source}.modelLocation', _lit(''))} == {_lit(prefix + '/')} + object.spec.modelVersion"]
    if bucket is not None:
        at.append(f"has({source}.s3Storage) && has({source}.s3Storage.bucketName) && "
                  f"{source}.s3Storage.bucketName == {_lit(bucket)}")
    return [
        _check(applies, " && ".join([
            _same_except("object.spec", "oldObject.spec", ["modelSourceConfig", "modelVersion"]),
            _same_except(_or_empty(source), _or_empty(old_source), ["modelLocation", "s3Storage"]),
            _same_except(s3, old_s3, ["bucketName"])]),
            f"{key}: the cache refresh may change only modelVersion, modelSourceConfig.modelLocation and "
            "modelSourceConfig.s3Storage.bucketName"),
        _version(applies, "object.spec.modelVersion", VERSION_PATTERN, key),
        _check(applies, " && ".join(at),
               f"{key}: the model location must be {prefix}/<modelVersion>"
               + (f" in bucket {bucket}" if bucket is not None else "")),
    ]


def _jumpstart(applies: str, key: str) -> list[dict[str, Any]]:
    return [
        _check(applies, " && ".join([
            _same_except("object.spec", "oldObject.spec", ["model"]),
            _same_except(_or_empty("object.spec.model"), _or_empty("oldObject.spec.model"), ["modelVersion"])]),
            f"{key}: the cache refresh may change only model.modelVersion"),
        _version(applies, "object.spec.model.modelVersion", JUMPSTART_VERSION_PATTERN, key),
    ]


def _node_cached(applies: str, key: str, cache: contract.NodeCache) -> list[dict[str, Any]]:
    model_volume, directory = _lit(layout.MODEL_VOLUME), layout.model_dir(cache.host_path, cache.model)
    label = _lit(layout.label_prefix(cache.model))
    required = "requiredDuringSchedulingIgnoredDuringExecution"

    def volumes(obj: str) -> str:
        return f"(has({obj}.spec.kubernetes) && has({obj}.spec.kubernetes.volumes) ? {obj}.spec.kubernetes.volumes : [])"

    def rule(obj: str) -> str:
        return f"(has({obj}.spec.nodeAffinity) && has({obj}.spec.nodeAffinity.{required}) ? " \
               f"{obj}.spec.nodeAffinity.{required} : {{}})"

    def terms(obj: str) -> str:
        return f"(has({rule(obj)}.nodeSelectorTerms) ? {rule(obj)}.nodeSelectorTerms : [])"

    expressions = "(has(t.matchExpressions) ? t.matchExpressions : [])"
    fields = "(has(t.matchFields) ? t.matchFields : [])"
    others = f"{expressions}.filter(e, !e.key.startsWith({label}))"
    return [
        _check(applies, " && ".join([
            _same_except("object.spec", "oldObject.spec", ["kubernetes", "modelVersion", "nodeAffinity"]),
            _same_except(_or_empty("object.spec.kubernetes"), _or_empty("oldObject.spec.kubernetes"), ["volumes"]),
            _same_except(_or_empty("object.spec.nodeAffinity"), _or_empty("oldObject.spec.nodeAffinity"), [required]),
            _same_except(rule("object"), rule("oldObject"), ["nodeSelectorTerms"])]),
            f"{key}: the cache refresh may change only modelVersion, the model volume's path and the ready label "
            "the pods require"),
        _version(applies, "object.spec.modelVersion", VERSION_PATTERN, key),
        _check(applies, " && ".join([
            f"{volumes('object')}.filter(v, v.name != {model_volume}) == "
            f"{volumes('oldObject')}.filter(v, v.name != {model_volume})",
            f"{volumes('object')}.exists_one(v, v.name == {model_volume})",
            f"{volumes('object')}.all(v, v.name != {model_volume} || (v.all(k, k in ['hostPath', 'name']) && "
            f"v.hostPath.all(k, k in ['path', 'type']) && v.hostPath.type == 'Directory' && "
            f"v.hostPath.path == {_lit(directory + '/')} + object.spec.modelVersion))"]),
            f"{key}: the only volume the cache refresh may change is {layout.MODEL_VOLUME}, a Directory hostPath "
            f"{directory}/<modelVersion>"),
        _check(applies, " && ".join([
            f"size({terms('object')}) == size({terms('oldObject')})",
            f"{terms('object')}.map(t, {fields}) == {terms('oldObject')}.map(t, {fields})",
            f"{terms('object')}.map(t, {others}) == {terms('oldObject')}.map(t, {others})",
            f"{terms('object')}.all(t, {expressions}.exists_one(e, e.key.startsWith({label})) && "
            f"{expressions}.all(e, !e.key.startsWith({label}) || (e.operator == 'Exists' && !has(e.values))))"]),
            f"{key}: in the node affinity the cache refresh may change only the required "
            f"{layout.label_prefix(cache.model)}* ready label (operator Exists), one in each node-selector term"),
    ]


def _filler(applies: str, key: str, prefix: str, bucket: str | None) -> list[dict[str, Any]]:
    template, old_template = "object.spec.template", "oldObject.spec.template"
    annotations = f"{template}.metadata.annotations"
    entry = (r'\{"bucket":"' + (re.escape(bucket) if bucket is not None else "[a-z0-9.-]{3,63}") + r'","location":"'
             + re.escape(prefix) + "/" + VERSION_PATTERN[1:-1] + r'",("manifest":"[0-9a-f]{64}",)?'
             + r'("region":"' + _REGION + r'",)?"version":"'
             + VERSION_PATTERN[1:-1] + r'"\}')
    listed = r"^\[" + entry + "(," + entry + r")?\]$"
    versions = _lit(layout.VERSIONS_ANNOTATION)
    return [
        _check(applies, " && ".join([
            _same_except("object.spec", "oldObject.spec", ["template"]),
            _same_except(_or_empty(template), _or_empty(old_template), ["metadata"]),
            _same_except(_or_empty(f"{template}.metadata"), _or_empty(f"{old_template}.metadata"), ["annotations"]),
            _same_except(_or_empty(annotations), _or_empty(f"{old_template}.metadata.annotations"),
                         [layout.VERSIONS_ANNOTATION])]),
            f"{key}: the cache refresh may change only the pod template's {layout.VERSIONS_ANNOTATION} annotation"),
        _check(applies, f"has({annotations}) && {versions} in {annotations} && "
                                    f"{annotations}[{versions}].matches({_lit(listed)})",
               f"{key}: {layout.VERSIONS_ANNOTATION} must list one or two versions of {prefix}"
               + (f" in bucket {bucket}" if bucket is not None else "")),
    ]
