"""The refresh function's wire contract (lambdas/cache_refresh/contract.py) is defined once, and the
construct and the function agree on it: what the construct writes the function parses; a target one
side rejects the other rejects too; the bundle runs under the Lambda name with its pinned dependencies."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import aws_cdk as cdk
import boto3
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template
from stand_ins import cached_model, imported_cluster

from hyperwarm import (
    BlueGreen,
    CacheRefreshHook,
    CacheRefreshHookProps,
    EndpointRefreshTarget,
    HyperPodRefreshTarget,
    InferenceEndpoint,
    InstanceGroupSpec,
    RefreshedPrefix,
)
from hyperwarm.functions.cache_refresh import config, contract

REPO = Path(__file__).resolve().parent.parent
ROLE = "arn:aws:iam::123456789012:role/sagemaker-exec"


def _stack() -> cdk.Stack:
    return cdk.Stack(cdk.App(), "T", env=cdk.Environment(account="123456789012", region="us-west-2"))


def _endpoint(stack: cdk.Stack, name: str, role: bool = True) -> InferenceEndpoint:
    return InferenceEndpoint.from_endpoint_attributes(
        stack, f"E-{name}", endpoint_name=name,
        execution_role=iam.Role.from_role_arn(stack, f"R-{name}", ROLE) if role else None)


def _hook(stack: cdk.Stack, *, hyperpod=(), endpoints=()) -> CacheRefreshHook:
    return CacheRefreshHook(stack, "Hook", CacheRefreshHookProps(models=[RefreshedPrefix(
        prefix="models/llama", hyperpod=list(hyperpod), endpoints=list(endpoints))]))


def test_what_the_construct_writes_the_function_parses_back() -> None:
    stack = _stack()
    cluster = imported_cluster(stack, [InstanceGroupSpec(name="gpu", instance_type="ml.g5.xlarge", holds_caches=True)])
    _hook(stack, hyperpod=[HyperPodRefreshTarget(cached_model(cluster, "llama", "models", kind="JumpStartModel")),
                           HyperPodRefreshTarget(cached_model(cluster, "qwen", "models", node_cached=True))],
          endpoints=[EndpointRefreshTarget(_endpoint(stack, "chat"), BlueGreen(
              traffic="LINEAR", step_percent=25, wait=cdk.Duration.minutes(3),
              rollback_alarms=[cdk.aws_cloudwatch.Alarm.from_alarm_name(stack, "A", "chat-5xx")]))])
    (function,) = [f["Properties"] for f in Template.from_stack(stack).find_resources("AWS::Lambda::Function").values()
                   if f["Properties"].get("Handler") == contract.REFRESH_HANDLER]
    variables = function["Environment"]["Variables"]  # the table, bucket and queue are references
    settings = config.load({k: v if isinstance(v, str) else "deploy-time" for k, v in variables.items()})
    assert settings.targets == {"models/llama": (
        contract.HyperPodTarget(cluster="hyperpod-eks", namespace="models", name="llama", resource="JumpStartModel",
                                staging_timeout_seconds=300),  # 16 GB: the least
        contract.HyperPodTarget(cluster="hyperpod-eks", namespace="models", name="qwen",
                                node_cache=contract.NodeCache("qwen"), staging_timeout_seconds=300),
        contract.EndpointTarget(endpoint="chat", blue_green=contract.BlueGreen(
            traffic="LINEAR", step_percent=25, wait_seconds=180, rollback_alarms=("chat-5xx",))))}
    assert variables[contract.SERVICE_VARIABLE] == contract.SERVICE


@pytest.mark.parametrize("hyperpod, blue_green, endpoint, field, value, construct_field", [
    ({"resource": "Deployment"}, {}, "chat", "resource", "Deployment", "resource"),
    ({"namespace": "Models_NS"}, {}, "chat", "namespace", "Models_NS", "namespace"),
    # a node-cached model is read through a kubernetesVolume, which only an InferenceEndpointConfig has
    ({"resource": "JumpStartModel", "node_cache": {"model": "llama"}}, {}, "chat", "resource", "JumpStartModel",
     "resource"),
    ({}, {"traffic": "SOMETIMES"}, "chat", "blue_green.traffic", "SOMETIMES", "blue_green.traffic"),
    # SageMaker's own limits (TrafficRoutingConfig): CanarySize <= 50 %, LinearStepSize 10..50 %
    ({}, {"traffic": "CANARY", "step_percent": 0}, "chat", "blue_green.step_percent", 0, "blue_green.step_percent"),
    ({}, {"traffic": "CANARY", "step_percent": 51}, "chat", "blue_green.step_percent", 51, "blue_green.step_percent"),
    ({}, {"traffic": "LINEAR", "step_percent": 5}, "chat", "blue_green.step_percent", 5, "blue_green.step_percent"),
    # The endpoint itself (created or imported) already checks its name with the contract's rule.
    ({}, {}, "chat_api", "endpoint", "chat_api", "endpoint_name"),
])
def test_a_target_the_function_rejects_fails_synth_naming_the_same_field(hyperpod, blue_green, endpoint, field,
                                                                          value, construct_field) -> None:
    wire = {"kind": "hyperpod", "cluster": "c", "namespace": "models", "name": "llama", **hyperpod} if hyperpod else \
        {"kind": "endpoint", "endpoint": endpoint, "blue_green": blue_green}
    with pytest.raises(contract.ConfigError, match=rf"\]\.{_re(field)} = {_re(repr(value))} -- "):
        contract.parse_targets(json.dumps({"models/llama": [wire]}))
    stack = _stack()
    with pytest.raises(ValueError, match=rf"\b{_re(construct_field)} = {_re(repr(value))} -- "):
        _hook_with(stack, hyperpod, blue_green, endpoint)


@pytest.mark.parametrize("wire, construct, field, allowed", [
    ({"wait_seconds": 3601}, {"wait": cdk.Duration.seconds(3601)}, "wait_seconds", "0..3600"),
    ({"termination_wait_seconds": 7200}, {"termination_wait": cdk.Duration.hours(2)}, "termination_wait_seconds",
     "0..3600"),
    ({"max_execution_seconds": 300}, {"max_execution": cdk.Duration.minutes(5)}, "max_execution_seconds",
     "600..28800"),
])
def test_blue_green_times_updateendpoint_would_reject_fail_synth(wire, construct, field, allowed) -> None:
    # BlueGreenUpdatePolicy's ranges (botocore's model): found at synth, not by a refresh at run time
    (value,) = wire.values()
    with pytest.raises(contract.ConfigError, match=rf"\.blue_green\.{field} = {value} -- allowed: {allowed}"):
        contract.parse_targets(json.dumps({"models/llama": [{"kind": "endpoint", "endpoint": "chat",
                                                             "blue_green": wire}]}))
    stack = _stack()
    with pytest.raises(ValueError, match=rf"blue_green\.{field} = {value} -- allowed: {allowed}"):
        _hook(stack, endpoints=[EndpointRefreshTarget(_endpoint(stack, "chat"), BlueGreen(**construct))])


def _hook_with(stack: cdk.Stack, hyperpod: dict, blue_green: dict, endpoint: str) -> CacheRefreshHook:
    if hyperpod:
        cluster = imported_cluster(stack, [InstanceGroupSpec(name="gpu", instance_type="ml.g5.xlarge")])
        model = cached_model(cluster, "llama", hyperpod.get("namespace", "models"), node_cached="node_cache" in hyperpod,
                             kind=hyperpod.get("resource", "InferenceEndpointConfig"))  # a hand-made handle may lie
        build = {"hyperpod": [HyperPodRefreshTarget(model)]}
    else:
        build = {"endpoints": [EndpointRefreshTarget(_endpoint(stack, endpoint), BlueGreen(**blue_green))]}
    return _hook(stack, **build)


def _re(text: str) -> str:
    import re
    return re.escape(text)


def test_an_imported_endpoint_without_its_execution_role_is_rejected_at_synth() -> None:
    """The refresh passes the endpoint's role to the models it creates: without it the hook used to
    crash with an AttributeError deep in its grants."""
    stack = _stack()
    with pytest.raises(ValueError, match=r"models\[0\]\.endpoints\[0\]\.endpoint = T/E-chat -- its execution_role "
                                         r"is unknown; import it with execution_role"):
        _hook(stack, endpoints=[EndpointRefreshTarget(_endpoint(stack, "chat", role=False))])


def test_the_hook_metrics_are_the_ones_the_function_publishes() -> None:
    stack = _stack()
    hook = _hook(stack, endpoints=[EndpointRefreshTarget(_endpoint(stack, "chat"))])
    failed = hook.metric_refresh_failed()
    assert (failed.namespace, failed.metric_name, failed.dimensions) == (
        contract.METRICS_NAMESPACE, "RefreshFailed", {"service": contract.SERVICE})
    assert hook.metric_refresh_failed(statistic="Maximum").statistic == "Maximum"
    assert hook.metric_dead_letters().metric_name == "ApproximateNumberOfMessagesVisible"
    assert hook.alarms["refresh_failed"].metric is not None and hook.security_group is None and hook.rbac is None


# -- defined once ---------------------------------------------------------------------------------

_GENERATED = REPO / "constructs" / "hyperwarm" / "caches" / "k8s"
"""``cdk8s import``'s output (half of the project's Python by size): written from the vendored CRDs alone, which
``tests/test_caches_types.py`` pins, so it holds no contract value and imports no function package."""
_SOURCES = [p for root in ("constructs", "stacks", "lambdas", "manifests", "rehearsal", "tests", "examples")
            for p in (REPO / root).rglob("*.py") if not p.is_relative_to(_GENERATED)]


def _string_constants(path: Path) -> set[str]:
    """String literals of a module, docstrings left out."""
    tree = ast.parse(path.read_text())
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef)) and n.body
                  and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return {n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings}


def test_the_contract_values_are_written_nowhere_else_in_the_code() -> None:
    """Names and formats both sides must spell alike. (The traffic types and HyperPod kinds are also
    SageMaker's and the operator's own enumerations, used by code that implements each of them. The letter
    format is defined in formats.py with every persisted format, and the contract names it.)"""
    values = {contract.REFRESH_TARGETS, contract.STATE_TABLE, contract.ALLOWED_BUCKETS, contract.DLQ_URL,
              contract.DRY_RUN, contract.LOCK_SECONDS, contract.METRICS_NAMESPACE, contract.LETTER_FORMAT,
              contract.REPLAY_KEY, contract.REFRESH_HANDLER, contract.STATE_HANDLER, contract.DEPLOY_GUARD_HANDLER,
              contract.RECONCILE_HANDLER, contract.RECONCILED_METRIC}
    library = [p for p in _SOURCES if not p.is_relative_to(REPO / "tests") and p.name not in ("contract.py", "formats.py")]
    written = {f"{p.relative_to(REPO)}: {v}" for p in library for v in _string_constants(p) & values}
    assert not written


def test_nothing_imports_the_function_package_by_its_lambda_name() -> None:
    """It is ``hyperwarm.functions.cache_refresh`` everywhere, in the project and in Lambda alike."""
    found = []
    for path in _SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            found += [f"{path.relative_to(REPO)}: {n}" for n in names if n.split(".")[0] == "cache_refresh"]
    assert not found


# -- the bundle -----------------------------------------------------------------------------------

_LAMBDA_RUNTIME = """
import importlib.machinery, sys
asset, site = sys.argv[1], sys.argv[2]
sys.path.insert(0, asset)
class Runtime:  # what the Lambda Python runtime brings: boto3 and its own dependencies, nothing else
    def find_spec(self, name, path=None, target=None):
        if path is None and name in {"boto3", "botocore", "s3transfer", "urllib3", "dateutil", "six"}:
            return importlib.machinery.PathFinder.find_spec(name, [site])
sys.meta_path.append(Runtime())
import importlib
for handler in sys.argv[3:]:
    module, function = handler.rsplit(".", 1)
    assert callable(getattr(importlib.import_module(module), function)), handler
import aws_lambda_powertools
from hyperwarm.functions import cache_refresh, eks_auth
assert all(m.__file__.startswith(asset) for m in (aws_lambda_powertools, cache_refresh, eks_auth))
assert sys.modules["hyperwarm"].__file__.startswith(asset)  # the asset's empty package, not the library
assert not {"aws_cdk", "jsii", "constructs", "hyperwarm.cli"} & set(sys.modules), sorted(sys.modules)
"""


def test_every_handler_imports_from_a_copy_of_the_asset_alone(synthesized, tmp_path) -> None:
    """The asset holds ``hyperwarm/functions/cache_refresh/``, the shared ``eks_auth`` and the pinned
    dependencies: each function's Handler resolves with only that folder (and the runtime's boto3)
    importable, as in Lambda."""
    functions = [f["Properties"] for stack in synthesized.stack_names()
                 for f in synthesized.resources(stack, "AWS::Lambda::Function").values()
                 if str(f["Properties"].get("Handler", "")).startswith(f"{contract.PACKAGE}.")]
    handlers = {f["Handler"] for f in functions}
    assert handlers == {contract.REFRESH_HANDLER, contract.STATE_HANDLER, contract.RECONCILE_HANDLER,
                        contract.ROLLOUT_HANDLER, contract.DEPLOY_GUARD_HANDLER}
    (asset,) = {f["Code"]["S3Key"].removesuffix(".zip") for f in functions}  # one bundle for all five
    copy = tmp_path / "asset"
    shutil.copytree(synthesized.outdir / f"asset.{asset}", copy)
    site = str(Path(boto3.__file__).resolve().parent.parent)
    subprocess.run([sys.executable, "-S", "-c", _LAMBDA_RUNTIME, str(copy), site, *sorted(handlers)], check=True,
                   env={"AWS_REGION": "us-west-2", "PATH": "/usr/bin:/bin"}, cwd=tmp_path, capture_output=True)
