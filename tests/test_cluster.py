"""HyperPodEksCluster: what the synthesized cluster stacks contain, and the construct's own rules."""

from __future__ import annotations

import fnmatch
import json
import re

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2, aws_eks_v2 as eks, aws_iam as iam
from aws_cdk.assertions import Match, Template

from hyperwarm import HyperPodEksCluster, HyperPodEksClusterProps, InstanceGroupSpec, NodeTaint
from hyperwarm.caches import gigabytes
from stacks.config.environment import parse_environments

ENVIRONMENTS = ("dev", "staging", "prod")


def only(resources: dict) -> dict:
    assert len(resources) == 1, list(resources)
    return next(iter(resources.values()))


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_one_hyperpod_cluster_orchestrated_by_eks(synthesized, env) -> None:
    name = f"hyperwarm-{env}-cluster"
    cluster = only(synthesized.resources(name, "AWS::SageMaker::Cluster"))["Properties"]
    eks_id = next(iter(synthesized.resources(name, "AWS::EKS::Cluster")))
    assert cluster["Orchestrator"] == {"Eks": {"ClusterArn": {"Fn::GetAtt": [eks_id, "Arn"]}}}
    assert cluster["NodeRecovery"] == "Automatic"


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_instance_groups_follow_the_configuration(synthesized, project_context, env) -> None:
    config = parse_environments(project_context["environments"])[env]
    groups = only(synthesized.resources(f"hyperwarm-{env}-cluster", "AWS::SageMaker::Cluster"))["Properties"][
        "InstanceGroups"]
    assert [(g["InstanceGroupName"], g["InstanceType"], g["InstanceCount"], g["ThreadsPerCore"]) for g in groups] == [
        (g.name, g.instance_type, g.instance_count, g.threads_per_core) for g in config.instance_groups]
    for group in groups:
        assert group["LifeCycleConfig"]["OnCreate"] == "on_create.sh"


def test_prod_groups_carry_health_checks_labels_taints_and_ebs(synthesized) -> None:
    groups = {g["InstanceGroupName"]: g for g in only(synthesized.resources(
        "hyperwarm-prod-cluster", "AWS::SageMaker::Cluster"))["Properties"]["InstanceGroups"]}
    p5 = groups["inference-p5"]
    assert p5["OnStartDeepHealthChecks"] == ["InstanceStress", "InstanceConnectivity"]
    assert p5["KubernetesConfig"] == {"Labels": {"hyperwarm.io/tier": "serving"}}
    assert p5["InstanceStorageConfigs"] == [{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}]
    assert groups["inference-g6e"]["KubernetesConfig"]["Taints"] == [
        {"Key": "hyperwarm.io/dedicated", "Value": "inference", "Effect": "NoSchedule"}]


def test_hyperpod_runs_in_private_subnets_with_the_intra_cluster_group(synthesized) -> None:
    template = synthesized.template("hyperwarm-dev-cluster")
    vpc_config = only(synthesized.resources("hyperwarm-dev-cluster", "AWS::SageMaker::Cluster"))["Properties"][
        "VpcConfig"]
    private = {k for k, v in template["Resources"].items()
               if v["Type"] == "AWS::EC2::Subnet" and not v["Properties"].get("MapPublicIpOnLaunch")}
    assert {s["Ref"] for s in vpc_config["Subnets"]} == private and len(private) == 2
    (group_ref,) = vpc_config["SecurityGroupIds"]
    group_id = group_ref["Fn::GetAtt"][0]
    self_rule = [r for r in synthesized.resources("hyperwarm-dev-cluster", "AWS::EC2::SecurityGroupIngress").values()
                 if r["Properties"]["GroupId"] == group_ref]
    assert self_rule and self_rule[0]["Properties"]["SourceSecurityGroupId"] == {"Fn::GetAtt": [group_id, "GroupId"]}
    assert self_rule[0]["Properties"]["IpProtocol"] == "-1"


def test_vpc_has_nat_and_s3_gateway_endpoint(synthesized) -> None:
    template = Template.from_json(synthesized.template("hyperwarm-prod-cluster"))
    template.resource_count_is("AWS::EC2::NatGateway", 3)
    template.has_resource_properties("AWS::EC2::VPCEndpoint", {"VpcEndpointType": "Gateway"})
    template.has_resource_properties("AWS::EC2::Subnet", {"AvailabilityZone": "us-east-1c"})


def test_eks_uses_api_authentication_private_endpoint_logging_and_encryption(synthesized) -> None:
    eks = only(synthesized.resources("hyperwarm-dev-cluster", "AWS::EKS::Cluster"))["Properties"]
    assert eks["AccessConfig"]["AuthenticationMode"] in ("API", "API_AND_CONFIG_MAP")
    assert eks["ResourcesVpcConfig"]["EndpointPublicAccess"] is False
    assert eks["ResourcesVpcConfig"]["EndpointPrivateAccess"] is True
    assert {t for e in eks["Logging"]["ClusterLogging"]["EnabledTypes"] for t in e.values()} == {
        "api", "audit", "authenticator", "controllerManager", "scheduler"}
    assert eks["EncryptionConfig"][0]["Resources"] == ["secrets"]
    assert eks["Version"] == "1.33"


def test_without_named_admins_the_deploying_identity_administers_the_cluster_never_the_account(synthesized) -> None:
    """dev (no cluster_admins): the CDK deploy role, which cdk deploy assumes; staging and prod name theirs. Before,
    a new AdminRole trusted the account root: any principal of the account allowed to assume roles was admin."""
    entries = synthesized.resources("hyperwarm-dev-cluster", "AWS::EKS::AccessEntry").values()
    admin = [e["Properties"] for e in entries if e["Properties"]["PrincipalArn"] == {"Fn::Sub": (
        "arn:${AWS::Partition}:iam::${AWS::AccountId}:role/cdk-hnb659fds-deploy-role-${AWS::AccountId}-us-west-2")}]
    assert len(admin) == 1
    for env in ("dev", "staging", "prod"):
        roles = synthesized.resources(f"hyperwarm-{env}-cluster", "AWS::IAM::Role").values()
        assert not [r for r in roles if "root" in json.dumps(r["Properties"]["AssumeRolePolicyDocument"])], env
    (policy,) = admin[0]["AccessPolicies"]
    assert "AmazonEKSClusterAdminPolicy" in str(policy["PolicyArn"])
    assert policy["AccessScope"] == {"Type": "cluster"}


def test_addons_are_created_in_dependency_order(synthesized) -> None:
    resources = synthesized.template("hyperwarm-dev-cluster")["Resources"]
    addons = {r["Properties"]["AddonName"]: (k, r) for k, r in resources.items() if r["Type"] == "AWS::EKS::Addon"}
    assert set(addons) == {"vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent", "cert-manager",
                           "metrics-server", "aws-mountpoint-s3-csi-driver", "aws-fsx-csi-driver",
                           "amazon-sagemaker-hyperpod-inference"}
    hyperpod_id = next(k for k, r in resources.items() if r["Type"] == "AWS::SageMaker::Cluster")
    manifest_id = next(k for k, r in resources.items() if r["Type"] == "Custom::AWSCDK-EKS-KubernetesResource")
    # HyperPod dependencies exist before the HyperPod cluster, after the core add-ons.
    assert manifest_id in resources[hyperpod_id]["DependsOn"]
    for core in ("vpc-cni", "coredns"):
        assert addons[core][0] in resources[manifest_id]["DependsOn"]
    # The operator comes after the HyperPod cluster and after every prerequisite add-on.
    operator_id, operator = addons["amazon-sagemaker-hyperpod-inference"]
    for prerequisite in ("cert-manager", "metrics-server", "aws-mountpoint-s3-csi-driver", "aws-fsx-csi-driver"):
        assert addons[prerequisite][0] in operator["DependsOn"]
    assert hyperpod_id in operator["DependsOn"]


def test_operator_roles_are_bound_to_their_service_accounts(synthesized) -> None:
    template = synthesized.template("hyperwarm-dev-cluster")
    text = str(template)
    for account in ("hyperpod-inference-system:hyperpod-inference-controller-manager",
                    "kube-system:s3-csi-driver-sa", "hyperpod-inference-system:keda-operator"):
        assert f"system:serviceaccount:{account}" in text
    csi = next(r for r in template["Resources"].values()
               if r["Type"] == "AWS::EKS::Addon" and r["Properties"]["AddonName"] == "aws-mountpoint-s3-csi-driver")
    assert "ServiceAccountRoleArn" in csi["Properties"]


def test_execution_role_trusts_sagemaker_and_reads_only_the_lifecycle_prefix(synthesized) -> None:
    template = Template.from_json(synthesized.template("hyperwarm-dev-cluster"))
    template.has_resource_properties("AWS::IAM::Role", {
        "AssumeRolePolicyDocument": {"Statement": [Match.object_like(
            {"Principal": {"Service": "sagemaker.amazonaws.com"}})]},
        "ManagedPolicyArns": Match.array_with([Match.object_like({"Fn::Join": Match.array_with([
            Match.array_with([Match.string_like_regexp("AmazonSageMakerClusterInstanceRolePolicy")])])})]),
    })
    template.has_resource_properties("AWS::IAM::Policy", {"PolicyDocument": {"Statement": Match.array_with([
        Match.object_like({"Sid": "ReadLifecycleScripts", "Action": "s3:GetObject"})])}})


def test_lifecycle_source_is_a_folder_uri_the_list_condition_matches(synthesized) -> None:
    """HyperPod lists the SourceS3Uri prefix. AWS documents the URI as a folder (s3://bucket/prefix/);
    the old URI without the slash listed "lifecycle", which the condition "lifecycle/*" denies."""
    resources = synthesized.template("hyperwarm-dev-cluster")["Resources"]
    cluster = next(r for r in resources.values() if r["Type"] == "AWS::SageMaker::Cluster")
    for group in cluster["Properties"]["InstanceGroups"]:
        parts = group["LifeCycleConfig"]["SourceS3Uri"]["Fn::Join"][1]
        assert parts[0] == "s3://" and parts[2] == "/lifecycle/"
    statements = [s for r in resources.values() if r["Type"] == "AWS::IAM::Policy"
                  for s in r["Properties"]["PolicyDocument"]["Statement"] if s.get("Sid") == "ListLifecycleScripts"]
    patterns = statements[0]["Condition"]["StringLike"]["s3:prefix"]
    patterns = [patterns] if isinstance(patterns, str) else patterns
    for listed in ("lifecycle/", "lifecycle", "lifecycle/on_create.sh"):  # the folder with or without its slash
        assert any(fnmatch.fnmatchcase(listed, p) for p in patterns), listed


def test_lifecycle_bucket_is_encrypted_private_and_ssl_only(synthesized) -> None:
    template = Template.from_json(synthesized.template("hyperwarm-dev-cluster"))
    template.has_resource_properties("AWS::S3::Bucket", {
        "BucketEncryption": Match.any_value(),
        "PublicAccessBlockConfiguration": {"BlockPublicAcls": True, "BlockPublicPolicy": True,
                                           "IgnorePublicAcls": True, "RestrictPublicBuckets": True},
    })
    template.has_resource_properties("AWS::S3::BucketPolicy", {"PolicyDocument": {"Statement": Match.array_with([
        Match.object_like({"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})])}})


# -- construct rules, on small stacks of their own --------------------------------------

def _cluster(groups, region: str | None = "us-west-2", stack: cdk.Stack | None = None, **props):
    if stack is None:
        stack = cdk.Stack(cdk.App(), "T", env=cdk.Environment(region=region) if region else None)
    return HyperPodEksCluster(stack, "HyperPod", HyperPodEksClusterProps(instance_groups=groups, **props))


SYSTEM = InstanceGroupSpec(name="system", instance_type="ml.m5.xlarge")
GPU = InstanceGroupSpec(name="gpu", instance_type="ml.g6e.12xlarge", holds_caches=True)


def test_instance_groups_expose_nvme_and_node_labels() -> None:
    cluster = _cluster([SYSTEM, GPU], install_inference_operator=False)
    group = cluster.cache_group("gpu")
    assert (group.nvme_gb, group.nvme_path) == (3800, "/opt/dlami/nvme")
    assert group.node_labels == {"sagemaker.amazonaws.com/instance-group-name": "gpu",
                                 "node.kubernetes.io/instance-type": "ml.g6e.12xlarge"}
    assert cluster.node.default_child.cfn_resource_type == "AWS::SageMaker::Cluster"
    assert cluster.inference_operator is None


def test_cache_group_without_nvme_fails_naming_group_and_type() -> None:
    cluster = _cluster([SYSTEM, GPU], install_inference_operator=False)
    with pytest.raises(ValueError, match=r"instance group 'system' \(ml.m5.xlarge\) has no local NVMe"):
        cluster.cache_group("system")


def test_unknown_group_lists_existing_groups() -> None:
    cluster = _cluster([SYSTEM], install_inference_operator=False)
    with pytest.raises(ValueError, match="no instance group 'gpu'; groups: system"):
        cluster.instance_group("gpu")


def test_no_instance_groups_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"T/HyperPod: .*\n  instance_groups = \[\] -- at least one instance group"):
        _cluster([])


def test_unsupported_kubernetes_version_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"kubernetes_version = '1.29' -- allowed: 1.30, 1.31"):
        _cluster([SYSTEM], kubernetes_version="1.29")


def test_bad_node_recovery_is_rejected() -> None:
    with pytest.raises(ValueError, match="node_recovery = 'Sometimes' -- allowed: Automatic, None"):
        _cluster([SYSTEM], node_recovery="Sometimes")


def test_region_agnostic_stack_is_rejected_with_reason() -> None:
    with pytest.raises(ValueError, match="needs a stack with a concrete region"):
        _cluster([SYSTEM], region=None)


def test_duplicate_group_names_are_rejected_by_the_construct() -> None:
    with pytest.raises(ValueError, match="instance_groups names = system -- names must be unique"):
        _cluster([SYSTEM, SYSTEM])


def test_every_instance_group_problem_is_reported_at_once_with_field_value_and_allowed() -> None:
    # The spec is a plain dataclass now (no pydantic model validated it before): the construct checks it.
    bad = InstanceGroupSpec(name="-bad", instance_type="ml.z9.huge", instance_count=1001, threads_per_core=3,
                            deep_health_checks=("InstanceStres",), taints=(NodeTaint(key="k", effect="Never"),),
                            ebs_volume=gigabytes(0))
    with pytest.raises(ValueError) as error:
        _cluster([SYSTEM, bad])
    message = str(error.value)
    assert message.startswith("T/HyperPod: invalid HyperPodEksClusterProps:")
    for expected in ("instance_groups[1].name = '-bad' -- allowed: 1..63 letters",
                     "instance_groups[1].instance_type = 'ml.z9.huge' -- unknown instance type; allowed: ml.c5",
                     "instance_groups[1].instance_count = 1001 -- allowed: an integer 0..1000",
                     "instance_groups[1].ebs_volume = 0 GB -- allowed: 1..16384 GB",
                     "instance_groups[1].threads_per_core = 3 -- allowed: 1, 2",
                     "instance_groups[1].deep_health_checks = 'InstanceStres' -- allowed: InstanceStress, "
                     "InstanceConnectivity",
                     "instance_groups[1].taints[0].effect = 'Never' -- allowed: NoSchedule, PreferNoSchedule, "
                     "NoExecute",
                     "instance_groups[1].taints -- instance group '-bad': custom taints are not allowed while deep "
                     "health checks are on"):
        assert expected in message


def test_problems_of_every_part_are_reported_together_before_anything_is_built() -> None:
    stack = cdk.Stack(cdk.App(), "T")  # region-agnostic
    with pytest.raises(ValueError) as error:
        _cluster([], stack=stack, kubernetes_version="1.29", node_recovery="Sometimes", nat_gateways=0,
                 addon_versions={"amazon-sagemaker-hyperpod-inference": "v3.2"}, pods_per_node={"ml.g5.xlarge": 0})
    lines = str(error.value).splitlines()
    assert lines[0] == "T/HyperPod: invalid HyperPodEksClusterProps:"
    assert [line.split(" ")[2] for line in lines[1:]] == [
        "nat_gateways", "stack", "kubernetes_version", "instance_groups", "node_recovery",
        "addon_versions['amazon-sagemaker-hyperpod-inference']", "pods_per_node['ml.g5.xlarge']"]
    assert stack.node.find_child("HyperPod").node.children == []


def test_cache_group_type_without_nvme_is_rejected_by_the_construct() -> None:
    with pytest.raises(ValueError, match=r"instance_groups\[0\].holds_caches = True -- instance group 'c' holds "
                                         r"caches but ml.m5.xlarge has no local NVMe"):
        _cluster([InstanceGroupSpec(name="c", instance_type="ml.m5.xlarge", holds_caches=True)])


def test_unresolved_tokens_are_not_judged() -> None:
    stack = cdk.Stack(cdk.App(), "T", env=cdk.Environment(region="us-west-2"))
    count = cdk.CfnParameter(stack, "Count", type="Number").value_as_number
    _cluster([InstanceGroupSpec(name="gpu", instance_type="ml.g5.xlarge", instance_count=count)], stack=stack,
             install_inference_operator=False)
    (cluster,) = Template.from_stack(stack).find_resources("AWS::SageMaker::Cluster").values()
    assert cluster["Properties"]["InstanceGroups"][0]["InstanceCount"] == {"Ref": "Count"}


def test_admin_principals_get_access_entries_instead_of_a_new_role() -> None:
    stack = cdk.Stack(cdk.App(), "T", env=cdk.Environment(region="us-west-2"))
    admin = iam.Role.from_role_arn(stack, "Ops", "arn:aws:iam::123456789012:role/ops")
    cluster = _cluster([SYSTEM], stack=stack, install_inference_operator=False, admin_principals=[admin])
    assert cluster.control_plane.admin_principal_arns == ["arn:aws:iam::123456789012:role/ops"]
    template = Template.from_stack(stack)
    template.has_resource_properties("AWS::EKS::AccessEntry", {"PrincipalArn": "arn:aws:iam::123456789012:role/ops"})
    assert not [r for r in template.find_resources("AWS::IAM::Role") if r.startswith("HyperPodAdminRole")]


def test_admin_principal_without_an_arn_for_access_entries_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"admin_principals\[0\] = .* -- allowed: an iam.IRole or iam.IUser"):
        _cluster([SYSTEM], admin_principals=[iam.ServicePrincipal("ec2.amazonaws.com")])


def test_imported_cluster_offers_what_other_stacks_use() -> None:
    stack = cdk.Stack(cdk.App(), "Other", env=cdk.Environment(region="us-west-2"))
    vpc = ec2.Vpc.from_vpc_attributes(stack, "Vpc", vpc_id="vpc-0123456789abcdef0", availability_zones=["us-west-2a"],
                                      private_subnet_ids=["subnet-0123456789abcdef0"])
    eks_cluster = eks.Cluster.from_cluster_attributes(stack, "Eks", cluster_name="inference", vpc=vpc)
    group = ec2.SecurityGroup.from_security_group_id(stack, "Group", "sg-0123456789abcdef0")
    cluster = HyperPodEksCluster.from_cluster_attributes(
        stack, "HyperPod", cluster_arn="arn:aws:sagemaker:us-west-2:123456789012:cluster/abc123",
        eks_cluster=eks_cluster, security_group=group, instance_groups=[SYSTEM, GPU])
    assert cluster.cache_group("gpu").nvme_gb == 3800
    assert cluster.vpc.vpc_id == "vpc-0123456789abcdef0" and cluster.inference_operator is None
    assert cluster.security_group.security_group_id == "sg-0123456789abcdef0"
    with pytest.raises(ValueError, match="Other/HyperPod: instance group 'system' .* has no local NVMe"):
        cluster.cache_group("system")
    reader = iam.Role(stack, "Reader", assumed_by=iam.AccountRootPrincipal())
    cluster.grant_describe(reader)
    Template.from_stack(stack).has_resource_properties("AWS::IAM::Policy", {"PolicyDocument": {"Statement": [{
        "Action": ["sagemaker:DescribeCluster", "sagemaker:ListClusterNodes"], "Effect": "Allow",
        "Resource": "arn:aws:sagemaker:us-west-2:123456789012:cluster/abc123"}]}})


def test_imported_operator_grants_model_reads_to_its_roles() -> None:
    from hyperwarm import InferenceOperator
    from hyperwarm.cluster.addons import grant_mounted_model_read

    stack = cdk.Stack(cdk.App(), "Other", env=cdk.Environment(region="us-west-2"))
    bucket = cdk.aws_s3.Bucket.from_bucket_name(stack, "Models", "my-models")
    operator = InferenceOperator.from_operator_attributes(
        stack, "Operator", execution_role=iam.Role.from_role_arn(stack, "Exec", "arn:aws:iam::123456789012:role/op"),
        s3_csi_role=iam.Role.from_role_arn(stack, "Csi", "arn:aws:iam::123456789012:role/csi"))
    grants = [grant_mounted_model_read(reader, bucket, "llama/") for reader in operator.model_readers]
    assert all(g.success for g in grants)
    assert operator.namespace == "hyperpod-inference-system"
    policies = Template.from_stack(stack).find_resources("AWS::IAM::Policy")
    reads = [(p["Properties"]["Roles"], s) for p in policies.values()
             for s in p["Properties"]["PolicyDocument"]["Statement"] if s["Action"] == "s3:GetObject"]
    assert sorted(r for r, _ in reads) == [["csi"], ["op"]]
    assert all(":s3:::my-models/llama/*" in json.dumps(s["Resource"]) for _, s in reads)


def test_custom_bootstrap_qualifier_leaves_no_unacknowledged_cdk_nag_finding(tmp_path) -> None:
    # The bucket-deployment handler reads the assets bucket, named by the synthesizer's qualifier: the
    # acknowledgment once named the default qualifier's bucket (cdk-hnb659fds-assets-...) only.
    from cdk_nag import AwsSolutionsChecks

    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Custom", env=cdk.Environment(region="us-west-2"),
                      synthesizer=cdk.DefaultStackSynthesizer(qualifier="team42"))
    with pytest.raises(ValueError, match=r"admin_principals = \[\] -- the deploying identity .* is not known"):
        _cluster([SYSTEM, GPU], stack=cdk.Stack(cdk.App(), "Unnamed", synthesizer=cdk.DefaultStackSynthesizer(
            qualifier="team42"), env=cdk.Environment(region="us-west-2")))
    _cluster([SYSTEM, GPU], stack=stack,
             admin_principals=[iam.Role.from_role_arn(stack, "Ops", "arn:aws:iam::123456789012:role/ops")])
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    app.synth()  # raises on any unacknowledged finding
    assets = json.dumps(Template.from_stack(stack).to_json())
    assert "cdk-team42-assets-" in assets and "hnb659fds" not in assets
    reports = json.loads((tmp_path / "validation-report.json").read_text())["pluginReports"]
    assert [r["pluginName"] for r in reports if r["conclusion"] != "success"] == []
    assert "AwsSolutions" in [r["pluginName"] for r in reports]


# -- deploy semantics --------------------------------------------------------------------------


def _statements(synthesized, stack: str, role_id: str) -> list[dict]:
    from rehearsal import Assembly
    from rehearsal.rules.roles import role_statements

    return role_statements(Assembly.from_outdir(synthesized.outdir), stack, role_id)


def _role_id(synthesized, stack: str, fragment: str) -> str:
    (role_id,) = [k for k in synthesized.resources(stack, "AWS::IAM::Role") if fragment in k]
    return role_id


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_execution_role_holds_the_hyperpod_vpc_actions(synthesized, env) -> None:
    # Finding 4: the HyperPod EKS prerequisites add these to AmazonSageMakerClusterInstanceRolePolicy.
    from rehearsal.rules.roles import allows

    stack = f"hyperwarm-{env}-cluster"
    statements = _statements(synthesized, stack, _role_id(synthesized, stack, "HyperPodExecutionRole"))
    documented = ("ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterfacePermission", "ec2:DescribeVpcs",
             "ec2:DescribeDhcpOptions", "ec2:DescribeSecurityGroups")
    assert [a for a in documented if not allows(statements, a)] == []


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_cluster_group_allows_all_traffic_to_and_from_itself(synthesized, env) -> None:
    # Finding 5: EFA needs self-referencing egress too, not only 0.0.0.0/0.
    stack = f"hyperwarm-{env}-cluster"
    (group_id,) = [k for k in synthesized.resources(stack, "AWS::EC2::SecurityGroup") if "ClusterSecurityGroup" in k]
    me = {"Fn::GetAtt": [group_id, "GroupId"]}
    (egress,) = [e["Properties"] for e in synthesized.resources(stack, "AWS::EC2::SecurityGroupEgress").values()
                 if e["Properties"]["GroupId"] == me]
    assert egress["DestinationSecurityGroupId"] == me and egress["IpProtocol"] == "-1"
    assert any(i["Properties"]["GroupId"] == me and i["Properties"]["SourceSecurityGroupId"] == me
               for i in synthesized.resources(stack, "AWS::EC2::SecurityGroupIngress").values())


def test_load_balancer_controller_role_holds_the_published_policy_not_elb_full_access(synthesized) -> None:
    # Finding 8: ElasticLoadBalancingFullAccess cannot create security groups, tag or read certificates.
    from rehearsal.rules.roles import allows, load_balancer_controller_actions

    stack = "hyperwarm-prod-cluster"
    role_id = _role_id(synthesized, stack, "LoadBalancerRole")
    role = synthesized.resources(stack, "AWS::IAM::Role")[role_id]
    assert "ElasticLoadBalancingFullAccess" not in str(role["Properties"].get("ManagedPolicyArns"))
    statements = _statements(synthesized, stack, role_id)
    assert [a for a in load_balancer_controller_actions() if not allows(statements, a)] == []
    (addon,) = [a for a in synthesized.resources(stack, "AWS::EKS::Addon").values()
                if a["Properties"]["AddonName"] == "amazon-sagemaker-hyperpod-inference"]
    (policy_id,) = [k for k in synthesized.resources(stack, "AWS::IAM::Policy") if "LoadBalancerControllerPolicy" in k]
    assert policy_id in addon["DependsOn"]


def test_operator_pin_must_name_an_add_on_build() -> None:
    # Add-on builds are v1.0.0-eksbuild.1 and the like; an operator release ("v3.3") fails CreateAddon.
    with pytest.raises(ValueError, match=r"addon_versions\['amazon-sagemaker-hyperpod-inference'\] = "
                                         r"'v3.3' -- allowed: an EKS add-on build such as v2.0.0-eksbuild.1"):
        _cluster([SYSTEM, GPU], addon_versions={"amazon-sagemaker-hyperpod-inference": "v3.3"})
    cluster = _cluster([SYSTEM, GPU], addon_versions={"amazon-sagemaker-hyperpod-inference": "v1.0.0-eksbuild.1"})
    assert cluster.inference_operator.addon_version == "v1.0.0-eksbuild.1"


def _operator_configuration(cluster: HyperPodEksCluster) -> dict:
    resolved = cdk.Stack.of(cluster).resolve(cluster.inference_operator.addon.configuration_values)
    return json.loads("".join(p if isinstance(p, str) else "X" for p in resolved["Fn::Join"][1]))


def test_a_build_unknown_to_hyperwarm_is_flagged_and_v2_builds_switch_the_operator_on() -> None:
    from aws_cdk.assertions import Annotations

    old = _cluster([SYSTEM, GPU], addon_versions={"amazon-sagemaker-hyperpod-inference": "v1.0.0-eksbuild.1"})
    assert "inferenceOperator" not in _operator_configuration(old)
    newer = _cluster([SYSTEM, GPU], addon_versions={"amazon-sagemaker-hyperpod-inference": "v2.1.0-eksbuild.1"})
    assert _operator_configuration(newer)["inferenceOperator"] == {"enabled": True}
    warnings = Annotations.from_stack(cdk.Stack.of(newer)).find_warning("*", Match.string_like_regexp(
        "add-on build v2.1.0-eksbuild.1 is not in hyperwarm's table of builds"))
    assert len(warnings) == 1


def test_operator_execution_role_is_named_so_its_managed_policy_may_pass_it(synthesized) -> None:
    # AmazonSageMakerHyperPodInferenceAccess passes only role/SageMakerHyperPodInference* to SageMaker.
    stack = "hyperwarm-prod-cluster"
    role = synthesized.resources(stack, "AWS::IAM::Role")[_role_id(synthesized, stack, "InferenceOperatorExecutionRole")]
    name = role["Properties"]["RoleName"]
    assert name["Fn::Join"][0] == "-" and name["Fn::Join"][1][0] == "SageMakerHyperPodInference"
    assert "Path" not in role["Properties"]  # the ARN is role/SageMakerHyperPodInference-<suffix>
    assert "AWS::StackId" in json.dumps(name)  # unique per stack, and per region for the same stack name


def test_pods_per_node_overrides_are_recorded_for_the_rehearsal() -> None:
    cluster = _cluster([SYSTEM, GPU], pods_per_node={"ml.m5.xlarge": 30}, install_inference_operator=False)
    template = Template.from_stack(cdk.Stack.of(cluster))
    (resource,) = template.find_resources("AWS::SageMaker::Cluster").values()
    assert resource["Metadata"]["hyperwarm:pods-per-node"] == {"ml.m5.xlarge": 30}


def test_instance_group_props_and_cluster_rules_load_without_aws_cdk() -> None:
    # Apps build and check the props (and manifests read NVME_PATH) without starting jsii.
    import subprocess
    import sys

    code = ("import sys, hyperwarm.cluster.rules, hyperwarm.cluster.instance_group; from hyperwarm import NVME_PATH; "
            "print(sorted(m for m in ('aws_cdk', 'jsii', 'pydantic') if m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout == "[]\n"


def test_nodes_pull_only_from_the_registries_their_images_come_from() -> None:
    """Not from any account's repositories in the region: this account, AWS's DLC, EKS add-on and HyperPod
    agent registries, and the accounts named."""
    cluster = _cluster([SYSTEM, GPU], install_inference_operator=False, image_registry_accounts=["444455556666"])
    template = Template.from_stack(cdk.Stack.of(cluster))
    (pull,) = [s for p in template.find_resources("AWS::IAM::Policy").values()
               for s in p["Properties"]["PolicyDocument"]["Statement"] if s.get("Sid") == "PullServingImages"]
    accounts = set()
    for arn in pull["Resource"]:
        text = "".join(p if isinstance(p, str) else "<" + p["Ref"] + ">" for p in arn["Fn::Join"][1])
        match = re.fullmatch(r"arn:<AWS::Partition>:ecr:us-west-2:(\d{12}|<AWS::AccountId>):repository/\*", text)
        assert match, text
        accounts.add("own" if match[1] == "<AWS::AccountId>" else match[1])
    assert {"own", "444455556666", "763104351884", "602401143452", "905418368575"} <= accounts
    assert "*" not in accounts and len(accounts) < 40


def test_an_imported_operator_states_its_add_on_build() -> None:
    from hyperwarm import InferenceOperator

    stack = cdk.Stack(cdk.App(), "T")
    role = iam.Role.from_role_arn(stack, "Role", "arn:aws:iam::123456789012:role/SageMakerHyperPodInference-x")
    operator = InferenceOperator.from_operator_attributes(stack, "Op", execution_role=role, s3_csi_role=role)
    assert operator.addon_version is None  # unknown: model caches then fail synth (test_caches_stack)
    with pytest.raises(ValueError, match=r"T/Op2: addon_version = '3.3' -- allowed: an EKS add-on build"):
        InferenceOperator.from_operator_attributes(stack, "Op2", execution_role=role, s3_csi_role=role,
                                                   addon_version="3.3")
