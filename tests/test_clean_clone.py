"""A clone of the project alone runs every test: nothing outside it is read, and CI allows no skip."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SOURCES = ("app.py", "constructs", "lambdas", "manifests", "planner", "rehearsal", "stacks", "tests", "Makefile",
           "pyproject.toml", ".ci")


def test_operator_crds_are_inside_the_project(crds_dir) -> None:
    assert crds_dir.is_relative_to(REPO)
    kinds = {p.name.split("_")[1].removesuffix(".yaml") for p in crds_dir.glob("*.yaml")}
    assert kinds == {"inferenceendpointconfigs", "jumpstartmodels", "modelimagecaches", "modelweightscacheconfigs"}
    provenance = (crds_dir / "README.md").read_text()
    for fact in ("aws/sagemaker-hyperpod-cli", "0986f2cc", "2.3.0", "Apache-2.0"):
        assert fact in provenance


def outside_references(text: str) -> list[str]:
    """Paths into the workspace folder beside the project (its reference data), written as a relative
    path or as pathlib parts. The folder name is split so this guard does not match itself."""
    folder = "sha" + "red"
    return re.findall(rf"{folder}\W{{1,6}}reference|\.\./{folder}", text)


def test_nothing_reads_outside_the_project() -> None:
    offenders = [str(path.relative_to(REPO)) for top in SOURCES for path in
                 ([REPO / top] if (REPO / top).is_file() else (REPO / top).rglob("*"))
                 if path.is_file() and "__pycache__" not in path.parts and path != Path(__file__)
                 and outside_references(path.read_text(errors="ignore"))]
    assert offenders == []


@pytest.mark.gate
def test_a_skipped_test_fails_the_run_under_ci(tmp_path) -> None:
    (tmp_path / "conftest.py").write_text((REPO / "tests" / "conftest.py").read_text())
    (tmp_path / "test_probe.py").write_text(
        "import pytest\n\n"
        "def test_runs():\n    pass\n\n"
        "def test_skips():\n    pytest.skip('data not available')\n\n"
        "@pytest.mark.xfail(reason='known', strict=True)\n"
        "def test_expected_failure():\n    assert False\n")

    def run(ci: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                              cwd=tmp_path, env={**os.environ, "CI": ci}, capture_output=True, text=True)

    under_ci = run("true")
    assert under_ci.returncode == 1, under_ci.stdout
    assert "1 failed, 1 passed, 1 xfailed" in under_ci.stdout
    assert "skipped under CI=true, where every test must run: Skipped: data not available" in under_ci.stdout
    assert "1 passed, 1 skipped, 1 xfailed" in run("false").stdout
    # A whole module skipped at collection fails too.
    (tmp_path / "test_module_skip.py").write_text("import pytest\n\npytest.importorskip('no_such_module_here')\n")
    under_ci = run("true")
    assert under_ci.returncode != 0
    assert "every test must run: Skipped: could not import 'no_such_module_here'" in under_ci.stdout
