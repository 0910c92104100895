"""A bad cdk.json ends every entry point with one message and no traceback: exit 1 for synth and the cdk
app, exit 2 for the ``python -m stacks`` commands (their usage errors exit 2 too)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.gate  # each test runs an entry point as its own program


def run(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    environ = {**os.environ, "PYTHONPATH": str(REPO), **env}
    environ.pop("HYPERWARM_DEBUG", None)
    return subprocess.run([sys.executable, *args], cwd=cwd, env=environ, capture_output=True, text=True,
                          timeout=300)


def assert_one_message(result: subprocess.CompletedProcess, expected: str) -> None:
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("error: "), result.stderr
    assert expected in result.stderr


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "cdk.json").write_text(json.dumps({"context": {"environments": {"dev": {"region": "mars"}}}}))
    return tmp_path


def test_make_synth_prints_one_message_for_a_config_error(project: Path) -> None:
    result = run(["-m", "stacks.synth", "--outdir", str(project / "out")], project)
    assert_one_message(result, "environments.dev.region: 'mars' -- must be an AWS region name, e.g. us-west-2")


def test_malformed_cdk_json_names_file_line_and_column(tmp_path: Path) -> None:
    (tmp_path / "cdk.json").write_text('{\n  "context": {\n    "environments": {,}\n  }\n}\n')
    result = run(["-m", "stacks.synth", "--outdir", str(tmp_path / "out")], tmp_path)
    assert_one_message(result, "cdk.json:3:22: Expecting property name enclosed in double quotes")


def test_cdk_app_entry_point_prints_one_message_for_a_config_error(project: Path) -> None:
    # The cdk CLI runs app.py with the context in CDK_CONTEXT_JSON.
    context = json.dumps({"environments": {"dev": {"region": "mars"}}})
    result = run([str(REPO / "app.py")], project, CDK_CONTEXT_JSON=context, CDK_OUTDIR=str(project / "out"))
    assert_one_message(result, "environments.dev.region: 'mars'")


def test_a_null_environment_in_cdk_json_fails_the_cdk_app_though_the_cli_drops_it(tmp_path: Path) -> None:
    """The cdk CLI passes cdk.json's context without its null values: dev would vanish without a word."""
    (tmp_path / "cdk.json").write_text(json.dumps({"context": {"environments": {"dev": None, "prod": {}}}}))
    dropped = json.dumps({"environments": {"prod": {}}})  # what the CLI puts into CDK_CONTEXT_JSON
    result = run([str(REPO / "app.py")], tmp_path, CDK_CONTEXT_JSON=dropped, CDK_OUTDIR=str(tmp_path / "out"))
    assert_one_message(result, "cdk.json: environments.dev: null -- give a value or remove the key")
    nested = json.dumps({"context": {"environments": {"dev": {"observability": {"ttft_p99": None}}}}})
    (tmp_path / "cdk.json").write_text(nested)
    result = run(["-m", "stacks.synth", "--outdir", str(tmp_path / "out")], tmp_path)
    assert_one_message(result, "cdk.json: environments.dev.observability.ttft_p99: null")


def test_unknown_environment_selection_names_the_configured_ones(project: Path) -> None:
    context = json.dumps({"environments": {"dev": {}}, "env": "prod"})
    result = run([str(REPO / "app.py")], project, CDK_CONTEXT_JSON=context, CDK_OUTDIR=str(project / "out"))
    assert_one_message(result, "-c env=prod: unknown environment(s) prod; configured: dev")


def test_the_planner_command_prints_one_message_for_a_config_error(project: Path) -> None:
    # `hyperwarm plan cache` (python -m stacks) reads the same cdk.json: a usage error, exit 2
    result = run(["-m", "stacks", "plan", "cache", "--env", "dev"], project)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        "python -m stacks plan cache: invalid configuration for environment 'dev':",
        "  environments.dev.region: 'mars' -- must be an AWS region name, e.g. us-west-2"]
