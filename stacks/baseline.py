"""Synth against what is deployed: a change the deployed stacks cannot survive fails synth.

:func:`synthesize` compares this synth's templates with a baseline (:mod:`rehearsal.changes`: a
replaced cluster or endpoint, an autoscaled variant changed in place, an export in use) and fails
with one message naming the source it compared with. The context key ``baseline`` chooses it:

- unset: the previous synth's templates in the output directory (``cdk.out``). They are what was
  deployed only if nothing was synthesized since the last deploy; when the check fails they are
  put back, so the next synth still compares with them.
- ``cloudformation``: each stack's deployed template (GetTemplate, the default AWS credentials:
  ``AWS_PROFILE``, not ``cdk --profile``). What ``make deploy`` uses.
- a directory: a ``cdk.out`` (or ``<stack>.template.json`` files) kept from the last deploy.
- ``none``: no comparison, for a change meant to replace (in production lift the stack policy first).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import cx_api

from rehearsal.changes import compare
from rehearsal.core import Assembly
from stacks.config import ConfigError

_UNKNOWN = ("unknown-account", "unknown-region")  # what cx-api writes for an environment-agnostic stack
CONTEXT_KEY = "baseline"
DEPLOYED = "cloudformation"
NONE = "none"
_NOTHING_DEPLOYED = ("ROLLBACK_COMPLETE", "REVIEW_IN_PROGRESS", "DELETE_COMPLETE")
"""Stack states whose template describes no deployed resource (GetTemplate still answers)."""


@dataclass
class Baseline:
    """Templates by stack name, where they come from, and how to put a previous synth back."""

    source: str
    templates: dict[str, dict[str, Any]]
    restore: Callable[[], None] = field(default=lambda: None)


def synthesize(app: cdk.App) -> cx_api.CloudAssembly:
    """``app.synth()``, failing with every change the baseline's stacks cannot survive."""
    setting = app.node.try_get_context(CONTEXT_KEY)
    previous = previous_synth(Path(app.outdir)) if setting is None else None  # before synth overwrites it
    try:
        assembly = app.synth()
    except BaseException:  # aws-cdk-lib writes the assembly before its validations (cdk-nag) fail: put it back
        if previous is not None:
            previous.restore()
        raise
    baseline = previous if setting is None else load(str(setting), assembly)
    if baseline is None or not baseline.templates:
        return assembly
    findings = compare(Assembly.from_templates(baseline.templates), Assembly.from_outdir(assembly.directory))
    if findings:
        baseline.restore()
        raise ConfigError(f"compared with {baseline.source}, this deploy would fail or replace what it must keep:\n  "
                          + "\n  ".join(str(f) for f in findings)
                          + f"\nCompare with what is deployed: -c {CONTEXT_KEY}={DEPLOYED}. A replacement you mean: "
                            f"-c {CONTEXT_KEY}={NONE} (production: lift the stack policy first, docs/operations.md, "
                            "\"Protecting production\").")
    return assembly


def load(setting: str, assembly: cx_api.CloudAssembly) -> Baseline | None:
    """The baseline a ``baseline`` context value names (see the module docstring)."""
    if setting == NONE:
        return None
    if setting == DEPLOYED:
        return deployed_templates(assembly)
    directory = Path(setting)
    if not directory.is_dir():
        raise ConfigError(f"-c {CONTEXT_KEY}={setting}: not a directory; allowed: {DEPLOYED}, {NONE} or a directory "
                          "of templates (a cdk.out kept from the last deploy)")
    return Baseline(f"the templates in {directory}/", templates_in(directory))


def templates_in(directory: Path) -> dict[str, dict[str, Any]]:
    """The stack templates of a cloud assembly directory, or its ``<stack>.template.json`` files."""
    if (directory / "manifest.json").is_file():
        return Assembly.from_outdir(directory).templates
    return {p.name.removesuffix(".template.json"): json.loads(p.read_text())
            for p in sorted(directory.glob("*.template.json"))}


def previous_synth(outdir: Path) -> Baseline | None:
    """The templates a previous synth left in ``outdir``, and a way to write them back."""
    if not (outdir / "manifest.json").is_file():
        return None
    manifest = json.loads((outdir / "manifest.json").read_text())
    files = [outdir / "manifest.json"] + [outdir / a["properties"]["templateFile"]
                                          for a in manifest.get("artifacts", {}).values()
                                          if a.get("type") == "aws:cloudformation:stack"]
    saved = {path: path.read_bytes() for path in files if path.is_file()}

    def restore() -> None:
        for path, content in saved.items():
            path.write_bytes(content)

    return Baseline(f"{outdir}/ of the previous synth (what was deployed only if nothing was synthesized since)",
                    templates_in(outdir), restore)


def deployed_templates(assembly: cx_api.CloudAssembly) -> Baseline:
    """The deployed template of each stack of the assembly that exists (GetTemplate, stage Original)."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    templates: dict[str, dict[str, Any]] = {}
    accounts: dict[str, str] = {}
    for stack in assembly.stacks:
        region = None if stack.environment.region in _UNKNOWN else stack.environment.region
        # An environment-agnostic stack deploys to the account the cdk CLI resolved (CDK_DEFAULT_ACCOUNT):
        # credentials of another account would find no stack, and the check would compare with nothing.
        target = stack.environment.account if stack.environment.account not in _UNKNOWN else \
            os.environ.get("CDK_DEFAULT_ACCOUNT")
        try:
            if target:
                key = region or ""
                if key not in accounts:
                    accounts[key] = boto3.client("sts", region_name=region).get_caller_identity()["Account"]
                caller = accounts[key]
                if caller != target:
                    raise ConfigError(f"-c {CONTEXT_KEY}={DEPLOYED}: the AWS credentials are account {caller}, "
                                      f"{stack.stack_name} deploys to {target}; set AWS_PROFILE")
            cloudformation = boto3.client("cloudformation", region_name=region)
            (described,) = cloudformation.describe_stacks(StackName=stack.stack_name)["Stacks"]
            if described["StackStatus"] in _NOTHING_DEPLOYED:  # a failed first create, or a change set only
                continue
            body = cloudformation.get_template(StackName=stack.stack_name, TemplateStage="Original")["TemplateBody"]
        except ClientError as error:
            if "does not exist" in str(error):  # never deployed: nothing to compare with
                continue
            raise ConfigError(f"-c {CONTEXT_KEY}={DEPLOYED}: cannot read the deployed template of "
                              f"{stack.stack_name}: {error}") from None
        except BotoCoreError as error:
            raise ConfigError(f"-c {CONTEXT_KEY}={DEPLOYED}: cannot reach CloudFormation: {error}") from None
        templates[stack.stack_name] = body if isinstance(body, dict) else json.loads(body)
    print(f"baseline: compared with the deployed templates of {len(templates)} stack(s)"
          + (f": {', '.join(sorted(templates))}" if templates else " (none deployed yet in this account and region)"),
          file=sys.stderr)
    return Baseline("the deployed templates (CloudFormation GetTemplate)", templates)
