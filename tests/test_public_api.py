"""The public surface reads like aws-cdk-lib's: every public class's annotations resolve at run time (pdoc, pydantic
and a team's own tooling call ``typing.get_type_hints``), and a name a pure module types for checkers only loads
nothing until asked."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import subprocess
import sys
import typing
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Template
from stand_ins import MODEL, imported_cluster

import hyperwarm
from hyperwarm import HyperPodEksCluster, HyperPodEksClusterProps, IHyperPodCluster, InstanceGroupSpec

REPO = Path(__file__).resolve().parent.parent


def _public_classes() -> list[tuple[str, type]]:
    """Every class ``hyperwarm`` or one of its packages exports."""
    found = {}
    for module in [hyperwarm, *(importlib.import_module(f"hyperwarm.{p}") for p in sorted(PACKAGES))]:
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isclass(value):
                found.setdefault(f"{value.__module__}.{value.__qualname__}", (name, value))
    return sorted(found.values(), key=lambda item: item[0])


def test_get_type_hints_works_on_every_public_class_and_method() -> None:
    broken = []
    for name, cls in _public_classes():
        for where, target in [(name, cls), *((f"{name}.{m}", f) for m, f in inspect.getmembers(cls, inspect.isfunction)
                                              if not m.startswith("_") or m == "__init__")]:
            try:
                typing.get_type_hints(target)
            except Exception as exc:  # noqa: BLE001 - every failure is listed
                broken.append(f"{where}: {type(exc).__name__}: {exc}")
    assert len(_public_classes()) > 60 and broken == []


def test_instance_group_specs_still_load_without_aws_cdk() -> None:
    """Its ``cdk.Size`` annotation resolves on first use: loading the module starts no Node."""
    code = ("import sys, typing, hyperwarm.cluster.instance_group as m\n"
            "assert 'aws_cdk' not in sys.modules\n"
            "import aws_cdk\n"
            "assert typing.get_type_hints(m.InstanceGroupSpec)['ebs_volume'] == typing.Optional[aws_cdk.Size]\n")
    subprocess.run([sys.executable, "-c", code], check=True)


PACKAGES = {"caches", "cluster", "endpoints", "observability", "planner", "refresh", "serving"}
"""``hyperwarm``'s public packages: each exports its names (``__all__``)."""
PUBLIC_MODULES = {"hyperwarm.cli", "hyperwarm.constraints"}
"""Library modules public as a whole (a command line, the props' constraint vocabulary), besides the packages."""
APP = [p for root in ("stacks", "manifests", "examples") for p in (REPO / root).rglob("*.py")] + [REPO / "app.py"]


def _private_uses(path: Path) -> list[str]:
    """``module.name`` for every name ``path`` takes from the library that the library does not export: a name of
    ``hyperwarm`` or of a public package (``hyperwarm.caches`` ...) outside its ``__all__``, anything of a submodule
    or of ``_internal``. The functions' contract modules (``hyperwarm.functions.*``) are their documented wire
    contract, and :data:`PUBLIC_MODULES` public as a whole."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):  # ``import hyperwarm.x.y``: the package itself, a public package, a contract
            found += [f"{path.relative_to(REPO)}: {a.name}" for a in node.names if a.name.startswith("hyperwarm.")
                      and a.name.removeprefix("hyperwarm.") not in PACKAGES and a.name not in PUBLIC_MODULES
                      and not (a.name.startswith("hyperwarm.functions.") and "._" not in a.name)]
            continue
        if not (isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "hyperwarm"):
            continue
        module = node.module
        if module in PUBLIC_MODULES or (module.startswith("hyperwarm.functions.") and "._" not in module):
            continue
        for alias in node.names:
            if f"{module}.{alias.name}" in PUBLIC_MODULES or (module == "hyperwarm" and alias.name in PACKAGES):
                continue
            package = importlib.import_module(module) if module.count(".") <= 1 else None
            if package is None or alias.name not in getattr(package, "__all__", ()):
                found.append(f"{path.relative_to(REPO)}: {module}.{alias.name}")
    return found


def test_the_app_and_the_example_use_only_what_the_library_exports() -> None:
    """The app composes the library as any team's app would: no underscore module, no submodule's unexported name
    (the issue: ``caches.objects.weights_cache_name``)."""
    assert len(APP) > 20
    assert [use for path in APP for use in _private_uses(path)] == []


def test_the_check_finds_a_private_import(tmp_path: Path) -> None:
    app = tmp_path / "app.py"
    app.write_text("import hyperwarm._internal.retention\nimport hyperwarm.caches\n"
                   "from hyperwarm._internal.retention import retain_except_on_create\n"
                   "from hyperwarm.caches.objects import weights_cache_name\n"
                   "from hyperwarm.caches import CachedModels, objects\n"
                   "from hyperwarm import retain_except_on_create\n")
    original = Path.relative_to
    Path.relative_to = lambda self, *other: self.name  # type: ignore[method-assign,assignment]
    try:
        assert _private_uses(app) == ["app.py: hyperwarm._internal.retention",
                                      "app.py: hyperwarm._internal.retention.retain_except_on_create",
                                      "app.py: hyperwarm.caches.objects.weights_cache_name",
                                      "app.py: hyperwarm.caches.objects"]
    finally:
        Path.relative_to = original  # type: ignore[method-assign]

def _cluster_stack() -> cdk.Stack:
    return cdk.Stack(cdk.App(), "T", env=cdk.Environment(account="123456789012", region="us-west-2"))


def test_the_cluster_is_a_resource_whose_connections_open_its_node_security_group() -> None:
    """Like an ``rds.DatabaseCluster``: ``peer.connections.allow_to(cluster, port)`` opens the nodes' group."""
    stack = _cluster_stack()
    cluster = HyperPodEksCluster(stack, "HyperPod", HyperPodEksClusterProps(
        instance_groups=[InstanceGroupSpec(name="system", instance_type="ml.m5.xlarge")],
        install_inference_operator=False))
    assert cdk.Resource.is_resource(cluster) and cluster.env.region == "us-west-2"
    peer = ec2.SecurityGroup(stack, "Peer", vpc=cluster.vpc)
    peer.connections.allow_to(cluster, ec2.Port.tcp(8080), "peer to the nodes")
    Template.from_stack(stack).has_resource_properties("AWS::EC2::SecurityGroupIngress", {
        "GroupId": stack.resolve(cluster.security_group.security_group_id), "FromPort": 8080,
        "SourceSecurityGroupId": stack.resolve(peer.security_group_id)})


def test_an_imported_cluster_has_connections_too() -> None:
    stack = _cluster_stack()
    cluster: IHyperPodCluster = imported_cluster(stack, [InstanceGroupSpec(name="system", instance_type="ml.m5.xlarge")])
    assert cdk.Resource.is_resource(cluster)
    assert [g.security_group_id for g in cluster.connections.security_groups] == ["sg-0123456789abcdef0"]
    fs = ec2.SecurityGroup(stack, "FileSystem", vpc=cluster.vpc)
    fs.connections.allow_from(cluster, ec2.Port.tcp(988), "Lustre from the nodes")
    Template.from_stack(stack).has_resource_properties("AWS::EC2::SecurityGroupIngress", {
        "GroupId": stack.resolve(fs.security_group_id), "FromPort": 988, "SourceSecurityGroupId": "sg-0123456789abcdef0"})


# -- closed sets of strings: one Literal alias each, exported, checked with one clear error ---------------------

CHOICE_FIELDS = [  # (class, field, exported alias, its values)
    (hyperwarm.BlueGreen, "traffic", "TrafficType", ("ALL_AT_ONCE", "CANARY", "LINEAR")),
    (hyperwarm.TrafficShift, "type", "TrafficType", ("ALL_AT_ONCE", "CANARY", "LINEAR")),
    (hyperwarm.Routing, "strategy", "EndpointRoutingStrategy",
     ("RANDOM", "LEAST_OUTSTANDING_REQUESTS", "PREFIX_AWARE", "KV_AWARE")),
    (hyperwarm.HyperPodEksClusterProps, "node_recovery", "NodeRecovery", ("Automatic", "None")),
    (hyperwarm.HyperPodEksClusterProps, "kubernetes_version", "KubernetesVersion",
     ("1.30", "1.31", "1.32", "1.33", "1.34", "1.35")),
    (hyperwarm.NodeTaint, "effect", "TaintEffect", ("NoSchedule", "PreferNoSchedule", "NoExecute")),
    (hyperwarm.InstanceGroupSpec, "threads_per_core", "ThreadsPerCore", (1, 2)),
    (hyperwarm.CachedModelSpec, "weights_cache", "WeightsCache", ("node", "operator", "off")),
    (hyperwarm.CloudWatchTrigger, "metric_type", "MetricType", ("Average", "Value")),
]


@pytest.mark.parametrize("cls, name, alias, values", CHOICE_FIELDS, ids=lambda v: getattr(v, "__name__", str(v)))
def test_a_closed_set_of_choices_is_typed_by_an_exported_literal_alias(cls, name, alias, values) -> None:
    exported = getattr(hyperwarm, alias)
    assert alias in hyperwarm.__all__ and typing.get_args(exported) == values
    hint = typing.get_type_hints(cls)[name]
    assert exported in (hint, *typing.get_args(hint)), f"{cls.__name__}.{name}: {hint}"


def test_traffic_types_are_the_refresh_contracts() -> None:
    from hyperwarm.functions.cache_refresh import contract

    assert typing.get_args(hyperwarm.TrafficType) == contract.TRAFFIC_TYPES


def _one_error(build: typing.Callable[[], object], line: str) -> None:
    with pytest.raises(ValueError) as error:
        build()
    lines = [ln.strip() for ln in str(error.value).splitlines()]
    assert [ln for ln in lines if ln.split(" -- ")[0] == line.split(" -- ")[0]] == [line], str(error.value)


def test_a_bad_choice_is_one_error_naming_field_value_and_allowed_values() -> None:
    system = InstanceGroupSpec(name="system", instance_type="ml.m5.xlarge")
    tainted = InstanceGroupSpec(name="tainted", instance_type="ml.m5.xlarge", taints=(
        hyperwarm.NodeTaint(key="k", effect="Never"),))  # type: ignore[arg-type]
    _one_error(lambda: HyperPodEksCluster(_cluster_stack(), "C", HyperPodEksClusterProps(
        instance_groups=[system], node_recovery="Sometimes")),  # type: ignore[arg-type]
        "node_recovery = 'Sometimes' -- allowed: Automatic, None")
    _one_error(lambda: HyperPodEksCluster(_cluster_stack(), "C", HyperPodEksClusterProps(
        instance_groups=[system, tainted])),
        "instance_groups[1].taints[0].effect = 'Never' -- allowed: NoSchedule, PreferNoSchedule, NoExecute")

    def endpoint(**props: typing.Any) -> object:
        return hyperwarm.InferenceEndpoint(_cluster_stack(), "Chat", hyperwarm.InferenceEndpointProps(
            endpoint_name="chat", **props))
    main = {"name": "main", "model": MODEL, "instance_type": "ml.g5.2xlarge", "instance_count": 2}
    _one_error(lambda: endpoint(variants=[hyperwarm.ProductionVariant(**main, routing=hyperwarm.Routing(
        "ROUND_ROBIN"))]),  # type: ignore[arg-type]
        "variant 'main': routing.strategy = 'ROUND_ROBIN' -- allowed: RANDOM, LEAST_OUTSTANDING_REQUESTS, PREFIX_AWARE, "
        "KV_AWARE")
    _one_error(lambda: endpoint(variants=[hyperwarm.ProductionVariant(**main)], guardrails=hyperwarm.DeploymentGuardrails(
        traffic=hyperwarm.TrafficShift("SOMETIMES"))),  # type: ignore[arg-type]
        "guardrails.traffic.type = 'SOMETIMES' -- allowed: ALL_AT_ONCE, CANARY, LINEAR")


# -- every library name the docs and the example use is exported ---------------------------------------------------

REPO = Path(__file__).resolve().parent.parent
_BACKTICKED = re.compile(r"`(?:hyperwarm\.)?([A-Z][A-Za-z0-9]+)(?:[.(\[][^`\n]*)?`")
"""A backticked name (``CachedModelSpec``, ``hyperwarm.BlueGreen(...)``, ``InstanceGroupSpec.taints``): its head."""


def _library_classes() -> set[str]:
    """Public class names defined anywhere in the library but its generated CRD bindings."""
    return {node.name for path in (REPO / "constructs/hyperwarm").rglob("*.py") if "k8s" not in path.parts
            for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.ClassDef)
            and not node.name.startswith("_")}


def test_every_library_name_the_readme_guide_and_example_use_is_exported() -> None:
    used: dict[str, set[str]] = {}
    for doc in ("README.md", "docs/library-guide.md"):
        for name in _BACKTICKED.findall((REPO / doc).read_text()):
            used.setdefault(name, set()).add(doc)
    for example in (REPO / "examples").rglob("*.py"):
        for node in ast.walk(ast.parse(example.read_text())):  # code, not the docstring's prose
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "hyperwarm":
                used.setdefault(node.attr, set()).add(str(example.relative_to(REPO)))
    classes = _library_classes()
    assert {"CachedModelSpec", "BlueGreen", "HyperPodEksCluster"} <= used.keys() & classes  # the extraction works
    missing = {name: sorted(where) for name, where in used.items()
               if (name in classes or where & {"examples/my_platform_app.py"}) and name not in hyperwarm.__all__}
    assert missing == {}


# -- renamed in 0.2.0: the old names work for one release, with a warning ---------------------------------------------

RENAMED = [("CachedModelProps", "CachedModelSpec", "caches"), ("HyperPodAutoScaling", "HyperPodAutoscaling", "caches"),
           ("ContainerImage", "ServingImage", "serving"), ("ContainerImageConfig", "ServingImageConfig", "serving")]


@pytest.mark.parametrize("old, new, package", RENAMED, ids=[r[0] for r in RENAMED])
def test_an_old_name_still_works_and_warns_naming_the_new_one(old: str, new: str, package: str) -> None:
    subpackage = importlib.import_module(f"hyperwarm.{package}")
    for module in (hyperwarm, subpackage):
        with pytest.warns(DeprecationWarning, match=rf"{module.__name__}\.{old} is deprecated: use "
                                                    rf"{module.__name__}\.{new} \(the old name goes in hyperwarm 0\.3\.0\)"):
            assert getattr(module, old) is getattr(module, new)
        assert old not in module.__all__ and new in module.__all__
    with pytest.warns(DeprecationWarning, match=f"hyperwarm.{old} is deprecated"):
        exec(f"from hyperwarm import {old}", {})  # noqa: S102 - the import statement a user's app has
    with pytest.raises(AttributeError, match="No hyperwarm attribute CachedModelProp$"):
        hyperwarm.CachedModelProp  # noqa: B018 - a misspelt name still fails
    other = importlib.import_module("hyperwarm.serving" if package == "caches" else "hyperwarm.caches")
    with pytest.raises(AttributeError, match=rf"No {other.__name__} attribute {old}$"):
        getattr(other, old)  # another package never had it: no warning pointing at a name it lacks


def test_an_old_name_still_builds_what_the_new_one_does() -> None:
    with pytest.warns(DeprecationWarning):
        image = hyperwarm.ContainerImage.from_uri("123456789012.dkr.ecr.us-east-1.amazonaws.com/vllm:0.27.1")
    assert isinstance(image, hyperwarm.ServingImage)
