"""``python -m stacks plan cache``: cold vs warm time to serve, scale-out scenario, table and JSON output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_caches_config import environment, model

from hyperwarm import cli
from hyperwarm.caches.props import CachedModelProps
from stacks.__main__ import COMMANDS
from stacks.config.caches import CachedModel
from stacks.config.environment import parse_environment
from stacks.plan import ColdStart, Scenarios, plan, plan_model


def main(argv: list[str]) -> int:
    return cli.main(argv, commands=COMMANDS, prog="python -m stacks")

AWS = ColdStart()  # 1 Gbit/s per node, 6 min image pull, NVMe 7 GB/s


def llama_70b(**overrides: Any) -> CachedModelProps:
    return CachedModel.model_validate(model(name="llama-70b", size_gb=145, **overrides)).props


def test_145_gb_model_is_over_20_min_cold_and_under_1_min_warm() -> None:
    llama = llama_70b()
    assert AWS.cold_s(llama) == pytest.approx(6 * 60 + 145 * 8 / 1.0)  # 1,520 s = 25.3 min
    assert AWS.warm_s(llama) == pytest.approx(145 / 7)  # 20.7 s
    assert AWS.cold_s(llama) > 20 * 60 and AWS.warm_s(llama) < 60


def test_bandwidth_changes_the_cold_start_only() -> None:
    llama = llama_70b()
    fast = ColdStart(bandwidth_gbps=5.0)
    assert fast.cold_s(llama) == pytest.approx(360 + 145 * 8 / 5)
    assert fast.warm_s(llama) == AWS.warm_s(llama)


def test_uncached_image_is_pulled_even_on_a_warm_node() -> None:
    assert AWS.warm_s(llama_70b(image_cache=False)) == pytest.approx(360 + 145 / 7)


def test_uncached_weights_are_downloaded_even_on_a_warm_node() -> None:
    assert AWS.warm_s(llama_70b(weights_cache=False)) == pytest.approx(145 * 8)


def p5_config(replicas: int = 1, **overrides: Any):
    raw = environment(model(name="llama-70b", size_gb=145, replicas=replicas, **overrides))
    raw["instance_groups"] = [{"name": "inference", "instance_type": "ml.p5.48xlarge", "instance_count": 4,
                               "holds_caches": True}]
    return parse_environment("dev", raw)


def test_scale_out_beyond_the_warm_nodes_waits_for_the_cold_ones() -> None:
    config = p5_config()
    result = plan_model(config.caches.models[0], config, AWS, scale_out=5, prewarmed=2)
    assert (result.cold_share, result.all_serving_s) == (pytest.approx(0.6), pytest.approx(AWS.cold_s(
        config.caches.models[0])))


def test_scale_out_within_the_warm_nodes_serves_warm() -> None:
    config = p5_config()
    result = plan_model(config.caches.models[0], config, AWS, scale_out=2, prewarmed=2)
    assert (result.cold_share, result.all_serving_s) == (0.0, pytest.approx(145 / 7))


def test_default_warm_nodes_are_the_group_nodes_not_yet_serving_the_model() -> None:
    config = p5_config(replicas=1)
    assert plan_model(config.caches.models[0], config, AWS, scale_out=5, prewarmed=None).prewarmed_nodes == 3


def test_group_plan_reports_nvme_use_and_fit() -> None:
    (group,) = plan(p5_config())
    assert (group.used_gb, group.usable_gb, group.fits) == (145 * 2 + 20, 27_000, True)


@pytest.fixture
def in_project(monkeypatch, tmp_path, project_context):
    (tmp_path / "cdk.json").write_text(json.dumps({"app": "python3 app.py", "context": project_context}))
    monkeypatch.chdir(tmp_path)


def test_cli_prints_the_cold_and_warm_table(in_project, capsys) -> None:
    assert main(["plan", "cache", "--env", "prod"]) == 0
    out = capsys.readouterr().out
    assert "llama-3-1-70b" in out and "25.3 min" in out and "21 s" in out and "73x" in out


def test_cli_json_carries_the_numbers(in_project, capsys) -> None:
    assert main(["plan", "cache", "--env", "prod", "--json", "--bandwidth-gbps", "5", "--scale-out", "3",
                 "--prewarmed", "1"]) == 0
    report = json.loads(capsys.readouterr().out)
    llama = next(m for g in report["groups"] for m in g["models"] if m["model"] == "llama-3-1-70b")
    assert llama["cold_s"] == pytest.approx(360 + 145 * 8 / 5)
    assert (llama["scale_out"], llama["prewarmed_nodes"], llama["cold_share"]) == (3, 1, pytest.approx(2 / 3))


def test_cli_rejects_an_unknown_environment(in_project, capsys) -> None:
    assert main(["plan", "cache", "--env", "qa"]) == 2
    assert "--env 'qa' is not configured; environments: dev, staging, prod" in capsys.readouterr().err


def test_cli_names_the_problem_when_cdk_json_has_no_context(monkeypatch, tmp_path, capsys) -> None:
    (tmp_path / "cdk.json").write_text(json.dumps({"app": "python3 app.py"}))
    monkeypatch.chdir(tmp_path)
    assert main(["plan", "cache", "--env", "prod"]) == 2
    assert 'cdk.json: needs a "context" object holding "environments"' in capsys.readouterr().err


def test_every_event_is_planned_per_model_with_the_model_s_replicas_and_times() -> None:
    config = p5_config(replicas=4)
    llama = config.caches.models[0]
    result = plan_model(llama, config, AWS, scale_out=5, prewarmed=2)
    events = {e.event: e for e in result.events}
    assert list(events) == ["scale-out", "rolling-deployment", "node-replaced", "spot-interruption"]
    cold, warm, fill = AWS.cold_s(llama), AWS.warm_s(llama), 145 * 8 / 1.0
    assert (events["scale-out"].cold_share, events["scale-out"].time_to_serve_all_s) == (pytest.approx(3 / 5), cold)
    assert events["rolling-deployment"].time_to_serve_all_s == pytest.approx(4 * warm)
    assert (events["node-replaced"].cold_pod_share, events["node-replaced"].cache_fill_s) == (1 / 4, fill)
    assert (events["spot-interruption"].cold_pods, events["spot-interruption"].time_to_serve_all_s) == (4, cold)


def test_a_new_version_rolls_cold_unless_stand_alone_caches_fill_first() -> None:
    config = p5_config(replicas=2)
    changed = Scenarios(("rolling-deployment",), version_changed=True)
    (cold_roll,) = plan_model(config.caches.models[0], config, AWS, 1, None, changed).events
    assert (cold_roll.cold_share, cold_roll.time_to_serve_all_s) == (1.0, pytest.approx(2 * AWS.cold_s(
        config.caches.models[0])))
    prewarmed = p5_config(replicas=2, prewarm=True)
    (warm_roll,) = plan_model(prewarmed.caches.models[0], prewarmed, AWS, 1, None, changed).events
    assert (warm_roll.cold_share, warm_roll.time_to_serve_all_s) == (0.0, pytest.approx(145 * 8 + 2 * 145 / 7))


def test_cli_prints_the_events_with_the_dashboard_names(in_project, capsys) -> None:
    assert main(["plan", "cache", "--env", "prod", "--scale-out", "6", "--prewarmed", "2"]) == 0
    out = capsys.readouterr().out
    for name in ("scale-out", "rolling-deployment", "node-replaced", "spot-interruption", "cold_share",
                 "hit_rate_scale_out", "cold_pod_share", "time_to_serve_all_s"):
        assert name in out
    assert "67%" in out  # (6 - 2) / 6 of the scale-out start cold


def test_cli_json_carries_one_scenario_with_its_names(in_project, capsys) -> None:
    assert main(["plan", "cache", "--env", "prod", "--json", "--scenario", "scale-out", "--scale-out", "5",
                 "--prewarmed", "2"]) == 0
    report = json.loads(capsys.readouterr().out)
    llama = next(m for g in report["groups"] for m in g["models"] if m["model"] == "llama-3-1-70b")
    (event,) = llama["events"]
    assert event["event"] == "scale-out"
    assert (event["cold_share"], event["hit_rate_scale_out"]) == (pytest.approx(3 / 5), pytest.approx(2 / 5))
    assert event["time_to_serve_all_s"] == pytest.approx(llama["cold_s"])


def test_cli_rejects_an_unknown_scenario(in_project, capsys) -> None:
    with pytest.raises(SystemExit):
        main(["plan", "cache", "--env", "prod", "--scenario", "meteor"])
    assert "invalid choice: 'meteor'" in capsys.readouterr().err


def test_readme_prod_predictions_are_what_the_planner_says(project_context) -> None:
    """The README's "Predicted for prod" table must move with cdk.json and the planner's defaults."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = readme[readme.index("**Predicted for `prod`**"):]
    section = section[:section.index("\n\n", section.index("| event | predicted"))]
    config = parse_environment("prod", project_context["environments"]["prod"])
    llama = next(m for m in config.caches.models if m.name == "llama-3-1-70b")
    events = {e.event: e for e in plan_model(llama, config, AWS, 5, None).events}
    changed = {e.event: e for e in plan_model(llama, config, AWS, 5, None, Scenarios(version_changed=True)).events}
    expected = [
        f"`cold_pod_share` {events['scale-out'].cold_pod_share:.0%}".replace("%", " %"),
        f"`cache_fill_s` {events['scale-out'].cache_fill_s:,.0f}",
        f"`time_to_serve_all_s` {events['scale-out'].time_to_serve_all_s:,.0f}",
        f"`time_to_serve_all_s` {events['rolling-deployment'].time_to_serve_all_s:,.0f}",
        f"`time_to_serve_all_s` {changed['rolling-deployment'].time_to_serve_all_s:,.0f}",
        f"`cold_pods` {events['spot-interruption'].cold_pods}, `cold_pod_share` 100 %",
        f"`cold_pod_share` {events['node-replaced'].cold_pod_share:.0%}".replace("%", " %"),
        f"`cold_share` {plan_model(llama, config, AWS, 5, 2).cold_share:.0%}".replace("%", " %"),
    ]
    assert [text for text in expected if text not in section] == []
