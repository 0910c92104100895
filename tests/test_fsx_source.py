"""Models read from FSx for Lustre: props and cdk.json, the rendered source, the network rules, the VPC, IAM and
the cold start (``hyperwarm.caches.fsx``)."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import aws_cdk as cdk
import pytest
import test_caches_manifests
from aws_cdk.assertions import Template
from test_cached_models import build, llama
from test_caches_config import environment, model, problems
from test_caches_manifests import crd_errors

from hyperwarm import cli
from hyperwarm.caches import ColdStart, FsxModelSource, ModelSource, Probes, PropsError, gigabytes
from hyperwarm.caches.fsx import FILE_SYSTEM_METADATA, file_system_readers, per_node_gbps, readers, throughput_mb_s
from hyperwarm.caches.objects import startup_budget_s
from hyperwarm.serving.settings import MODEL_DIR
from stacks.__main__ import COMMANDS
from stacks.config.environment import parse_environment, parse_environments
from stacks.plan import Scenarios, plan_model

crd_schemas = test_caches_manifests.crd_schemas  # the fixture

FS, SG = "fs-0123456789abcdef0", "sg-0fedcba9876543210"
SOURCE = {"file_system_id": FS, "mount_name": "abcdef12", "prefix": "models/qwen", "version": "v1",
          "security_group_id": SG}


def fsx(**overrides: Any) -> FsxModelSource:
    return FsxModelSource(**{**SOURCE, **overrides})


def endpoint_of(caches: Any, name: str = "llama") -> dict[str, Any]:
    (obj,) = [o for o in caches.objects if o["kind"] == "InferenceEndpointConfig" and o["metadata"]["name"] == name]
    return obj


# The source in the library and in cdk.json -------------------------------------------------------------------

@pytest.mark.parametrize(("overrides", "message"), [
    ({"file_system_id": "fs-12345"}, "file_system_id = 'fs-12345' -- allowed: an FSx file system id"),
    ({"file_system_id": "fsx-0123456789abcdef0"}, "file_system_id = 'fsx-0123456789abcdef0' -- allowed: an FSx"),
    ({"mount_name": "toolongname"}, "mount_name = 'toolongname' -- allowed: an FSx for Lustre mount name"),
    ({"security_group_id": "sg-xyz"}, "security_group_id = 'sg-xyz' -- allowed: a security group id"),
    ({"vpc_id": "vpc-1"}, "vpc_id = 'vpc-1' -- allowed: a VPC id"),
    ({"dns_name": "my-fs.example.com"}, "dns_name = 'my-fs.example.com' -- allowed: an FSx file system DNS name"),
    ({"dns_name": "fs-0aaaaaaaaaaaaaaaa.fsx.us-west-2.amazonaws.com"},
     f"dns_name = 'fs-0aaaaaaaaaaaaaaaa.fsx.us-west-2.amazonaws.com' -- names another file system than {FS}"),
    ({"prefix": "/models/qwen"}, "prefix = '/models/qwen' -- allowed: a directory in the file system"),
    ({"per_unit_storage_throughput": 300}, "per_unit_storage_throughput = 300 -- allowed: 12, 40, 50, 100, 125"),
    ({"storage_capacity_gib": 100}, "storage_capacity_gib = 100 -- allowed: 600..2147483647"),
])
def test_a_bad_fsx_source_fails_naming_field_value_and_what_is_allowed(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(PropsError, match=message.replace("(", r"\(").replace(")", r"\)")) as error:
        fsx(**overrides)
    assert len(error.value.problems) == 1


@pytest.mark.parametrize(("overrides", "path", "words"), [
    ({"file_system_id": "fs-12345"}, "file_system_id: 'fs-12345'", "an FSx file system id"),
    ({"mount_name": "toolongname"}, "mount_name: 'toolongname'", "an FSx for Lustre mount name"),
    ({"security_group_id": "sg-xyz"}, "security_group_id: 'sg-xyz'", "a security group id"),
    ({"dns_name": "fs-0aaaaaaaaaaaaaaaa.fsx.us-west-2.amazonaws.com"},
     "dns_name: 'fs-0aaaaaaaaaaaaaaaa.fsx.us-west-2.amazonaws.com'", f"names another file system than {FS}"),
    ({"per_unit_storage_throughput": 300}, "per_unit_storage_throughput: 300", "125"),
    ({"vpc_id": "vpc-1"}, "vpc_id: 'vpc-1'", "a VPC id"),
])
def test_a_bad_fsx_source_in_cdk_json_fails_synth_with_one_message_naming_its_path(
        overrides: dict[str, Any], path: str, words: str) -> None:
    message = problems(environment(model(source={**SOURCE, **overrides})))
    lines = message.splitlines()[1:]
    assert len(lines) == 1, message
    assert lines[0].strip().startswith(f"environments.dev.caches.models[0].source.{path} -- ") and words in lines[0]


def test_an_fsx_source_without_its_security_group_names_the_missing_field() -> None:
    source = {k: v for k, v in SOURCE.items() if k != "security_group_id"}
    message = problems(environment(model(source=source)))
    assert "environments.dev.caches.models[0].source.security_group_id: Field required" in message
    assert "bucket" not in message  # checked against the FSx arm alone


def test_cdk_json_gives_the_library_its_fsx_source() -> None:
    raw = environment(model(source={**SOURCE, "storage_capacity_gib": 4800, "per_unit_storage_throughput": 500}))
    source = parse_environment("dev", raw).caches.models[0].source
    assert source == fsx(storage_capacity_gib=4800, per_unit_storage_throughput=500)
    assert (source.location, source.uri) == ("models/qwen/v1", f"fsx://{FS}/models/qwen/v1")


def test_the_node_cache_fills_from_s3_only() -> None:
    with pytest.raises(PropsError, match="weights_cache = 'node' -- the node cache fills from S3; a fsx source"):
        llama(source=fsx(), weights_cache="node")


# The file system's VPC ----------------------------------------------------------------------------------------

EXISTING_VPC = {"vpc_id": "vpc-0aaaaaaaaaaaaaaaa", "availability_zones": ["us-west-2a", "us-west-2b"],
                "private_subnet_ids": ["subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"]}


def test_a_file_system_in_another_vpc_than_the_existing_one_fails_synth_naming_the_field() -> None:
    raw = {**environment(model(source={**SOURCE, "vpc_id": "vpc-0bbbbbbbbbbbbbbbb"})), "vpc": EXISTING_VPC}
    message = problems(raw)
    assert "caches.models[0].source.vpc_id: 'vpc-0bbbbbbbbbbbbbbbb' -- file system fs-0123456789abcdef0 is not in " \
           "the cluster's VPC vpc-0aaaaaaaaaaaaaaaa" in message
    assert "allowed: vpc-0aaaaaaaaaaaaaaaa" in message
    same = {**environment(model(source={**SOURCE, "vpc_id": "vpc-0aaaaaaaaaaaaaaaa"})), "vpc": EXISTING_VPC}
    assert parse_environment("dev", same).caches.models[0].source.vpc_id == "vpc-0aaaaaaaaaaaaaaaa"


def test_a_vpc_the_app_creates_is_unknown_at_synth_and_not_compared() -> None:
    raw = environment(model(source={**SOURCE, "vpc_id": "vpc-0bbbbbbbbbbbbbbbb"}))
    assert parse_environment("dev", raw).caches.models[0].source.vpc_id == "vpc-0bbbbbbbbbbbbbbbb"


def test_the_construct_refuses_a_file_system_outside_the_clusters_vpc() -> None:
    # stand_ins.imported_cluster's VPC is vpc-0123456789abcdef0, known at synth.
    with pytest.raises(PropsError, match=r"models\[0\].source.vpc_id: 'vpc-0bbbbbbbbbbbbbbbb' -- file system "
                                         r"fs-0123456789abcdef0 is not in the cluster's VPC vpc-0123456789abcdef0"):
        build(llama(source=fsx(vpc_id="vpc-0bbbbbbbbbbbbbbbb")))
    build(llama(source=fsx(vpc_id="vpc-0123456789abcdef0")))


# What the operator and the model server are told ----------------------------------------------------------------

def test_the_endpoint_reads_the_version_directory_of_the_file_system_and_validates(crd_schemas) -> None:
    caches = build(llama(source=fsx()))
    endpoint = endpoint_of(caches)
    assert endpoint["spec"]["modelSourceConfig"] == {
        "modelSourceType": "fsx",
        "fsxStorage": {"fileSystemId": FS, "dnsName": f"{FS}.fsx.us-west-2.amazonaws.com", "mountName": "abcdef12"},
        "modelLocation": "models/qwen/v1"}
    assert endpoint["spec"]["modelVersion"] == "v1"
    assert endpoint["spec"]["modelCacheConfig"]["weightsCache"]["enabled"] is True
    for obj in caches.objects:
        if obj["apiVersion"].startswith("inference.sagemaker.aws.amazon.com/"):
            assert crd_errors(obj, crd_schemas) == [], obj["kind"]


def test_a_given_dns_name_is_rendered_as_given() -> None:
    dns = f"{FS}.fsx.eu-west-1.amazonaws.com"
    assert endpoint_of(build(llama(source=fsx(dns_name=dns))))["spec"]["modelSourceConfig"]["fsxStorage"]["dnsName"] \
        == dns


def test_the_model_server_loads_the_mounted_directory() -> None:
    worker = endpoint_of(build(llama(source=fsx())))["spec"]["worker"]
    assert worker["modelVolumeMount"]["mountPath"] == MODEL_DIR
    assert {e["name"]: e["value"] for e in worker["environmentVariables"]}["SM_VLLM_MODEL"] == MODEL_DIR


# The network path -----------------------------------------------------------------------------------------------

NODES = "sg-0123456789abcdef0"  # the cluster's node group (test_cached_models)
LUSTRE = [(988, 988), (1018, 1023)]


def _by_direction(rules: Any) -> dict[tuple[str, str], list[tuple[int, int]]]:
    """(group, source) -> the TCP port ranges one admits from the other."""
    found: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for rule in rules:
        props = rule["Properties"]
        assert props["IpProtocol"] == "tcp" and rule["Metadata"][FILE_SYSTEM_METADATA] == FS
        found.setdefault((props["GroupId"], props["SourceSecurityGroupId"]), []).append(
            (props["FromPort"], props["ToPort"]))
    return {key: sorted(ranges) for key, ranges in found.items()}


def test_lustres_ports_open_both_ways_between_nodes_and_file_servers_once_per_file_system() -> None:
    """The file system's group admits the nodes, and the nodes' group admits the file servers: Lustre's clients
    take connections from the servers too (AWS's "Lustre client VPC security group rules")."""
    caches = build(llama(source=fsx()), llama(name="qwen", source=fsx(version="v2")))
    rules = Template.from_stack(cdk.Stack.of(caches)).find_resources("AWS::EC2::SecurityGroupIngress")
    assert _by_direction(rules.values()) == {(SG, NODES): LUSTRE, (NODES, SG): LUSTRE}


def test_s3_models_open_nothing() -> None:
    template = Template.from_stack(cdk.Stack.of(build(llama())))
    template.resource_count_is("AWS::EC2::SecurityGroupIngress", 0)


# IAM --------------------------------------------------------------------------------------------------------------

def test_an_fsx_model_grants_no_role_anything() -> None:
    """The pods read through the CSI driver's mount: no S3 grant, no FSx API call (hyperwarm.caches.fsx)."""
    template = Template.from_stack(cdk.Stack.of(build(llama(source=fsx()))))
    assert template.find_resources("AWS::IAM::Policy") == {}
    assert template.find_resources("AWS::IAM::Role") == {}
    with_s3 = Template.from_stack(cdk.Stack.of(build(llama(), llama(name="qwen", source=fsx()))))
    policies = with_s3.find_resources("AWS::IAM::Policy").values()
    assert len(policies) == 2  # the operator's two model readers, for the S3 model alone
    for policy in policies:
        text = json.dumps(policy)
        assert "llama-3.1-8b/v1" in text and "fsx" not in text.lower() and "models/qwen" not in text


# The cold start ---------------------------------------------------------------------------------------------------

def test_the_read_rate_is_the_file_systems_disk_throughput_shared_by_the_models_pods() -> None:
    source = fsx(storage_capacity_gib=2400, per_unit_storage_throughput=250)
    assert throughput_mb_s(source) == pytest.approx(2400 / 1024 * 250)  # 586 MB/s
    assert per_node_gbps(source, 1) == pytest.approx(2400 / 1024 * 250 * 8 / 1000)
    assert per_node_gbps(source, 4) == pytest.approx(per_node_gbps(source, 1) / 4)
    # The default is HyperPod's smallest file system: 1.2 TiB (1200 GiB) at 125 MB/s/TiB.
    assert throughput_mb_s(fsx()) == pytest.approx(1200 / 1024 * 125)


def test_cold_start_downloads_an_fsx_model_at_its_file_systems_rate_and_s3_at_the_s3_rate() -> None:
    cold_start = ColdStart()
    on_fsx = llama(source=fsx(storage_capacity_gib=2400, per_unit_storage_throughput=250), size=gigabytes(15),
                   replicas=2)
    assert cold_start.rate_gbps(on_fsx) == pytest.approx(per_node_gbps(on_fsx.source, 2))
    assert cold_start.download_s(on_fsx) == pytest.approx(15 * 8 / per_node_gbps(on_fsx.source, 2))
    on_s3 = dataclasses.replace(on_fsx, source=ModelSource("my-models", "qwen", "v1"))
    assert cold_start.rate_gbps(on_s3) == cold_start.bandwidth_gbps == 1.0
    faster = dataclasses.replace(on_fsx, source=fsx(storage_capacity_gib=2400, per_unit_storage_throughput=1000))
    assert cold_start.cold_s(faster) < cold_start.cold_s(on_fsx)


def test_the_readers_are_every_node_the_operator_fills_and_every_model_on_the_file_system() -> None:
    """With the weights cached (the operator's cache, the default) every node of the listed groups reads the model
    at a deploy, not only its replicas; models on one file system read it together."""
    nodes = {"inference": 4, "spare": 2}
    one = llama(source=fsx(), replicas=1, instance_group="inference")
    assert readers(one, nodes) == 4
    assert readers(dataclasses.replace(one, fallback_groups=("spare",)), nodes) == 6
    assert readers(dataclasses.replace(one, replicas=9), nodes) == 9  # more pods than nodes: the pods
    assert readers(dataclasses.replace(one, weights_cache="off"), nodes) == 1  # no cache: only the pods read
    other = llama(name="qwen", source=fsx(version="v2"), replicas=1, instance_group="inference")
    elsewhere = llama(name="mistral", source=fsx(file_system_id="fs-0aaaaaaaaaaaaaaaa"), instance_group="inference")
    on_s3 = llama(name="s3", instance_group="inference")
    assert file_system_readers([one, other, elsewhere, on_s3], nodes) == {FS: 8, "fs-0aaaaaaaaaaaaaaaa": 4}
    cold_start = ColdStart(fsx_readers=file_system_readers([one, other], nodes))
    assert cold_start.rate_gbps(one) == pytest.approx(per_node_gbps(one.source, 8))


def test_the_startup_probe_allows_for_every_node_of_the_group_reading_the_file_system() -> None:
    """test_cached_models' group has 2 nodes: a 1-replica FSx model's budget is that of 2 readers."""
    model = llama(source=fsx(), size=gigabytes(100), replicas=1, probes=Probes())
    threshold = endpoint_of(build(model))["spec"]["worker"]["probes"]["startupProbe"]["failureThreshold"]
    assert threshold == math.ceil(startup_budget_s(model, ColdStart(fsx_readers={FS: 2})) / 10)
    assert threshold > math.ceil(startup_budget_s(model) / 10)  # the model's own max_replicas: 1 reader
    both = endpoint_of(build(model, dataclasses.replace(model, name="qwen")))
    assert both["spec"]["worker"]["probes"]["startupProbe"]["failureThreshold"] == \
        math.ceil(startup_budget_s(model, ColdStart(fsx_readers={FS: 4})) / 10)


def test_the_planner_shows_the_fsx_rate_and_how_it_came_about(project_context) -> None:
    """staging's FSx model: 1 replica on the 2 nodes of inference-g6e, both filled by the operator."""
    staging = parse_environments(project_context["environments"])["staging"]
    on_fsx = next(m for m in staging.caches.models if isinstance(m.source, FsxModelSource))
    plan = plan_model(on_fsx, staging, ColdStart(), None, None, Scenarios(events=()))
    assert plan.rate_gbps == pytest.approx(per_node_gbps(on_fsx.source, 2))
    assert plan.rate_basis.startswith(f"FSx {on_fsx.source.file_system_id}: 2.34 TiB x 250 MB/s/TiB = 586 MB/s "
                                      "shared by 2 node(s) = 2.3 Gbit/s per node (the operator fills the weights "
                                      "cache of every node of inference-g6e at once;")
    assert "https://docs.aws.amazon.com/fsx/latest/LustreGuide/ssd-storage.html" in plan.rate_basis
    on_s3 = next(m for m in staging.caches.models if isinstance(m.source, ModelSource))
    assert plan_model(on_s3, staging, ColdStart(), None, None, Scenarios(events=())).rate_basis == ""


def test_the_planner_adds_up_the_models_on_one_file_system(project_context) -> None:
    env = json.loads(json.dumps(project_context["environments"]["staging"]))
    (fsx_model,) = [m for m in env["caches"]["models"] if "file_system_id" in m["source"]]
    env["caches"]["models"] = [m for m in env["caches"]["models"] if m is not fsx_model] + [
        fsx_model, {**fsx_model, "name": "mistral-7b-fsx-2", "source": {**fsx_model["source"], "version": "v2"}}]
    staging = parse_environment("staging", env)
    on_fsx = next(m for m in staging.caches.models if m.name == "mistral-7b-fsx")
    plan = plan_model(on_fsx, staging, ColdStart(), None, None, Scenarios(events=()))
    assert plan.rate_gbps == pytest.approx(per_node_gbps(on_fsx.source, 4))
    assert "shared by 4 node(s)" in plan.rate_basis
    assert "beside 2 node read(s) of the other models on this file system" in plan.rate_basis


def test_plan_cache_prints_the_fsx_rate(monkeypatch, tmp_path, project_context, capsys) -> None:
    (tmp_path / "cdk.json").write_text(json.dumps({"app": "python3 app.py", "context": project_context}))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["plan", "cache", "--env", "staging"], commands=COMMANDS, prog="python -m stacks") == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"mistral-7b-fsx: weights from FSx {FS}: 2.34 TiB x 250 MB/s/TiB = 586 MB/s shared by 2 node(s) = " \
           "2.3 Gbit/s per node" in out


# The example ------------------------------------------------------------------------------------------------------

def test_staging_serves_a_model_from_fsx_and_the_synthesized_stack_opens_its_file_system(synthesized) -> None:
    caches = synthesized.template("hyperwarm-staging-caches")
    rules = [r for r in caches["Resources"].values() if r["Type"] == "AWS::EC2::SecurityGroupIngress"
             and FILE_SYSTEM_METADATA in r.get("Metadata", {})]
    # The node security group the cluster stack creates is exported to the caches stack.
    nodes = {json.dumps(r["Properties"][key]) for r in rules for key in ("GroupId", "SourceSecurityGroupId")
             if "ClusterSecurityGroup" in json.dumps(r["Properties"][key])}
    (node_group,) = nodes
    by_direction = _by_direction([{**r, "Properties": {k: json.dumps(v) if isinstance(v, dict) else v
                                                       for k, v in r["Properties"].items()}} for r in rules])
    assert by_direction == {("sg-0123456789abcdef0", node_group): LUSTRE, (node_group, "sg-0123456789abcdef0"): LUSTRE}
