"""Users' ways in: an app of their own that imports only ``hyperwarm``, and the wheel."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_example_app_using_only_the_public_api_synthesizes(tmp_path) -> None:
    env = {**os.environ, "CDK_OUTDIR": str(tmp_path)}
    # Run from outside the repository so nothing but the installed package is importable.
    subprocess.run([sys.executable, "-m", "hyperwarm.run", str(REPO / "examples" / "my_platform_app.py")],
                   cwd=tmp_path, env=env, check=True, capture_output=True)
    template = json.loads((tmp_path / "MyTeamInference.template.json").read_text())
    kinds = {r["Type"] for r in template["Resources"].values()}
    assert {"AWS::SageMaker::Cluster", "AWS::EKS::Cluster", "AWS::SageMaker::Endpoint", "AWS::CloudWatch::Alarm",
            "AWS::ApiGateway::Method"} <= kinds
    assert template["Outputs"]["LlmGroupNvmeGb"]["Value"] == "3800"


def test_package_builds_as_a_wheel_with_its_data(tmp_path) -> None:
    # setuptools builds through build/lib, which keeps files of earlier layouts: start from none.
    shutil.rmtree(REPO / "build", ignore_errors=True)
    built = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path),
                            str(REPO)], check=True, capture_output=True, text=True)
    output = built.stdout + built.stderr
    assert "deprecat" not in output.lower(), output  # e.g. setuptools' licence-classifier banner (SPDX licence instead)
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
    top_level = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top_level == {"hyperwarm"}
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "hyperwarm = hyperwarm.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_the_refresh_extra_installs_exactly_the_functions_pinned_requirements() -> None:
    """Synth bundles the function's dependencies only at its pins: the extra that installs them must agree."""
    import tomllib

    from hyperwarm.refresh.asset import pinned_requirements

    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["refresh"]
    assert dict(r.split("==") for r in extra) == pinned_requirements()
    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert not [d for d in dependencies if d.startswith("aws-lambda-powertools")]  # a construct user needs none


def test_the_exporter_extra_installs_exactly_the_exporters_pinned_requirements() -> None:
    import tomllib

    from hyperwarm.functions import cache_exporter
    from hyperwarm.refresh.asset import pinned_requirements

    pins = pinned_requirements(Path(cache_exporter.__file__).parent / "requirements.txt")
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["exporter"]
    assert dict(r.split("==") for r in extra) == pins == {"prometheus-client": "0.26.0"}
