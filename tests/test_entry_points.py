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
pytestmark = pytest.mark.gate  # each entry point runs as a program

# ``python -m <module> <args>`` as the interpreter runs it, for several commands in one program: each Python and
# jsii start costs seconds, and these commands do not differ in anything a started Node could keep (the cdk app's
# context is read by Node from its environment, so the app.py runs below are programs of their own). Like the
# interpreter's top level: SystemExit's code is the exit status (a message is printed, status 1), any other
# exception prints its traceback and exits 1.
_RUN_MODULES = r"""
import contextlib, io, json, os, runpy, sys, traceback, warnings
warnings.filterwarnings("ignore", category=RuntimeWarning, module="runpy")  # a module an earlier command imported
base, results = dict(os.environ), []
for cwd, module, args in json.load(sys.stdin):
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(base)
    sys.argv = [module, *args]
    stderr, status = io.StringIO(), 0
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        except SystemExit as exit:
            if exit.code is None or isinstance(exit.code, int):
                status = exit.code or 0
            else:
                print(exit.code, file=sys.stderr)
                status = 1
        except BaseException:
            traceback.print_exc()
            status = 1
    results.append({"returncode": status, "stderr": stderr.getvalue()})
print(json.dumps(results))
"""


def _environ(**env: str) -> dict[str, str]:
    environ = {**os.environ, "PYTHONPATH": str(REPO), **env}
    environ.pop("HYPERWARM_DEBUG", None)
    return environ


def run(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=cwd, env=_environ(**env), capture_output=True, text=True,
                          timeout=300)


def assert_one_message(result: subprocess.CompletedProcess, expected: str) -> None:
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("error: "), result.stderr
    assert expected in result.stderr


def _project(root: Path, name: str, cdk_json: str) -> Path:
    (root / name).mkdir()
    (root / name / "cdk.json").write_text(cdk_json)
    return root / name


MARS = json.dumps({"context": {"environments": {"dev": {"region": "mars"}}}})


@pytest.fixture(scope="module")
def module_commands(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess]:
    """Each ``python -m`` command of the tests below, run in its own project folder, all in one program."""
    root = tmp_path_factory.mktemp("entry-points")
    commands = {
        "synth": (_project(root, "synth", MARS), "stacks.synth", ["--outdir", "out"]),
        "malformed": (_project(root, "malformed", '{\n  "context": {\n    "environments": {,}\n  }\n}\n'),
                      "stacks.synth", ["--outdir", "out"]),
        "nested null": (_project(root, "nested", json.dumps(
            {"context": {"environments": {"dev": {"observability": {"ttft_p99": None}}}}})),
                        "stacks.synth", ["--outdir", "out"]),
        "plan": (_project(root, "plan", MARS), "stacks", ["plan", "cache", "--env", "dev"]),
    }
    ran = subprocess.run([sys.executable, "-c", _RUN_MODULES], env=_environ(), capture_output=True, text=True,
                         timeout=300, input=json.dumps([[str(cwd), module, args] for cwd, module, args in
                                                        commands.values()]))
    assert ran.returncode == 0, ran.stderr
    return {name: subprocess.CompletedProcess([module, *args], r["returncode"], "", r["stderr"])
            for (name, (_, module, args)), r in zip(commands.items(), json.loads(ran.stdout), strict=True)}


def test_make_synth_prints_one_message_for_a_config_error(module_commands) -> None:
    assert_one_message(module_commands["synth"],
                       "environments.dev.region: 'mars' -- must be an AWS region name, e.g. us-west-2")


def test_malformed_cdk_json_names_file_line_and_column(module_commands) -> None:
    assert_one_message(module_commands["malformed"], "cdk.json:3:22: Expecting property name enclosed in double quotes")


def test_cdk_app_entry_point_prints_one_message_for_a_config_error(tmp_path: Path) -> None:
    # The cdk CLI runs app.py with the context in CDK_CONTEXT_JSON.
    project = _project(tmp_path, "project", MARS)
    context = json.dumps({"environments": {"dev": {"region": "mars"}}})
    result = run([str(REPO / "app.py")], project, CDK_CONTEXT_JSON=context, CDK_OUTDIR=str(project / "out"))
    assert_one_message(result, "environments.dev.region: 'mars'")


def test_a_null_environment_in_cdk_json_fails_the_cdk_app_though_the_cli_drops_it(tmp_path: Path,
                                                                                   module_commands) -> None:
    """The cdk CLI passes cdk.json's context without its null values: dev would vanish without a word."""
    (tmp_path / "cdk.json").write_text(json.dumps({"context": {"environments": {"dev": None, "prod": {}}}}))
    dropped = json.dumps({"environments": {"prod": {}}})  # what the CLI puts into CDK_CONTEXT_JSON
    result = run([str(REPO / "app.py")], tmp_path, CDK_CONTEXT_JSON=dropped, CDK_OUTDIR=str(tmp_path / "out"))
    assert_one_message(result, "cdk.json: environments.dev: null -- give a value or remove the key")
    assert_one_message(module_commands["nested null"], "cdk.json: environments.dev.observability.ttft_p99: null")


def test_unknown_environment_selection_names_the_configured_ones(tmp_path: Path) -> None:
    project = _project(tmp_path, "project", MARS)
    context = json.dumps({"environments": {"dev": {}}, "env": "prod"})
    result = run([str(REPO / "app.py")], project, CDK_CONTEXT_JSON=context, CDK_OUTDIR=str(project / "out"))
    assert_one_message(result, "-c env=prod: unknown environment(s) prod; configured: dev")


def test_the_planner_command_prints_one_message_for_a_config_error(module_commands) -> None:
    # `hyperwarm plan cache` (python -m stacks) reads the same cdk.json: a usage error, exit 2
    result = module_commands["plan"]
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        "python -m stacks plan cache: invalid configuration for environment 'dev':",
        "  environments.dev.region: 'mars' -- must be an AWS region name, e.g. us-west-2"]
