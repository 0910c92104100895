"""Hugging Face Hub sources: how a gated repository's token reaches the download, and the Secrets it lands in.

The HyperPod inference operator downloads a ``huggingface`` source in each pod's init container and takes the
token only from a Kubernetes Secret: ``huggingFaceModel.tokenSecretRef`` ("The token is injected as the HF_TOKEN
environment variable into the InitContainer only", the operator's CRD in ``crds/``); AWS's troubleshooting page
updates that Secret with ``kubectl create secret generic <name> --from-literal=token=...`` and restarts the failed
pod (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-ts-huggingface.html).

hyperwarm keeps the token in Secrets Manager and copies it in with :class:`HubTokenSync`, a small function of its
own (``lambdas/hub_token``), the same way its refresh and exporter functions reach the cluster (an EKS access
entry, RBAC, the cluster's private API). Why this design and not the alternatives AWS documents for EKS
(https://docs.aws.amazon.com/eks/latest/userguide/manage-secrets.html):

- the AWS Secrets and Configuration Provider for the Secrets Store CSI driver syncs a Kubernetes Secret only while
  a pod mounts the CSI volume; the operator builds its pods itself and mounts none, so a placeholder pod would have
  to run forever to keep the Secret, with its own IAM identity and a new add-on;
- External Secrets Operator is a third-party controller installed from a Helm repository at deploy time (hyperwarm
  installs nothing that way) with cluster-wide read of Secrets;
- the function here is a few dozen lines, runs in the cluster's private subnets, and holds the least there is:
  ``secretsmanager:GetSecretValue`` on the named secrets only (``kms:Decrypt`` on a customer key only through
  Secrets Manager), and in the cluster ``get``/``patch`` of the named Secrets only (it cannot create, list or read
  any other Secret).

Neither the operator's IAM role nor the pods get Secrets Manager access: the operator never calls Secrets Manager
for this (the CRD takes a Kubernetes Secret), and the pods see the token only as the init container's ``HF_TOKEN``
(kubelet resolves the ``secretKeyRef``; the serving container never gets it).

The token never appears in a template, a synthesized manifest or a log: templates and manifests name the secret;
the Kubernetes Secret is rendered empty (:func:`token_secret`) and filled at deploy time; the function logs names,
version ids and whether a value changed. Rotation: the function also runs every ``interval`` (default 5 minutes),
so the Kubernetes Secret holds a rotated token within one interval; kubelet resolves ``HF_TOKEN`` when it creates
the init container, so every pod started after that (a scale-out, a replaced node, a retried download) uses it,
while a container already running keeps the value it started with ("If a container already consumes a Secret in
an environment variable, a Secret update will not be seen by the container unless it is restarted",
https://kubernetes.io/docs/tasks/inject-data-application/distribute-credentials-secure/). Running pods hold their
weights already and need no token. Rotate by adding the new Hub token first and revoking
the old one after an interval has passed.

The first copy comes after the Secret exists, so a new gated model waits for it: its Secret and the
``InferenceEndpointConfig`` naming it are in the models' one ``KubernetesManifest`` with the namespace, and the
deploy-time copy runs after that manifest (and the function's RBAC). Until the copy ends (it answers within the
function's one-minute timeout; a token it cannot copy fails the deploy), the Secret has no ``token`` key: a pod the
operator starts meanwhile cannot create its download init container ("If a Pod references a specific key in a
non-optional Secret and that Secret does exist, but is missing the named key, the Pod fails during startup",
https://kubernetes.io/docs/concepts/configuration/secret/): kubelet reports CreateContainerConfigError ("couldn't
find key token in Secret ...") and tries again at each sync of the pod, so the download starts once the key is
there. kubernetes/kubernetes#80466 reports pods that stayed in that state after their Secret appeared, which would
keep the model's deployment short of its replicas: each scheduled run deletes such a pod once its Secret holds the
key (the restart AWS's troubleshooting page prescribes; the Deployment starts a new pod, which reads it), counts it
and alarms when that recurs; it counts and alarms the pods waiting on the key that it does not restart (another
cause, a message worded otherwise, no ReplicaSet) as well (``functions/hub_token``; docs/operator-semantics.md: D16,
D17 and the assumption A8, checked at run time). Only a model whose Secret is new waits; a deployed model's Secret
stays filled across deploys. The Secrets are not applied in a manifest of their own ahead of the models: the namespace they need
is in the models' manifest, and moving it (or the endpoints) to another manifest would let ``kubectl apply --prune``
or the cleanup of a rolled back deploy delete it, with every model in it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aws_cdk as cdk
from aws_cdk import (
    aws_cloudwatch as cloudwatch,
    aws_eks_v2 as eks,
    aws_events as events,
    aws_events_targets as targets,
    aws_iam as iam,
    aws_lambda as lambda_,
    aws_logs as logs,
)
from constructs import Construct

from hyperwarm._internal.bundling import FunctionPackage
from hyperwarm._internal.nag import acknowledge, acknowledge_checkov, arn_prefix, pseudo
from hyperwarm._internal.tokens import unresolved
from hyperwarm.caches.objects import hub_token_secret_name as token_secret_name
from hyperwarm.caches.props import CachedModelSpec
from hyperwarm.caches.sources import HuggingFaceModelSource
from hyperwarm.cluster.interfaces import IHyperPodCluster
from hyperwarm.cluster.kube_access import cluster_function_role, private_api_network
from hyperwarm.functions.hub_token.contract import (
    CLUSTER_DIMENSION,
    LEFT_METRIC,
    METRICS_NAMESPACE,
    NAMESPACE_DIMENSION,
    RESTARTED_METRIC,
    STUCK_AFTER_SECONDS,
)

RBAC_GROUP = "hyperwarm:hub-token-sync"
FUNCTION = FunctionPackage.of("hub_token", "the Hub token sync", shared=("cfn_response", "eks_auth",
                                                                         "metric_publishing"))
"""The sync function's code: ``hyperwarm/functions/hub_token/`` and the shared ``cfn_response``, ``eks_auth`` and
``metric_publishing``; boto3 and urllib3 come with the Lambda runtime."""
HANDLER = f"{FUNCTION.handler_prefix}.handler.lambda_handler"
SOURCE_ANNOTATION = "hyperwarm.io/hub-token-source"
"""On each rendered Secret: the Secrets Manager secret its token is copied from (a name or ARN, never a value)."""
DEFAULT_INTERVAL = cdk.Duration.minutes(5)
_NAME = "hyperwarm-hub-token-sync"
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def token_secret(model: CachedModelSpec, *, namespace: str, labels: Mapping[str, str]) -> dict[str, Any] | None:
    """The model's token Secret as rendered: no data (the sync function fills ``token`` at deploy time; a later
    ``kubectl apply`` of this object leaves a key it never set alone). None without a token."""
    name = token_secret_name(model)
    if name is None:
        return None
    assert isinstance(model.source, HuggingFaceModelSource) and model.source.token_secret
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(sorted(labels.items())),
                         "annotations": {SOURCE_ANNOTATION: model.source.token_secret}}}


def tokens_of(models: Sequence[CachedModelSpec]) -> dict[str, HuggingFaceModelSource]:
    """Kubernetes Secret name -> its Hub source, for the models with a token."""
    found: dict[str, HuggingFaceModelSource] = {}
    for model in models:
        name = token_secret_name(model)
        if name is not None and isinstance(model.source, HuggingFaceModelSource):
            found[name] = model.source
    return found


def hub_egress_problems(models: Sequence[CachedModelSpec], cluster: IHyperPodCluster) -> list[str]:
    """A Hub source is downloaded from the internet by the pods: the nodes' subnets need egress. A cluster built
    by hyperwarm always has it (its nodes run in private subnets with a NAT gateway: ``nat_gateways`` >= 1, or an
    existing VPC's private-with-egress subnets); an imported VPC whose private subnets are all isolated has none."""
    if cluster.vpc.private_subnets:
        return []
    return [f"models[{i}].source = {m.source.uri!r} -- the Hub is reached over the internet, and the cluster's VPC "
            "has no private subnets with egress (a NAT gateway route); give the nodes' subnets a NAT gateway, or "
            "copy the model to S3 and use an S3 source"
            for i, m in enumerate(models) if isinstance(m.source, HuggingFaceModelSource)]


def rbac_objects(namespace: str, secret_names: Sequence[str]) -> list[dict[str, Any]]:
    """A Role that may only ``get`` and ``patch`` the named Secrets (``create`` cannot be limited to names in
    RBAC, so the Secrets are rendered with the models and never created here), and ``list`` and ``delete`` the
    namespace's pods (a pod stuck on a missing token key is restarted: ``functions/hub_token``; pods are named by
    their Deployments, so no ``resourceNames``), bound to :data:`RBAC_GROUP`."""
    meta = {"name": _NAME, "namespace": namespace, "labels": {"app.kubernetes.io/managed-by": "hyperwarm"}}
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta,
         "rules": [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": sorted(secret_names),
                    "verbs": ["get", "patch"]},
                   {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "delete"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": _NAME},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": RBAC_GROUP}]},
    ]


@dataclass(frozen=True)
class HubTokenSyncProps:
    """Properties of :class:`HubTokenSync`."""

    cluster: IHyperPodCluster
    """The HyperPod cluster whose models read the tokens."""
    namespace: str
    """The models' namespace, where the Secrets are."""
    tokens: Mapping[str, HuggingFaceModelSource]
    """Kubernetes Secret name -> the Hub source whose ``token_secret`` fills it (at least one)."""
    interval: cdk.Duration = DEFAULT_INTERVAL
    """How often the tokens are copied again (rotation reaches the cluster within one interval; 1..60 minutes).
    Default: 5 minutes."""
    after: Sequence[Construct] = ()
    """What renders the Secrets (the models' manifest): the RBAC and the first copy come after it, so until that copy
    a pod needing a new Secret waits (see the module). Default: none."""
    fingerprint: str = ""
    """Changes whenever the rendered Secrets do, so the deploy-time copy runs again. Default: none."""


class HubTokenSync(Construct):
    """Copies each Hub token from Secrets Manager into its Kubernetes Secret at deploy time and every
    ``interval``, and at each scheduled run restarts a pod stuck on a filled token key. ``node.default_child`` is
    the ``AWS::Lambda::Function``; ``resource`` the deploy-time copy; ``errors_alarm`` (a failed run),
    ``stuck_pods_alarm`` (restarts that do not mend) and ``pods_left_alarm`` (pods waiting on a token key that the
    sync does not restart) notify whoever the app wires its alarms to."""

    def __init__(self, scope: Construct, id: str, props: HubTokenSyncProps) -> None:
        super().__init__(scope, id)
        _validate(self.node.path, props)
        self.security_group, network = private_api_network(self, props.cluster, "Hub token sync")
        self.role = cluster_function_role(
            self, props.cluster, "Hub token sync: reads the Hub token secrets, fills their Kubernetes Secrets")
        self.secret_arns = self._grant_token_reads(props)
        """The secrets' ARNs as granted (a name ends in ``-??????``: Secrets Manager's random suffix)."""
        self.function = lambda_.Function(
            self, "Function", runtime=lambda_.Runtime.PYTHON_3_13, architecture=lambda_.Architecture.ARM_64,
            handler=HANDLER, code=FUNCTION.code(), role=self.role, memory_size=128,
            timeout=cdk.Duration.minutes(1),
            reserved_concurrent_executions=1,  # a deploy-time copy and a scheduled one never race
            environment={"HYPERWARM_CLUSTER_NAME": props.cluster.eks_cluster.cluster_name,
                         "HYPERWARM_NAMESPACE": props.namespace,
                         "HYPERWARM_HUB_TOKENS": json.dumps(
                             {name: s.token_secret for name, s in sorted(props.tokens.items())})},
            log_group=logs.LogGroup(self, "Logs", retention=logs.RetentionDays.THREE_MONTHS),
            description="hyperwarm: copy Hugging Face Hub tokens from Secrets Manager into the operator's Secrets",
            **network)
        self.node.default_child = self.function.node.default_child
        acknowledge(self.function, "Python 3.13 is the runtime this function is tested on; moving to a newer one "
                    "is a deliberate, tested upgrade", "L1")
        acknowledge_checkov(self.function, "a failed run is superseded by the next (no retries by design); a "
                            "dead-letter queue would hold schedule events nobody replays", "CKV_AWS_116")
        acknowledge_checkov(self.function, "the environment holds the cluster name, the namespace and secret names "
                            "or ARNs, never a token; Lambda encrypts it at rest with an AWS-managed key", "CKV_AWS_173")
        acknowledge_checkov(self.function.log_group, "logs hold Secret names, secret version ids and whether a value "
                            "changed, never a token; CloudWatch Logs encrypts every log group at rest", "CKV_AWS_158")
        self.rule = events.Rule(self, "Schedule", schedule=events.Schedule.rate(props.interval),
                                description="hyperwarm: copy rotated Hub tokens into the operator's Secrets")
        self.rule.add_target(targets.LambdaFunction(self.function, retry_attempts=0, max_event_age=props.interval))
        self.function.configure_async_invoke(retry_attempts=0, max_event_age=props.interval)
        eks_cluster = props.cluster.eks_cluster
        self.access_entry = eks.CfnAccessEntry(
            self, "AccessEntry", cluster_name=eks_cluster.cluster_name, principal_arn=self.role.role_arn,
            kubernetes_groups=[RBAC_GROUP], type="STANDARD")
        self.rbac_objects = rbac_objects(props.namespace, list(props.tokens))
        self.rbac = eks.KubernetesManifest(self, "Rbac", cluster=eks_cluster, manifest=self.rbac_objects,
                                           overwrite=True)
        for dependency in props.after:
            self.rbac.node.add_dependency(dependency)  # the namespace exists first
        self.resource = cdk.CustomResource(
            self, "Resource", service_token=self.function.function_arn, resource_type="Custom::HubTokenSync",
            service_timeout=cdk.Duration.minutes(3),  # the function answers within its minute, or never
            properties={"Tokens": {name: s.token_secret for name, s in sorted(props.tokens.items())},
                        "Fingerprint": props.fingerprint})
        self.resource.node.add_dependency(self.rbac, self.access_entry, self.role)
        self._alarms(props)

    def _alarms(self, props: HubTokenSyncProps) -> None:
        """A failed copy or restart (the scheduled run raises); pods restarted again and again: kubelet keeps
        failing them although their Secret holds the token, which a restart does not mend; and pods waiting
        on a token key that the sync does not restart, in 2 of 3 intervals (a run's datapoint may fall into the
        next period)."""
        self.errors_alarm = cloudwatch.Alarm(
            self, "ErrorsAlarm", metric=self.function.metric_errors(period=props.interval), threshold=1,
            evaluation_periods=1, comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description="the Hub token sync failed: a rotated token did not reach its Kubernetes Secret, or a "
                              "pod stuck on a missing token key could not be restarted (the function's log names it)")
        dimensions = {CLUSTER_DIMENSION: props.cluster.eks_cluster.cluster_name, NAMESPACE_DIMENSION: props.namespace}
        restarted = cloudwatch.Metric(namespace=METRICS_NAMESPACE, metric_name=RESTARTED_METRIC, statistic="Sum",
                                      period=props.interval, dimensions_map=dimensions)
        runs = restart_every(props.interval)
        self.stuck_pods_alarm = cloudwatch.Alarm(
            self, "StuckPodsAlarm", metric=restarted, threshold=1, datapoints_to_alarm=3, evaluation_periods=3 * runs,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=f"pods of {props.namespace} restarted 3 times in {3 * runs} runs of the Hub token "
                              f"sync: each still waited for its token key {STUCK_AFTER_SECONDS} s after creation "
                              "although the Secret held it, so restarting does not help (kubectl describe pod "
                              "names what kubelet cannot find)")
        left = cloudwatch.Metric(namespace=METRICS_NAMESPACE, metric_name=LEFT_METRIC, statistic="Maximum",
                                 period=props.interval, dimensions_map=dimensions)
        self.pods_left_alarm = cloudwatch.Alarm(
            self, "PodsLeftAlarm", metric=left, threshold=1, datapoints_to_alarm=2, evaluation_periods=3,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=f"pods of {props.namespace} still wait, {STUCK_AFTER_SECONDS} s after creation, for "
                              "kubelet to create a container that takes a Hub token key, and the Hub token sync "
                              "does not restart them: kubelet names another cause (another key or Secret, "
                              "runAsNonRoot), words a missing key in a way the sync does not know, or no "
                              "ReplicaSet would start them again (the function's log names them; kubectl describe "
                              "pod says why; if it is the token key of a Secret that holds it, delete the pod, its "
                              "Deployment starts a new one, and report kubelet's wording to hyperwarm)")

    def _grant_token_reads(self, props: HubTokenSyncProps) -> list[str]:
        """The role reads the token secrets (and decrypts them through Secrets Manager alone); their ARNs."""
        stack = cdk.Stack.of(self)
        sources = sorted({s.token_secret for s in props.tokens.values() if s.token_secret})
        secret_arns = [secret_arn(stack, s) for s in sources]
        self.role.add_to_principal_policy(iam.PolicyStatement(
            sid="ReadHubTokens", actions=["secretsmanager:GetSecretValue"], resources=secret_arns))
        suffixed = [f"IAM5[Resource::{_finding(self, arn)}]" for arn in secret_arns if arn.endswith("-??????")]
        if suffixed:
            acknowledge(self.role, "a secret named without its ARN: the ARN ends in a random six-character suffix "
                        "Secrets Manager adds, matched by -?????? (one secret per name)", *suffixed)
        keys = sorted({s.token_secret_key_arn for s in props.tokens.values() if s.token_secret_key_arn})
        if keys:
            self.role.add_to_principal_policy(iam.PolicyStatement(
                sid="DecryptHubTokens", actions=["kms:Decrypt"], resources=keys,
                conditions={"StringEquals": {"kms:ViaService": f"secretsmanager.{stack.region}.{stack.url_suffix}"}}))
        return secret_arns

    @property
    def grant_principal(self) -> iam.IPrincipal:
        return self.role


def restart_every(interval: cdk.Duration) -> int:
    """Runs between two restarts of a pod that a restart never mends: its replacement counts as stuck only once it is
    ``STUCK_AFTER_SECONDS`` old, at the first run after that (3, the most in the allowed intervals, for a
    deploy-time interval)."""
    seconds = interval.to_seconds()
    return 3 if unresolved(seconds) else int(STUCK_AFTER_SECONDS // seconds) + 1


def secret_arn(stack: cdk.Stack, secret: str) -> str:
    """The ARN IAM matches for a secret given by name or complete ARN."""
    if secret.startswith("arn:"):
        return secret
    return stack.format_arn(service="secretsmanager", resource="secret", resource_name=f"{secret}-??????",
                            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME)


def _finding(scope: Construct, arn: str) -> str:
    stack = cdk.Stack.of(scope)
    name = arn.split(":secret:", 1)[1]
    return (f"{arn_prefix(scope)}:secretsmanager:{pseudo(stack.region, 'AWS::Region')}:"
            f"{pseudo(stack.account, 'AWS::AccountId')}:secret:{name}")


def fingerprint(objects: Sequence[Mapping[str, Any]]) -> str:
    """A hash of the rendered token Secrets: the deploy-time copy runs again whenever they change."""
    secrets = [o for o in objects if o.get("kind") == "Secret"]
    return hashlib.sha256(json.dumps(secrets, sort_keys=True).encode()).hexdigest()[:16]


def _validate(path: str, props: HubTokenSyncProps) -> None:
    problems = []
    if not props.tokens:
        problems.append("tokens = {} -- give at least one Secret name and its Hub source")
    for name, source in props.tokens.items():
        if not source.token_secret:
            problems.append(f"tokens[{name!r}].token_secret = None -- a source without a token has nothing to copy")
    if not unresolved(props.namespace) and not _NAMESPACE.match(props.namespace):
        problems.append(f"namespace = {props.namespace!r} -- a Kubernetes namespace: 1..63 lower-case letters, "
                        "digits or hyphens")
    if not unresolved(props.interval.to_seconds()) and \
            not 60 <= props.interval.to_seconds() <= 3600:
        problems.append(f"interval = {props.interval.to_human_string()} -- allowed: 1..60 minutes")
    if problems:
        raise ValueError(f"{path}: HubTokenSyncProps: " + "; ".join(problems))
