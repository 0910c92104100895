"""kms.sign-named-only: a signing key's policy never leaves kms:Sign to whatever the account's IAM policies allow."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rehearsal import Assembly
from rehearsal.rules.signing import sign_named_only

ROOT = {"Fn::Join": ["", ["arn:aws:iam::", {"Ref": "AWS::AccountId"}, ":root"]]}
PUBLISHER = "arn:aws:iam::111122223333:role/hyperwarm-model-publishers"
ADMINISTER = {"Effect": "Allow", "Principal": {"AWS": ROOT}, "Action": "kms:*", "Resource": "*"}
NAMED = {"Effect": "Allow", "Principal": {"AWS": PUBLISHER}, "Action": ["kms:Sign", "kms:GetPublicKey"],
         "Resource": "*"}
DENY = {"Effect": "Deny", "Principal": {"AWS": "*"}, "Action": "kms:Sign", "Resource": "*",
        "Condition": {"ArnNotEquals": {"aws:PrincipalArn": [PUBLISHER]}}}


def key(*statements: dict[str, Any], usage: str = "SIGN_VERIFY") -> dict[str, Any]:
    props: dict[str, Any] = {"KeySpec": "ECC_NIST_P256", "KeyUsage": usage}
    if statements:
        props["KeyPolicy"] = {"Version": "2012-10-17", "Statement": list(statements)}
    return {"Resources": {"Key": {"Type": "AWS::KMS::Key", "Properties": props}}}


def findings(template: dict[str, Any]) -> list[str]:
    return [f.message for f in sign_named_only(Assembly.from_templates({"s": template}))]


@pytest.mark.parametrize("statements", [
    (ADMINISTER, NAMED),  # CDK's default: the account root may use the key, so IAM decides
    (NAMED, {"Effect": "Allow", "Principal": {"AWS": "111122223333"}, "Action": "kms:Sign", "Resource": "*"}),
    (NAMED, {"Effect": "Allow", "Principal": "*", "Action": "kms:*", "Resource": "*"}),
    (NAMED, {"Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::444455556666:root"}, "Action": "kms:Sign",
             "Resource": "*"}),  # another account's administrators
    (),  # no KeyPolicy: KMS's default, the root statement alone
    (ADMINISTER, {**DENY, "Action": "kms:Verify"}),  # denies the wrong action
    (ADMINISTER, {**DENY, "Principal": {"AWS": PUBLISHER}}),  # denies one principal, not the rest
    (ADMINISTER, {**DENY, "Condition": {"ArnNotLike": {"aws:PrincipalArn": "arn:aws:iam::111122223333:role/*"}}}),
    (ADMINISTER, {**DENY, "Condition": {"ArnNotEquals": {"aws:PrincipalArn": [PUBLISHER]},
                                        "IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}}),  # only from one network
    (ADMINISTER, {**DENY, "Condition": {"StringNotEquals": {"aws:username": "alice"}}}),
])
def test_a_signing_key_anyone_in_the_account_may_sign_with_is_found(statements: tuple[dict[str, Any], ...]) -> None:
    (message,) = findings(key(*statements))
    assert "without a Deny of kms:Sign to every principal but the named signers" in message


@pytest.mark.parametrize("template", [
    key(ADMINISTER, NAMED, DENY),
    key(ADMINISTER, {**DENY, "Condition": {"Null": {"aws:PrincipalArn": "false"}}}),  # nobody signs
    key(ADMINISTER, {**DENY, "Condition": {}}),
    key(ADMINISTER, {**DENY, "Action": "kms:*", "Condition": {"ArnNotEquals": {"aws:PrincipalArn": [
        {"Fn::GetAtt": ["Publisher", "Arn"]}]}}}),
    key(NAMED),  # only the publisher was ever allowed
    key(ADMINISTER, usage="ENCRYPT_DECRYPT"),  # not a signing key
])
def test_a_signing_key_only_named_signers_may_use_passes(template: dict[str, Any]) -> None:
    assert findings(template) == []


def test_the_production_publisher_key_passes_and_fails_without_its_deny(synthesized) -> None:
    """The real synth passes; the same template with the Deny taken out (the key as it was) is found."""
    assembly = Assembly.from_outdir(synthesized.outdir)
    assert sign_named_only(assembly) == []
    template = copy.deepcopy(assembly.templates["hyperwarm-prod-refresh"])
    ((key_id, resource),) = [(k, r) for k, r in template["Resources"].items() if r["Type"] == "AWS::KMS::Key"]
    statements = resource["Properties"]["KeyPolicy"]["Statement"]
    statements[:] = [s for s in statements if s["Effect"] != "Deny"]
    (finding,) = sign_named_only(Assembly.from_templates({"hyperwarm-prod-refresh": template}))
    assert finding.resource == key_id and "arn:aws:iam::${TOKEN}:root" in finding.message
