"""Publisher signing as it deploys: the key, who may sign, what every refresh function is told, and the config
that states per environment whether only signed versions move anything. (What the function does with a signature:
tests/refresh/test_gate.py.)"""

from __future__ import annotations

import fnmatch
import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam, aws_s3 as s3
from stand_ins import cached_model, imported_cluster

from hyperwarm import CacheRefreshHook, CacheRefreshHookProps, InstanceGroupSpec, RefreshedPrefix
from hyperwarm.functions.cache_refresh import contract
from hyperwarm.refresh.hook import HyperPodRefreshTarget
from hyperwarm.refresh.publishing import PublisherSigning
from stacks.config import ConfigError, parse_environment
from stacks.config.refresh import signing_required

PROD = "hyperwarm-prod-refresh"
PUBLISHER = "arn:aws:iam::111122223333:role/hyperwarm-model-publishers"


def _resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == kind}


def _statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for p in _resources(template, "AWS::IAM::Policy").values()
            for s in p["Properties"]["PolicyDocument"]["Statement"]]


def _actions(statement: dict[str, Any]) -> set[str]:
    action = statement["Action"]
    return {action} if isinstance(action, str) else set(action)


ACCOUNT = "111122223333"
ROOT = {"Fn::Join": ["", ["arn:aws:iam::", {"Ref": "AWS::AccountId"}, ":root"]]}


def _key_policy(template: dict[str, Any]) -> list[dict[str, Any]]:
    ((_, key),) = _resources(template, "AWS::KMS::Key").items()
    return list(key["Properties"]["KeyPolicy"]["Statement"])


def _deny(template: dict[str, Any]) -> dict[str, Any]:
    (deny,) = [s for s in _key_policy(template) if s["Effect"] == "Deny"]
    return deny


def _value(value: Any) -> Any:
    """A policy value with the account pseudo parameter resolved (the stack deploys to ACCOUNT)."""
    if value == {"Ref": "AWS::AccountId"}:
        return ACCOUNT
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(_value(p) for p in parts)
    return value


def may_sign(key_policy: list[dict[str, Any]], principal_arn: str, iam_allows_sign: bool) -> bool:
    """KMS's decision on ``kms:Sign`` by a principal whose ``aws:PrincipalArn`` is ``principal_arn`` (a role's ARN
    for all its sessions): any matching Deny refuses; else an Allow naming the principal, or naming its account's
    root while the principal's own IAM policy allows kms:Sign, admits. Only the operators the key uses are known:
    any other fails the test rather than guessing."""
    def matches(statement: dict[str, Any]) -> bool:
        if not any(fnmatch.fnmatchcase("kms:Sign", a) for a in _actions(statement)):
            return False
        principals = [_value(p) for p in ([statement["Principal"]] if statement["Principal"] == "*" else
                                          _listed(statement["Principal"]["AWS"]))]
        if not ("*" in principals or principal_arn in principals
                or (f"arn:aws:iam::{ACCOUNT}:root" in principals and iam_allows_sign)):
            return False
        for operator, keys in statement.get("Condition", {}).items():
            assert set(keys) == {"aws:PrincipalArn"}, keys
            values = [_value(v) for v in _listed(keys["aws:PrincipalArn"])]
            if operator == "ArnNotEquals":
                if principal_arn in values:
                    return False
            elif operator == "Null":
                assert values == ["false"]  # aws:PrincipalArn is in every signed request
            else:
                raise AssertionError(f"the evaluator does not know {operator}")
        return True

    if any(matches(s) for s in key_policy if s["Effect"] == "Deny"):
        return False
    return any(matches(s) for s in key_policy if s["Effect"] == "Allow")


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_production_verifies_with_a_retained_p256_key_only_the_named_publisher_may_sign_with(synthesized) -> None:
    template = synthesized.template(PROD)
    ((key_id, key),) = _resources(template, "AWS::KMS::Key").items()
    assert (key["Properties"]["KeySpec"], key["Properties"]["KeyUsage"]) == ("ECC_NIST_P256", "SIGN_VERIFY")
    assert key["DeletionPolicy"] == "RetainExceptOnCreate", "kept when the stack goes: signed versions stay checkable"
    signers = [s["Principal"]["AWS"] for s in _key_policy(template)
               if s["Effect"] == "Allow" and "kms:Sign" in _actions(s)]
    assert signers == [PUBLISHER]
    assert _deny(template) == {
        "Sid": "SignOnlyNamedPublishers", "Effect": "Deny", "Principal": {"AWS": "*"}, "Action": "kms:Sign",
        "Resource": "*", "Condition": {"ArnNotEquals": {"aws:PrincipalArn": [PUBLISHER]}}}
    (root,) = [s for s in _key_policy(template) if s["Principal"] == {"AWS": ROOT}]
    assert root["Action"] == "kms:*", "the account still administers the key: only signing is denied"
    assert template["Outputs"]["PublisherKeyArn"]["Value"] == {"Fn::GetAtt": [key_id, "Arn"]}
    on_key = [s for s in _statements(template) if s.get("Resource") == {"Fn::GetAtt": [key_id, "Arn"]}]
    assert on_key and all(_actions(s) <= {"kms:Verify", "kms:DescribeKey", "kms:GetPublicKey"} for s in on_key), \
        "the refresh roles verify; none of them may sign"


def test_every_refresh_function_is_told_the_publisher_key_and_the_version_rules_of_every_prefix(synthesized) -> None:
    template = synthesized.template(PROD)
    (key_id,) = _resources(template, "AWS::KMS::Key")
    functions = [f["Properties"]["Environment"]["Variables"] for f in _resources(template, "AWS::Lambda::Function")
                 .values() if contract.REFRESH_TARGETS in f["Properties"].get("Environment", {}).get("Variables", {})]
    assert len(functions) >= 3
    for variables in functions:
        parts = variables[contract.ADMISSION]["Fn::Join"][1]
        text = "".join(p if isinstance(p, str) else "KEY" for p in parts)
        assert all(p == {"Fn::GetAtt": [key_id, "Arn"]} for p in parts if not isinstance(p, str))
        assert contract.parse_admissions(text.replace("KEY", "arn:aws:kms:us-east-1:111122223333:key/k")) == {
            "llama-3.1-70b-instruct": contract.Admission("arn:aws:kms:us-east-1:111122223333:key/k", r"v\d{1,4}"),
            "llama-3.1-8b-instruct": contract.Admission("arn:aws:kms:us-east-1:111122223333:key/k")}


def _refresh(project_context: Any, env: str, **fields: Any) -> dict[str, Any]:
    config = dict(project_context["environments"][env])
    config["refresh"] = {**project_context["environments"]["prod"]["refresh"], **fields}
    return config


def test_production_without_a_named_publisher_fails_synth_naming_the_field(project_context) -> None:
    with pytest.raises(ConfigError, match=r"environments\.prod\.refresh\.signing\.publishers: \[\] -- a production "
                                          r"environment moves only versions a named publisher signed"):
        parse_environment("prod", _refresh(project_context, "prod", signing={}))


def test_signing_is_stated_per_environment(project_context) -> None:
    off = parse_environment("prod", _refresh(project_context, "prod", signing={"required": False}))
    assert not signing_required(off.production, off.refresh)
    on = parse_environment("prod", project_context["environments"]["prod"])
    assert signing_required(on.production, on.refresh)
    with pytest.raises(ConfigError, match=r"signing\.required moves only versions a named publisher signed"):
        parse_environment("staging", {**project_context["environments"]["staging"], "refresh": {
            **project_context["environments"]["staging"]["refresh"], "signing": {"required": True}}})


@pytest.mark.parametrize("field, value, shown", [
    ("versions", "v(", r"versions"),
    ("max_step", 0, r"max_step"),
])
def test_a_bad_version_rule_fails_synth_naming_the_field(project_context, field: str, value: Any, shown: str) -> None:
    refresh = project_context["environments"]["prod"]["refresh"]
    models = [{**refresh["models"][0], field: value}, *refresh["models"][1:]]
    with pytest.raises(ConfigError, match=shown):
        parse_environment("prod", _refresh(project_context, "prod", models=models))


def _library_hook(bucket: str | None, publisher: iam.IGrantable | None = None, named: bool = True
                  ) -> CacheRefreshHook:
    app = cdk.App()
    stack = cdk.Stack(app, "T", env=cdk.Environment(account="111122223333", region="us-west-2"))
    cluster = imported_cluster(stack, [InstanceGroupSpec(name="gpu", instance_type="ml.g5.xlarge", holds_caches=True)])
    role = publisher or iam.Role(stack, "Publisher", assumed_by=iam.AccountRootPrincipal())
    return CacheRefreshHook(stack, "Hook", CacheRefreshHookProps(
        models=[RefreshedPrefix(prefix="m", hyperpod=[HyperPodRefreshTarget(cached_model(cluster, "m", "ns"))])],
        bucket=s3.Bucket.from_bucket_name(stack, "Models", bucket) if bucket else None,
        signing=PublisherSigning(publishers=[role] if named else [])))


def _template(hook: CacheRefreshHook) -> dict[str, Any]:
    return cdk.assertions.Template.from_stack(cdk.Stack.of(hook)).to_json()


ADMIN = f"arn:aws:iam::{ACCOUNT}:role/Admin"


@pytest.mark.parametrize("principal, iam_allows_sign, signs", [
    (ADMIN, True, False),  # AdministratorAccess: kms:* on * in its IAM policy
    (f"arn:aws:iam::{ACCOUNT}:role/ci-deploy", True, False),
    (f"arn:aws:iam::{ACCOUNT}:root", True, False),
    (PUBLISHER, True, True),  # every session of the publishers' role: aws:PrincipalArn is the role's ARN
    (PUBLISHER, False, True),  # named in the key policy itself
])
def test_in_production_only_the_named_publisher_signs_whatever_the_account_s_iam_policies_allow(
        synthesized, principal: str, iam_allows_sign: bool, signs: bool) -> None:
    assert may_sign(_key_policy(synthesized.template(PROD)), principal, iam_allows_sign) is signs


def test_publishers_of_the_app_and_those_granted_later_alone_escape_the_deny() -> None:
    hook = _library_hook(None)
    stack = cdk.Stack.of(hook)
    hook.grant_publish(iam.Role(stack, "Later", assumed_by=iam.AccountRootPrincipal()))
    template = _template(hook)
    first, later = (next(k for k in _resources(template, "AWS::IAM::Role") if k.startswith(name))
                    for name in ("Publisher", "Later"))
    assert _deny(template)["Condition"] == {"ArnNotEquals": {"aws:PrincipalArn": [
        {"Fn::GetAtt": [first, "Arn"]}, {"Fn::GetAtt": [later, "Arn"]}]}}
    assert not may_sign(_key_policy(template), ADMIN, iam_allows_sign=True)


def test_with_no_publisher_named_nobody_may_sign() -> None:
    template = _template(_library_hook(None, named=False))
    assert _deny(template)["Condition"] == {"Null": {"aws:PrincipalArn": "false"}}
    assert not may_sign(_key_policy(template), ADMIN, iam_allows_sign=True)
    assert not may_sign(_key_policy(template), PUBLISHER, iam_allows_sign=True)


@pytest.mark.parametrize("publisher", [
    iam.ServicePrincipal("lambda.amazonaws.com"), iam.AccountRootPrincipal(), iam.AnyPrincipal(),
    iam.ArnPrincipal("arn:aws:iam::111122223333:role/*"),
], ids=["service", "account", "anyone", "wildcard"])
def test_a_publisher_that_is_not_one_role_or_user_is_refused_naming_it(publisher: iam.IPrincipal) -> None:
    with pytest.raises(ValueError, match=r"grant_publish: .* is not one IAM role or user"):
        _library_hook(None, publisher)


def test_a_publisher_of_the_app_may_sign_and_write_the_refreshed_prefix_alone() -> None:
    hook = _library_hook(None)
    template = cdk.assertions.Template.from_stack(cdk.Stack.of(hook)).to_json()
    role_policies = [s for p in _resources(template, "AWS::IAM::Policy").values()
                     if p["Properties"]["Roles"] == [{"Ref": next(k for k in template["Resources"]
                                                                  if k.startswith("Publisher"))}]
                     for s in p["Properties"]["PolicyDocument"]["Statement"]]
    writes = [s for s in role_policies if "s3:PutObject" in _actions(s)]
    assert writes and all(json.dumps(s["Resource"]).endswith('"/m/*"]]}') for s in writes), writes
    signs = [s for s in role_policies if "kms:Sign" in _actions(s)]
    assert signs and all(s["Resource"] == {"Fn::GetAtt": [next(iter(_resources(template, "AWS::KMS::Key"))), "Arn"]}
                         for s in signs)


def test_a_publisher_outside_the_app_writing_an_imported_bucket_is_told_what_it_must_hold_itself() -> None:
    hook = _library_hook("existing-models", iam.ArnPrincipal(PUBLISHER))
    infos = [m.entry.data for m in cdk.assertions.Annotations.from_stack(cdk.Stack.of(hook)).find_info(
        "*", cdk.assertions.Match.any_value())]
    assert any(f"{PUBLISHER} needs s3:PutObject on m/*" in str(info) for info in infos), infos
