"""The ``serving`` block of an endpoint variant or a cached model in ``cdk.json``: what the model
server is told beyond the model location and tensor parallelism hyperwarm derives
(:mod:`hyperwarm.serving.settings` holds the rules, shared with the constructs)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from hyperwarm.serving import Serving

from .strict import StrictModel, described

_VARIABLE = described(r"^[A-Za-z_][A-Za-z0-9_]{0,1023}$",
                      "an environment variable name: letters, digits and underscores, not starting with a digit, "
                      "e.g. SM_VLLM_MAX_MODEL_LEN")
_FRAMEWORK = described(r"^[a-z0-9-]+$", "lower-case letters, digits or hyphens, e.g. vllm or djl-lmi")


class ServingConfig(StrictModel):
    """Overrides of what the serving container is told; every field optional."""

    framework: str | None = Field(default=None, pattern=_FRAMEWORK,
                                  description="convention the image follows: vllm, sglang, lmi, tgi (or an official "
                                              "framework name); default: recognised from the image")
    model_env: str | None = Field(default=None, pattern=_VARIABLE,
                                  description="custom server: variable that names the model location")
    parallel_env: str | None = Field(default=None, pattern=_VARIABLE,
                                     description="custom server: variable that names the GPUs to shard over")
    environment: dict[Annotated[str, Field(pattern=_VARIABLE)], Annotated[str, Field(max_length=1024)]] = Field(
        default_factory=dict, description="container environment; wins over derived values")
    args: tuple[str, ...] = Field(default=(), description="server flags, e.g. ['--max-model-len', '8192']")

    def to_serving(self) -> Serving:
        return Serving(environment=dict(self.environment), args=self.args, framework=self.framework,
                       model_env=self.model_env, parallel_env=self.parallel_env)
