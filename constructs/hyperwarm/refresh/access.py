"""What the cache refresh functions may do, and what serving a refreshed prefix needs.

The functions' role names the bucket prefixes, the state table, the queue, the endpoints and the
models and configs a refresh creates (named by the function's own contract), and the HyperPod
cluster; inside the cluster it may only get and patch the targets' deployments and, for node-cached models,
their fillers, by name, list pods in the targets' namespaces and list nodes (:func:`rbac_objects`), and its patches
may change only the model's version and location (:mod:`~hyperwarm.refresh.admission`, an admission policy). The warm
rollout's step function has a role of its own with the state table, the queue and the same cluster access (and
starts executions of the rollout workflow: :func:`~hyperwarm.refresh.rollout.rollout_workflow`). Whatever serves a
refreshed prefix (an endpoint's execution role, the inference operator's model readers) is granted it
through the public grant functions
(:func:`~hyperwarm.endpoints.model.grant_model_data_read`, :func:`~hyperwarm.cluster.addons.grant_mounted_model_read`),
whose policies land in the grantee's stack. A plain helper adding to the hook itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb, aws_eks_v2 as eks, aws_iam as iam, aws_kms as kms, aws_s3 as s3, aws_sqs as sqs
from constructs import Construct

from hyperwarm._internal.nag import acknowledge, arn_prefix, object_arn_finding
from hyperwarm._internal.tokens import unresolved
from hyperwarm.cluster.addons import grant_mounted_model_read
from hyperwarm.cluster.interfaces import IHyperPodCluster
from hyperwarm.endpoints.base import IInferenceEndpoint
from hyperwarm.endpoints.model import grant_model_data_read
from hyperwarm.functions.cache_refresh import contract, naming
from hyperwarm.functions.node_cache import layout
from hyperwarm.refresh.admission import OPERATOR_GROUP, admission_objects

RBAC_GROUP = "hyperwarm:cache-refresh"
"""The Kubernetes group the refresh and rollout-step roles' access entries map to: what RBAC binds and the
admission policy matches (EKS generates the user names, one per role session)."""
_NAME = "hyperwarm-cache-refresh"
_LABELS = {"app.kubernetes.io/managed-by": "hyperwarm"}


class RefreshAccess:
    """The refresh role's policies and, with a cluster, its access entry and namespace-scoped RBAC; with a
    ``rollout_role`` (the warm rollout's step function), that role's: the state table, the dead-letter queue and
    the cluster, in the same Kubernetes group, and nothing else."""

    def __init__(self, scope: Construct, *, role: iam.Role, bucket: s3.IBucket, prefixes: Sequence[str],
                 state_table: dynamodb.ITable, dead_letter_queue: sqs.IQueue, cluster: IHyperPodCluster | None,
                 hyperpod: Mapping[str, Sequence[contract.HyperPodTarget]], endpoints: Sequence[IInferenceEndpoint],
                 rollout_role: iam.IRole | None = None) -> None:
        _grant_versions_read(role, bucket, prefixes)
        _grant_state_and_letters(role, state_table, dead_letter_queue)
        self.access_entry: eks.CfnAccessEntry | None = None
        self.rollout_access_entry: eks.CfnAccessEntry | None = None
        self.rbac: eks.KubernetesManifest | None = None
        self.rbac_objects: list[dict[str, Any]] = []
        if cluster is not None:
            self.access_entry = _cluster_access(scope, "AccessEntry", role, cluster)
            self._kubernetes_rbac(scope, cluster, hyperpod, bucket)
        if rollout_role is not None:
            assert cluster is not None  # a rollout needs HyperPod targets, so a cluster
            _grant_versions_read(rollout_role, bucket, prefixes)  # the gate again before the switch
            _grant_state_and_letters(rollout_role, state_table, dead_letter_queue)
            self.rollout_access_entry = _cluster_access(scope, "RolloutAccessEntry", rollout_role, cluster)
        if endpoints:
            _grant_endpoints(cdk.Stack.of(scope), role, endpoints)

    def _kubernetes_rbac(self, scope: Construct, cluster: IHyperPodCluster,
                         hyperpod: Mapping[str, Sequence[contract.HyperPodTarget]], bucket: s3.IBucket) -> None:
        """What the group may do in the cluster (:func:`rbac_objects`) and, field by field, what its patches may
        change (:func:`~hyperwarm.refresh.admission.admission_objects`), applied together."""
        name = None if unresolved(bucket.bucket_name) else bucket.bucket_name
        self.rbac_objects = [*rbac_objects([t for ts in hyperpod.values() for t in ts]),
                             *admission_objects(RBAC_GROUP, hyperpod, name, name=_NAME, labels=_LABELS)]
        self.rbac = eks.KubernetesManifest(scope, "Rbac", cluster=cluster.eks_cluster, manifest=self.rbac_objects,
                                           overwrite=True)
        if cluster.inference_operator is not None:
            self.rbac.node.add_dependency(cluster.inference_operator.addon)  # the operator's CRDs exist first


def _grant_versions_read(role: iam.IRole, bucket: s3.IBucket, prefixes: Sequence[str]) -> None:
    """The gate's reads: every version's manifest, signature and files (HEAD) under the refreshed prefixes."""
    if bucket.encryption_key is not None:  # SSE-KMS with a customer key: reading needs kms:Decrypt
        bucket.encryption_key.grant_decrypt(role)
    for prefix in prefixes:
        role.add_to_principal_policy(iam.PolicyStatement(
            actions=["s3:GetObject", "s3:GetObjectVersion"], resources=[bucket.arn_for_objects(f"{prefix}/*")]))
        acknowledge(role, "the function reads the manifest and signature and checks every file of a model version "
                    "under its configured prefix", f"IAM5[Resource::{object_arn_finding(bucket, prefix + '/*')}]")


def _grant_state_and_letters(role: iam.IRole, state_table: dynamodb.ITable, dead_letter_queue: sqs.IQueue) -> None:
    """The state table's whole-item reads and conditional puts, the dead-letter quota's counts (conditional
    updates of its items alone), and letters to the dead-letter queue."""
    role.add_to_principal_policy(iam.PolicyStatement(
        actions=["dynamodb:GetItem", "dynamodb:PutItem"],  # whole-item reads and conditional puts
        resources=[state_table.table_arn]))
    role.add_to_principal_policy(iam.PolicyStatement(
        actions=["dynamodb:UpdateItem"], resources=[state_table.table_arn],
        conditions={"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [f"{naming.LETTER_QUOTA_PK}*"]}}))
    dead_letter_queue.grant_send_messages(role)  # with kms:Encrypt and GenerateDataKey on a customer key


def _cluster_access(scope: Construct, id: str, role: iam.IRole, cluster: IHyperPodCluster) -> eks.CfnAccessEntry:
    """DescribeCluster (the API endpoint and CA an EKS token is used with) and an access entry in the group
    that :func:`rbac_objects` binds, with no access policy of its own."""
    role.add_to_principal_policy(iam.PolicyStatement(
        actions=["eks:DescribeCluster"], resources=[cluster.eks_cluster.cluster_arn]))
    return eks.CfnAccessEntry(scope, id, cluster_name=cluster.eks_cluster.cluster_name, principal_arn=role.role_arn,
                              kubernetes_groups=[RBAC_GROUP], type="STANDARD")


def _grant_endpoints(stack: cdk.Stack, role: iam.Role, endpoints: Sequence[IInferenceEndpoint]) -> None:
    """Update the endpoints, create and retire the models and configs a refresh names, pass their roles."""
    def arn(resource: str, name: str) -> str:
        return stack.format_arn(service="sagemaker", resource=resource, resource_name=name)

    names = [e.endpoint_name for e in endpoints]
    role.add_to_principal_policy(iam.PolicyStatement(
        actions=["sagemaker:DescribeEndpoint", "sagemaker:UpdateEndpoint"],
        resources=[arn("endpoint", contract.arn_name(n)) for n in names]))
    created = refreshed_resource_names(names)
    role.add_to_principal_policy(iam.PolicyStatement(
        sid="CreateAndRetireRefreshedVersions",
        actions=["sagemaker:CreateModel", "sagemaker:DeleteModel", "sagemaker:CreateEndpointConfig",
                 "sagemaker:DeleteEndpointConfig", "sagemaker:AddTags"],
        resources=[arn(kind, n) for kind, n in created]))
    # What serves: the refresh's own (the stems) or what the endpoint was deployed with (by ARN), never another's.
    # The deployed ARNs come through cross-stack references, which CloudFormation resolves only when this stack
    # updates: their fingerprints make it update whenever they are replaced (docs/operations.md).
    role.add_to_principal_policy(iam.PolicyStatement(
        sid="ReadLiveVersions" + "".join(e.deployed_fingerprint for e in endpoints),
        actions=["sagemaker:DescribeModel", "sagemaker:DescribeEndpointConfig"],
        resources=[*(arn(kind, n) for kind, n in created),
                   *dict.fromkeys(a for e in endpoints for a in e.deployed_resource_arns)]))
    acknowledge(role, "refreshed models and configs get generated names under each endpoint's name (its stem), "
                "created, described and retired by the refresh alone",
                *(f"IAM5[Resource::{arn_prefix(stack)}:sagemaker:{stack.region}:<AWS::AccountId>:{kind}/{n}]"
                  for kind, n in created))
    for endpoint in endpoints:
        assert endpoint.execution_role is not None  # the hook's validation requires it
        role.add_to_principal_policy(iam.PolicyStatement(
            actions=["iam:PassRole"], resources=[endpoint.execution_role.role_arn],
            conditions={"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}))
        if endpoint.encryption_key is not None:
            grant_volume_key(role, endpoint.encryption_key)


def grant_volume_key(role: iam.IRole, key: kms.IKey) -> None:
    """What CreateEndpointConfig with a ``KmsKeyId`` needs of the caller: DescribeKey, and CreateGrant only for
    the grant SageMaker itself creates on the instances' volumes (``kms:GrantIsForAWSResource``): no grant to an
    arbitrary grantee (https://docs.aws.amazon.com/kms/latest/developerguide/conditions-kms.html#conditions-kms-grant-is-for-aws-resource)."""
    key.grant(role, "kms:DescribeKey")
    role.add_to_principal_policy(iam.PolicyStatement(
        actions=["kms:CreateGrant"], resources=[key.key_arn],
        conditions={"Bool": {"kms:GrantIsForAWSResource": "true"}}))


def grant_serving_read(bucket: s3.IBucket, prefix: str, endpoints: Sequence[IInferenceEndpoint],
                       clusters: Sequence[IHyperPodCluster]) -> list[iam.Grant]:
    """Whatever serves a refreshed prefix reads every version of it, not only the one first deployed."""
    grants = [grant_model_data_read(e, bucket, prefix) for e in endpoints]
    for cluster in clusters:
        if cluster.inference_operator is not None:
            grants += [grant_mounted_model_read(reader, bucket, prefix)
                       for reader in cluster.inference_operator.model_readers]
    return grants


def refreshed_resource_names(endpoint_names: Sequence[str]) -> list[tuple[str, str]]:
    """(ARN resource type, IAM name pattern) of every Model and EndpointConfig a refresh of these
    endpoints creates: the function's own naming (:mod:`~hyperwarm.functions.cache_refresh.contract`),
    truncation included."""
    stems = (("model", contract.model_stem), ("endpoint-config", contract.endpoint_config_stem))
    return sorted({(kind, contract.arn_name(f"{stem(n)}-*")) for n in endpoint_names for kind, stem in stems})


def rbac_objects(targets: Sequence[contract.HyperPodTarget]) -> list[dict[str, Any]]:
    """What the refresh and rollout functions' group may do in the cluster, nothing else. Per namespace (a Role):
    get and patch the targets' deployments by name; for node-cached targets, get and patch their fillers by name
    (a warm version change lists the versions a filler keeps) and list pods (which version each reads).
    Cluster-wide (a ClusterRole, node-cached targets only): list nodes (which hold a version, which can host pods)."""
    name, labels = _NAME, _LABELS
    subjects = [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": RBAC_GROUP}]
    objects: list[dict[str, Any]] = []
    plurals = {"InferenceEndpointConfig": "inferenceendpointconfigs", "JumpStartModel": "jumpstartmodels"}
    for namespace in sorted({t.namespace for t in targets}):
        mine = [t for t in targets if t.namespace == namespace]
        rules = [{"apiGroups": [OPERATOR_GROUP], "resources": [plural], "verbs": ["get", "patch"],
                  "resourceNames": sorted({t.name for t in mine if t.resource == kind})}
                 for kind, plural in plurals.items() if any(t.resource == kind for t in mine)]
        fillers = sorted({layout.filler_name(t.node_cache.model) for t in mine if t.node_cache})
        if fillers:
            rules += [{"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["get", "patch"],
                       "resourceNames": fillers},
                      {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]
        meta = {"name": name, "namespace": namespace, "labels": labels}
        objects += [
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta, "rules": rules},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
             "subjects": subjects},
        ]
    if not any(t.node_cache for t in targets):
        return objects
    meta = {"name": name, "labels": labels}
    return objects + [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta,
         "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": meta,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
         "subjects": subjects},
    ]
