"""Updates the deployed stacks must survive: synth against the deployed templates, production protection,
no exports that pin the endpoints, and a refresh stack that can be created again."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import boto3
import pytest
from aws_cdk import cx_api
from moto import mock_aws

import stacks.endpoints_stack
from rehearsal import Assembly
from rehearsal.changes import compare, exports_in_use
from rehearsal.core import resource_schema
from stacks.app import build_app
from stacks.baseline import deployed_templates, synthesize
from stacks.config import ConfigError, parse_environment
from stacks.protect import POLICY_FILE, main as protect_main, protect
from stacks.refresh_guards import state_table_name

REPO = Path(__file__).resolve().parent.parent


def prod(project_context: dict[str, Any], *edits, **context: Any) -> dict[str, Any]:
    """The project's context for prod alone, after ``edits`` of prod's configuration (None: no edit)."""
    environments = copy.deepcopy(project_context["environments"])
    for edit in edits:
        if edit:
            edit(environments["prod"])
    return {**project_context, "environments": environments, "env": "prod", **context}


# Each rule compares one stack with its deployed template, so each test synthesizes only the part of prod its
# stacks need: a synth of the whole of prod costs two to three times as much, and these tests take several.
def without_cluster(config: dict[str, Any]) -> None:
    """prod's endpoints and what reads them (refresh, observability, alarms), without the HyperPod cluster."""
    for key in ("instance_groups", "caches", "vpc", "kubernetes_version", "addon_versions", "cluster_admins"):
        del config[key]
    config["refresh"]["models"] = [{key: value for key, value in model.items() if key != "caches"}
                                   for model in config["refresh"]["models"] if model.get("endpoints")]


def cluster_only(config: dict[str, Any]) -> None:
    """prod's HyperPod cluster alone."""
    for key in ("caches", "endpoints", "refresh", "observability"):
        del config[key]


def assembly(context: dict[str, Any], outdir: Path) -> Assembly:
    return Assembly.from_outdir(build_app(outdir=str(outdir), context=context, nag=False).synth().directory)


def _baseline(tmp_path_factory: pytest.TempPathFactory, name: str, part) -> Path:
    """The ``part`` of prod as cdk.json configures it, synthesized (nag off) into a folder of its own: a deployed
    baseline. Read it only; a test that synthesizes over it works on a copy (:func:`deployed_in`)."""
    outdir = tmp_path_factory.mktemp(name)
    context = json.loads((REPO / "cdk.json").read_text())["context"]
    build_app(outdir=str(outdir), context=prod(context, part), nag=False).synth()
    return outdir


@pytest.fixture(scope="module")
def prod_synth(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """prod's endpoints and their readers (:func:`without_cluster`): the baseline most tests start from."""
    return _baseline(tmp_path_factory, "prod-cdk.out", without_cluster)


@pytest.fixture(scope="module")
def cluster_synth(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """prod's cluster (:func:`cluster_only`): the baseline of the tests that change the cluster."""
    return _baseline(tmp_path_factory, "cluster-cdk.out", cluster_only)


def deployed_in(prod_synth: Path, outdir: Path) -> Path:
    """``outdir`` holding what a synth of prod leaves there: as if it had been synthesized in it."""
    shutil.copytree(prod_synth, outdir, dirs_exist_ok=True)
    return outdir


def variant(n: int, **changes: Any):
    def edit(config: dict[str, Any]) -> None:
        config["endpoints"][0]["variants"][n].update(changes)
        for key in [k for k, v in changes.items() if v is None]:
            del config["endpoints"][0]["variants"][n][key]
    return edit


# -- (a) an autoscaled variant's instance type ---------------------------------------------------------------

def test_an_autoscaled_variants_new_instance_type_fails_synth_until_autoscaling_goes_first(project_context,
                                                                                        tmp_path, prod_synth) -> None:
    def run(edit=None) -> None:
        synthesize(build_app(outdir=str(tmp_path), context=prod(project_context, without_cluster, edit),
                             nag=False))

    deployed_in(prod_synth, tmp_path)  # what is deployed
    bigger = variant(1, instance_type="ml.p5en.48xlarge")
    for _ in range(2):  # the previous templates are put back: the second try compares with them again
        with pytest.raises(ConfigError, match=re.escape(f"compared with {tmp_path}/ of the previous synth")) as error:
            run(bigger)
        assert "changes the instance type of variant 'random' of endpoint 'hyperwarm-prod-chat' from " \
               "ml.p5.48xlarge to ml.p5en.48xlarge while autoscaling scales it" in str(error.value)
        assert "deploy first with autoscaling removed from variant 'random'" in str(error.value)
    run(variant(1, autoscaling=None))  # step 1: CloudFormation deregisters the scalable target
    run(bigger)  # step 2: the new type, autoscaling back


# -- (b) no exports that pin the endpoints stack ---------------------------------------------------------------

def test_the_refresh_stack_imports_nothing_from_the_endpoints_stack(synthesized) -> None:
    for env in ("staging", "prod"):
        text = json.dumps(synthesized.template(f"hyperwarm-{env}-refresh"))
        assert f"hyperwarm-{env}-endpoints:" not in text  # no Fn::ImportValue of its exports
        assert f'"StackName": "hyperwarm-{env}-endpoints"' in text  # Fn::GetStackOutput: the role, key, alarms


@pytest.mark.parametrize("edit", [
    lambda config: config["endpoints"][0]["variants"].pop(1),  # remove 'random' (its alarm and scaling go)
    variant(1, name="uniform"),  # rename it
], ids=["remove", "rename"])
def test_removing_or_renaming_a_variant_removes_no_export_a_deployed_stack_imports(project_context, tmp_path,
                                                                                  edit, prod_synth) -> None:
    deployed = Assembly.from_outdir(str(prod_synth))
    changed = assembly(prod(project_context, without_cluster, edit), tmp_path / "changed")
    assert list(exports_in_use(deployed, changed)) == []


def _strong_references(patch: pytest.MonkeyPatch) -> None:
    """What the refresh stack did before: import each endpoint's role, key and 5XX alarms."""
    patch.setattr(stacks.endpoints_stack, "REFERENCE_STRENGTH", stacks.endpoints_stack.cdk.ReferenceStrength.STRONG)


@pytest.fixture(scope="module")
def deployed_with_exports(tmp_path_factory: pytest.TempPathFactory) -> Assembly:
    """prod as cdk.json configures it, synthesized once as the earlier release did (with imported exports)."""
    context = json.loads((REPO / "cdk.json").read_text())["context"]
    with pytest.MonkeyPatch.context() as patch:
        _strong_references(patch)
        return assembly(prod(context, without_cluster), tmp_path_factory.mktemp("prod-with-exports"))


def test_with_imported_exports_the_same_removal_fails(project_context, tmp_path, monkeypatch,
                                                      deployed_with_exports) -> None:
    _strong_references(monkeypatch)
    changed = assembly(prod(project_context, without_cluster, lambda c: c["endpoints"][0]["variants"].pop(1)),
                       tmp_path / "changed")
    findings = list(exports_in_use(deployed_with_exports, changed))
    # The variant's 5XX alarm, and what the refresh may describe (deployed_resource_arns): its model, and the
    # config that CloudFormation replaces.
    assert sorted(next(n for n in ("chatEndpointConfig", "chatrandom5xxAlarm", "chatrandomModel") if n in f.resource)
                  for f in findings) == ["chatEndpointConfig", "chatrandom5xxAlarm", "chatrandomModel"]
    assert all(f.stack == "hyperwarm-prod-endpoints" and "hyperwarm-prod-refresh import" in f.message
               for f in findings)


def test_stacks_deployed_with_imported_exports_take_this_version_in_one_deploy(deployed_with_exports,
                                                                             prod_synth) -> None:
    assert compare(deployed_with_exports, Assembly.from_outdir(str(prod_synth))) == []


# -- (c) production ----------------------------------------------------------------------------------------------

def test_production_stacks_have_termination_protection_and_the_others_do_not(synthesized) -> None:
    protected = {s.stack_name: s.termination_protection for s in synthesized.assembly.stacks}
    assert {n for n, on in protected.items() if on} == {n for n in protected if n.startswith("hyperwarm-prod-")}


def test_production_clusters_are_retained_except_when_their_first_create_rolls_back(synthesized) -> None:
    for env, policies in (("prod", ("RetainExceptOnCreate", "Retain")), ("staging", (None, None))):
        template = synthesized.template(f"hyperwarm-{env}-cluster")["Resources"]
        clusters = [r for r in template.values() if r["Type"] in ("AWS::EKS::Cluster", "AWS::SageMaker::Cluster")]
        assert len(clusters) == 2
        assert all((r.get("DeletionPolicy"), r.get("UpdateReplacePolicy")) == policies for r in clusters)


def test_production_is_off_unless_set() -> None:
    assert parse_environment("x", {}).production is False
    with pytest.raises(ConfigError, match=r"environments\.x\.production: 'yes'"):
        parse_environment("x", {"production": "yes"})


def stack_policy_effect(action: str, resource_type: str) -> str:
    """How CloudFormation judges an update action on a resource under stack_policy.json: an explicit
    Deny wins, then an Allow, else denied (protect-stack-resources.html)."""
    effects = set()
    for statement in json.loads(POLICY_FILE.read_text())["Statement"]:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        types = statement.get("Condition", {}).get("StringEquals", {}).get("ResourceType")
        if statement["Principal"] == "*" and statement["Resource"] == "*" and \
                any(a in (action, "Update:*") for a in actions) and (types is None or resource_type in types):
            effects.add(statement["Effect"])
    return "Deny" if "Deny" in effects or "Allow" not in effects else "Allow"


def test_the_stack_policy_denies_replacing_the_clusters_and_endpoints() -> None:
    assert {(a, t): stack_policy_effect(a, t) for a in ("Update:Modify", "Update:Replace", "Update:Delete")
            for t in ("AWS::SageMaker::Cluster", "AWS::EKS::Cluster", "AWS::SageMaker::Endpoint",
                      "AWS::SageMaker::EndpointConfig", "AWS::EC2::SecurityGroup")} == {
        **{(a, t): "Allow" for a in ("Update:Modify", "Update:Replace", "Update:Delete")
           for t in ("AWS::SageMaker::EndpointConfig", "AWS::EC2::SecurityGroup")},
        **{("Update:Modify", t): "Allow" for t in ("AWS::SageMaker::Cluster", "AWS::EKS::Cluster",
                                                   "AWS::SageMaker::Endpoint")},
        **{("Update:Replace", t): "Deny" for t in ("AWS::SageMaker::Cluster", "AWS::EKS::Cluster",
                                                   "AWS::SageMaker::Endpoint")},
        ("Update:Delete", "AWS::SageMaker::Cluster"): "Deny", ("Update:Delete", "AWS::EKS::Cluster"): "Deny",
        ("Update:Delete", "AWS::SageMaker::Endpoint"): "Allow",  # an endpoint removed from cdk.json goes
    }


_EMPTY = json.dumps({"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}})


@mock_aws
def test_protect_sets_the_stack_policy_on_the_deployed_cluster_and_endpoints_stacks(project_context) -> None:
    client = boto3.client("cloudformation", region_name="us-east-1")
    client.create_stack(StackName="hyperwarm-prod-cluster", TemplateBody=_EMPTY, EnableTerminationProtection=True)
    config = parse_environment("prod", project_context["environments"]["prod"])
    assert protect("prod", config, client) == ["hyperwarm-prod-cluster: stack policy set (stack_policy.json)",
                                               "hyperwarm-prod-endpoints: not deployed, nothing to protect"]
    assert json.loads(client.get_stack_policy(StackName="hyperwarm-prod-cluster")["StackPolicyBody"]) == \
        json.loads(POLICY_FILE.read_text())


@mock_aws
def test_protect_fails_on_a_deployed_stack_without_termination_protection(project_context) -> None:
    client = boto3.client("cloudformation", region_name="us-east-1")
    client.create_stack(StackName="hyperwarm-prod-endpoints", TemplateBody=_EMPTY)
    config = parse_environment("prod", project_context["environments"]["prod"])
    with pytest.raises(ConfigError, match="hyperwarm-prod-endpoints: termination protection is off"):
        protect("prod", config, client)


def test_protect_leaves_other_environments_alone(monkeypatch, capsys) -> None:
    monkeypatch.chdir(REPO)
    assert protect_main(["staging"]) == 0
    assert "staging: not a production environment" in capsys.readouterr().out


def test_a_change_that_replaces_the_hyperpod_cluster_fails_synth_naming_the_field(project_context,
                                                                                tmp_path, cluster_synth) -> None:
    kept = deployed_in(cluster_synth, tmp_path / "deployed")  # kept from the last deploy
    cidr = prod(project_context, cluster_only, lambda c: c["vpc"].update(cidr="10.1.0.0/16"), baseline=str(kept))
    with pytest.raises(ConfigError) as error:
        synthesize(build_app(outdir=str(tmp_path / "out"), context=cidr, nag=False))
    message = str(error.value)
    assert message.startswith(f"compared with the templates in {kept}/, this deploy would fail or replace")
    assert re.search(r"changes\.replacement: hyperwarm-prod-cluster/HyperPod\w+: AWS::SageMaker::Cluster: VpcConfig "
                     r"names .*CidrBlock changes from \"10\.0\.0\.0/16\" to \"10\.1\.0\.0/16\" .*would replace the "
                     r"HyperPod cluster", message)
    synthesize(build_app(outdir=str(tmp_path / "out"), context={**cidr, "baseline": "none"}, nag=False))


@mock_aws
def test_the_deployed_templates_come_from_cloudformation_for_the_stacks_that_exist(project_context,
                                                                                   tmp_path, prod_synth) -> None:
    boto3.client("cloudformation", region_name="us-east-1").create_stack(
        StackName="hyperwarm-prod-endpoints", TemplateBody=_EMPTY)
    cloud = cx_api.CloudAssembly(str(prod_synth))
    baseline = deployed_templates(cloud)
    assert baseline.templates == {"hyperwarm-prod-endpoints": json.loads(_EMPTY)}
    assert baseline.source == "the deployed templates (CloudFormation GetTemplate)"
    elsewhere = prod(project_context, without_cluster, lambda c: c.update(account="999999999999"))
    cloud = build_app(outdir=str(tmp_path / "b"), context=elsewhere, nag=False).synth()
    with pytest.raises(ConfigError, match=r"the AWS credentials are account 123456789012, hyperwarm-prod-\w+ "
                                          r"deploys to 999999999999; set AWS_PROFILE"):
        deployed_templates(cloud)


@mock_aws
def test_a_failed_first_create_is_no_baseline_and_the_cli_account_is_checked(project_context, tmp_path,
                                                                            monkeypatch, prod_synth) -> None:
    """A stack left in ROLLBACK_COMPLETE deployed nothing to keep; an environment-agnostic stack deploys to
    the account the cdk CLI resolved, so credentials of another one would compare with nothing."""
    cloudformation = boto3.client("cloudformation", region_name="us-east-1")
    cloudformation.create_stack(StackName="hyperwarm-prod-endpoints", TemplateBody=_EMPTY)
    from moto.cloudformation.models import cloudformation_backends
    for stack in cloudformation_backends["123456789012"]["us-east-1"].stacks.values():
        stack.status = "ROLLBACK_COMPLETE"
    cloud = cx_api.CloudAssembly(str(prod_synth))
    assert deployed_templates(cloud).templates == {}
    monkeypatch.setenv("CDK_DEFAULT_ACCOUNT", "999999999999")
    with pytest.raises(ConfigError, match=r"the AWS credentials are account 123456789012, hyperwarm-prod-\w+ "
                                          r"deploys to 999999999999; set AWS_PROFILE"):
        deployed_templates(cloud)


def test_a_synth_that_fails_its_validations_keeps_the_previous_baseline(project_context, tmp_path,
                                                                       monkeypatch, cluster_synth) -> None:
    """aws-cdk-lib writes the assembly before cdk-nag fails it: that synth must not become the baseline, or the
    next one compares with a change that never deployed."""
    deployed_in(cluster_synth, tmp_path)  # what is deployed
    cidr = prod(project_context, cluster_only, lambda c: c["vpc"].update(cidr="10.1.0.0/16"))
    app = build_app(outdir=str(tmp_path), context=cidr, nag=False)
    synth = app.synth

    def fails_after_writing() -> Any:
        synth()
        raise RuntimeError("ValidationFailed: Validation failed")
    monkeypatch.setattr(app, "synth", fails_after_writing)
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        synthesize(app)
    with pytest.raises(ConfigError, match=r"changes\.replacement: hyperwarm-prod-cluster"):
        synthesize(build_app(outdir=str(tmp_path), context=cidr, nag=False))


# -- (d) the refresh stack can be created again ------------------------------------------------------------------

def test_the_retained_state_table_is_imported_when_the_refresh_stack_is_created_again(synthesized) -> None:
    # CloudFormation imports it automatically given a static name that is the type's primary identifier and
    # DeletionPolicy Retain or RetainExceptOnCreate (import-resources-automatically.html), when the deploy asks.
    assert resource_schema("AWS::DynamoDB::Table")["primaryIdentifier"] == ["/properties/TableName"]
    for env in ("staging", "prod"):
        (table,) = synthesized.resources(f"hyperwarm-{env}-refresh", "AWS::DynamoDB::Table").values()
        assert table["DeletionPolicy"] == "RetainExceptOnCreate"
        assert table["Properties"]["TableName"] == state_table_name(env)  # the name the deploy guards read
    dry_run = subprocess.run(["make", "-n", "deploy", "ENV=prod"], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout
    assert re.search(r"cdk deploy --all -c env=prod -c baseline=cloudformation --import-existing-resources", dry_run)
    assert "python -m stacks.protect prod" in dry_run
