"""Official image URIs: resolved offline once per sagemaker-core version, then read from the cache."""

from __future__ import annotations

import json

import pytest

from hyperwarm.serving.images import _cache_file, official_image_uri


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    official_image_uri.cache_clear()
    yield tmp_path
    official_image_uri.cache_clear()


def test_resolution_is_written_to_the_versioned_cache(cache_home) -> None:
    uri = official_image_uri("vllm", "0.27.1", "us-west-2")
    assert uri == "763104351884.dkr.ecr.us-west-2.amazonaws.com/vllm:0.27.1-gpu-py312-cu130-ubuntu22.04-sagemaker"
    cache = _cache_file("vllm", "0.27.1")
    assert cache.parent.parent == cache_home and "sagemaker-core-" in cache.name
    assert json.loads(cache.read_text()) == {"vllm|0.27.1|us-west-2": uri}


def test_a_cached_answer_is_used_without_resolving(cache_home) -> None:
    cache = _cache_file("vllm", "0.27.1")
    cache.parent.mkdir(parents=True)
    cache.write_text(json.dumps({"vllm|0.27.1|eu-west-1": "111111111111.dkr.ecr.eu-west-1.amazonaws.com/cached:1"}))
    assert official_image_uri("vllm", "0.27.1", "eu-west-1") == "111111111111.dkr.ecr.eu-west-1.amazonaws.com/cached:1"


def test_a_corrupt_cache_is_rebuilt(cache_home) -> None:
    cache = _cache_file("djl-lmi", "0.33.0")
    cache.parent.mkdir(parents=True)
    cache.write_text("{not json")
    uri = official_image_uri("djl-lmi", "0.33.0", "us-east-1")
    assert uri.startswith("763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.33.0")
    assert json.loads(cache.read_text()) == {"djl-lmi|0.33.0|us-east-1": uri}


def test_unknown_version_names_framework_version_and_region(cache_home) -> None:
    with pytest.raises(ValueError, match=r"no official vllm 9.9.9 image in us-west-2"):
        official_image_uri("vllm", "9.9.9", "us-west-2")
