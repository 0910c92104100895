"""What a model server is told: defaults per framework, overrides, and every validation message."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest

from hyperwarm.serving.settings import (
    DLC_ACCOUNTS,
    DLC_REPOSITORIES,
    OFFICIAL_FRAMEWORKS,
    Placement,
    Serving,
    convention_of_image,
    sagemaker_placement,
    server_settings,
)

P5 = sagemaker_placement(instance_type="ml.p5.48xlarge")  # 8 GPUs
DLC_VLLM = "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:0.27.1-gpu-py312-cu130-ubuntu22.04-sagemaker"


def told(serving: Serving = Serving(), placement: Placement = P5, **image: Any) -> dict[str, str]:
    image.setdefault("image_framework", "vllm")
    settings = server_settings(serving, placement, image="test image", **image)
    assert settings.problems == (), [str(p) for p in settings.problems]
    return settings.environment


def problems(serving: Serving = Serving(), placement: Placement = P5, **image: Any) -> list[str]:
    image.setdefault("image_framework", "vllm")
    return [str(p) for p in server_settings(serving, placement, image="test image", **image).problems]


# -- defaults per framework: model at /opt/ml/model, tensor parallelism = GPUs ---------------


@pytest.mark.parametrize("framework, expected", [
    ("vllm", {"SM_VLLM_MODEL": "/opt/ml/model", "SM_VLLM_TENSOR_PARALLEL_SIZE": "8"}),
    ("vllm-server", {"SM_VLLM_MODEL": "/opt/ml/model", "SM_VLLM_TENSOR_PARALLEL_SIZE": "8"}),
    ("sglang", {"SM_SGLANG_MODEL_PATH": "/opt/ml/model", "SM_SGLANG_TP_SIZE": "8"}),
    ("djl-lmi", {"HF_MODEL_ID": "/opt/ml/model", "OPTION_TENSOR_PARALLEL_DEGREE": "8"}),
    ("djl-tensorrtllm", {"HF_MODEL_ID": "/opt/ml/model", "OPTION_TENSOR_PARALLEL_DEGREE": "8"}),
    ("huggingface-llm", {"HF_MODEL_ID": "/opt/ml/model", "SM_NUM_GPUS": "8"}),
])
def test_each_official_framework_is_told_its_model_and_all_gpus(framework: str, expected: dict[str, str]) -> None:
    assert told(image_framework=framework) == expected


def test_tensor_parallelism_follows_the_instance_types_gpus() -> None:
    assert told(placement=sagemaker_placement(instance_type="ml.g6e.12xlarge"))["SM_VLLM_TENSOR_PARALLEL_SIZE"] == "4"
    assert told(placement=sagemaker_placement(instance_type="ml.g5.2xlarge"))["SM_VLLM_TENSOR_PARALLEL_SIZE"] == "1"


def test_an_inference_component_copy_gets_its_own_accelerators() -> None:
    placement = sagemaker_placement(instance_type="ml.p5.48xlarge", component=True, accelerators_per_copy=2)
    assert told(placement=placement)["SM_VLLM_TENSOR_PARALLEL_SIZE"] == "2"


def test_a_cpu_only_or_serverless_model_gets_no_parallelism() -> None:
    assert told(placement=sagemaker_placement(instance_type="ml.m5.xlarge")) == {"SM_VLLM_MODEL": "/opt/ml/model"}
    assert told(placement=sagemaker_placement(instance_type=None, serverless=True)) == {"SM_VLLM_MODEL": "/opt/ml/model"}


def test_a_hyperpod_worker_is_told_its_mount_path_gpus_and_port() -> None:
    placement = Placement("hyperpod", 4, "resources.gpus is 4", model_dir="/mnt/model", port=9000)
    assert told(placement=placement) == {"SM_VLLM_MODEL": "/mnt/model", "SM_VLLM_PORT": "9000",
                                         "SM_VLLM_TENSOR_PARALLEL_SIZE": "4"}


# -- recognising images --------------------------------------------------------------------


@pytest.mark.parametrize("uri, expected", [
    (DLC_VLLM, "vllm"),
    ("763104351884.dkr.ecr.us-west-2.amazonaws.com/djl-inference:0.33.0-lmi15.0.0-cu128", "lmi"),
    ("763104351884.dkr.ecr.us-west-2.amazonaws.com/"
     "huggingface-pytorch-tgi-inference:2.4.0-tgi2.4.0-gpu-py311-cu124-ubuntu22.04", "tgi"),
    ("763104351884.dkr.ecr.us-west-2.amazonaws.com/sglang:0.5.20-gpu-py312-cu130-ubuntu24.04-sagemaker", "sglang"),
    ("763104351884.dkr.ecr.us-west-2.amazonaws.com/"
     "huggingface-vllm:0.29.0-transformers5.15.0-gpu-py312-cu130-ubuntu24.04-v1.0", "vllm"),
    ("public.ecr.aws/deep-learning-containers/vllm:server-sagemaker-cuda", "vllm"),
    # The EC2 and HyperPod flavours in the same repositories read arguments, not SM_VLLM_*.
    ("public.ecr.aws/deep-learning-containers/vllm:server-cuda", None),
    ("763104351884.dkr.ecr.us-west-2.amazonaws.com/vllm:server-hyperpod-cuda", None),
    ("763104351884.dkr.ecr.us-west-2.amazonaws.com/vllm@sha256:" + "0" * 64, None),
    # Not AWS's serving containers: a repository of your own, or the DLC flavour that takes arguments.
    ("123456789012.dkr.ecr.us-west-2.amazonaws.com/vllm:0.27.1", None),
    ("763104351884.dkr.ecr.us-west-2.amazonaws.com/vllm:0.27.1-gpu-py312-cu130-ubuntu22.04-ec2", None),
    ("763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-inference:2.6.0-gpu-py312", None),
])
def test_official_images_are_recognised_by_registry_and_repository(uri: str, expected: str | None) -> None:
    convention = convention_of_image(uri)
    assert (convention.name if convention else None) == expected


@pytest.mark.parametrize("framework", OFFICIAL_FRAMEWORKS)
def test_every_official_image_sagemaker_core_resolves_is_recognised(framework: str) -> None:
    """The registry, repository and tag rules agree with what ``ServingImage.official`` resolves."""
    from sagemaker.core import image_uris

    config = json.loads((resources.files("sagemaker.core") / "image_uri_config" / f"{framework}.json").read_text())
    found: list[tuple[str, str, dict[str, Any]]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "registries" in node and "repository" in node:
                found.append((node["repository"], node["registries"], node))
            for child in node.values():
                walk(child)

    walk(config)
    assert found
    for repository, registries, _ in found:
        assert set(registries.values()) <= DLC_ACCOUNTS, repository
        assert DLC_REPOSITORIES.get(repository) == OFFICIAL_FRAMEWORKS[framework], repository
    versions = config.get("versions") or config["inference"]["versions"]
    for version in list(versions)[-3:]:
        for region in ("us-west-2", "eu-central-1", "ap-northeast-1"):
            uri = image_uris.retrieve(framework=framework, version=version, region=region)
            convention = convention_of_image(uri)
            assert convention is not None and convention.name == OFFICIAL_FRAMEWORKS[framework], uri


# -- overrides -------------------------------------------------------------------------------


def test_args_become_the_variables_the_entrypoint_reads() -> None:
    env = told(Serving(args=["--max-model-len", "8192", "--enable-prefix-caching", "--dtype=bfloat16"]))
    assert env == {"SM_VLLM_DTYPE": "bfloat16", "SM_VLLM_ENABLE_PREFIX_CACHING": "", "SM_VLLM_MAX_MODEL_LEN": "8192",
                   "SM_VLLM_MODEL": "/opt/ml/model", "SM_VLLM_TENSOR_PARALLEL_SIZE": "8"}


def test_lmi_flags_become_options_and_bare_flags_are_true() -> None:
    env = told(Serving(args=["--max-rolling-batch-size", "64", "--enable-prefix-caching"]), image_framework="djl-lmi")
    assert env["OPTION_MAX_ROLLING_BATCH_SIZE"] == "64" and env["OPTION_ENABLE_PREFIX_CACHING"] == "true"


def test_environment_overrides_the_derived_model_and_parallelism() -> None:
    env = told(Serving(environment={"SM_VLLM_MODEL": "/opt/ml/model/llama", "SM_VLLM_TENSOR_PARALLEL_SIZE": "4",
                                    "SM_VLLM_PIPELINE_PARALLEL_SIZE": "2"}))
    assert env == {"SM_VLLM_MODEL": "/opt/ml/model/llama", "SM_VLLM_PIPELINE_PARALLEL_SIZE": "2",
                   "SM_VLLM_TENSOR_PARALLEL_SIZE": "4"}


def test_a_hub_model_id_without_model_data_is_a_model_location() -> None:
    placement = sagemaker_placement(instance_type="ml.g5.2xlarge", has_model_data=False)
    assert told(Serving(environment={"HF_MODEL_ID": "Qwen/Qwen2.5-1.5B-Instruct"}), placement,
                image_framework="huggingface-llm") == {"HF_MODEL_ID": "Qwen/Qwen2.5-1.5B-Instruct", "SM_NUM_GPUS": "1"}


def test_lmi_max_means_every_gpu() -> None:
    assert told(Serving(environment={"OPTION_TENSOR_PARALLEL_DEGREE": "max"}), image_framework="djl-lmi")[
        "OPTION_TENSOR_PARALLEL_DEGREE"] == "max"


def test_sglang_alias_for_tensor_parallelism_is_not_doubled() -> None:
    env = told(Serving(args=["--tensor-parallel-size", "8"]), image_framework="sglang")
    assert "SM_SGLANG_TP_SIZE" not in env and env["SM_SGLANG_TENSOR_PARALLEL_SIZE"] == "8"


def test_tgi_shards_given_as_a_flag_replace_the_derived_gpu_count() -> None:
    env = told(Serving(args=["--num-shard", "8", "--max-input-tokens", "4096"]), image_framework="huggingface-llm")
    assert env == {"HF_MODEL_ID": "/opt/ml/model", "MAX_INPUT_TOKENS": "4096", "NUM_SHARD": "8"}


def test_an_unrecognised_image_follows_an_explicit_framework() -> None:
    env = told(Serving(framework="vllm"), image_framework=None,
               image_uri="123456789012.dkr.ecr.us-west-2.amazonaws.com/vllm:0.27.1")
    assert env["SM_VLLM_TENSOR_PARALLEL_SIZE"] == "8"


def test_a_custom_server_names_its_own_variables_and_keeps_its_args_on_hyperpod() -> None:
    serving = Serving(model_env="MODEL_DIR", parallel_env="NUM_GPUS", args=["--verbose"])
    settings = server_settings(serving, Placement("hyperpod", 4, "resources.gpus is 4"), image="my-server:1")
    assert (settings.environment, settings.args, settings.problems) == (
        {"MODEL_DIR": "/opt/ml/model", "NUM_GPUS": "4"}, ("--verbose",), ())


# -- validation messages: field, value, what is allowed --------------------------------------


def test_tensor_parallelism_below_the_gpus_of_one_vllm_server_is_rejected() -> None:
    assert problems(Serving(environment={"SM_VLLM_TENSOR_PARALLEL_SIZE": "1"})) == [
        "serving.environment.SM_VLLM_TENSOR_PARALLEL_SIZE = '1' -- vllm runs one server on 1 GPU(s) but ml.p5.48xlarge "
        "has 8 GPU(s); allowed: settings whose product is 8"]


def test_parallelism_given_as_args_is_named_as_args() -> None:
    assert problems(Serving(args=["--tensor-parallel-size", "16"])) == [
        "serving.args = '--tensor-parallel-size 16' -- vllm runs one server on 16 GPU(s) but ml.p5.48xlarge has 8 GPU(s); "
        "allowed: settings whose product is 8"]


def test_tensor_times_data_parallelism_must_use_every_gpu() -> None:
    assert told(Serving(environment={"SM_VLLM_TENSOR_PARALLEL_SIZE": "4", "SM_VLLM_DATA_PARALLEL_SIZE": "2"}))
    assert problems(Serving(environment={"SM_VLLM_TENSOR_PARALLEL_SIZE": "4", "SM_VLLM_DATA_PARALLEL_SIZE": "3"})) == [
        "serving.environment = 'SM_VLLM_TENSOR_PARALLEL_SIZE=4 x SM_VLLM_DATA_PARALLEL_SIZE=3' -- vllm runs one server on "
        "12 GPU(s) but ml.p5.48xlarge has 8 GPU(s); allowed: settings whose product is 8"]


def test_lmi_parallelism_must_divide_the_gpus() -> None:
    assert told(Serving(environment={"OPTION_TENSOR_PARALLEL_DEGREE": "2"}), image_framework="djl-lmi")
    assert problems(Serving(environment={"OPTION_TENSOR_PARALLEL_DEGREE": "3"}), image_framework="djl-lmi") == [
        "serving.environment.OPTION_TENSOR_PARALLEL_DEGREE = '3' -- lmi shards each model copy over 3 GPU(s) but "
        "ml.p5.48xlarge has 8 GPU(s); allowed: a product dividing 8 (1, 2, 4, 8)"]


def test_non_numeric_parallelism_is_rejected() -> None:
    assert problems(Serving(environment={"SM_VLLM_TENSOR_PARALLEL_SIZE": "eight"})) == [
        "serving.environment.SM_VLLM_TENSOR_PARALLEL_SIZE = 'eight' -- allowed: a positive integer"]


def test_parallelism_on_a_cpu_instance_is_rejected() -> None:
    assert problems(Serving(environment={"SM_VLLM_TENSOR_PARALLEL_SIZE": "2"}),
                    sagemaker_placement(instance_type="ml.m5.xlarge")) == [
        "serving.environment.SM_VLLM_TENSOR_PARALLEL_SIZE = '2' -- vllm runs one server on 2 GPU(s) but ml.m5.xlarge has "
        "0 GPU(s); allowed: no parallelism (1)"]


def test_unknown_gpus_need_explicit_parallelism() -> None:
    placement = sagemaker_placement(instance_type="ml.g4dn.12xlarge")
    assert problems(placement=placement) == [
        "serving.environment = {} -- instance type ml.g4dn.12xlarge is not in hyperwarm's instance catalog, so hyperwarm "
        "cannot derive tensor parallelism; set SM_VLLM_TENSOR_PARALLEL_SIZE to the GPUs the model gets"]
    assert told(Serving(environment={"SM_VLLM_TENSOR_PARALLEL_SIZE": "4"}), placement)


def test_no_model_data_and_no_model_variable_is_rejected() -> None:
    assert problems(placement=sagemaker_placement(instance_type="ml.g5.2xlarge", has_model_data=False)) == [
        "serving.environment = {} -- the model has no model_data, so nothing is at /opt/ml/model; give model_data or set "
        "SM_VLLM_MODEL to the model (a download fails under network isolation)"]


def test_an_unrecognised_image_without_explicit_settings_is_rejected() -> None:
    (message,) = problems(image_framework=None, image_uri="123456789012.dkr.ecr.us-west-2.amazonaws.com/vllm:1")
    assert message.startswith("serving.framework = None -- hyperwarm cannot tell how the server in test image reads its model "
                              "location and parallelism; allowed: framework = one of vllm, sglang, lmi, tgi, ")
    assert "or both model_env and parallel_env naming the variables a custom server reads" in message


def test_an_unknown_framework_name_is_rejected() -> None:
    (message,) = problems(Serving(framework="triton"))
    assert message.startswith("serving.framework = 'triton' -- unknown; allowed: vllm, sglang, lmi, tgi, ")


def test_custom_variables_with_a_known_framework_are_rejected() -> None:
    assert problems(Serving(framework="vllm", model_env="MODEL")) == [
        "serving.model_env = 'MODEL' -- only for custom servers; the vllm convention names its own variables"]


def test_args_of_a_custom_server_on_sagemaker_are_rejected() -> None:
    assert problems(Serving(model_env="M", parallel_env="N", args=["--x"]), image_framework=None) == [
        "serving.args = ['--x'] -- SageMaker model containers take no arguments; allowed: settings in environment"]


def test_short_flags_and_stray_values_are_rejected() -> None:
    assert problems(Serving(args=["-tp", "8"])) == [
        "serving.args = '-tp' -- allowed: long flags (--name value, --name=value or --name); give short flags such as -tp "
        "in their long form", "serving.args = '8' -- allowed: long flags (--name value, --name=value or --name); give short "
        "flags such as -tp in their long form"]


def test_the_same_variable_from_args_and_environment_must_agree() -> None:
    assert problems(Serving(args=["--max-model-len", "4096"], environment={"SM_VLLM_MAX_MODEL_LEN": "8192"})) == [
        "serving.environment.SM_VLLM_MAX_MODEL_LEN = '8192' -- also set by serving.args '--max-model-len 4096'; "
        "allowed: one of them"]


def test_invalid_variable_names_are_rejected() -> None:
    assert problems(Serving(environment={"1BAD": "x"})) == [
        "serving.environment.1BAD = 'x' -- allowed: variable names of letters, digits and underscores, not starting with a digit"]


def test_a_port_the_container_cannot_move_to_is_rejected() -> None:
    placement = Placement("hyperpod", 1, "resources.gpus is 1", port=9000)
    assert problems(placement=placement, image_framework="huggingface-llm") == [
        "port = 9000 -- the tgi container listens on 8080; allowed: 8080"]

