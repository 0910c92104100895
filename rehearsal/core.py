"""The rehearsal's model of a cloud assembly, its findings and its rule registry."""

from __future__ import annotations

import importlib
import json
import pkgutil
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
    """Templates by stack name and the deploy order between stacks (from `manifest.json`)."""

    templates: dict[str, dict[str, Any]]
    dependencies: dict[str, set[str]] = field(default_factory=dict)

    @classmethod
    def from_outdir(cls, outdir: str | Path) -> "Assembly":
        outdir = Path(outdir)
        manifest = json.loads((outdir / "manifest.json").read_text())
        templates: dict[str, dict[str, Any]] = {}
        dependencies: dict[str, set[str]] = {}
        for name, artifact in manifest["artifacts"].items():
            if artifact["type"] != "aws:cloudformation:stack":
                continue
            templates[name] = json.loads((outdir / artifact["properties"]["templateFile"]).read_text())
            dependencies[name] = set(artifact.get("dependencies", ()))
        stacks = set(templates)
        return cls(templates, {k: v & stacks for k, v in dependencies.items()})

    @classmethod
    def from_templates(cls, templates: Mapping[str, dict[str, Any]],
                       dependencies: Mapping[str, Iterable[str]] | None = None) -> "Assembly":
        """An assembly built in memory: how the rules' own tests feed them a defective template."""
        deps = {name: set((dependencies or {}).get(name, ())) for name in templates}
        return cls(dict(templates), deps)

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


def _join_with_placeholders(value: Any) -> str:
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(p if isinstance(p, str) else "${TOKEN}" for p in parts)
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
