"""Gates on every synthesized template of every environment: cdk-nag and cfn-lint."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import aws_cdk as cdk
import pytest
from cdk_nag import AwsSolutionsChecks

REPO = Path(__file__).resolve().parent.parent


def test_every_environment_is_synthesized(synthesized) -> None:
    names = synthesized.stack_names()
    for env in ("dev", "staging", "prod"):
        assert f"hyperwarm-{env}-cluster" in names


def test_cdk_nag_reports_no_unacknowledged_findings(synthesized) -> None:
    # The fixture synthesized with the AwsSolutions plugin: synth raises on any open finding.
    report = synthesized.outdir / "validation-report.json"
    if report.exists():
        failures = [p for p in json.loads(report.read_text())["pluginReports"] if p["conclusion"] != "success"]
        assert failures == []


def test_cdk_nag_fails_synth_on_an_unacknowledged_finding() -> None:
    # The gate is real: a bucket without SSL enforcement or logging fails synth (a stack of its own: the
    # environments' stacks pass, as the session's synthesis shows).
    app = cdk.App()
    stack = cdk.Stack(app, "Probe", env=cdk.Environment(region="us-west-2"))
    cdk.aws_s3.Bucket(stack, "Leaky")
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    with pytest.raises(RuntimeError, match=r"(?s)ValidationFailed.*Probe/Leaky.*AwsSolutions-S10"):
        app.synth()


@pytest.mark.gate
def test_cfn_lint_reports_no_errors_or_warnings(synthesized) -> None:
    # The repository's .cfnlintrc.yaml (read from the working directory) names the ignored checks and why.
    paths = sorted(str(p) for p in synthesized.outdir.glob("*.template.json"))
    assert paths
    result = subprocess.run([str(Path(sys.executable).parent / "cfn-lint"), "--format", "parseable", *paths],
                            cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
