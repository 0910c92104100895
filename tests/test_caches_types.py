"""The cdk8s types in ``hyperwarm/caches/k8s`` are generated from the vendored CRDs (``make crds``), and match them."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
import yaml

K8S = Path(__file__).resolve().parent.parent / "constructs" / "hyperwarm" / "caches" / "k8s"
MAKEFILE = Path(__file__).resolve().parent.parent / "Makefile"


def _crds(crds_dir: Path) -> list[dict]:
    return [doc for path in sorted(crds_dir.glob("*.yaml")) for doc in yaml.safe_load_all(path.read_text()) if doc]


def _class_name(kind: str, version: str, storage_or_first: bool) -> str:
    # cdk8s import names the first version's class after the kind, each other one <Kind><Version>.
    return kind if storage_or_first else kind + re.sub(r"^v", "V", version.replace("alpha", "Alpha").replace("beta", "Beta"))


def test_every_kind_and_version_of_the_crds_has_its_generated_class(crds_dir: Path) -> None:
    source = (K8S / "__init__.py").read_text()
    classes = set(re.findall(r"^class (\w+)\(", source, re.MULTILINE))
    expected = {_class_name(crd["spec"]["names"]["kind"], v["name"], i == 0)
                for crd in _crds(crds_dir) for i, v in enumerate(crd["spec"]["versions"])}
    assert expected == {"InferenceEndpointConfig", "InferenceEndpointConfigV1Alpha1", "JumpStartModel",
                        "JumpStartModelV1Alpha1", "ModelImageCache", "ModelWeightsCacheConfig"}
    assert expected <= classes, sorted(expected - classes)


def test_generated_types_are_from_these_crds_and_the_pinned_cdk8s_cli(crds_dir: Path) -> None:
    """``make crds`` records what it generated from: a CRD replaced without regenerating fails here."""
    recorded = (K8S / "SOURCES").read_text().splitlines()
    pinned = re.search(r"^CDK8S_CLI_VERSION := (\S+)$", MAKEFILE.read_text(), re.MULTILINE)
    assert pinned and recorded[0] == f"cdk8s-cli {pinned.group(1)}"
    current = {f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}" for p in crds_dir.glob("*.yaml")}
    assert set(recorded[1:]) == current


def test_generated_classes_carry_the_crds_group_versions(crds_dir: Path) -> None:
    from hyperwarm.caches import k8s

    for crd in _crds(crds_dir):
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        version = crd["spec"]["versions"][0]["name"]
        assert getattr(k8s, kind).GVK.api_version == f"{group}/{version}"


@pytest.mark.parametrize("field", ["modelCacheConfig", "autoScalingSpec", "kvCacheSpec", "tlsConfig", "worker"])
def test_the_fields_hyperwarm_renders_are_in_the_generated_spec(field: str) -> None:
    from hyperwarm.caches import k8s

    assert field in k8s.InferenceEndpointConfigSpec.__jsii_name_mapping__.values()
