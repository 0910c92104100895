"""``RefreshGuard``: a deploy never moves a refreshed target back to the version in the code.

The cache refresh function moves endpoints and HyperPod deployments to new model versions at run
time; the app's configuration still names the version they were first deployed with. Resources
protected by a guard depend on it, so CloudFormation runs it first: a small function
(``hyperwarm.functions.cache_refresh.deploy_guard``) reads the refresh function's state table and fails the deployment,
before anything changed, when a target already serves a newer version than this deploy would set.

The guard runs whenever a protected resource changes: its properties carry a fingerprint of theirs
(escape-hatch overrides, ``add_property_override``, are not part of it).
It names the state table by name (never a cross-stack reference): the stacks it protects deploy
before the refresh stack, and a table that does not exist yet means nothing was ever refreshed.

A stack rollback is never blocked (CloudFormation would leave the stack in UPDATE_ROLLBACK_FAILED),
but it may move a refreshed target back: the guard then counts ``RefreshFailed`` (Reason
``moved-back``, the refresh alarm's metric) and, given the refresh dead-letter queue's name, sends a
letter that ``hyperwarm refresh replay`` turns into a roll forward.

A deliberate rollback is a pinned target (:attr:`GuardedTarget.pinned_location`): the guard lets its
older version through and records it as what serves, so nothing reports it moved back.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import aws_cdk as cdk
import jsii
from aws_cdk import aws_dynamodb as dynamodb, aws_iam as iam, aws_lambda as lambda_, aws_logs as logs
from constructs import Construct, IConstruct

from hyperwarm._internal.fingerprint import properties_digest
from hyperwarm._internal.kinds import is_a
from hyperwarm._internal.nag import acknowledge, acknowledge_checkov, acknowledge_deploy_time_handlers, managed_policy
from hyperwarm._internal.tokens import unresolved
from hyperwarm.functions.cache_refresh import contract, formats, naming
from hyperwarm.refresh.asset import FUNCTION


@dataclass(frozen=True)
class GuardedTarget:
    """One refresh target and the model version this deploy sets on it."""

    target_id: str
    """The refresh function's id of the target (``contract.endpoint_target_id`` / ``contract.hyperpod_target_id`` of
    :mod:`hyperwarm.functions.cache_refresh.contract`)."""
    version: str
    """The version this deploy sets."""
    field: str
    """Where the configuration sets it, for the message (e.g. ``environments.prod.caches.models[0].source.version``)."""
    value: str = "{version}"
    """The field's value with ``{version}`` where the version goes. Default: the bare version."""
    pinned_location: str | None = None
    """Set to pin: the deploy sets ``version`` even where the target serves a newer one (a deliberate
    rollback), and the guard records it as the target's current version, at this key prefix
    (``<prefix>/<version>`` in the model bucket; a recorded target's source URI). Default: not pinned."""
    recorded: bool = False
    """Only a deploy moves this target (a Hugging Face revision, an FSx version folder, a JumpStart model version):
    the guard records each version it lets through in a table of its own (:attr:`RefreshGuard.deployed_versions`)
    and holds the next deploy to it. Two versions in the refresh order compare in it; others (commit SHAs) in the
    order deploys set them: one that served before the current one is older. A rollback of the stack puts the
    record back. With no record yet, the refresh function's state (``state_table_name``, when given) says where the
    target is: a model a refresh prefix named until now starts from the version the refresh made serve. Default: false
    (a refresh function's state table records the target)."""


@dataclass(frozen=True)
class RefreshGuardProps:
    """Properties of :class:`RefreshGuard`."""

    targets: Sequence[GuardedTarget]
    """The targets whose version a protected resource sets (at least one)."""
    state_table_name: str | None = None
    """Name of the cache refresh function's state table (``CacheRefreshHookProps.state_table_name``; it need not exist
    yet); a recorded target with no record starts from what it says. Default: none, allowed only when every target is
    :attr:`GuardedTarget.recorded`."""
    dead_letter_queue_name: str | None = None
    """Name of the refresh dead-letter queue (``CacheRefreshHookProps.dead_letter_queue_name``), where a
    rollback's moved-back targets are dead-lettered; the guard's role is then created under that queue's sender
    path (``naming.dead_letter_sender_path``), the one path besides the refresh roles the queue takes letters
    from. Default: none (only the metric and the log)."""
    model_bucket_name: str | None = None
    """The refreshed model bucket, for state items that do not name it (written before they did).
    Default: none."""


@jsii.implements(cdk.IResolvable)
class _Fingerprint:
    """A hash of the protected resources' resolved properties: it changes whenever they do."""

    def __init__(self, resources: list[cdk.CfnResource]) -> None:
        self._resources = resources

    @property
    def creation_stack(self) -> list[str]:
        return []

    def resolve(self, context: cdk.IResolveContext) -> str:
        return properties_digest(self._resources, context.resolve)

    def to_string(self) -> str:
        return cdk.Token.as_string(self)


class RefreshGuard(Construct):
    """Fails a deployment before a protected resource moves a refreshed target back to an older version.

    Call :meth:`protect` with the constructs that set the targets' versions (an endpoint, a
    Kubernetes manifest). ``node.default_child`` is the custom resource.
    """

    def __init__(self, scope: Construct, id: str, props: RefreshGuardProps) -> None:
        super().__init__(scope, id)
        _validate(self.node.path, props)
        stack = cdk.Stack.of(self)
        queue = props.dead_letter_queue_name
        role = self._role(queue)
        if props.state_table_name is not None:
            role.add_to_principal_policy(iam.PolicyStatement(  # PutItem: a pin's record (and its undoing on rollback)
                actions=["dynamodb:GetItem", "dynamodb:PutItem"],
                resources=[stack.format_arn(service="dynamodb", resource="table",
                                            resource_name=props.state_table_name)]))
        self.deployed_versions = self._deployed_versions(role) if any(t.recorded for t in props.targets) else None
        """The table recording what deploys set on :attr:`GuardedTarget.recorded` targets (None: none are)."""
        # A rollback sends the previous properties: the function lets it through (DescribeStacks on its own stack).
        role.add_to_principal_policy(iam.PolicyStatement(actions=["cloudformation:DescribeStacks"],
                                                         resources=[stack.stack_id]))
        rollback_letters: dict[str, str] = {}
        if queue:  # a rollback's moved-back letters; the metric needs no permission (EMF)
            role.add_to_principal_policy(iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[
                stack.format_arn(service="sqs", resource=queue, arn_format=cdk.ArnFormat.NO_RESOURCE_NAME)]))
            rollback_letters["DeadLetterQueue"] = f"https://sqs.{stack.region}.{stack.url_suffix}/{stack.account}/{queue}"
        if props.model_bucket_name:
            rollback_letters["Bucket"] = props.model_bucket_name
        self.function = lambda_.Function(
            self, "Function", runtime=lambda_.Runtime.PYTHON_3_13, architecture=lambda_.Architecture.ARM_64,
            handler=contract.DEPLOY_GUARD_HANDLER, code=FUNCTION.code(), role=role, memory_size=256,
            timeout=cdk.Duration.minutes(5),  # room to back off throttled reads and still answer
            log_group=logs.LogGroup(self, "Logs", retention=logs.RetentionDays.THREE_MONTHS),
            # CloudFormation invokes it asynchronously: a retry by Lambda could run after the stack moved on (rule
            # lambda.custom-resource-no-retries); CloudFormation's own timeout and rollback are the retry.
            retry_attempts=0,
            description="hyperwarm: stop a deploy that would move a refreshed model back to an older version")
        acknowledge(self.function, "Python 3.13 is the runtime this function and its bundled dependencies are "
                    "tested on; moving to a newer one is a deliberate, tested upgrade", "L1")
        acknowledge_deploy_time_handlers(self.function)
        acknowledge_checkov(self.function.log_group, "guard logs hold target ids and versions, no secrets; "
                            "CloudWatch Logs encrypts every log group at rest", "CKV_AWS_158")
        self._protected: list[cdk.CfnResource] = []
        self.resource = cdk.CustomResource(
            self, "Resource", service_token=self.function.function_arn, resource_type="Custom::RefreshGuard",
            # CloudFormation waits up to an hour for an answer by default; the function answers within its
            # 5 minutes or never: stop waiting soon after.
            service_timeout=cdk.Duration.minutes(6),
            properties={
                "Format": formats.GUARD,
                **({"Table": props.state_table_name} if props.state_table_name is not None else {}),
                **({"DeployedTable": self.deployed_versions.table_name} if self.deployed_versions else {}),
                "Targets": [{"Id": t.target_id, "Version": t.version, "Field": t.field, "Value": t.value,
                             **({"Pinned": True, "Location": t.pinned_location} if t.pinned_location else {}),
                             **({"Recorded": True} if t.recorded else {})}
                            for t in props.targets],
                "Fingerprint": _Fingerprint(self._protected),
                **rollback_letters,
            })
        self.node.default_child = self.resource.node.default_child

    def _role(self, queue: str | None) -> iam.Role:
        # Under the queue's sender path: the queue's policy admits the roles there (and no one else in the account).
        role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                        description="cache refresh deploy guard: reads the refresh state",
                        path=naming.dead_letter_sender_path(queue) if queue else None)
        role.add_managed_policy(iam.ManagedPolicy.from_aws_managed_policy_name("service-role/AWSLambdaBasicExecutionRole"))
        acknowledge(role, "the AWS-managed Lambda execution policy only writes the function's logs",
                    managed_policy("service-role/AWSLambdaBasicExecutionRole"))
        return role

    def _deployed_versions(self, role: iam.IRole) -> dynamodb.Table:
        """Deleted with the stack: the order of what a stack deploys matters only while it serves."""
        table = dynamodb.Table(
            self, "DeployedVersions", partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST, encryption=dynamodb.TableEncryption.AWS_MANAGED,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True),
            removal_policy=cdk.RemovalPolicy.DESTROY)
        table.grant(role, "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem")
        acknowledge_checkov(table, "holds target ids and model versions a deploy set, no secrets; encrypted at rest "
                            "with the AWS-managed DynamoDB key", "CKV_AWS_119")
        return table

    def protect(self, *scopes: IConstruct) -> None:
        """Every CloudFormation resource under ``scopes`` deploys after the guard passed; the guard
        runs again whenever one of them changes."""
        guard = self.resource.node.default_child
        for scope in scopes:
            for child in scope.node.find_all():
                if is_a(child, cdk.CfnResource) and child not in self._protected:
                    child.add_resource_dependency(guard, "deploys only after the refresh guard passed")  # type: ignore[arg-type]
                    self._protected.append(child)



_TABLE_NAME = re.compile(r"^[a-zA-Z0-9_.-]{3,255}$")
_QUEUE_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,80}$")


def _validate(path: str, props: RefreshGuardProps) -> None:
    if not props.targets:
        raise ValueError(f"{path}: targets = [] -- a guard needs at least one guarded target")
    name = props.state_table_name
    refreshed = [t.target_id for t in props.targets if not t.recorded]
    if name is None and refreshed:
        raise ValueError(f"{path}: state_table_name = None -- targets {', '.join(refreshed)} are not recorded by the "
                         "guard: name the refresh function's state table, or mark them recorded=True (only a deploy "
                         "moves them)")
    if name is not None and not unresolved(name) and not _TABLE_NAME.match(name):
        raise ValueError(f"{path}: state_table_name = {name!r} -- allowed: 3..255 letters, digits, '_', '-', '.'")
    queue = props.dead_letter_queue_name
    if queue is not None and not unresolved(queue) and not _QUEUE_NAME.match(queue):
        raise ValueError(f"{path}: dead_letter_queue_name = {queue!r} -- allowed: 1..80 letters, digits, '_', '-'")
    for t in props.targets:
        if "{version}" not in t.value:
            raise ValueError(f"{path}: targets[{t.target_id!r}].value = {t.value!r} -- must contain {{version}}")
