"""Calling PREFIX_AWARE endpoints: canonical request bytes and the ``PrefixAwareId`` hint.

Prefix-aware routing hashes the first ``PrefixLength`` bytes of the request body. Two requests
that share a system prompt but serialise it with different key order or whitespace produce
different leading bytes and land on different instances, losing the KV-cache hit. Serialise
with :func:`canonical_json` so equal content gives equal bytes.
"""

from __future__ import annotations

import json
import re
from typing import Any

PREFIX_AWARE_ID_HEADER = "X-Amzn-SageMaker-Prefix-Aware-Id"
_PREFIX_AWARE_ID = re.compile(r"^[\x21-\x7e][\x20-\x7e]{0,63}$")


def canonical_json(body: Any) -> bytes:
    """``body`` as compact UTF-8 JSON with sorted keys: logically equal requests give equal bytes.

    Lists keep their order (message order is meaning); only object keys are sorted. Non-ASCII text
    stays UTF-8 rather than ``\\u`` escapes, so ``PrefixLength`` counts the bytes actually sent.
    """
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def prefix_aware_id(value: str) -> str:
    r"""Validate a ``PrefixAwareId``: 1..64 printable ASCII characters, not starting with a space
    (the API pattern is ``\S[\p{Print}]*``; ASCII keeps the HTTP header safe)."""
    if not isinstance(value, str) or not _PREFIX_AWARE_ID.match(value):
        raise ValueError(f"PrefixAwareId {value!r}: allowed 1..64 printable ASCII characters, the first not a space")
    return value


def invoke_endpoint_args(endpoint_name: str, body: Any, *, tenant: str | None = None,
                         content_type: str = "application/json") -> dict[str, Any]:
    """Keyword arguments for boto3 ``sagemaker-runtime`` ``invoke_endpoint`` (or ``..._with_response_stream``).

    ``tenant`` becomes ``PrefixAwareId``: requests with equal prefixes but different tenants are kept
    apart by the router, so one tenant's cached prompt never decides where another's goes.
    """
    args: dict[str, Any] = {"EndpointName": endpoint_name, "Body": canonical_json(body),
                            "ContentType": content_type}
    if tenant is not None:
        args["PrefixAwareId"] = prefix_aware_id(tenant)
    return args


def shared_prefix_length(a: bytes, b: bytes) -> int:
    """How many leading bytes two request bodies share (what the router compares)."""
    n = 0
    for x, y in zip(a, b, strict=False):  # up to the shorter body
        if x != y:
            break
        n += 1
    return n


def routed_prefix(body: bytes, prefix_length: int) -> bytes:
    """The bytes a PREFIX_AWARE variant with ``prefix_length`` routes on."""
    return body[:prefix_length]


__all__ = [
    "PREFIX_AWARE_ID_HEADER", "canonical_json", "invoke_endpoint_args", "prefix_aware_id",
    "routed_prefix", "shared_prefix_length",
]
