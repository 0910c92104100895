"""``hyperwarm.caches.events``: each fleet event against its analytic expectation."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hyperwarm.caches import events as cache_events
from hyperwarm.caches.events import node_replaced, rolling_deployment, scale_out, spot_interruption

COLD, WARM, FILL = 1520.0, 20.7, 1160.0  # 145 GB: 6 min pull + 1 Gbit/s download; NVMe 7 GB/s


@pytest.mark.parametrize("k, w", [(5, 2), (5, 0), (8, 3), (3, 3), (2, 4), (1, 0)])
def test_scale_out_of_k_pods_onto_w_warm_nodes(k: int, w: int) -> None:
    e = scale_out(k, w, replicas=4, cold_s=COLD, warm_s=WARM, fill_s=FILL)
    assert e.cold_share == pytest.approx(max(k - w, 0) / k)
    assert e.hit_rate_scale_out == pytest.approx(min(k, w) / k)
    assert e.time_to_serve_all_s == (COLD if k > w else WARM)
    assert (e.cold_pods, e.fleet_pods) == (max(k - w, 0), 4 + k)
    assert e.cold_pod_share == pytest.approx(max(k - w, 0) / (4 + k))
    assert e.cache_fill_s == (FILL if k > w else 0.0)


def test_scale_out_of_nothing_takes_no_time_and_has_no_share() -> None:
    e = scale_out(0, 3, replicas=4, cold_s=COLD, warm_s=WARM, fill_s=FILL)
    assert (e.time_to_serve_all_s, e.cold_share, e.hit_rate_scale_out) == (0.0, 0.0, 0.0)


def test_rolling_deployment_of_the_same_version_starts_every_pod_warm_one_by_one() -> None:
    e = rolling_deployment(4, COLD, WARM, FILL, version_changed=False, prefilled=False)
    assert (e.cold_share, e.hit_rate_scale_out, e.cold_pods) == (0.0, 1.0, 0)
    assert e.time_to_serve_all_s == pytest.approx(4 * WARM)


def test_rolling_deployment_of_a_new_version_downloads_on_every_pod_one_at_a_time() -> None:
    e = rolling_deployment(4, COLD, WARM, FILL, version_changed=True, prefilled=False)
    assert (e.cold_share, e.cold_pods, e.cold_pod_share) == (1.0, 1, pytest.approx(1 / 4))
    assert e.time_to_serve_all_s == pytest.approx(4 * COLD)


def test_rolling_deployment_of_a_new_version_with_prefilled_caches_waits_one_fill_then_rolls_warm() -> None:
    e = rolling_deployment(4, COLD, WARM, FILL, version_changed=True, prefilled=True)
    assert (e.cold_share, e.cold_pods, e.cache_fill_s) == (0.0, 0, FILL)
    assert e.time_to_serve_all_s == pytest.approx(FILL + 4 * WARM)


def test_a_replaced_warm_node_restarts_its_pod_cold() -> None:
    e = node_replaced(1, replicas=4, cold_s=COLD, fill_s=FILL)
    assert (e.cold_share, e.cold_pods, e.cold_pod_share) == (1.0, 1, pytest.approx(1 / 4))
    assert (e.time_to_serve_all_s, e.cache_fill_s) == (COLD, FILL)


@pytest.mark.parametrize("k, replicas, lost", [(2, 4, 2), (4, 4, 4), (6, 4, 4)])
def test_spot_interruption_restarts_k_pods_cold_at_once(k: int, replicas: int, lost: int) -> None:
    e = spot_interruption(k, replicas=replicas, cold_s=COLD, fill_s=FILL)
    assert (e.pods_started, e.cold_pods, e.cold_share) == (lost, lost, 1.0)
    assert e.cold_pod_share == pytest.approx(lost / replicas)
    assert e.time_to_serve_all_s == COLD


def test_negative_counts_are_rejected_with_the_field_named() -> None:
    with pytest.raises(ValueError, match=r"pods: -1 -- must be >= 0"):
        scale_out(-1, 0, replicas=1, cold_s=COLD, warm_s=WARM, fill_s=FILL)


def test_json_names_are_the_dashboard_names() -> None:
    names = set(scale_out(5, 2, 4, COLD, WARM, FILL).as_dict())
    assert {"cold_share", "hit_rate_scale_out", "cold_pods", "cold_pod_share", "cache_fill_s",
            "time_to_serve_all_s"} <= names
    assert cache_events.EVENTS == ("scale-out", "rolling-deployment", "node-replaced", "spot-interruption")


def test_the_forecasts_load_without_aws_cdk() -> None:
    """The planner and synth-time warnings share them; neither should pay for aws-cdk to do arithmetic."""
    code = "import sys, hyperwarm.caches.events; print(' '.join(sorted(sys.modules)))"
    loaded = {n.split(".")[0] for n in subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                                      text=True).stdout.split()}
    assert not loaded & {"aws_cdk", "jsii", "pydantic"}
