"""Every model version a stack's manifest sets waits for the deploy guard, which knows that version."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rehearsal.core import Assembly, Finding, direct_dependencies, rule, text_of

RULE = "refresh.versions-guarded"
GUARD = "Custom::RefreshGuard"


def _version(obj: dict[str, Any]) -> Any:
    """The model version a deployment object sets (``spec.modelVersion``; a JumpStartModel's ``spec.model``'s)."""
    spec = obj.get("spec") or {}
    return (spec.get("model") or {}).get("modelVersion") if obj.get("kind") == "JumpStartModel" \
        else spec.get("modelVersion")


@rule(RULE, source="https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-attribute-dependson.html")
def model_versions_are_guarded(assembly: Assembly) -> Iterator[Finding]:
    """Each ``InferenceEndpointConfig`` and ``JumpStartModel`` a stack applies is a target of a ``Custom::RefreshGuard``
    in that stack, at the version the object sets, and the manifest resource depends on that guard: CloudFormation
    creates or updates a resource only after those it ``DependsOn``, so the guard (:mod:`hyperwarm.refresh.guard`)
    refuses a move back before the object changes. Whatever moves the version (the refresh, or only a deploy: a Hub
    revision, an FSx or JumpStart version), a deploy never sets an older one unseen."""
    guards: dict[str, dict[str, tuple[str, Any]]] = {}  # stack -> target id -> (guard's logical id, version)
    for stack, logical_id, resource in assembly.resources(GUARD):
        for target in (resource.get("Properties") or {}).get("Targets") or []:
            guards.setdefault(stack, {})[text_of(target.get("Id"))] = (logical_id, target.get("Version"))
    for stack, logical_id, obj in assembly.kubernetes_objects():
        kind = obj.get("kind")
        if kind not in ("InferenceEndpointConfig", "JumpStartModel"):
            continue
        name, version = (obj.get("metadata") or {}).get("name"), _version(obj)
        where = f"{logical_id}/{kind}/{name}"
        found = [(guard, v) for target, (guard, v) in guards.get(stack, {}).items() if target.endswith(f"/{kind}/{name}")]
        if not found:
            yield Finding(RULE, stack, where, f"no deploy guard in {stack} names {kind} {name}: a deploy could set an "
                          f"older version than the one serving ({version}) unseen")
            continue
        (guard, guarded), *_ = found
        if guarded != version:
            yield Finding(RULE, stack, where, f"the deploy guard {guard} checks version {guarded!r} but the object "
                          f"sets {version!r}: the guard passes a version the deploy does not set")
        resource = assembly.templates[stack]["Resources"][logical_id]
        if guard not in direct_dependencies(resource):
            yield Finding(RULE, stack, where, f"the manifest does not depend on the deploy guard {guard}: "
                          "CloudFormation may apply it before the guard refused a move back")
