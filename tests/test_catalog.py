"""The instance catalog covers the GPU families and agrees with the reference figures."""

from __future__ import annotations

import pytest

from hyperwarm import CATALOG, instance_spec


@pytest.mark.parametrize("family", ["g5", "g6", "g6e", "p4d", "p4de", "p5", "p5e", "p5en"])
def test_every_required_family_is_present_with_nvme(family) -> None:
    members = [s for t, s in CATALOG.items() if t.startswith(f"ml.{family}.")]
    assert members and all(s.has_nvme and s.gpus >= 1 for s in members)


@pytest.mark.parametrize("instance_type, nvme_gb, gpus, gpu_gib", [
    ("ml.g5.xlarge", 250, 1, 22.35), ("ml.g5.12xlarge", 3800, 4, 89.4), ("ml.g5.48xlarge", 7600, 8, 178.8),
    ("ml.g6.12xlarge", 3760, 4, 89.4), ("ml.p4d.24xlarge", 8000, 8, 320), ("ml.p4de.24xlarge", 8000, 8, 640),
    ("ml.p5.48xlarge", 30000, 8, 640), ("ml.p5en.48xlarge", 30000, 8, 1128), ("ml.g6e.48xlarge", 7600, 8, 357.6),
])
def test_reference_figures(instance_type, nvme_gb, gpus, gpu_gib) -> None:
    spec = instance_spec(instance_type)
    assert (spec.nvme_gb, spec.gpus, spec.gpu_memory_gib) == (nvme_gb, gpus, gpu_gib)


def test_cpu_types_have_no_nvme() -> None:
    assert not instance_spec("ml.m5.2xlarge").has_nvme


def test_unknown_type_names_known_types() -> None:
    with pytest.raises(KeyError, match="unknown instance type 'ml.z1.big'; known types: ml.c5"):
        instance_spec("ml.z1.big")


def test_small_sizes_record_a_sustained_baseline_below_the_burst_peak() -> None:
    spec = instance_spec("ml.g5.xlarge")
    assert (spec.network_gbps, spec.network_baseline_gbps) == (10, 2.5)
    assert instance_spec("ml.p5.48xlarge").network_baseline_gbps == 3200
