"""A user's own CDK app that reuses hyperwarm's public API (not the project's stacks).

Run: ``CDK_OUTDIR=/tmp/out python examples/my_platform_app.py``.
"""

import hyperwarm  # first: it selects the Node that jsii runs on

import aws_cdk as cdk  # noqa: E402

app = cdk.App()
stack = cdk.Stack(app, "MyTeamInference", env=cdk.Environment(region="eu-west-1"))
cluster = hyperwarm.HyperPodEksCluster(stack, "Inference", hyperwarm.HyperPodEksClusterProps(
    instance_groups=[
        hyperwarm.InstanceGroupSpec(name="system", instance_type="ml.m5.2xlarge", instance_count=2),
        hyperwarm.InstanceGroupSpec(name="llm", instance_type="ml.g6e.12xlarge", instance_count=2,
                                    holds_caches=True),
    ],
    kubernetes_version="1.34",
    availability_zones=["eu-west-1a", "eu-west-1b"],
))
cdk.CfnOutput(stack, "LlmGroupNvmeGb", value=str(cluster.cache_group("llm").nvme_gb))
app.synth()
