"""Client helper for PREFIX_AWARE endpoints: equal requests give equal leading bytes."""

from __future__ import annotations

import botocore.session
import pytest
from botocore.validate import ParamValidator

from hyperwarm import canonical_json, invoke_endpoint_args, prefix_aware_id
from hyperwarm.endpoints.client import routed_prefix, shared_prefix_length

SYSTEM = "You are a support assistant for ACME. " * 40


def test_logically_equal_requests_serialise_to_identical_bytes() -> None:
    a = {"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "hi"}], "max_tokens": 64}
    b = {"max_tokens": 64, "messages": [{"content": SYSTEM, "role": "system"}, {"content": "hi", "role": "user"}]}
    assert canonical_json(a) == canonical_json(b)


def test_requests_sharing_a_system_prompt_share_the_routed_prefix() -> None:
    a = canonical_json({"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "one"}]})
    b = canonical_json({"messages": [{"content": SYSTEM, "role": "system"}, {"role": "user", "content": "two"}]})
    assert shared_prefix_length(a, b) > 1024
    assert routed_prefix(a, 1024) == routed_prefix(b, 1024)


def test_plain_json_dumps_would_give_different_leading_bytes() -> None:
    """Why the helper exists: default json.dumps keeps insertion order and adds spaces."""
    import json
    a = json.dumps({"messages": [{"role": "system", "content": SYSTEM}]}).encode()
    b = json.dumps({"messages": [{"content": SYSTEM, "role": "system"}]}).encode()
    assert routed_prefix(a, 1024) != routed_prefix(b, 1024)


def test_non_ascii_text_is_sent_as_utf8_bytes() -> None:
    assert canonical_json({"q": "é"}) == '{"q":"é"}'.encode()


def test_invoke_arguments_carry_prefix_aware_id_and_pass_botocore_validation() -> None:
    args = invoke_endpoint_args("hyperwarm-prod-chat", {"inputs": "x"}, tenant="tenant-42")
    assert args["PrefixAwareId"] == "tenant-42"
    shape = botocore.session.get_session().get_service_model("sagemaker-runtime") \
        .operation_model("InvokeEndpoint").input_shape
    report = ParamValidator().validate(args, shape)
    assert not report.has_errors(), report.generate_report()


@pytest.mark.parametrize("value", ["", "x" * 65, " leading-space", "tab\there", "naïve"])
def test_invalid_prefix_aware_ids_are_rejected(value: str) -> None:
    with pytest.raises(ValueError, match="PrefixAwareId"):
        prefix_aware_id(value)
