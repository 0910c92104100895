"""Shared fixtures: fake AWS credentials, and one synthesis of the whole app per test session.

Under ``CI=true`` a skipped test is a failed one: a clone of the project alone must run every test.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
CRDS = REPO / "manifests" / "crds"

# Tests never reach AWS: fake credentials before any boto3 client exists.
for _key, _value in {
    "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
    "AWS_SECURITY_TOKEN": "testing", "AWS_DEFAULT_REGION": "us-west-2", "AWS_REGION": "us-west-2",
}.items():
    os.environ[_key] = _value
os.environ.setdefault("JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION", "1")


def _share_botocore_data() -> None:
    """Every botocore session of the test process parses botocore's JSON data once.

    moto sets boto3's default session aside while a mock is active and the Lambda code opens sessions
    of its own (eks_auth), so each test would otherwise build new loaders and re-parse endpoints.json
    and every service model per client: most of a moto-backed test's time. The data is read-only and
    one session already shares it between its clients; sharing it between sessions changes nothing else.
    """
    import botocore.loaders
    import botocore.session

    botocore.session.create_loader = functools.cache(botocore.loaders.create_loader)


_share_botocore_data()
# Caches the library keeps (resolved image URIs, keyed by the installed resolver's version) go to the
# environment running the tests, never the user's home: kept between runs and shared by the workers
# and the programs the tests start (test_images covers an empty cache with a folder of its own).
_CACHE = Path(sys.prefix) / "hyperwarm-test-cache"
os.environ["XDG_CACHE_HOME"] = str(_CACHE) if os.access(sys.prefix, os.W_OK) else tempfile.mkdtemp(
    prefix="hyperwarm-test-cache-")


def project_context() -> dict[str, Any]:
    """The CDK context of cdk.json (a fresh copy each call)."""
    return json.loads((REPO / "cdk.json").read_text())["context"]


class Synthesized:
    """The project app synthesized once, with cdk-nag on: templates by stack name."""

    def __init__(self, outdir: Path) -> None:
        from stacks.app import build_app

        self.app = build_app(outdir=str(outdir), context=project_context())
        self.assembly = self.app.synth()
        self.outdir = outdir

    def template(self, stack_name: str) -> dict[str, Any]:
        return self.assembly.get_stack_by_name(stack_name).template

    def stack_names(self) -> list[str]:
        return [s.stack_name for s in self.assembly.stacks]

    def resources(self, stack_name: str, kind: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.template(stack_name)["Resources"].items() if v["Type"] == kind}


@pytest.fixture(name="project_context")
def project_context_fixture() -> dict[str, Any]:
    return project_context()


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return Synthesized(tmp_path_factory.mktemp("cdk.out"))


@pytest.fixture(scope="session")
def crds_dir() -> Path:
    """The published operator CRDs, kept in the project with their provenance (manifests/crds/README.md)."""
    return CRDS


SYNTH_GROUP = "app-synthesis"


def _shares_a_fixture(item: pytest.Item) -> bool:
    """Whether the test uses a fixture of the project built once for several tests (module, class or
    session scope; pytest's own, such as tmp_path_factory, cost nothing to share)."""
    return any(defs and defs[-1].baseid and defs[-1].scope != "function"
               for defs in item._fixtureinfo.name2fixturedefs.values())


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups (--dist loadgroup)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Place each test on a worker: those that read the app's synthesis together (built once per worker,
    so on one worker it is built once), any other test that shares a fixture with its file (the fixture
    is built once), the rest one by one wherever a worker is free; a test that names a group of its own
    keeps it (the long histories, split over the workers)."""
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        if "synthesized" in item.fixturenames:
            item.add_marker(pytest.mark.xdist_group(SYNTH_GROUP))
        elif _shares_a_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


def _fail_skips_under_ci(report: pytest.TestReport | pytest.CollectReport) -> None:
    if os.environ.get("CI") == "true" and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped under CI=true, where every test must run: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    _fail_skips_under_ci((yield).get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    _fail_skips_under_ci((yield).get_result())
