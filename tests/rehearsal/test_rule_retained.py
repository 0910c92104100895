"""retained.importable: what a stack retains under a fixed name, the stack created again can import;
retained.except-on-create: what it retains is deleted when its first create rolls back."""

from __future__ import annotations

from typing import Any

from rehearsal import Assembly
from rehearsal.rules.retained import except_on_create, importable


def table(name: Any, policy: str = "Retain") -> dict[str, Any]:
    return {"Type": "AWS::DynamoDB::Table", "DeletionPolicy": policy, "Properties": {
        **({"TableName": name} if name is not None else {}),
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}]}}


def check(resources: dict[str, Any]) -> list[str]:
    return [f"{f.resource}: {f.message}" for f in importable(Assembly.from_templates({"s": {"Resources": resources}}))]


def test_a_retained_name_built_from_literals_and_parameters_is_found() -> None:
    name = {"Fn::Join": ["-", ["state", {"Ref": "AWS::AccountId"}]]}
    (finding,) = check({"T": table(name)})
    assert finding.startswith("T: is retained and builds its name TableName from literals and parameters")


def test_literal_generated_or_per_creation_names_pass() -> None:
    function = {"Type": "AWS::Lambda::Function", "Properties": {}}
    per_creation = {"Fn::Join": ["", ["/aws/lambda/", {"Ref": "F"}]]}
    assert check({"T": table("hyperwarm-prod-cache-refresh-state"), "G": table(None),
                  "F": function, "L": {"Type": "AWS::Logs::LogGroup", "DeletionPolicy": "Retain",
                                       "Properties": {"LogGroupName": per_creation}}}) == []
    assert check({"D": table({"Fn::Join": ["-", ["x", {"Ref": "AWS::Region"}]]}, policy="Delete")}) == []


def test_a_retained_resource_of_a_type_without_a_schema_cannot_be_judged() -> None:
    (finding,) = check({"C": {"Type": "AWS::Nothing::Known", "DeletionPolicy": "Retain", "Properties": {}}})
    assert "cannot tell whether a retained AWS::Nothing::Known can be imported" in finding


def test_a_resource_retained_even_after_a_failed_create_is_found() -> None:
    """Production's EKS and HyperPod clusters had DeletionPolicy Retain: a failed first create kept them, billing."""
    cluster = {"Type": "AWS::SageMaker::Cluster", "DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain",
               "Properties": {}}
    (finding,) = except_on_create(Assembly.from_templates({"prod-cluster": {"Resources": {"HyperPod": cluster}}}))
    assert (finding.stack, finding.resource) == ("prod-cluster", "HyperPod")
    assert finding.message.startswith("a AWS::SageMaker::Cluster with DeletionPolicy Retain: a failed first create")


def test_retained_except_on_create_deleted_or_unset_pass() -> None:
    resources = {"T": table("hyperwarm-prod-cache-refresh-state", policy="RetainExceptOnCreate"),
                 "D": table(None, policy="Delete"), "N": {"Type": "AWS::SQS::Queue", "Properties": {}}}
    assert list(except_on_create(Assembly.from_templates({"s": {"Resources": resources}}))) == []
