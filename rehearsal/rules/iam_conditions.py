"""Permissions that are only safe with their condition: KMS grants and service-principal trusts.

Both are accepted by IAM and CloudFormation without the condition, and both then reach further than the job
needs: a role that may create any KMS grant may hand its key to any principal, and a role any service
resource may assume is a confused deputy's reach. These rules read every identity policy, every key policy and
every trust in the templates.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator
from typing import Any

from rehearsal.core import Assembly, Finding, ref_target, rule, text_of

_POLICY_TYPES = ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")
_ROLE = "AWS::IAM::Role"


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _matches(action: str, patterns: Any) -> bool:
    return any(isinstance(p, str) and fnmatch.fnmatchcase(action.lower(), p.lower()) for p in _listed(patterns))


def allows_action(statement: dict[str, Any], action: str) -> bool:
    """An Allow statement grants ``action``: named or covered by a wildcard, or not excluded by a NotAction."""
    if statement.get("Effect") != "Allow":
        return False
    if "NotAction" in statement:
        return not _matches(action, statement["NotAction"])
    return _matches(action, statement.get("Action", []))


def identity_statements(assembly: Assembly) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(stack, logical id, statement) of every identity policy: policies, managed policies and roles' inline ones."""
    for kind in (*_POLICY_TYPES, _ROLE, "AWS::IAM::User", "AWS::IAM::Group"):
        for stack, logical_id, resource in assembly.resources(kind):
            props = resource.get("Properties", {})
            documents = [props.get("PolicyDocument", {})] if kind in _POLICY_TYPES else \
                [p.get("PolicyDocument", {}) for p in props.get("Policies", [])]
            for document in documents:
                for statement in _listed(document.get("Statement", [])):
                    if isinstance(statement, dict):
                        yield stack, logical_id, statement


def role_statements(assembly: Assembly) -> Iterator[tuple[str, str, set[str], dict[str, Any]]]:
    """(stack, logical id, roles it applies to, statement) of every policy a role of the template holds: policies and
    managed policies attached by their ``Roles`` or the role's ``ManagedPolicyArns``, and roles' inline ones."""
    managed_by: dict[tuple[str, str], set[str]] = {}
    for stack, role, resource in assembly.resources(_ROLE):
        for arn in _listed(resource.get("Properties", {}).get("ManagedPolicyArns", [])):
            if ref_target(arn):
                managed_by.setdefault((stack, str(ref_target(arn))), set()).add(role)
    for stack, logical_id, statement in identity_statements(assembly):
        resource = assembly.templates[stack]["Resources"][logical_id]
        kind, props = resource.get("Type"), resource.get("Properties", {})
        attached = {logical_id} if kind == _ROLE else {
            str(ref_target(r)) for r in _listed(props.get("Roles", [])) if ref_target(r)}
        if kind == "AWS::IAM::ManagedPolicy":
            attached |= managed_by.get((stack, logical_id), set())
        yield stack, logical_id, attached, statement


def _condition_value(condition: Any, operator: str, key: str) -> list[Any]:
    """The values a condition block tests ``key`` against with ``operator`` (names compared case-insensitively)."""
    if not isinstance(condition, dict):
        return []
    for op, keys in condition.items():
        if op.lower() == operator.lower() and isinstance(keys, dict):
            for name, values in keys.items():
                if name.lower() == key.lower():
                    return _listed(values)
    return []


OWN_ACCOUNT = "<account>"


def account_text(value: Any, account: str | None = None) -> str:
    """A template value as one string (:func:`text_of`), the stack's own account (``{"Ref": "AWS::AccountId"}``,
    ``${AWS::AccountId}`` in an ``Fn::Sub``, or ``account``, the literal one of its environment) read as
    :data:`OWN_ACCOUNT`."""
    def mark(v: Any) -> Any:
        if v == {"Ref": "AWS::AccountId"}:
            return OWN_ACCOUNT
        if isinstance(v, dict) and isinstance(v.get("Fn::Sub"), str):
            return {"Fn::Sub": v["Fn::Sub"].replace("${AWS::AccountId}", OWN_ACCOUNT)}
        join = v.get("Fn::Join") if isinstance(v, dict) else None
        if isinstance(join, list) and len(join) == 2 and isinstance(join[1], list):
            return {"Fn::Join": [join[0], [mark(part) for part in join[1]]]}
        return v

    text = text_of(mark(value))
    return text.replace(account, OWN_ACCOUNT) if account else text


def aws_principals(statement: dict[str, Any]) -> list[Any]:
    """The ``AWS`` principals a resource-policy statement names (``"*"`` for ``"Principal": "*"``)."""
    principal = statement.get("Principal")
    if principal == "*":
        return ["*"]
    return _listed(principal.get("AWS", [])) if isinstance(principal, dict) else []


def is_account_root(value: Any, account: str | None = None, own: bool = True) -> bool:
    """The principal is an account (``arn:...:root`` or a bare account id): whoever that account's IAM policies
    allow. ``own``: only this stack's account counts."""
    text = account_text(value, account)
    own_id = re.escape(OWN_ACCOUNT)
    number, in_arn = (own_id, own_id) if own else (rf"(\d{{12}}|{own_id})", rf"(\d{{12}}|{own_id}|\$\{{TOKEN\}})")
    return re.fullmatch(rf"(arn:[^:]+:iam::{in_arn}:root|{number})", text) is not None


def key_policy_statements(assembly: Assembly) -> Iterator[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    """(stack, logical id, key properties, statement) of every ``AWS::KMS::Key``'s policy."""
    for stack, logical_id, key in assembly.resources("AWS::KMS::Key"):
        props = key.get("Properties", {})
        policy = props.get("KeyPolicy", {})
        for statement in _listed(policy.get("Statement", []) if isinstance(policy, dict) else []):
            if isinstance(statement, dict):
                yield stack, logical_id, props, statement


def _only_own_account(statement: dict[str, Any], account: str | None) -> bool:
    """A key policy statement whose only principal is the stack's own account: it lets that account's identity
    policies decide, and :func:`identity_statements` reads those."""
    principal, named = statement.get("Principal"), aws_principals(statement)
    return isinstance(principal, dict) and set(principal) == {"AWS"} and bool(named) and all(
        is_account_root(p, account) for p in named)


@rule("iam.kms-create-grant",
      source="https://docs.aws.amazon.com/kms/latest/developerguide/conditions-kms.html#conditions-kms-grant-is-for-aws-resource")
def kms_create_grant(assembly: Assembly) -> Iterator[Finding]:
    """No identity policy, and no key policy statement naming a principal other than the stack's own account (which
    hands the decision to those identity policies), allows ``kms:CreateGrant`` (by name, ``kms:*``, ``*`` or a
    NotAction that leaves it) without ``"Bool": {"kms:GrantIsForAWSResource": "true"}``.

    A grant is a delegation: whoever may create grants on a key may let any principal use it, with no key policy
    change. Services that encrypt on a caller's behalf (SageMaker's endpoint volumes, EBS, RDS ...) create the
    grant themselves through the caller's permission, and ``kms:GrantIsForAWSResource`` is true exactly then (AWS
    KMS developer guide, condition keys); a caller with the condition can only let an AWS service use the key for
    the caller's own resource.
    """
    key_statements = ((stack, logical_id, statement) for stack, logical_id, _, statement
                      in key_policy_statements(assembly)
                      if not _only_own_account(statement, assembly.accounts.get(stack)))
    for stack, logical_id, statement in (*identity_statements(assembly), *key_statements):
        if not allows_action(statement, "kms:CreateGrant"):
            continue
        values = _condition_value(statement.get("Condition"), "Bool", "kms:GrantIsForAWSResource")
        if values and all(str(v).lower() == "true" for v in values):
            continue
        where = f" (statement {statement['Sid']})" if statement.get("Sid") else ""
        yield Finding("iam.kms-create-grant", stack, logical_id,
                      f"allows kms:CreateGrant{where} without \"Bool\": {{\"kms:GrantIsForAWSResource\": \"true\"}}: "
                      "it may grant the key to any principal; add the condition (refresh.access.grant_volume_key)")


SOURCE_CONDITION_PRINCIPALS = {
    "pods.eks.amazonaws.com": "https://docs.aws.amazon.com/eks/latest/userguide/cross-service-confused-deputy-prevention.html",
    "sagemaker.amazonaws.com": "https://docs.aws.amazon.com/sagemaker/latest/dg/security-confused-deputy-prevention.html",
}
"""Service principals whose documentation gives ``aws:SourceAccount``/``aws:SourceArn`` in a role's trust: EKS (its
confused-deputy page; for Pod Identity hyperwarm names the cluster's ARN, the EKS page's example is the cluster role)
and SageMaker inference (``arn:<partition>:sagemaker:<region>:<account>:*``, never one model or endpoint: SageMaker's
page says the ARN must keep that form)."""


def _service_principals(statement: dict[str, Any]) -> set[str]:
    principal = statement.get("Principal")
    services = principal.get("Service", []) if isinstance(principal, dict) else []
    return {s for s in _listed(services) if isinstance(s, str)}


def _positive_values(condition: Any, key: str) -> list[Any]:
    """The values the condition tests ``key`` against with a positive operator (Equals or Like; not a negated or
    IfExists one)."""
    found: list[Any] = []
    if isinstance(condition, dict):
        for op, keys in condition.items():
            if op.endswith("IfExists") or "Not" in op or not isinstance(keys, dict):
                continue
            found += [v for name, values in keys.items() if name.lower() == key.lower() for v in _listed(values)]
    return found


def _has_key(condition: Any, key: str) -> bool:
    """The condition tests ``key`` with a positive operator, against something narrower than ``*``."""
    values = _positive_values(condition, key)
    return bool(values) and "*" not in values


def _hyperpod_node_roles(assembly: Assembly) -> set[tuple[str, str]]:
    """(stack, role) of every HyperPod instance group's execution role: SageMaker HyperPod assumes them for the
    nodes and its IAM prerequisites give their trust no source condition, so they are not judged here."""
    return {(stack, str(ref_target(g.get("ExecutionRole"))))
            for stack, _, cluster in assembly.resources("AWS::SageMaker::Cluster")
            for g in cluster.get("Properties", {}).get("InstanceGroups", [])}


@rule("iam.service-trust-source", source="https://docs.aws.amazon.com/IAM/latest/UserGuide/confused-deputy.html")
def service_trust_source(assembly: Assembly) -> Iterator[Finding]:
    """Every role trust of a service principal that documents ``aws:SourceAccount`` and ``aws:SourceArn``
    (:data:`SOURCE_CONDITION_PRINCIPALS`: EKS Pod Identity, SageMaker) tests both, ``aws:SourceAccount`` against the
    stack's own account alone (``{"Ref": "AWS::AccountId"}`` or its environment's literal account), so the service
    assumes the role only for this account's resource, never for another customer's request (the IAM guide's
    cross-service confused deputy prevention). HyperPod instance groups' execution roles are left out (see
    :func:`_hyperpod_node_roles`); web-identity (IRSA) trusts are held to their ``:sub`` and ``:aud`` by
    ``roles.*`` tests, not here.
    """
    exempt = _hyperpod_node_roles(assembly)
    for stack, logical_id, role in assembly.resources(_ROLE):
        if (stack, logical_id) in exempt:
            continue
        trust = role.get("Properties", {}).get("AssumeRolePolicyDocument", {})
        for statement in _listed(trust.get("Statement", []) if isinstance(trust, dict) else []):
            if not isinstance(statement, dict) or statement.get("Effect") != "Allow":
                continue
            for service in sorted(_service_principals(statement) & set(SOURCE_CONDITION_PRINCIPALS)):
                missing = [k for k in ("aws:SourceAccount", "aws:SourceArn")
                           if not _has_key(statement.get("Condition"), k)]
                if missing:
                    yield Finding("iam.service-trust-source", stack, logical_id,
                                  f"trusts {service} without {' and '.join(missing)}: any resource of the service, "
                                  f"in any account, may have it assume the role ({SOURCE_CONDITION_PRINCIPALS[service]})")
                    continue
                foreign = [account_text(v, assembly.accounts.get(stack))
                           for v in _positive_values(statement.get("Condition"), "aws:SourceAccount")
                           if account_text(v, assembly.accounts.get(stack)) != OWN_ACCOUNT]
                if foreign:
                    yield Finding("iam.service-trust-source", stack, logical_id,
                                  f"trusts {service} for aws:SourceAccount {', '.join(foreign)}, not the stack's own "
                                  "account: that account's resources may have it assume the role; test "
                                  "{\"Ref\": \"AWS::AccountId\"}")


_REFRESH_HANDLERS = "hyperwarm.functions.cache_refresh."
_SAGEMAKER_VERBS = ("sagemaker:Describe", "sagemaker:Create", "sagemaker:Update", "sagemaker:Delete",
                    "sagemaker:AddTags")
_WHOLE_KIND = re.compile(r":sagemaker:[^:]*:[^:]*:(\*|[a-z-]+/\*|[a-z-]+/\$\{TOKEN\}\*?)$")
"""A SageMaker ARN naming every resource, or every resource of a kind (``model/*``), or one whose name is unknown."""


def _refresh_roles(assembly: Assembly) -> set[tuple[str, str]]:
    """(stack, role) of every function running the cache refresh's code."""
    return {(stack, str(ref_target(f.get("Properties", {}).get("Role"))))
            for stack, _, f in assembly.resources("AWS::Lambda::Function")
            if str(f.get("Properties", {}).get("Handler", "")).startswith(_REFRESH_HANDLERS)}


@rule("iam.refresh-sagemaker-scoped",
      source="https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonsagemakerai.html#amazonsagemakerai-resources-for-iam-policies")
def refresh_sagemaker_scoped(assembly: Assembly) -> Iterator[Finding]:
    """The refresh functions' roles describe, create, update, delete and tag SageMaker resources only by name: the
    endpoints they refresh, the models and configs under each endpoint's stem (what ``naming`` generates) and the
    ones the endpoint was deployed with (by ARN); never ``*``, every resource of a kind (``model/*``), or a name
    the template cannot show.

    SageMaker's models and endpoint configs are resources of their own (the service authorization reference's
    ``model`` and ``endpoint-config`` types): a Describe on ``model/*`` reads every model of the account, its
    container environment and data location included, and a Create or Delete there reaches other teams'. Every
    policy a refresh role holds is read: policies, managed policies and its inline ones.
    """
    roles = _refresh_roles(assembly)
    for stack, logical_id, attached, statement in role_statements(assembly):
        if any((stack, role) in roles for role in attached):
            actions = [a for a in _listed(statement.get("Action", [])) if isinstance(a, str)]
            scoped = [a for a in actions if a == "*" or (a.lower().startswith("sagemaker:") and (
                "*" in a or a.startswith(_SAGEMAKER_VERBS)))]
            wide = [text for text in map(text_of, _listed(statement.get("Resource", [])))
                    if text == "*" or _WHOLE_KIND.search(text)]
            if statement.get("Effect") == "Allow" and scoped and wide:
                yield Finding("iam.refresh-sagemaker-scoped", stack, logical_id,
                              f"lets a refresh role {', '.join(sorted(scoped))} on {', '.join(wide)}: name the "
                              "endpoints, the stems the refresh creates under and the deployed resources "
                              "(refresh.access._grant_endpoints)")
