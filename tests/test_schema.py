"""One schema: the library's props define every field's range, and the construct and cdk.json agree.

Every constraint below is read from the props' ``Annotated`` metadata (nothing is restated here); for
each, values just inside and just outside the range go through the construct's checks and through
cdk.json parsing, and both must accept or reject them, as the metadata says.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import annotated_types as at
import aws_cdk as cdk
import pytest

from hyperwarm import (
    BlueGreen,
    DataCapture,
    DeploymentGuardrails,
    InferenceComponentSpec,
    InferenceEndpoint,
    InferenceEndpointProps,
    InstanceGroupSpec,
    ModelSpec,
    ProductionVariant,
    Routing,
    ServerlessSpec,
    Serving,
    ServingImage,
    TrafficShift,
    VariantAutoscaling,
)
from hyperwarm._internal.constraints import (
    Constraint,
    Measured,
    constraints_of,
    field_problems,
    measured_of,
)
from hyperwarm.caches import gigabytes
from hyperwarm.cluster.nodes import nodes_problems
from hyperwarm.endpoints.rules import endpoint_problems
from hyperwarm.functions.cache_refresh import contract
from hyperwarm.observability.props import InferenceObservabilityProps
from stacks.config import ConfigError, parse_environment
from stacks.endpoints_stack import endpoint_props
from stacks.refresh_stack import blue_green

URI = "123456789012.dkr.ecr.us-west-2.amazonaws.com/vllm:1"
MODEL = ModelSpec(ServingImage.from_uri(URI), model_data="s3://models/qwen/v1/", serving=Serving(framework="vllm"))
INSTANCE: dict[str, Any] = {"instance_type": "ml.g5.2xlarge", "instance_count": 2}
PREFIX: dict[str, Any] = {"strategy": "PREFIX_AWARE", "prefix_length": 4096, "concurrency_threshold": 8}
SCALING: dict[str, Any] = {"min_capacity": 1, "max_capacity": 2, "target_value": 4.0}


@dataclasses.dataclass(frozen=True)
class Place:
    """Where a props class sits in a variant (library) and in an endpoint of cdk.json (config)."""

    config: Callable[[dict[str, Any]], dict[str, Any]]
    """The endpoint's cdk.json object with these fields of the class."""
    library: Callable[[dict[str, Any]], InferenceEndpointProps]
    """The endpoint's props with these fields of the class."""


def _variant_json(**fields: Any) -> dict[str, Any]:
    return {"name": "v1", "image": {"uri": URI}, "model_data": "s3://models/qwen/v1/", "serving": {"framework": "vllm"},
            **fields}


def _endpoint_json(variant: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    return {"name": "chat", "variants": [variant or _variant_json(**INSTANCE)], **fields}


def _props(variant: ProductionVariant | None = None, **fields: Any) -> InferenceEndpointProps:
    return InferenceEndpointProps(variants=[variant or ProductionVariant("v1", MODEL, **INSTANCE)],
                                  endpoint_name="hyperwarm-qa-chat", **fields)


def _variants(n: int) -> Place:
    return Place(config=lambda f: {**_endpoint_json(), "variants": [
                     _variant_json(**INSTANCE, name=f"v{i}") for i in range(n)]},
                 library=lambda f: InferenceEndpointProps(endpoint_name="hyperwarm-qa-chat", variants=[
                     ProductionVariant(f"v{i}", MODEL, **INSTANCE) for i in range(n)]))


PLACES: dict[type, Place] = {
    ProductionVariant: Place(lambda f: _endpoint_json(_variant_json(**{**INSTANCE, **f})),
                             lambda f: _props(ProductionVariant("v1", MODEL, **{**INSTANCE, **f}))),
    ServerlessSpec: Place(
        lambda f: _endpoint_json(_variant_json(serverless={"memory_size": 2048, "max_concurrency": 200, **f})),
        lambda f: _props(ProductionVariant("v1", MODEL, serverless=ServerlessSpec(
            **{"memory_size": cdk.Size.mebibytes(2048), "max_concurrency": 200, **f})))),
    VariantAutoscaling: Place(lambda f: _endpoint_json(_variant_json(**INSTANCE, autoscaling={**SCALING, **f})),
                       lambda f: _props(ProductionVariant("v1", MODEL, **INSTANCE,
                                                          autoscaling=VariantAutoscaling(**{**SCALING, **f})))),
    Routing: Place(lambda f: _endpoint_json(_variant_json(**INSTANCE, routing={**PREFIX, **f})),
                   lambda f: _props(ProductionVariant("v1", MODEL, **INSTANCE, routing=Routing(**{**PREFIX, **f})))),
    TrafficShift: Place(lambda f: _endpoint_json(guardrails={"traffic": "CANARY", "percent": 10, **f}),
                        lambda f: _props(guardrails=DeploymentGuardrails(TrafficShift(**{"type": "CANARY",
                                                                                         "percent": 10, **f})))),
    DataCapture: Place(lambda f: _endpoint_json(data_capture=f), lambda f: _props(data_capture=DataCapture(**f))),
}
LIBRARY_ONLY: dict[tuple[type, str], str] = {
    (DeploymentGuardrails, "termination_wait"): "cdk.json does not offer it (the library's 5 minutes)",
    **{(InferenceComponentSpec, name): "cdk.json offers no inference components"
       for name in ("copies", "accelerators_per_copy", "min_memory")},
    (InferenceEndpointProps, "variants"): "a list: its length is swept in its own test below",
}


def _constraints() -> list[tuple[type, Constraint]]:
    """Every field with bounds (choices and patterns are pydantic's own ``Literal`` and pattern checks)."""
    classes = (*PLACES, DeploymentGuardrails, InferenceComponentSpec, InferenceEndpointProps)
    return [(cls, c) for cls in classes for c in constraints_of(cls).values() if c.constraints]


def _edges(c: Constraint) -> list[float]:
    """Values at and just beyond each bound, and one inside the range that breaks a MultipleOf."""
    step = 1
    values: list[Any] = []
    item: Any
    for item in c.constraints:
        kind = type(item)
        if kind is at.Ge:
            values += [item.ge - step, item.ge]
        elif kind is at.Gt:
            values += [item.gt, item.gt + step]
        elif kind is at.Le:
            values += [item.le, item.le + step]
        elif kind is at.MultipleOf:
            low: Any = next(x.ge for x in c.constraints if isinstance(x, at.Ge))
            values.append(low + item.multiple_of // 2)
    return values


def _allowed(c: Constraint, value: float) -> bool:
    """What the metadata says, by annotated_types' own meaning."""
    checks: dict[type, Callable[[Any], bool]] = {
        at.Ge: lambda x: value >= x.ge, at.Gt: lambda x: value > x.gt, at.Le: lambda x: value <= x.le,
        at.Lt: lambda x: value < x.lt, at.MultipleOf: lambda x: value % x.multiple_of == 0}
    return all(checks[type(x)](x) for x in c.constraints)


def _config_accepts(endpoint: dict[str, Any]) -> bool:
    try:
        parse_environment("qa", {"endpoints": [endpoint], "model_buckets": [{"name": "models"}],
                                 "observability": {"otel_enrichment": "existing"}})
    except ConfigError:
        return False
    return True


def _library_accepts(build: Callable[[], InferenceEndpointProps]) -> bool:
    try:
        props = build()
    except RuntimeError:  # aws-cdk (jsii) refuses it already, e.g. a negative Duration
        return False
    return not endpoint_problems(props)


def _library_value(cls: type, c: Constraint, number: float) -> Any:
    hint = constraints_of(cls)[c.field]
    return Measured(hint.unit, ()).make(int(number)) if hint.unit else number


CASES = [(cls, c, value) for cls, c in _constraints() if (cls, c.field) not in LIBRARY_ONLY for value in _edges(c)]


def test_every_constrained_field_is_swept_or_has_a_reason() -> None:
    swept = {(cls, c.field) for cls, c, _ in CASES}
    found = {(cls, c.field) for cls, c in _constraints()}
    assert found == swept | set(LIBRARY_ONLY)
    assert (ServerlessSpec, "memory_size") in swept and (ProductionVariant, "model_data_download_timeout") in swept


@pytest.mark.parametrize("cls, constraint, value", CASES,
                         ids=[f"{cls.__name__}.{c.field}={v:g}" for cls, c, v in CASES])
def test_library_and_cdk_json_accept_and_reject_the_same_values(cls: type, constraint: Constraint,
                                                                 value: float) -> None:
    place = PLACES[cls]
    number = int(value) if float(value).is_integer() else value
    expected = _allowed(constraint, number)
    assert _config_accepts(place.config({constraint.field: number})) is expected
    assert _library_accepts(lambda: place.library({constraint.field: _library_value(cls, constraint, number)})) \
        is expected


BLUE_GREEN = [(c, value) for c in constraints_of(BlueGreen).values() if c.constraints for value in _edges(c)]


@pytest.mark.parametrize("constraint, value", BLUE_GREEN, ids=[f"{c.field}={v:g}" for c, v in BLUE_GREEN])
def test_a_refresh_shift_and_the_refresh_function_accept_the_same_values(constraint: Constraint, value: int) -> None:
    """The hook's BlueGreen states SageMaker's ranges once; the function checks what it is given by its contract."""
    try:
        bg = BlueGreen(traffic="CANARY", **{constraint.field: _library_value(BlueGreen, constraint, value)})
    except RuntimeError:  # aws-cdk refuses a negative Duration
        assert not _allowed(constraint, value)
        return
    assert (not field_problems(bg)) is _allowed(constraint, value)
    assert (not contract.blue_green_problems(bg.to_contract())) is _allowed(constraint, value)


@pytest.mark.parametrize("count, expected", [(0, False), (1, True), (10, True), (11, False)])
def test_both_take_one_to_ten_variants(count: int, expected: bool) -> None:
    assert constraints_of(InferenceEndpointProps)["variants"].allowed() == "at least 1 item(s), at most 10 item(s)"
    assert _config_accepts(_variants(count).config({})) is expected
    assert _library_accepts(lambda: _variants(count).library({})) is expected


def test_the_construct_rejects_what_sagemaker_rejects_in_a_serverless_variant() -> None:
    """Formerly the library took 1000 MB and 500 concurrency, which botocore's model (ServerlessMemorySizeInMB:
    1024..6144 in 1 GB steps, ServerlessMaxConcurrency: 1..200) and cdk.json refuse."""
    sls = ProductionVariant("sls", MODEL, serverless=ServerlessSpec(cdk.Size.mebibytes(1000), 500))
    with pytest.raises(ValueError) as info:
        InferenceEndpoint(cdk.Stack(cdk.App(), "S"), "E", _props(sls))
    assert "serverless.memory_size = 1000 MiB -- allowed: 1024..6144, a multiple of 1024 MiB" in str(info.value)
    assert "serverless.max_concurrency = 500 -- allowed: 1..200" in str(info.value)


def test_the_construct_rejects_a_model_download_timeout_below_a_minute() -> None:
    """Formerly the library took 5 s; ProductionVariantModelDataDownloadTimeoutInSeconds is 60..3600."""
    v = ProductionVariant("v1", MODEL, **INSTANCE, model_data_download_timeout=cdk.Duration.seconds(5))
    with pytest.raises(ValueError, match=r"model_data_download_timeout = 5 seconds -- allowed: 60..3600 seconds"):
        InferenceEndpoint(cdk.Stack(cdk.App(), "S"), "E", _props(v))


def test_a_canary_without_a_wait_bakes_the_librarys_ten_minutes_everywhere() -> None:
    """Formerly cdk.json waited 300 s where the library's canary waited 600 s."""
    config = parse_environment("qa", {"endpoints": [_endpoint_json(guardrails={"traffic": "CANARY", "percent": 10})],
                                        "model_buckets": [{"name": "models"}], "observability": {"otel_enrichment": "existing"}})
    endpoint = config.endpoints[0]
    guardrails = endpoint_props("qa", endpoint).guardrails
    assert guardrails is not None
    assert {guardrails.traffic.bake_time().to_seconds(), TrafficShift.canary(10).bake_time().to_seconds(),
            TrafficShift("CANARY", 10).bake_time().to_seconds()} == {600}
    assert TrafficShift.linear(10).bake_time().to_seconds() == TrafficShift().bake_time().to_seconds() == 300

    class Built:
        rollback_alarms = ()

    refresh = blue_green(endpoint, Built())  # type: ignore[arg-type]  # only its rollback alarms are read
    assert refresh.wait is not None and refresh.wait.to_seconds() == 600  # a refresh shifts alike


@pytest.mark.parametrize("provisioned, allowed", [(5, True), (6, False)])
def test_both_keep_provisioned_concurrency_within_max_concurrency(provisioned: int, allowed: bool) -> None:
    place = PLACES[ServerlessSpec]
    assert _config_accepts(place.config({"max_concurrency": 5, "provisioned_concurrency": provisioned})) is allowed
    assert _library_accepts(lambda: place.library({"max_concurrency": 5, "provisioned_concurrency": provisioned})) \
        is allowed


@pytest.mark.parametrize("old, path, value, new", [
    ({"model_data_download_timeout_seconds": 600}, "model_data_download_timeout_seconds", 600,
     "model_data_download_timeout (seconds, as before)"),
    ({"autoscaling": {**SCALING, "scale_in_cooldown_seconds": 60}}, "autoscaling.scale_in_cooldown_seconds", 60,
     "scale_in_cooldown (seconds, as before)"),
])
def test_a_key_of_the_earlier_release_names_its_new_key(old: dict[str, Any], path: str, value: int, new: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_environment("qa", {"endpoints": [_endpoint_json(_variant_json(**INSTANCE, **old))],
                                   "model_buckets": [{"name": "models"}]})
    assert f"environments.qa.endpoints[0].variants[0].{path}: {value!r} -- unknown key; it is now {new}" \
        in str(info.value)


@pytest.mark.parametrize("spec, problem", [
    (InferenceComponentSpec(min_memory=cdk.Size.mebibytes(127), accelerators_per_copy=1),
     "inference_component.min_memory = 127 MiB -- allowed: >= 128 MiB"),
    (InferenceComponentSpec(copies=0, accelerators_per_copy=1), "inference_component.copies = 0 -- allowed: >= 1"),
])
def test_the_construct_checks_what_cdk_json_does_not_offer(spec: InferenceComponentSpec, problem: str) -> None:
    props = _props(ProductionVariant("v1", MODEL, **INSTANCE, inference_component=spec))
    assert f"variant 'v1': {problem}" in endpoint_problems(props)


def test_one_checker_reports_a_choice_once_for_the_library_and_cdk_json_rejects_it() -> None:
    """A ``Literal`` field's choices are a constraint of the one checker: the construct names it once."""
    problems = endpoint_problems(_props(ProductionVariant("v1", MODEL, **INSTANCE, autoscaling=VariantAutoscaling(
        **{**SCALING, "metric": "CPUUtilization"}))))
    expected = "autoscaling.metric = 'CPUUtilization' -- allowed: ConcurrentRequestsPerModel, InvocationsPerInstance"
    assert [p for p in problems if "autoscaling.metric" in p] == [f"variant 'v1': {expected}"]
    assert not _config_accepts(_endpoint_json(_variant_json(**INSTANCE, autoscaling={**SCALING,
                                                                                     "metric": "CPUUtilization"})))


def _group_accepted(number: float) -> bool:
    """cdk.json's ``instance_groups[].ebs_volume_gb`` and the cluster's check of ``InstanceGroupSpec.ebs_volume``."""
    config = _parsed({"instance_groups": [{"name": "gpu", "instance_type": "ml.g5.12xlarge", "ebs_volume_gb": number}]})
    library = not nodes_problems([InstanceGroupSpec("gpu", "ml.g5.12xlarge", ebs_volume=gigabytes(number))], "None")
    assert config is library
    return library


def _observability_accepted(field: str, number: float) -> bool:
    """cdk.json's ``observability`` section and the construct's check of ``InferenceObservabilityProps``."""
    config = _parsed({"observability": {field: number}})
    measured = measured_of(InferenceObservabilityProps, field)
    try:
        props = InferenceObservabilityProps(**{field: measured.make(number) if measured else number})
    except RuntimeError:  # aws-cdk (jsii) refuses it already, e.g. a negative Duration
        library = False
    else:
        library = not field_problems(props)
    assert config is library
    return library


def _parsed(environment: dict[str, Any]) -> bool:
    try:
        parse_environment("qa", environment)
    except ConfigError:
        return False
    return True


OTHER_CASES = [(cls, c, value) for cls in (InstanceGroupSpec, InferenceObservabilityProps)
               for c in constraints_of(cls).values() if c.constraints and (cls, c.field) != (InstanceGroupSpec,
                                                                                             "instance_count")
               for value in _edges(c)]
"""The instance groups' and the dashboard's bounded fields; ``instance_count`` is checked by the cluster's own
words (``tests/test_cluster.py``, ``tests/test_config.py``)."""


def test_every_bounded_field_of_the_groups_and_the_dashboard_is_swept() -> None:
    swept = {(cls, c.field) for cls, c, _ in OTHER_CASES}
    assert {(InstanceGroupSpec, "ebs_volume"), (InferenceObservabilityProps, "cold_pod_share_period"),
            (InferenceObservabilityProps, "cold_pod_share_percent"),
            (InferenceObservabilityProps, "model_latency_p99"), (InferenceObservabilityProps, "ttft_p99")} == swept


@pytest.mark.parametrize("cls, constraint, value", OTHER_CASES,
                         ids=[f"{cls.__name__}.{c.field}={v:g}" for cls, c, v in OTHER_CASES])
def test_the_groups_and_the_dashboard_accept_what_cdk_json_accepts(cls: type, constraint: Constraint,
                                                                   value: float) -> None:
    number = int(value) if float(value).is_integer() else value
    expected = _allowed(constraint, number)
    if cls is InstanceGroupSpec:
        assert _group_accepted(number) is expected
    else:
        assert _observability_accepted(constraint.field, number) is expected


def test_an_ebs_volume_is_whole_gb_as_volume_size_in_gb_takes_it() -> None:
    """``VolumeSizeInGB`` is an integer: cdk.json takes whole numbers only, the construct whole GB only."""
    assert not _parsed({"instance_groups": [{"name": "gpu", "instance_type": "ml.g5.12xlarge", "ebs_volume_gb": 1.5}]})
    spec = InstanceGroupSpec("gpu", "ml.g5.12xlarge", ebs_volume=cdk.Size.gibibytes(500))
    assert nodes_problems([spec], "None") == [
        "instance_groups[0].ebs_volume = 536.871 GB -- allowed: a whole number of GB (VolumeSizeInGB is an integer)"]
