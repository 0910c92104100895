"""``hyperwarm-<env>-caches``: the chart applied to the cluster after the inference operator add-on."""

from __future__ import annotations

import json

import pytest

from manifests import build_chart
from rehearsal.core import Assembly
from stacks.app import build_app
from stacks.caches_stack import chart_props
from stacks.config.environment import parse_environments

ENVIRONMENTS = ("dev", "staging", "prod")
PRUNE_LABEL_PREFIX = "aws.cdk.eks/prune-"


def applied_objects(template: dict) -> list[dict]:
    """The objects of the stack's one manifest; the cluster's name (a token) reads "${TOKEN}"."""
    applied = list(Assembly.from_templates({"caches": template}).kubernetes_objects())
    assert len({logical_id for _, logical_id, _ in applied}) == 1
    objects = [obj for _, _, obj in applied]
    for obj in objects:  # the prune label CDK adds to find objects removed later
        obj["metadata"]["labels"] = {k: v for k, v in obj["metadata"]["labels"].items()
                                     if not k.startswith(PRUNE_LABEL_PREFIX)}
    return objects


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_caches_stack_applies_the_environment_chart(synthesized, project_context, env) -> None:
    config = parse_environments(project_context["environments"])[env]
    applied = applied_objects(synthesized.template(f"hyperwarm-{env}-caches"))
    assert applied == build_chart(env, chart_props(env, config, cluster_name="${TOKEN}")).to_json()


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_caches_stack_deploys_after_the_cluster_stack(synthesized, env) -> None:
    artifact = synthesized.assembly.get_stack_by_name(f"hyperwarm-{env}-caches")
    # The manifest's string list: touching artifact.dependencies makes jsii re-type the cluster artifact.
    assert f"hyperwarm-{env}-cluster" in artifact.manifest.dependencies


def test_manifest_depends_on_the_inference_operator_addon(synthesized) -> None:
    caches = synthesized.app.node.find_child("hyperwarm-prod-caches")
    cluster = synthesized.app.node.find_child("hyperwarm-prod-cluster").cluster
    assert cluster.inference_operator.addon in caches.manifest.node.dependencies


def test_operator_may_read_only_the_configured_model_versions(synthesized) -> None:
    template = synthesized.template("hyperwarm-prod-cluster")
    statements = [s for r in template["Resources"].values() if r["Type"] == "AWS::IAM::Policy"
                  for s in r["Properties"]["PolicyDocument"]["Statement"]]
    def listed(value: object) -> list:
        return value if isinstance(value, list) else [value]

    reads = {r for s in statements if "s3:GetObject" in listed(s["Action"]) for r in listed(s["Resource"])
             if "hyperwarm-models-prod" in json.dumps(r)}
    # The deployed version of each model; prod refreshes both prefixes, so every later version too.
    assert reads == {f"arn:aws:s3:::hyperwarm-models-prod/{prefix}/{suffix}"
                     for prefix in ("llama-3.1-70b-instruct", "llama-3.1-8b-instruct") for suffix in ("v1/*", "*")}
    listings = [s["Condition"]["StringLike"]["s3:prefix"] for s in statements if s["Action"] == "s3:ListBucket"
                and "hyperwarm-models-prod" in json.dumps(s["Resource"])]
    # A trailing slash: listing v1/ must not reveal the keys of v10/.
    assert ["llama-3.1-8b-instruct/v1/", "llama-3.1-8b-instruct/v1/*"] in listings


def test_environment_without_caches_has_no_caches_stack(project_context) -> None:
    project_context["environments"]["dev"] = {}
    project_context["env"] = "dev"
    app = build_app(context=project_context, nag=False)
    assert [c.node.id for c in app.node.children if c.node.id.startswith("hyperwarm-")] == ["hyperwarm-dev-cluster"]


def test_caches_need_the_inference_operator() -> None:
    import aws_cdk as cdk
    from stand_ins import imported_cluster
    from test_caches_config import environment, model

    from stacks.caches_stack import CachesStack
    from stacks.config.environment import parse_environment

    config = parse_environment("dev", environment(model()))
    app = cdk.App()
    env = cdk.Environment(region="us-west-2")
    cluster = imported_cluster(cdk.Stack(app, "Cluster", env=env), [g.to_spec() for g in config.instance_groups],
                               operator=False)
    with pytest.raises(ValueError, match="Caches/Default: model caches need the HyperPod inference operator"):
        CachesStack(app, "Caches", env_name="dev", config=config, cluster=cluster, env=env)


def _caches_stack(operator_build: str | None, **model_overrides: object) -> None:
    import aws_cdk as cdk
    from stand_ins import imported_cluster
    from test_caches_config import environment, model

    from stacks.caches_stack import CachesStack
    from stacks.config.environment import parse_environment

    config = parse_environment("dev", environment(model(**model_overrides)))
    app = cdk.App()
    env = cdk.Environment(region="us-west-2")
    cluster = imported_cluster(cdk.Stack(app, "Cluster", env=env), [g.to_spec() for g in config.instance_groups],
                               operator_build=operator_build)
    CachesStack(app, "Caches", env_name="dev", config=config, cluster=cluster, env=env)


def test_caches_on_an_operator_of_unknown_build_fail_synth() -> None:
    # Without a pin EKS installs its default build; an operator older than 3.3 drops modelCacheConfig silently.
    from stacks.config import ConfigError

    with pytest.raises(ConfigError, match=r"environments.dev.addon_versions\['amazon-sagemaker-hyperpod-inference'\]: "
                                          r"None -- no build is pinned, .* InferenceEndpointConfig.spec."
                                          r"modelCacheConfig needs operator 3.3 or later .* e.g. v2.0.0-eksbuild.1"):
        _caches_stack(None)


def test_caches_on_a_build_that_predates_model_caching_fail_synth() -> None:
    from stacks.config import ConfigError

    with pytest.raises(ConfigError, match=r"'v1.0.0-eksbuild.1' -- InferenceEndpointConfig.spec.modelCacheConfig "
                                          r"needs operator 3.3 or later, and this build carries operator 3.0; "
                                          r"pin v2.0.0-eksbuild.1 or later"):
        _caches_stack("v1.0.0-eksbuild.1")
    _caches_stack("v2.0.0-eksbuild.1")
