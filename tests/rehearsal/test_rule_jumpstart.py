"""roles.jumpstart-read: where a JumpStartModel is applied, the operator's model readers read the JumpStart bucket;
shown on the synthesized project (dev serves a JumpStart model) and on it with the grant taken out."""

from __future__ import annotations

import copy
from typing import Any

from rehearsal import Assembly
from rehearsal.rules.jumpstart import RULE, jumpstart_artifacts_are_readable


def _without_jumpstart_grants(templates: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    broken = copy.deepcopy(templates)
    for template in broken.values():
        for resource in template.get("Resources", {}).values():
            if resource.get("Type") != "AWS::IAM::Policy":
                continue
            statements = resource["Properties"]["PolicyDocument"]["Statement"]
            resource["Properties"]["PolicyDocument"]["Statement"] = [
                s for s in statements if "jumpstart-cache-prod" not in str(s.get("Resource"))]
    return broken


def test_the_synthesized_readers_pass_and_fail_without_their_grant(synthesized) -> None:
    assembly = Assembly.from_outdir(synthesized.outdir)
    assert jumpstart_artifacts_are_readable(assembly) == []
    broken = Assembly(_without_jumpstart_grants(assembly.templates), assembly.dependencies)
    found = jumpstart_artifacts_are_readable(broken)
    assert {f.rule for f in found} == {RULE}
    readers = sorted(f.message.split("(")[1].split(")")[0] for f in found)
    assert readers == ["hyperpod-inference-system:hyperpod-inference-controller-manager",
                       "kube-system:s3-csi-driver-sa"]
    assert all("lacks s3:GetObject on arn:aws:s3:::jumpstart-cache-prod-<region>/* and s3:ListBucket" in f.message
               for f in found)
    assert all(f.stack.startswith("hyperwarm-dev") or "dev" in f.stack.lower() for f in found), found


def test_without_a_jumpstartmodel_nothing_is_checked() -> None:
    role = {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": {"Statement": [{
        "Condition": {"StringEquals": {"x:sub": "system:serviceaccount:kube-system:s3-csi-driver-sa"}}}]}}}
    assert jumpstart_artifacts_are_readable(Assembly.from_templates({"s": {"Resources": {"R": role}}})) == []
    manifest = {"Type": "Custom::AWSCDK-EKS-KubernetesResource",
                "Properties": {"Manifest": '[{"kind":"JumpStartModel","metadata":{"name":"m"}}]'}}
    (finding,) = jumpstart_artifacts_are_readable(Assembly.from_templates({"s": {"Resources": {"R": role, "M": manifest}}}))
    assert finding.resource == "R"
