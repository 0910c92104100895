"""``make test-install``: the library as a platform team installs it, at both ends of its version ranges.

hyperwarm's wheel goes into two new virtualenvs with only the extras the package README names for the example
app's features (no dev extras): one at the newest releases the ranges admit, one at every declared floor
(aws-cdk-lib, constructs, cdk8s and the rest; typing-extensions there is older than the one the refresh
function's lock ships). In each, ``examples/my_platform_app.py`` synthesizes as a user runs it, with nothing of the
project importable and no boto3, Powertools or prometheus-client installed, and the functions' assets are
byte-for-byte those of this project's own virtualenv. ``mypy --strict`` checks the app against the newest end.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from consumer import EXAMPLE, README, REPO, build_wheel, clean_env, floors, installed, new_venv, readme_extras, synthesize
from packaging.version import Version

EXTRAS = ("caches", "node")
"""The example's features: a HyperPod cluster with cached models (``caches``, which includes ``hyperpod``), and
Node.js for jsii on a machine that has only Python (``node``)."""
NOT_AT_SYNTH = {"boto3", "botocore", "aws-lambda-powertools", "jmespath", "prometheus-client"}
"""What the functions import at run time (the Lambda runtime's boto3, their locked wheels): synth needs none."""
ENDS = ("newest", "floor")


@pytest.fixture(scope="module")
def venvs(tmp_path_factory) -> dict[str, Path]:
    """Both ends' virtualenvs, installed side by side (pip mostly waits on downloads and the disk)."""
    root = tmp_path_factory.mktemp("consumer")
    wheel = build_wheel(root / "dist")
    with ThreadPoolExecutor(len(ENDS)) as pool:
        newest = pool.submit(new_venv, root / "newest", wheel, EXTRAS)
        floor = pool.submit(new_venv, root / "floor", wheel, EXTRAS, floors(EXTRAS))
        return {"newest": newest.result(), "floor": floor.result()}


def _mypy_config() -> str:
    """A team's mypy configuration for its app: strict, and aws-cdk-lib read as this project reads it (the modules
    hyperwarm and the app import, followed; the ~900 they import among themselves skipped: pyproject.toml), which
    takes a fifth of the time of following every import (about 80 s from an empty cache)."""
    overrides = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]["overrides"]
    (followed,) = [o["module"] for o in overrides if o.get("follow_imports") == "normal"]
    return f"[mypy]\nstrict = True\n\n[mypy-aws_cdk.*]\nfollow_imports = skip\n\n[mypy-{','.join(followed)}]\n" \
           "follow_imports = normal\n"


@pytest.fixture(scope="module")
def mypy_strict(venvs, tmp_path_factory) -> subprocess.Popen[str]:
    """``mypy --strict`` on the example against the newest end, as the team would type-check its app: the installed
    package's own types (py.typed), from a folder of its own so only the team's configuration applies. Started
    before the syntheses, beside which it runs."""
    folder = tmp_path_factory.mktemp("mypy")
    (folder / EXAMPLE.name).write_text(EXAMPLE.read_text())
    (folder / "mypy.ini").write_text(_mypy_config())
    return subprocess.Popen([sys.executable, "-m", "mypy", "--strict", "--python-executable", str(venvs["newest"]),
                             "--cache-dir", str(folder / "cache"), EXAMPLE.name], cwd=folder, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=clean_env())


@pytest.fixture(scope="module")
def templates(venvs, mypy_strict, tmp_path_factory) -> dict[str, dict[str, Any]]:
    """The example's template synthesized at each end, and in this project's virtualenv (``project``)."""
    root = tmp_path_factory.mktemp("synth")
    pythons = {**venvs, "project": Path(sys.executable)}
    return {end: synthesize(python, root / end) for end, python in pythons.items()}


def _function_code(template: dict[str, Any]) -> dict[str, str]:
    """Each hyperwarm function's handler -> its code asset (the hash of its bundle)."""
    return {f["Properties"]["Handler"]: f["Properties"]["Code"]["S3Key"] for f in template["Resources"].values()
            if f["Type"] == "AWS::Lambda::Function"
            and str(f["Properties"].get("Handler", "")).startswith("hyperwarm.functions.")}


def test_the_extras_installed_are_the_ones_the_readme_names() -> None:
    assert set(EXTRAS) <= readme_extras(), f"{README} does not tell users to install {EXTRAS}"


def test_the_floor_end_holds_every_declared_floor_and_nothing_of_the_dev_tools(venvs) -> None:
    wanted = floors(EXTRAS)
    assert {"aws-cdk-lib", "constructs", "cdk8s"} <= set(wanted)
    ends = {end: installed(python) for end, python in venvs.items()}
    assert {name: Version(ends["floor"][name]) for name in wanted} == {n: Version(v) for n, v in wanted.items()}
    for end, versions in ends.items():
        assert not NOT_AT_SYNTH & set(versions), (end, NOT_AT_SYNTH & set(versions))
        assert not {"pytest", "pydantic", "cdk-nag", "cfn-lint", "mypy"} & set(versions), end
        # one kubectl layer: the default one of the hyperpod extra
        assert [n for n in versions if "kubectl" in n] == ["aws-cdk-lambda-layer-kubectl-v34"], end
    # The ends differ where the ranges allow: the floor is older than the newest for at least the typing-extensions
    # the library declares, which the refresh function's lock pins at a newer version.
    assert ends["floor"]["typing-extensions"] != ends["newest"]["typing-extensions"]


@pytest.mark.parametrize("end", ENDS)
def test_every_public_name_loads_from_the_wheel(venvs, end) -> None:
    """Beyond the example's constructs: every name hyperwarm exports imports at both ends (no module of aws-cdk-lib
    newer than the floor, no undeclared dependency)."""
    code = "import hyperwarm\nhyperwarm.use_bundled_node()\nfor name in hyperwarm.__all__:\n    getattr(hyperwarm, name)"
    result = subprocess.run([str(venvs[end]), "-c", code], cwd=venvs[end].parent, capture_output=True, text=True,
                            env=clean_env())
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("end", ENDS)
def test_the_example_app_synthesizes_from_the_wheel(templates, end) -> None:
    template = templates[end]
    kinds = {r["Type"] for r in template["Resources"].values()}
    assert {"AWS::SageMaker::Cluster", "AWS::EKS::Cluster", "AWS::SageMaker::Endpoint", "AWS::ApiGateway::Method",
            "AWS::CloudWatch::Dashboard", "AWS::CloudWatch::Alarm", "AWS::DynamoDB::Table"} <= kinds
    layers = [r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::LayerVersion"
              and "kubectl" in json.dumps(r.get("Properties", {})).lower()]
    assert len(layers) == 1, layers
    assert {handler.split(".")[2] for handler in _function_code(template)} == \
        {"cache_refresh", "cache_exporter", "endpoint_metrics"}


@pytest.mark.parametrize("end", ENDS)
def test_the_functions_bundles_do_not_depend_on_the_synth_environment(templates, end) -> None:
    """Each function's asset hash is a hash of its content: equal at both ends and in the project's venv, whose
    typing-extensions, Powertools and prometheus-client differ (or are absent)."""
    assert _function_code(templates[end]) == _function_code(templates["project"])


def test_mypy_strict_accepts_the_example_app_against_the_installed_wheel(mypy_strict) -> None:
    output, _ = mypy_strict.communicate(timeout=900)
    assert mypy_strict.returncode == 0, output
    assert "Success: no issues found in 1 source file" in output and str(REPO) not in output
