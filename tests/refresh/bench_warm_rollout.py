"""``make bench``: the prod example's warm version change in the cluster model (tests/refresh/cluster_model.py).

prod's ``llama-3-1-70b`` (cdk.json: 145 GB, 4 GPUs a pod, 2 replicas autoscaled up to 4, on the 4 ``ml.p5.48xlarge``
nodes of ``inference-p5``) moves from v1 to v2 through the refresh function and its workflow's steps, with the
deployment and the filler rendered by the caches construct and the cluster allowing only the refresh's RBAC. Fill
and start times are the planner's (``hyperwarm.caches.cold_start.ColdStart``: 1 Gbit/s per node, a warm start).
Printed per scenario: pods started cold (must be 0), time to warm (upload to switch), time to switch (switch to
every pod on v2), the whole refresh, NVMe peak per node, and the simulated cluster's run time.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from cluster_model import Cluster, rbac_rules, rendered
from model_world import BUCKET, PREFIX
from rich.console import Console
from rich.table import Table
from warm_world import SETTINGS, TARGET, WarmWorld

from hyperwarm.caches import in_gigabytes
from hyperwarm.caches.cold_start import ColdStart
from hyperwarm.refresh.access import rbac_objects
from hyperwarm.refresh.rollout import default_staging_timeout
from stacks.config.environment import parse_environment

REPO = Path(__file__).resolve().parents[2]


def prod_model() -> tuple[object, int]:
    environments = json.loads((REPO / "cdk.json").read_text())["context"]["environments"]
    config = parse_environment("prod", environments["prod"])
    model = next(m for m in config.caches.models if m.name == "llama-3-1-70b")
    return model, config.instance_group(model.instance_group).instance_count


def run(replicas: int, during_staging: Callable[[Cluster], None] | None = None) -> dict[str, float]:
    model, nodes = prod_model()
    planner = ColdStart()
    deployment, filler = rendered(BUCKET, PREFIX, "v1", replicas=replicas, gpus=model.resources.gpus)
    size = in_gigabytes(model.size)
    cluster = Cluster.serving(deployment, filler, [f"p5-{i}" for i in range(nodes)], size_gb=size,
                              fill_seconds=planner.fill_s(model), start_seconds=planner.warm_s(model),
                              rbac=rbac_rules(rbac_objects([TARGET])))
    for node in cluster.nodes.values():
        node.nvme_gb = 30_000.0
    target = replace(TARGET, staging_timeout_seconds=int(default_staging_timeout(model.size).to_seconds()))
    world = WarmWorld(cluster, settings=replace(SETTINGS, targets={PREFIX: (target,)}))
    started, clock = world.cluster.now, time.perf_counter()
    world.upload("v2", 1)
    hit = {"done": during_staging is None}

    def each(number: int) -> None:
        if not hit["done"] and world.record()["pending"]["phase"] == "staging" and number == 1:
            hit["done"] = True
            assert during_staging is not None
            during_staging(world.cluster)
    outcome = world.run("v2", each=each)
    assert outcome == "done" and hit["done"], outcome
    world.assert_safe()
    warm_s, switch_s = world.metric("TimeToWarm")[0], world.metric("TimeToSwitch")[0]
    return {"cold pods": float(len(world.cluster.cold_starts)), "time to warm s": warm_s, "time to switch s": switch_s,
            "refresh s": world.cluster.now - started, "NVMe peak GB": world.cluster.peak_gb,
            "simulated in s": time.perf_counter() - clock}


def main() -> None:
    scenarios = {
        "2 replicas": lambda: run(2),
        "4 replicas (autoscaled up)": lambda: run(4),
        "2 replicas, a node replaced while staging": lambda: run(2, lambda c: c.replace_node("p5-1")),
    }
    table = Table(title="prod llama-3-1-70b: a warm version change in the cluster model (make bench)",
                  title_justify="left")
    results = {name: scenario() for name, scenario in scenarios.items()}
    columns = next(iter(results.values()))
    table.add_column("scenario")
    for column in columns:
        table.add_column(column, justify="right")
    for name, figures in results.items():
        table.add_row(name, *(f"{value:,.0f}" if "simulated" not in key else f"{value:.2f}"
                              for key, value in figures.items()))
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
