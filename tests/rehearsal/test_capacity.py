"""nodes.capacity: a HyperPod node that cannot hold its pods is found in the templates themselves."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from rehearsal import Assembly
from rehearsal.rules.capacity import every_node_holds_its_pods

REPO = Path(__file__).resolve().parents[2]
_EKS = "Eks"
_EXPORT = "cluster:ExportsOutputRefEks1234"


def _model(replicas: int = 1, cpu: str = "2") -> dict:
    return {"apiVersion": "inference.sagemaker.aws.amazon.com/v1", "kind": "InferenceEndpointConfig",
            "metadata": {"name": "qwen", "namespace": "models"},
            "spec": {"replicas": replicas, "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "sagemaker.amazonaws.com/instance-group-name",
                                                              "operator": "In", "values": ["inference"]}]}]}},
                     "worker": {"resources": {"requests": {"cpu": cpu, "memory": "12Gi", "nvidia.com/gpu": 1}}}}}


def _assembly(groups: list[dict], model: dict) -> Assembly:
    cluster = {"Resources": {
        _EKS: {"Type": "AWS::EKS::Cluster", "Properties": {}},
        "Operator": {"Type": "AWS::EKS::Addon", "Properties": {
            "AddonName": "amazon-sagemaker-hyperpod-inference", "ClusterName": {"Ref": _EKS}}},
        "HyperPod": {"Type": "AWS::SageMaker::Cluster", "Properties": {
            "Orchestrator": {"Eks": {"ClusterArn": {"Fn::GetAtt": [_EKS, "Arn"]}}}, "InstanceGroups": groups}},
    }, "Outputs": {"EksRef": {"Value": {"Ref": _EKS}, "Export": {"Name": _EXPORT}}}}
    caches = {"Resources": {"Manifest": {"Type": "Custom::AWSCDK-EKS-KubernetesResource", "Properties": {
        "ClusterName": {"Fn::ImportValue": _EXPORT}, "Manifest": json.dumps([model])}}}}
    return Assembly.from_templates({"cluster": cluster, "caches": caches}, {"caches": ["cluster"]})


def _group(name: str, instance_type: str, threads_per_core: int = 1) -> dict:
    return {"InstanceGroupName": name, "InstanceType": instance_type, "InstanceCount": 1,
            "ThreadsPerCore": threads_per_core}


def test_one_small_gpu_node_for_operator_and_model_is_found() -> None:
    findings = every_node_holds_its_pods(_assembly([_group("inference", "ml.g5.xlarge")], _model()))
    assert {(f.rule, f.stack, f.resource) for f in findings} == {("nodes.capacity", "cluster", "HyperPod")}
    assert [f.message.split(" -- ")[0] for f in findings] == [
        "instance group 'inference' (ml.g5.xlarge x 1, ThreadsPerCore 1): cpu per node: need 2 vCPU, "
        "have 1.9 vCPU (model qwen (1 pod) 2 vCPU)",
        "system pods (1 add-on and operator deployments): cpu: need 1.3 vCPU, have 0 vCPU left on the nodes "
        "('inference' 0 vCPU)",
    ]


def test_a_system_group_and_both_threads_hold_everything() -> None:
    groups = [_group("system", "ml.c5.4xlarge"), _group("inference", "ml.g5.xlarge", threads_per_core=2)]
    assert every_node_holds_its_pods(_assembly(groups, _model())) == []


def test_objects_of_another_cluster_are_not_counted() -> None:
    assembly = _assembly([_group("inference", "ml.g5.xlarge", threads_per_core=2)], _model(replicas=20, cpu="1m"))
    caches = assembly.templates["caches"]["Resources"]["Manifest"]["Properties"]
    caches["ClusterName"] = {"Fn::ImportValue": "other:ExportsOutputRefEks9999"}
    assert not [f for f in every_node_holds_its_pods(assembly) if "per node" in f.message]


def test_the_rule_and_its_catalog_load_without_aws_cdk() -> None:
    code = ("import sys, rehearsal.rules.capacity, hyperwarm.cluster.catalog, hyperwarm.cluster.hyperpod_dependencies; "
            "sys.exit('aws_cdk' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO, check=False).returncode == 0


def test_pods_per_node_is_named_an_estimate_and_an_override_in_the_metadata_is_used() -> None:
    # Twenty small model pods: more than the 14 pods estimated for ml.g5.xlarge.
    model = _model(replicas=20, cpu="1m")
    model["spec"]["worker"]["resources"]["requests"].update({"memory": "64Mi", "nvidia.com/gpu": 0})
    groups = [_group("system", "ml.c5.4xlarge"), _group("inference", "ml.g5.xlarge", threads_per_core=2)]
    (finding,) = every_node_holds_its_pods(_assembly(groups, model))
    assert "pods per node: need" in finding.message
    assert "14 pods per node is hyperwarm's estimate for ml.g5.xlarge: AWS publishes no figure" in finding.message
    assert "pods_per_node['ml.g5.xlarge'] overrides the estimate" in finding.message
    assembly = _assembly(groups, model)
    assembly.templates["cluster"]["Resources"]["HyperPod"]["Metadata"] = {"hyperwarm:pods-per-node": {"ml.g5.xlarge": 58}}
    assert every_node_holds_its_pods(assembly) == []
    assembly.templates["cluster"]["Resources"]["HyperPod"]["Metadata"] = {"hyperwarm:pods-per-node": {"ml.g5.xlarge": 16}}
    (finding,) = every_node_holds_its_pods(assembly)
    assert "have 16" in finding.message and "estimate" not in finding.message


def test_what_the_rule_cannot_see_is_a_finding() -> None:
    # An instance type outside the catalog: its pods, CPU and memory per node are unknown.
    (finding,) = every_node_holds_its_pods(_assembly([_group("inference", "ml.g7.xlarge")], _model()))
    assert "instance type 'ml.g7.xlarge' is not in hyperwarm's catalog" in finding.message
    # A count known only at deploy time.
    group = {**_group("inference", "ml.g5.12xlarge"), "InstanceCount": {"Ref": "Count"}}
    (finding,) = every_node_holds_its_pods(_assembly([group], _model()))
    assert "known only at deploy time" in finding.message
    # A HyperPod cluster whose EKS cluster the rule cannot follow: nothing placed on it can be counted.
    assembly = _assembly([_group("inference", "ml.g5.12xlarge")], _model())
    assembly.templates["cluster"]["Resources"]["HyperPod"]["Properties"]["Orchestrator"]["Eks"]["ClusterArn"] = \
        "arn:aws:eks:us-west-2:123456789012:cluster/elsewhere"
    (finding,) = every_node_holds_its_pods(assembly)
    assert "cannot follow Orchestrator.Eks.ClusterArn" in finding.message
