"""What the optional extras bring: the cluster's one kubectl layer (``hyperpod``) and cdk8s (``caches``), and the
error that names the extra when it is missing."""

from __future__ import annotations

import importlib
import json
import sys

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

from hyperwarm import SUPPORTED_KUBERNETES_VERSIONS, HyperPodEksCluster, HyperPodEksClusterProps, InstanceGroupSpec
from hyperwarm.cluster.rules import DEFAULT_KUBECTL_SERVES, DEFAULT_KUBERNETES_VERSION

SYSTEM = InstanceGroupSpec(name="system", instance_type="ml.m5.xlarge")
USERS_LAYER = "arn:aws:lambda:us-west-2:123456789012:layer:kubectl-131:1"


def _cluster(**props) -> HyperPodEksCluster:
    stack = cdk.Stack(cdk.App(), "T", env=cdk.Environment(region="us-west-2"))
    return HyperPodEksCluster(stack, "HyperPod", HyperPodEksClusterProps(
        instance_groups=[SYSTEM], install_inference_operator=False, **props))


def _kubectl_handler_layers(cluster: HyperPodEksCluster) -> tuple[list[dict], list]:
    """The kubectl layers the stack creates, and the layers of the handler that runs kubectl."""
    resources = Template.from_stack(cdk.Stack.of(cluster)).to_json()["Resources"]
    created = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::Lambda::LayerVersion"
               and "kubectl" in r["Properties"].get("Description", "")]
    (handler,) = [r["Properties"] for id, r in resources.items()
                  if r["Type"] == "AWS::Lambda::Function" and "KubectlProviderHandler" in id]
    return created, handler["Layers"]


def test_the_cluster_applies_manifests_with_one_kubectl_layer_serving_the_default_version_and_its_neighbours() -> None:
    assert DEFAULT_KUBERNETES_VERSION in DEFAULT_KUBECTL_SERVES == ("1.33", "1.34", "1.35")
    created, _ = _kubectl_handler_layers(_cluster(kubernetes_version="1.35"))
    assert len(created) == 1 and created[0]["Description"].startswith("/opt/kubectl/kubectl 1.34.")


@pytest.mark.parametrize("version", sorted(set(SUPPORTED_KUBERNETES_VERSIONS) - set(DEFAULT_KUBECTL_SERVES)))
def test_a_version_the_default_kubectl_cannot_serve_takes_a_layer_of_the_users(version: str) -> None:
    minor = version.split(".")[1]
    with pytest.raises(ValueError, match=(
            rf"kubernetes_version = '{version}' -- the default kubectl 1\.34 serves Kubernetes 1\.33, 1\.34, 1\.35 "
            rf"\(kubectl's version skew policy: one minor version either way\); give kubectl_layer=KubectlV{minor}"
            rf"Layer\(scope, 'Kubectl'\) from the PyPI package aws-cdk\.lambda-layer-kubectl-v{minor}")):
        _cluster(kubernetes_version=version)
    stack = cdk.Stack(cdk.App(), "T", env=cdk.Environment(region="us-west-2"))
    layer = lambda_.LayerVersion.from_layer_version_arn(stack, "Kubectl", USERS_LAYER)
    cluster = HyperPodEksCluster(stack, "HyperPod", HyperPodEksClusterProps(
        instance_groups=[SYSTEM], install_inference_operator=False, kubernetes_version=version, kubectl_layer=layer))
    created, layers = _kubectl_handler_layers(cluster)
    assert created == [] and USERS_LAYER in json.dumps(layers)


def test_without_the_hyperpod_extra_the_default_kubectl_layer_names_it(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "aws_cdk.lambda_layer_kubectl_v34", None)  # not installed
    with pytest.raises(ModuleNotFoundError, match=(
            r"^HyperPodEksCluster's default kubectl layer needs the module 'aws_cdk\.lambda_layer_kubectl_v34', "
            r"which hyperwarm's 'hyperpod' extra installs: pip install 'hyperwarm\[hyperpod\]'$")):
        _cluster()


def test_without_the_caches_extra_the_cached_models_name_it(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "cdk8s", None)  # not installed
    for module in ("hyperwarm.caches.chart", "hyperwarm.caches.cached_models"):
        monkeypatch.delitem(sys.modules, module, raising=False)
    with pytest.raises(ModuleNotFoundError, match=(
            r"^hyperwarm\.caches \(CachedModels, CachesChart\) needs the module 'cdk8s', which hyperwarm's 'caches' "
            r"extra installs: pip install 'hyperwarm\[caches\]'$")):
        importlib.import_module("hyperwarm.caches.cached_models")
