"""What synth loads: the app reads cfn-lint's and botocore's data files without importing either (their imports
cost about a second of every synth, docs/performance.md), and gets the same answers as the packages themselves."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from stacks.config.environment import sagemaker_regions
from stacks.config.regional import _offered

REPO = Path(__file__).resolve().parent.parent


def test_sagemaker_regions_are_the_ones_boto3_lists() -> None:
    import boto3

    session = boto3.session.Session()
    assert sagemaker_regions() == tuple(sorted(
        {region for partition in session.get_available_partitions()
         for region in session.get_available_regions("sagemaker", partition_name=partition)}))
    assert {"us-west-2", "cn-north-1", "us-gov-west-1"} <= set(sagemaker_regions())


@pytest.mark.parametrize("kind", ["aws_sagemaker_cluster", "aws_sagemaker_hosting"])
def test_instance_types_per_region_are_cfn_lints_own_data(kind: str) -> None:
    data = resources.files(f"cfnlint.data.schemas.extensions.{kind}").joinpath("instancetype_enum.json")
    expected = {region: frozenset(entry["enum"]) for region, entry in json.loads(data.read_text()).items()
                if isinstance(entry, dict)}
    assert _offered(kind) == expected and "us-west-2" in expected


_BUILD_PROD = """
import json, sys, tempfile
from pathlib import Path
sys.path.insert(0, "tests")
from jsii_requests import counted
from stacks.app import build_app, freeze_imports
import gc
freeze_imports()  # as app.py does
frozen = gc.get_freeze_count()
loaded = set(sys.modules)
context = json.loads(Path("cdk.json").read_text())["context"]
context["env"] = "prod"
with counted() as requests:
    build_app(outdir=tempfile.mkdtemp(), context=context, nag=False).synth()
print(json.dumps({"imported": sorted({m.split(".")[0] for m in set(sys.modules) - loaded}), "requests": requests,
                  "frozen": frozen, "tracked": len(gc.get_objects())}))
"""


@pytest.fixture(scope="module")
def prod_build() -> dict[str, Any]:
    """Building and synthesizing prod in a fresh process (as ``cdk synth`` does): the top-level packages it imported,
    and its jsii requests by kind (each a round trip to Node, ~0.3 ms)."""
    result = subprocess.run([sys.executable, "-c", _BUILD_PROD], cwd=REPO, check=True, capture_output=True,
                            text=True)
    return dict(json.loads(result.stdout.splitlines()[-1]))


@pytest.mark.gate
def test_the_apps_imports_are_out_of_the_garbage_collectors_reach(prod_build: dict[str, Any]) -> None:
    """A full collection while building the app would walk every object the imports made (0.09-0.19 s for prod,
    docs/performance.md); frozen, it walks only what the build made, fewer than the imports' own."""
    assert prod_build["frozen"] > 100_000
    assert prod_build["tracked"] < prod_build["frozen"]


@pytest.mark.parametrize("entry", ["app.py", "stacks/synth.py", "stacks/bench.py"])
def test_every_entry_point_freezes_its_imports_before_building(entry: str) -> None:
    """``cdk synth`` (app.py), ``make synth`` and the bench that times the former."""
    source = (REPO / entry).read_text()
    if entry == "stacks/bench.py":  # the program it times is a string
        source = next(n.value.right.value for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Assign)
                      and getattr(n.targets[0], "id", "") == "_OURS")
    calls = sorted((n.lineno, n.func.id) for n in ast.walk(ast.parse(source))
                   if isinstance(n, ast.Call) and isinstance(n.func, ast.Name))
    names = [name for _, name in calls]
    assert "freeze_imports" in names and names.index("freeze_imports") < names.index("build_app"), names


@pytest.mark.gate
def test_synthesizing_prod_imports_no_linter_and_no_aws_sdk(prod_build: dict[str, Any]) -> None:
    imported = set(prod_build["imported"])
    assert not imported & {"cfnlint", "sympy", "boto3", "botocore", "sagemaker_core", "pandas"}, imported


def test_the_token_check_answers_plain_values_as_aws_cdk_lib_does() -> None:
    import aws_cdk as cdk

    from hyperwarm._internal.tokens import unresolved

    stack = cdk.Stack(cdk.App(), "T")
    bucket = cdk.aws_s3.Bucket(stack, "B")
    tokens = [stack.region, stack.account, bucket.bucket_name, f"arn:{stack.partition}:s3:::x", cdk.Fn.ref("X"),
              cdk.Fn.join("-", ["a", stack.region]), cdk.Token.as_list(cdk.Fn.ref("L")),
              cdk.Token.as_number(cdk.Fn.ref("N")), bucket.bucket_arn + "/*"]
    plain = ["", "us-west-2", "${Token", "{Token[x]}", "$Token[1]", 0, 3, True, False, 1.5, -1e300, ["a"], None,
             cdk.Token.as_list(cdk.Fn.ref("L"))[0]]  # a list token's element is none on its own
    for value in tokens + plain:
        assert unresolved(value) == bool(value is not None and cdk.Token.is_unresolved(value)), value
    assert all(unresolved(v) for v in tokens)


@pytest.mark.gate
def test_synthesizing_prod_makes_few_jsii_round_trips(prod_build: dict[str, Any]) -> None:
    prod_requests: dict[str, int] = prod_build["requests"]
    # Counts, not time: deterministic. Each bound was the cut that met it (docs/performance.md, "Synth time").
    total = sum(n for kind, n in prod_requests.items() if " " not in kind)
    assert total > 1000, "the requests were not counted"
    assert total <= 2850, total  # 4506, then 3536 before the cuts
    # A Python aspect on a stack is called back for every construct (~800 for prod): hyperwarm's walk the
    # scope once instead (hyperwarm._internal.aspects.at_synth). read_through_outputs stays an aspect on the
    # endpoints stack (~50 callbacks), as it must cover resources other aspects add.
    assert prod_requests.get("complete", 0) <= 80, prod_requests.get("complete")
    # RetainExceptOnCreate reads each resource's DeletionPolicy once, through the typed interface (twice before).
    assert prod_requests.get("get .deletionPolicy", 0) <= prod_requests.get("get .cfnOptions", 0)
    # Durations and Sizes made from cdk.json's numbers are known without asking (181 reads before).
    measured = sum(prod_requests.get(f"invoke .{m}", 0) for m in ("isUnresolved", "toSeconds", "toBytes"))
    assert measured <= 60, measured
    # Metric periods share one Duration (hyperwarm._internal.durations): 178 before.
    durations = sum(n for kind, n in prod_requests.items() if kind.startswith("sinvoke Duration."))
    assert durations <= 80, durations
    assert prod_requests.get("get .partition", 0) <= 10  # arn_prefix reads it once per stack: 65 before


def _aws_cdk_names(tree: ast.Module) -> set[str]:
    """The names a module binds to aws-cdk-lib or constructs (``cdk``, ``iam``, ``Construct``, ...)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.asname or a.name for a in node.names if a.name.split(".")[0] in ("aws_cdk", "constructs")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("aws_cdk", "constructs"):
            names |= {a.asname or a.name for a in node.names}
    return names


def _library_sources() -> Iterator[Path]:
    for path in sorted((REPO / "constructs" / "hyperwarm").rglob("*.py")):
        if not {"functions", "planner", "k8s"} & set(path.relative_to(REPO / "constructs" / "hyperwarm").parts[:-1]):
            yield path


@pytest.mark.gate
def test_the_library_asks_jsii_classes_in_python() -> None:
    """``isinstance`` against an aws-cdk-lib class walks its subclasses through ``ABCMeta`` (~1 ms for each new
    class; CfnResource has ~1,500 subclasses): the library asks ``hyperwarm._internal.kinds.is_a``. A string's
    token check is ``hyperwarm._internal.tokens.unresolved``, not a round trip into jsii."""
    found = []
    for path in _library_sources():
        tree = ast.parse(path.read_text())
        cdk_names = _aws_cdk_names(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
                kinds = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
                roots = [k.value if isinstance(k, ast.Attribute) else k for k in kinds]
                while any(isinstance(r, ast.Attribute) for r in roots):
                    roots = [r.value if isinstance(r, ast.Attribute) else r for r in roots]
                if any(isinstance(r, ast.Name) and r.id in cdk_names for r in roots):
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)}")
            token = node.value.attr if isinstance(getattr(node, "value", None), ast.Attribute) else \
                getattr(getattr(node, "value", None), "id", None)
            if isinstance(node, ast.Attribute) and node.attr == "is_unresolved" and token == "Token" and \
                    path.name != "tokens.py":
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)}")
    assert found == [], "\n".join(found)
