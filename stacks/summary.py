"""Summary rows per environment, read back from the synthesized templates."""

from __future__ import annotations

from collections import Counter
from typing import Iterator

from aws_cdk import cx_api

from hyperwarm import EnvironmentConfig, instance_spec


def _instance_groups(config: EnvironmentConfig) -> str:
    lines = []
    for g in config.instance_groups:
        spec = instance_spec(g.instance_type)
        cache = "caches" if g.holds_caches else "no caches"
        lines.append(f"{g.name}: {g.instance_count} x {g.instance_type} "
                     f"({spec.gpus} GPU, NVMe {spec.nvme_gb:,} GB, {cache})")
    return "\n".join(lines)


def environment_rows(assembly: cx_api.CloudAssembly, env_name: str,
                     config: EnvironmentConfig) -> Iterator[tuple[str, str, str]]:
    for stack in assembly.stacks:
        if not stack.stack_name.startswith(f"hyperwarm-{env_name}-"):
            continue
        resources = stack.template.get("Resources", {})
        kinds = Counter(r["Type"] for r in resources.values())
        details = []
        if kinds.get("AWS::SageMaker::Cluster"):
            details.append(_instance_groups(config))
        yield stack.stack_name, str(len(resources)), "\n".join(details)
