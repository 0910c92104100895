"""DLQ replay through the CLI function, and random event sequences (hypothesis)."""

from __future__ import annotations

import io
import json

import boto3
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from moto import mock_aws
from refresh_world import PREFIX, TABLE, kube_objects, start_world, targets

from hyperwarm.functions.cache_refresh import handler, letters
from hyperwarm.functions.cache_refresh.versions import compare
from hyperwarm.refresh import cli as refresh_cli


class InvokeHandler:
    """A Lambda client whose invoke runs the handler in-process (what `hyperwarm refresh replay` calls)."""

    def __init__(self, context):
        self.context, self.calls = context, []

    def invoke(self, FunctionName, InvocationType, Payload):
        self.calls.append(json.loads(Payload))
        try:
            result = handler.lambda_handler(json.loads(Payload), self.context)
        except Exception as exc:  # what Lambda answers for an unhandled error
            return {"StatusCode": 200, "FunctionError": "Unhandled",
                    "Payload": io.BytesIO(json.dumps({"errorMessage": str(exc)}).encode())}
        return {"StatusCode": 200, "Payload": io.BytesIO(json.dumps(result).encode())}


def queue_counts(world):
    """(visible, hidden) messages in the dead-letter queue."""
    attrs = world.sqs.get_queue_attributes(QueueUrl=world.dlq_url, AttributeNames=[
        "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
    return int(attrs["ApproximateNumberOfMessages"]), int(attrs["ApproximateNumberOfMessagesNotVisible"])


def test_replay_moves_targets_and_removes_the_message(world, context):
    event = world.upload("v2", listed={"extra.bin": 3})
    handler.lambda_handler(event, context)
    world.upload_late("v2", "extra.bin", 3)
    [result] = refresh_cli.replay(world.dlq_url, "fn", sqs=world.sqs, lambda_client=InvokeHandler(context))
    assert result["status"] == "replayed"
    assert world.served_hyperpod() == f"{PREFIX}/v2"
    assert world.sqs.receive_message(QueueUrl=world.dlq_url).get("Messages", []) == []


def test_replay_reads_every_dead_letter_shape():
    event = {"source": "aws.s3", "detail": {}}
    state = {"source": "aws.sagemaker", "detail-type": "SageMaker Endpoint State Change", "detail": {}}
    letter = letters.envelope(event, "manifest-mismatch", "m", ["t"], request_id="r")
    assert refresh_cli.original_event(json.dumps(letter)) == event
    on_failure = {"version": "1.0", "timestamp": "2026-11-29T12:00:00.000Z",
                  "requestContext": {"requestId": "r", "functionArn": "arn:aws:lambda:us-west-2:1:function:f",
                                     "condition": "RetriesExhausted", "approximateInvokeCount": 3},
                  "requestPayload": state, "responseContext": {"statusCode": 200, "functionError": "Unhandled"},
                  "responsePayload": {"errorMessage": "boom"}}
    assert refresh_cli.original_event(json.dumps(on_failure)) == state
    assert refresh_cli.original_event(json.dumps(event)) == event
    assert refresh_cli.original_event(json.dumps(state)) == state


def test_an_on_failure_record_is_replayed_through_the_one_function(world, context):
    event = world.upload("v2")
    record = {"version": "1.0", "requestContext": {"condition": "RetriesExhausted"}, "requestPayload": event,
              "responseContext": {"functionError": "Unhandled"}, "responsePayload": {}}
    world.sqs.send_message(QueueUrl=world.dlq_url, MessageBody=json.dumps(record))
    [result] = refresh_cli.replay(world.dlq_url, "fn", sqs=world.sqs, lambda_client=InvokeHandler(context))
    assert result["status"] == "replayed"
    assert world.served_hyperpod() == f"{PREFIX}/v2" and queue_counts(world) == (0, 0)


def test_a_failed_replay_keeps_its_letter_visible_and_adds_none(world, context):
    handler.lambda_handler(world.upload("v2", listed={"extra.bin": 3}), context)
    [letter] = world.dead_letters()
    [result] = refresh_cli.replay(world.dlq_url, "fn", sqs=world.sqs, lambda_client=InvokeHandler(context))
    assert result["status"] == "failed-again"
    assert queue_counts(world) == (1, 0) and world.dead_letters() == [letter]


def test_message_id_finds_a_letter_anywhere_in_the_queue_and_leaves_the_others(world, context):
    for n in range(25):
        world.sqs.send_message(QueueUrl=world.dlq_url, MessageBody=json.dumps({"unrelated": n}))
    event = world.upload("v2")
    target = world.sqs.send_message(QueueUrl=world.dlq_url, MessageBody=json.dumps(event))["MessageId"]
    invoker = InvokeHandler(context)
    [result] = refresh_cli.replay(world.dlq_url, "fn", target, sqs=world.sqs, lambda_client=invoker)
    assert (result["message_id"], result["status"]) == (target, "replayed")
    assert len(invoker.calls) == 1 and invoker.calls[0]["hyperwarm-replay"] == {"message_id": target}
    assert queue_counts(world) == (25, 0)  # the ones scanned past are visible again at once


def test_replay_cli_parses_its_options():
    from hyperwarm.cli import build_parser
    args = build_parser("refresh").parse_args(["refresh", "replay", "--queue-url", "https://q", "--message-id", "m1",
                                               "--function-name", "hyperwarm-prod-cache-refresh"])
    assert (args.queue_url, args.message_id, args.function_name) == ("https://q", "m1", "hyperwarm-prod-cache-refresh")
    with pytest.raises(SystemExit):  # which function is never guessed
        build_parser("refresh").parse_args(["refresh", "replay", "--queue-url", "https://q"])


# one upload: (version number, complete?); the list is delivered in a random order with duplicates
uploads = st.lists(st.tuples(st.integers(2, 6), st.booleans()), min_size=1, max_size=5)


@pytest.fixture
def hyperpod_world(kube_server, monkeypatch):
    with mock_aws():
        yield start_world(kube_server, monkeypatch, targets(endpoint=False))


def reset(world):
    """Back to v1 served, no state: the table is emptied and the cluster objects recreated."""
    table = boto3.resource("dynamodb", region_name="us-west-2").Table(TABLE)
    for item in table.scan()["Items"]:
        table.delete_item(Key={"pk": item["pk"]})
    world.kube.objects.clear()
    for obj in kube_objects():
        world.kube.add(obj)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=uploads, order=st.randoms(use_true_random=False))
def test_served_version_only_moves_forward_to_complete_versions(hyperpod_world, context, plan, order):
    world = hyperpod_world
    reset(world)
    events, complete = [], set()
    for number, is_complete in plan:
        version = f"v{number}"
        if version in complete:
            continue
        listed = None if is_complete else {"missing.bin": 1}
        event = world.upload(version, listed=listed)
        if is_complete:
            complete.add(version)
        events += [event, event] if number % 2 else [event]
    order.shuffle(events)
    served = ["v1"]
    for event in events:
        handler.lambda_handler(event, context)
        now = world.served_hyperpod().rsplit("/", 1)[-1]
        assert compare(now, served[-1]) >= 0
        assert now == "v1" or now in complete
        served.append(now)
    seen_complete = {e["detail"]["object"]["key"].split("/")[-2] for e in events} & complete
    if seen_complete:
        assert served[-1] == max(seen_complete, key=lambda v: int(v[1:]))


def test_the_replay_cli_reads_the_letters_the_function_writes_and_adds_its_replay_key():
    from hyperwarm.functions.cache_refresh import flow
    event = {"source": "aws.s3", "id": "e", "detail": {"bucket": {"name": "b"}, "object": {"key": "m/v2/manifest.json"}}}
    letter = json.dumps(letters.envelope(event, "manifest-mismatch", "m", ["t"], request_id="r"))
    assert (refresh_cli.original_event(letter), refresh_cli.REPLAY_KEY) == (event, flow.REPLAY_KEY)


def test_replay_takes_the_region_from_the_queue_url_not_only_from_aws_default_region(monkeypatch) -> None:
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    assert refresh_cli.queue_region("https://sqs.eu-west-1.amazonaws.com/123456789012/dlq") == "eu-west-1"
    monkeypatch.setenv("AWS_REGION", "us-east-2")
    assert refresh_cli.queue_region("http://localhost:4566/000000000000/dlq") == "us-east-2"


@pytest.mark.parametrize("variable, expected", [
    ("credentials", "no AWS credentials found; set AWS_PROFILE or run `aws configure`"),
    ("region", "no AWS region: 'http://localhost:1/dlq' names none"),
])
def test_replay_reports_missing_credentials_or_region_in_one_line(monkeypatch, capsys, variable, expected) -> None:
    from hyperwarm.cli import main

    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
                "AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # never reach for instance credentials
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)  # earlier tests' session caches their credentials
    url = "https://sqs.eu-west-1.amazonaws.com/123456789012/dlq" if variable == "credentials" else "http://localhost:1/dlq"
    assert main(["refresh", "replay", "--queue-url", url, "--function-name", "f"]) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err


def test_replay_waits_for_a_long_refresh_instead_of_invoking_it_again(monkeypatch) -> None:
    made = {}

    def client(service, **kwargs):
        made[service] = kwargs
        raise RuntimeError("stop here")  # the clients' settings are what this test is about

    monkeypatch.setattr(boto3, "client", client)
    with pytest.raises(RuntimeError):
        refresh_cli.replay("https://sqs.eu-west-1.amazonaws.com/123456789012/dlq", "f", sqs=object())
    config = made["lambda"]["config"]
    assert made["lambda"]["region_name"] == "eu-west-1"
    assert config.read_timeout >= 900 and config.retries == {"total_max_attempts": 1}


def test_a_stack_rollback_of_a_refreshed_endpoint_is_dead_lettered_and_replay_moves_it_forward(world, context):
    """End to end on moto: CloudFormation's rollback puts its own v1 config back; the state change is a
    moved-back letter (with its id as a message attribute); replaying it starts v2 again."""
    import moto_ext
    from refresh_world import BUCKET, ENDPOINT

    handler.lambda_handler(world.upload("v2"), context)
    moto_ext.settle(moto_ext.backend(), ENDPOINT)
    handler.on_endpoint_state_change(moto_ext.state_change_event(world.sm, ENDPOINT), context)
    assert world.served_endpoint() == f"s3://{BUCKET}/{PREFIX}/v2/"
    world.sm.update_endpoint(EndpointName=ENDPOINT, EndpointConfigName="llama-prod-cfn")  # the stack rollback
    moto_ext.settle(moto_ext.backend(), ENDPOINT)
    result = handler.on_endpoint_state_change(moto_ext.state_change_event(world.sm, ENDPOINT), context)
    assert (result["status"], result["reason"]) == ("dead-lettered", "moved-back")
    (message,) = world.sqs.receive_message(QueueUrl=world.dlq_url, MaxNumberOfMessages=10, VisibilityTimeout=0,
                                           MessageAttributeNames=["All"])["Messages"]
    letter = json.loads(message["Body"])
    assert message["MessageAttributes"]["letter-id"]["StringValue"] == letter["letter_id"]
    assert letter["event"]["detail"]["object"]["key"] == f"{PREFIX}/v2/manifest.json"
    [replayed] = refresh_cli.replay(world.dlq_url, "fn", sqs=world.sqs, lambda_client=InvokeHandler(context))
    assert replayed["status"] == "replayed"
    assert replayed["result"]["targets"][f"endpoint:{ENDPOINT}"] == {"status": "started"}
    moto_ext.settle(moto_ext.backend(), ENDPOINT)
    handler.on_endpoint_state_change(moto_ext.state_change_event(world.sm, ENDPOINT), context)
    assert world.served_endpoint() == f"s3://{BUCKET}/{PREFIX}/v2/"
