"""Changes a deployed stack cannot survive: this synth's templates against the ones deployed before.

Each template can be valid and still fail, or destroy what it must keep, as an update of what is
deployed. Three such updates, each from an AWS document, are found by comparing two assemblies
(the previous one from `cdk.out`, a kept directory or CloudFormation; see `stacks/baseline.py`):

- `changes.replacement`: a HyperPod cluster, EKS cluster or SageMaker endpoint whose create-only
  property changes, directly or through a resource it names that is replaced itself (a subnet whose
  CIDR changes, a security group whose description changes), or whose logical id disappears.
  CloudFormation replaces the resource: a new GPU cluster or endpoint, the old one deleted.
  Create-only properties are the resource provider schemas' `createOnlyProperties`, read from the
  schemas cfn-lint ships (CloudFormation "Update behaviors of stack resources":
  https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/using-cfn-updating-stacks-update-behaviors.html).
- `changes.autoscaled-variant`: an endpoint update that changes the instance type of, or removes, a
  variant with a registered scalable target. UpdateEndpoint fails until the target is deregistered,
  and CloudFormation updates the endpoint before it deletes the removed target (SageMaker "Update
  endpoints that use auto scaling": https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-scaling-update.html).
- `changes.export-in-use`: an export a deployed stack imports that this update removes or whose value
  it changes (its resource is replaced). The producer deploys first and CloudFormation refuses it
  ("Export ... cannot be deleted as it is in use":
  https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/using-cfn-stack-exports.html).

What cannot be read (a protected type without a schema, a scaled variant whose configuration the
templates do not show) is a finding too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from rehearsal.core import Assembly, Finding, at_pointer, direct_dependencies, ref_target, resource_schema

PROTECTED = {
    "AWS::SageMaker::Cluster": "the HyperPod cluster and its GPU nodes",
    "AWS::EKS::Cluster": "the EKS cluster and everything running on it",
    "AWS::SageMaker::Endpoint": "the endpoint (a new one under a new name, the old one deleted)",
}
"""Resource types a change must never replace, with what replacing them costs."""

def create_only_properties(resource_type: str) -> tuple[str, ...] | None:
    """The type's ``createOnlyProperties`` (pointers like ``/properties/VpcConfig``); None without a schema."""
    schema = resource_schema(resource_type)
    return None if schema is None else tuple(schema.get("createOnlyProperties", ()))


def _short(value: Any, limit: int = 120) -> str:
    text = "absent" if value is None else json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _references(value: Any) -> set[str]:
    """Logical ids a value names (``Ref``, ``Fn::GetAtt``, ``Fn::Sub``)."""
    return direct_dependencies({"Value": value})


def replacements(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, str]:
    """Logical id -> why CloudFormation replaces it, for resources of one stack in both templates: a
    changed type, a changed create-only property, or one that names a resource replaced itself."""
    old, new = before.get("Resources", {}), after.get("Resources", {})
    common = sorted(set(old) & set(new))
    replaced = {i: f"its type changes from {old[i].get('Type')} to {new[i].get('Type')}"
                for i in common if old[i].get("Type") != new[i].get("Type")}
    changed = True
    while changed:  # a replaced subnet replaces what names it in a create-only property, and so on
        changed = False
        for logical_id in common:
            if logical_id not in replaced:
                why = _replacing_change(old[logical_id], new[logical_id], new, replaced)
                if why:
                    replaced[logical_id], changed = why, True
    return replaced


def _replacing_change(old: Mapping[str, Any], new: Mapping[str, Any], resources: Mapping[str, Any],
                      replaced: Mapping[str, str]) -> str | None:
    for pointer in create_only_properties(new.get("Type", "")) or ():
        field = pointer.removeprefix("/properties/").replace("/", ".")
        was, now = at_pointer(old.get("Properties", {}), pointer), at_pointer(new.get("Properties", {}), pointer)
        if was != now:
            return f"{field} changes from {_short(was)} to {_short(now)}"
        moved = sorted(_references(now) & set(replaced))
        if moved:
            named = moved[0]
            return f"{field} names {named} ({resources[named].get('Type')}), which is replaced: {replaced[named]}"
    return None


def protected_replacements(previous: Assembly, current: Assembly) -> Iterator[Finding]:
    """A HyperPod cluster, EKS cluster or endpoint of a previous template that this synth replaces or drops."""
    for stack in sorted(set(previous.templates) & set(current.templates)):
        before, after = previous.templates[stack], current.templates[stack]
        replaced = replacements(before, after)
        for logical_id, resource in before.get("Resources", {}).items():
            kind = resource.get("Type", "")
            cost = PROTECTED.get(kind)
            if cost is None:
                continue
            if logical_id not in after.get("Resources", {}):
                yield Finding("changes.replacement", stack, logical_id,
                              f"{kind} is no longer in the template (its logical id changed, or it was removed): "
                              f"CloudFormation would delete {cost}")
            elif create_only_properties(kind) is None:
                yield Finding("changes.replacement", stack, logical_id,
                              f"cannot tell whether {kind} is replaced: cfn-lint has no resource schema for it")
            elif logical_id in replaced:
                yield Finding("changes.replacement", stack, logical_id,
                              f"{kind}: {replaced[logical_id]} -- a create-only property (the resource schema's "
                              f"createOnlyProperties): CloudFormation would replace {cost}")


def _endpoint_variants(assembly: Assembly, endpoint_name: str) -> dict[str, Any] | None:
    """Variant name -> instance type (None if serverless) of the endpoint created under that name, None
    when no template creates it; ValueError when its EndpointConfig cannot be read."""
    for stack, _, endpoint in assembly.resources("AWS::SageMaker::Endpoint"):
        if endpoint.get("Properties", {}).get("EndpointName") != endpoint_name:
            continue
        config_id = ref_target(endpoint["Properties"].get("EndpointConfigName"))
        config = assembly.templates[stack].get("Resources", {}).get(config_id or "", {})
        if config.get("Type") != "AWS::SageMaker::EndpointConfig":
            raise ValueError(f"endpoint {endpoint_name!r} names an EndpointConfig no template of the stack holds")
        return {v.get("VariantName"): v.get("InstanceType")
                for v in config.get("Properties", {}).get("ProductionVariants", [])}
    return None


def autoscaled_variant_changes(previous: Assembly, current: Assembly) -> Iterator[Finding]:
    """An update that changes the instance type of, or removes, a variant with a scalable target."""
    for stack, logical_id, target in previous.resources("AWS::ApplicationAutoScaling::ScalableTarget"):
        props = target.get("Properties", {})
        if props.get("ScalableDimension") != "sagemaker:variant:DesiredInstanceCount" or stack not in current.templates:
            continue  # an inference component's copies scale on whatever instances the variant has
        resource_id = props.get("ResourceId")
        parts = resource_id.split("/") if isinstance(resource_id, str) else []
        if len(parts) != 4 or parts[0] != "endpoint" or parts[2] != "variant":
            yield Finding("changes.autoscaled-variant", stack, logical_id,
                          f"cannot tell which variant ResourceId {_short(resource_id)} scales (not a literal "
                          "endpoint/<name>/variant/<variant>): an update that changes its instance type would fail")
            continue
        endpoint, variant = parts[1], parts[3]
        try:
            was, now = _endpoint_variants(previous, endpoint), _endpoint_variants(current, endpoint)
        except ValueError as unreadable:
            yield Finding("changes.autoscaled-variant", stack, logical_id, f"cannot tell: {unreadable}")
            continue
        if was is None or variant not in was:
            yield Finding("changes.autoscaled-variant", stack, logical_id,
                          f"cannot tell: the previous templates hold no variant {variant!r} of endpoint {endpoint!r}")
            continue
        if now is None:  # the endpoint goes (or is renamed): DeleteEndpoint deregisters its targets itself
            continue
        two_steps = (f"deploy first with autoscaling removed from variant {variant!r} (CloudFormation "
                     "deregisters it, the instances stay), then make the change")
        if variant not in now:
            yield Finding("changes.autoscaled-variant", stack, logical_id,
                          f"removes variant {variant!r} of endpoint {endpoint!r}, which autoscaling still scales: "
                          f"UpdateEndpoint fails while its scalable target is registered; {two_steps}")
        elif now[variant] != was[variant]:
            yield Finding("changes.autoscaled-variant", stack, logical_id,
                          f"changes the instance type of variant {variant!r} of endpoint {endpoint!r} from "
                          f"{was[variant]} to {now[variant]} while autoscaling scales it: UpdateEndpoint fails "
                          f"while its scalable target is registered; {two_steps} and autoscaling back")


def _imports(assembly: Assembly) -> dict[str, set[str]]:
    """Export name -> stacks that import it (``Fn::ImportValue`` of a literal name)."""
    found: dict[str, set[str]] = {}

    def walk(stack: str, value: Any) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("Fn::ImportValue"), str):
                found.setdefault(value["Fn::ImportValue"], set()).add(stack)
            for item in value.values():
                walk(stack, item)
        elif isinstance(value, list):
            for item in value:
                walk(stack, item)

    for stack, template in assembly.templates.items():
        walk(stack, template)
    return found


def exports_in_use(previous: Assembly, current: Assembly) -> Iterator[Finding]:
    """An export a previously deployed stack imports that this update removes or changes."""
    imported = _imports(previous)
    for stack in sorted(set(previous.templates) & set(current.templates)):
        before, after = previous.templates[stack], current.templates[stack]
        replaced = replacements(before, after)
        exported = {o.get("Export", {}).get("Name"): (i, o.get("Value")) for i, o in after.get("Outputs", {}).items()}
        for output_id, output in before.get("Outputs", {}).items():
            name = output.get("Export", {}).get("Name")
            readers = sorted(imported.get(name, set()) - {stack}) if isinstance(name, str) else []
            if not readers:
                continue
            if name not in exported:
                change = "removes"
            else:
                moved = sorted(_references(exported[name][1]) & set(replaced))
                if not moved:
                    continue
                change = f"changes ({moved[0]} is replaced: {replaced[moved[0]]})"
            yield Finding("changes.export-in-use", stack, output_id,
                          f"{change} export {name!r}, which deployed stack(s) {', '.join(readers)} import: "
                          f"CloudFormation refuses the update (export in use); deploy {', '.join(readers)} without "
                          "it first (cdk deploy <stack> --exclusively), or keep the export one more deploy")


def compare(previous: Assembly, current: Assembly) -> list[Finding]:
    """Every change of ``current`` that the deployed ``previous`` cannot survive."""
    return [*protected_replacements(previous, current), *autoscaled_variant_changes(previous, current),
            *exports_in_use(previous, current)]
