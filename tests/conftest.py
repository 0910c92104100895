"""Shared fixtures: fake AWS credentials, and one synthesis of the whole app per test session.

Under ``CI=true`` a skipped test is a failed one: a clone of the project alone must run every test.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
CRDS = REPO / "constructs" / "hyperwarm" / "caches" / "crds"

# Tests never reach AWS: fake credentials before any boto3 client exists.
for _key, _value in {
    "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
    "AWS_SECURITY_TOKEN": "testing", "AWS_DEFAULT_REGION": "us-west-2", "AWS_REGION": "us-west-2",
}.items():
    os.environ[_key] = _value
os.environ.pop("CDK_DEFAULT_ACCOUNT", None)  # set by the cdk CLI: synth would read the refresh state (stacks/served.py)
os.environ.setdefault("JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION", "1")
# aws-cdk-lib's built-in CloudFormation validation costs each process ~2.5 s to start and every synth of a test's
# minimal stack a third of its time, for warnings only (without cdk.json's validateAgainstDefaultRules). It is off
# in the test processes and on where it gates: the app's synthesis registers it explicitly (Synthesized), as
# `make synth` and `cdk synth` run it, and cfn-lint lints every template (tests/test_templates.py).
os.environ["CDK_VALIDATION"] = "false"


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


def _exit_without_finalizing() -> None:
    """A pytest-xdist worker ends here, after every exit handler registered later (jsii's, which stops its Node):
    the interpreter's finalization would free a whole run's objects one by one, seconds the controller waits
    through at the end of every run, for memory the process returns to the system anyway."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # xdist reads the worker's results from its channel, never its exit status


def project_context() -> dict[str, Any]:
    """The CDK context of cdk.json (a fresh copy each call)."""
    return json.loads((REPO / "cdk.json").read_text())["context"]


class Synthesized:
    """The project app synthesized once, with cdk-nag on: templates by stack name."""

    def __init__(self, outdir: Path) -> None:
        import aws_cdk as cdk

        from stacks.app import build_app

        self.app = build_app(outdir=str(outdir), context=project_context())
        cdk.Validations.of(self.app).add_plugins(cdk.CloudFormationValidatePlugin())  # CDK_VALIDATION is off here
        self.assembly = self.app.synth()
        self.outdir = outdir

    def template(self, stack_name: str) -> dict[str, Any]:
        return self.assembly.get_stack_by_name(stack_name).template

    def stack_names(self) -> list[str]:
        return [s.stack_name for s in self.assembly.stacks]

    def resources(self, stack_name: str, kind: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.template(stack_name)["Resources"].items() if v["Type"] == kind}

    def warnings(self) -> dict[str, list[Any]]:
        """The warnings of each stack that has any, as every ``cdk`` command prints them."""
        from aws_cdk.cx_api import SynthesisMessageLevel

        found = {s.stack_name: [m.entry.data for m in s.messages if m.level == SynthesisMessageLevel.WARNING]
                 for s in self.assembly.stacks}
        return {name: messages for name, messages in found.items() if messages}


@pytest.fixture(name="project_context")
def project_context_fixture() -> dict[str, Any]:
    return project_context()


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return Synthesized(tmp_path_factory.mktemp("cdk.out"))


class ProdVariant:
    """prod with settings cdk.json's prod does not have, synthesized once (nag off) for the tests of each setting:
    its own alarm thresholds, an existing alarm topic and a customer-managed key on its model bucket. Each test
    reads what its setting changes (the thresholds in the alarms, the topic in the alarm actions, the key in the
    IAM policies): the settings touch different properties, so one synthesis serves them all."""

    topic_arn = "arn:aws:sns:us-east-1:123456789012:oncall"
    kms_key_arn = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    observability = {"cold_pod_share_percent": 20, "cold_pod_share_period": 300, "model_latency_p99": 2.5,
                     "ttft_p99": 0.75}

    def __init__(self, outdir: Path) -> None:
        from stacks.app import build_app

        context = project_context()
        prod = context["environments"]["prod"]
        prod["observability"] = {**prod["observability"], **self.observability}  # otel_enrichment kept
        prod["alarms"] = {"topic_arn": self.topic_arn}
        prod["model_buckets"] = [{**bucket, "kms_key_arn": self.kms_key_arn} for bucket in prod["model_buckets"]]
        self.app = build_app(outdir=str(outdir), context={**context, "env": "prod"}, nag=False)
        self.assembly = self.app.synth()

    def template(self, stack_name: str) -> dict[str, Any]:
        return self.assembly.get_stack_by_name(stack_name).template


@pytest.fixture(scope="session")
def prod_variant(tmp_path_factory: pytest.TempPathFactory) -> ProdVariant:
    return ProdVariant(tmp_path_factory.mktemp("prod-variant"))


@pytest.fixture(scope="session")
def crds_dir() -> Path:
    """The published operator CRDs, kept in the project with their provenance (constructs/hyperwarm/caches/crds/README.md)."""
    return CRDS


SYNTH_GROUP = "app-synthesis"
SHARED_SYNTHESES = {"synthesized": SYNTH_GROUP, "prod_variant": "prod-variant"}
"""The session's syntheses and the group of the tests that read each (on one worker it is built once)."""
GROUPS = "HYPERWARM_TEST_GROUPS"
"""The folder where the workers write each test's group for the controller's scheduler (set by the controller)."""


def _shares_a_fixture(item: pytest.Item) -> bool:
    """Whether the test uses a fixture of the project built once for several tests (module, class or
    session scope; pytest's own, such as tmp_path_factory, cost nothing to share)."""
    return any(defs and defs[-1].baseid and defs[-1].scope != "function"
               for defs in item._fixtureinfo.name2fixturedefs.values())


def _group(item: pytest.Item) -> str | None:
    """Where a test runs: with the others that read the same session synthesis (built once per worker, so on
    one worker it is built once), with its file when it shares a fixture with it (the fixture is built
    once), in the group it names (the long histories, split over the workers), or else alone, wherever
    a worker is free."""
    named = item.get_closest_marker("xdist_group")
    if named:
        return str(named.args[0])
    shared = [group for fixture, group in SHARED_SYNTHESES.items() if fixture in item.fixturenames]
    if shared:
        return shared[0]
    return item.nodeid.split("::")[0] if _shares_a_fixture(item) else None


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):  # a worker itself, not a program it starts (which inherits its environment)
        atexit.register(_exit_without_finalizing)
    elif config.getoption("dist", "no") == "loadgroup":
        os.environ[GROUPS] = tempfile.mkdtemp(prefix="hyperwarm-test-groups-")  # the workers inherit it


def pytest_unconfigure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput") and os.environ.get(GROUPS):
        shutil.rmtree(os.environ.pop(GROUPS), ignore_errors=True)


def _start_first(item: pytest.Item) -> int:
    """Longest first: the gates (one program each, the mypy gate up to a minute and a half from an empty cache)
    and the long histories begin while the many short tests fill the other worker, instead of ending the run
    as its tail."""
    return 0 if item.get_closest_marker("gate") else 1 if item.get_closest_marker("slow") else 2


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_start_first)  # stable: the order within each kind is pytest's
    worker = getattr(config, "workerinput", {}).get("workerid")
    if worker and os.environ.get(GROUPS):
        groups = {item.nodeid: group for item in items if (group := _group(item))}
        (Path(os.environ[GROUPS]) / f"{worker}.json").write_text(json.dumps(groups))


@pytest.hookimpl(optionalhook=True)  # a run with -p no:xdist has no such hook
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` scheduling by :func:`_group`. pytest-xdist 3.8 marks a group by renaming the
    test's node id, which pytest 9 no longer reads (its ids are structured), so every test was scheduled
    alone and each worker synthesized the app; here the controller reads the groups the workers wrote."""
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):
        _groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._groups is None:
                self._groups = {}
                for written in Path(os.environ[GROUPS]).glob("*.json"):
                    self._groups.update(json.loads(written.read_text()))
            return self._groups.get(nodeid, nodeid)

    return ByGroup(config, log)


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


@pytest.fixture
def responses(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What a custom resource's function PUTs to CloudFormation's presigned URL (the deploy guards' answers)."""
    sent: list[dict[str, Any]] = []

    class Answer:
        def __enter__(self) -> Answer:
            return self

        def __exit__(self, *args: Any) -> None:
            return None

        def read(self) -> bytes:
            return b""

    def urlopen(request: Any, timeout: float) -> Answer:
        assert request.get_method() == "PUT" and request.full_url.startswith("https://cloudformation-")
        sent.append(json.loads(request.data))
        return Answer()

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    return sent
