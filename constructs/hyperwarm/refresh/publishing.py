"""Who may publish a model version the refresh moves targets to: the publisher key (an asymmetric KMS key) and the
principals that may sign with it (``hyperwarm publish``).

A refreshed prefix with a publisher key admits only versions whose ``model.sig`` that key signed
(:mod:`hyperwarm.functions.cache_refresh.signature`); the refresh functions may only verify with it. So writing the
model bucket is no longer enough to move production: signing needs ``kms:Sign`` on the key, and a new key's policy
denies it to every principal but the named publishers (:class:`PublisherKey`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_iam as iam, aws_kms as kms
from constructs import Construct

from hyperwarm._internal.kinds import is_a
from hyperwarm._internal.nag import acknowledge
from hyperwarm._internal.tokens import unresolved

SIGN_ACTIONS = ("kms:Sign", "kms:GetPublicKey", "kms:DescribeKey")
"""What ``hyperwarm publish`` calls on the publisher key."""
VERIFY_ACTIONS = ("kms:Verify",)
"""What the refresh functions call on it: verifying, never signing."""
_ROLE_OR_USER = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:(role|user)/[^*?]+$")


@dataclass(frozen=True)
class PublisherSigning:
    """Only versions signed by a named publisher move the hook's targets."""

    publishers: Sequence[iam.IGrantable] = ()
    """The principals that publish versions (``kms:Sign`` on the key, and writing the refreshed prefixes). Default:
    none; grant them later with :meth:`~hyperwarm.refresh.hook.CacheRefreshHook.grant_publish`."""
    key: kms.IKey | None = None
    """An existing asymmetric KMS key, key spec ``ECC_NIST_P256``, usage ``SIGN_VERIFY``, to verify with. Default: a
    new :class:`PublisherKey` (retained when the stack is deleted, so versions signed before stay verifiable by
    another stack). This app cannot change an existing key's policy: who may sign is its owner's to hold. For only
    the named publishers to sign, that policy must deny ``kms:Sign`` to every other principal, as a new key's does
    (``{"Effect": "Deny", "Principal": {"AWS": "*"}, "Action": "kms:Sign", "Resource": "*", "Condition":
    {"ArnNotEquals": {"aws:PrincipalArn": [<the publishers>]}}}``): without it, any principal of the key's account
    whose IAM policy allows ``kms:Sign`` (AdministratorAccess, PowerUserAccess) signs too."""


@jsii.implements(cdk.IStableAnyProducer)
class _Produced:
    def __init__(self, produce: Callable[[], Any]) -> None:
        self._produce = produce

    def produce(self) -> Any:
        return self._produce()


class PublisherKey(kms.Key):
    """A new publisher key: ECC_NIST_P256 for SIGN_VERIFY (what the OpenSSF model-signing format and ``kms:Verify``
    with ``ECDSA_SHA_256`` take), whose policy denies ``kms:Sign`` to every principal but :attr:`signers`.

    CDK's key policy lets the account root use the key, which lets any IAM principal of the account whose own
    policy allows ``kms:Sign`` sign (AWS KMS developer guide, default key policy) - every administrator. The Deny
    (``ArnNotEquals`` on ``aws:PrincipalArn``, which for a role's session is the role's ARN) overrides that and any
    grant; :func:`grant_sign` adds each publisher to it, up to synth. With no publisher named the Deny has no
    exception (``Null``: every signed request carries ``aws:PrincipalArn``): nobody signs. Only ``kms:Sign`` is
    denied: the root statement still administers the key, so a key administrator (``kms:PutKeyPolicy``) can
    rewrite the policy (a change CloudTrail records).

    Sources: https://docs.aws.amazon.com/kms/latest/developerguide/key-policy-default.html (the root statement),
    https://docs.aws.amazon.com/kms/latest/developerguide/control-access.html (no permission that is ever denied),
    https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html#condition-keys-principalarn
    (a role's ARN, not its session's).
    """

    def __init__(self, scope: Construct, id: str) -> None:
        super().__init__(scope, id, key_spec=kms.KeySpec.ECC_NIST_P256, key_usage=kms.KeyUsage.SIGN_VERIFY,
                         description="hyperwarm: signs model versions; the cache refresh moves only what it signed",
                         removal_policy=cdk.RemovalPolicy.RETAIN)
        acknowledge(self, "an asymmetric signing key: KMS rotates symmetric keys only", "KMS5")
        self.signers: list[str] = []
        """The ARNs of the principals that may sign (the Deny's exceptions)."""
        self.add_to_resource_policy(iam.PolicyStatement(
            sid="SignOnlyNamedPublishers", effect=iam.Effect.DENY, principals=[iam.AnyPrincipal()],
            actions=["kms:Sign"], resources=["*"], conditions={
                "ArnNotEquals": cdk.Lazy.any(_Produced(
                    lambda: {"aws:PrincipalArn": list(self.signers)} if self.signers else None)),
                "Null": cdk.Lazy.any(_Produced(lambda: None if self.signers else {"aws:PrincipalArn": "false"}))}))


def publisher_key(scope: Construct, id: str) -> PublisherKey:
    """A new publisher key (:class:`PublisherKey`)."""
    return PublisherKey(scope, id)


def _signer_arn(grantee: iam.IGrantable) -> str:
    """The ``aws:PrincipalArn`` a publisher signs as: a role's or user's ARN (a token for one of this app)."""
    principal = grantee.grant_principal
    arns = principal.policy_fragment.principal_json.get("AWS", [])
    if is_a(principal, iam.AccountPrincipal) or is_a(principal, iam.AnyPrincipal) or len(arns) != 1 or (
            not unresolved(arns[0]) and not _ROLE_OR_USER.match(arns[0])):
        raise ValueError(f"grant_publish: {principal} is not one IAM role or user: a publisher is named by its ARN, "
                         "and the publisher key denies kms:Sign to every other principal")
    return str(arns[0])


def grant_sign(key: kms.IKey, grantee: iam.IGrantable) -> iam.Grant:
    """What a publisher needs of the key; on a :class:`PublisherKey`, also an exception to its Deny."""
    if isinstance(key, PublisherKey):
        arn = _signer_arn(grantee)
        if arn not in key.signers:
            key.signers.append(arn)
    return key.grant(grantee, *SIGN_ACTIONS)


def grant_verify(key: kms.IKey, grantee: iam.IGrantable) -> iam.Grant:
    """What the refresh functions need of the key."""
    return key.grant(grantee, *VERIFY_ACTIONS)
