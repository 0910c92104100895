"""Per-environment composition: names, selection with -c env=..., bad configuration fails synth."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from stacks.app import build_app
from stacks.config import ConfigError

REPO = Path(__file__).resolve().parent.parent


def names(app) -> list[str]:
    return sorted(child.node.id for child in app.node.children if hasattr(child, "stack_name"))


@pytest.fixture(scope="module")
def prod_app():
    """prod alone (``-c env=prod``), as cdk.json configures it, built once for the tests that only read it."""
    context = json.loads((REPO / "cdk.json").read_text())["context"]
    return build_app(context={**context, "env": "prod"}, nag=False)


def test_env_context_selects_one_environment(prod_app) -> None:
    assert all(n.startswith("hyperwarm-prod-") for n in names(prod_app)) and "hyperwarm-prod-cluster" in names(prod_app)


def test_unknown_env_lists_configured_ones(project_context) -> None:
    with pytest.raises(ValueError, match=r"unknown environment\(s\) qa; configured: dev, prod, staging"):
        build_app(context={**project_context, "env": "qa"}, nag=False)


def test_bad_configuration_fails_before_any_stack_exists(project_context) -> None:
    context = {**project_context}
    context["environments"] = {**context["environments"], "prod": {"instance_groups": [
        {"name": "gpu", "instance_type": "ml.p5.48xlarge", "instance_count": 9999}]}}
    with pytest.raises(ConfigError, match=r"environments.prod.instance_groups\[0\].instance_count: 9999"):
        build_app(context=context, nag=False)


def test_stacks_carry_their_environment_region(prod_app) -> None:
    assert prod_app.node.find_child("hyperwarm-prod-cluster").region == "us-east-1"


def test_created_model_buckets_deploy_before_every_other_stack_of_the_environment(synthesized) -> None:
    # Staging's caches and endpoints read the bucket the refresh stack created last (the session's app: every
    # environment as cdk.json configures it).
    app = synthesized.app
    buckets = app.node.find_child("hyperwarm-staging-buckets")
    alarms = app.node.find_child("hyperwarm-staging-alarms")  # the alarm topic reads no bucket
    others = [s for s in app.node.children if hasattr(s, "stack_name") and s not in (buckets, alarms)
              and s.stack_name.startswith("hyperwarm-staging-")]
    assert {s.stack_name for s in others} == {f"hyperwarm-staging-{p}" for p in ("cluster", "caches", "endpoints",
                                                                                  "refresh", "observability")}
    assert all(buckets in s.dependencies for s in others)


def test_existing_model_buckets_are_declared_in_every_stack_that_may_read_them(prod_app) -> None:
    stacks = [s for s in prod_app.node.children if hasattr(s, "stack_name") and not s.stack_name.endswith("-alarms")]
    assert "hyperwarm-prod-buckets" not in {s.stack_name for s in stacks}
    for stack in stacks:
        assert stack.template_options.metadata["hyperwarm:existingBuckets"] == ["hyperwarm-models-prod"]


def test_official_cuda_13_image_without_its_ami_fails_naming_the_config_path(project_context) -> None:
    # The vLLM 0.27.1 image is cu130; SageMaker's default AMI cannot run it.
    context = copy.deepcopy(project_context)
    del context["environments"]["prod"]["endpoints"][0]["variants"][1]["inference_ami_version"]
    with pytest.raises(ConfigError, match=r"environments\.prod\.endpoints\[0\]\.variants\[1\]\.inference_ami_version: "
                                          r"None -- the image .*cu130.* needs CUDA 13\.0 .* set inference_ami_version "
                                          r"to al2023-ami-sagemaker-inference-gpu-4-1"):
        build_app(context={**context, "env": "prod"}, nag=False)


def test_an_endpoints_only_environment_has_no_cluster_stack(project_context) -> None:
    # ap-northeast-3 has SageMaker endpoints but no HyperPod health agent: endpoints alone must still deploy there.
    edge = {"region": "ap-northeast-3", "endpoints": project_context["environments"]["dev"]["endpoints"],
            "model_buckets": [{"name": "edge-models"}], "observability": {"otel_enrichment": "existing"}}
    for variant in edge["endpoints"][0]["variants"]:
        variant["model_data"] = variant["model_data"].replace("hyperwarm-models-dev", "edge-models")
        variant["instance_type"] = "ml.g6e.2xlarge"  # the region offers no ml.g5 for endpoints
    app = build_app(context={**project_context, "environments": {"edge": edge}}, nag=False)
    assert names(app) == ["hyperwarm-edge-alarms", "hyperwarm-edge-endpoints", "hyperwarm-edge-observability"]


def test_a_whole_environment_in_a_newer_supported_region_synthesizes(project_context) -> None:
    # ca-central-1 once failed deep in the build (the health agent's regional image); any region the
    # configuration accepts must build every stack, with the region's images.
    dev = copy.deepcopy({**project_context["environments"]["dev"], "region": "ca-central-1"})
    dev.pop("vpc", None)  # its zones are us-west-2's
    for model in dev["caches"]["models"]:  # an image is pulled from its own region's registry (JumpStart's: none given)
        if "image" in model:
            model["image"] = model["image"].replace("us-west-2", "ca-central-1")
    app = build_app(context={**project_context, "environments": {"dev": dev}}, nag=False)
    assert names(app) == ["hyperwarm-dev-alarms", "hyperwarm-dev-caches", "hyperwarm-dev-cluster",
                          "hyperwarm-dev-endpoints", "hyperwarm-dev-observability"]
    assembly = app.synth()
    cluster = json.dumps(assembly.get_stack_by_name("hyperwarm-dev-cluster").template)
    assert "dkr.ecr.ca-central-1" in cluster and "dkr.ecr.us-west-2" not in cluster


def test_no_stack_of_any_environment_warns_at_synth(synthesized) -> None:
    # a warning is printed on every cdk command (the cross-stack reference one did): none is allowed.
    # The session's synthesis of every environment, cdk-nag on as `cdk` runs it, holds every stack's messages
    # (Annotations.from_stack would synthesize the whole app again per stack).
    assert synthesized.warnings() == {}


def test_every_reader_of_a_bucket_with_a_customer_key_may_decrypt_with_it(prod_variant) -> None:
    """SSE-KMS objects cannot be read without kms:Decrypt: the endpoint's role, the operator's model readers
    and the refresh function all get it on the key model_buckets names."""
    key = prod_variant.kms_key_arn  # prod's model bucket hyperwarm-models-prod with kms_key_arn
    decrypting = set()
    for stack in prod_variant.assembly.stacks:
        for r in stack.template["Resources"].values():
            if r["Type"] == "AWS::IAM::Policy" and any(
                    "kms:Decrypt" in json.dumps(s["Action"]) and s["Resource"] == key
                    for s in r["Properties"]["PolicyDocument"]["Statement"]):
                decrypting |= {role["Ref"] for role in r["Properties"]["Roles"]}
    assert {next(r for r in decrypting if r.startswith(prefix)) for prefix in (
        "chatExecutionRole", "HyperPodInferenceOperatorExecutionRole", "HyperPodInferenceOperatorS3CsiRole",
        "CacheRefreshRole")}, decrypting
