"""Static gates: ruff and mypy report nothing (configured in pyproject.toml).

ruff checks the library, the app (stacks, manifests, app.py), the Lambda sources, the rehearsal, the tests and
the example; mypy checks the library strictly (``mypy --strict -p hyperwarm``: what a team type-checking its
app against hyperwarm sees) and the app and example with its default settings. Paths being reworked are left
out in pyproject.toml, each marked "pending"."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
RUFF_PATHS = ["constructs", "stacks", "manifests", "lambdas", "rehearsal", "tests", "examples", "app.py"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MYPY_FORCE_COLOR": "0", "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=1200)


def test_ruff_finds_nothing() -> None:
    result = _run("ruff", "check", "--no-cache", "--output-format", "concise", *RUFF_PATHS)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("name, target", [
    ("strict", ["--strict", "-p", "hyperwarm"]),
    ("app", ["stacks", "app.py", "examples/my_platform_app.py", "tests/typed_usage.py"]),
], ids=["library (strict)", "app"])
def test_mypy_finds_nothing(name: str, target: list[str]) -> None:
    # One cache per option set: the two runs check hyperwarm's modules with different options, and a shared
    # cache would be rebuilt by each (minutes: aws-cdk-lib's stubs are large).
    result = _run("mypy", "--cache-dir", str(REPO / ".venv" / ".mypy_cache" / name), *target)
    assert result.returncode == 0, result.stdout + result.stderr
