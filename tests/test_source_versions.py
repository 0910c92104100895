"""A non-S3 source changes version by config: the same model at another version renders the same object but for
the fields that name the version (what a deploy changes, and the operator rolls)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from test_cached_models import build, llama

from hyperwarm.caches import FsxModelSource, HuggingFaceModelSource, JumpStartModelSource, ModelSource

SHA_A, SHA_B = "a" * 40, "b" * 40


def _diff(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in _diff(a.get(k), b.get(k), f"{path}.{k}")]
    return [] if a == b else [path]


def _deployment(model: Any) -> dict[str, Any]:
    (obj,) = [o for o in build(model).objects if o["kind"] in ("InferenceEndpointConfig", "JumpStartModel")]
    return obj


_SOURCES = pytest.mark.parametrize("first, second, fields", [
    (ModelSource("my-models", "llama", "v1"), ModelSource("my-models", "llama", "v2"),
     [".spec.modelSourceConfig.modelLocation", ".spec.modelVersion"]),
    (FsxModelSource("fs-0123456789abcdef0", "abcdef12", "models/llama", "v1", security_group_id="sg-0123456789abcdef0"),
     FsxModelSource("fs-0123456789abcdef0", "abcdef12", "models/llama", "v2", security_group_id="sg-0123456789abcdef0"),
     [".spec.modelSourceConfig.modelLocation", ".spec.modelVersion"]),
    (HuggingFaceModelSource("Qwen/Qwen2.5-7B-Instruct", SHA_A), HuggingFaceModelSource("Qwen/Qwen2.5-7B-Instruct", SHA_B),
     [".spec.modelSourceConfig.huggingFaceModel.commitSHA", ".spec.modelVersion"]),
    (JumpStartModelSource("deepseek-llm-r1-distill-qwen-1-5b", "2.0.4"),
     JumpStartModelSource("deepseek-llm-r1-distill-qwen-1-5b", "2.0.5"), [".spec.model.modelVersion"]),
], ids=["s3", "fsx", "huggingface", "jumpstart"])


@_SOURCES
def test_a_new_version_in_config_changes_only_the_fields_that_name_it(first: Any, second: Any,
                                                                    fields: list[str]) -> None:
    extra: dict[str, Any] = {"image": None} if isinstance(first, JumpStartModelSource) else {}
    model = llama(source=first, **extra)
    assert _diff(_deployment(model), _deployment(dataclasses.replace(model, source=second))) == fields


@_SOURCES
def test_a_source_names_its_version_field_and_the_object_it_deploys_as(first: Any, second: Any,
                                                                       fields: list[str]) -> None:
    """What the deploy guard names when a version would move back, and the kind a model's handle says."""
    assert dataclasses.replace(first, **{first.version_field: second.version}) == second
    extra: dict[str, Any] = {"image": None} if isinstance(first, JumpStartModelSource) else {}
    assert _deployment(llama(source=first, **extra))["kind"] == first.deployment_kind
