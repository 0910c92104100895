"""Versions only a deploy moves (a Hub revision, an FSx or unrefreshed S3 version folder, a JumpStart model version)
keep the refresh's guarantees: never moved back unseen, nothing lost when a deploy fails.

The deploy guard's function runs against moto's DynamoDB and CloudFormation, driven by the events CloudFormation
sends in each order a deploy can take (created, updated, refused, rolled back, retried); the app's guards are read
from the synthesized project.
"""

from __future__ import annotations

import copy
from typing import Any

import aws_cdk as cdk
import boto3
import pytest
from aws_cdk.assertions import Template
from moto import mock_aws
from moto.cloudformation.models import cloudformation_backends
from stand_ins import pk_table
from test_refresh_guard import guarded_stack

from hyperwarm.functions.cache_refresh import contract, deploy_guard, deployed, formats
from hyperwarm.refresh.guard import GuardedTarget, RefreshGuard, RefreshGuardProps
from stacks.config import ConfigError, parse_environment

TABLE = "deployed-versions"
HUB = contract.hyperpod_target_id("c", "hyperwarm-models", "InferenceEndpointConfig", "qwen-hub")
FIELD = "environments.staging.caches.models[2].source.revision"
A, B, C = ("a" * 40, "b" * 40, "c" * 40)


@pytest.fixture
def stack_id():
    """The guard's stack (CREATE_COMPLETE) and the guard's own table, in moto."""
    with mock_aws():
        pk_table(TABLE)
        yield guarded_stack()


def properties(version: str, *, target: str = HUB, field: str = FIELD, pinned: bool = False) -> dict[str, Any]:
    return {"ServiceToken": "arn:aws:lambda:us-west-2:123456789012:function:g", "Format": formats.GUARD,
            "DeployedTable": TABLE, "Fingerprint": "0123",
            "Targets": [{"Id": target, "Version": version, "Field": field, "Value": "{version}", "Recorded": True,
                         **({"Pinned": True, "Location": f"hf://q/q@{version}"} if pinned else {})}]}


def event(stack_id: str, request: str, new: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"RequestType": request, "ResponseURL": "https://cloudformation-custom-resource-response.example/r",
            "StackId": stack_id, "RequestId": "req-1", "LogicalResourceId": "RefreshGuard",
            "ResourceType": "Custom::RefreshGuard", "PhysicalResourceId": "refresh-guard-RefreshGuard",
            "ResourceProperties": new, **({"OldResourceProperties": old} if old is not None else {})}


def record(target: str = HUB) -> dict[str, Any]:
    return boto3.resource("dynamodb").Table(TABLE).get_item(Key={"pk": contract.state_pk(target)}).get("Item") or {}


def deploy(stack_id: str, version: str, before: str | None, **options: Any) -> dict[str, Any]:
    """A deploy's answer: the guard's Create (``before`` None) or Update from ``before``."""
    old = properties(before) if before is not None else None
    deploy_guard.on_event(event(stack_id, "Update" if old else "Create", properties(version, **options), old), None)
    return record()


def rolls_back(stack_id: str) -> None:
    cloudformation_backends["123456789012"]["us-west-2"].stacks[stack_id].status = "UPDATE_ROLLBACK_IN_PROGRESS"


def test_each_deploy_is_recorded_and_an_older_revision_is_refused_naming_the_field(stack_id, responses) -> None:
    assert deploy(stack_id, A, None)["current_version"] == A
    assert deploy(stack_id, B, A)["history"] == [A]
    item = deploy(stack_id, A, B)  # A served before B: a move back
    assert responses[-1]["Status"] == "FAILED"
    assert (f"{HUB} is at {B} (set by the last deploy) but this deploy would set {A}, which served before {B}: "
            f"set {FIELD} to '{B}' (or a version not deployed before), or pin the target") in responses[-1]["Reason"]
    assert (item["current_version"], item["history"]) == (B, [A])  # nothing recorded
    assert deploy(stack_id, C, B)["history"] == [A, B] and responses[-1]["Status"] == "SUCCESS"


@pytest.mark.parametrize("serving, older, newer", [("2.4.0", "2.3.9", "2.10.0"), ("v3", "v2", "v4")])
def test_ordered_versions_compare_in_the_refresh_order_deployed_before_or_not(stack_id, responses, serving: str,
                                                                              older: str, newer: str) -> None:
    deploy(stack_id, serving, None)
    deploy(stack_id, older, serving)  # never deployed, still older
    assert responses[-1]["Status"] == "FAILED" and f"would set {older}, an older version" in responses[-1]["Reason"]
    assert deploy(stack_id, newer, serving)["current_version"] == newer


def test_a_pinned_rollback_passes_and_becomes_what_serves(stack_id, responses) -> None:
    deploy(stack_id, A, None)
    deploy(stack_id, B, A)
    item = deploy(stack_id, A, B, pinned=True)
    assert responses[-1]["Status"] == "SUCCESS"
    assert (item["current_version"], item["history"]) == (A, [B])
    deploy(stack_id, B, A)  # B served before A now: going back to it is a deliberate pin again
    assert responses[-1]["Status"] == "FAILED"


def test_a_rolled_back_deploy_puts_the_record_back_and_the_same_deploy_passes_again(stack_id, responses) -> None:
    deploy(stack_id, A, None)
    deploy(stack_id, B, A)  # the guard passed and recorded B; another resource of the stack then failed
    rolls_back(stack_id)
    deploy_guard.on_event(event(stack_id, "Update", properties(A), properties(B)), None)
    assert responses[-1]["Status"] == "SUCCESS" and "could not" not in responses[-1]["Reason"]
    assert (record()["current_version"], record()["history"]) == (A, [])
    cloudformation_backends["123456789012"]["us-west-2"].stacks[stack_id].status = "UPDATE_ROLLBACK_COMPLETE"
    deploy(stack_id, B, A)  # the retry: B never served, so it is not "served before"
    assert responses[-1]["Status"] == "SUCCESS" and record()["current_version"] == B


def test_the_rollback_of_a_deploy_that_was_refused_changes_nothing(stack_id, responses) -> None:
    deploy(stack_id, A, None)
    deploy(stack_id, B, A)
    deploy(stack_id, A, B)  # refused: CloudFormation rolls the guard back to B's properties
    rolls_back(stack_id)
    deploy_guard.on_event(event(stack_id, "Update", properties(B), properties(A)), None)
    assert responses[-1]["Status"] == "SUCCESS"
    assert (record()["current_version"], record()["history"]) == (B, [A])


def test_the_rollback_of_the_deploy_that_first_recorded_a_target_forgets_it(stack_id, responses) -> None:
    other = contract.hyperpod_target_id("c", "hyperwarm-models", "JumpStartModel", "js")
    first = properties("2.0.4")
    both = {**first, "Targets": first["Targets"] + properties("2.0.4", target=other)["Targets"]}
    deploy_guard.on_event(event(stack_id, "Create", first), None)
    deploy_guard.on_event(event(stack_id, "Update", both, first), None)
    assert record(other)["current_version"] == "2.0.4"
    rolls_back(stack_id)
    deploy_guard.on_event(event(stack_id, "Update", first, both), None)
    assert record(other) == {} and record()["current_version"] == "2.0.4"


def test_a_lost_write_fails_the_deploy_and_records_nothing(stack_id, responses, monkeypatch) -> None:
    deploy(stack_id, A, None)

    def refused(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("AccessDeniedException: dynamodb:PutItem")

    monkeypatch.setattr(deploy_guard, "_write_record", refused)
    deploy(stack_id, B, A)
    assert responses[-1]["Status"] == "FAILED" and "AccessDenied" in responses[-1]["Reason"]
    assert record()["current_version"] == A  # the rollback then restores A's properties: nothing to undo


def test_a_rollback_whose_record_cannot_be_restored_still_succeeds_and_says_so(stack_id, responses, monkeypatch) -> None:
    deploy(stack_id, A, None)
    deploy(stack_id, B, A)
    rolls_back(stack_id)
    monkeypatch.setattr(deploy_guard, "_record", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("throttled")))
    deploy_guard.on_event(event(stack_id, "Update", properties(A), properties(B)), None)
    assert responses[-1]["Status"] == "SUCCESS"
    assert "could not restore the deploy records it replaced: RuntimeError: throttled" in responses[-1]["Reason"]


def test_a_record_a_newer_release_wrote_stops_the_deploy_saying_so(stack_id, responses) -> None:
    deploy(stack_id, A, None)
    boto3.resource("dynamodb").Table(TABLE).put_item(Item={**record(), "format": "hyperwarm.refresh.deployed/v2"})
    deploy(stack_id, B, A)
    assert responses[-1]["Status"] == "FAILED" and "written by a newer hyperwarm" in responses[-1]["Reason"]


def test_history_keeps_the_latest_versions() -> None:
    item: dict[str, Any] = {"pk": "target#x"}
    for n in range(deployed.HISTORY_KEPT + 5):
        item = deployed.recorded({"Id": "x", "Version": f"{n:040x}", "Value": "{version}"}, item, n) or item
    assert len(item["history"]) == deployed.HISTORY_KEPT and item["history"][-1] == f"{deployed.HISTORY_KEPT + 3:040x}"


# The construct and the app.

def test_a_guard_of_recorded_targets_owns_its_table_and_may_write_only_it() -> None:
    stack = cdk.Stack(cdk.App(), "T", env=cdk.Environment(region="us-west-2", account="123456789012"))
    guard = RefreshGuard(stack, "Guard", RefreshGuardProps(targets=[
        GuardedTarget(target_id=HUB, version=A, field=FIELD, recorded=True)]))
    template = Template.from_stack(stack)
    assert guard.deployed_versions is not None
    (table_id,) = template.find_resources("AWS::DynamoDB::Table")
    (resource,) = template.find_resources("Custom::RefreshGuard").values()
    assert resource["Properties"]["DeployedTable"] == {"Ref": table_id} and "Table" not in resource["Properties"]
    assert resource["Properties"]["Targets"] == [{"Id": HUB, "Version": A, "Field": FIELD, "Value": "{version}",
                                                  "Recorded": True}]
    statements = [s for p in template.find_resources("AWS::IAM::Policy").values()
                  for s in p["Properties"]["PolicyDocument"]["Statement"]]
    dynamo = [s for s in statements if "dynamodb" in str(s["Action"])]
    assert dynamo == [{"Action": ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem"], "Effect": "Allow",
                       "Resource": [{"Fn::GetAtt": [table_id, "Arn"]}]}]


def test_a_refreshed_target_without_the_state_table_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"state_table_name = None -- targets t are not recorded by the guard"):
        RefreshGuard(cdk.Stack(cdk.App(), "T"), "Guard", RefreshGuardProps(targets=[
            GuardedTarget(target_id="t", version="v1", field="f"), GuardedTarget("h", A, "f", recorded=True)]))


def _guards(synthesized: Any, stack: str) -> dict[str, dict[str, Any]]:
    (guard,) = synthesized.resources(stack, "Custom::RefreshGuard").values()
    return {t["Field"].split(".", 2)[2]: t for t in guard["Properties"]["Targets"]}


def test_every_cached_model_of_the_example_is_guarded_by_what_moves_it(synthesized) -> None:
    dev, staging = _guards(synthesized, "hyperwarm-dev-caches"), _guards(synthesized, "hyperwarm-staging-caches")
    assert {k: (t["Version"], t.get("Recorded")) for k, t in dev.items()} == {
        "caches.models[0].source.version": ("v1", True), "caches.models[1].source.model_version": ("2.0.4", True)}
    assert {k: t.get("Recorded") for k, t in staging.items()} == {
        "caches.models[0].source.version": None,  # refreshed from S3: the refresh function's record
        "caches.models[1].source.version": True, "caches.models[2].source.revision": True,
        "caches.models[3].source.version": True}


def _staging(context: dict[str, Any], **caches: Any) -> dict[str, Any]:
    raw = copy.deepcopy(context["environments"]["staging"])
    raw["caches"].update(caches)
    return raw


def test_caches_rollback_pins_the_named_model(project_context) -> None:
    from stacks.refresh_guards import deployed_targets

    config = parse_environment("staging", _staging(project_context, rollback=["qwen2-5-7b-hub"]))
    pins = {t.field.rsplit(".", 1)[1]: t.pinned_location for t in deployed_targets("staging", config, "c")}
    assert pins == {"revision": "hf://Qwen/Qwen2.5-7B-Instruct@a09a35458c702b33eeacc393d103063234e8bc28",
                    "version": None}  # the FSx and unrefreshed S3 models: not pinned


@pytest.mark.parametrize("rollback, message", [
    (["nope"], "caches.rollback: 'nope' is not a cached model; caches.models: llama-3-1-8b, "),
    (["llama-3-1-8b"], "caches.rollback: 'llama-3-1-8b' is refreshed from prefix 'llama-3.1-8b-instruct', whose "
                       "versions the refresh records: roll it back with that entry's pinned: true instead"),
])
def test_caches_rollback_names_an_unrefreshed_cached_model(project_context, rollback: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("(", r"\(")):
        parse_environment("staging", _staging(project_context, rollback=rollback))


# What a review found: a model leaving refresh, a late retry, an unreadable stack, a removed model.

STATE = "hyperwarm-test-cache-refresh-state"


def _state_table(version: str, target: str = HUB) -> None:
    """The refresh function's state table, recording that it moved ``target`` to ``version``."""
    pk_table(STATE).put_item(Item={
        "pk": contract.state_pk(target), "current_version": version, "current_location": f"llama/{version}", "rev": 1})


def test_a_model_taken_out_of_refresh_starts_from_the_version_the_refresh_made_serve(stack_id, responses) -> None:
    """cdk.json says v3, the refresh moved the model to v5, then the refresh entry was removed: v3 is a move back."""
    _state_table("v5")
    with_state = {**properties("v3"), "Table": STATE}
    deploy_guard.on_event(event(stack_id, "Update", with_state, {**with_state, "Targets": []}), None)
    assert responses[-1]["Status"] == "FAILED"
    assert f"{HUB} is at v5 (moved there by the cache refresh function) but this deploy would set v3, an older " \
           "version" in responses[-1]["Reason"]
    deploy_guard.on_event(event(stack_id, "Update", {**properties("v6"), "Table": STATE}, with_state), None)
    assert responses[-1]["Status"] == "SUCCESS"
    assert (record()["current_version"], record()["history"]) == ("v6", ["v5"])


def test_a_late_retry_of_a_request_cloudformation_gave_up_on_changes_no_record(stack_id, responses) -> None:
    """The A->B update timed out (its answer lost), CloudFormation rolled back to A, then B's request came again."""
    deploy(stack_id, A, None)
    deploy(stack_id, B, A)
    rolls_back(stack_id)
    deploy_guard.on_event(event(stack_id, "Update", properties(A), properties(B)), None)
    assert record()["current_version"] == A
    deploy_guard.on_event(event(stack_id, "Update", properties(B), properties(A)), None)  # still rolling back
    assert (record()["current_version"], record()["history"]) == (A, [])  # neither deleted nor rewritten


def test_the_guard_function_is_never_retried_by_lambda() -> None:
    stack = cdk.Stack(cdk.App(), "T", env=cdk.Environment(region="us-west-2", account="123456789012"))
    RefreshGuard(stack, "Guard", RefreshGuardProps(targets=[GuardedTarget(HUB, A, FIELD, recorded=True)]))
    (config,) = Template.from_stack(stack).find_resources("AWS::Lambda::EventInvokeConfig").values()
    assert (config["Properties"]["MaximumRetryAttempts"], config["Properties"]["Qualifier"]) == (0, "$LATEST")


def _unreadable(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*args: Any, **kwargs: Any) -> bool:
        raise RuntimeError("AccessDenied: cloudformation:DescribeStacks")
    monkeypatch.setattr(deploy_guard, "rolling_back", refused)


def test_with_the_stack_state_unreadable_a_move_back_is_counted_and_not_recorded(stack_id, responses, monkeypatch,
                                                                              capsys) -> None:
    deploy(stack_id, A, None)
    deploy(stack_id, B, A)
    _unreadable(monkeypatch)
    capsys.readouterr()
    deploy_guard.on_event(event(stack_id, "Update", properties(A), properties(C)), None)  # not B's rollback
    assert responses[-1]["Status"] == "SUCCESS"  # it may be a rollback: never blocked
    assert f"may be moved back (RefreshFailed moved-back): {HUB} is at {B}" in responses[-1]["Reason"]
    assert '"Reason": "moved-back"' in capsys.readouterr().out
    assert record()["current_version"] == B  # not recorded: the next deploy of A is stopped, not admitted


def test_with_the_stack_state_unreadable_a_rollback_is_still_undone(stack_id, responses, monkeypatch) -> None:
    deploy(stack_id, A, None)
    deploy(stack_id, B, A)
    _unreadable(monkeypatch)
    deploy_guard.on_event(event(stack_id, "Update", properties(A), properties(B)), None)
    assert responses[-1]["Status"] == "SUCCESS" and "moved back" not in responses[-1]["Reason"]
    assert (record()["current_version"], record()["history"]) == (A, [])


def test_the_record_of_a_model_no_longer_deployed_is_dropped(stack_id, responses) -> None:
    deploy(stack_id, A, None)
    deploy(stack_id, B, A)
    other = contract.hyperpod_target_id("c", "hyperwarm-models", "JumpStartModel", "js")
    deploy_guard.on_event(event(stack_id, "Update", properties("2.0.4", target=other), properties(B)), None)
    assert responses[-1]["Status"] == "SUCCESS" and record() == {}
    deploy_guard.on_event(event(stack_id, "Update", properties(A), properties("2.0.4", target=other)), None)
    assert responses[-1]["Status"] == "SUCCESS"  # re-added later at an earlier revision: nothing serves it

