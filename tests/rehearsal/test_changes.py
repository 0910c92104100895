"""rehearsal.changes: updates a deployed stack cannot survive, found by comparing two assemblies."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rehearsal import Assembly, core
from rehearsal.changes import (
    autoscaled_variant_changes,
    compare,
    create_only_properties,
    exports_in_use,
    protected_replacements,
)

SUBNET = {"Type": "AWS::EC2::Subnet", "Properties": {"VpcId": "vpc-1", "CidrBlock": "10.0.0.0/24"}}
GROUP = {"Type": "AWS::EC2::SecurityGroup", "Properties": {"GroupDescription": "nodes", "VpcId": "vpc-1"}}
CLUSTER = {"Type": "AWS::SageMaker::Cluster", "Properties": {
    "VpcConfig": {"SecurityGroupIds": [{"Fn::GetAtt": ["Group", "GroupId"]}], "Subnets": [{"Ref": "Subnet"}]},
    "Orchestrator": {"Eks": {"ClusterArn": "arn:aws:eks:us-east-1:111122223333:cluster/c"}},
    "InstanceGroups": [{"InstanceGroupName": "gpu", "InstanceCount": 1}]}}


def cluster_stack(**changes: Any) -> dict[str, Any]:
    resources = copy.deepcopy({"Subnet": SUBNET, "Group": GROUP, "Cluster": CLUSTER})
    for path, value in changes.items():
        logical_id, *keys = path.split("__")
        target = resources[logical_id]["Properties"]
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value
    return {"Resources": resources}


def findings(check, before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    return [f"{f.rule}: {f.resource}: {f.message}" for f in check(Assembly.from_templates({"s": before}),
                                                                  Assembly.from_templates({"s": after}))]


def test_create_only_properties_are_the_resource_schemas_cfn_lint_ships() -> None:
    # FACTS 10: VpcConfig and Orchestrator.Eks replace a HyperPod cluster; EncryptionConfig and RoleArn an EKS one.
    hyperpod = set(create_only_properties("AWS::SageMaker::Cluster"))
    assert {"/properties/VpcConfig", "/properties/Orchestrator/Eks"} <= hyperpod
    assert {"/properties/EncryptionConfig", "/properties/RoleArn"} <= set(create_only_properties("AWS::EKS::Cluster"))
    assert create_only_properties("AWS::Nothing::Known") is None


def test_an_updatable_change_replaces_nothing() -> None:
    assert findings(protected_replacements, cluster_stack(), cluster_stack(Cluster__InstanceGroups=[])) == []


def test_a_changed_create_only_property_of_the_hyperpod_cluster_is_named() -> None:
    (finding,) = findings(protected_replacements, cluster_stack(), cluster_stack(
        Cluster__Orchestrator={"Eks": {"ClusterArn": "arn:aws:eks:us-east-1:111122223333:cluster/other"}}))
    assert finding.startswith("changes.replacement: Cluster: AWS::SageMaker::Cluster: Orchestrator.Eks changes")
    assert "would replace the HyperPod cluster" in finding


def test_a_replaced_security_group_or_subnet_replaces_the_cluster_that_names_it() -> None:
    (through_group,) = findings(protected_replacements, cluster_stack(),
                                cluster_stack(Group__GroupDescription="cluster nodes"))
    assert "VpcConfig names Group (AWS::EC2::SecurityGroup), which is replaced: GroupDescription changes" \
        in through_group
    (through_subnet,) = findings(protected_replacements, cluster_stack(),
                                 cluster_stack(Subnet__CidrBlock="10.0.1.0/24"))
    assert "VpcConfig names Subnet (AWS::EC2::Subnet), which is replaced: CidrBlock changes" in through_subnet


def test_a_cluster_whose_logical_id_disappears_is_found() -> None:
    after = cluster_stack()
    after["Resources"]["Cluster2"] = after["Resources"].pop("Cluster")
    (finding,) = findings(protected_replacements, cluster_stack(), after)
    assert "no longer in the template" in finding and "would delete the HyperPod cluster" in finding


def test_a_protected_type_without_a_schema_cannot_be_judged(monkeypatch) -> None:
    real = core.resource_schema
    monkeypatch.setattr("rehearsal.changes.resource_schema",
                        lambda kind: None if kind == "AWS::SageMaker::Cluster" else real(kind))
    (finding,) = findings(protected_replacements, cluster_stack(), cluster_stack())
    assert "cannot tell whether AWS::SageMaker::Cluster is replaced" in finding


ENDPOINT = {"Type": "AWS::SageMaker::Endpoint", "Properties": {
    "EndpointName": "chat", "EndpointConfigName": {"Fn::GetAtt": ["Config", "EndpointConfigName"]}}}


def endpoint_stack(variants: dict[str, str | None], scaled: tuple[str, ...] = ("a",),
                   model: str = "m1") -> dict[str, Any]:
    config = {"Type": "AWS::SageMaker::EndpointConfig", "Properties": {"ProductionVariants": [
        {"VariantName": name, "ModelName": model, **({"InstanceType": kind} if kind else {})}
        for name, kind in variants.items()]}}
    targets = {f"{name}Scaling": {"Type": "AWS::ApplicationAutoScaling::ScalableTarget", "DependsOn": ["Endpoint"],
                                  "Properties": {"ServiceNamespace": "sagemaker",
                                                 "ResourceId": f"endpoint/chat/variant/{name}",
                                                 "ScalableDimension": "sagemaker:variant:DesiredInstanceCount"}}
               for name in scaled}
    return {"Resources": {"Endpoint": ENDPOINT, "Config": config, **targets}}


def test_changing_the_instance_type_of_an_autoscaled_variant_is_found() -> None:
    (finding,) = findings(autoscaled_variant_changes, endpoint_stack({"a": "ml.g5.2xlarge"}),
                          endpoint_stack({"a": "ml.g6e.2xlarge"}))
    assert finding.startswith("changes.autoscaled-variant: aScaling: changes the instance type of variant 'a' of "
                              "endpoint 'chat' from ml.g5.2xlarge to ml.g6e.2xlarge")
    assert "deploy first with autoscaling removed from variant 'a'" in finding


def test_removing_an_autoscaled_variant_is_found_even_with_its_target_removed_too() -> None:
    before = endpoint_stack({"a": "ml.g5.2xlarge", "b": "ml.g5.2xlarge"})
    (finding,) = findings(autoscaled_variant_changes, before, endpoint_stack({"b": "ml.g5.2xlarge"}, scaled=()))
    assert "removes variant 'a' of endpoint 'chat', which autoscaling still scales" in finding


def test_a_new_model_an_unscaled_variant_a_deleted_endpoint_or_scaled_component_copies_pass() -> None:
    before = endpoint_stack({"a": "ml.g5.2xlarge", "b": "ml.g5.2xlarge"})
    assert findings(autoscaled_variant_changes, before,
                    endpoint_stack({"a": "ml.g5.2xlarge", "b": "ml.g6e.2xlarge"}, model="m2")) == []
    assert findings(autoscaled_variant_changes, before, {"Resources": {}}) == []
    copies = endpoint_stack({"a": "ml.g5.2xlarge"}, scaled=())
    copies["Resources"]["Copies"] = {"Type": "AWS::ApplicationAutoScaling::ScalableTarget", "Properties": {
        "ServiceNamespace": "sagemaker", "ResourceId": "inference-component/chat-a",
        "ScalableDimension": "sagemaker:inference-component:DesiredCopyCount"}}
    assert findings(autoscaled_variant_changes, copies, endpoint_stack({"a": "ml.g6e.2xlarge"}, scaled=())) == []


def test_a_scaled_variant_the_templates_do_not_show_cannot_be_judged() -> None:
    token = endpoint_stack({"a": "ml.g5.2xlarge"})
    token["Resources"]["aScaling"]["Properties"]["ResourceId"] = {"Fn::Join": ["", ["endpoint/", {"Ref": "N"},
                                                                                     "/variant/a"]]}
    assert "cannot tell which variant" in findings(autoscaled_variant_changes, token, token)[0]
    external = endpoint_stack({"a": "ml.g5.2xlarge"})
    external["Resources"]["Endpoint"] = {**ENDPOINT, "Properties": {**ENDPOINT["Properties"],
                                                                    "EndpointConfigName": "made-elsewhere"}}
    assert "names an EndpointConfig no template of the stack holds" in \
        findings(autoscaled_variant_changes, external, external)[0]
    unknown = endpoint_stack({"b": "ml.g5.2xlarge"}, scaled=("a",))
    assert "hold no variant 'a'" in findings(autoscaled_variant_changes, unknown, unknown)[0]


def producer(exported: bool = True, replaced: bool = False) -> dict[str, Any]:
    outputs = {"ExportsOutputRefAlarm": {"Value": {"Ref": "Alarm"}, "Export": {"Name": "p:ExportsOutputRefAlarm"}}}
    return {"Resources": {"Alarm": {"Type": "AWS::CloudWatch::Alarm", "Properties": {
        "AlarmName": "renamed" if replaced else "5xx"}}}, "Outputs": outputs if exported else {}}


CONSUMER = {"Resources": {"F": {"Type": "AWS::Lambda::Function", "Properties": {
    "Environment": {"Variables": {"ALARM": {"Fn::ImportValue": "p:ExportsOutputRefAlarm"}}}}}}}


def test_an_export_a_deployed_stack_imports_cannot_be_removed_or_changed() -> None:
    before = Assembly.from_templates({"p": producer(), "c": CONSUMER})
    for after in (producer(exported=False), producer(replaced=True)):
        (finding,) = exports_in_use(before, Assembly.from_templates({"p": after, "c": {"Resources": {}}}))
        assert (finding.stack, finding.resource) == ("p", "ExportsOutputRefAlarm")
        assert "which deployed stack(s) c import: CloudFormation refuses the update" in finding.message


def test_an_export_nobody_imports_may_go() -> None:
    before = Assembly.from_templates({"p": producer(), "c": {"Resources": {}}})
    assert list(exports_in_use(before, Assembly.from_templates({"p": producer(exported=False)}))) == []


def test_identical_assemblies_have_nothing_to_survive() -> None:
    assembly = Assembly.from_templates({"s": cluster_stack(), "e": endpoint_stack({"a": "ml.g5.2xlarge"}),
                                        "p": producer(), "c": CONSUMER})
    assert compare(assembly, assembly) == []


@pytest.mark.parametrize("reference", [{"Fn::ImportValue": "p:Out"},
                                       {"Fn::GetStackOutput": {"StackName": "p", "OutputName": "Out"}}])
def test_references_are_followed_through_exports_and_stack_outputs(reference: dict[str, Any]) -> None:
    assembly = Assembly.from_templates({"p": {"Resources": {"R": {"Type": "X"}},
                                              "Outputs": {"Out": {"Value": {"Ref": "R"},
                                                                  "Export": {"Name": "p:Out"}}}},
                                        "c": {"Resources": {}}})
    assert assembly.referenced("c", reference) == ("p", "R")
