"""The rehearsal's model of a cloud assembly, its findings and its rule registry."""

from __future__ import annotations

import functools
import importlib
import json
import pkgutil
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KUBERNETES_RESOURCE = "Custom::AWSCDK-EKS-KubernetesResource"


@dataclass(frozen=True)
class Finding:
    """One broken requirement: which rule, where, and what to change."""

    rule: str
    stack: str
    resource: str
    message: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.stack}/{self.resource}: {self.message}"


@dataclass
class Assembly:
    """Templates by stack name, the deploy order between stacks and each stack's account where the
    environment names one (from `manifest.json`)."""

    templates: dict[str, dict[str, Any]]
    dependencies: dict[str, set[str]] = field(default_factory=dict)
    accounts: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_outdir(cls, outdir: str | Path) -> Assembly:
        outdir = Path(outdir)
        manifest = json.loads((outdir / "manifest.json").read_text())
        templates: dict[str, dict[str, Any]] = {}
        dependencies: dict[str, set[str]] = {}
        accounts: dict[str, str] = {}
        for name, artifact in manifest["artifacts"].items():
            if artifact["type"] != "aws:cloudformation:stack":
                continue
            templates[name] = json.loads((outdir / artifact["properties"]["templateFile"]).read_text())
            dependencies[name] = set(artifact.get("dependencies", ()))
            account = re.match(r"^aws://(\d{12})/", artifact.get("environment", ""))
            if account:
                accounts[name] = account.group(1)
        stacks = set(templates)
        return cls(templates, {k: v & stacks for k, v in dependencies.items()}, accounts)

    @classmethod
    def from_templates(cls, templates: Mapping[str, dict[str, Any]],
                       dependencies: Mapping[str, Iterable[str]] | None = None,
                       accounts: Mapping[str, str] | None = None) -> Assembly:
        """An assembly built in memory: how the rules' own tests feed them a defective template."""
        deps = {name: set((dependencies or {}).get(name, ())) for name in templates}
        return cls(dict(templates), deps, dict(accounts or {}))

    def referenced(self, stack: str, value: Any) -> tuple[str, str] | None:
        """(stack, logical id) of the resource a ``Ref``, ``Fn::GetAtt``, ``Fn::ImportValue`` (of an
        export) or ``Fn::GetStackOutput`` (of an output) names, where that export or output is itself
        such a reference: how rules follow references across stacks."""
        target = ref_target(value)
        if target:
            return stack, target
        if isinstance(value, dict) and "Fn::ImportValue" in value:
            for other, template in self.templates.items():
                for output in template.get("Outputs", {}).values():
                    if output.get("Export", {}).get("Name") == value["Fn::ImportValue"]:
                        return self.referenced(other, output.get("Value"))
        if isinstance(value, dict) and isinstance(value.get("Fn::GetStackOutput"), dict):
            other, name = value["Fn::GetStackOutput"].get("StackName"), value["Fn::GetStackOutput"].get("OutputName")
            output = self.templates.get(other, {}).get("Outputs", {}).get(name) if isinstance(other, str) else None
            if output is not None:
                return self.referenced(other, output.get("Value"))
        return None

    def deploys_after(self, stack: str, other: str) -> bool:
        """True when `stack` depends on `other`, directly or through other stacks."""
        seen: set[str] = set()
        todo = list(self.dependencies.get(stack, ()))
        while todo:
            current = todo.pop()
            if current == other:
                return True
            if current not in seen:
                seen.add(current)
                todo.extend(self.dependencies.get(current, ()))
        return False

    def created_before(self, stack: str, logical_id: str, target_stack: str, target_id: str) -> bool:
        """True when CloudFormation creates `target_stack/target_id` before `stack/logical_id`.

        Across stacks that is the stack order; within a stack, a path of `DependsOn` entries and
        `Ref`/`Fn::GetAtt`/`Fn::Sub` references (CloudFormation's own implicit dependencies).
        """
        if stack != target_stack:
            return self.deploys_after(stack, target_stack)
        resources = self.templates.get(stack, {}).get("Resources", {})
        seen: set[str] = set()
        todo = [logical_id]
        while todo:
            for dependency in direct_dependencies(resources.get(todo.pop(), {})) & set(resources):
                if dependency == target_id:
                    return True
                if dependency not in seen:
                    seen.add(dependency)
                    todo.append(dependency)
        return False

    def resources(self, kind: str | None = None) -> Iterator[tuple[str, str, dict[str, Any]]]:
        """(stack, logical id, resource) for every resource, or those of one CloudFormation type."""
        for stack, template in self.templates.items():
            for logical_id, resource in template.get("Resources", {}).items():
                if kind is None or resource.get("Type") == kind:
                    yield stack, logical_id, resource

    def kubernetes_objects(self) -> Iterator[tuple[str, str, dict[str, Any]]]:
        """(stack, logical id, object) for every Kubernetes object a stack applies through kubectl.

        Values only known at deploy time (CloudFormation tokens) read as the string "${TOKEN}".
        """
        for stack, logical_id, resource in self.resources(KUBERNETES_RESOURCE):
            manifest = resource.get("Properties", {}).get("Manifest")
            text = manifest if isinstance(manifest, str) else _join_with_placeholders(manifest)
            for obj in json.loads(text):
                yield stack, logical_id, obj


def direct_dependencies(resource: Mapping[str, Any]) -> set[str]:
    """Logical ids one resource waits for: its `DependsOn` and every `Ref`, `Fn::GetAtt` and `Fn::Sub` it uses."""
    depends_on = resource.get("DependsOn", [])
    found = {depends_on} if isinstance(depends_on, str) else set(depends_on)

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("Ref"), str):
                found.add(value["Ref"])
            attribute = value.get("Fn::GetAtt")
            if attribute is not None:
                found.add(attribute[0] if isinstance(attribute, list) else str(attribute).split(".")[0])
            sub = value.get("Fn::Sub")
            if sub is not None:
                text = sub if isinstance(sub, str) else sub[0]
                found.update(m.split(".")[0] for m in re.findall(r"\$\{([^}!][^}]*)\}", text))
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk({k: v for k, v in resource.items() if k != "DependsOn"})
    return found


@functools.cache
def resource_schema(resource_type: str) -> Mapping[str, Any] | None:
    """The resource provider schema cfn-lint ships for a type (``createOnlyProperties``,
    ``primaryIdentifier`` ...); None when it has none. Read for us-east-1, which has every type."""
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER, ResourceNotFoundError

    try:
        return PROVIDER_SCHEMA_MANAGER.get_resource_schema("us-east-1", resource_type).schema
    except ResourceNotFoundError:
        return None


def at_pointer(properties: Mapping[str, Any], pointer: str) -> Any:
    """The value at a resource schema's property pointer (``/properties/A/B``) in a resource's
    ``Properties``; None where it is not set. A ``*`` step keeps the whole list."""
    value: Any = properties
    for step in pointer.split("/")[2:]:
        if step == "*" and isinstance(value, list):
            continue
        value = value.get(step) if isinstance(value, dict) else None
    return value


def ref_target(value: Any) -> str | None:
    """The logical id a `Ref` or `Fn::GetAtt` value points at, else None."""
    if isinstance(value, dict):
        if isinstance(value.get("Ref"), str):
            return value["Ref"]
        attribute = value.get("Fn::GetAtt")
        if isinstance(attribute, list) and attribute:
            return attribute[0]
    return None


_PSEUDO = {"AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com"}
"""Pseudo parameters with one value wherever hyperwarm deploys (the commercial partition). The account
and region stay unresolved on purpose: a grant to ``<AWS::AccountId>`` is not a grant to another account."""


def resolve(value: Any, resources: Mapping[str, Any]) -> str | None:
    """A template value as the literal string it deploys as, following references to resources of the
    same template whose name is a literal (a bucket's ``BucketName``: its ``Ref`` and ``Arn``); None when
    any part cannot be known at synth (a generated name, an import, the account or region)."""
    if isinstance(value, str):
        return value
    if not isinstance(value, dict) or len(value) != 1:
        return None
    (function, argument), = value.items()
    if function == "Ref" and isinstance(argument, str):
        return _PSEUDO.get(argument) or _named(resources.get(argument, {}), "Ref")
    if function == "Fn::GetAtt" and isinstance(argument, list) and len(argument) == 2:
        return _named(resources.get(argument[0], {}), argument[1])
    if function == "Fn::Join" and isinstance(argument, list) and len(argument) == 2 and isinstance(argument[1], list):
        parts = [resolve(p, resources) for p in argument[1]]
        return None if any(p is None for p in parts) or not isinstance(argument[0], str) \
            else argument[0].join(p for p in parts if p is not None)
    return None


def _named(resource: Mapping[str, Any], attribute: str) -> str | None:
    """What a reference to ``resource`` deploys as, when its name is a literal in the template."""
    if resource.get("Type") == "AWS::S3::Bucket":
        name = resource.get("Properties", {}).get("BucketName")
        if isinstance(name, str):
            return {"Ref": name, "Arn": f"arn:aws:s3:::{name}"}.get(attribute)
    return None


def strings(value: Any, placeholder: str = "${TOKEN}") -> Iterator[str]:
    """Every literal string in a template value; an `Fn::Join` reads as one string with its
    unresolved parts replaced by `placeholder`, so a literal name split around tokens stays visible."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        if "Fn::Join" in value and isinstance(value["Fn::Join"], list) and len(value["Fn::Join"]) == 2:
            parts = value["Fn::Join"][1]
            if isinstance(parts, list):
                yield _joined(value["Fn::Join"], placeholder)
                for part in parts:
                    if not isinstance(part, str):
                        yield from strings(part, placeholder)
                return
        for item in value.values():
            yield from strings(item, placeholder)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item, placeholder)


def text_of(value: Any, placeholder: str = "${TOKEN}") -> str:
    """A template value as one string, every part known only at deploy time (a ``Ref``, ``Fn::GetAtt``,
    ``Fn::ImportValue``, ``Fn::Sub`` variable ...) read as ``placeholder``."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("Fn::Sub"), str):
        return re.sub(r"\$\{[^}]*\}", placeholder, value["Fn::Sub"])
    join = value.get("Fn::Join") if isinstance(value, dict) else None
    if isinstance(join, list) and len(join) == 2 and isinstance(join[0], str) and isinstance(join[1], list):
        return join[0].join(text_of(part, placeholder) for part in join[1])
    return placeholder


def _joined(join: list[Any], placeholder: str) -> str:
    """An `Fn::Join` as one string, its unresolved parts replaced by `placeholder`."""
    separator, parts = join
    return separator.join(p if isinstance(p, str) else placeholder for p in parts)


def _join_with_placeholders(value: Any) -> str:
    if isinstance(value, dict) and "Fn::Join" in value:
        return _joined(value["Fn::Join"], "${TOKEN}")
    raise ValueError(f"unreadable Kubernetes manifest property: {str(value)[:200]}")


Check = Callable[[Assembly], Iterable[Finding]]


@dataclass(frozen=True)
class Rule:
    """A documented deploy requirement: `check` yields a finding for every place that breaks it."""

    id: str
    source: str
    check: Check

    def __call__(self, assembly: Assembly) -> list[Finding]:
        return list(self.check(assembly))


_RULES: dict[str, Rule] = {}


def rule(rule_id: str, *, source: str) -> Callable[[Check], Rule]:
    """Register a rule; `source` names the AWS document or reference stack it encodes."""

    def register(check: Check) -> Rule:
        if rule_id in _RULES:
            raise ValueError(f"rehearsal rule {rule_id!r} is defined twice")
        _RULES[rule_id] = Rule(rule_id, source, check)
        return _RULES[rule_id]

    return register


def all_rules() -> list[Rule]:
    """Every rule in `rehearsal.rules` (each module there registers its own)."""
    from rehearsal import rules

    for module in pkgutil.iter_modules(rules.__path__):
        importlib.import_module(f"{rules.__name__}.{module.name}")
    return [_RULES[k] for k in sorted(_RULES)]


def rehearse(assembly: Assembly) -> list[Finding]:
    """Every finding of every rule, in rule order."""
    return [finding for r in all_rules() for finding in r(assembly)]
