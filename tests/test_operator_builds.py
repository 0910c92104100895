"""Which inference operator add-on build can serve which objects (hyperwarm.cluster.rules)."""

from __future__ import annotations

from typing import Any

from hyperwarm.cluster.rules import (
    OLDEST_ADDON_OPERATOR,
    OPERATOR_ADDON_BUILDS,
    operator_fields,
    operator_pin_problem,
    operator_pin_unverified,
)

API = "inference.sagemaker.aws.amazon.com/v1"


def endpoint_config(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "InferenceEndpointConfig", "metadata": {"name": "m"},
            "spec": {"modelName": "m", "worker": {"image": "i"}, **spec}}


def test_objects_within_the_first_add_on_operator_need_no_pin() -> None:
    # Probes, autoscaling and routing are in operator 3.0's CRD: EKS's default build serves them.
    plain = endpoint_config(intelligentRoutingSpec={"enabled": True}, worker={"probes": {}})
    assert OLDEST_ADDON_OPERATOR == (3, 0)
    assert operator_fields([plain]) == {}
    assert operator_pin_problem(None, [plain]) is None


def test_fields_newer_than_a_pinned_build_are_found_by_kind_and_path() -> None:
    limits = endpoint_config(worker={"image": "i", "requestLimits": {"maxQueueSize": 4}})
    assert operator_fields([limits]) == {"InferenceEndpointConfig.spec.worker.requestLimits": (3, 1)}
    assert "needs operator 3.1 or later, and this build carries operator 3.0" in operator_pin_problem(
        "v1.0.0-eksbuild.1", [limits])
    cache = {"apiVersion": API, "kind": "ModelImageCache", "spec": {"image": "i"}}
    assert operator_fields([cache]) == {"ModelImageCache": (3, 3)}
    other_group = {"apiVersion": "v1", "kind": "ModelImageCache"}  # not the operator's kind
    assert operator_fields([other_group]) == {}


def test_a_build_no_newer_than_a_known_old_one_is_rejected_and_a_newer_unknown_one_is_flagged() -> None:
    cached = [endpoint_config(modelCacheConfig={"weightsCache": {"enabled": True}})]
    assert "is no newer than v1.0.0-eksbuild.1, which carries operator 3.0" in operator_pin_problem(
        "v0.9.1-eksbuild.2", cached)
    assert operator_pin_problem("v1.4.0-eksbuild.1", cached) is None
    assert "is not in hyperwarm's table of builds" in operator_pin_unverified("v1.4.0-eksbuild.1")
    assert all(operator_pin_unverified(build) is None for build in OPERATOR_ADDON_BUILDS)
    assert operator_pin_problem("v2.0.0-eksbuild.1", cached) is None


def test_an_operator_release_is_not_an_add_on_build() -> None:
    cached = [endpoint_config(modelCacheConfig={})]
    assert operator_pin_problem("v3.3", cached).startswith("allowed: an EKS add-on build such as v2.0.0-eksbuild.1")
