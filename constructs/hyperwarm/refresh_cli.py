"""``hyperwarm refresh replay``: re-drive a dead-lettered cache refresh event.

Reads messages from the refresh dead-letter queue, extracts the original S3 event (from the
Lambda's own ``hyperwarm.refresh-dlq/v1`` envelope, an asynchronous-invocation failure record,
or a raw EventBridge event), invokes the refresh function with it, and deletes the message only
when the invocation succeeded. Replaying is safe: the Lambda skips targets already at that version.
"""

from __future__ import annotations

import argparse
import json
from typing import Any



def original_event(body: str) -> dict[str, Any]:
    """The S3 EventBridge event inside a DLQ message body, whichever path dead-lettered it."""
    doc = json.loads(body)
    if isinstance(doc, dict) and doc.get("format") == "hyperwarm.refresh-dlq/v1":
        return doc["event"]
    if isinstance(doc, dict) and "requestPayload" in doc:  # Lambda on-failure destination record
        return doc["requestPayload"]
    if isinstance(doc, dict) and doc.get("source") == "aws.s3":  # EventBridge target DLQ: the event itself
        return doc
    raise ValueError("message holds no cache refresh event")


def replay(queue_url: str, function_name: str, message_id: str | None = None, *, sqs: Any = None,
           lambda_client: Any = None, max_messages: int = 10) -> list[dict[str, Any]]:
    """Invoke ``function_name`` with each matching message's event; returns one result per message."""
    import boto3

    sqs = sqs or boto3.client("sqs")
    lambda_client = lambda_client or boto3.client("lambda")
    results = []
    messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=max_messages,
                                   VisibilityTimeout=60, WaitTimeSeconds=1).get("Messages", [])
    for message in messages:
        if message_id and message["MessageId"] != message_id:
            sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"],
                                          VisibilityTimeout=0)
            continue
        try:
            event = original_event(message["Body"])
        except (ValueError, KeyError) as exc:
            results.append({"message_id": message["MessageId"], "status": "unreadable", "error": str(exc)})
            continue
        response = lambda_client.invoke(FunctionName=function_name, InvocationType="RequestResponse",
                                        Payload=json.dumps(event).encode())
        payload = json.loads(response["Payload"].read() or b"null")
        ok = "FunctionError" not in response and not (isinstance(payload, dict) and payload.get("status") == "failed")
        if ok:
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
        results.append({"message_id": message["MessageId"], "status": "replayed" if ok else "failed-again",
                        "result": payload})
    return results


def _run(args: argparse.Namespace) -> int:
    results = replay(args.queue_url, args.function_name, args.message_id)
    for result in results:
        print(json.dumps(result, default=str))
    if not results:
        print("no matching messages")
    return 0 if all(r["status"] == "replayed" for r in results) else 1


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("refresh", help="operate cache refreshes (replay dead-lettered events)")
    commands = parser.add_subparsers(dest="refresh_command", metavar="COMMAND", required=True)
    rp = commands.add_parser("replay", help="re-drive dead-lettered refresh events through the refresh Lambda")
    rp.add_argument("--queue-url", required=True, help="URL of the refresh dead-letter queue")
    rp.add_argument("--message-id", help="replay only this message (default: up to 10 messages)")
    rp.add_argument("--function-name", required=True,
                    help="refresh function name or ARN: the refresh stack's RefreshFunctionName output, "
                         "hyperwarm-<env>-cache-refresh")
    rp.set_defaults(func=_run)
