"""Whatever blue/green the refresh contract accepts, UpdateEndpoint accepts too.

The class of defect: the contract once allowed a 1..100 % step, SageMaker takes a canary of at
most 50 % and a linear step of 10..50 %, so a refresh failed at run time on settings that passed
synth. Every number the function sends is checked here against botocore's model (min/max) and the
API reference's percent rules, over every setting the contract lets through.
"""

from __future__ import annotations

import botocore.session
from hypothesis import given, settings, strategies as st

from hyperwarm.functions.cache_refresh import contract
from hyperwarm.functions.cache_refresh.targets.endpoint import deployment_config

SAGEMAKER = botocore.session.get_session().get_service_model("sagemaker")
# The API reference's rules botocore's model does not carry (TrafficRoutingConfig).
PERCENT = {"CanarySize": (1, 50), "LinearStepSize": (10, 50)}


def api_problems(value, shape, path: str = "DeploymentConfig") -> list[str]:
    """Where ``value`` breaks ``shape``'s enums and numeric ranges, recursively."""
    problems = []
    if shape.type_name == "structure":
        for name, member in shape.members.items():
            if name in value:
                problems += api_problems(value[name], member, f"{path}.{name}")
        if shape.name == "CapacitySize" and value.get("Type") == "CAPACITY_PERCENT":
            low, high = PERCENT[path.rsplit(".", 1)[1]]
            if not low <= value["Value"] <= high:
                problems.append(f"{path}.Value {value['Value']} not in {low}..{high}")
    elif shape.type_name == "list":
        problems += [p for i, v in enumerate(value) for p in api_problems(v, shape.member, f"{path}[{i}]")]
    elif shape.type_name == "integer":
        low, high = shape.metadata.get("min"), shape.metadata.get("max")
        if (low is not None and value < low) or (high is not None and value > high):
            problems.append(f"{path} {value} not in {low}..{high}")
    elif shape.type_name == "string" and shape.enum and value not in shape.enum:
        problems.append(f"{path} {value!r} not in {shape.enum}")
    return problems


@settings(max_examples=400, deadline=None)
@given(traffic=st.sampled_from(contract.TRAFFIC_TYPES), step=st.integers(-5, 120), wait=st.integers(-10, 4000),
       termination=st.integers(-10, 4000), max_execution=st.integers(0, 30000))
def test_every_blue_green_the_contract_accepts_is_one_updateendpoint_accepts(traffic, step, wait, termination,
                                                                             max_execution) -> None:
    bg = contract.BlueGreen(traffic=traffic, step_percent=step, wait_seconds=wait,
                            termination_wait_seconds=termination, max_execution_seconds=max_execution)
    sent = deployment_config(bg)
    shape = SAGEMAKER.operation_model("UpdateEndpoint").input_shape.members["DeploymentConfig"]
    if not contract.blue_green_problems(bg):
        assert api_problems(sent, shape) == []
    else:  # and what it rejects, SageMaker would reject too: nothing is refused that would deploy
        assert api_problems(sent, shape) != []
