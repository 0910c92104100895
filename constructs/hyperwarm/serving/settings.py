"""What a model server is told: where its model is, how many GPUs to spread it over, and the
user's own settings, as the serving container's environment (and, for custom servers on
HyperPod, its arguments).

AWS's serving containers read their settings from environment variables, not from arguments:
the vLLM and SGLang SageMaker images turn ``SM_VLLM_<FLAG>`` / ``SM_SGLANG_<FLAG>`` into server
flags (and ignore container arguments), LMI reads ``HF_MODEL_ID`` and ``OPTION_<NAME>``, TGI reads
``HF_MODEL_ID`` and ``SM_NUM_GPUS``. Without a model location vLLM starts its default model (a
download, which fails under network isolation); without tensor parallelism a 70B model lands
on one GPU and runs out of memory. So every model gets both, derived from where it runs: the
model at ``/opt/ml/model`` (where SageMaker puts model data and where HyperPod workers mount
it), tensor parallel degree = the GPUs given to the model. The same function serves SageMaker
endpoints and HyperPod workers, and the deploy rehearsal reads templates with the same tables.

No aws_cdk here: the rules are unit tested and reused by the config models and the rehearsal.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from hyperwarm._internal.catalog import CATALOG

MODEL_DIR = "/opt/ml/model"
"""Where SageMaker puts model data and where hyperwarm mounts a HyperPod worker's model volume."""
SERVING_PORT = 8080
"""The port AWS's serving containers listen on (SageMaker's contract)."""

Platform = Literal["sagemaker", "hyperpod"]
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,1023}")


@dataclass(frozen=True)
class ServerConvention:
    """How one kind of serving container reads its settings."""

    name: str
    model_envs: tuple[str, ...]
    """Variables that name the model; hyperwarm sets the first unless one is given."""
    parallel_envs: tuple[tuple[str, ...], ...]
    """Parallelism factors, each with its alternative names; their product is the GPUs the server uses.
    hyperwarm sets the first name of the first factor (tensor parallelism) unless the factor is given."""
    rule: Literal["equals", "divides"]
    """``equals``: one server uses every GPU given to it; ``divides``: the container starts GPUs/N servers."""
    flag_prefix: str | None
    """Server flags become ``<prefix><FLAG_NAME>`` variables; None: flags stay container arguments."""
    bare_flag: str = ""
    """The value that passes a flag without a value."""
    port_env: str | None = None
    """Variable that moves the server off port 8080; None: the port is fixed."""
    all_gpus: str | None = None
    """A parallelism value meaning "every GPU" (LMI's ``max``)."""
    source: str = ""

    def flag_env(self, flag: str) -> str:
        """``--max-model-len`` -> ``SM_VLLM_MAX_MODEL_LEN`` (the entrypoint's reverse mapping)."""
        assert self.flag_prefix is not None
        return self.flag_prefix + flag.removeprefix("--").replace("-", "_").upper()


_VLLM = ServerConvention(
    "vllm", ("SM_VLLM_MODEL",),  # older entrypoints ignore HF_MODEL_ID
    (("SM_VLLM_TENSOR_PARALLEL_SIZE",), ("SM_VLLM_PIPELINE_PARALLEL_SIZE",), ("SM_VLLM_DATA_PARALLEL_SIZE",)),
    "equals", "SM_VLLM_", port_env="SM_VLLM_PORT",
    source="https://github.com/aws/deep-learning-containers/blob/main/scripts/docker/vllm/sagemaker_args.py")
_SGLANG = ServerConvention(
    "sglang", ("SM_SGLANG_MODEL_PATH",),
    (("SM_SGLANG_TP_SIZE", "SM_SGLANG_TENSOR_PARALLEL_SIZE"),
     ("SM_SGLANG_PP_SIZE", "SM_SGLANG_PIPELINE_PARALLEL_SIZE")),
    "divides", "SM_SGLANG_", port_env="SM_SGLANG_PORT",
    source="https://github.com/aws/deep-learning-containers/blob/main/scripts/docker/sglang/sagemaker_entrypoint.sh")
_LMI = ServerConvention(
    "lmi", ("HF_MODEL_ID", "OPTION_MODEL_ID"),
    (("OPTION_TENSOR_PARALLEL_DEGREE",), ("OPTION_PIPELINE_PARALLEL_DEGREE",)),
    "divides", "OPTION_", bare_flag="true", all_gpus="max",
    source="https://docs.djl.ai/master/docs/serving/serving/docs/lmi/deployment_guide/configurations.html")
_TGI = ServerConvention(
    "tgi", ("HF_MODEL_ID",), (("SM_NUM_GPUS", "NUM_SHARD"),), "equals", "", bare_flag="true",
    source="https://github.com/huggingface/text-generation-inference/blob/main/sagemaker-entrypoint.sh")

CONVENTIONS: dict[str, ServerConvention] = {c.name: c for c in (_VLLM, _SGLANG, _LMI, _TGI)}
"""Known servers by convention name."""
OFFICIAL_FRAMEWORKS: dict[str, str] = {
    "vllm": "vllm", "vllm-server": "vllm", "huggingface-vllm": "vllm",
    "sglang": "sglang", "sglang-server": "sglang",
    "djl-lmi": "lmi", "djl-tensorrtllm": "lmi",
    "huggingface-llm": "tgi",
}
"""``ServingImage.official`` framework names (sagemaker-core's) -> the convention their images follow."""
DLC_REPOSITORIES: dict[str, str] = {
    "vllm": "vllm", "huggingface-vllm": "vllm", "sglang": "sglang", "djl-inference": "lmi",
    "huggingface-pytorch-tgi-inference": "tgi",
}
"""ECR repositories of the official images -> convention."""
_TWO_FLAVOURS = frozenset({"vllm", "sglang"})
"""Repositories holding SageMaker images (tags with a ``sagemaker`` part) beside EC2 and HyperPod
images that take arguments."""
DLC_ACCOUNTS = frozenset({
    "094389454867", "124382933778", "204133271717", "204538143572", "217643126080", "303241398832",
    "364406365360", "371248457586", "380420809688", "442386744353", "446045086412", "454834333376",
    "457447274322", "503227376785", "550225433462", "590183813437", "626614931356", "633930458069",
    "637423239942", "692866216735", "727897471807", "763104351884", "772153158452", "780543022126",
    "871362719292", "886529160074", "907027046896", "914824155844", "975050140332",
})
"""The AWS Deep Learning Containers registries (one per region), as sagemaker-core lists them."""

_DLC_IMAGE = re.compile(
    r"^(?:(?P<account>\d{12})\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(?:\.cn)?|public\.ecr\.aws/deep-learning-containers)"
    r"/(?P<repository>[a-z0-9._-]+)(?::(?P<tag>[\w.+-]+)|@sha256:[0-9a-f]{64})?$")


def convention_of_image(uri: str) -> ServerConvention | None:
    """The convention of an official AWS serving image, or None for anything else.

    Only images from the AWS registries count: a repository of your own named ``vllm`` may hold the
    upstream image, whose entrypoint takes arguments and ignores ``SM_VLLM_*``. The vllm and sglang
    repositories also hold EC2 and HyperPod flavours that take arguments: only tags naming
    ``sagemaker`` count there (a bare digest cannot tell).
    """
    match = _DLC_IMAGE.match(uri)
    if not match or (match["account"] and match["account"] not in DLC_ACCOUNTS):
        return None
    tag_parts = (match["tag"] or "").split("-")
    if "ec2" in tag_parts or (match["repository"] in _TWO_FLAVOURS and "sagemaker" not in tag_parts):
        return None
    name = DLC_REPOSITORIES.get(match["repository"])
    return CONVENTIONS[name] if name else None


@dataclass(frozen=True)
class Serving:
    """What the model server is told beyond what hyperwarm derives (model location, tensor parallelism).

    Default: the derived settings only, for an image hyperwarm recognises.
    """

    environment: Mapping[str, str] = field(default_factory=dict)
    """Container environment variables; they win over derived values. Default: none."""
    args: Sequence[str] = ()
    """Server flags, e.g. ``["--max-model-len", "8192", "--enable-prefix-caching"]``. For AWS's containers
    they become the environment variables the entrypoint reads (its only input); for a custom server on
    HyperPod they are the container's arguments. Default: none."""
    framework: str | None = None
    """The convention the image follows (``vllm``, ``sglang``, ``lmi``, ``tgi`` or an official framework
    name such as ``djl-lmi``). Default: recognised from the image; required for other images unless
    ``model_env`` and ``parallel_env`` are given."""
    model_env: str | None = None
    """Custom server: the variable that tells it where the model is. Default: none."""
    parallel_env: str | None = None
    """Custom server: the variable that tells it how many GPUs to shard over (must divide the GPUs). Default: none."""


@dataclass(frozen=True)
class Problem:
    """One invalid setting: ``field`` (relative to the model: ``serving.args``, ``port``), its value, the rule."""

    field: str
    value: object
    rule: str

    def __str__(self) -> str:
        return f"{self.field} = {self.value!r} -- {self.rule}"

    def at(self, path: str) -> str:
        """In the configuration style: ``<path>.<field>: <value> -- <rule>``."""
        return f"{path}.{self.field}: {self.value!r} -- {self.rule}"


@dataclass(frozen=True)
class ServerSettings:
    """What the container is given; ``problems`` is empty when it will serve its model on its GPUs."""

    convention: ServerConvention | None
    environment: dict[str, str]
    args: tuple[str, ...]
    problems: tuple[Problem, ...]


@dataclass(frozen=True)
class Placement:
    """Where a model runs: what hyperwarm derives its defaults from."""

    platform: Platform
    gpus: int | None
    """GPUs given to the model; None when hyperwarm cannot tell (then parallelism must be explicit)."""
    gpus_from: str
    """Where ``gpus`` comes from, for messages: ``ml.p5.48xlarge has 8 GPUs``."""
    has_model_data: bool = True
    """Whether model data is placed at ``model_dir`` (a SageMaker variant without model_data has none)."""
    model_dir: str = MODEL_DIR
    port: int = SERVING_PORT


SERVING_METADATA = "hyperwarm:serving"
"""CloudFormation metadata key of a Model recording the convention its container was told by."""
SERVING_ANNOTATION = "hyperwarm.io/serving"
"""The same record on an InferenceEndpointConfig (a JSON string)."""


def serving_metadata(settings: ServerSettings) -> dict[str, str]:
    """The convention applied, so the deploy rehearsal can read images it cannot recognise (tokens, custom)."""
    convention = settings.convention
    if convention is None:
        return {}
    if convention.name != "custom":
        return {"framework": convention.name}
    return {"framework": "custom", "model_env": convention.model_envs[0],
            "parallel_env": convention.parallel_envs[0][0]}


def convention_from_metadata(metadata: Mapping[str, Any]) -> ServerConvention | None:
    """The convention recorded by :func:`serving_metadata` (None when absent or unknown)."""
    framework = metadata.get("framework")
    if framework == "custom":
        return convention_for(Serving(model_env=metadata.get("model_env"), parallel_env=metadata.get("parallel_env")),
                              None, None)
    return CONVENTIONS.get(str(framework))


def sagemaker_placement(*, instance_type: Any, serverless: bool = False, component: bool = False,
                        accelerators_per_copy: Any = None, has_model_data: bool = True) -> Placement:
    """The GPUs of a SageMaker variant's model: a copy's accelerators, else its instance type's (catalog)."""
    if serverless:
        return Placement("sagemaker", 0, "serverless variants have no GPU", has_model_data)
    if component:
        # A cdk number token is a huge negative float: only a plausible whole count is one.
        if isinstance(accelerators_per_copy, (int, float)) and 1 <= accelerators_per_copy <= 1024 \
                and float(accelerators_per_copy).is_integer():
            n = int(accelerators_per_copy)
            return Placement("sagemaker", n, f"inference_component.accelerators_per_copy is {n}", has_model_data)
        return Placement("sagemaker", None, "the inference component sets no whole accelerators_per_copy",
                         has_model_data)
    spec = CATALOG.get(instance_type) if isinstance(instance_type, str) else None
    if spec is None and "${Token[" in str(instance_type):
        return Placement("sagemaker", None, "the instance type is only known at deploy time", has_model_data)
    if spec is None:
        return Placement("sagemaker", None, f"instance type {instance_type} is not in hyperwarm's instance catalog",
                         has_model_data)
    return Placement("sagemaker", spec.gpus, f"{instance_type} has {spec.gpus} GPU(s)", has_model_data)


def convention_for(serving: Serving, image_framework: str | None, image_uri: str | None) -> ServerConvention | None:
    """The convention to apply: explicit, else the official framework's, else recognised from the URI."""
    if serving.framework:
        return CONVENTIONS.get(OFFICIAL_FRAMEWORKS.get(serving.framework, serving.framework))
    if serving.model_env and serving.parallel_env:
        return ServerConvention("custom", (serving.model_env,), ((serving.parallel_env,),), "divides", None)
    if image_framework:
        name = OFFICIAL_FRAMEWORKS.get(image_framework)
        return CONVENTIONS[name] if name else None
    return convention_of_image(image_uri) if image_uri else None


def server_settings(serving: Serving, placement: Placement, *, image: str,
                    image_framework: str | None = None, image_uri: str | None = None) -> ServerSettings:
    """The serving container's environment and arguments for ``placement``, and every problem with them.

    ``image`` describes the image in messages; ``image_framework`` is ``ServingImage.official``'s
    framework, ``image_uri`` a literal URI (either may be None).
    """
    problems: list[Problem] = []
    known = ", ".join([*CONVENTIONS, *(f for f in OFFICIAL_FRAMEWORKS if f not in CONVENTIONS)])
    convention = convention_for(serving, image_framework, image_uri)
    if serving.framework and convention is None:
        problems.append(Problem("serving.framework", serving.framework, f"unknown; allowed: {known}"))
    elif serving.framework and convention is not None and (serving.model_env or serving.parallel_env):
        problems.append(Problem("serving.model_env" if serving.model_env else "serving.parallel_env",
                                serving.model_env or serving.parallel_env,
                                f"only for custom servers; the {convention.name} convention names its own variables"))
    elif convention is None:
        field_name = "model_env" if serving.model_env else "parallel_env" if serving.parallel_env else "framework"
        problems.append(Problem(f"serving.{field_name}", getattr(serving, field_name), (
            f"hyperwarm cannot tell how the server in {image} reads its model location and parallelism; "
            f"allowed: framework = one of {known} (an image following that container's conventions), "
            "or both model_env and parallel_env naming the variables a custom server reads")))
    if convention is None:
        return ServerSettings(None, dict(serving.environment), tuple(serving.args), tuple(problems))

    given, origin, args = _given(convention, serving, placement.platform, problems)
    environment = dict(given)
    if not any(given.get(name) for name in convention.model_envs):
        if placement.has_model_data:
            environment[convention.model_envs[0]] = placement.model_dir
        else:
            problems.append(Problem("serving.environment", dict(given), (
                f"the model has no model_data, so nothing is at {placement.model_dir}; give model_data or set "
                f"{' or '.join(convention.model_envs)} to the model (a download fails under network isolation)")))
    problems += _parallelism(convention, given, origin, placement, environment)
    if placement.port != SERVING_PORT:
        if convention.port_env is None:
            problems.append(Problem("port", placement.port, f"the {convention.name} container listens on "
                                                            f"{SERVING_PORT}; allowed: {SERVING_PORT}"))
        elif convention.port_env not in given:
            environment[convention.port_env] = str(placement.port)
    return ServerSettings(convention, dict(sorted(environment.items())), args, tuple(problems))


def _given(convention: ServerConvention, serving: Serving, platform: Platform,
           problems: list[Problem]) -> tuple[dict[str, str], dict[str, tuple[str, str]], tuple[str, ...]]:
    """(variables the user set, (field, value) each came from, container arguments left)."""
    given: dict[str, str] = {}
    origin: dict[str, tuple[str, str]] = {}
    args = tuple(serving.args)
    if convention.flag_prefix is not None:
        for flag, value in _flags(serving.args, problems):
            name = convention.flag_env(flag)
            given[name] = convention.bare_flag if value is None else value
            origin[name] = ("serving.args", flag if value is None else f"{flag} {value}")
        args = ()
    elif args and platform == "sagemaker":
        problems.append(Problem("serving.args", list(args),
                                "SageMaker model containers take no arguments; allowed: settings in environment"))
    for name, value in serving.environment.items():
        if not _ENV_NAME.fullmatch(name):
            problems.append(Problem(f"serving.environment.{name}", value, "allowed: variable names of "
                                    "letters, digits and underscores, not starting with a digit"))
        if name in given and given[name] != value:
            problems.append(Problem(f"serving.environment.{name}", value,
                                    f"also set by {origin[name][0]} {origin[name][1]!r}; allowed: one of them"))
        given[name] = value
        origin[name] = (f"serving.environment.{name}", value)
    return given, origin, args


def _flags(args: Sequence[str], problems: list[Problem]) -> list[tuple[str, str | None]]:
    """``--name value``, ``--name=value`` and bare ``--name`` pairs; anything else is a problem."""
    flags: list[tuple[str, str | None]] = []
    index = 0
    while index < len(args):
        token = args[index]
        index += 1
        if not re.match(r"^--[a-z0-9][a-z0-9-]*(=.*)?$", token):
            problems.append(Problem("serving.args", token, "allowed: long flags (--name value, --name=value or "
                                                           "--name); give short flags such as -tp in their long form"))
            continue
        if "=" in token:
            flag, value = token.split("=", 1)
            flags.append((flag, value))
        elif index < len(args) and not args[index].startswith("--"):
            flags.append((token, args[index]))
            index += 1
        else:
            flags.append((token, None))
    return flags


def _parallelism(convention: ServerConvention, given: Mapping[str, str], origin: Mapping[str, tuple[str, str]],
                 placement: Placement, environment: dict[str, str]) -> list[Problem]:
    """Default tensor parallelism to the GPUs; check the GPUs the settings use against those given."""
    gpus = placement.gpus
    problems = [
        Problem(*origin[name], "allowed: a positive integer"
                + (f" or {convention.all_gpus!r}" if convention.all_gpus else ""))
        for names in convention.parallel_envs for name in names
        if name in given and _parallel_value(convention, given[name], 1) is None]
    tensor = convention.parallel_envs[0]
    if not any(n in given for n in tensor):
        if gpus is None:
            problems.append(Problem("serving.environment", dict(given), (
                f"{placement.gpus_from}, so hyperwarm cannot derive tensor parallelism; "
                f"set {tensor[0]} to the GPUs the model gets")))
        elif gpus > 0:
            environment[tensor[0]] = str(gpus)
    if problems or gpus is None:
        return problems
    used = gpus_used(convention, environment, gpus)
    if used is not None and not parallelism_fits(convention, used, gpus):
        names = [n for alternatives in convention.parallel_envs for n in alternatives if n in environment]
        where, shown = origin.get(names[0], (f"serving.environment.{names[0]}", environment[names[0]])) \
            if len(names) == 1 else ("serving.environment", " x ".join(f"{n}={environment[n]}" for n in names))
        if gpus == 0:
            allowed = "no parallelism (1)"
        elif convention.rule == "equals":
            allowed = f"settings whose product is {gpus}"
        else:
            allowed = f"a product dividing {gpus} ({', '.join(str(d) for d in range(1, gpus + 1) if gpus % d == 0)})"
        verb = "runs one server on" if convention.rule == "equals" else "shards each model copy over"
        problems.append(Problem(where, shown, f"{convention.name} {verb} {used} GPU(s) but "
                                              f"{placement.gpus_from}; allowed: {allowed}"))
    return problems


def _parallel_value(convention: ServerConvention, value: str, gpus: int) -> int | None:
    if convention.all_gpus and value == convention.all_gpus:
        return gpus
    return int(value) if re.fullmatch(r"[1-9][0-9]*", value) else None


def gpus_used(convention: ServerConvention, environment: Mapping[str, str], gpus: int) -> int | None:
    """The GPUs a server started with ``environment`` uses (None when a value is not a number)."""
    used = 1
    for names in convention.parallel_envs:
        value = _parallel_value(convention, next((environment[n] for n in names if n in environment), "1"), gpus)
        if value is None:
            return None
        used *= value
    return used


def parallelism_fits(convention: ServerConvention, used: int, gpus: int) -> bool:
    """Whether a server using ``used`` GPUs suits ``gpus`` GPUs under the convention's rule."""
    if gpus == 0:
        return used == 1
    return used == gpus if convention.rule == "equals" else gpus % used == 0
