"""A cached model's scaling and serving options: cdk.json -> InferenceEndpointConfig, valid per the CRD.

Each option is opt-in; each rendered field is validated against the operator's published CRD, and
each bad value fails with ``environments.<env>.<path>: <value> -- <rule>``.
"""

from __future__ import annotations

import json
import math
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Annotations, Match
from stand_ins import imported_cluster
from test_caches_config import default_groups, environment, model, problems
from test_caches_manifests import crd_errors, crd_schemas, objects_of, of_kind  # noqa: F401 (fixture)

from hyperwarm.caches.objects import STARTUP_MARGIN, startup_budget_s
from stacks.caches_stack import CachesStack, cold_scale_out_warning
from stacks.config.environment import parse_environment
from stacks.plan import ColdStart

CLOUDWATCH = {"namespace": "AWS/SageMaker", "metric_name": "ConcurrentRequestsPerModel",
              "dimensions": {"EndpointName": "qwen"}, "target_value": 4}
AMP = "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0123abcd-4567"
PROMETHEUS = {"server_address": AMP, "query": "sum(vllm:num_requests_waiting)", "target_value": 10}
EXPORTER = {"metric": "RequestsWaiting", "target_value": 8}


def autoscaling(**overrides: Any) -> dict[str, Any]:
    return {"max_replicas": 1, "trigger": {"cloudwatch": CLOUDWATCH}, **overrides}


def four_gpu_groups(count: int = 2) -> list[dict[str, Any]]:
    """The GPU group on ml.g5.12xlarge (4 GPUs each): several 1-GPU pods per node."""
    return default_groups(instance_type="ml.g5.12xlarge", instance_count=count)


def endpoint_config(raw: dict[str, Any]) -> dict[str, Any]:
    return of_kind(objects_of(raw), "InferenceEndpointConfig")[0]


# --- every option renders its CRD field, and the object stays valid -------------------------------

OPTIONS: dict[str, tuple[dict[str, Any], str, Any]] = {
    # option key: (cdk.json value, rendered path, expected rendered value)
    "autoscaling-cloudwatch": (
        {"autoscaling": autoscaling(min_replicas=1, max_replicas=1, polling_interval_s=15, cooldown_s=600,
                                    initial_cooldown_s=120, scale_up_stabilization_s=30,
                                    scale_down_stabilization_s=900)},
        "spec.autoScalingSpec",
        {"minReplicaCount": 1, "maxReplicaCount": 1, "pollingInterval": 15, "cooldownPeriod": 600,
         "initialCooldownPeriod": 120, "scaleUpStabilizationTime": 30, "scaleDownStabilizationTime": 900,
         "cloudWatchTrigger": {"namespace": "AWS/SageMaker", "metricName": "ConcurrentRequestsPerModel",
                               "dimensions": [{"name": "EndpointName", "value": "qwen"}], "metricStat": "Average",
                               "metricType": "Average", "targetValue": 4.0, "activationTargetValue": 0.0,
                               "metricCollectionPeriod": 300, "minValue": 0.0}}),
    "autoscaling-prometheus": (
        {"autoscaling": autoscaling(trigger={"prometheus": PROMETHEUS})},
        "spec.autoScalingSpec.prometheusTrigger",
        {"serverAddress": AMP, "query": "sum(vllm:num_requests_waiting)", "targetValue": 10.0,
         "activationTargetValue": 0.0, "metricType": "Average"}),
    "autoscaling-exporter": (
        {"autoscaling": autoscaling(trigger={"exporter": EXPORTER})},
        "spec.autoScalingSpec.cloudWatchTrigger",
        {"namespace": "Hyperwarm/Caches", "metricName": "RequestsWaiting",
         "dimensions": [{"name": "ClusterName", "value": "${HYPERWARM_EKS_CLUSTER_NAME}"},
                        {"name": "Model", "value": "qwen"}],
         "metricStat": "Average", "metricType": "Average", "targetValue": 8.0, "activationTargetValue": 0.0,
         "metricCollectionPeriod": 60, "minValue": 0}),
    "autoscaling-exporter-holding": (  # without data KEDA assumes 16 (2 replicas of target 8), not 0
        {"autoscaling": autoscaling(trigger={"exporter": {**EXPORTER, "min_value": 16}})},
        "spec.autoScalingSpec.cloudWatchTrigger.minValue", 16.0),
    "metrics": ({"metrics": {"scrape_interval_s": 30}}, "spec.metrics",
                {"enabled": True, "metricsScrapeIntervalSeconds": 30, "modelMetrics": {"path": "/metrics", "port": 8080}}),
    "kv_cache-l1": ({"kv_cache": {}}, "spec.kvCacheSpec", {"enableL1Cache": True, "enableL2Cache": False}),
    "kv_cache-redis": ({"kv_cache": {"l2": "redis", "l2_url": "rediss://kv.example.internal:6379"}}, "spec.kvCacheSpec",
                       {"enableL1Cache": True, "enableL2Cache": True, "l2CacheSpec": {
                           "l2CacheBackend": "redis", "l2CacheLocalUrl": "rediss://kv.example.internal:6379"}}),
    "kv_cache-tieredstorage": ({"kv_cache": {"l1": False, "l2": "tieredstorage"}}, "spec.kvCacheSpec",
                               {"enableL1Cache": False, "enableL2Cache": True,
                                "l2CacheSpec": {"l2CacheBackend": "tieredstorage"}}),
    "load_balancer": ({"load_balancer": {"idle_timeout_s": 600, "routing_algorithm": "round_robin"}},
                      "spec.loadBalancer",
                      {"healthCheckPath": "/ping", "idleTimeoutSeconds": 600, "routingAlgorithm": "round_robin"}),
    "tls-acm": ({"tls": {"certificate_arn": "arn:aws:acm:us-west-2:123456789012:certificate/0a1b2c3d-4e5f",
                         "domain_name": "chat.example.com"}}, "spec.tlsConfig",
                {"customCertificateConfig": {"acmArn": "arn:aws:acm:us-west-2:123456789012:certificate/0a1b2c3d-4e5f",
                                             "domainName": "chat.example.com"}}),
    "tls-generated": ({"tls": {"certificate_output_s3_uri": "s3://my-certs/qwen/"}}, "spec.tlsConfig",
                      {"tlsCertificateOutputS3Uri": "s3://my-certs/qwen/"}),
    "request_limits": ({"request_limits": {"max_concurrent_requests": 16, "max_queue_size": 32}},
                       "spec.worker.requestLimits",
                       {"maxConcurrentRequests": 16, "maxQueueSize": 32, "overflowStatusCode": 429}),
}


def at(obj: dict[str, Any], path: str) -> Any:
    for key in path.split("."):
        obj = obj[key]
    return obj


@pytest.mark.parametrize("option", OPTIONS)
def test_option_renders_its_crd_field_and_validates(option, crd_schemas) -> None:  # noqa: F811 (the fixture)
    given, path, expected = OPTIONS[option]
    obj = endpoint_config(environment(model(**given)))
    assert at(obj, path) == expected
    assert crd_errors(obj, crd_schemas) == []


def test_without_options_no_option_field_is_emitted() -> None:
    spec = endpoint_config(environment(model()))["spec"]
    assert not {"autoScalingSpec", "metrics", "kvCacheSpec", "loadBalancer", "tlsConfig",
                "maxDeployTimeInSeconds"} & set(spec)
    assert not {"probes", "requestLimits"} & set(spec["worker"])


# --- probes: the startup probe outlasts the planner's cold start ------------------------------------

def test_startup_probe_outlasts_the_planners_cold_start(crd_schemas) -> None:  # noqa: F811 (the fixture)
    raw = environment(model(size_gb=145, probes={"period_s": 10}))
    raw["instance_groups"] = default_groups(instance_type="ml.g5.12xlarge")  # NVMe for 145 GB x 2
    obj = endpoint_config(raw)
    probes = obj["spec"]["worker"]["probes"]
    aws = ColdStart()
    cold_s = aws.cold_s(parse_environment("dev", raw).caches.models[0])
    engine_s = aws.container_start_s + 145 / aws.gpu_load_gb_per_s + aws.compile_s + aws.cuda_graph_s
    assert cold_s == pytest.approx(aws.image_pull_s + 145 * 8 / aws.bandwidth_gbps + engine_s)
    startup = probes["startupProbe"]
    assert startup["httpGet"] == {"path": "/ping", "port": 8080}
    assert startup["periodSeconds"] * startup["failureThreshold"] >= cold_s * STARTUP_MARGIN
    assert startup["failureThreshold"] == math.ceil(math.ceil(cold_s * STARTUP_MARGIN) / 10)
    # one slow answer of a busy pod never takes it out of service
    assert probes["livenessProbe"]["failureThreshold"] == 3 and probes["readinessProbe"]["failureThreshold"] == 3
    assert cold_s * STARTUP_MARGIN < 3600
    assert obj["spec"]["maxDeployTimeInSeconds"] == 3600  # the operator's default outlasts the budget
    assert crd_errors(obj, crd_schemas) == []


def test_deploy_timeout_grows_with_a_long_cold_start() -> None:
    raw = environment(model(size_gb=600, probes={}))
    raw["instance_groups"] = default_groups(instance_type="ml.p4d.24xlarge")  # NVMe 8 x 1 TB
    config = parse_environment("dev", raw)
    assert endpoint_config(raw)["spec"]["maxDeployTimeInSeconds"] == startup_budget_s(config.caches.models[0]) > 3600


def test_readiness_probe_is_optional() -> None:
    probes = endpoint_config(environment(model(probes={"readiness": False})))["spec"]["worker"]["probes"]
    assert set(probes) == {"startupProbe", "livenessProbe"}


# --- bad values fail with the field path, the value and the rule -----------------------------------

BAD: dict[str, tuple[dict[str, Any], str]] = {
    "max below min": ({"autoscaling": autoscaling(min_replicas=3, max_replicas=2)},
                      "caches.models[0].autoscaling.min_replicas: 3 -- must not exceed max_replicas (2)"),
    "no max": ({"autoscaling": {"trigger": {"cloudwatch": CLOUDWATCH}}}, "caches.models[0].autoscaling.max_replicas"),
    "two triggers": ({"autoscaling": autoscaling(trigger={"cloudwatch": CLOUDWATCH, "prometheus": PROMETHEUS})},
                     "caches.models[0].autoscaling.trigger: give exactly one of cloudwatch, prometheus and exporter"),
    "readiness after liveness": ({"probes": {"readiness_failures": 4}},
                                 "caches.models[0].probes.readiness_failures: 4 -- must not exceed liveness_failures "
                                 "(3): a failing pod leaves service before it is restarted"),
    "no trigger": ({"autoscaling": autoscaling(trigger={})},
                   "caches.models[0].autoscaling.trigger: give exactly one of cloudwatch, prometheus and exporter"),
    "exporter metric": ({"autoscaling": autoscaling(trigger={"exporter": {**EXPORTER, "metric": "ColdPods"}})},
                        "caches.models[0].autoscaling.trigger.exporter.metric: 'ColdPods' -- Input should be "
                        "'RequestsWaiting'"),
    "negative min_value": ({"autoscaling": autoscaling(trigger={"exporter": {**EXPORTER, "min_value": -1}})},
                           "caches.models[0].autoscaling.trigger.exporter.min_value: -1 -- Input should be greater "
                           "than or equal to 0"),
    "negative polling": ({"autoscaling": autoscaling(polling_interval_s=0)},
                         "caches.models[0].autoscaling.polling_interval_s: 0 -- Input should be greater than or equal to 1"),
    "negative cooldown": ({"autoscaling": autoscaling(cooldown_s=-1)},
                          "caches.models[0].autoscaling.cooldown_s: -1"),
    "stabilization": ({"autoscaling": autoscaling(scale_down_stabilization_s=7200)},
                      "caches.models[0].autoscaling.scale_down_stabilization_s: 7200"),
    "zero target": ({"autoscaling": autoscaling(trigger={"cloudwatch": {**CLOUDWATCH, "target_value": 0}})},
                    "caches.models[0].autoscaling.trigger.cloudwatch.target_value: 0"),
    "statistic": ({"autoscaling": autoscaling(trigger={"cloudwatch": {**CLOUDWATCH, "statistic": "Median"}})},
                  "caches.models[0].autoscaling.trigger.cloudwatch.statistic: 'Median' -- must be a CloudWatch statistic"),
    "not amp": ({"autoscaling": autoscaling(trigger={"prometheus": {**PROMETHEUS,
                                                                     "server_address": "http://prometheus:9090"}})},
                "caches.models[0].autoscaling.trigger.prometheus.server_address: 'http://prometheus:9090' -- must be an "
                "Amazon Managed Service for Prometheus workspace URL"),
    "replicas outside range": ({"replicas": 3, "autoscaling": autoscaling(max_replicas=2)},
                               "caches.models[0].replicas: 3 -- the starting count must lie within autoscaling "
                               "min_replicas..max_replicas; allowed: 1..2"),
    "probe path": ({"probes": {"path": "ping"}}, "caches.models[0].probes.path: 'ping' -- must be an HTTP path"),
    "probe period": ({"probes": {"period_s": 0}}, "caches.models[0].probes.period_s: 0"),
    "scrape interval": ({"metrics": {"scrape_interval_s": 1}}, "caches.models[0].metrics.scrape_interval_s: 1"),
    "metrics port": ({"port": 80, "metrics": {}}, "caches.models[0].metrics.port: None -- the operator scrapes "
                                                 "ports 1024..65535 and the model's port is 80"),
    "l2 backend": ({"kv_cache": {"l2": "memcached"}}, "caches.models[0].kv_cache.l2: 'memcached'"),
    "redis url": ({"kv_cache": {"l2": "redis"}}, "caches.models[0].kv_cache.l2_url: None -- l2 redis needs l2_url"),
    "redis scheme": ({"kv_cache": {"l2": "redis", "l2_url": "http://kv:6379"}},
                     "caches.models[0].kv_cache.l2_url: 'http://kv:6379' -- allowed: a redis:// or rediss:// URL"),
    "url without l2": ({"kv_cache": {"l2_url": "rediss://kv:6379"}},
                       "caches.models[0].kv_cache.l2_url: 'rediss://kv:6379' -- needs l2"),
    "idle timeout": ({"load_balancer": {"idle_timeout_s": 5000}}, "caches.models[0].load_balancer.idle_timeout_s: 5000"),
    "lb algorithm": ({"load_balancer": {"routing_algorithm": "random"}},
                     "caches.models[0].load_balancer.routing_algorithm: 'random'"),
    "acm arn": ({"tls": {"certificate_arn": "arn:aws:iam::123456789012:server-certificate/x",
                         "domain_name": "chat.example.com"}},
                "caches.models[0].tls.certificate_arn: 'arn:aws:iam::123456789012:server-certificate/x' -- must be an "
                "ACM certificate ARN"),
    "arn without domain": ({"tls": {"certificate_arn": "arn:aws:acm:us-west-2:123456789012:certificate/0a1b"}},
                           "caches.models[0].tls.domain_name: None -- certificate_arn and domain_name go together"),
    "wildcard domain": ({"tls": {"certificate_arn": "arn:aws:acm:us-west-2:123456789012:certificate/0a1b",
                                 "domain_name": "*.example.com"}},
                        "caches.models[0].tls.domain_name: '*.example.com' -- must be a lower-case domain name"),
    "empty tls": ({"tls": {}}, "caches.models[0].tls.certificate_arn: None -- give certificate_arn with domain_name, "
                               "or certificate_output_s3_uri"),
    "tls s3 uri": ({"tls": {"certificate_output_s3_uri": "my-certs/qwen"}},
                   "caches.models[0].tls.certificate_output_s3_uri: 'my-certs/qwen' -- must be an S3 URI"),
    "concurrency": ({"request_limits": {"max_concurrent_requests": 0}},
                    "caches.models[0].request_limits.max_concurrent_requests: 0"),
    "overflow code": ({"request_limits": {"max_concurrent_requests": 4, "overflow_status_code": 200}},
                      "caches.models[0].request_limits.overflow_status_code: 200"),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_option_fails_naming_field_value_and_rule(case) -> None:
    given, expected = BAD[case]
    assert f"environments.dev.{expected}" in problems(environment(model(**given))) or \
        f"environments.dev: {expected}" in problems(environment(model(**given)))


# --- capacity: max replicas must fit; beyond the warm nodes synth warns ----------------------------

def test_max_replicas_that_cannot_fit_fail_synth() -> None:
    raw = environment(model(autoscaling=autoscaling(max_replicas=9)))
    raw["instance_groups"] = four_gpu_groups(2)  # 8 GPUs for 9 one-GPU pods
    message = problems(raw)
    assert "instance group 'inference' (ml.g5.12xlarge x 2" in message
    assert "gpus per node: need 5 GPU(s), have 4 GPU(s) (model qwen at max_replicas 9 (5 pods)" in message


def test_fixed_replicas_that_fit_still_fail_when_max_replicas_do_not() -> None:
    raw = environment(model(autoscaling=autoscaling(max_replicas=2)))  # dev: one ml.g5.xlarge, one GPU
    assert "gpus per node: need 2 GPU(s), have 1 GPU(s) (model qwen at max_replicas 2 (2 pods)" in problems(raw)
    parse_environment("dev", environment(model()))  # the same model at one replica fits


def test_scale_out_beyond_the_warm_nodes_warns_with_the_planners_cold_share() -> None:
    raw = environment(model(autoscaling=autoscaling(max_replicas=4)))
    raw["instance_groups"] = four_gpu_groups(2)
    config = parse_environment("dev", raw)
    warning = cold_scale_out_warning(config.caches.models[0], config)
    # K = 4 - 1 = 3 new pods, W = 2 - 1 = 1 warm node: (K-W)/K = 2/3.
    assert warning is not None
    assert "max_replicas 4 exceeds the 2 node(s) of instance group 'inference'" in warning
    assert "67% cold" in warning and "K=3 new pods, W=1 warm nodes" in warning
    aws, cached = ColdStart(), config.caches.models[0]
    assert f"cold start {aws.cold_s(cached) / 60:.1f} min, warm {aws.warm_s(cached):.0f} s" in warning


def test_scale_out_within_the_warm_nodes_does_not_warn() -> None:
    raw = environment(model(autoscaling=autoscaling(max_replicas=2)))
    raw["instance_groups"] = four_gpu_groups(2)
    config = parse_environment("dev", raw)
    assert cold_scale_out_warning(config.caches.models[0], config) is None


def test_caches_stack_carries_the_cold_scale_out_warning() -> None:
    raw = environment(model(autoscaling=autoscaling(max_replicas=4)))
    raw["instance_groups"] = four_gpu_groups(2)
    config = parse_environment("dev", raw)
    app = cdk.App()
    env = cdk.Environment(region="us-west-2")
    cluster = imported_cluster(cdk.Stack(app, "Cluster", env=env), [g.to_spec() for g in config.instance_groups])
    stack = CachesStack(app, "Caches", env_name="dev", config=config, cluster=cluster, env=env)
    Annotations.from_stack(stack).has_warning("*", Match.string_like_regexp("cold share .K-W./K"))


def test_kv_cache_l1_lives_in_the_pod_memory_checked_against_the_catalog() -> None:
    """The CRD has no L1 size: the L1 cache is the pod's memory request, held against the node's memory."""
    raw = environment(model(kv_cache={}, resources={"gpus": 1, "cpu": "2", "memory": "64Gi"}))
    assert "memory per node: need" in problems(raw) and "ml.g5.xlarge" in problems(raw)  # 16 GiB per node


def test_prods_large_model_is_not_killed_during_its_cold_start(project_context) -> None:
    from stacks.config.environment import parse_environments

    prod = parse_environments(project_context["environments"])["prod"]
    large = next(m for m in prod.caches.models if m.name == "llama-3-1-70b")
    startup = endpoint_config_of(prod, large.name)["spec"]["worker"]["probes"]["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= ColdStart().cold_s(large) > 20 * 60


def endpoint_config_of(config, name: str) -> dict[str, Any]:
    from manifests import build_chart
    from stacks.caches_stack import chart_props

    return next(o for o in build_chart("prod", chart_props("prod", config)).to_json()
                if o["kind"] == "InferenceEndpointConfig" and o["metadata"]["name"] == name)


# --- autoscaling on the exporter's metric: one name for the cluster, filled in by the stack ---------

def test_cdk_json_offers_exactly_the_exporter_metrics_the_library_scales_on() -> None:
    from typing import get_args

    from hyperwarm.caches.autoscaling import EXPORTER_SCALING_METRICS
    from stacks.config.deployment_options import ExporterTrigger

    assert get_args(ExporterTrigger.model_fields["metric"].annotation) == EXPORTER_SCALING_METRICS


def test_the_caches_stack_puts_the_clusters_name_into_the_exporter_trigger() -> None:
    raw = environment(model(autoscaling=autoscaling(trigger={"exporter": EXPORTER})))
    config = parse_environment("dev", raw)
    app = cdk.App()
    env = cdk.Environment(region="us-west-2")
    cluster = imported_cluster(cdk.Stack(app, "Cluster", env=env), [g.to_spec() for g in config.instance_groups])
    stack = CachesStack(app, "Caches", env_name="dev", config=config, cluster=cluster, env=env)
    trigger = next(o for o in stack.objects if o["kind"] == "InferenceEndpointConfig")[
        "spec"]["autoScalingSpec"]["cloudWatchTrigger"]
    assert trigger["dimensions"][0] == {"name": "ClusterName", "value": "hyperpod-eks"}


def test_an_exporter_trigger_without_the_exporter_fails() -> None:
    raw = environment(model(autoscaling=autoscaling(trigger={"exporter": EXPORTER})))
    raw["observability"] = {"enabled": False}
    assert ("caches.models[0].autoscaling.trigger.exporter: RequestsWaiting -- the cache metrics exporter "
            "publishes it only with observability.enabled true") in problems(raw)


def test_staging_scales_its_cached_model_on_the_exporters_queue_depth(synthesized) -> None:
    """The cdk.json example deploys: the trigger names the staging cluster, not the placeholder."""
    manifests = synthesized.resources("hyperwarm-staging-caches", "Custom::AWSCDK-EKS-KubernetesResource")
    body = json.dumps([m["Properties"]["Manifest"] for m in manifests.values()])
    assert "RequestsWaiting" in body and "Hyperwarm/Caches" in body
    assert "HYPERWARM_EKS_CLUSTER_NAME" not in body
    assert "Fn::ImportValue" in body  # the cluster stack's EKS cluster name
