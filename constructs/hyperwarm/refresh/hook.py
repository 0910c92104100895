"""``CacheRefreshHook``: a complete new model version in S3 refreshes caches and endpoints.

The model-source bucket sends events to EventBridge. One rule matches only the object that marks
a version complete (``<prefix>/<version>/manifest.json``, written last), so a half-uploaded model
never starts a rollout, and invokes the refresh Lambda (``lambdas/cache_refresh``) with retries
and an encrypted dead-letter queue. A second rule passes SageMaker endpoint state changes to the
same code, which finishes endpoint rollouts. Whatever fails reaches that queue: events EventBridge
cannot deliver, permanent failures the function records, and (the functions' on-failure
destination) every invocation that still raises after Lambda's retries.

A node-cached HyperPod target changes version warm: the refresh function records the rollout and starts the
rollout workflow (:mod:`.rollout`, a Step Functions state machine, one execution per target and version), whose
steps have the model's filler stage the new version on every node, switch the deployment once the nodes that can
host its pods hold it, and drop the previous version.

The parts: :mod:`.functions` (functions, role, logs, failure destination),
:mod:`.access` (IAM and Kubernetes access; grants to what serves a refreshed prefix),
:mod:`.events` (rules), :mod:`.rollout` (the warm rollout's workflow), :mod:`.asset` (the code),
:mod:`.metrics` (the metrics and the alarms on them). What the construct writes and the
function reads (environment, targets, names, metrics) is the function's own
:mod:`~hyperwarm.functions.cache_refresh.contract`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

import aws_cdk as cdk
from annotated_types import Interval
from aws_cdk import (
    aws_cloudwatch as cloudwatch,
    aws_dynamodb as dynamodb,
    aws_iam as iam,
    aws_kms as kms,
    aws_lambda as lambda_,
    aws_s3 as s3,
    aws_sqs as sqs,
    aws_stepfunctions as sfn,
)
from constructs import Construct

from hyperwarm._internal.constraints import Rule, field_problems, in_seconds, is_token, seconds, wrong_type
from hyperwarm._internal.kinds import is_a
from hyperwarm._internal.nag import acknowledge, acknowledge_checkov, acknowledge_deploy_time_handlers, managed_policy
from hyperwarm._internal.tokens import unresolved
from hyperwarm._internal.validation import raise_problems, repeated
from hyperwarm.cluster.interfaces import IHyperPodCluster
from hyperwarm.endpoints.base import IInferenceEndpoint
from hyperwarm.endpoints.props import ShiftPercent, ShiftWait, TrafficShift, TrafficType
from hyperwarm.functions.cache_refresh import contract, naming
from hyperwarm.refresh.access import RefreshAccess, grant_serving_read, rbac_objects, refreshed_resource_names
from hyperwarm.refresh.concurrency import ReservedConcurrency
from hyperwarm.refresh.events import RefreshEvents, manifest_event_pattern
from hyperwarm.refresh.functions import RefreshFunctions
from hyperwarm.refresh.metrics import RefreshMetrics
from hyperwarm.refresh.publishing import PublisherSigning, grant_sign, grant_verify, publisher_key
from hyperwarm.refresh.rollout import backstop_timeout, history_problems, rollout_workflow
from hyperwarm.refresh.targets import HyperPodRefreshTarget, refresh_source_problem
from hyperwarm.refresh.version_rules import MaxStep, VersionPattern
from hyperwarm.serving.buckets import model_bucket

MaxExecution = Annotated[cdk.Duration, seconds(Interval(ge=contract.MAX_EXECUTION_SECONDS_RANGE[0],
                                                        le=contract.MAX_EXECUTION_SECONDS_RANGE[1]))]
"""``MaximumExecutionTimeoutInSeconds``: 600..28800."""
WHOLE_SECONDS = Rule(lambda duration: None if in_seconds(duration).is_integer() else
                     "allowed: whole seconds (Lambda and EventBridge count them so)")
WHOLE_MINUTES = Rule(lambda every: None if in_seconds(every) % 60 == 0 else
                     "allowed: whole minutes (an EventBridge schedule's rate)")
_LITERAL_TIMES = {"lock": "the refresh function's timeout and the lock time it is given",
                  "max_event_age": "the event age of the functions' and rules' asynchronous deliveries",
                  "reconcile_every": "an EventBridge schedule's rate"}
"""Times hyperwarm reads in seconds at synth, so a deploy-time value cannot be one: why, by field."""
_TIMEOUT_FIELDS = ("staging_timeout_seconds", "switch_timeout_seconds")
"""The contract's names of the timeouts, which the props check under their own names."""

__all__ = ["BlueGreen", "CacheRefreshHook", "CacheRefreshHookProps", "EndpointRefreshTarget", "RefreshedPrefix",
           "manifest_event_pattern", "rbac_objects", "refreshed_resource_names"]


@dataclass(frozen=True)
class BlueGreen:
    """How a refreshed endpoint shifts traffic (``DeploymentConfig.BlueGreenUpdatePolicy``)."""

    traffic: TrafficType = "ALL_AT_ONCE"
    """ALL_AT_ONCE, CANARY or LINEAR. Default: ALL_AT_ONCE."""
    step_percent: ShiftPercent = contract.BlueGreen.step_percent
    """Canary size (1..50) or linear step (10..50) in percent of the variant's instances
    (``contract.SHIFT_PERCENT``); unused with ALL_AT_ONCE. Default: 10."""
    wait: ShiftWait | None = None
    """Bake time between steps, 0..3600 s. Default: an endpoint's own for ``traffic``
    (:meth:`~hyperwarm.endpoints.props.TrafficShift.bake_time`: CANARY 10 minutes, else 5)."""
    termination_wait: ShiftWait = field(default_factory=lambda: cdk.Duration.minutes(5))
    """How long the old fleet stays after the switch, 0..3600 s. Default: 5 minutes."""
    max_execution: MaxExecution = field(default_factory=lambda: cdk.Duration.hours(1))
    """Give up (and roll back) after this, 600..28800 s. Default: 1 hour."""
    rollback_alarms: Sequence[cloudwatch.IAlarm] = ()
    """CloudWatch alarms that roll the update back (e.g. the endpoint's own ``rollback_alarms``). Default: none."""

    def to_contract(self) -> contract.BlueGreen:
        return contract.BlueGreen(
            traffic=self.traffic, step_percent=self.step_percent,
            wait_seconds=int(TrafficShift(self.traffic, wait=self.wait).bake_time().to_seconds()),
            termination_wait_seconds=int(self.termination_wait.to_seconds()),
            max_execution_seconds=int(self.max_execution.to_seconds()),
            rollback_alarms=tuple(a.alarm_name for a in self.rollback_alarms))


@dataclass(frozen=True)
class EndpointRefreshTarget:
    """A SageMaker endpoint whose variants read the refreshed prefix."""

    endpoint: IInferenceEndpoint
    """The endpoint, with a resolved ``endpoint_name`` and a known ``execution_role`` (what UpdateEndpoint passes)."""
    blue_green: BlueGreen = field(default_factory=BlueGreen)
    """Traffic shifting of the refresh's UpdateEndpoint. Default: all at once after 5 minutes."""

    def to_contract(self) -> contract.EndpointTarget:
        """The target as the function reads it."""
        return contract.EndpointTarget(endpoint=self.endpoint.endpoint_name, blue_green=self.blue_green.to_contract())


@dataclass(frozen=True)
class RefreshedPrefix:
    """One model prefix (``<prefix>/<version>/manifest.json``) and everything that serves it."""

    prefix: str
    hyperpod: Sequence[HyperPodRefreshTarget] = ()
    endpoints: Sequence[EndpointRefreshTarget] = ()
    versions: VersionPattern | None = None
    """A regular expression every new version folder name must match whole (``v\\d+``); others are dead-lettered
    (``version-not-allowed``). Default: any version the refresh can order."""
    max_step: MaxStep | None = None
    """How far a numeric version may move past the one that serves, in the first part that differs (``v7`` to ``v9``
    is 2); farther is dead-lettered (``version-jump``). Default: no bound beyond the one always kept, at most one
    digit more in that part (so an upload of ``v999999999`` cannot put every later version behind it)."""


@dataclass(frozen=True)
class CacheRefreshHookProps:
    """Properties of :class:`CacheRefreshHook`."""

    models: Sequence[RefreshedPrefix]
    """The refreshed prefixes (at least one)."""
    bucket: s3.IBucket | None = None
    """The model-source bucket. Default: a new versioned, encrypted, SSL-only bucket."""
    bucket_name: str | None = None
    """Name of the new bucket when ``bucket`` is not given. Default: generated by CloudFormation."""
    dry_run: bool = False
    """Verify and decide, log what would change, change nothing. Default: false."""
    function_name: str | None = None
    """Name of the refresh function (what ``hyperwarm refresh replay`` invokes). Default: generated."""
    retry_attempts: Annotated[int, Interval(ge=0, le=185)] = 2
    """EventBridge retries of a failed delivery before the dead-letter queue, 0..185. Default: 2."""
    function_retry_attempts: Annotated[int, Interval(ge=0, le=2)] = 2
    """Lambda's retries of an invocation that raised, before its invocation record goes to the
    dead-letter queue, 0..2. Default: 2."""
    max_event_age: Annotated[cdk.Duration, seconds(Interval(ge=60, le=6 * 3600)), WHOLE_SECONDS] = field(
        default_factory=lambda: cdk.Duration.hours(2))
    """Oldest event EventBridge still delivers and Lambda still runs (then: dead-letter queue),
    1 minute..6 hours. Default: 2 hours."""
    state_table_name: str | None = None
    """Name of the state table. Give one when something outside this stack reads the state (the
    deploy-time :class:`~hyperwarm.refresh.guard.RefreshGuard`). Default: generated by CloudFormation."""
    dead_letter_queue_name: str | None = None
    """Name of the dead-letter queue. Give one when something outside this stack writes letters (the
    deploy-time :class:`~hyperwarm.refresh.guard.RefreshGuard` during a stack rollback): the queue takes letters
    from the refresh functions' roles, its event rules and the roles under its sender path
    (``naming.dead_letter_sender_path``, where a guard given the name creates its role), from no other principal.
    Default: generated by CloudFormation (then the refresh functions and rules alone)."""
    max_dead_letters_per_hour: Annotated[int, Interval(ge=contract.LETTERS_PER_HOUR_RANGE[0],
                                                       le=contract.LETTERS_PER_HOUR_RANGE[1])] = \
        contract.DEFAULT_LETTERS_PER_HOUR
    """Most dead letters the refresh functions send per model prefix and clock hour for the refusals an upload causes
    (name, order, signature, manifest), 1..1000, so a flood of bad uploads under one prefix writes (and leaves to
    replay) a bounded number of letters; every other letter (a rollout's failure, a refused rollout record, a
    publisher key that cannot be used) is always sent. A refusal beyond it is
    recorded as any other (the target's state, ``RefreshFailed``), its letter written to the function's log instead
    of the queue, and counted in ``DeadLettersSuppressed`` (by prefix; :meth:`CacheRefreshHook.metric_dead_letters_suppressed`,
    alarmed). The count is a conditional update in the state table; when it cannot be written the letter is
    sent. Default: 20."""
    lock: Annotated[cdk.Duration, seconds(Interval(ge=1, le=900)), WHOLE_SECONDS] = field(
        default_factory=lambda: cdk.Duration.minutes(15))
    """How long one refresh holds its target (and the function timeout), whole seconds 1..900. Default: 15 minutes."""
    signing: PublisherSigning | None = None
    """Only versions a named publisher signed move the targets (``model.sig``, ``hyperwarm publish``). Default: none,
    any complete version in the bucket moves them, so whoever can write the bucket can move production: give one
    for production."""
    reconcile_every: Annotated[cdk.Duration, seconds(Interval(ge=60, le=3600)), WHOLE_MINUTES] = field(
        default_factory=lambda: cdk.Duration.minutes(5))
    """How often the reconciliation settles rollouts and waiting versions whose end was never announced
    (an event lost to an undeliverable target or a disabled rule, a lock whose holder died), whole
    minutes, 1..60. The longest a lost event delays a refresh. Default: 5 minutes."""
    reserved_concurrency: ReservedConcurrency | None = None
    """Concurrent executions each of the hook's functions reserves and may not exceed, 1..900: bounds what a flood
    of uploads (or of forged events) can run and cost, and keeps the account's other functions from starving the
    refresh. Every function reserves it, so the account needs this times four (three without a warm rollout) plus
    100 unreserved. Default: none reserved (the account's unreserved pool, unbounded but for the account limit)."""


class CacheRefreshHook(RefreshMetrics):
    """New model versions in S3 move HyperPod deployments and SageMaker endpoints to them.

    Whatever serves a refreshed prefix is granted to read every version of it (an endpoint's execution
    role, the inference operator's ``model_readers``), through the public grant functions; those
    policies land in the grantees' stacks. ``node.default_child`` is the refresh function's
    ``AWS::Lambda::Function``. With a node-cached HyperPod target (``node_cache``), the warm rollout's
    workflow is :attr:`rollout_workflow` (also ``node.find_child("RolloutWorkflow")``).
    """

    def __init__(self, scope: Construct, id: str, props: CacheRefreshHookProps) -> None:
        super().__init__(scope, id)
        raise_problems(self.node.path, "CacheRefreshHookProps", props_problems(props))
        self.bucket: s3.IBucket = props.bucket or model_bucket(self, "Models", props.bucket_name)
        self._send_bucket_events()
        self.publisher_key: kms.IKey | None = None if props.signing is None else (
            props.signing.key or publisher_key(self, "PublisherKey"))
        """The key whose signature a version needs (``props.signing``), or None: unsigned versions move."""
        self._prefixes = [m.prefix for m in props.models]
        self.state_table = self._state_table(props)
        self.dead_letter_queue = self._dead_letter_queue(props)
        self.cluster: IHyperPodCluster | None = next((t.cluster for m in props.models for t in m.hyperpod), None)
        endpoints = [t.endpoint for m in props.models for t in m.endpoints]
        warm = [t.to_contract() for m in props.models for t in m.hyperpod if t.node_cache]
        functions = RefreshFunctions(
            self, cluster=self.cluster, environment=self._environment(props), dead_letter_queue=self.dead_letter_queue,
            function_name=props.function_name, lock=props.lock, retry_attempts=props.function_retry_attempts,
            max_event_age=props.max_event_age, rollout=bool(warm), reserved_concurrency=props.reserved_concurrency)
        self.security_group = functions.security_group
        self.role = functions.role
        self.function = functions.function
        self.state_handler = functions.state_handler
        self.reconciler = functions.reconciler
        self.node.default_child = self.function.node.default_child
        self._admit_signed_versions(props.signing, functions)
        access = RefreshAccess(
            self, role=self.role, bucket=self.bucket, prefixes=[m.prefix for m in props.models],
            state_table=self.state_table, dead_letter_queue=self.dead_letter_queue, cluster=self.cluster,
            hyperpod={m.prefix: [t.to_contract() for t in m.hyperpod] for m in props.models if m.hyperpod},
            endpoints=endpoints, rollout_role=functions.rollout_role)
        self.access_entry = access.access_entry
        self.rbac = access.rbac
        self.rbac_objects = access.rbac_objects
        self.rollout_function: lambda_.Function | None = functions.rollout_step
        """The warm rollout's step function (the workflow's one task), or None without a warm rollout."""
        self.rollout_role = functions.rollout_role
        """The step function's own role (state table, dead-letter queue, cluster), or None."""
        self.rollout_access_entry = access.rollout_access_entry
        """The step function's access entry, in the refresh's Kubernetes group, or None."""
        self.rollout_workflow: sfn.StateMachine | None = self._rollout_workflow(functions.rollout_step, warm)
        """The warm rollout's Standard state machine (one execution per target and version), or None when no
        HyperPod target is node-cached. The refresh functions and the step (which rolls a version that
        waited behind a rollout) may start it (``states:StartExecution`` on it alone); it may invoke only
        :attr:`rollout_function`."""
        self._grant_serving_read(props)
        rules = RefreshEvents(
            self, bucket_name=self.bucket.bucket_name, prefixes=[m.prefix for m in props.models],
            endpoint_names=[e.endpoint_name for e in endpoints], function=self.function,
            state_handler=self.state_handler, reconciler=self.reconciler, reconcile_every=props.reconcile_every,
            dead_letter_queue=self.dead_letter_queue, retry_attempts=props.retry_attempts,
            max_event_age=props.max_event_age)
        self.manifest_rule = rules.manifest_rule
        self.endpoint_rule = rules.endpoint_rule
        self.reconcile_rule = rules.reconcile_rule
        self._admit_letter_senders(props, functions, rules)
        self._warm_targets = warm
        self.alarms = self._alarms()
        """The alarms by name, without actions (five, and three more with a warm rollout workflow):
        ``hyperwarm.observability.alarms.notify_alarms(stack, topic)`` gives them the topic on-call reads (the app's
        stacks do so for every alarm)."""

    def grant_publish(self, grantee: iam.IGrantable) -> None:
        """Let ``grantee`` publish versions: sign with the publisher key (``kms:Sign`` in the key's policy, which
        reaches a principal outside the app too) and write the refreshed prefixes where CDK can say so: an identity
        of this app gets an IAM policy, a bucket of this stack a bucket-policy statement. An imported bucket written
        by a principal outside the app keeps the writer's own policy (an info annotation names it). Without signing,
        writing is all it takes to move the targets. A new publisher key denies ``kms:Sign`` to every principal but
        those granted here (:class:`~hyperwarm.refresh.publishing.PublisherKey`), so ``grantee`` must be one IAM role
        or user (ValueError otherwise)."""
        if self.publisher_key is not None:
            grant_sign(self.publisher_key, grantee)
        grants = {prefix: self.bucket.grant_put(grantee, f"{prefix}/*") for prefix in self._prefixes}
        # An imported bucket takes the resource statement and drops it (Grant.success says True all the same).
        unwritten = [p for p, grant in grants.items()
                     if grant.principal_statement is None and not is_a(self.bucket, s3.Bucket)]
        if unwritten:
            cdk.Annotations.of(self).add_info(
                f"grant_publish: {_principal_name(grantee)} needs s3:PutObject on "
                + ", ".join(f"{prefix}/*" for prefix in unwritten)
                + " of the imported model bucket from its own policy: this app can add neither")

    def _admission(self, model: RefreshedPrefix) -> contract.Admission:
        return contract.Admission(publisher_key=self.publisher_key.key_arn if self.publisher_key else None,
                                  versions=model.versions, max_step=model.max_step)

    # -- parts -----------------------------------------------------------------------------------

    def _send_bucket_events(self) -> None:
        """The bucket's events reach EventBridge, where the manifest rule matches them (aws-cdk-lib's deploy-time
        handler turns that on)."""
        self.bucket.enable_event_bridge_notification()
        _acknowledge_notifications_handler(cdk.Stack.of(self))

    def _state_table(self, props: CacheRefreshHookProps) -> dynamodb.Table:
        table = dynamodb.Table(
            self, "State", table_name=props.state_table_name,
            partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            time_to_live_attribute="expiration",
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            removal_policy=cdk.RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE,
        )
        acknowledge_checkov(table, "holds model prefixes, version ids, target names and refresh status, no "
                            "secrets; encrypted at rest with the AWS-managed DynamoDB key", "CKV_AWS_119")
        return table

    def _dead_letter_queue(self, props: CacheRefreshHookProps) -> sqs.Queue:
        queue = sqs.Queue(self, "DeadLetters", queue_name=props.dead_letter_queue_name,
                          encryption=sqs.QueueEncryption.SQS_MANAGED, enforce_ssl=True,
                          retention_period=cdk.Duration.days(14))
        acknowledge(queue, "this queue is itself the dead-letter queue of the refresh events and of the refresh "
                    "functions' failed invocations", "SQS3")
        acknowledge_checkov(queue, "encrypted with SQS-managed keys (SqsManagedSseEnabled); a KMS key would have "
                            "to be a customer key whose policy admits EventBridge, which cannot use the "
                            "AWS-managed alias/aws/sqs key", "CKV_AWS_27")
        return queue

    def _admit_signed_versions(self, signing: PublisherSigning | None, functions: RefreshFunctions) -> None:
        """With signing, the functions verify with the publisher key and the named publishers may sign and write."""
        if signing is None or self.publisher_key is None:
            return
        for role in (self.role, functions.rollout_role):
            if role is not None:
                grant_verify(self.publisher_key, role)
        for publisher in signing.publishers:
            self.grant_publish(publisher)

    def _rollout_workflow(self, step: lambda_.Function | None,
                          warm: Sequence[contract.HyperPodTarget]) -> sfn.StateMachine | None:
        """The warm rollout's workflow (with a node-cached target), which the refresh functions may start."""
        if step is None:
            return None
        workflow = rollout_workflow(self, step, backstop_timeout(warm))
        workflow.grant_start_execution(self.role)
        for starter in (self.function, self.reconciler):
            starter.add_environment(contract.ROLLOUT_STATE_MACHINE, workflow.state_machine_arn)
        return workflow

    def _admit_letter_senders(self, props: CacheRefreshHookProps, functions: RefreshFunctions,
                              rules: RefreshEvents) -> None:
        """Letters only from who writes them: a forged letter is an event replay would invoke the refresh with.
        ``sqs:SendMessage`` is denied to every principal but the refresh functions' roles (their own letters, and
        Lambda's on-failure records, which Lambda sends with the function's execution role), EventBridge on behalf
        of the event rules (``aws:SourceArn``: what they could not deliver; the Allow is aws-cdk-lib's) and, for a
        named queue, the roles under its sender path (the deploy guards')."""
        roles = [r for r in (functions.role, functions.rollout_role) if r is not None]
        sources = [r for r in (rules.manifest_rule, rules.endpoint_rule) if r is not None]
        exempt: dict[str, Any] = {"ArnNotEquals": {"aws:PrincipalArn": [r.role_arn for r in roles],
                                                   "aws:SourceArn": [r.rule_arn for r in sources]}}
        if props.dead_letter_queue_name:
            exempt["ArnNotLike"] = {"aws:PrincipalArn": cdk.Stack.of(self).format_arn(
                service="iam", region="", resource="role",
                resource_name=naming.dead_letter_sender_path(props.dead_letter_queue_name).strip("/") + "/*")}
        self.dead_letter_queue.add_to_resource_policy(iam.PolicyStatement(
            sid="LettersFromTheRefreshAlone", effect=iam.Effect.DENY, principals=[iam.AnyPrincipal()],
            actions=["sqs:SendMessage"], resources=[self.dead_letter_queue.queue_arn], conditions=exempt))

    def _environment(self, props: CacheRefreshHookProps) -> dict[str, str]:
        """The function's environment (README.md of ``lambdas/cache_refresh``, "Environment")."""
        targets: dict[str, list[contract.Target]] = {
            m.prefix: [*(t.to_contract() for t in m.hyperpod), *(t.to_contract() for t in m.endpoints)]
            for m in props.models}
        return {
            contract.REFRESH_TARGETS: cdk.Stack.of(self).to_json_string(contract.targets_json(targets)),
            contract.STATE_TABLE: self.state_table.table_name,
            contract.ALLOWED_BUCKETS: self.bucket.bucket_name,
            contract.DLQ_URL: self.dead_letter_queue.queue_url,
            contract.DRY_RUN: "true" if props.dry_run else "false",
            contract.LOCK_SECONDS: str(int(props.lock.to_seconds())),
            contract.LETTERS_PER_HOUR: str(props.max_dead_letters_per_hour),
            contract.SERVICE_VARIABLE: contract.SERVICE,
            contract.METRICS_NAMESPACE_VARIABLE: contract.METRICS_NAMESPACE,
            contract.ADMISSION: cdk.Stack.of(self).to_json_string(contract.admissions_json({
                m.prefix: self._admission(m) for m in props.models})),
        }

    def _grant_serving_read(self, props: CacheRefreshHookProps) -> None:
        """Whatever serves a refreshed prefix reads every version of it, not only the one first deployed.
        By bucket name where the name is known, so the grantees' stacks never depend on this one."""
        name = _bucket_name(props)
        readable = s3.Bucket.from_bucket_attributes(self, "ModelsByName", bucket_name=name,
                                                    encryption_key=self.bucket.encryption_key) \
            if name and not unresolved(name) else self.bucket
        for model in props.models:
            grant_serving_read(readable, model.prefix, [t.endpoint for t in model.endpoints],
                               [t.cluster for t in model.hyperpod])


def _acknowledge_notifications_handler(stack: cdk.Stack) -> None:
    """Findings on aws-cdk-lib's singleton handler that turns on the bucket's EventBridge notifications."""
    for handler in stack.node.children:
        if handler.node.id.startswith("BucketNotificationsHandler"):
            acknowledge(handler, "aws-cdk-lib's bucket-notifications handler only writes its own logs besides "
                        "configuring the bucket's notifications at deploy time",
                        managed_policy("service-role/AWSLambdaBasicExecutionRole"))
            acknowledge_deploy_time_handlers(handler)


def _bucket_name(props: CacheRefreshHookProps) -> str | None:
    """The model bucket's name as the props give it (None: a new bucket's generated name)."""
    return props.bucket_name if props.bucket is None else props.bucket.bucket_name


def props_problems(props: CacheRefreshHookProps) -> list[str]:
    """Every problem of the props, ``field = value -- rule``; the targets' own rules are the contract's."""
    if not props.models:
        return ["models = [] -- needs at least one refreshed prefix"]
    problems = [f"models[].prefix = {p!r} -- prefixes must be unique" for p in repeated(m.prefix for m in props.models)]
    bucket_name = _bucket_name(props)
    for i, model in enumerate(props.models):
        problems += _prefix_problems(f"models[{i}]", model, bucket_name)
    clusters = {t.cluster.node.path for m in props.models for t in m.hyperpod}
    if len(clusters) > 1:
        problems.append(f"models[].hyperpod[].cluster = {sorted(clusters)} -- one hook serves one cluster")
    unreserved = [t.model.name for m in props.models for t in m.hyperpod if not t.model.refreshed]
    if unreserved:
        problems.append(f"models[].hyperpod[].model = {', '.join(unreserved)} -- a refresh puts a second version beside "
                        "the one serving: name the model in its CachedModelsProps.refreshed, so its nodes keep room "
                        "for both")
    shared = repeated(f"{t.model.namespace}/{t.model.name}" for m in props.models for t in m.hyperpod)
    problems += [f"models[].hyperpod[].name = {c!r} -- named by two prefixes; a deployment reads one prefix (a warm "
                 "version change drops the previous version once its own deployment has moved)" for c in shared]
    problems += field_problems(props)  # counts, times and the reserved concurrency: their Annotated ranges
    if wrong_type(problems):  # reported alone: the rules below would read it as its type
        return problems
    problems += [f"{name} = a deploy-time value -- needs a literal cdk.Duration: it is {why}, read at synth"
                 for name, why in _LITERAL_TIMES.items() if is_token(getattr(props, name))]
    return problems + history_problems([t.to_contract() for m in props.models for t in m.hyperpod if t.node_cache])


def _prefix_problems(where: str, model: RefreshedPrefix, bucket_name: str | None) -> list[str]:
    problem = contract.prefix_problem(model.prefix)
    problems = [f"{where}.prefix = {model.prefix!r} -- {problem}"] if problem else []
    problems += [f"{where}.{p}" for p in field_problems(model)]
    if not model.hyperpod and not model.endpoints:
        problems.append(f"{where} = {model.prefix!r} -- names no hyperpod or endpoint targets")
    for j, hyperpod in enumerate(model.hyperpod):
        own = field_problems(hyperpod)
        if source_problem := refresh_source_problem(hyperpod.model.source, bucket_name, model.prefix):
            own.append(f"model = {hyperpod.model.name} -- {source_problem}")
        problems += [f"{where}.hyperpod[{j}].{p}" for p in own]
        if wrong_type(own):
            continue
        problems += [f"{where}.hyperpod[{j}].{p}" for p in
                     contract.target_problems(hyperpod.to_contract(), unresolved)
                     if p.field not in _TIMEOUT_FIELDS]
    for j, target in enumerate(model.endpoints):
        endpoint, at = target.endpoint, f"{where}.endpoints[{j}]"
        if unresolved(endpoint.endpoint_name):
            problems.append(f"{at}.endpoint = {endpoint.node.path} -- needs an explicit endpoint_name so the "
                            "refresh function's IAM and event rule can name it")
            continue
        if endpoint.execution_role is None:
            problems.append(f"{at}.endpoint = {endpoint.node.path} -- its execution_role is unknown; import it "
                            "with execution_role (the refresh passes it to the models it creates)")
        problems += [f"{at}.{p}" for p in contract.target_problems(target.to_contract(), unresolved)]
    return problems


def _principal_name(grantee: iam.IGrantable) -> str:
    principal = grantee.grant_principal
    return principal.arn if is_a(principal, iam.ArnPrincipal) else str(principal)
