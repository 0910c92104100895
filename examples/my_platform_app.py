"""A user's own CDK app that reuses hyperwarm's public API (not the project's stacks): a cluster, a cached model,
an endpoint behind API Gateway, the refresh of new model versions and the dashboard with its alarms.

Install: ``pip install 'hyperwarm[caches]'`` (and ``hyperwarm[node]`` on a machine without Node.js 22 or newer).
Run: ``CDK_OUTDIR=/tmp/out python -m hyperwarm.run examples/my_platform_app.py`` (``hyperwarm.run`` points
jsii at the Node of ``hyperwarm[node]``, if installed, before ``aws_cdk`` loads; cdk.json: ``"app": "python -m
hyperwarm.run my_platform_app.py"``). ``make test-install`` installs the wheel that way in a new virtualenv,
synthesizes this app and runs ``mypy --strict`` on it.
"""

import aws_cdk as cdk
from aws_cdk import aws_apigateway as apigateway, aws_iam as iam, aws_s3 as s3

import hyperwarm

app = cdk.App()
stack = cdk.Stack(app, "MyTeamInference", env=cdk.Environment(region="us-west-2"))
cluster = hyperwarm.HyperPodEksCluster(stack, "Inference", hyperwarm.HyperPodEksClusterProps(
    instance_groups=[
        hyperwarm.InstanceGroupSpec(name="system", instance_type="ml.m5.2xlarge", instance_count=2),
        # Cached models' pods cannot tolerate taints (InferenceEndpointConfig has no tolerations): no taint here.
        hyperwarm.InstanceGroupSpec(name="llm", instance_type="ml.g6e.12xlarge", instance_count=2, holds_caches=True),
    ],
    kubernetes_version="1.34",
    # The cached models' fields need inference operator 3.3 or later: pin the add-on build that carries it.
    addon_versions={"amazon-sagemaker-hyperpod-inference": "v2.0.0-eksbuild.1"},
    admin_principals=[iam.Role.from_role_arn(stack, "Ops", "arn:aws:iam::123456789012:role/ops")],
    availability_zones=["us-west-2a", "us-west-2b"],
))
cdk.CfnOutput(stack, "LlmGroupNvmeGb", value=str(cluster.cache_group("llm").nvme_gb))

# A model cached on the llm group's NVMe (weights in hyperwarm's node cache, filled on both nodes before a pod
# starts; the image pre-pulled), scaling 1..2 pods on the requests waiting in vLLM's queue: every pod of the range
# starts on a warm node.
llama_props = hyperwarm.CachedModelSpec(
    name="llama-3-1-8b",
    source=hyperwarm.ModelSource(bucket="my-team-models", prefix="llama-3.1-8b-instruct", version="v1"),
    size=cdk.Size.gibibytes(16),
    image="763104351884.dkr.ecr.us-west-2.amazonaws.com/djl-inference:0.33.0-lmi15.0.0-cu128",
    instance_group="llm", weights_cache="node",
    autoscaling=hyperwarm.HyperPodAutoscaling(
        max_replicas=2, trigger=hyperwarm.ExporterTrigger("RequestsWaiting", target_value=8)),
)
# refreshed: its nodes keep room for a second version, which a refresh (below) stages beside the serving one.
models = hyperwarm.CachedModels(stack, "Models", hyperwarm.CachedModelsProps(
    cluster=cluster, models=[llama_props], refreshed=[llama_props.name]))

# A SageMaker endpoint beside the cluster: an alarm on its latency, and a caller allowed to invoke it.
chat = hyperwarm.InferenceEndpoint(stack, "Chat", hyperwarm.InferenceEndpointProps(
    endpoint_name="my-team-chat",
    variants=[hyperwarm.ProductionVariant(
        name="main", instance_type="ml.g6e.12xlarge", instance_count=2,
        routing=hyperwarm.Routing.least_outstanding_requests(),
        model=hyperwarm.ModelSpec(
            hyperwarm.ServingImage.from_uri("111122223333.dkr.ecr.us-west-2.amazonaws.com/vllm:0.10.1"),
            model_data="s3://my-team-models/llama-3.1-8b-instruct/v1/",
            serving=hyperwarm.Serving(framework="vllm")),  # our own image: say which server it runs
    )],
))
chat.metric_model_latency("main", statistic="p90").create_alarm(
    stack, "ChatLatencyAlarm", threshold=2_000_000, evaluation_periods=3)  # microseconds
chat.grant_invoke(iam.Role(stack, "ChatCaller", assumed_by=iam.AccountRootPrincipal()))
# The endpoint is an aws_sagemaker.IEndpoint: aws-cdk-lib's integrations take it as it is.
api = apigateway.RestApi(stack, "ChatApi", cloud_watch_role=False)
api.root.add_resource("chat").add_method("POST", apigateway.SagemakerIntegration(chat),
                                         authorization_type=apigateway.AuthorizationType.IAM)
# A complete new version under the model's prefix (<prefix>/<version>/manifest.json) rolls out blue/green on the
# endpoint, and warm on the cached model (its handle says it is node-cached: staged on every node, then switched).
llama = hyperwarm.HyperPodRefreshTarget(models.model("llama-3-1-8b"))
hyperwarm.CacheRefreshHook(stack, "Refresh", hyperwarm.CacheRefreshHookProps(
    bucket=s3.Bucket.from_bucket_name(stack, "ModelBucket", "my-team-models"),
    models=[hyperwarm.RefreshedPrefix(prefix="llama-3.1-8b-instruct", hyperpod=[llama], endpoints=[
        hyperwarm.EndpointRefreshTarget(chat, hyperwarm.BlueGreen(rollback_alarms=chat.rollback_alarms))])],
))
# Every alarm of the stack (ours, the endpoint's 5XX rollback alarms) notifies on-call: the address is given at
# deploy time (cdk deploy --parameters MyTeamInference:OnCallEmail=<address>), so none is written here; a
# placeholder (example.com, replace-me, ...) fails synth when written, and the deploy when given.
alarms = hyperwarm.AlarmDestination(stack, "Alarms", hyperwarm.AlarmDestinationProps(email_parameter="OnCallEmail"))
# The dashboard and alarms of the endpoint and of the cached model (through the cache metrics exporter).
hyperwarm.InferenceObservability(stack, "Observability", hyperwarm.InferenceObservabilityProps(
    endpoints=[chat], hyperpod=hyperwarm.HyperPodModels(models=list(models.models.values()), refreshed=[llama]),
    # The account's OTel enrichment (PromQL's prerequisite) is one per account: turned on once, outside this app
    # (docs/operations.md); "create" would have this stack create it, in one app of the account only.
    topic=alarms.topic, otel_enrichment="existing"))
hyperwarm.notify_alarms(stack, alarms.topic)
app.synth()
