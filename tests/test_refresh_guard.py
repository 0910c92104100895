"""The deploy guard: a deploy never moves a refreshed target back to an older version.

The guard function runs against moto's DynamoDB with state written by the refresh function's own
state table code; the synthesized app must make every resource that sets a served version wait
for the guard.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import aws_cdk as cdk
import boto3
import pytest
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk.assertions import Template
from moto import mock_aws
from stand_ins import pk_table

from hyperwarm.functions.cache_refresh import contract, deploy_guard
from hyperwarm.refresh.guard import GuardedTarget, RefreshGuard, RefreshGuardProps

TABLE = "hyperwarm-test-cache-refresh-state"
TARGET = contract.endpoint_target_id("hyperwarm-test-chat")
FIELD = "environments.test.endpoints[0].variants[0].model_data"
VALUE = "s3://models/llama/{version}/"


@dataclass
class State:
    table: Any
    stack_id: str


def cfn_event(stack_id: str, request: str = "Update", version: str = "v1", table: str = TABLE) -> dict[str, Any]:
    return {"RequestType": request, "ResponseURL": "https://cloudformation-custom-resource-response.example/r",
            "StackId": stack_id,
            "RequestId": "req-1", "LogicalResourceId": "RefreshGuard730884C7", "ResourceType": "Custom::RefreshGuard",
            "PhysicalResourceId": "refresh-guard-RefreshGuard730884C7",
            "ResourceProperties": {"ServiceToken": "arn:aws:lambda:us-west-2:123456789012:function:g", "Table": table,
                                   "Targets": [{"Id": TARGET, "Version": version, "Field": FIELD, "Value": VALUE}],
                                   "Fingerprint": "0123"}}


def guarded_stack() -> str:
    """The stack the guard belongs to, deployed (CREATE_COMPLETE) in moto."""
    return boto3.client("cloudformation", region_name="us-west-2").create_stack(
        StackName="hyperwarm-test-endpoints",
        TemplateBody=json.dumps({"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}}))["StackId"]


@pytest.fixture
def state():
    """The refresh function's state table, as the construct creates it, and the guarded stack, in moto."""
    with mock_aws():
        yield State(pk_table(TABLE, "us-west-2"), guarded_stack())


def refreshed(state: State, version: str, target: str = TARGET, **item: Any) -> None:
    """The state item of a target the refresh function moved to ``version`` (its README, "State table")."""
    state.table.put_item(Item={"pk": contract.state_pk(target), "current_version": version,
                               "current_location": f"llama/{version}", "rev": 1, **item})


def test_a_deploy_older_than_the_refreshed_version_stops_naming_target_version_and_field(state, responses) -> None:
    refreshed(state, "v3")
    deploy_guard.on_event(cfn_event(state.stack_id, version="v1"), None)
    (answer,) = responses
    assert answer["Status"] == "FAILED"
    assert answer["Reason"].startswith("this deploy would roll back refreshed models; nothing was changed.")
    assert (f"{TARGET} serves v3 (moved there by the cache refresh function) but this deploy would set v1: "
            f"set {FIELD} to 's3://models/llama/v3/' (or newer) and deploy again") in answer["Reason"]
    assert {k: answer[k] for k in ("RequestId", "LogicalResourceId", "PhysicalResourceId")} == {
        "RequestId": "req-1", "LogicalResourceId": "RefreshGuard730884C7",
        "PhysicalResourceId": "refresh-guard-RefreshGuard730884C7"}


@pytest.mark.parametrize("served, deployed", [("v10", "v9"), ("1.10.0", "1.9.0"), ("2026-11-02", "2026-11-01")])
def test_versions_compare_in_the_refresh_functions_order(state, responses, served: str, deployed: str) -> None:
    refreshed(state, served)
    deploy_guard.on_event(cfn_event(state.stack_id, version=deployed), None)
    assert responses[-1]["Status"] == "FAILED"
    deploy_guard.on_event(cfn_event(state.stack_id, version=served), None)
    assert responses[-1]["Status"] == "SUCCESS"


@pytest.mark.parametrize("deployed", ["v3", "v4", "v5"])
def test_a_deploy_during_a_refresh_rollout_waits_for_it_to_end(state, responses, deployed: str) -> None:
    # Older moves back; equal or newer would update an endpoint that is Updating, which SageMaker rejects.
    refreshed(state, "v3", pending={"version": "v4", "config": "c4"}, lock_owner="rollout:c4")
    deploy_guard.on_event(cfn_event(state.stack_id, version=deployed), None)
    assert responses[-1]["Status"] == "FAILED"
    assert (f"{TARGET} is rolling out v4 (started by the cache refresh function): deploy again after it ends, "
            f"with {FIELD} set to 's3://models/llama/v4/' or newer") in responses[-1]["Reason"]


@pytest.mark.parametrize("deployed", ["v3", "v4"])
def test_a_deploy_of_the_served_or_a_newer_version_proceeds(state, responses, deployed: str) -> None:
    refreshed(state, "v3")
    deploy_guard.on_event(cfn_event(state.stack_id, version=deployed), None)
    assert responses[-1]["Status"] == "SUCCESS"


def test_a_target_never_refreshed_proceeds(state, responses) -> None:
    refreshed(state, "v9", target=contract.endpoint_target_id("another-endpoint"))
    deploy_guard.on_event(cfn_event(state.stack_id, request="Create"), None)
    assert responses[-1]["Status"] == "SUCCESS"


def test_no_state_table_yet_means_never_refreshed_and_the_deploy_proceeds(responses) -> None:
    with mock_aws():
        deploy_guard.on_event(cfn_event(guarded_stack(), table="hyperwarm-first-deploy-cache-refresh-state"), None)
    assert responses[-1]["Status"] == "SUCCESS"


def test_delete_always_succeeds(state, responses) -> None:
    refreshed(state, "v3")
    deploy_guard.on_event(cfn_event(state.stack_id, request="Delete"), None)
    assert responses[-1]["Status"] == "SUCCESS"


def test_an_unreadable_state_stops_the_deploy_and_still_answers(responses, monkeypatch) -> None:
    def denied(properties: dict[str, Any], patience: Any = None) -> list[str]:
        raise RuntimeError("AccessDeniedException: not authorized to perform dynamodb:GetItem")

    monkeypatch.setattr(deploy_guard, "check", denied)
    deploy_guard.on_event(cfn_event("arn:aws:cloudformation:us-west-2:123456789012:stack/s/1", request="Create"), None)
    assert responses[-1]["Status"] == "FAILED"
    assert responses[-1]["Reason"].startswith("could not check the cache refresh state: RuntimeError: AccessDenied")


def test_a_stack_rollback_is_never_blocked(state, responses) -> None:
    """Rolling back sends the previous properties (the old version); failing would leave UPDATE_ROLLBACK_FAILED."""
    from moto.cloudformation.models import cloudformation_backends

    refreshed(state, "v3")
    cloudformation_backends["123456789012"]["us-west-2"].stacks[state.stack_id].status = "UPDATE_ROLLBACK_IN_PROGRESS"
    deploy_guard.on_event(cfn_event(state.stack_id, version="v1"), None)
    assert responses[-1]["Status"] == "SUCCESS" and responses[-1]["Reason"].startswith("stack rollback")


def _rolling_back(state: State) -> None:
    from moto.cloudformation.models import cloudformation_backends
    cloudformation_backends["123456789012"]["us-west-2"].stacks[state.stack_id].status = "UPDATE_ROLLBACK_IN_PROGRESS"


def _emf(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith('{"_aws"')]


def test_a_stack_rollback_dead_letters_and_counts_every_target_it_may_move_back(state, responses, capsys) -> None:
    """The rollback restores v1 while the refresh function made v3 serve: not blocked, but not silent
    either: the refresh alarm's metric and a letter whose replay moves the target to v3 again."""
    sqs = boto3.client("sqs", region_name="us-west-2")
    url = sqs.create_queue(QueueName="hyperwarm-test-cache-refresh-dead-letters")["QueueUrl"]
    refreshed(state, "v3", current_bucket="models", current_sequencer="5F01")
    _rolling_back(state)
    event = cfn_event(state.stack_id, version="v1")
    event["ResourceProperties"]["DeadLetterQueue"] = url
    capsys.readouterr()
    deploy_guard.on_event(event, None)
    assert responses[-1]["Status"] == "SUCCESS"
    assert "may be moved back (RefreshFailed moved-back, 1 dead letter(s) to replay)" in responses[-1]["Reason"]
    (message,) = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                     MessageAttributeNames=["All"])["Messages"]
    letter = json.loads(message["Body"])
    assert (letter["format"], letter["reason"], letter["targets"]) == ("hyperwarm.refresh.hook-dlq/v1", "moved-back", [TARGET])
    assert message["MessageAttributes"]["letter-id"]["StringValue"] == letter["letter_id"]
    assert f"{TARGET} serves v3" in letter["message"] and f"restores {FIELD} to v1" in letter["message"]
    from hyperwarm.functions.cache_refresh.events import parse_manifest_created
    created = parse_manifest_created(letter["event"])  # what the refresh function replays
    assert (created.bucket, created.key, created.sequencer) == ("models", "llama/v3/manifest.json", "5F01")
    (metric,) = _emf(capsys.readouterr().out)
    assert metric["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "Hyperwarm"
    assert ["service"] in metric["_aws"]["CloudWatchMetrics"][0]["Dimensions"]  # what the alarm watches
    assert (metric["service"], metric["Reason"], metric["RefreshFailed"]) == ("hyperwarm-cache-refresh", "moved-back", 1)
    from hyperwarm.functions.cache_refresh.contract import METRICS_NAMESPACE, SERVICE
    assert (metric["service"], metric["_aws"]["CloudWatchMetrics"][0]["Namespace"]) == (SERVICE, METRICS_NAMESPACE)


def test_a_rollback_to_the_served_version_reports_nothing(state, responses, capsys) -> None:
    refreshed(state, "v3", current_bucket="models")
    _rolling_back(state)
    capsys.readouterr()
    deploy_guard.on_event(cfn_event(state.stack_id, version="v3"), None)
    assert responses[-1]["Status"] == "SUCCESS" and "moved back" not in responses[-1]["Reason"]
    assert _emf(capsys.readouterr().out) == []


def pinned(event: dict[str, Any], version: str) -> dict[str, Any]:
    """``event`` with its target pinned at ``version`` (refresh.models[].pinned), as the guard's construct writes it."""
    (target,) = event["ResourceProperties"]["Targets"]
    target.update(Version=version, Pinned=True, Location=f"llama/{version}")
    event["ResourceProperties"]["Bucket"] = "models"
    return event


def test_a_pinned_older_version_proceeds_and_is_recorded_as_what_serves(state, responses, capsys) -> None:
    """A deliberate rollback: cdk.json's v1 while v3 serves. Recorded before anything moves, so neither the guard
    nor the function takes the move for a move back; a later unpinned deploy keeps v1 and follows refreshes."""
    refreshed(state, "v3", current_bucket="models", current_sequencer="5F01")
    deploy_guard.on_event(pinned(cfn_event(state.stack_id), "v1"), None)
    assert responses[-1]["Status"] == "SUCCESS"
    item = state.table.get_item(Key={"pk": contract.state_pk(TARGET)})["Item"]
    assert (item["current_version"], item["current_location"], item["pinned"]["version"]) == ("v1", "llama/v1", "v1")
    assert item["pinned"]["previous"]["current_version"] == "v3"
    deploy_guard.on_event(cfn_event(state.stack_id, version="v1"), None)  # unpinned: no move back to report
    item = state.table.get_item(Key={"pk": contract.state_pk(TARGET)})["Item"]
    assert responses[-1]["Status"] == "SUCCESS" and "pinned" not in item and item["current_version"] == "v1"
    deploy_guard.on_event(cfn_event(state.stack_id, version="v0"), None)  # older than the pin: stopped as ever
    assert responses[-1]["Status"] == "FAILED" and f"{TARGET} serves v1" in responses[-1]["Reason"]


def test_a_pin_waits_for_a_refresh_rollout_like_any_deploy(state, responses) -> None:
    refreshed(state, "v3", pending={"version": "v4", "config": "c4"}, lock_owner="rollout:c4")
    deploy_guard.on_event(pinned(cfn_event(state.stack_id), "v1"), None)
    assert responses[-1]["Status"] == "FAILED" and "is rolling out v4" in responses[-1]["Reason"]
    assert state.table.get_item(Key={"pk": contract.state_pk(TARGET)})["Item"]["current_version"] == "v3"


def test_the_rollback_of_a_pinning_deploy_puts_back_the_record_it_replaced(state, responses, capsys) -> None:
    refreshed(state, "v3", current_bucket="models", current_sequencer="5F01")
    failed = pinned(cfn_event(state.stack_id), "v1")
    deploy_guard.on_event(failed, None)
    _rolling_back(state)
    rollback = cfn_event(state.stack_id, version="v3")  # the properties before the pin
    rollback["OldResourceProperties"] = failed["ResourceProperties"]
    capsys.readouterr()
    deploy_guard.on_event(rollback, None)
    assert responses[-1]["Status"] == "SUCCESS" and "moved back" not in responses[-1]["Reason"]
    item = state.table.get_item(Key={"pk": contract.state_pk(TARGET)})["Item"]
    assert (item["current_version"], item["current_sequencer"], "pinned" in item) == ("v3", "5F01", False)
    assert _emf(capsys.readouterr().out) == []


def test_a_state_item_a_newer_release_wrote_stops_the_deploy_saying_so(state, responses) -> None:
    refreshed(state, "v3", format="hyperwarm.refresh.state/v2")
    deploy_guard.on_event(cfn_event(state.stack_id, version="v3"), None)
    assert responses[-1]["Status"] == "FAILED"
    assert "'hyperwarm.refresh.state/v2' is not one this hyperwarm reads" in responses[-1]["Reason"]


def test_pinning_a_target_never_refreshed_records_nothing(state, responses) -> None:
    deploy_guard.on_event(pinned(cfn_event(state.stack_id), "v1"), None)
    assert responses[-1]["Status"] == "SUCCESS"
    assert "Item" not in state.table.get_item(Key={"pk": contract.state_pk(TARGET)})


def test_a_rollback_still_succeeds_and_counts_when_the_letter_cannot_be_sent(state, responses, capsys) -> None:
    refreshed(state, "v3")  # a record without the bucket; the queue named by the failed update does not exist
    _rolling_back(state)
    event = cfn_event(state.stack_id, version="v1")
    event["OldResourceProperties"] = {"DeadLetterQueue": "https://sqs.us-west-2.amazonaws.com/123456789012/gone",
                                      "Bucket": "models"}
    capsys.readouterr()
    deploy_guard.on_event(event, None)
    assert responses[-1]["Status"] == "SUCCESS"
    assert "0 dead letter(s)" in responses[-1]["Reason"]
    out = capsys.readouterr().out
    assert len(_emf(out)) == 1 and "NonExistentQueue" in out  # counted, and the lost letter is in the log


# -- faults at the guard's AWS calls -----------------------------------------------------------------

def _throttle(monkeypatch: pytest.MonkeyPatch, operation: str, times: int) -> list[float]:
    """``operation`` answers ThrottlingException ``times`` times (every time: -1), as AWS does under load;
    returns the back-off pauses the guard took."""
    from botocore.client import BaseClient
    from botocore.exceptions import ClientError

    real, calls, pauses = BaseClient._make_api_call, {"n": 0}, []

    def throttled(self: Any, name: str, params: dict[str, Any]) -> Any:
        if name == operation and (times < 0 or calls["n"] < times):
            calls["n"] += 1
            raise ClientError({"Error": {"Code": "Throttling", "Message": "Rate exceeded"},
                               "ResponseMetadata": {"HTTPStatusCode": 400}}, name)
        return real(self, name, params)
    monkeypatch.setattr(BaseClient, "_make_api_call", throttled)
    monkeypatch.setattr(deploy_guard, "_sleep", pauses.append)
    return pauses


@dataclass
class _Context:
    remaining_ms: int

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def test_a_throttled_describe_stacks_is_retried_and_the_rollback_succeeds(state, responses, monkeypatch) -> None:
    refreshed(state, "v3")
    _rolling_back(state)
    pauses = _throttle(monkeypatch, "DescribeStacks", 4)
    deploy_guard.on_event(cfn_event(state.stack_id, version="v1"), _Context(300_000))
    assert responses[-1]["Status"] == "SUCCESS" and responses[-1]["Reason"].startswith("stack rollback")
    assert len(pauses) == 4  # backed off once per throttled answer


def test_a_rollback_whose_state_stays_unreadable_is_never_blocked_and_is_reported(state, responses, monkeypatch,
                                                                                   capsys) -> None:
    """Throttled to the end of the function's time: it may be a rollback, so it passes, and every target it
    may move back is counted and dead-lettered as in a rollback."""
    sqs = boto3.client("sqs", region_name="us-west-2")
    url = sqs.create_queue(QueueName="hyperwarm-test-cache-refresh-dead-letters")["QueueUrl"]
    refreshed(state, "v3", current_bucket="models")
    _rolling_back(state)
    pauses = _throttle(monkeypatch, "DescribeStacks", -1)
    event = cfn_event(state.stack_id, version="v1")
    event["ResourceProperties"]["DeadLetterQueue"] = url
    capsys.readouterr()
    deploy_guard.on_event(event, _Context(90_000))
    answer = responses[-1]
    assert answer["Status"] == "SUCCESS", answer
    assert "could not be read (ClientError" in answer["Reason"] and "may be a rollback" in answer["Reason"]
    assert "1 dead letter(s) to replay" in answer["Reason"]
    assert len(_emf(capsys.readouterr().out)) == 1
    assert sum(pauses) <= 60  # 90 s left, 30 s kept for the answer


def test_a_throttled_state_read_is_retried_and_still_stops_a_deploy_that_moves_back(state, responses,
                                                                                    monkeypatch) -> None:
    refreshed(state, "v3")
    _throttle(monkeypatch, "GetItem", 3)
    deploy_guard.on_event(cfn_event(state.stack_id, version="v1"), _Context(300_000))
    assert responses[-1]["Status"] == "FAILED"
    assert responses[-1]["Reason"].startswith("this deploy would roll back refreshed models")


def test_all_reads_of_one_request_share_one_budget_and_the_guard_still_answers(state, responses, monkeypatch,
                                                                              capsys) -> None:
    """DescribeStacks and every GetItem throttled to the end: together they wait at most the function's
    time less the 30 s kept to answer, not that much each."""
    from botocore.client import BaseClient
    from botocore.exceptions import ClientError

    refreshed(state, "v3", current_bucket="models")
    _rolling_back(state)
    pauses: list[float] = []

    def throttled(self: Any, name: str, params: dict[str, Any]) -> Any:
        raise ClientError({"Error": {"Code": "Throttling", "Message": "Rate exceeded"},
                           "ResponseMetadata": {"HTTPStatusCode": 400}}, name)
    monkeypatch.setattr(BaseClient, "_make_api_call", throttled)
    monkeypatch.setattr(deploy_guard, "_sleep", pauses.append)
    deploy_guard.on_event(cfn_event(state.stack_id, version="v1"), _Context(300_000))
    assert responses[-1]["Status"] == "SUCCESS"  # may be a rollback: never blocked
    assert "could not check for targets moved back" in responses[-1]["Reason"]
    assert 200 < sum(pauses) <= 270


def test_the_guard_resource_waits_no_longer_than_the_function_can_take(synthesized) -> None:
    """Without ServiceTimeout CloudFormation waits an hour for an answer that cannot come any more."""
    for stack in synthesized.stack_names():
        for guard in synthesized.resources(stack, "Custom::RefreshGuard").values():
            assert guard["Properties"]["ServiceTimeout"] == "360"


def test_an_error_that_is_no_throttling_is_not_retried(state, responses, monkeypatch) -> None:
    pauses = _throttle(monkeypatch, "GetItem", 0)
    deploy_guard.on_event(cfn_event(state.stack_id, version="v1", table="no-such-table"), _Context(300_000))
    assert responses[-1]["Status"] == "SUCCESS" and pauses == []  # no table: never refreshed, at once


# -- the synthesized app ---------------------------------------------------------------------------

def _guard(synthesized, stack: str) -> tuple[str, dict[str, Any]]:
    (item,) = synthesized.resources(stack, "Custom::RefreshGuard").items()
    return item


def test_endpoint_resources_that_set_the_served_model_wait_for_the_guard(synthesized) -> None:
    guard_id, guard = _guard(synthesized, "hyperwarm-prod-endpoints")
    template = synthesized.template("hyperwarm-prod-endpoints")["Resources"]
    guarded = {k for k, r in template.items() if guard_id in r.get("DependsOn", [])}
    sagemaker_resources = {k for k, r in template.items() if r["Type"] in (
        "AWS::SageMaker::Model", "AWS::SageMaker::EndpointConfig", "AWS::SageMaker::Endpoint")}
    assert sagemaker_resources and sagemaker_resources <= guarded
    props = guard["Properties"]
    assert props["Table"] == "hyperwarm-prod-cache-refresh-state"
    assert props["Targets"] == [
        {"Id": "endpoint:hyperwarm-prod-chat", "Version": "v1",
         "Field": f"environments.prod.endpoints[0].variants[{i}].model_data",
         "Value": "s3://hyperwarm-models-prod/llama-3.1-70b-instruct/{version}/"} for i in (0, 1)]


def test_the_caches_manifest_waits_for_the_guard_of_every_refreshed_cache(synthesized) -> None:
    guard_id, guard = _guard(synthesized, "hyperwarm-prod-caches")
    (manifest,) = synthesized.resources("hyperwarm-prod-caches", "Custom::AWSCDK-EKS-KubernetesResource").values()
    assert guard_id in manifest["DependsOn"]
    targets = guard["Properties"]["Targets"]
    assert [(t["Version"], t["Field"]) for t in targets] == [
        ("v1", "environments.prod.caches.models[0].source.version"),
        ("v1", "environments.prod.caches.models[1].source.version")]
    assert targets[0]["Id"]["Fn::Join"][1][-1] == "/hyperwarm-models/InferenceEndpointConfig/llama-3-1-70b"


def test_the_guard_names_the_refresh_stacks_table_and_queue_and_may_only_use_them(synthesized) -> None:
    (table,) = synthesized.resources("hyperwarm-prod-refresh", "AWS::DynamoDB::Table").values()
    (queue,) = synthesized.resources("hyperwarm-prod-refresh", "AWS::SQS::Queue").values()
    assert queue["Properties"]["QueueName"] == "hyperwarm-prod-cache-refresh-dead-letters"
    for stack in ("hyperwarm-prod-endpoints", "hyperwarm-prod-caches"):
        _, guard = _guard(synthesized, stack)
        assert guard["Properties"]["Table"] == table["Properties"]["TableName"]
        assert guard["Properties"]["Bucket"] == "hyperwarm-models-prod"
        url = guard["Properties"]["DeadLetterQueue"]["Fn::Join"][1]
        assert url[0].startswith("https://sqs.") and url[-1] == "/hyperwarm-prod-cache-refresh-dead-letters"
        role = next(k for k, r in synthesized.resources(stack, "AWS::IAM::Role").items() if k.startswith("RefreshGuard"))
        statements = [s for p in synthesized.resources(stack, "AWS::IAM::Policy").values()
                      if p["Properties"]["Roles"] == [{"Ref": role}] for s in p["Properties"]["PolicyDocument"]["Statement"]]
        read, describe, send = statements
        assert read["Action"] == ["dynamodb:GetItem", "dynamodb:PutItem"]  # PutItem: a pin's record
        assert read["Resource"]["Fn::Join"][1][-1].endswith(":table/hyperwarm-prod-cache-refresh-state")
        assert describe == {"Action": "cloudformation:DescribeStacks", "Effect": "Allow",
                            "Resource": {"Ref": "AWS::StackId"}}  # its own stack: is it rolling back?
        assert send["Action"] == "sqs:SendMessage"  # a rollback's moved-back letters; the metric is EMF (no IAM)
        assert send["Resource"]["Fn::Join"][1][-1].endswith(":hyperwarm-prod-cache-refresh-dead-letters")


def test_environments_without_refresh_have_no_guard(synthesized) -> None:
    assert not synthesized.resources("hyperwarm-dev-endpoints", "Custom::RefreshGuard")


def _fingerprint(model_data: str) -> str:
    stack = cdk.Stack(cdk.App(), "T", env=cdk.Environment(region="us-west-2", account="123456789012"))
    model = sagemaker.CfnModel(stack, "Model", execution_role_arn="arn:aws:iam::123456789012:role/r",
                               primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
                                   image="i", model_data_url=model_data))
    guard = RefreshGuard(stack, "Guard", RefreshGuardProps(state_table_name=TABLE, targets=[
        GuardedTarget(target_id=TARGET, version="v1", field=FIELD, value=VALUE)]))
    guard.protect(model)
    (resource,) = Template.from_stack(stack).find_resources("Custom::RefreshGuard").values()
    return resource["Properties"]["Fingerprint"]


def test_the_guard_runs_again_whenever_a_protected_resource_changes() -> None:
    first = _fingerprint("s3://models/llama/v1/model.tar.gz")
    assert first == _fingerprint("s3://models/llama/v1/model.tar.gz")
    assert first != _fingerprint("s3://models/llama/v1/other.tar.gz")


@pytest.mark.parametrize("props, message", [
    ({"targets": []}, r"targets = \[\] -- a guard needs at least one guarded target"),
    ({"state_table_name": "no spaces"}, r"state_table_name = 'no spaces' -- allowed: 3..255 letters"),
    ({"targets": [GuardedTarget(TARGET, "v1", FIELD, value="s3://m/v1/")]}, r"value = 's3://m/v1/' -- must contain"),
    ({"dead_letter_queue_name": "dlq.fifo"}, r"dead_letter_queue_name = 'dlq.fifo' -- allowed: 1..80 letters"),
])
def test_guard_props_are_validated(props: dict[str, Any], message: str) -> None:
    arguments = {"state_table_name": TABLE, "targets": [GuardedTarget(TARGET, "v1", FIELD, VALUE)], **props}
    with pytest.raises(ValueError, match=message):
        RefreshGuard(cdk.Stack(cdk.App(), "T"), "Guard", RefreshGuardProps(**arguments))


def test_a_guard_without_a_queue_name_may_not_send_and_names_none() -> None:
    stack = cdk.Stack(cdk.App(), "T", env=cdk.Environment(region="us-west-2", account="123456789012"))
    RefreshGuard(stack, "Guard", RefreshGuardProps(state_table_name=TABLE, targets=[
        GuardedTarget(target_id=TARGET, version="v1", field=FIELD, value=VALUE)]))
    template = Template.from_stack(stack)
    (resource,) = template.find_resources("Custom::RefreshGuard").values()
    assert "DeadLetterQueue" not in resource["Properties"] and "Bucket" not in resource["Properties"]
    actions = [s["Action"] for p in template.find_resources("AWS::IAM::Policy").values()
               for s in p["Properties"]["PolicyDocument"]["Statement"]]
    assert actions == [["dynamodb:GetItem", "dynamodb:PutItem"], "cloudformation:DescribeStacks"]
