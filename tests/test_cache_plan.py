"""``python -m stacks plan cache``: cold vs warm time to serve (each part of a start on its own), scale-out
scenario, the refresh of each model, table and JSON output.

Expected figures are derived here from the documented inputs (:class:`ColdStart`'s parameters), never copied
from the planner's output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_caches_config import environment, model

from hyperwarm import cli
from hyperwarm.caches.props import CachedModelSpec, in_gigabytes
from stacks.__main__ import COMMANDS
from stacks.config.caches import CachedModel
from stacks.config.environment import parse_environment
from stacks.plan import ColdStart, Scenarios, plan, plan_model


def main(argv: list[str]) -> int:
    return cli.main(argv, commands=COMMANDS, prog="python -m stacks")


def table_row(out: str, *first_cells: str) -> list[str]:
    """The cells of the first table row of ``out`` that starts with ``first_cells``."""
    rows = ([cell.strip() for cell in line.strip("│").split("│")] for line in out.splitlines() if "│" in line)
    return next(row for row in rows if row[:len(first_cells)] == list(first_cells))

AWS = ColdStart()  # 1 Gbit/s per node, 6 min image pull, NVMe 7 GB/s, the engine's start as measured for vLLM
SIZE_GB = 145


def llama_70b(**overrides: Any) -> CachedModelSpec:
    return CachedModel.model_validate(model(name="llama-70b", size_gb=SIZE_GB, **overrides)).props


def engine_s(size_gb: float = SIZE_GB, assumptions: ColdStart = AWS) -> float:
    """Every start: the container, the weights into GPU memory, torch.compile, CUDA-graph capture."""
    return (assumptions.container_start_s + size_gb / assumptions.gpu_load_gb_per_s + assumptions.compile_s
            + assumptions.cuda_graph_s)


def download_s(size_gb: float = SIZE_GB, assumptions: ColdStart = AWS) -> float:
    return size_gb * 8 / assumptions.bandwidth_gbps


def test_the_engine_start_defaults_are_the_published_vllm_figures() -> None:
    """vllm-project/vllm#19824 (Llama 3 70B): ~10 s to load ~70 GB, ~15 + ~70 s torch.compile, ~60 s CUDA graphs;
    the container start has no published figure (an assumption)."""
    assert (AWS.gpu_load_gb_per_s, AWS.compile_s, AWS.cuda_graph_s, AWS.container_start_s) == (70 / 10, 15 + 70, 60, 30)


def test_145_gb_model_is_over_20_min_cold_and_a_few_minutes_warm() -> None:
    llama = llama_70b()
    assert AWS.cold_s(llama) == pytest.approx(AWS.image_pull_s + download_s() + engine_s())
    assert AWS.warm_s(llama) == pytest.approx(SIZE_GB / AWS.nvme_gb_per_s + engine_s())
    assert AWS.cold_s(llama) > 20 * 60 and AWS.warm_s(llama) < 5 * 60


def test_the_start_breakdown_names_each_part() -> None:
    llama = llama_70b()
    warm, cold = AWS.breakdown(llama, warm=True), AWS.breakdown(llama, warm=False)
    assert (warm.image_s, warm.weights_s, warm.container_s, warm.load_s, warm.compile_s, warm.cuda_graph_s) == (
        0, pytest.approx(SIZE_GB / AWS.nvme_gb_per_s), AWS.container_start_s,
        pytest.approx(SIZE_GB / AWS.gpu_load_gb_per_s), AWS.compile_s, AWS.cuda_graph_s)
    assert (cold.image_s, cold.weights_s) == (AWS.image_pull_s, pytest.approx(download_s()))
    assert (warm.total_s, cold.total_s) == (pytest.approx(AWS.warm_s(llama)), pytest.approx(AWS.cold_s(llama)))


def test_a_compile_cache_or_eager_mode_shortens_every_start_alike() -> None:
    llama = llama_70b()
    eager = ColdStart(compile_s=0, cuda_graph_s=0)
    saved = AWS.compile_s + AWS.cuda_graph_s
    assert (AWS.cold_s(llama) - eager.cold_s(llama), AWS.warm_s(llama) - eager.warm_s(llama)) == (
        pytest.approx(saved), pytest.approx(saved))


def test_bandwidth_changes_the_cold_start_only() -> None:
    llama = llama_70b()
    fast = ColdStart(bandwidth_gbps=5.0)
    assert fast.cold_s(llama) == pytest.approx(AWS.image_pull_s + download_s(assumptions=fast) + engine_s())
    assert fast.warm_s(llama) == AWS.warm_s(llama)


def test_uncached_image_is_pulled_even_on_a_warm_node() -> None:
    assert AWS.warm_s(llama_70b(image_cache=False)) == pytest.approx(
        AWS.image_pull_s + SIZE_GB / AWS.nvme_gb_per_s + engine_s())


def test_uncached_weights_are_downloaded_even_on_a_warm_node() -> None:
    assert AWS.warm_s(llama_70b(weights_cache="off")) == pytest.approx(download_s() + engine_s())


P5_NODES = 4


def p5_config(replicas: int = 1, *, refreshed: bool = False, **overrides: Any):
    raw = environment(model(name="llama-70b", size_gb=SIZE_GB, replicas=replicas, **overrides))
    raw["instance_groups"] = [{"name": "inference", "instance_type": "ml.p5.48xlarge", "instance_count": P5_NODES,
                               "holds_caches": True}]
    if refreshed:
        source = raw["caches"]["models"][0]["source"]
        raw["refresh"] = {"bucket": source["bucket"], "models": [{"prefix": source["prefix"], "caches": ["llama-70b"]}]}
    return parse_environment("dev", raw)


def test_scale_out_beyond_the_warm_nodes_waits_for_the_cold_ones() -> None:
    config = p5_config()
    result = plan_model(config.caches.models[0], config, AWS, scale_out=5, prewarmed=2)
    assert (result.cold_share, result.all_serving_s) == (pytest.approx(0.6), pytest.approx(AWS.cold_s(
        config.caches.models[0])))


def test_scale_out_within_the_warm_nodes_serves_warm() -> None:
    config = p5_config()
    result = plan_model(config.caches.models[0], config, AWS, scale_out=2, prewarmed=2)
    assert (result.cold_share, result.all_serving_s) == (0.0, pytest.approx(AWS.warm_s(config.caches.models[0])))


def test_default_warm_nodes_are_the_group_nodes_not_yet_serving_the_model() -> None:
    config = p5_config(replicas=1)
    assert plan_model(config.caches.models[0], config, AWS, scale_out=5, prewarmed=None).prewarmed_nodes == 3


def test_group_plan_reports_nvme_use_at_the_peak_and_fit() -> None:
    image_gb = 20
    (group,) = plan(p5_config())
    assert (group.used_gb, group.usable_gb, group.fits, group.refreshed) == (SIZE_GB + image_gb, 27_000, True, ())
    (refreshed,) = plan(p5_config(refreshed=True))
    assert (refreshed.used_gb, refreshed.refreshed) == (2 * SIZE_GB + image_gb, ("llama-70b",))


@pytest.fixture
def in_project(monkeypatch, tmp_path, project_context):
    (tmp_path / "cdk.json").write_text(json.dumps({"app": "python3 app.py", "context": project_context}))
    monkeypatch.chdir(tmp_path)


def test_cli_prints_the_cold_and_warm_table(in_project, capsys) -> None:
    assert main(["plan", "cache", "--env", "prod"]) == 0
    out = capsys.readouterr().out
    llama = llama_70b()
    cold, warm = AWS.cold_s(llama), AWS.warm_s(llama)
    assert "llama-3-1-70b" in out and f"{cold / 60:.1f} min" in out and f"{warm / 60:.1f} min" in out
    assert f"{cold / warm:.0f}x" in out


def test_cli_prints_the_start_of_a_pod_part_by_part(in_project, capsys) -> None:
    assert main(["plan", "cache", "--env", "prod", "--compile-s", "7.5"]) == 0
    out = capsys.readouterr().out
    cells = table_row(out, "llama-3-1-70b", "cold")
    cached_compile = ColdStart(compile_s=7.5)
    assert cells[:-1] == ["llama-3-1-70b", "cold", f"{AWS.image_pull_s:,.0f}", f"{download_s():,.0f}",
                          f"{AWS.container_start_s:,.0f}", f"{SIZE_GB / AWS.gpu_load_gb_per_s:,.0f}", "8",
                          f"{AWS.cuda_graph_s:,.0f}"]
    assert cells[-1].startswith(f"{cached_compile.cold_s(llama_70b()):,.0f} (")
    for part in ("image pull", "weights", "container", "load to GPU", "torch.compile", "CUDA graphs", "total"):
        assert part in out


def test_cli_json_carries_the_numbers(in_project, capsys) -> None:
    assert main(["plan", "cache", "--env", "prod", "--json", "--bandwidth-gbps", "5", "--scale-out", "3",
                 "--prewarmed", "1"]) == 0
    report = json.loads(capsys.readouterr().out)
    llama = next(m for g in report["groups"] for m in g["models"] if m["model"] == "llama-3-1-70b")
    fast = ColdStart(bandwidth_gbps=5)
    assert llama["cold_s"] == pytest.approx(AWS.image_pull_s + download_s(assumptions=fast) + engine_s())
    assert llama["warm_start"]["total_s"] == pytest.approx(llama["warm_s"])
    assert llama["cold_start"]["compile_s"] == AWS.compile_s
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
    cold, warm, fill = AWS.cold_s(llama), AWS.warm_s(llama), download_s()
    assert (events["scale-out"].cold_share, events["scale-out"].time_to_serve_all_s) == (pytest.approx(3 / 5), cold)
    assert events["rolling-deployment"].time_to_serve_all_s == pytest.approx(4 * warm)
    assert (events["node-replaced"].cold_pod_share, events["node-replaced"].cache_fill_s) == (1 / 4, fill)
    assert (events["spot-interruption"].cold_pods, events["spot-interruption"].time_to_serve_all_s) == (4, cold)


def test_a_new_version_rolls_cold_unless_the_node_cache_fills_first() -> None:
    config = p5_config(replicas=2)
    changed = Scenarios(("rolling-deployment",), version_changed=True)
    (cold_roll,) = plan_model(config.caches.models[0], config, AWS, 1, None, changed).events
    assert (cold_roll.cold_share, cold_roll.time_to_serve_all_s) == (1.0, pytest.approx(2 * AWS.cold_s(
        config.caches.models[0])))
    prewarmed = p5_config(replicas=2, weights_cache="node")
    (warm_roll,) = plan_model(prewarmed.caches.models[0], prewarmed, AWS, 1, None, changed).events
    assert (warm_roll.cold_share, warm_roll.time_to_serve_all_s) == (0.0, pytest.approx(
        download_s() + 2 * AWS.warm_s(prewarmed.caches.models[0])))


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


def readme_section(start: str, end: str) -> str:
    readme = (Path(__file__).resolve().parent.parent / "docs" / "library-guide.md").read_text()
    section = readme[readme.index(start):]
    return " ".join(section[:section.index(end)].split())


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def test_readme_prod_predictions_are_what_the_planner_says(project_context) -> None:
    """The library guide's "Predicted for prod" table must move with cdk.json and the planner's defaults."""
    section = readme_section("**Predicted for `prod`**", "| steady traffic")
    config, llama = prod_70b(project_context)
    default = plan_model(llama, config, AWS, None, None)
    events = {e.event: e for e in default.events}
    beyond = {e.event: e for e in plan_model(llama, config, AWS, 5, None).events}
    changed = {e.event: e for e in plan_model(llama, config, AWS, None, None, Scenarios(version_changed=True)).events}
    r, warm = default.refresh, AWS.warm_s(llama)
    assert r.with_staging is not None
    percent = lambda share: f"{share:.0%}".replace("%", " %")  # noqa: E731
    expected = [
        f"K = {default.scale_out} onto W = {default.prewarmed_nodes}",
        f"`cold_share` {percent(events['scale-out'].cold_share)}, `cold_pods` 0, "
        f"`time_to_serve_all_s` {events['scale-out'].time_to_serve_all_s:,.0f} (one warm start)",
        f"`cold_share` {percent(beyond['scale-out'].cold_share)}, `cold_pods` {beyond['scale-out'].cold_pods}, "
        f"`cold_pod_share` {percent(beyond['scale-out'].cold_pod_share)}, "
        f"`cache_fill_s` {beyond['scale-out'].cache_fill_s:,.0f} ({minutes(beyond['scale-out'].cache_fill_s)}), "
        f"`time_to_serve_all_s` {beyond['scale-out'].time_to_serve_all_s:,.0f}",
        f"`time_to_serve_all_s` {events['rolling-deployment'].time_to_serve_all_s:,.0f} "
        f"({llama.replicas} x {warm:,.0f} s)",
        f"`time_to_serve_all_s` {changed['rolling-deployment'].time_to_serve_all_s:,.0f}",
        f"staging {r.staging_s:,.0f} s ({minutes(r.staging_s)}) on the {r.nodes} nodes at once, NVMe at peak "
        f"{r.peak_gb:,.0f} GB per node ({in_gigabytes(llama.size):,.0f} GB x 2 versions), switch "
        f"{r.switch_s:,.0f} s ({llama.replicas} x {warm:,.0f} s), all serve after "
        f"{r.with_staging.time_to_serve_all_s:,.0f} s ({minutes(r.with_staging.time_to_serve_all_s)}); `cold_share` "
        f"without staging {percent(r.without_staging.cold_share)} (all serve after "
        f"{r.without_staging.time_to_serve_all_s:,.0f} s, {minutes(r.without_staging.time_to_serve_all_s)}), "
        f"with staging {percent(r.with_staging.cold_share)}",
        f"`cold_pods` 1, `cold_pod_share` {percent(events['node-replaced'].cold_pod_share)}",
        f"spot interruption of 5 ({beyond['spot-interruption'].cold_pods} replicas lost) | "
        f"`cold_pods` {beyond['spot-interruption'].cold_pods}, `cold_pod_share` 100 %",
    ]
    assert [text for text in expected if text not in section] == []


def test_readme_start_breakdown_and_walkthrough_are_what_the_planner_says(project_context) -> None:
    config, llama = prod_70b(project_context)
    cold, warm = AWS.breakdown(llama, warm=False), AWS.breakdown(llama, warm=True)
    parts = lambda start: " + ".join(  # noqa: E731
        f"{v:,.0f}" for v in (start.image_s, start.weights_s, start.container_s, start.load_s, start.compile_s,
                              start.cuda_graph_s) if v)
    planner = readme_section("**Planner.**", "A second table forecasts")
    assert (f"a cold start is {cold.total_s:,.0f} s ({minutes(cold.total_s)}: {parts(cold)}) and a warm one "
            f"{warm.total_s:,.0f} s ({minutes(warm.total_s)}: {parts(warm)})") in planner
    walkthrough = readme_section("### Warm rollout walkthrough", "\n## ")
    r = plan_model(llama, config, AWS, None, None).refresh
    (group,) = [g for g in plan(config) if g.group == llama.instance_group]
    assert r.with_staging is not None
    expected = [
        f"Each of the {r.nodes} nodes downloads {in_gigabytes(llama.size):,.0f} GB at the same time: "
        f"{r.staging_s:,.0f} s ({minutes(r.staging_s)})",
        f"a node holds {r.peak_gb:,.0f} GB of this model",
        f"{group.used_gb:,.0f} GB with the 8B model and the image, of {group.usable_gb:,.0f} GB usable",
        f"each a warm start of {warm.total_s:,.0f} s (NVMe read {warm.weights_s:,.0f} s, container "
        f"{warm.container_s:,.0f} s, load to GPU {warm.load_s:,.0f} s, torch.compile {warm.compile_s:,.0f} s, "
        f"CUDA graphs {warm.cuda_graph_s:,.0f} s), {r.switch_s:,.0f} s ({minutes(r.switch_s)}) in all",
        f"Every pod serves `v2` {r.with_staging.time_to_serve_all_s:,.0f} s "
        f"({minutes(r.with_staging.time_to_serve_all_s)}) after the upload",
        f"roll every pod cold, {r.without_staging.time_to_serve_all_s:,.0f} s "
        f"({minutes(r.without_staging.time_to_serve_all_s)})",
        f"operator rolls its {llama.replicas} pods one by one",
    ]
    assert [text for text in expected if text not in walkthrough] == []


def test_a_staged_refresh_fills_every_node_at_once_then_rolls_the_pods_warm() -> None:
    """Staging: each node downloads the new version at the per-node rate, all in parallel; the switch: the pods
    roll one by one, each a warm start; the NVMe holds both versions, once each (the node cache is the pods' own)."""
    replicas = 2
    config = p5_config(replicas=replicas, refreshed=True, weights_cache="node")
    llama = config.caches.models[0]
    refresh = plan_model(llama, config, AWS, None, None).refresh
    cold, warm = AWS.cold_s(llama), AWS.warm_s(llama)
    assert (refresh.refreshed, refresh.staged, refresh.nodes) == (True, True, P5_NODES)
    assert (refresh.staging_s, refresh.switch_s) == (pytest.approx(download_s()), pytest.approx(replicas * warm))
    assert refresh.peak_gb == SIZE_GB * 2
    without, staged = refresh.without_staging, refresh.with_staging
    assert (without.cold_share, without.time_to_serve_all_s) == (1.0, pytest.approx(replicas * cold))
    assert staged is not None
    assert (staged.cold_share, staged.cold_pods, staged.time_to_serve_all_s) == (
        0.0, 0, pytest.approx(download_s() + replicas * warm))


def test_a_refresh_stages_only_a_node_cached_model() -> None:
    config = p5_config(replicas=2, refreshed=True)  # the operator's cache: the refresh repoints the deployment at once
    refresh = plan_model(config.caches.models[0], config, AWS, None, None).refresh
    assert (refresh.staged, refresh.with_staging, refresh.staging_s, refresh.peak_gb) == (False, None, 0.0, 2 * SIZE_GB)
    assert refresh.without_staging.cold_share == 1.0


def test_a_model_no_refresh_targets_reserves_one_version() -> None:
    config = p5_config(replicas=2, weights_cache="node")
    refresh = plan_model(config.caches.models[0], config, AWS, None, None).refresh
    assert (refresh.refreshed, refresh.staged, refresh.peak_gb) == (False, False, SIZE_GB)


def prod_70b(project_context):
    config = parse_environment("prod", project_context["environments"]["prod"])
    return config, next(m for m in config.caches.models if m.name == "llama-3-1-70b")


def test_prod_70b_scales_out_within_its_pre_warmed_nodes(project_context) -> None:
    """cdk.json's prod example: autoscaling whose whole range lands on pre-warmed nodes (cold share 0), and a
    refreshed model whose refresh stages."""
    config, llama = prod_70b(project_context)
    group = config.instance_group(llama.instance_group)
    assert llama.autoscaling is not None and llama.weights_cache == "node"
    assert llama.max_replicas <= group.instance_count  # one new pod per pre-warmed node
    result = plan_model(llama, config, AWS, None, None)
    k, w = llama.max_replicas - llama.replicas, group.instance_count - llama.replicas
    assert (result.scale_out, result.prewarmed_nodes, result.cold_share) == (k, w, 0.0)
    assert result.all_serving_s == pytest.approx(AWS.warm_s(llama))
    beyond = result.beyond_fleet  # one pod more than the warm nodes
    assert (beyond.pods_started, beyond.cold_started, beyond.time_to_serve_all_s) == (
        w + 1, 1, pytest.approx(AWS.cold_s(llama)))
    assert "llama-3-1-70b" in config.refresh.cached_models and result.refresh.staged


def test_cli_states_the_scale_out_within_and_beyond_the_fleet(in_project, project_context, capsys) -> None:
    assert main(["plan", "cache", "--env", "prod"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    config, llama = prod_70b(project_context)
    assert llama.autoscaling is not None
    w = config.instance_group(llama.instance_group).instance_count - llama.replicas
    assert (f"llama-3-1-70b: autoscaling {llama.autoscaling.min_replicas}..{llama.autoscaling.max_replicas}: a "
            f"scale-out of K={llama.max_replicas - llama.replicas} onto W={w} pre-warmed nodes starts 0% cold") in out
    assert (f"beyond the fleet (pod {w + 1} on a node without the caches: a higher max_replicas or new nodes) 1 of "
            f"{w + 1} starts cold, all serve in {AWS.cold_s(llama) / 60:.1f} min") in out


def test_cli_prints_the_refresh_of_each_model_and_the_two_versions_it_reserves(in_project, project_context,
                                                                               capsys) -> None:
    assert main(["plan", "cache", "--env", "prod"]) == 0
    out = capsys.readouterr().out
    config, llama = prod_70b(project_context)
    refreshed = [m.name for m in config.caches.models
                 if m.instance_group == llama.instance_group and m.name in config.refresh.cached_models]
    assert (f"NVMe at peak of {llama.instance_group}: two versions of each refreshed model ({', '.join(refreshed)}: the new "
            "version stages beside the serving one until the switch), one of the others") in " ".join(out.split())
    cells = table_row(out, "llama-3-1-70b", "yes")
    warm, n = AWS.warm_s(llama), llama.replicas
    minutes = lambda seconds: f"{seconds / 60:.1f} min"  # noqa: E731
    assert cells == ["llama-3-1-70b", "yes", f"{config.instance_group(llama.instance_group).instance_count} nodes",
                     minutes(download_s()), f"{SIZE_GB * 2:,} GB", f"{minutes(n * warm)} ({n} x {minutes(warm)})",
                     "100%", minutes(n * AWS.cold_s(llama)), "0%", minutes(download_s() + n * warm)]


def test_cli_json_carries_the_refresh(in_project, capsys) -> None:
    assert main(["plan", "cache", "--env", "prod", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    llama = next(m for g in report["groups"] for m in g["models"] if m["model"] == "llama-3-1-70b")
    refresh = llama["refresh"]
    assert (refresh["staging_s"], refresh["peak_gb"]) == (pytest.approx(download_s()), SIZE_GB * 2)
    assert (refresh["without_staging"]["cold_share"], refresh["with_staging"]["cold_share"]) == (1.0, 0.0)
