"""The refresh Lambda against moto and the fake Kubernetes API: happy paths and every bad-input case."""

from __future__ import annotations

import moto_ext
from refresh_world import BUCKET, ENDPOINT, METRICS, PREFIX, ROUTING, s3_event

from hyperwarm.functions.cache_refresh import handler

HYPERPOD_ID = "hyperpod:hyperwarm-test/hyperwarm-models/InferenceEndpointConfig/llama"


def refresh(world, event, context):
    return handler.lambda_handler(event, context)


def finish_endpoint(world, context, succeed=True):
    moto_ext.settle(moto_ext.backend(), ENDPOINT, succeed=succeed)
    return handler.on_endpoint_state_change(moto_ext.state_change_event(world.sm, ENDPOINT), context)


def test_an_s3_sourced_hyperpod_deployment_is_repointed_at_the_new_version(world, context):
    result = refresh(world, world.upload("v2"), context)
    assert result["status"] == "refreshed"
    assert world.served_hyperpod() == f"{PREFIX}/v2"
    assert world.kube.get("InferenceEndpointConfig", "hyperwarm-models", "llama")["spec"]["modelVersion"] == "v2"


def test_hyperpod_patch_is_a_merge_patch_with_the_resource_version_read(world, context):
    refresh(world, world.upload("v2"), context)
    _, name, patch = world.kube.patches[-1]
    assert name == "llama"
    assert patch["metadata"]["resourceVersion"].isdigit()
    assert set(patch["spec"]) == {"modelSourceConfig", "modelVersion"}


def test_hyperpod_conflict_is_retried_on_the_fresh_object(world, context):
    world.kube.race_next.add("llama")
    refresh(world, world.upload("v2"), context)
    assert world.served_hyperpod() == f"{PREFIX}/v2"


def test_old_endpoint_config_serves_until_sagemaker_reports_in_service(world, context):
    refresh(world, world.upload("v2"), context)
    assert world.sm.describe_endpoint(EndpointName=ENDPOINT)["EndpointStatus"] == "Updating"
    assert world.served_endpoint() == f"s3://{BUCKET}/{PREFIX}/v1/"
    result = finish_endpoint(world, context)
    assert result["status"] == "refreshed"
    assert world.served_endpoint() == f"s3://{BUCKET}/{PREFIX}/v2/"


def test_update_endpoint_uses_blue_green_and_retains_variant_properties(world, context):
    refresh(world, world.upload("v2"), context)
    update = moto_ext.UPDATES[-1]
    assert update["RetainAllVariantProperties"] is True
    policy = update["DeploymentConfig"]["BlueGreenUpdatePolicy"]
    assert policy["TrafficRoutingConfiguration"] == {
        "Type": "CANARY", "WaitIntervalInSeconds": 600, "CanarySize": {"Type": "CAPACITY_PERCENT", "Value": 10}}
    assert update["DeploymentConfig"]["AutoRollbackConfiguration"] == {"Alarms": [{"AlarmName": "llama-prod-5xx"}]}


def test_routing_weights_instances_capture_and_kms_survive_the_clone(world, context):
    before = world.endpoint_config()
    refresh(world, world.upload("v2"), context)
    finish_endpoint(world, context)
    after = world.endpoint_config()
    assert after["EndpointConfigName"] != before["EndpointConfigName"]
    main = {v["VariantName"]: v for v in after["ProductionVariants"]}
    assert main["main"]["RoutingConfig"] == ROUTING
    assert main["embed"]["RoutingConfig"] == {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}
    assert [(v["InstanceType"], v["InitialInstanceCount"], v["InitialVariantWeight"]) for v in after["ProductionVariants"]] \
        == [(v["InstanceType"], v["InitialInstanceCount"], v["InitialVariantWeight"]) for v in before["ProductionVariants"]]
    assert after["DataCaptureConfig"] == before["DataCaptureConfig"]
    assert after["KmsKeyId"] == before["KmsKeyId"]
    assert main["embed"]["ModelName"] == "embedder"


def test_detailed_observability_survives_the_clone(world, context):
    """The TTFT alarms read what detailed observability publishes: a refreshed config must keep it on."""
    assert world.endpoint_config()["MetricsConfig"] == METRICS
    refresh(world, world.upload("v2"), context)
    finish_endpoint(world, context)
    after = world.endpoint_config()
    assert after["EndpointConfigName"] != "llama-prod-cfn"
    assert after["MetricsConfig"] == METRICS


def test_superseded_refresh_resources_are_deleted_once_the_next_version_serves(world, context):
    refresh(world, world.upload("v2"), context)
    finish_endpoint(world, context)
    v2_config = world.endpoint_config()["EndpointConfigName"]
    v2_model = next(v["ModelName"] for v in world.endpoint_config()["ProductionVariants"] if v["VariantName"] == "main")
    refresh(world, world.upload("v3"), context)
    result = finish_endpoint(world, context)
    assert result["deleted"] == [f"EndpointConfig/{v2_config}", f"Model/{v2_model}"]
    assert world.served_endpoint() == f"s3://{BUCKET}/{PREFIX}/v3/"
    names = {c["EndpointConfigName"] for c in world.sm.list_endpoint_configs()["EndpointConfigs"]}
    assert "llama-prod-cfn" in names  # created by CloudFormation: never deleted by a refresh


def test_rollback_keeps_the_old_version_deletes_only_what_it_created_and_is_dead_lettered(world, context):
    event = world.upload("v2")
    configs, models = world.sm.list_endpoint_configs()["EndpointConfigs"], world.sm.list_models()["Models"]
    refresh(world, event, context)
    assert len(world.sm.list_endpoint_configs()["EndpointConfigs"]) == len(configs) + 1
    result = finish_endpoint(world, context, succeed=False)
    assert (result["status"], result["reason"]) == ("rollout-failed", "rolled-back")
    assert world.served_endpoint() == f"s3://{BUCKET}/{PREFIX}/v1/"
    assert world.sm.list_endpoint_configs()["EndpointConfigs"] == configs  # the replay creates them again
    assert world.sm.list_models()["Models"] == models
    [letter] = world.dead_letters()  # the README promised it; before, nothing was sent
    assert (letter["reason"], letter["event"], letter["targets"]) == ("rolled-back", event, [f"endpoint:{ENDPOINT}"])


def test_duplicate_event_is_a_no_op(world, context):
    event = world.upload("v2")
    refresh(world, event, context)
    patches = len(world.kube.patches)
    assert refresh(world, event, context) == {"status": "skipped", "version": "v2", "reason": "duplicate", "targets": {
        t: {"status": "skipped", "reason": "duplicate"} for t in (HYPERPOD_ID, f"endpoint:{ENDPOINT}")}}
    assert len(world.kube.patches) == patches
    assert len(moto_ext.UPDATES) == 1


def test_redelivered_manifest_with_new_event_id_is_skipped_as_duplicate(world, context):
    event = world.upload("v2")
    refresh(world, event, context)
    finish_endpoint(world, context)
    again = {**event, "id": "another-delivery", "detail": {**event["detail"],
                                                           "object": {**event["detail"]["object"], "sequencer": "FF"}}}
    assert refresh(world, again, context)["status"] == "skipped"
    assert len(moto_ext.UPDATES) == 1


def test_older_version_arriving_late_never_rolls_back(world, context):
    v2, v3 = world.upload("v2"), world.upload("v3")
    refresh(world, v3, context)
    finish_endpoint(world, context)
    assert refresh(world, v2, context)["status"] == "skipped"
    assert world.served_hyperpod() == f"{PREFIX}/v3"
    assert world.served_endpoint() == f"s3://{BUCKET}/{PREFIX}/v3/"


def test_partial_upload_without_manifest_changes_nothing(world, context):
    world.upload("v2", manifest=False)
    data_event = s3_event(f"{PREFIX}/v2/weights/model.safetensors", "AB")
    assert refresh(world, data_event, context) == {"status": "skipped", "reason": "not-a-manifest"}
    assert world.served_hyperpod() == f"{PREFIX}/v1"
    assert world.kube.patches == [] and moto_ext.UPDATES == []


def test_manifest_listing_a_missing_object_changes_nothing_and_is_dead_lettered(world, context):
    event = world.upload("v2", listed={"weights/shard-2.safetensors": 10})
    result = refresh(world, event, context)
    assert result["status"] == "failed" and result["reason"] == "manifest-object-missing"
    assert world.served_hyperpod() == f"{PREFIX}/v1" and moto_ext.UPDATES == []
    [letter] = world.dead_letters()
    assert letter["event"] == event and letter["reason"] == "manifest-object-missing"


def test_size_mismatch_changes_nothing(world, context):
    event = world.upload("v2", listed={"config.json": 999})
    assert refresh(world, event, context)["reason"] == "manifest-mismatch"
    assert world.served_hyperpod() == f"{PREFIX}/v1"
    assert world.served_endpoint() == f"s3://{BUCKET}/{PREFIX}/v1/"


def test_checksum_mismatch_changes_nothing(world, context):
    files = {"config.json": b"{}", "weights/model.safetensors": b"x" * 64}
    event = world.upload("v2", files=files)
    world.s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}/v2/config.json", Body=b"[]", ChecksumAlgorithm="SHA256")
    assert refresh(world, event, context)["reason"] == "manifest-mismatch"
    assert world.served_hyperpod() == f"{PREFIX}/v1"


def test_corrupt_manifest_changes_nothing(world, context):
    key = f"{PREFIX}/v2/manifest.json"
    put = world.s3.put_object(Bucket=BUCKET, Key=key, Body=b"{not json")
    assert refresh(world, s3_event(key, "AC", put["VersionId"]), context)["reason"] == "corrupt-manifest"
    assert world.served_hyperpod() == f"{PREFIX}/v1"


def test_unknown_bucket_and_prefix_and_malformed_events_are_skipped_not_dead_lettered(world, context):
    assert refresh(world, s3_event(f"{PREFIX}/v2/manifest.json", "AD", bucket="elsewhere"), context)["reason"] \
        == "unknown-bucket"
    assert refresh(world, s3_event("models/other/v2/manifest.json", "AE"), context)["reason"] == "unknown-prefix"
    assert refresh(world, {"detail-type": "Object Created", "source": "aws.s3"}, context)["reason"] == "malformed-event"
    assert world.dead_letters() == []


def test_failure_midway_keeps_the_old_version_serving(world, context):
    world.kube.fail_next["llama"] = 503  # the cache is repointed, then the deployment patch fails
    event = world.upload("v2")
    try:
        refresh(world, event, context)
        raised = None
    except Exception as exc:  # transient: raised so the invocation is retried
        raised = exc
    assert type(raised).__name__ == "TransientError"
    assert world.served_hyperpod() == f"{PREFIX}/v1"
    assert world.sm.describe_endpoint(EndpointName=ENDPOINT)["EndpointStatus"] == "Updating"  # other target proceeds
    assert refresh(world, event, context)["status"] == "refreshed"  # the retry completes it
    assert world.served_hyperpod() == f"{PREFIX}/v2"
    assert len(moto_ext.UPDATES) == 1


def test_missing_target_is_permanent_and_leaves_the_other_target_refreshed(world, context):
    world.kube.objects.pop(("inferenceendpointconfigs", "hyperwarm-models", "llama"))
    result = refresh(world, world.upload("v2"), context)
    assert result["reason"] == "target-not-found"
    [letter] = world.dead_letters()
    assert letter["targets"] == [HYPERPOD_ID]
    assert len(moto_ext.UPDATES) == 1


def test_version_arriving_mid_rollout_rolls_when_the_rollout_ends(world, context):
    refresh(world, world.upload("v2"), context)  # the endpoint rolls out v2
    result = refresh(world, world.upload("v3"), context)
    assert result["targets"][f"endpoint:{ENDPOINT}"] == {"status": "queued", "reason": "target-busy"}
    assert world.served_hyperpod() == f"{PREFIX}/v3"  # the free target moved on
    assert finish_endpoint(world, context)["next"] == ["started"]  # v2 serves; v3 starts at once
    assert moto_ext.UPDATES[-1]["EndpointConfigName"].startswith(f"{ENDPOINT}-v3-")
    finish_endpoint(world, context)
    assert world.served_endpoint() == f"s3://{BUCKET}/{PREFIX}/v3/"
    assert world.dead_letters() == []


def test_dry_run_changes_nothing_and_a_live_run_then_refreshes(kube_server, monkeypatch, context):
    from moto import mock_aws
    from refresh_world import TABLE, start_world, targets
    with mock_aws():
        world = start_world(kube_server, monkeypatch, targets(), dry_run=True)
        event = world.upload("v2")
        result = refresh(world, event, context)
        assert result["status"] == "dry-run" and result["decisions"][HYPERPOD_ID]["action"] == "start"
        assert world.kube.patches == [] and moto_ext.UPDATES == []
        assert world.served_hyperpod() == f"{PREFIX}/v1"
        assert world.ddb.Table(TABLE).scan()["Items"] == []  # no idempotency record, no state, no lock
        monkeypatch.setenv("HYPERWARM_DRY_RUN", "false")
        handler._settings = None
        assert refresh(world, event, context)["status"] == "refreshed"  # the same event, now live
        assert world.served_hyperpod() == f"{PREFIX}/v2"


def test_a_timed_out_update_endpoint_that_went_through_is_adopted_and_leaks_nothing(world, context, monkeypatch):
    """At the boto3 boundary: SageMaker accepts UpdateEndpoint, the answer times out. The retry finds the
    endpoint updating; its end is adopted as the refresh, and its config and models are deleted once v3 serves."""
    import pytest
    from botocore.client import BaseClient
    from botocore.exceptions import ReadTimeoutError

    from hyperwarm.functions.cache_refresh.errors import TransientError

    real = BaseClient._make_api_call

    def lost_answer(self, name, params):
        answer = real(self, name, params)
        if name == "UpdateEndpoint" and len(moto_ext.UPDATES) == 1:
            raise ReadTimeoutError(endpoint_url="https://api.sagemaker.us-west-2.amazonaws.com")
        return answer
    monkeypatch.setattr(BaseClient, "_make_api_call", lost_answer)
    configs = {c["EndpointConfigName"] for c in world.sm.list_endpoint_configs()["EndpointConfigs"]}
    models = {m["ModelName"] for m in world.sm.list_models()["Models"]}
    event = world.upload("v2")
    with pytest.raises(TransientError):
        refresh(world, event, context)
    # Lambda's retry: SageMaker is deploying the unrecorded config (PendingDeploymentSummary), which
    # becomes the rollout in flight; its end is the state change's
    assert refresh(world, event, context)["targets"][f"endpoint:{ENDPOINT}"]["reason"] == "duplicate"
    assert finish_endpoint(world, context)["status"] == "refreshed"
    assert world.served_endpoint() == f"s3://{BUCKET}/{PREFIX}/v2/"
    refresh(world, world.upload("v3"), context)
    finish_endpoint(world, context)
    serving = world.endpoint_config()
    left_configs = {c["EndpointConfigName"] for c in world.sm.list_endpoint_configs()["EndpointConfigs"]} - configs
    left_models = {m["ModelName"] for m in world.sm.list_models()["Models"]} - models
    assert left_configs == {serving["EndpointConfigName"]}
    assert left_models == {v["ModelName"] for v in serving["ProductionVariants"]} - models
    assert len(moto_ext.UPDATES) == 2


def test_a_log_field_may_be_named_like_the_log_lines_text(world, context, caplog) -> None:
    """The ports' log takes its text positionally: a field called ``message`` is a field, not a TypeError
    (a warm rollout's failure once logged its message so, and every later step raised)."""
    import dataclasses
    import logging

    from hyperwarm.functions.cache_refresh import handler as h
    from hyperwarm.functions.cache_refresh.ports import Ports

    (default,) = [f.default for f in dataclasses.fields(Ports) if f.name == "log"]
    default("text", message="a field")  # the default: a no-op
    with caplog.at_level(logging.INFO):
        h.ports("r").log("text", message="a field", target="t", name="n")
    (record,) = [r for r in caplog.records if r.getMessage() == "text"]
    assert (record.field_message, record.target, record.field_name) == ("a field", "t", "n")
