"""End to end: the refresh handler in its own process, talking HTTP to a moto server and HTTPS to the fake cluster.

The server runs in this process (so moto_ext's UpdateEndpoint and the EKS cluster pointing at the
fake Kubernetes API apply to it); the child only gets what a Lambda gets: environment variables,
the event and a context. Nothing in the child is mocked.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from typing import Any

import moto_ext
import pytest
import requests
from moto.server import ThreadedMotoServer
from refresh_world import BUCKET, PREFIX, ROUTING, LambdaContext, environment, s3_event, start_world, targets

from hyperwarm.refresh.asset import FUNCTION

E2E_ENDPOINT = "llama-e2e"
RANDOM = {"RoutingStrategy": "RANDOM"}
CHILD_TIMEOUT = 45
RESULT = "HYPERWARM-E2E-RESULT "
# A Lambda runtime in miniature: the event on stdin, the handler named in argv, the result on stdout.
# The package is imported by its handler's name from a folder laid out as the asset is.
CHILD = f"""
import json, sys, types
from hyperwarm.functions.cache_refresh import handler
context = types.SimpleNamespace(**json.loads(sys.argv[2]), get_remaining_time_in_millis=lambda: 300_000)
result = getattr(handler, sys.argv[1])(json.load(sys.stdin), context)
print({RESULT!r} + json.dumps(result))
"""


@pytest.fixture(scope="module")
def moto_url():
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture(scope="module")
def asset_folder(tmp_path_factory):
    """The function's package and the shared ``eks_auth`` as the asset lays them out (its pins come from this venv)."""
    out = tmp_path_factory.mktemp("asset")
    FUNCTION.lay_out(out)
    return out


@pytest.fixture
def e2e(kube_server, moto_url, asset_folder, monkeypatch):
    """The conftest world served over HTTP, plus a target endpoint with a PREFIX_AWARE and a RANDOM variant on v1."""
    requests.post(f"{moto_url}/moto-api/reset", timeout=10).raise_for_status()
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_url)  # this process's clients (fixtures, assertions) use the server too
    refresh_targets = targets()
    refresh_targets[PREFIX][1]["endpoint"] = E2E_ENDPOINT
    world = start_world(kube_server, monkeypatch, refresh_targets)
    world.sm.create_endpoint_config(EndpointConfigName=f"{E2E_ENDPOINT}-cfn", ProductionVariants=[
        {"VariantName": "prefix", "ModelName": "llama-v1", "InstanceType": "ml.m5.large", "InitialInstanceCount": 2,
         "InitialVariantWeight": 0.5, "RoutingConfig": ROUTING},
        {"VariantName": "random", "ModelName": "llama-v1", "InstanceType": "ml.m5.large", "InitialInstanceCount": 2,
         "InitialVariantWeight": 0.5, "RoutingConfig": RANDOM}])
    world.sm.create_endpoint(EndpointName=E2E_ENDPOINT, EndpointConfigName=f"{E2E_ENDPOINT}-cfn")
    child_env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp"),
                 "PYTHONPATH": str(asset_folder), "AWS_ENDPOINT_URL": moto_url, "AWS_ACCESS_KEY_ID": "testing",
                 "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing", "AWS_REGION": "us-west-2",
                 "AWS_DEFAULT_REGION": "us-west-2", "AWS_CONFIG_FILE": os.devnull,
                 "AWS_SHARED_CREDENTIALS_FILE": os.devnull, "AWS_EC2_METADATA_DISABLED": "true",
                 **environment(refresh_targets, world.dlq_url)}
    try:
        yield world, child_env
    finally:
        requests.post(f"{moto_url}/moto-api/reset", timeout=10)


def invoke(child_env: dict[str, str], entry: str, event: dict[str, Any]) -> dict[str, Any]:
    """Run ``hyperwarm.functions.cache_refresh.handler.<entry>(event, context)`` in a fresh Python process."""
    context = dataclasses.asdict(LambdaContext())
    done = subprocess.run([sys.executable, "-c", CHILD, entry, json.dumps(context)], input=json.dumps(event),
                          env=child_env, capture_output=True, text=True, timeout=CHILD_TIMEOUT)
    assert done.returncode == 0, f"{entry} exited {done.returncode}:\n{done.stderr[-4000:]}"
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith(RESULT)), None)
    assert line is not None, f"{entry} printed no result:\n{done.stdout[-4000:]}"
    return json.loads(line.removeprefix(RESULT))


def live_variants(sm: Any) -> dict[str, dict[str, Any]]:
    """The e2e endpoint's current config, by variant, with the S3 location each variant's model reads."""
    config = sm.describe_endpoint_config(
        EndpointConfigName=sm.describe_endpoint(EndpointName=E2E_ENDPOINT)["EndpointConfigName"])
    variants = {}
    for variant in config["ProductionVariants"]:
        model = sm.describe_model(ModelName=variant["ModelName"])
        variants[variant["VariantName"]] = {
            "routing": variant.get("RoutingConfig"), "config": config["EndpointConfigName"],
            "data": model["PrimaryContainer"]["ModelDataSource"]["S3DataSource"]["S3Uri"]}
    return variants


def test_complete_upload_moves_every_target_to_v2_and_v1_serves_until_in_service(e2e):
    world, child_env = e2e
    event = world.upload("v2")  # every file, then manifest.json last

    started = invoke(child_env, "lambda_handler", event)

    assert started["status"] == "refreshed"
    assert world.served_hyperpod() == f"{PREFIX}/v2"
    assert world.sm.describe_endpoint(EndpointName=E2E_ENDPOINT)["EndpointStatus"] == "Updating"
    assert [u["EndpointName"] for u in moto_ext.UPDATES] == [E2E_ENDPOINT]
    during = live_variants(world.sm)
    assert {v["config"] for v in during.values()} == {f"{E2E_ENDPOINT}-cfn"}
    assert {v["data"] for v in during.values()} == {f"s3://{BUCKET}/{PREFIX}/v1/"}

    moto_ext.settle(moto_ext.backend(), E2E_ENDPOINT)
    finished = invoke(child_env, "on_endpoint_state_change", moto_ext.state_change_event(world.sm, E2E_ENDPOINT))

    assert finished["status"] == "refreshed" and finished["version"] == "v2"
    after = live_variants(world.sm)
    assert {v["config"] for v in after.values()} != {f"{E2E_ENDPOINT}-cfn"}
    assert {name: v["data"] for name, v in after.items()} == {
        "prefix": f"s3://{BUCKET}/{PREFIX}/v2/", "random": f"s3://{BUCKET}/{PREFIX}/v2/"}
    assert {name: v["routing"] for name, v in after.items()} == {"prefix": ROUTING, "random": RANDOM}
    assert world.served_hyperpod() == f"{PREFIX}/v2"
    assert world.dead_letters() == []


def test_partial_upload_without_manifest_changes_nothing(e2e):
    world, child_env = e2e
    world.upload("v3", manifest=False)
    data_event = s3_event(f"{PREFIX}/v3/weights/model.safetensors", "AB")

    result = invoke(child_env, "lambda_handler", data_event)

    assert result == {"status": "skipped", "reason": "not-a-manifest"}
    assert world.served_hyperpod() == f"{PREFIX}/v1"
    assert world.kube.patches == [] and moto_ext.UPDATES == []
    assert world.sm.describe_endpoint(EndpointName=E2E_ENDPOINT)["EndpointStatus"] == "InService"
    assert {v["data"] for v in live_variants(world.sm).values()} == {f"s3://{BUCKET}/{PREFIX}/v1/"}
    assert world.dead_letters() == []
