"""checkov, an independent security scanner beside cdk-nag: zero unacknowledged findings.

One checkov run per session (offline: no update check, no platform download) scans every
synthesized CloudFormation template of every environment and every Kubernetes object the
stacks apply (the caches chart, which `make synth` also writes to dist/manifests/<env>/, the
HyperPod dependencies and the refresh RBAC), plus the probe below that proves the gate bites.
checkov pins boto3 1.35, which conflicts with the project's boto3, so `make synth` installs the
pinned version into its own virtualenv, `.venv/checkov/` (see the Makefile).

To acknowledge a finding, put the acknowledgment next to its resource with a specific reason:
- CloudFormation: `hyperwarm._internal.nag.acknowledge_checkov(construct, reason, "CKV_AWS_115")` right
  after creating the resource (it writes `Metadata.checkov.skip` on the construct's own
  resource; `kind="AWS::Lambda::Function"` marks every resource of that type in its tree);
  deploy-time custom-resource handlers (aws-cdk-lib's or our own): `acknowledge_deploy_time_handlers(scope)`.
- Kubernetes: `metadata.annotations` from `hyperwarm._internal.nag.checkov_annotations({"CKV_K8S_8": reason})`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk import aws_sqs as sqs
from aws_cdk.assertions import Template

from hyperwarm._internal.nag import acknowledge_checkov, checkov_annotations
from rehearsal import Assembly

CHECKOV = Path(sys.prefix) / "checkov" / "bin" / "checkov"
OFFLINE = {"CKV_SKIP_PACKAGE_UPDATE_CHECK": "true", "BC_SKIP_MAPPING": "TRUE", "BC_API_KEY": ""}
REASON = "a probe resource whose finding is acknowledged on purpose"


def _write_probe(directory: Path) -> None:
    """One open and one acknowledged resource of each framework."""
    directory.mkdir()
    stack = cdk.Stack(cdk.App(), "Probe")
    sqs.CfnQueue(stack, "OpenQueue")
    acknowledge_checkov(sqs.CfnQueue(stack, "AcknowledgedQueue"), REASON, "CKV_AWS_27")
    (directory / "probe.template.json").write_text(json.dumps(Template.from_stack(stack).to_json()))
    for name, notes in (("open", {}), ("acknowledged", checkov_annotations({"CKV_K8S_8": REASON}))):
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "annotations": notes},
               "spec": {"containers": [{"name": "c", "image": "public.ecr.aws/example/app:1.0"}]}}
        (directory / f"{name}.yaml").write_text(yaml.safe_dump(pod))


def _write_project(directory: Path, outdir: Path) -> None:
    """Every template, and every Kubernetes object a stack applies, one file per object."""
    directory.mkdir()
    for template in outdir.glob("*.template.json"):
        shutil.copy(template, directory / template.name)
    for index, (stack, logical_id, obj) in enumerate(Assembly.from_outdir(outdir).kubernetes_objects()):
        (directory / f"{stack}-{logical_id}-{index:03d}.yaml").write_text(yaml.safe_dump(obj))


@pytest.fixture(scope="session")
def checkov_report(synthesized, tmp_path_factory) -> dict[str, list[dict]]:
    """Failed checks by scanned folder ("project", "probe"), after one offline checkov run."""
    assert CHECKOV.exists(), f"checkov is installed by `make synth` into {CHECKOV.parent.parent}"
    root = tmp_path_factory.mktemp("checkov")
    _write_project(root / "project", synthesized.outdir)
    _write_probe(root / "probe")
    result = subprocess.run(
        [str(CHECKOV), "--directory", str(root), "--framework", "cloudformation", "kubernetes",
         "--skip-download", "--quiet", "--compact", "--output", "json"],
        cwd=root, env={**os.environ, **OFFLINE}, capture_output=True, text=True)
    reports = json.loads(result.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    assert sorted(r["check_type"] for r in reports) == ["cloudformation", "kubernetes"], result.stderr[-2000:]
    for report in reports:
        assert report["summary"]["parsing_errors"] == 0, report["check_type"]
        assert report["summary"]["resource_count"] > 0, report["check_type"]
    failed: dict[str, list[dict]] = {"project": [], "probe": []}
    for report in reports:
        for check in report["results"]["failed_checks"]:
            failed[Path(check["file_path"]).parts[1]].append(check)
    return failed


def _lines(checks: list[dict]) -> list[str]:
    return sorted(f"{c['check_id']} {c['file_path']} {c['resource']}: {c['check_name']}" for c in checks)


@pytest.mark.gate
def test_checkov_reports_no_unacknowledged_findings(checkov_report) -> None:
    assert _lines(checkov_report["project"]) == []


@pytest.mark.gate
def test_checkov_gate_fails_on_an_unacknowledged_finding(checkov_report) -> None:
    failed = {(Path(c["file_path"]).name, c["resource"], c["check_id"]) for c in checkov_report["probe"]}
    assert ("probe.template.json", "AWS::SQS::Queue.OpenQueue", "CKV_AWS_27") in failed
    assert not any(r.endswith("AcknowledgedQueue") for _, r, _ in failed)
    assert ("open.yaml", "Pod.default.open", "CKV_K8S_8") in failed
    assert ("acknowledged.yaml", "Pod.default.acknowledged", "CKV_K8S_8") not in failed
    assert ("acknowledged.yaml", "Pod.default.acknowledged", "CKV_K8S_9") in failed  # only what was named


def test_acknowledgments_need_a_specific_reason() -> None:
    stack = cdk.Stack(cdk.App(), "Probe")
    with pytest.raises(ValueError, match="specific reason"):
        acknowledge_checkov(sqs.CfnQueue(stack, "Queue"), "not needed", "CKV_AWS_27")
    with pytest.raises(ValueError, match="no CloudFormation resource of type AWS::Lambda::Function"):
        acknowledge_checkov(stack, REASON, "CKV_AWS_115", kind="AWS::Lambda::Function")
    with pytest.raises(ValueError, match="first '='"):
        checkov_annotations({"CKV_K8S_8": "a reason that says probe=none, which checkov would cut"})
