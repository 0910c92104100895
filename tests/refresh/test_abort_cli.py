"""``hyperwarm refresh abort``: the abort recorded (who, when), the execution stopped, the reconciliation run; on
moto's DynamoDB, STS and Step Functions, the refresh function answered in-process (the warm world's flow)."""

from __future__ import annotations

import io
import json
from typing import Any

import boto3
import pytest
from moto import mock_aws
from stand_ins import pk_table
from warm_world import TARGET, WarmWorld

from hyperwarm.functions.cache_refresh import contract, flow
from hyperwarm.functions.cache_refresh.state import DynamoStore, StateTable
from hyperwarm.refresh import cli

REGION = "us-west-2"


class Reconciling:
    """The refresh function as ``abort`` invokes it: the warm world's flow, reading the same table (moto)."""

    def __init__(self, world: WarmWorld, table: str, fails: bool = False) -> None:
        self.world, self.table, self.fails, self.payloads = world, table, fails, []

    def invoke(self, FunctionName: str, Payload: bytes) -> dict[str, Any]:  # noqa: N803 (boto3's names)
        self.payloads.append((FunctionName, json.loads(Payload)))
        if self.fails:
            return {"FunctionError": "Unhandled", "Payload": io.BytesIO(b'{"errorMessage": "boom"}')}
        ports = self.world.ports()
        ports.state = StateTable(DynamoStore(boto3.resource("dynamodb", region_name=REGION), self.table),
                                 lambda: self.world.cluster.now)
        return {"StatusCode": 200, "Payload": io.BytesIO(json.dumps(flow.handle(ports, json.loads(Payload))).encode())}


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Any:
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        pk_table("state", REGION)
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        sfn = boto3.client("stepfunctions", region_name=REGION)
        machine = sfn.create_state_machine(name="rollout", roleArn="arn:aws:iam::123456789012:role/r", definition=json.dumps(
            {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 3600, "End": True}}}))["stateMachineArn"]
        yield dynamodb, sfn, machine


def _staging_world(aws: Any) -> tuple[WarmWorld, str]:
    """A warm rollout of v2 staging, its record in moto's table, its execution running."""
    dynamodb, sfn, machine = aws
    world = WarmWorld()
    world.upload("v2", 1)
    world.step("v2")
    item = world.record()
    boto3.resource("dynamodb", region_name=REGION).Table("state").put_item(Item=json.loads(json.dumps(item)))
    sfn.start_execution(stateMachineArn=machine, name=item["pending"]["config"],
                        input=json.dumps(contract.RolloutStep(TARGET.id, "v2").to_json()))
    return world, machine


def _clients(world: WarmWorld, fails: bool = False) -> tuple[Any, Reconciling]:
    lambda_client = Reconciling(world, "state", fails)
    def make(service: str) -> Any:
        if service == "lambda":
            return lambda_client
        return (boto3.resource if service == "dynamodb" else boto3.client)(service, region_name=REGION)
    return make, lambda_client


def test_an_abort_is_recorded_with_who_asked_the_execution_stopped_and_the_rollout_ended(aws: Any) -> None:
    world, machine = _staging_world(aws)
    clients, invoked = _clients(world)
    record = cli.abort("state", TARGET.id, "hyperwarm-prod-cache-refresh", machine, clients=clients)
    assert record["last_rollout"]["reason"] == "aborted" and "pending" not in record
    assert world.cluster.reads() == "v1" and world.cluster.kept() == ["v1"]
    (execution,) = aws[1].list_executions(stateMachineArn=machine)["executions"]
    assert execution["status"] == "ABORTED"
    (name, event), = invoked.payloads
    assert name == "hyperwarm-prod-cache-refresh" and event["detail-type"] == "Scheduled Event"
    assert world.letters == [], "no letter: a person asked for it"


def test_a_failed_reconciliation_leaves_the_abort_recorded_with_who_asked(aws: Any) -> None:
    world, machine = _staging_world(aws)
    clients, _ = _clients(world, fails=True)
    with pytest.raises(RuntimeError, match="the abort is recorded and the next scheduled run applies it"):
        cli.abort("state", TARGET.id, "fn", None, clients=clients)
    pending = StateTable(DynamoStore(boto3.resource("dynamodb", region_name=REGION), "state")).get(TARGET.id)["pending"]
    assert pending["abort"]["by"] == boto3.client("sts", region_name=REGION).get_caller_identity()["Arn"]
    assert aws[1].list_executions(stateMachineArn=machine)["executions"][0]["status"] == "RUNNING", \
        "without the workflow's ARN the execution runs on: its next step applies the abort"


def test_an_abort_with_no_rollout_in_flight_says_so_and_exits_1(aws: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.add_parser  # the command is registered under `hyperwarm refresh`
    from hyperwarm.cli import main

    code = main(["refresh", "abort", "--target", TARGET.id, "--table", "state", "--function-name", "fn",
                 "--region", REGION])
    assert code == 1 and "no rollout in flight to abort" in capsys.readouterr().err
