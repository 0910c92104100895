"""Summary rows per environment, read back from the synthesized templates."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from aws_cdk import cx_api

from hyperwarm import group_usage, instance_spec
from hyperwarm.caches import CloudWatchTrigger, ExporterTrigger, footprint
from hyperwarm.constraints import in_gigabytes
from hyperwarm.observability import BRIDGE_HANDLER as ENDPOINT_BRIDGE, EXPORTER_HANDLER as CACHE_EXPORTER
from stacks.config import EnvironmentConfig
from stacks.config.alarms import EMAIL_PARAMETER


def service_quotas(config: EnvironmentConfig) -> dict[str, Counter[str]]:
    """SageMaker quotas the environment needs before its first deploy: quota ("cluster usage",
    "endpoint usage") -> instance type -> instances. HyperPod groups need their instance counts;
    endpoint variants twice their largest count, as a blue/green update runs a second fleet."""
    endpoint: Counter[str] = Counter()
    for e in config.endpoints:
        for v in e.variants:
            if v.instance_type:
                endpoint[v.instance_type] += 2 * v.max_instances
    cluster: Counter[str] = Counter()
    for g in config.instance_groups:
        cluster[g.instance_type] += g.instance_count
    return {"cluster usage": cluster, "endpoint usage": endpoint}


def _quota_lines(config: EnvironmentConfig, quota: str) -> list[str]:
    return [f"quota '{t} for {quota}' >= {n}" for t, n in sorted(service_quotas(config)[quota].items())]


def _instance_groups(config: EnvironmentConfig) -> str:
    lines = []
    for g in config.instance_groups:
        spec = instance_spec(g.instance_type)
        cache = "caches" if g.holds_caches else "no caches"
        lines.append(f"{g.name}: {g.instance_count} x {g.instance_type} "
                     f"({spec.gpus} GPU, NVMe {spec.nvme_gb:,} GB, {cache})")
    admins = (f"cluster admins: {', '.join(config.cluster_admins)}" if config.cluster_admins else
              "cluster admins: the deploying identity, CDK's deploy role cdk-<qualifier>-deploy-role-<account>-"
              f"{config.region} (name them in cluster_admins; production requires it)")
    return "\n".join(lines + [admins] + _quota_lines(config, "cluster usage"))


def _routing(variant: dict) -> str:
    routing = variant.get("RoutingConfig")
    if not routing:
        return "RANDOM (default)"
    prefix = routing.get("PrefixAwareRoutingConfig")
    if prefix:
        return (f"{routing['RoutingStrategy']} (prefix {prefix.get('PrefixLength')} B, "
                f"threshold {prefix.get('ConcurrencyThreshold')})")
    return str(routing["RoutingStrategy"])


def _endpoints(resources: dict) -> str:
    """Each endpoint with its variants and their routing, as synthesized."""
    lines = []
    for endpoint in (r for r in resources.values() if r["Type"] == "AWS::SageMaker::Endpoint"):
        props = endpoint["Properties"]
        config_id = props["EndpointConfigName"]["Fn::GetAtt"][0]
        lines.append(f"endpoint {props.get('EndpointName', '(generated name)')}:")
        for v in resources[config_id]["Properties"]["ProductionVariants"]:
            capacity = f"{v['InitialInstanceCount']} x {v['InstanceType']}" if "InstanceType" in v else "serverless"
            lines.append(f"  {v['VariantName']}: {capacity}, weight {v['InitialVariantWeight']}, {_routing(v)}")
    return "\n".join(lines)


def _scaling(model) -> str:
    """`` (autoscaling 1..2 on RequestsWaiting)``: the range and what drives it; empty for fixed replicas."""
    scaling = model.autoscaling
    if scaling is None:
        return ""
    trigger = scaling.trigger
    driver = (trigger.metric if isinstance(trigger, ExporterTrigger) else
              trigger.metric_name if isinstance(trigger, CloudWatchTrigger) else "a Prometheus query")
    return f" (autoscaling {scaling.min_replicas}..{scaling.max_replicas} on {driver})"


def _caches(config: EnvironmentConfig) -> str:
    """Each cached model and, per instance group, the NVMe its caches need (capacity guard numbers)."""
    lines = []
    for m in config.caches.models:
        cached = [name for name, on in ((f"weights ({m.weights_cache} cache)", m.weights_cached),
                                        ("image", m.image_cache)) if on]
        lines.append(f"{m.name}: {in_gigabytes(m.size):,g} GB {m.source.uri} on {m.instance_group} x{m.replicas}{_scaling(m)}, "
                     f"caches {', '.join(cached) or 'none'}, prepull {m.prepull}")
    for group in config.instance_groups:
        placed = [footprint(m, refreshed=m.name in config.refresh.cached_models) for m in config.caches.models
                  if m.instance_group == group.name]
        if placed:
            usage = group_usage(group.name, instance_spec(group.instance_type).nvme_gb, placed,
                                config.caches.nvme_headroom_percent)
            lines.append(f"{group.name}: NVMe at peak {usage.need_gb:,.0f} of {usage.have_gb:,.0f} GB usable")
    return "\n".join(lines)


def _refresh(config: EnvironmentConfig) -> str:
    """Which prefixes refresh what, read from the configuration the stack was built from."""
    refresh = config.refresh
    lines = [f"s3://{refresh.bucket}/<prefix>/<version>/manifest.json{' (dry run)' if refresh.dry_run else ''}"]
    for m in refresh.models:
        targets = [*(f"cache {c}" for c in m.caches), *(f"endpoint {e}" for e in m.endpoints)]
        lines.append(f"{m.prefix} -> {', '.join(targets)}")
    return "\n".join(lines)


def _observability(env_name: str, config: EnvironmentConfig, resources: dict, kinds: Counter[str]) -> str:
    """The dashboard, its alarms' thresholds and the scheduled functions that feed it."""
    o = config.observability
    handlers = {r["Properties"].get("Handler") for r in resources.values() if r["Type"] == "AWS::Lambda::Function"}
    feeds = [what for handler, what in ((CACHE_EXPORTER, "cache exporter"), (ENDPOINT_BRIDGE, "endpoint metrics bridge"))
             if handler in handlers]
    return (f"dashboard hyperwarm-{env_name}, {kinds['AWS::CloudWatch::Alarm']} alarms (p99 ModelLatency >= "
            f"{o.model_latency_p99.to_milliseconds() / 1000:g} s, p99 time to first token >= "
            f"{o.ttft_p99.to_milliseconds() / 1000:g} s, ColdPodShare >= "
            f"{o.cold_pod_share_percent:g} % for {o.cold_pod_share_period.to_minutes():g} min)"
            + (f"; every minute: {', '.join(feeds)}" if feeds else ""))


def _alarms(env_name: str, config: EnvironmentConfig) -> str:
    """Who the environment's alarm topic reaches: no one yet is said, so it is not mistaken for on-call."""
    a = config.alarms
    reaches = [*a.emails, *(f"https {u.split('/')[2]}" for u in a.https_endpoints),
               *(f"slack {c.channel_id}" for c in a.slack_channels),
               *([f"the address given at deploy (--parameters hyperwarm-{env_name}-alarms:{EMAIL_PARAMETER}=...)"]
                 if a.email_parameter else [])]
    return (f"topic hyperwarm-{env_name}-alarms -> "
            + (", ".join(reaches) if reaches else "no subscribers yet (set alarms.emails, https_endpoints or "
               "slack_channels, or subscribe to output AlarmTopicArn)"))


def environment_rows(assembly: cx_api.CloudAssembly, env_name: str,
                     config: EnvironmentConfig) -> Iterator[tuple[str, str, str]]:
    for stack in assembly.stacks:
        if not stack.stack_name.startswith(f"hyperwarm-{env_name}-"):
            continue
        resources = stack.template.get("Resources", {})
        kinds = Counter(r["Type"] for r in resources.values())
        details = []
        if kinds.get("AWS::SageMaker::Cluster"):
            details.append(_instance_groups(config))
        if kinds.get("AWS::SageMaker::Endpoint"):
            details.append("\n".join([_endpoints(resources), *_quota_lines(config, "endpoint usage")]))
        if kinds.get("Custom::AWSCDK-EKS-KubernetesResource") and stack.stack_name.endswith("-caches"):
            details.append(_caches(config))
        if stack.stack_name.endswith("-refresh"):
            details.append(_refresh(config))
        if stack.stack_name == f"hyperwarm-{env_name}-alarms":
            details.append(_alarms(env_name, config))
        if kinds.get("AWS::CloudWatch::Dashboard"):
            details.append(_observability(env_name, config, resources, kinds))
        yield stack.stack_name, str(len(resources)), "\n".join(details)
