"""Who may publish a model version the refresh moves targets to: the publisher key (an asymmetric KMS key) and the
principals that may sign with it (``hyperwarm publish``).

A refreshed prefix with a publisher key admits only versions whose ``model.sig`` that key signed
(:mod:`hyperwarm.functions.cache_refresh.signature`); the refresh functions may only verify with it. So writing the
model bucket is no longer enough to move production: signing needs ``kms:Sign`` on the key, which only the named
publishers hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_iam as iam, aws_kms as kms
from constructs import Construct

from hyperwarm._internal.nag import acknowledge

SIGN_ACTIONS = ("kms:Sign", "kms:GetPublicKey", "kms:DescribeKey")
"""What ``hyperwarm publish`` calls on the publisher key."""
VERIFY_ACTIONS = ("kms:Verify",)
"""What the refresh functions call on it: verifying, never signing."""


@dataclass(frozen=True)
class PublisherSigning:
    """Only versions signed by a named publisher move the hook's targets."""

    publishers: Sequence[iam.IGrantable] = ()
    """The principals that publish versions (``kms:Sign`` on the key, and writing the refreshed prefixes). Default:
    none; grant them later with :meth:`~hyperwarm.refresh.hook.CacheRefreshHook.grant_publish`."""
    key: kms.IKey | None = None
    """An existing asymmetric KMS key, key spec ``ECC_NIST_P256``, usage ``SIGN_VERIFY``, to verify with. Default: a
    new one (retained when the stack is deleted, so versions signed before stay verifiable by another stack)."""


def publisher_key(scope: Construct, id: str) -> kms.Key:
    """A new publisher key: ECC_NIST_P256 for SIGN_VERIFY (what the OpenSSF model-signing format and ``kms:Verify``
    with ``ECDSA_SHA_256`` take)."""
    key = kms.Key(scope, id, key_spec=kms.KeySpec.ECC_NIST_P256, key_usage=kms.KeyUsage.SIGN_VERIFY,
                  description="hyperwarm: signs model versions; the cache refresh moves only what it signed",
                  removal_policy=cdk.RemovalPolicy.RETAIN)
    acknowledge(key, "an asymmetric signing key: KMS rotates symmetric keys only", "KMS5")
    return key


def grant_sign(key: kms.IKey, grantee: iam.IGrantable) -> iam.Grant:
    """What a publisher needs of the key."""
    return key.grant(grantee, *SIGN_ACTIONS)


def grant_verify(key: kms.IKey, grantee: iam.IGrantable) -> iam.Grant:
    """What the refresh functions need of the key."""
    return key.grant(grantee, *VERIFY_ACTIONS)
