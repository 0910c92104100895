"""A JumpStart-sourced cached model: the operator's ``JumpStartModel`` object, what it cannot take, and its IAM.

A :class:`~hyperwarm.caches.sources.JumpStartModelSource` is not an ``InferenceEndpointConfig`` with another model
source: the operator serves it as a ``JumpStartModel`` (vendored CRD ``crds/``, chart 2.3.0), which names the hub
content (``spec.model``) and the instance type (``spec.server``) and brings its own container, image, resources,
environment and port from the hub content. AWS's page "Deploy models from JumpStart using kubectl"
(https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-deploy-js-kubectl.html) lists
a model's ids with ``aws sagemaker list-hub-contents --hub-name SageMakerPublicHub`` and its supported instance types
with ``describe-hub-content``; the operator reads the hub content at deploy (``sagemaker:DescribeHubContent``, in the
AWS-managed ``AmazonSageMakerHyperPodInferenceAccess`` its execution role holds).

- What maps: replicas, the operator's weights and image caches (``modelCacheConfig``), routing, autoscaling,
  metrics, KV cache, load balancer, TLS, ``serving.environment`` (``environmentVariables``) and the deploy timeout
  (sized like a probed model's startup budget).
- What a ``JumpStartModel`` cannot take is refused when the props are built (:func:`jumpstart_problems`): a worker
  image, resources, probes, request limits, serving arguments or framework, a port, a DaemonSet pre-pull.
- Placement: the CRD has ``server.instanceType`` and no node affinity, so its pods may land on any node of that
  type; the model's instance group must be the only group of its type (:func:`shared_type_problems`), or the
  capacity guard would count the wrong group's NVMe.
- Existence of the id and version is checked by the operator at deploy: no installed package carries the JumpStart
  catalogue offline (the SageMaker Python SDK reads its manifest from the JumpStart bucket at run time), so synth
  checks their shape (the CRD's patterns) alone.
- IAM: the model readers read the JumpStart bucket ``jumpstart-cache-prod-<region>`` (AWS's "Deploy a Model"
  page, https://docs.aws.amazon.com/sagemaker/latest/dg/jumpstart-deploy.html, scopes a JumpStart role's S3 access
  to that bucket); a gated model downloads with a role allowed ``sagemaker:CreateHubContentPresignedUrls`` on its
  hub content (AWS's ``AmazonSageMakerHyperPodGatedModelAccess``, narrowed here to the gated models), assumed by the
  deployment's ``hyperpod-inference-service-account*`` through IRSA, as AWS's setup guide trusts it
  (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-setup.html).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from hyperwarm._internal.tokens import unresolved
from hyperwarm.caches.sources import JumpStartModelSource

if TYPE_CHECKING:
    from aws_cdk import aws_iam as iam
    from constructs import Construct

# The props (hyperwarm.caches.props) import these rules, so a model and a group are read here by their attributes
# (a CachedModelSpec, a placement.CacheGroup), not by their types.
CachedModelSpec = Any
CacheGroup = Any

BUCKET = "jumpstart-cache-prod-{region}"
"""The JumpStart bucket of a region, where hub content's artifacts live (S3): the ``content_bucket`` of every region
in sagemaker-core 2.27.0's ``sagemaker/core/jumpstart/region_config.json``. Gated models' artifacts are in
``jumpstart-private-cache-prod-<region>``, reached through presigned URLs (:func:`gated_download_role`), not a grant.
That file is all the SDK carries offline: its catalogue, ``models_manifest.json``, is read from the bucket."""
GATED_SERVICE_ACCOUNT = "hyperpod-inference-service-account*"
"""The service accounts AWS's gated-model role trusts (the setup guide's trust policy)."""
DEFAULT_PORT = 8080
GATED_CONDITION = {"StringEquals": {"aws:ResourceAccount": "${aws:PrincipalAccount}"}}
"""The condition of AWS's ``AmazonSageMakerHyperPodGatedModelAccess`` (v3, the default version since 2026-02-12,
https://docs.aws.amazon.com/aws-managed-policy/latest/reference/AmazonSageMakerHyperPodGatedModelAccess.html),
kept as AWS wrote it. Public hub content ARNs may name the account ``aws`` (the API's ARN pattern: a 12-digit
account or ``aws``), and IAM warns that ``aws:ResourceAccount`` in an identity policy can block resources in
accounts a service owns
(https://docs.aws.amazon.com/IAM/latest/UserGuide/resource_examples_iam_policies_resource_account.html); but the
policy AWS publishes for exactly this grant, on ``SageMakerPublicHub`` content only, keeps the condition, and
hyperwarm grants no more than it. Should AWS change its policy, follow it here."""


def is_jumpstart(model: CachedModelSpec) -> bool:
    return isinstance(model.source, JumpStartModelSource)


def jumpstart_bucket(region: str) -> str:
    return BUCKET.format(region=region)


def image_key(source: JumpStartModelSource) -> str:
    """What stands for the JumpStart container's image on the NVMe (its reference is the hub content's): one per
    model version, so two models of one version share it as two models of one image do."""
    return f"{source.uri} (image)"


def jumpstart_problems(model: CachedModelSpec) -> list[str]:
    """What a ``JumpStartModel`` cannot take, each naming the field (none for another source)."""
    from hyperwarm.serving.settings import Serving

    if not is_jumpstart(model):
        return []
    brings = "a JumpStartModel runs the container its hub content names"
    problems = []
    if model.image is not None:
        problems.append(f"image = {model.image!r} -- {brings} (its image too); leave image unset "
                        "(image_size still counts it on the NVMe)")
    if model.resources != type(model.resources)():  # WorkerResources' defaults
        problems.append(f"resources = {model.resources} -- {brings}, sized for server.instanceType; "
                        "leave resources unset")
    for name in ("probes", "request_limits"):
        if getattr(model, name) is not None:
            problems.append(f"{name} = given -- {brings}; the JumpStartModel CRD has no worker to set them on")
    told = [name for name in ("args", "framework", "model_env", "parallel_env")
            if getattr(model.serving, name) != getattr(Serving(), name)]
    if told:
        problems.append(f"serving = {', '.join(told)} given -- {brings}, configured by its hub content; a "
                        "JumpStartModel takes serving.environment alone (its environmentVariables)")
    if model.port != DEFAULT_PORT:
        problems.append(f"port = {model.port} -- {brings}, listening where its hub content says; leave port unset")
    if model.fallback_groups:
        problems.append(f"fallback_groups = {list(model.fallback_groups)} -- a JumpStartModel names one instance type "
                        "(server.instanceType) and has no node affinity; leave fallback_groups unset")
    if model.prepull != "operator":
        problems.append(f"prepull = {model.prepull!r} -- only the operator knows the JumpStart image; allowed: operator")
    return problems


def shared_type_problems(models: Sequence[CachedModelSpec], groups: Sequence[CacheGroup],
                         path: str = "models") -> list[str]:
    """A JumpStart model's group must be the only group of its instance type (``server.instanceType`` places it)."""
    problems = []
    for index, model in enumerate(models):
        own = next((g for g in groups if g.name == model.instance_group), None)
        if not is_jumpstart(model) or own is None:
            continue
        others = sorted(g.name for g in groups if g.name != own.name and g.instance_type == own.instance_type)
        if others:
            problems.append(
                f"{path}[{index}].instance_group: {model.instance_group!r} -- a JumpStartModel is placed by "
                f"server.instanceType alone (its CRD has no node affinity), and {', '.join(others)} also run "
                f"{own.instance_type}, so its pods may land there; allowed: a group whose instance type no other "
                "group has")
    return problems


def grant_jumpstart_read(grantee: iam.IGrantable, scope: Construct) -> iam.Grant:
    """Let one of the operator's model readers read the JumpStart bucket of ``scope``'s region: every object (a
    hub content's artifacts sit under prefixes only the hub content names, read at deploy) and its listing."""
    import aws_cdk as cdk
    from aws_cdk import aws_iam as iam
    from constructs import Construct

    from hyperwarm._internal.kinds import is_a
    from hyperwarm._internal.nag import acknowledge, finding_text
    from hyperwarm.serving.buckets import declare_existing_buckets

    stack = cdk.Stack.of(scope)
    bucket = f"arn:{stack.partition}:s3:::{jumpstart_bucket(stack.region)}"
    grant = iam.Grant.add_to_principal(grantee=grantee, actions=["s3:GetObject", "s3:ListBucket"],
                                       resource_arns=[bucket, f"{bucket}/*"])
    # AWS's bucket exists before any deploy: said so in the templates that name it (the deploy rehearsal reads it).
    stacks = {stack, *((cdk.Stack.of(grantee.grant_principal),) if is_a(grantee.grant_principal, Construct) else ())}
    for named in stacks if not unresolved(stack.region) else ():
        declare_existing_buckets(named, [jumpstart_bucket(stack.region)])
    if is_a(grantee.grant_principal, Construct):
        acknowledge(grantee.grant_principal, "reads the JumpStart bucket, where a hub content's artifacts sit "
                    "under prefixes only the hub content names (read by the operator at deploy)",
                    f"IAM5[Resource::{finding_text(scope, bucket + '/*')}]")
    return grant


def gated_download_role(scope: Construct, id: str, *, issuer_url: str, namespace: str,
                        sources: Sequence[JumpStartModelSource]) -> iam.Role:
    """The role a gated model's pods download with: presigned URLs of these models' hub content only, assumed
    through IRSA by the operator's ``hyperpod-inference-service-account*`` accounts of ``namespace`` (the
    deployment's pods run there, and a pod uses its own namespace's accounts) and by SageMaker, as AWS's setup
    guide trusts its gated-model role. ``issuer_url``: the EKS cluster's OIDC issuer (its provider exists: the
    inference operator's roles use it)."""
    import aws_cdk as cdk
    from aws_cdk import aws_iam as iam

    from hyperwarm._internal.nag import acknowledge, finding_text

    stack = cdk.Stack.of(scope)
    issuer = cdk.Fn.select(1, cdk.Fn.split("https://", issuer_url))
    provider_arn = f"arn:{stack.partition}:iam::{stack.account}:oidc-provider/{issuer}"
    like = cdk.CfnJson(scope, f"{id}Subject", value={
        f"{issuer}:sub": f"system:serviceaccount:{namespace}:{GATED_SERVICE_ACCOUNT}"})
    equals = cdk.CfnJson(scope, f"{id}Audience", value={f"{issuer}:aud": "sts.amazonaws.com"})
    role = iam.Role(scope, id, description="hyperwarm: download gated JumpStart models (hub content presigned URLs)",
                    assumed_by=iam.CompositePrincipal(
                        iam.WebIdentityPrincipal(provider_arn, {"StringLike": like, "StringEquals": equals}),
                        iam.ServicePrincipal("sagemaker.amazonaws.com").with_conditions(
                            {"StringEquals": {"aws:SourceAccount": stack.account}})))
    resources = sorted({arn for s in sources for arn in hub_content_arns(s, stack.partition, stack.region)})
    role.add_to_policy(iam.PolicyStatement(
        sid="CreatePresignedUrlAccess", actions=["sagemaker:CreateHubContentPresignedUrls"], resources=resources,
        conditions=GATED_CONDITION))
    acknowledge(role, "presigned URLs of the gated models' hub content, every version (a refresh moves the "
                "version), in any account of the ARN (public hub content is AWS's), limited by the same "
                "aws:ResourceAccount condition as AmazonSageMakerHyperPodGatedModelAccess v3",
                *(f"IAM5[Resource::{finding_text(scope, arn)}]" for arn in resources if "*" in arn))
    return role


def hub_content_arns(source: JumpStartModelSource, partition: str, region: str) -> list[str]:
    """The hub and the model's hub content (every version): ``AmazonSageMakerHyperPodGatedModelAccess``'s
    resources (``hub/SageMakerPublicHub``, ``hub-content/SageMakerPublicHub/*/*``) narrowed to one model; public hub
    content ARNs read ``hub-content/<hub>/Model/<name>`` (CreateHubContentReference's pattern)."""
    prefix = f"arn:{partition}:sagemaker:{region}:*"
    return [f"{prefix}:hub/{source.hub_name}", f"{prefix}:hub-content/{source.hub_name}/Model/{source.model_id}/*"]


def jumpstart_gpus(model: CachedModelSpec, groups: Sequence[CacheGroup]) -> int:
    """The GPUs a JumpStart model's pod is counted with: every GPU of a node of its group (its hub content sizes the
    pod for the instance type, which hyperwarm cannot read offline); 0 for an unknown group."""
    from hyperwarm.cluster.catalog import CATALOG

    group = next((g for g in groups if g.name == model.instance_group), None)
    spec = CATALOG.get(group.instance_type) if group is not None else None
    return spec.gpus if spec is not None else 0


def group_types(groups: Mapping[str, CacheGroup]) -> dict[str, str]:
    """Instance group -> instance type, what a ``JumpStartModel``'s ``server.instanceType`` reads."""
    return {name: group.instance_type for name, group in groups.items()}
