"""CacheRefreshHook and the refresh stacks: event patterns, dead letters, alarms, least privilege, config rules."""

from __future__ import annotations

import json
import re

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from stand_ins import cached_model, imported_cluster

from hyperwarm import (
    CacheRefreshHook,
    CacheRefreshHookProps,
    EndpointRefreshTarget,
    HuggingFaceModelSource,
    InferenceEndpoint,
    InstanceGroupSpec,
    ModelSource,
    RefreshedPrefix,
)
from hyperwarm.functions.cache_refresh.contract import HyperPodTarget, NodeCache
from hyperwarm.refresh.hook import BlueGreen, HyperPodRefreshTarget, rbac_objects
from stacks.config import ConfigError, parse_environment

PROD = "hyperwarm-prod-refresh"


def resources(synthesized, kind: str, stack: str = PROD) -> list[dict]:
    return [r["Properties"] for r in synthesized.resources(stack, kind).values()]


def statements(synthesized, stack: str = PROD) -> list[dict]:
    return [s for p in resources(synthesized, "AWS::IAM::Policy", stack) for s in p["PolicyDocument"]["Statement"]]


def test_rule_matches_only_manifests_of_configured_prefixes(synthesized) -> None:
    patterns = [r["EventPattern"] for r in resources(synthesized, "AWS::Events::Rule") if "EventPattern" in r]
    manifest = next(p for p in patterns if p["source"] == ["aws.s3"])
    assert manifest == {"source": ["aws.s3"], "detail-type": ["Object Created"], "detail": {
        "bucket": {"name": ["hyperwarm-models-prod"]},
        "object": {"key": [{"wildcard": "llama-3.1-70b-instruct/*/manifest.json"},
                           {"wildcard": "llama-3.1-8b-instruct/*/manifest.json"}]}}}


def test_endpoint_state_rule_names_only_refreshed_endpoints(synthesized) -> None:
    patterns = [r["EventPattern"] for r in resources(synthesized, "AWS::Events::Rule") if "EventPattern" in r]
    state = next(p for p in patterns if p["source"] == ["aws.sagemaker"])
    assert state["detail"] == {"EndpointName": ["hyperwarm-prod-chat"]}


def test_rule_targets_retry_then_dead_letter_to_an_encrypted_queue(synthesized) -> None:
    (queue_id,) = synthesized.resources(PROD, "AWS::SQS::Queue")
    queue = synthesized.resources(PROD, "AWS::SQS::Queue")[queue_id]["Properties"]
    assert queue["SqsManagedSseEnabled"] is True
    for rule in (r for r in resources(synthesized, "AWS::Events::Rule") if "EventPattern" in r):
        (target,) = rule["Targets"]
        assert target["RetryPolicy"]["MaximumRetryAttempts"] == 2
        assert target["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": [queue_id, "Arn"]}}
    ssl_only = [s for p in resources(synthesized, "AWS::SQS::QueuePolicy") for s in p["PolicyDocument"]["Statement"]
                if s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}]
    assert ssl_only and ssl_only[0]["Effect"] == "Deny"


def test_alarms_watch_dead_letters_errors_and_failed_refreshes(synthesized) -> None:
    alarms = resources(synthesized, "AWS::CloudWatch::Alarm")
    assert {a.get("MetricName") for a in alarms} >= {"ApproximateNumberOfMessagesVisible", "RefreshFailed",
                                                     "DeadLettersSuppressed"}
    assert any("Metrics" in a for a in alarms)  # errors of both functions, as one expression


def test_a_suppressed_letter_raises_an_alarm_that_reaches_the_alarm_topic(synthesized) -> None:
    """The hourly quota per prefix: every function has it (the default, 20), and a letter over it is alarmed on
    the metric the function counts it in (service dimension only), through the environment's alarm topic."""
    (alarm,) = [a for a in resources(synthesized, "AWS::CloudWatch::Alarm")
                if a.get("MetricName") == "DeadLettersSuppressed"]
    assert (alarm["Namespace"], alarm["Dimensions"], alarm["Statistic"], alarm["Threshold"]) == (
        "Hyperwarm", [{"Name": "service", "Value": "hyperwarm-cache-refresh"}], "Sum", 1)
    assert alarm["AlarmActions"] and "max_dead_letters_per_hour" in alarm["AlarmDescription"]
    for function in resources(synthesized, "AWS::Lambda::Function"):
        variables = function.get("Environment", {}).get("Variables", {})
        if "HYPERWARM_DLQ_URL" in variables:
            assert variables["HYPERWARM_LETTERS_PER_PREFIX_HOUR"] == "20"


@pytest.mark.parametrize("value, allowed", [(0, "allowed: 1..1000"), (1001, "allowed: 1..1000"),
                                            (2.5, "wrong type; give an int"), (True, "wrong type; give an int")])
def test_the_dead_letter_quota_is_validated(value: object, allowed: str) -> None:
    """Out of range, or not a whole number the function would take (it refuses "2.5" at every event)."""
    with pytest.raises(ValueError, match=rf"max_dead_letters_per_hour = {value!r} -- {re.escape(allowed)}"):
        _hook(lambda c: [RefreshedPrefix(prefix="m", hyperpod=[HyperPodRefreshTarget(cached_model(c, "m", "ns"))])],
              max_dead_letters_per_hour=value)


def test_the_dead_letter_quota_reaches_every_function_that_sends_letters() -> None:
    hook = _hook(lambda c: [RefreshedPrefix(prefix="m", hyperpod=[HyperPodRefreshTarget(cached_model(c, "m", "ns"))])],
                 max_dead_letters_per_hour=7)
    template = cdk.assertions.Template.from_stack(cdk.Stack.of(hook)).to_json()
    senders = [r["Properties"]["Environment"]["Variables"] for r in template["Resources"].values()
               if r["Type"] == "AWS::Lambda::Function"
               and "HYPERWARM_DLQ_URL" in r["Properties"].get("Environment", {}).get("Variables", {})]
    assert len(senders) >= 2  # the refresh and the state handler, at least
    assert {v["HYPERWARM_LETTERS_PER_PREFIX_HOUR"] for v in senders} == {"7"}
    assert hook.alarms["dead_letters_suppressed"].metric.metric_name == "DeadLettersSuppressed"


def test_alarms_over_several_functions_count_a_silent_function_as_zero(synthesized) -> None:
    # CloudWatch metric math leaves a + b missing where one series has no point: the state-change function
    # is idle most of the time, so a failing refresh function alone would never raise the alarm.
    expressions = [m["Expression"] for a in resources(synthesized, "AWS::CloudWatch::Alarm")
                   for m in a.get("Metrics", []) if "Expression" in m]
    # the functions' destination failures (2) and errors (3); the warm rollouts' cold pods (prod's 2 node-cached
    # models) and their executions' bad ends (failed, timed out, aborted)
    assert sorted(expressions) == ["FILL(a, 0) + FILL(b, 0)", "FILL(a, 0) + FILL(b, 0)",
                                   "FILL(a, 0) + FILL(b, 0) + FILL(c, 0)", "FILL(a, 0) + FILL(b, 0) + FILL(c, 0)"]


def test_both_event_functions_send_invocations_that_still_fail_to_the_dead_letter_queue(synthesized) -> None:
    """Errors the functions raise are retried by Lambda, then land in the queue the alarm watches (the
    reconciliation's next run retries it; the rollout step is invoked synchronously by its workflow, whose
    catch abandons the rollout)."""
    (queue_id,) = synthesized.resources(PROD, "AWS::SQS::Queue")
    functions = {k for k, f in synthesized.resources(PROD, "AWS::Lambda::Function").items()
                 if str(f["Properties"].get("Handler", "")).startswith("hyperwarm.functions.cache_refresh.")
                 and not f["Properties"]["Handler"].endswith((".on_schedule", ".on_rollout_step"))}
    configs = [c for c in resources(synthesized, "AWS::Lambda::EventInvokeConfig") if "DestinationConfig" in c]
    assert {c["FunctionName"]["Ref"] for c in configs} == functions and len(functions) == 2
    for config in configs:
        assert config["DestinationConfig"] == {"OnFailure": {"Destination": {"Fn::GetAtt": [queue_id, "Arn"]}}}
        assert (config["Qualifier"], config["MaximumRetryAttempts"], config["MaximumEventAgeInSeconds"]) == (
            "$LATEST", 2, 7200)
    sends = [s for s in statements(synthesized) if "sqs:SendMessage" in s["Action"]]
    assert len(sends) == 2 and all(s["Resource"] == {"Fn::GetAtt": [queue_id, "Arn"]} for s in sends)  # both roles
    dead_letters = next(a for a in resources(synthesized, "AWS::CloudWatch::Alarm")
                        if a.get("MetricName") == "ApproximateNumberOfMessagesVisible")
    assert dead_letters["Dimensions"][0]["Value"] == {"Fn::GetAtt": [queue_id, "QueueName"]}


def test_a_failure_that_cannot_reach_the_queue_raises_an_alarm(synthesized) -> None:
    undelivered = [a for a in resources(synthesized, "AWS::CloudWatch::Alarm")
                   if "DestinationDeliveryFailures" in json.dumps(a.get("Metrics", []))]
    (alarm,) = undelivered
    assert {m["MetricStat"]["Metric"]["Dimensions"][0]["Value"]["Ref"] for m in alarm["Metrics"] if "MetricStat" in m} \
        == {k for k, f in synthesized.resources(PROD, "AWS::Lambda::Function").items()
            if str(f["Properties"].get("Handler", "")).startswith("hyperwarm.functions.cache_refresh.handler")
            and not f["Properties"]["Handler"].endswith((".on_schedule", ".on_rollout_step"))}  # not asynchronous


def test_the_reconciliation_runs_every_five_minutes_without_retries_and_counts_in_the_errors_alarm(synthesized) -> None:
    """Lost state changes are settled within one period; a run that fails is retried by the next one."""
    functions = synthesized.resources(PROD, "AWS::Lambda::Function")
    (reconciler,) = [k for k, f in functions.items() if f["Properties"].get("Handler", "").endswith(".on_schedule")]
    (rule,) = [r for r in resources(synthesized, "AWS::Events::Rule") if "ScheduleExpression" in r
               and r["Targets"][0]["Arn"] == {"Fn::GetAtt": [reconciler, "Arn"]}]
    assert rule["ScheduleExpression"] == "rate(5 minutes)" and rule["Targets"][0]["RetryPolicy"]["MaximumRetryAttempts"] == 0
    (invoke,) = [c for c in resources(synthesized, "AWS::Lambda::EventInvokeConfig")
                 if c["FunctionName"] == {"Ref": reconciler}]
    assert invoke["MaximumRetryAttempts"] == 0 and "DestinationConfig" not in invoke
    errors = [a for a in resources(synthesized, "AWS::CloudWatch::Alarm") if reconciler in json.dumps(a)]
    assert len(errors) == 1 and "FILL(c, 0)" in json.dumps(errors[0])


def test_reconcile_every_is_whole_minutes_up_to_an_hour() -> None:
    from hyperwarm.refresh.hook import CacheRefreshHookProps, RefreshedPrefix, props_problems

    def problems(every: cdk.Duration) -> list[str]:
        return [p for p in props_problems(CacheRefreshHookProps(models=[RefreshedPrefix("m", endpoints=())],
                                                                reconcile_every=every)) if "reconcile" in p]
    assert problems(cdk.Duration.minutes(5)) == [] and problems(cdk.Duration.hours(1)) == []
    assert problems(cdk.Duration.seconds(90)) == ["reconcile_every = 90 seconds -- allowed: whole minutes (an "
                                                  "EventBridge schedule's rate)"]
    assert problems(cdk.Duration.hours(2)) == ["reconcile_every = 7200 seconds -- allowed: 60..3600 seconds"]


def test_function_name_and_replay_inputs_are_stack_outputs(synthesized) -> None:
    outputs = synthesized.template(PROD)["Outputs"]
    function = next(f for f in resources(synthesized, "AWS::Lambda::Function")
                    if f.get("Handler") == "hyperwarm.functions.cache_refresh.handler.lambda_handler")
    assert function["FunctionName"] == "hyperwarm-prod-cache-refresh"
    assert {"RefreshFunctionName", "DeadLetterQueueUrl"} <= set(outputs)


def test_prod_changes_its_node_cached_models_warm_with_a_staging_timeout_from_their_size(synthesized) -> None:
    """prod's 70B model (145 GB, node-cached): twice the planner's 1,160 s fill at 1 Gbit/s."""
    (machine_id,) = synthesized.resources(PROD, "AWS::StepFunctions::StateMachine")
    outputs = synthesized.template(PROD)["Outputs"]
    assert outputs["RolloutStateMachineArn"]["Value"] == {"Ref": machine_id}
    function = next(f for f in resources(synthesized, "AWS::Lambda::Function")
                    if f.get("Handler") == "hyperwarm.functions.cache_refresh.handler.lambda_handler")
    joined = function["Environment"]["Variables"]["HYPERWARM_REFRESH_TARGETS"]["Fn::Join"][1]  # the cluster's name
    targets = json.loads("".join(p if isinstance(p, str) else "cluster" for p in joined))
    (big,) = [t for t in targets["llama-3.1-70b-instruct"] if t["kind"] == "hyperpod"]
    assert (big["node_cache"], big["staging_timeout_seconds"], big["switch_timeout_seconds"]) == (
        {"model": "llama-3-1-70b", "host_path": "/opt/dlami/nvme"}, 2320, 1800)
    assert function["Environment"]["Variables"]["HYPERWARM_ROLLOUT_STATE_MACHINE"] == {"Ref": machine_id}


def test_functions_run_in_the_cluster_vpc_on_python_3_13(synthesized) -> None:
    functions = [f for f in resources(synthesized, "AWS::Lambda::Function")
                 if str(f.get("Handler", "")).startswith("hyperwarm.functions.cache_refresh.")]
    assert {f["Handler"] for f in functions} == {"hyperwarm.functions.cache_refresh.handler.lambda_handler",
                                                 "hyperwarm.functions.cache_refresh.handler.on_endpoint_state_change",
                                                 "hyperwarm.functions.cache_refresh.handler.on_schedule",
                                                 "hyperwarm.functions.cache_refresh.handler.on_rollout_step"}
    for function in functions:
        assert function["Runtime"] == "python3.13" and function["VpcConfig"]["SubnetIds"]


def test_no_wildcard_actions_and_resources_scoped_to_bucket_prefixes_endpoints_and_cluster(synthesized) -> None:
    own = statements(synthesized)
    for statement in own:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        assert all("*" not in a for a in actions), statement
    text = json.dumps(own)
    for prefix in ("llama-3.1-70b-instruct", "llama-3.1-8b-instruct"):
        assert f"s3:::hyperwarm-models-prod/{prefix}/*" in text
    reads = [s for s in own if "s3:GetObject" in s["Action"]]
    assert all("hyperwarm-models-prod/llama-3.1-" in json.dumps(s["Resource"]) for s in reads)
    updates = [s for s in own if "sagemaker:UpdateEndpoint" in s["Action"]]
    assert json.dumps(updates[0]["Resource"]).count("endpoint/hyperwarm-prod-chat") == 1
    describe = [s for s in own if s["Action"] == "eks:DescribeCluster"]
    assert describe and "Fn::ImportValue" in json.dumps(describe[0]["Resource"])
    pass_role = [s for s in own if s["Action"] == "iam:PassRole"]
    assert pass_role and all(s["Condition"] == {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}
                             for s in pass_role)


def test_state_table_access_is_what_the_function_calls(synthesized) -> None:
    """The functions read whole items and write them with conditional puts (lambdas/cache_refresh/state.py), and
    count dead letters with conditional updates of the quota's items alone (quota.py): the refresh role and the
    rollout step's."""
    (table_id,) = synthesized.resources(PROD, "AWS::DynamoDB::Table")
    found = [s for s in statements(synthesized) if str(s["Action"]).startswith("['dynamodb:")
             or str(s["Action"]).startswith("dynamodb:")]
    assert len(found) == 4
    for statement in found:
        assert statement["Resource"] == {"Fn::GetAtt": [table_id, "Arn"]}
    assert sorted(str(s["Action"]) for s in found) == ["['dynamodb:GetItem', 'dynamodb:PutItem']"] * 2 + [
        "dynamodb:UpdateItem"] * 2
    for statement in found:  # the dead-letter quota's counts, and no target's item
        if statement["Action"] == "dynamodb:UpdateItem":
            assert statement["Condition"] == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["letters#*"]}}


def test_kubernetes_access_is_what_the_refresh_and_its_warm_rollout_call(synthesized) -> None:
    """By name: the targets' deployments (get, patch) and node-cached models' fillers (get, patch); pods listed (which
    version each reads) in the targets' namespaces; nodes listed, cluster-wide (which hold a version, which can host
    pods). Nothing created, nothing deleted."""
    entries = resources(synthesized, "AWS::EKS::AccessEntry")
    assert len(entries) == 2  # the refresh role's and the rollout step's
    for entry in entries:
        assert entry["KubernetesGroups"] == ["hyperwarm:cache-refresh"] and "AccessPolicies" not in entry
    targets = [HyperPodTarget("c", "hyperwarm-models", "llama", node_cache=NodeCache("llama")),
               HyperPodTarget("c", "hyperwarm-models", "qwen", resource="JumpStartModel")]
    role, binding, cluster_role, cluster_binding = rbac_objects(targets)
    assert role["metadata"]["namespace"] == "hyperwarm-models"
    assert role["rules"] == [
        {"apiGroups": ["inference.sagemaker.aws.amazon.com"], "resources": ["inferenceendpointconfigs"],
         "verbs": ["get", "patch"], "resourceNames": ["llama"]},
        {"apiGroups": ["inference.sagemaker.aws.amazon.com"], "resources": ["jumpstartmodels"],
         "verbs": ["get", "patch"], "resourceNames": ["qwen"]},
        {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["get", "patch"],
         "resourceNames": ["hyperwarm-fill-llama"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]
    assert (cluster_role["kind"], cluster_role["rules"]) == (
        "ClusterRole", [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}])
    assert cluster_binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                          "name": cluster_role["metadata"]["name"]}
    for bound in (binding, cluster_binding):
        assert bound["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                                      "name": "hyperwarm:cache-refresh"}]
    assert not [r for obj in rbac_objects(targets) for r in obj.get("rules", [])
                if {"create", "delete", "update", "*"} & set(r["verbs"])]


def test_the_refresh_s_patches_are_held_to_its_admission_policy_in_the_same_manifest(synthesized) -> None:
    """Applied with the RBAC (one manifest), bound with Deny, matched on the access entries' group, naming the prod
    refresh's deployments and fillers; what it admits is tests/refresh/test_refresh_admission.py's."""
    from rehearsal import Assembly

    objects = [o for stack, _, o in Assembly.from_outdir(synthesized.outdir).kubernetes_objects() if stack == PROD]
    (policy,) = [o for o in objects if o["kind"] == "ValidatingAdmissionPolicy"]
    (binding,) = [o for o in objects if o["kind"] == "ValidatingAdmissionPolicyBinding"]
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}
    assert policy["spec"]["matchConditions"] == [{"name": "cache-refresh", "expression":
                                                  'has(request.userInfo.groups) && "hyperwarm:cache-refresh" in '
                                                  "request.userInfo.groups"}]
    owned = json.dumps(policy["spec"]["validations"][1])
    for key in ("InferenceEndpointConfig/hyperwarm-models/llama-3-1-70b", "DaemonSet/hyperwarm-models/hyperwarm-fill-"
                "llama-3-1-70b", "InferenceEndpointConfig/hyperwarm-models/llama-3-1-8b"):
        assert key in owned
    assert "hyperwarm-models-prod" in json.dumps(policy["spec"]["validations"])  # the bucket is pinned


def test_without_a_node_cached_target_the_refresh_reads_no_node_and_no_pod() -> None:
    objects = rbac_objects([HyperPodTarget("c", "ns", "llama")])
    assert [o["kind"] for o in objects] == ["Role", "RoleBinding"]
    assert [r["resources"] for r in objects[0]["rules"]] == [["inferenceendpointconfigs"]]


def test_rbac_objects_validate_against_kubernetes_schemas() -> None:
    import kubernetes_validate

    for obj in rbac_objects([HyperPodTarget("c", ns, "llama", node_cache=NodeCache("llama")) for ns in ("a", "b")]):
        kubernetes_validate.validate(obj, desired_version="1.33", strict=True)


def test_served_models_may_read_every_version_of_a_refreshed_prefix(synthesized) -> None:
    cluster_reads = json.dumps([s for s in statements(synthesized, "hyperwarm-prod-cluster")
                                if s["Action"] == "s3:GetObject"])
    assert "hyperwarm-models-prod/llama-3.1-70b-instruct/*" in cluster_reads
    endpoint_reads = json.dumps([s for s in statements(synthesized, "hyperwarm-prod-endpoints")
                                 if s["Action"] == "s3:GetObject"])
    assert "hyperwarm-models-prod/llama-3.1-70b-instruct/*" in endpoint_reads


def test_staging_creates_an_encrypted_versioned_bucket_with_eventbridge_and_runs_dry(synthesized) -> None:
    stack = "hyperwarm-staging-refresh"
    # The buckets stack creates it, before every stack that reads it.
    (bucket,) = resources(synthesized, "AWS::S3::Bucket", "hyperwarm-staging-buckets")
    assert bucket["BucketName"] == "hyperwarm-models-staging"
    assert bucket["VersioningConfiguration"] == {"Status": "Enabled"} and "BucketEncryption" in bucket
    notifications = resources(synthesized, "Custom::S3BucketNotifications", stack)
    assert notifications[0]["NotificationConfiguration"] == {"EventBridgeConfiguration": {}}
    function = next(f for f in resources(synthesized, "AWS::Lambda::Function", stack)
                    if f.get("Handler") == "hyperwarm.functions.cache_refresh.handler.lambda_handler")
    assert function["Environment"]["Variables"]["HYPERWARM_DRY_RUN"] == "true"


def test_function_bundle_carries_the_package_and_powertools(synthesized) -> None:
    handlers = [f for f in resources(synthesized, "AWS::Lambda::Function")
                if f.get("Handler") == "hyperwarm.functions.cache_refresh.handler.lambda_handler"]
    asset = handlers[0]["Code"]["S3Key"].removesuffix(".zip")
    folder = synthesized.outdir / f"asset.{asset}"
    assert (folder / "hyperwarm" / "functions" / "cache_refresh" / "handler.py").is_file()
    assert (folder / "hyperwarm" / "functions" / "eks_auth" / "__init__.py").is_file()  # shared with the exporter
    assert "import" not in (folder / "hyperwarm" / "__init__.py").read_text()  # never the construct library
    assert (folder / "aws_lambda_powertools" / "__init__.py").is_file()
    assert not list(folder.rglob("__pycache__"))


# -- configuration rules ------------------------------------------------------------------------

def _prod(project_context, refresh) -> dict:
    env = dict(project_context["environments"]["prod"])
    env["refresh"] = refresh
    return env


def test_refresh_of_an_unknown_cache_names_the_known_ones(project_context) -> None:
    with pytest.raises(ConfigError, match=r"no cached model 'nope'; caches.models: llama-3-1-70b, llama-3-1-8b"):
        parse_environment("prod", _prod(project_context, {"bucket": "hyperwarm-models-prod", "models": [
            {"prefix": "llama-3.1-70b-instruct", "caches": ["nope"]}]}))


def test_refresh_of_a_cache_reading_another_prefix_is_rejected(project_context) -> None:
    with pytest.raises(ConfigError, match=r"cached model 'llama-3-1-8b' reads s3://hyperwarm-models-prod/"
                                          r"llama-3.1-8b-instruct/, not the refreshed s3://hyperwarm-models-prod/other/"):
        parse_environment("prod", _prod(project_context, {"bucket": "hyperwarm-models-prod", "models": [
            {"prefix": "other", "caches": ["llama-3-1-8b"]}]}))


def test_refresh_of_an_endpoint_without_a_variant_on_the_prefix_is_rejected(project_context) -> None:
    with pytest.raises(ConfigError, match=r"no variant of endpoint 'chat' reads model data under"):
        parse_environment("prod", _prod(project_context, {"bucket": "hyperwarm-models-prod", "models": [
            {"prefix": "llama-3.1-8b-instruct", "endpoints": ["chat"]}]}))


def test_refresh_models_need_a_bucket_and_a_target(project_context) -> None:
    with pytest.raises(ConfigError, match="refresh.models needs refresh.bucket"):
        parse_environment("prod", _prod(project_context, {"models": [
            {"prefix": "llama-3.1-8b-instruct", "caches": ["llama-3-1-8b"]}]}))
    with pytest.raises(ConfigError, match="names no caches and no endpoints"):
        parse_environment("prod", _prod(project_context, {"bucket": "b-1-2", "models": [{"prefix": "x"}]}))


def test_duplicate_refresh_prefixes_are_rejected(project_context) -> None:
    entry = {"prefix": "llama-3.1-8b-instruct", "caches": ["llama-3-1-8b"]}
    with pytest.raises(ConfigError, match="refresh prefixes must be unique; repeated: llama-3.1-8b-instruct"):
        parse_environment("prod", _prod(project_context, {"bucket": "hyperwarm-models-prod", "models": [entry, entry]}))


# -- construct rules ----------------------------------------------------------------------------

def _hook(models, **props):
    app = cdk.App()
    stack = cdk.Stack(app, "T", env=cdk.Environment(region="us-west-2"))
    cluster = imported_cluster(stack, [InstanceGroupSpec(name="gpu", instance_type="ml.g5.xlarge", holds_caches=True)])
    return CacheRefreshHook(stack, "Hook", CacheRefreshHookProps(models=models(cluster), **props))


def test_hook_needs_a_prefix() -> None:
    with pytest.raises(ValueError, match=r"models = \[\] -- needs at least one refreshed prefix"):
        _hook(lambda c: [])


def test_hook_prefix_without_targets_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"models\[0\] = 'models/a' -- names no hyperpod or endpoint targets"):
        _hook(lambda c: [RefreshedPrefix(prefix="models/a")])


@pytest.mark.parametrize("call", [
    lambda c: HyperPodRefreshTarget(c, "ns", "m"),  # type: ignore[arg-type]
    lambda c: HyperPodRefreshTarget(c, "ns", "m", node_cache=True),  # type: ignore[call-arg]
    lambda c: HyperPodRefreshTarget(cluster=c, namespace="ns", name="m"),  # type: ignore[call-arg]
    lambda c: HyperPodRefreshTarget(cached_model(c, "m", "ns"), model_size=cdk.Size.gibibytes(16)),  # type: ignore
    lambda c: HyperPodRefreshTarget("m"),  # type: ignore[arg-type]
])
def test_every_0_1_call_of_a_hyperpod_target_says_how_to_migrate(call) -> None:
    """0.1's HyperPodRefreshTarget(cluster, namespace, name) chose a cold refresh by leaving node_cache out."""
    with pytest.raises(TypeError, match=r"-- allowed: HyperPodRefreshTarget\(model, staging_timeout=\.\.\., "
                                        r"switch_timeout=\.\.\.\), model a cached model's handle, "
                                        r"CachedModels.model\(name\) \(since 0.2.0"):
        _hook(lambda c: [RefreshedPrefix(prefix="m", hyperpod=[call(c)])])


@pytest.mark.parametrize("source, message", [
    (HuggingFaceModelSource(repo_id="Qwen/Qwen2.5-7B-Instruct", revision="a" * 40),
     "models[0].hyperpod[0].model = m -- reads a huggingface source; an S3 upload refreshes S3 sources only"),
    (ModelSource("models", "other", "v1"),
     "models[0].hyperpod[0].model = m -- reads s3://models/other/, not the refreshed prefix 'm'"),
])
def test_a_hyperpod_target_whose_model_reads_elsewhere_is_refused_naming_what_it_reads(source, message) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        _hook(lambda c: [RefreshedPrefix(prefix="m", hyperpod=[
            HyperPodRefreshTarget(cached_model(c, "m", "ns", source=source))])])
    _hook(lambda c: [RefreshedPrefix(prefix="m", hyperpod=[  # its own prefix: fine
        HyperPodRefreshTarget(cached_model(c, "m", "ns", source=ModelSource("models", "m", "v1")))])])


def test_a_hyperpod_target_of_a_model_without_room_for_two_versions_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"models\[\]\.hyperpod\[\]\.model = m -- a refresh puts a second version "
                                         r"beside the one serving: name the model in its CachedModelsProps.refreshed"):
        _hook(lambda c: [RefreshedPrefix(prefix="m", hyperpod=[
            HyperPodRefreshTarget(cached_model(c, "m", "ns", refreshed=False))])])


def test_hook_rejects_a_slashed_prefix() -> None:
    with pytest.raises(ValueError, match="no leading or trailing slash"):
        _hook(lambda c: [RefreshedPrefix(prefix="m/", hyperpod=[HyperPodRefreshTarget(cached_model(c, "m", "ns"))])])


def test_hook_default_child_is_the_refresh_function() -> None:
    hook = _hook(lambda c: [RefreshedPrefix(prefix="m", hyperpod=[HyperPodRefreshTarget(cached_model(c, "m", "ns"))])])
    assert hook.node.default_child.cfn_resource_type == "AWS::Lambda::Function"
    assert hook.bucket is not None and hook.endpoint_rule is None


def test_blue_green_traffic_is_validated() -> None:
    with pytest.raises(ValueError, match=r"models\[0\]\.endpoints\[0\]\.blue_green\.traffic = 'SOMETIMES' -- "
                                         r"allowed: ALL_AT_ONCE, CANARY, LINEAR"):
        _hook(lambda c: [RefreshedPrefix(prefix="m", endpoints=[EndpointRefreshTarget(
            InferenceEndpoint.from_endpoint_attributes(c, "Imported", endpoint_name="e"),
            BlueGreen(traffic="SOMETIMES"))])])


@pytest.mark.parametrize("props, message", [
    ({"function_retry_attempts": 3}, "function_retry_attempts = 3 -- allowed: 0..2"),
    ({"max_event_age": cdk.Duration.hours(7)}, r"max_event_age = 25200 seconds -- allowed: 60..21600"),
    ({"retry_attempts": 186}, r"retry_attempts = 186 -- allowed: 0..185"),
    ({"lock": cdk.Duration.millis(1500)}, r"lock = 1.5 seconds -- allowed: whole seconds \(Lambda and EventBridge"),
    ({"max_event_age": cdk.Duration.millis(90500)}, r"max_event_age = 90.5 seconds -- allowed: whole seconds"),
    ({"lock": cdk.Duration.minutes(16)}, r"lock = 960 seconds -- allowed: 1..900 seconds"),
])
def test_hook_rejects_async_invocation_settings_lambda_rejects(props, message) -> None:
    with pytest.raises(ValueError, match=message):
        _hook(lambda c: [RefreshedPrefix(prefix="m", hyperpod=[HyperPodRefreshTarget(cached_model(c, "m", "ns"))])], **props)


@pytest.mark.parametrize("field", ["lock", "max_event_age", "reconcile_every"])
def test_a_deploy_time_time_is_refused_saying_it_needs_a_literal(field: str) -> None:
    """Each is read in seconds at synth (the function's lock variable, the async delivery ages, the schedule's rate):
    a token there once became a 290-digit lock time or aws-cdk-lib's InvalidScheduleUnit."""
    with pytest.raises(ValueError, match=rf"{field} = a deploy-time value -- needs a literal cdk\.Duration: it is "):
        _hook(lambda c: [RefreshedPrefix(prefix="m", hyperpod=[HyperPodRefreshTarget(cached_model(c, "m", "ns"))])],
              **{field: cdk.Duration.seconds(cdk.Token.as_number(cdk.Fn.ref("Seconds")))})


@pytest.mark.parametrize("field, value", [("lock", 5), ("max_event_age", 5), ("reconcile_every", 5),
                                          ("retry_attempts", "5")])
def test_a_time_or_count_of_the_wrong_type_is_named_not_crashed_on(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=rf"{field} = {re.escape(repr(value))} -- wrong type; give "):
        _hook(lambda c: [RefreshedPrefix(prefix="m", hyperpod=[HyperPodRefreshTarget(cached_model(c, "m", "ns"))])],
              **{field: value})


def test_hook_rejects_duplicate_prefixes() -> None:
    with pytest.raises(ValueError, match=r"models\[\]\.prefix = 'm' -- prefixes must be unique"):
        _hook(lambda c: [RefreshedPrefix(prefix="m", hyperpod=[HyperPodRefreshTarget(cached_model(c, "m", "ns"))])] * 2)


def test_a_queue_with_a_generated_name_takes_letters_from_the_hooks_roles_and_rules_alone() -> None:
    """Without a queue name no deploy guard can write to it: no sender path is admitted, and the rehearsal's rule
    passes the hook's own queue."""
    from rehearsal import Assembly
    from rehearsal.rules.dead_letters import refresh_dead_letter_senders

    hook = _hook(lambda c: [RefreshedPrefix(prefix="m", hyperpod=[HyperPodRefreshTarget(cached_model(c, "m", "ns"))])])
    template = cdk.assertions.Template.from_stack(cdk.Stack.of(hook)).to_json()
    (policy,) = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::SQS::QueuePolicy"]
    (deny,) = [s for s in policy["PolicyDocument"]["Statement"] if s.get("Sid") == "LettersFromTheRefreshAlone"]
    assert (deny["Effect"], deny["Action"], deny["Principal"], set(deny["Condition"])) == (
        "Deny", "sqs:SendMessage", {"AWS": "*"}, {"ArnNotEquals"})
    assert refresh_dead_letter_senders(Assembly.from_templates({"T": template})) == []


# -- cost bounded: reserved concurrency ---------------------------------------------------------

def test_prod_reserves_concurrency_for_every_refresh_function_and_staging_does_not(synthesized) -> None:
    """cdk.json's prod ``refresh.reserved_concurrency`` caps each of the four functions; staging reserves none and
    says why to checkov."""
    prod = resources(synthesized, "AWS::Lambda::Function")
    refresh = [f for f in prod if f.get("Handler", "").startswith("hyperwarm.functions.cache_refresh.")]
    assert len(refresh) == 4
    assert all(f["ReservedConcurrentExecutions"] == 5 for f in refresh)
    staging = synthesized.resources("hyperwarm-staging-refresh", "AWS::Lambda::Function")
    vpc = [r for r in staging.values()
           if r["Properties"].get("Handler", "").startswith("hyperwarm.functions.cache_refresh.")]
    assert vpc and all("ReservedConcurrentExecutions" not in r["Properties"] for r in vpc)
    assert all("CKV_AWS_115" in json.dumps(r["Metadata"]) for r in vpc)


@pytest.mark.parametrize("value", [0, 901, -1])
def test_hook_rejects_a_reserved_concurrency_lambda_cannot_deploy(value: int) -> None:
    with pytest.raises(ValueError, match=rf"reserved_concurrency = {value} -- allowed: .*1.*900"):
        _hook(lambda c: [RefreshedPrefix(prefix="m", hyperpod=[HyperPodRefreshTarget(cached_model(c, "m", "ns"))])],
              reserved_concurrency=value)


def test_hook_takes_an_unresolved_reserved_concurrency() -> None:
    token = cdk.Token.as_number(cdk.Fn.ref("Concurrency"))
    hook = _hook(lambda c: [RefreshedPrefix(prefix="m", hyperpod=[HyperPodRefreshTarget(cached_model(c, "m", "ns"))])],
                 reserved_concurrency=token)
    assert cdk.Token.is_unresolved(hook.function.node.default_child.reserved_concurrent_executions)


def test_cdk_json_reserved_concurrency_has_the_props_range(project_context) -> None:
    refresh = project_context["environments"]["prod"]["refresh"]
    assert parse_environment("prod", _prod(project_context, refresh)).refresh.reserved_concurrency == 5
    with pytest.raises(ConfigError, match="reserved_concurrency"):
        parse_environment("prod", _prod(project_context, {**refresh, "reserved_concurrency": 0}))


def test_an_imported_endpoint_s_reads_are_its_stems_and_the_deployed_resources_it_names() -> None:
    """The refresh describes what serves: its own models and configs (the stems) or those the endpoint was deployed
    with, which an import names (``deployed_resource_arns``); nothing else of the account."""
    deployed = ["arn:aws:sagemaker:us-west-2:111122223333:endpoint-config/chat-config-1",
                "arn:aws:sagemaker:us-west-2:111122223333:model/chat-model-1"]

    def reads(**attributes) -> list:
        hook = _hook(lambda c: [RefreshedPrefix(prefix="m", endpoints=[EndpointRefreshTarget(
            InferenceEndpoint.from_endpoint_attributes(c, "Imported", endpoint_name="Team-Chat", **attributes,
                                                       execution_role=iam.Role.from_role_name(c, "Exec", "exec")))])])
        template = cdk.assertions.Template.from_stack(cdk.Stack.of(hook)).to_json()
        (statement,) = [s for r in template["Resources"].values() if r["Type"] == "AWS::IAM::Policy"
                        for s in r["Properties"]["PolicyDocument"]["Statement"]
                        if s.get("Sid", "").startswith("ReadLiveVersions")]
        return statement["Resource"]

    stems = reads()
    assert len(stems) == 2 and all(json.dumps(r).endswith('/team-chat-*"]]}') for r in stems)
    assert reads(deployed_resource_arns=deployed) == [*stems, *deployed]
