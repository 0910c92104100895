"""Static gates: ruff and mypy report nothing (configured in pyproject.toml).

ruff checks the library, the app (stacks, manifests, app.py), the Lambda sources, the rehearsal, the tests and
the example; ``mypy`` checks the library with every ``--strict`` flag (what a team type-checking its app
against hyperwarm sees) and the app and the example with its default settings, in one run. Only the
generated cdk8s types are left out (pyproject.toml)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.gate  # whole-project programs: `make test` runs them, `make test-fast` does not
RUFF_PATHS = ["constructs", "stacks", "manifests", "lambdas", "rehearsal", "tests", "examples", "app.py"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MYPY_FORCE_COLOR": "0", "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=1200)


def test_ruff_finds_nothing() -> None:
    result = _run("ruff", "check", "--no-cache", "--output-format", "concise", *RUFF_PATHS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_finds_nothing() -> None:
    # One run (pyproject.toml's files: the library strictly, the app and the example), one cache: aws-cdk-lib's
    # type information is read once, which is most of mypy's time.
    result = _run("mypy", "--cache-dir", str(REPO / ".venv" / ".mypy_cache" / "project"))
    assert result.returncode == 0, result.stdout + result.stderr


MISUSES = '''
import hyperwarm


def misuse(endpoint: hyperwarm.InferenceEndpoint, caches: hyperwarm.CachedModels) -> None:
    endpoint.metric_model_latency("main", statistc="p90")
    endpoint.metric_invocations("main", period=300)
    hyperwarm.HyperPodRefreshTarget("llama")
    hyperwarm.HyperPodModels(models=["llama"])
    hyperwarm.ContainerImage.from_uri("123456789012.dkr.ecr.us-west-2.amazonaws.com/vllm:0.10.1")
    hyperwarm.caches.HyperPodAutoScaling(max_replicas=2, trigger=hyperwarm.ExporterTrigger("RequestsWaiting", 8))
'''


def test_metric_options_and_model_handles_are_checked_by_mypy(tmp_path: Path) -> None:
    """What a team's type checker reports before synth: a misspelt metric option, a wrong option type, a model's
    name where its handle belongs (each used to pass to jsii or synthesize), and a name renamed in 0.2.0."""
    usage = tmp_path / "misuse.py"
    usage.write_text(MISUSES)
    # A cache of its own: other options than the project run's, which would discard each other's cached modules.
    result = _run("mypy", "--cache-dir", str(REPO / ".venv" / ".mypy_cache" / "misuse"), "--strict",
                  "--enable-error-code", "deprecated", "--no-warn-unused-ignores", str(usage))
    found = [line.split(": error: ")[1] for line in result.stdout.splitlines() if ": error: " in line]
    assert len(found) == 6, result.stdout
    assert 'Unexpected keyword argument "statistc"' in found[0]
    assert '"period"' in found[1] and '"Duration"' in found[1]
    assert '"CachedModelHandle"' in found[2] and '"CachedModelHandle"' in found[3]
    assert "ContainerImage is deprecated: use ServingImage" in found[4], found[4]
    assert "HyperPodAutoScaling is deprecated: use HyperPodAutoscaling" in found[5], found[5]


def _patterns_ending_in_dollar(root: Path) -> list[str]:
    import ast

    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") in ("compile", "match", "fullmatch",
                                                                                 "search") \
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str) \
                    and node.args[0].value.endswith("$") and not node.args[0].value.endswith("\\$"):
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.args[0].value}")
    return found


def test_no_pattern_of_the_functions_ends_in_a_dollar() -> None:
    """The functions judge what others write (S3 keys, manifests, events, kubelet's messages): a pattern ending in
    ``$`` also matches before a final newline (``re.match(r"^v\\d$", "v3\\n")``), so ``\\Z`` ends them. A review found
    ``valid_version("v3\\n")`` true and ordered above ``v2``."""
    from hyperwarm.functions.cache_refresh import events, versions

    assert _patterns_ending_in_dollar(REPO / "lambdas") == []
    assert not events.valid_version("v3\n") and events.valid_version("v3")
    with pytest.raises(versions.UnorderableVersion):
        versions.compare("v3\n", "v2")
