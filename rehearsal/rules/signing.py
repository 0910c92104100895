"""Who may sign with a signing key: the named publishers alone, never whoever the account's IAM policies allow."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from rehearsal.core import Assembly, Finding, rule, text_of
from rehearsal.rules.iam_conditions import aws_principals, is_account_root, key_policy_statements

_EXCEPTIONS = ("arnnotequals", "arnnotlike", "stringnotequals", "stringnotlike")
"""Operators that exempt principals from a Deny by ``aws:PrincipalArn`` (negated: the Deny applies to the rest)."""


def _covers(statement: dict[str, Any], action: str, effect: str) -> bool:
    """The statement has ``effect`` for ``action``: named, by a wildcard, or left out of a NotAction."""
    if statement.get("Effect") != effect:
        return False
    listed = statement.get("NotAction", statement.get("Action", []))
    named = any(isinstance(p, str) and re.fullmatch(re.escape(p).replace(r"\*", ".*").replace(r"\?", "."),
                                                    action, re.IGNORECASE)
                for p in (listed if isinstance(listed, list) else [listed]))
    return not named if "NotAction" in statement else named


def _reaches_any_principal(statement: dict[str, Any]) -> bool:
    """An Allow whose principal is ``*`` or an account (its root: any principal that account's IAM policies let)."""
    if "NotPrincipal" in statement:
        return True
    return any(p == "*" or is_account_root(p, own=False) for p in aws_principals(statement))


def _denies_all_but_named(statement: dict[str, Any]) -> bool:
    """A Deny of ``kms:Sign`` to every principal (``*``) but those its condition names by ``aws:PrincipalArn``,
    exactly (no wildcard); with no condition, or ``Null: false`` on that key, it spares nobody."""
    if not _covers(statement, "kms:Sign", "Deny") or aws_principals(statement) != ["*"]:
        return False
    condition = statement.get("Condition") or {}
    if not isinstance(condition, dict):
        return False
    for operator, keys in condition.items():
        if not isinstance(keys, dict) or {k.lower() for k in keys} != {"aws:principalarn"}:
            return False
        (values,) = keys.values()
        values = values if isinstance(values, list) else [values]
        if operator.lower() == "null":
            if [str(v).lower() for v in values] != ["false"]:
                return False
        elif operator.lower() not in _EXCEPTIONS or not values or any(
                re.search(r"[*?]", text_of(v)) for v in values):
            return False
    return True


@rule("kms.sign-named-only",
      source="https://docs.aws.amazon.com/kms/latest/developerguide/key-policy-default.html#key-policy-default-allow-root-enable-iam")
def sign_named_only(assembly: Assembly) -> Iterator[Finding]:
    """A ``SIGN_VERIFY`` key's policy that lets an account (its root, as CDK's and KMS's default policies do) or
    ``*`` use ``kms:Sign`` also denies ``kms:Sign`` to every principal but the named signers (``Deny``,
    ``Principal: *``, ``ArnNotEquals`` on ``aws:PrincipalArn``).

    The root statement makes the key's use an IAM decision (the KMS developer guide, default key policy): any
    principal of the account whose identity policy allows ``kms:Sign`` (AdministratorAccess, PowerUserAccess, a
    broad CI role) signs with it, so a signature would prove only that someone in the account made it. An
    explicit Deny overrides every Allow, grants included; the root statement keeps the key administrable.
    A key without a ``KeyPolicy`` gets KMS's default, the root statement alone.
    """
    keys: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for stack, logical_id, resource in assembly.resources("AWS::KMS::Key"):
        if resource.get("Properties", {}).get("KeyUsage") == "SIGN_VERIFY":
            keys[(stack, logical_id)] = []
    for stack, logical_id, _, statement in key_policy_statements(assembly):
        if (stack, logical_id) in keys:
            keys[(stack, logical_id)].append(statement)
    for (stack, logical_id), statements in keys.items():
        broad = [s for s in statements if _covers(s, "kms:Sign", "Allow") and _reaches_any_principal(s)] \
            if statements else [{"Principal": {"AWS": "<the account, KMS's default policy>"}}]
        if broad and not any(_denies_all_but_named(s) for s in statements):
            who = ", ".join(text_of(p) for s in broad for p in (aws_principals(s) or ["NotPrincipal"]))
            yield Finding("kms.sign-named-only", stack, logical_id,
                          f"a signing key whose policy lets {who} sign (any principal its IAM policies allow, "
                          "administrators included) without a Deny of kms:Sign to every principal but the named "
                          "signers (ArnNotEquals on aws:PrincipalArn): add it (hyperwarm.refresh.publishing."
                          "PublisherKey)")
