"""Roles hold the actions AWS documents for the service that assumes them.

IAM accepts any policy, and CloudFormation creates roles that cannot do their job without a word:
the failure appears at run time (nodes that never join, load balancers never created, rollback
alarms that cannot be read). These rules find the role each service uses in the templates and
check its statements (inline policies and `AWS::IAM::Policy` resources of its stack) for the
documented actions. Covered today: the HyperPod execution role, the AWS Load Balancer Controller
role, the endpoint execution role's read of its rollback alarms, each SageMaker model's role, and the
name of every role an AWS-managed policy's iam:PassRole must cover; other roles are covered by their
constructs' tests, not yet by a rule here.
"""

from __future__ import annotations

import fnmatch
import itertools
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from hyperwarm.cluster.addons import LOAD_BALANCER_CONTROLLER_POLICY
from rehearsal.core import Assembly, Finding, ref_target, resolve, rule, strings, text_of

_CFN_JSON = "Custom::AWSCDKCfnJson"

# Written out here, not imported from the construct: the rule must fail when the construct drops one.
HYPERPOD_VPC_ACTIONS = (
    "ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterfacePermission",
    "ec2:DescribeVpcs", "ec2:DescribeDhcpOptions", "ec2:DescribeSecurityGroups",
)
"""What the HyperPod IAM prerequisites (EKS tab) add to AmazonSageMakerClusterInstanceRolePolicy."""


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def role_statements(assembly: Assembly, stack: str, role_id: str) -> list[dict[str, Any]]:
    """Allow statements of a role: its inline policies and the `AWS::IAM::Policy` resources naming it."""
    resources = assembly.templates[stack].get("Resources", {})
    documents = [p.get("PolicyDocument", {}) for p in resources.get(role_id, {}).get("Properties", {}).get("Policies", [])]
    for policy in resources.values():
        if policy.get("Type") == "AWS::IAM::Policy" and \
                any(ref_target(r) == role_id for r in policy.get("Properties", {}).get("Roles", [])):
            documents.append(policy["Properties"].get("PolicyDocument", {}))
    return [s for d in documents for s in _listed(d.get("Statement", [])) if s.get("Effect") == "Allow"]


def allows(statements: list[dict[str, Any]], action: str, resource: Any = None,
           resources: Mapping[str, Any] | None = None) -> bool:
    """Whether some statement allows `action` (wildcards honoured) on `resource` (None: on anything);
    `resources`: the template's, to follow a granted ARN's references to what they name."""
    for statement in statements:
        if not any(fnmatch.fnmatchcase(action.lower(), a.lower()) for a in _listed(statement.get("Action", []))
                   if isinstance(a, str)):
            continue
        if resource is None or any(_covers(r, resource, resources or {})
                                   for r in _listed(statement.get("Resource", []))):
            return True
    return False


def _covers(granted: Any, wanted: Any, resources: Mapping[str, Any]) -> bool:
    """A granted resource covers the wanted one: the same reference, or an ARN pattern matching it once
    its references are resolved. A grant that cannot be resolved covers nothing (a token read as `*`
    would let a grant on any bucket satisfy a check on one)."""
    if granted == "*" or granted == wanted:
        return True
    pattern = resolve(granted, resources)
    return isinstance(wanted, str) and pattern is not None and fnmatch.fnmatchcase(wanted, pattern)


def _missing(assembly: Assembly, stack: str, role_id: str, actions: list[str], why: str) -> Iterator[Finding]:
    statements = role_statements(assembly, stack, role_id)
    missing = [a for a in actions if not allows(statements, a)]
    if missing:
        yield Finding(f"roles.{why}", stack, role_id, f"lacks {', '.join(missing)}")


@rule("roles.hyperpod-execution",
      source="https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-prerequisites-iam.html")
def hyperpod_execution(assembly: Assembly) -> Iterator[Finding]:
    """The execution role of every instance group of an EKS-orchestrated HyperPod cluster holds, beside
    AmazonSageMakerClusterInstanceRolePolicy, ec2:CreateNetworkInterfacePermission,
    ec2:DeleteNetworkInterfacePermission, ec2:DescribeVpcs, ec2:DescribeDhcpOptions and
    ec2:DescribeSecurityGroups (HyperPod IAM prerequisites, EKS tab; AWS's reference stack
    sagemaker-iam-role-template.yaml). Without them nodes cannot attach to the cluster's VPC."""
    for stack, _, cluster in assembly.resources("AWS::SageMaker::Cluster"):
        props = cluster.get("Properties", {})
        if "Eks" not in props.get("Orchestrator", {}):
            continue
        roles = {ref_target(g.get("ExecutionRole")) for g in props.get("InstanceGroups", [])} - {None}
        for role_id in sorted(r for r in roles if r):
            yield from _missing(assembly, stack, role_id, list(HYPERPOD_VPC_ACTIONS), "hyperpod-execution")
            managed = " ".join(strings(assembly.templates[stack]["Resources"].get(role_id, {})
                                       .get("Properties", {}).get("ManagedPolicyArns", [])))
            if "policy/AmazonSageMakerClusterInstanceRolePolicy" not in managed:
                yield Finding("roles.hyperpod-execution", stack, role_id,
                              "lacks the AWS-managed AmazonSageMakerClusterInstanceRolePolicy")


def trusted_service_accounts(assembly: Assembly, stack: str, role: dict[str, Any]) -> set[str]:
    """`namespace:name` of every Kubernetes service account a role trusts (IRSA), CfnJson conditions included."""
    resources = assembly.templates[stack].get("Resources", {})
    trust = role.get("Properties", {}).get("AssumeRolePolicyDocument", {})
    texts = list(strings(trust))

    def collect(value: Any) -> None:
        if isinstance(value, dict):
            target = ref_target(value)
            if target and resources.get(target, {}).get("Type") == _CFN_JSON:
                texts.extend(strings(resources[target].get("Properties", {}).get("Value")))
            for item in value.values():
                collect(item)
        elif isinstance(value, list):
            for item in value:
                collect(item)

    collect(trust)
    return {m for t in texts for m in re.findall(r"system:serviceaccount:([a-z0-9.-]+:[a-z0-9.-]+)", t)}


def load_balancer_controller_actions() -> list[str]:
    """Every action of the controller's published IAM policy (vendored in hyperwarm/policies)."""
    document = json.loads(LOAD_BALANCER_CONTROLLER_POLICY.read_text())
    return sorted({a for s in document["Statement"] for a in _listed(s["Action"])})


@rule("roles.load-balancer-controller",
      source="https://github.com/kubernetes-sigs/aws-load-balancer-controller/blob/v2.13.2/docs/install/iam_policy.json")
def load_balancer_controller(assembly: Assembly) -> Iterator[Finding]:
    """A role trusted by the `aws-load-balancer-controller` service account holds every action of the
    controller's published iam_policy.json. ElasticLoadBalancingFullAccess, for one, lacks
    ec2:CreateSecurityGroup, ec2:AuthorizeSecurityGroupIngress, ec2:CreateTags, acm:DescribeCertificate
    and the WAF and Shield reads, so no load balancer is ever created."""
    actions = load_balancer_controller_actions()
    for stack, logical_id, role in assembly.resources("AWS::IAM::Role"):
        if any(sa.endswith(":aws-load-balancer-controller") for sa in trusted_service_accounts(assembly, stack, role)):
            yield from _missing(assembly, stack, logical_id, actions, "load-balancer-controller")


def _endpoint_roles(assembly: Assembly, stack: str, endpoint: dict[str, Any]) -> set[str]:
    """The execution roles of an endpoint: its EndpointConfig's and its variants' models'."""
    resources = assembly.templates[stack].get("Resources", {})
    config = resources.get(ref_target(endpoint.get("Properties", {}).get("EndpointConfigName")) or "", {})
    props = config.get("Properties", {})
    roles = {ref_target(props.get("ExecutionRoleArn"))}
    for variant in props.get("ProductionVariants", []):
        model = resources.get(ref_target(variant.get("ModelName")) or "", {})
        roles.add(ref_target(model.get("Properties", {}).get("ExecutionRoleArn")))
    return {r for r in roles if r and resources.get(r, {}).get("Type") == "AWS::IAM::Role"}


@rule("roles.endpoint-rollback-alarms",
      source="https://docs.aws.amazon.com/sagemaker/latest/dg/deployment-guardrails-configuration.html")
def endpoint_rollback_alarms(assembly: Assembly) -> Iterator[Finding]:
    """An endpoint's execution role may cloudwatch:DescribeAlarms on each of its auto-rollback alarms
    (deployment guardrails prerequisite); otherwise SageMaker cannot watch them during a blue/green update."""
    for stack, logical_id, endpoint in assembly.resources("AWS::SageMaker::Endpoint"):
        rollback = endpoint.get("Properties", {}).get("DeploymentConfig", {}).get("AutoRollbackConfiguration", {})
        alarms = [a.get("AlarmName") for a in rollback.get("Alarms", [])]
        for role_id in sorted(_endpoint_roles(assembly, stack, endpoint)):
            statements = role_statements(assembly, stack, role_id)
            for alarm in alarms:
                alarm_id = ref_target(alarm)
                wanted = {"Fn::GetAtt": [alarm_id, "Arn"]} if alarm_id else f"arn:aws:cloudwatch:r:a:alarm:{alarm}"
                if not allows(statements, "cloudwatch:DescribeAlarms", wanted):
                    yield Finding("roles.endpoint-rollback-alarms", stack, role_id,
                                  f"cannot cloudwatch:DescribeAlarms on rollback alarm {alarm_id or alarm} of "
                                  f"endpoint {logical_id}")


_ECR_IMAGE = re.compile(r"^(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(\.cn)?/"
                        r"(?P<repository>[^:@]+)")
_S3_URI = re.compile(r"^s3://(?P<bucket>[^/]+)/(?P<key>.*)$")


def _containers(model: dict[str, Any]) -> list[dict[str, Any]]:
    props = model.get("Properties", {})
    return ([props["PrimaryContainer"]] if "PrimaryContainer" in props else []) + list(props.get("Containers", []))


def _model_data_object(container: dict[str, Any], resources: Mapping[str, Any]) -> str | None:
    """An object ARN the model server must read: the archive, or a file under the prefix ("" when the
    container reads no model data; None when its location cannot be known at synth)."""
    source = container.get("ModelDataSource", {}).get("S3DataSource", {})
    raw = source.get("S3Uri", container.get("ModelDataUrl"))
    if raw is None:
        return ""
    uri = resolve(raw, resources)
    match = _S3_URI.match(uri) if uri is not None else None
    if not match:
        return None
    key = match["key"] + ("config.json" if source.get("S3DataType") == "S3Prefix" else "")
    return f"arn:aws:s3:::{match['bucket']}/{key}"


@rule("roles.model-execution",
      source="https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-roles.html#sagemaker-roles-createmodel-perms")
def model_execution(assembly: Assembly) -> Iterator[Finding]:
    """A SageMaker Model's execution role may read its model data (s3:GetObject on the archive or on the
    files under the prefix) and pull its image (ecr:GetAuthorizationToken; ecr:BatchGetImage and
    ecr:GetDownloadUrlForLayer on the image's repository), as the CreateModel permissions page lists.
    Without them the endpoint's instances start and then fail to download, 10-40 minutes into the deploy."""
    for stack, logical_id, model in assembly.resources("AWS::SageMaker::Model"):
        role_id = ref_target(model.get("Properties", {}).get("ExecutionRoleArn"))
        if not role_id or assembly.templates[stack]["Resources"].get(role_id, {}).get("Type") != "AWS::IAM::Role":
            continue  # an imported role: its policies are not in the assembly
        resources = assembly.templates[stack]["Resources"]
        statements = role_statements(assembly, stack, role_id)
        wanted: list[tuple[str, str | None]] = [("ecr:GetAuthorizationToken", None)]
        unknown = []
        for container in _containers(model):
            uri = resolve(container.get("Image"), resources)
            image = _ECR_IMAGE.match(uri) if uri is not None else None
            if image:
                repository = f"arn:aws:ecr:{image['region']}:{image['account']}:repository/{image['repository']}"
                wanted += [("ecr:BatchGetImage", repository), ("ecr:GetDownloadUrlForLayer", repository)]
            elif uri is None:
                unknown.append("its image")
            data = _model_data_object(container, resources)
            if data:
                wanted.append(("s3:GetObject", data))
            elif data is None:
                unknown.append("its model data location")
        if unknown:  # what the rule cannot read, it cannot vouch for
            yield Finding("roles.model-execution", stack, role_id, f"model {logical_id}: cannot tell from the "
                          f"template whether the role may read {' and '.join(unknown)} (not known at synth)")
        missing = [f"{action} on {resource}" if resource else action
                   for action, resource in wanted if not allows(statements, action, resource, resources)]
        if missing:
            yield Finding("roles.model-execution", stack, role_id,
                          f"execution role of model {logical_id} lacks {'; '.join(missing)}")


MANAGED_PASS_ROLE: dict[str, tuple[str, str]] = {
    # AWS managed policy reference, AmazonSageMakerHyperPodInferenceAccess (v3): its one iam:PassRole statement
    # covers arn:aws:iam::*:role/SageMakerHyperPodInference* with iam:PassedToService sagemaker.amazonaws.com.
    "AmazonSageMakerHyperPodInferenceAccess": ("SageMakerHyperPodInference*", "sagemaker.amazonaws.com"),
}
"""AWS-managed policy -> (role-name pattern of its only ``iam:PassRole``, the service it may pass roles to).
Written out here, not imported from the construct: the rule must fail when the construct's name drifts."""

ADDON_PASSED_ROLES: dict[str, tuple[str, str]] = {
    # The operator passes its execution role to SageMaker under that role's own AmazonSageMakerHyperPodInferenceAccess
    # (aws/sagemaker-hyperpod-cluster-setup, eks/cloudformation/inference-addon-iam-roles-template.yaml).
    "amazon-sagemaker-hyperpod-inference": ("executionRoleArn", "AmazonSageMakerHyperPodInferenceAccess"),
}
"""EKS add-on -> (configuration key naming a role the add-on passes, the AWS-managed policy that passes it)."""

_TOKEN = "${TOKEN}"


def _managed_policies(role: dict[str, Any]) -> set[str]:
    arns = role.get("Properties", {}).get("ManagedPolicyArns", [])
    return {name for name in MANAGED_PASS_ROLE for text in strings(arns) if text.endswith(f":policy/{name}")}


def _trusted_services(role: dict[str, Any]) -> set[str]:
    trust = role.get("Properties", {}).get("AssumeRolePolicyDocument", {})
    services: set[str] = set()
    for statement in _listed(trust.get("Statement", [])):
        principal = statement.get("Principal", {}) if isinstance(statement, dict) else {}
        if isinstance(principal, dict):
            services.update(s for s in _listed(principal.get("Service", [])) if isinstance(s, str))
    return services


def _configured_role(configuration: Any, key: str) -> tuple[str | None, str | None]:
    """(logical id, literal ARN) of the role an add-on's configuration names under ``key``: a reference in the
    ``Fn::Join`` CDK writes, or an ARN in a literal configuration; (None, None) when neither can be read."""
    if isinstance(configuration, str):
        try:
            value = json.loads(configuration).get(key)
        except (ValueError, AttributeError):
            return None, None
        return None, value if isinstance(value, str) else None
    join = configuration.get("Fn::Join") if isinstance(configuration, dict) else None
    parts = join[1] if isinstance(join, list) and len(join) == 2 and isinstance(join[1], list) else []
    for before, part in itertools.pairwise(parts):
        if isinstance(before, str) and before.endswith(f'"{key}":"'):
            return ref_target(part), part if isinstance(part, str) else None
    return None, None


def _name_problem(name: Any, path: Any, pattern: str) -> str | None:
    """Why a role called ``name`` (a template value) at ``path`` is not surely covered by ``role/<pattern>``."""
    if path not in (None, "/"):
        return f"has path {path!r}: its ARN is role{path}<name>, which role/{pattern} does not cover"
    if name is None:
        return f"has a name CloudFormation generates, which role/{pattern} does not cover; name it {pattern}"
    text = text_of(name, _TOKEN)
    literal = text.split(_TOKEN)[0]
    if _TOKEN not in text and fnmatch.fnmatchcase(text, pattern):
        return None
    if _TOKEN in text and pattern.endswith("*") and literal.startswith(pattern[:-1]):
        return None
    if _TOKEN in text and pattern.startswith(literal):
        return f"has a name known only at deploy time ({text}), so the rehearsal cannot tell that role/{pattern} covers it"
    return f"is named {text}, which role/{pattern} does not cover"


def _arn_name_problem(arn: str, pattern: str) -> str | None:
    match = re.match(r"^arn:[^:]+:iam::[^:]*:role(/.*)$", arn)
    if match is None:
        return f"is {arn!r}, not a role ARN the rehearsal can read"
    if fnmatch.fnmatchcase(match[1], f"/{pattern}"):
        return None
    return f"is {arn}, which role/{pattern} does not cover"


@rule("roles.managed-pass-role",
      source="https://docs.aws.amazon.com/aws-managed-policy/latest/reference/AmazonSageMakerHyperPodInferenceAccess.html")
def managed_pass_role(assembly: Assembly) -> Iterator[Finding]:
    """Every role an AWS-managed policy's ``iam:PassRole`` must cover matches that policy's resource pattern.

    AmazonSageMakerHyperPodInferenceAccess passes only ``role/SageMakerHyperPodInference*`` to
    sagemaker.amazonaws.com, and the inference operator passes its own execution role (the role its add-on
    configuration names as ``executionRoleArn``) to SageMaker. A role that carries such a policy and is trusted
    by the service it passes to, or that an add-on passes, needs a name the pattern covers (and path ``/``);
    CloudFormation's generated names never match, and SageMaker refuses the role at run time. A name the
    rehearsal cannot read, or an add-on role it cannot follow, is a finding too.
    """
    must_cover: dict[tuple[str, str], set[str]] = {}
    for stack, logical_id, role in assembly.resources("AWS::IAM::Role"):
        services = _trusted_services(role)
        for policy in _managed_policies(role):
            if MANAGED_PASS_ROLE[policy][1] in services:
                must_cover.setdefault((stack, logical_id), set()).add(policy)
    for stack, logical_id, addon in assembly.resources("AWS::EKS::Addon"):
        props = addon.get("Properties", {})
        if props.get("AddonName") not in ADDON_PASSED_ROLES:
            continue
        key, policy = ADDON_PASSED_ROLES[props["AddonName"]]
        pattern = MANAGED_PASS_ROLE[policy][0]
        role_id, arn = _configured_role(props.get("ConfigurationValues", ""), key)
        resources = assembly.templates[stack].get("Resources", {})
        if role_id and resources.get(role_id, {}).get("Type") == "AWS::IAM::Role":
            must_cover.setdefault((stack, role_id), set()).add(policy)
        elif arn:
            problem = _arn_name_problem(arn, pattern)
            if problem:
                yield Finding("roles.managed-pass-role", stack, logical_id, f"{key} {problem} ({policy} passes it)")
        else:
            yield Finding("roles.managed-pass-role", stack, logical_id,
                          f"the rehearsal cannot follow {key} of its configuration to a role, so it cannot tell that "
                          f"{policy}'s iam:PassRole on role/{pattern} covers it")
    for (stack, role_id), policies in sorted(must_cover.items()):
        props = assembly.templates[stack]["Resources"][role_id].get("Properties", {})
        for policy in sorted(policies):
            pattern = MANAGED_PASS_ROLE[policy][0]
            problem = _name_problem(props.get("RoleName"), props.get("Path"), pattern)
            if problem:
                yield Finding("roles.managed-pass-role", stack, role_id,
                              f"{problem}: {policy} lets it be passed to {MANAGED_PASS_ROLE[policy][1]} only as "
                              f"arn:aws:iam::*:role/{pattern}")
