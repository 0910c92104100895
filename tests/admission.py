"""A ValidatingAdmissionPolicy evaluated the way the API server does, with cel-python: the request must match the
policy's resource rules (operation, API group, resource) and every match condition; then each validation's
expression runs with ``request``, ``object``, ``oldObject`` and ``variables``. An expression that raises denies, as
``failurePolicy: Fail`` does."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import celpy

_ENV = celpy.Environment()


@functools.lru_cache(maxsize=512)  # the same few expressions run for every patch of every modelled rollout
def _program(expression: str) -> Any:
    return _ENV.program(_ENV.compile(expression))


@dataclass(frozen=True)
class Request:
    """What the API server hands the policy (``request``), for an object of ``kind`` in ``group``."""

    operation: str
    kind: str
    group: str
    resource: str
    namespace: str
    name: str
    username: str = "kubernetes-admin"
    groups: tuple[str, ...] = ("system:authenticated",)
    extra: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"operation": self.operation, "kind": {"group": self.group, "version": "v1", "kind": self.kind},
                "resource": {"group": self.group, "version": "v1", "resource": self.resource},
                "namespace": self.namespace, "name": self.name,
                "userInfo": {"username": self.username, "groups": list(self.groups), "extra": self.extra}}


def _matches(policy: dict[str, Any], request: Request) -> bool:
    def covers(values: list[str], value: str) -> bool:
        return "*" in values or value in values

    return any(covers(r["operations"], request.operation) and covers(r["apiGroups"], request.group)
               and covers(r["resources"], request.resource)
               for r in policy["spec"]["matchConstraints"]["resourceRules"])


def denials(policy: dict[str, Any], request: Request, old: dict[str, Any] | None,
            new: dict[str, Any] | None) -> list[str] | None:
    """The messages of the validations that deny the request (empty: admitted); None when the policy does not
    apply to it (another resource or operation, or a match condition false)."""
    spec = policy["spec"]
    if not _matches(policy, request):
        return None
    activation: dict[str, Any] = {"request": celpy.json_to_cel(request.to_json()),
                                  "object": celpy.json_to_cel(new), "oldObject": celpy.json_to_cel(old)}
    for condition in spec.get("matchConditions", []):
        matched = _evaluate(condition["expression"], activation)
        if isinstance(matched, Exception):
            return [f"match condition {condition['name']} failed: {matched}"]
        if not matched:
            return None
    variables = celpy.celtypes.MapType()
    for variable in spec.get("variables", []):
        variables[celpy.celtypes.StringType(variable["name"])] = _evaluate(
            variable["expression"], {**activation, "variables": variables})
    activation["variables"] = variables
    found = []
    for validation in spec["validations"]:
        allowed = _evaluate(validation["expression"], activation)
        if isinstance(allowed, Exception):
            found.append(f"{validation['message']} (error: {allowed})")
        elif not allowed:
            found.append(validation["message"])
    return found


def _evaluate(expression: str, activation: dict[str, Any]) -> Any:
    """The expression's value, or the error it raised (cel-python raises some and returns others)."""
    try:
        return _program(expression).evaluate(activation)
    except celpy.CELEvalError as exc:
        return exc
