"""The deploy rehearsal over every synthesized environment, and the rule machinery itself."""

from __future__ import annotations

from rehearsal import Assembly, all_rules, rehearse


def test_every_synthesized_environment_passes_the_rehearsal(synthesized) -> None:
    findings = rehearse(Assembly.from_outdir(synthesized.outdir))
    assert [str(f) for f in findings] == []


def test_every_rule_cites_its_aws_source() -> None:
    for r in all_rules():
        assert r.source.startswith(("https://", "aws-samples/", "aws/")), r.id
        assert r.check.__doc__, f"rule {r.id} needs a docstring saying what it checks and why"


def test_stack_order_is_transitive() -> None:
    assembly = Assembly.from_templates({"a": {}, "b": {}, "c": {}}, {"c": ["b"], "b": ["a"]})
    assert assembly.deploys_after("c", "a")
    assert not assembly.deploys_after("a", "c")


def test_kubernetes_objects_are_read_from_kubectl_resources_with_tokens_as_placeholders() -> None:
    manifest = {"Fn::Join": ["", ['[{"kind":"ConfigMap","metadata":{"name":"', {"Ref": "X"}, '"}}]']]}
    template = {"Resources": {"M": {"Type": "Custom::AWSCDK-EKS-KubernetesResource",
                                    "Properties": {"Manifest": manifest}}}}
    objects = list(Assembly.from_templates({"s": template}).kubernetes_objects())
    assert objects == [("s", "M", {"kind": "ConfigMap", "metadata": {"name": "${TOKEN}"}})]
