"""What `make synth` prints for the first deploy agrees with cdk.json and the README."""

from __future__ import annotations

import re
from pathlib import Path

from stacks.config.environment import parse_environments
from stacks.summary import environment_rows, service_quotas

REPO = Path(__file__).resolve().parent.parent


def readme_quotas() -> dict[str, tuple[str, dict[str, dict[str, int]]]]:
    """The quota table of docs/operations.md, "Before the first deploy": environment -> (region, quota -> type -> count)."""
    table = {}
    for env, region, cluster, endpoint in re.findall(r"^\s*\| (\w+) \(([a-z]{2}-[a-z]+-\d)\) \| (.*?) \| (.*?) \|$",
                                                     (REPO / "docs" / "operations.md").read_text(), re.M):
        table[env] = (region, {quota: {t: int(n) for t, n in re.findall(r"(ml\.[\w.-]+): (\d+)", cell)}
                               for quota, cell in (("cluster usage", cluster), ("endpoint usage", endpoint))})
    return table


def test_readme_quota_table_matches_cdk_json(project_context) -> None:
    environments = parse_environments(project_context["environments"])
    computed = {env: (config.region, {quota: dict(counts) for quota, counts in service_quotas(config).items()})
                for env, config in environments.items()}
    assert readme_quotas() == computed


def test_endpoint_quota_covers_a_blue_green_fleet_at_full_autoscaling(project_context) -> None:
    prod = parse_environments(project_context["environments"])["prod"]
    variants = [v for e in prod.endpoints for v in e.variants if v.instance_type == "ml.p5.48xlarge"]
    assert variants and all(v.autoscaling for v in variants)
    assert service_quotas(prod)["endpoint usage"]["ml.p5.48xlarge"] == 2 * sum(v.autoscaling.max_capacity
                                                                                for v in variants)


def test_synth_summary_prints_the_quotas(synthesized, project_context) -> None:
    staging = parse_environments(project_context["environments"])["staging"]
    details = "\n".join(row[2] for row in environment_rows(synthesized.assembly, "staging", staging))
    assert "quota 'ml.g6e.12xlarge for cluster usage' >= 2" in details
    assert "quota 'ml.g6e.2xlarge for endpoint usage' >= 8" in details


def test_synth_summary_names_the_scaling_and_the_functions_that_feed_the_dashboard(synthesized, project_context):
    staging = parse_environments(project_context["environments"])["staging"]
    details = "\n".join(row[2] for row in environment_rows(synthesized.assembly, "staging", staging))
    assert "inference-g6e x2 (autoscaling 1..2 on RequestsWaiting)" in details
    assert "every minute: cache exporter, endpoint metrics bridge" in details


def test_synth_summary_says_who_the_alarms_reach(synthesized, project_context) -> None:
    environments = parse_environments(project_context["environments"])
    rows = {env: "\n".join(row[2] for row in environment_rows(synthesized.assembly, env, environments[env]))
            for env in ("dev", "prod")}
    assert ("topic hyperwarm-prod-alarms -> the address given at deploy (--parameters "
            "hyperwarm-prod-alarms:OnCallEmail=...)") in rows["prod"]
    assert "topic hyperwarm-dev-alarms -> no subscribers yet" in rows["dev"]


def test_an_environment_without_cached_models_does_not_claim_a_cache_exporter(project_context):
    """Both scheduled functions have an EventBridge rule: the summary names them by handler, not by rule."""
    from stacks.app import build_app

    dev = project_context["environments"]["dev"]  # its endpoints alone: no cluster to build, no cached model
    context = {**project_context, "env": "dev", "environments": {"dev": {
        "endpoints": dev["endpoints"], "model_buckets": dev["model_buckets"], "observability": dev["observability"]}}}
    app = build_app(context=context, nag=False)
    dev = parse_environments(context["environments"])["dev"]
    details = "\n".join(row[2] for row in environment_rows(app.synth(), "dev", dev))
    assert "every minute: endpoint metrics bridge" in details and "cache exporter" not in details
