"""The answer a CloudFormation custom resource's function sends to the presigned ``ResponseURL``.

Shared by the refresh deploy guard and the Hub token sync (both assets bundle it). Standard library only.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

REASON_MAX = 3000
"""Of CloudFormation's 4 KB response, what the reason may take."""


def respond(event: dict[str, Any], status: str, reason: str, resource: str) -> None:
    """Answer ``event`` with ``status`` (SUCCESS or FAILED) and ``reason``; a new resource's physical id is
    ``<resource>-<LogicalResourceId>``."""
    body = json.dumps({
        "Status": status, "Reason": reason[:REASON_MAX],
        "PhysicalResourceId": event.get("PhysicalResourceId") or f"{resource}-{event['LogicalResourceId']}",
        "StackId": event["StackId"], "RequestId": event["RequestId"], "LogicalResourceId": event["LogicalResourceId"],
    }).encode()
    request = urllib.request.Request(event["ResponseURL"], data=body, method="PUT",
                                     headers={"Content-Type": "", "Content-Length": str(len(body))})
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 (CloudFormation's presigned URL)
        response.read()
