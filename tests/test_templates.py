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


def test_cdk_nag_and_cloudformation_validation_report_no_unacknowledged_findings(synthesized) -> None:
    # The fixture synthesized with the AwsSolutions plugin and aws-cdk-lib's CloudFormation validation, which
    # cdk.json's validateAgainstDefaultRules turns into a gate: synth raises on any open finding of either.
    reports = json.loads((synthesized.outdir / "validation-report.json").read_text())["pluginReports"]
    assert {p["pluginName"] for p in reports} == {"AwsSolutions", cdk.CloudFormationValidatePlugin.PLUGIN_NAME}
    assert [p for p in reports if p["conclusion"] != "success" or p["violations"]] == []


def test_cloudformation_validation_fails_synth_on_an_invalid_property(project_context) -> None:
    # cdk.json's flag, with the plugin registered as the app's session synthesis registers it.
    flag = "@aws-cdk/core:validateAgainstDefaultRules"
    app = cdk.App(context={flag: project_context[flag]})
    stack = cdk.Stack(app, "Probe", env=cdk.Environment(region="us-west-2"))
    cdk.CfnResource(stack, "Queue", type="AWS::SQS::Queue", properties={"DelaySeconds": "soon"})
    cdk.Validations.of(app).add_plugins(cdk.CloudFormationValidatePlugin())
    with pytest.raises(RuntimeError, match=r"ValidationFailed: ERROR DelaySeconds: 'soon' is not of type 'integer'"):
        app.synth()


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
