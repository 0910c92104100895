"""The one version order (lambdas/cache_refresh/versions.py), case by case, and the error mapping
that decides transient against permanent for SageMaker and S3 answers."""

from __future__ import annotations

import itertools

import pytest
import refresh_world  # noqa: F401  (puts lambdas/ on sys.path)
from botocore.exceptions import ClientError

from hyperwarm.functions.cache_refresh import manifest
from hyperwarm.functions.cache_refresh.errors import PermanentError, TransientError
from hyperwarm.functions.cache_refresh.targets import endpoint
from hyperwarm.functions.cache_refresh.versions import UnorderableVersion, compare, newer

ASCENDING = [
    ["v9", "v10", "v11"],                                   # natural numbers, not text
    ["1.9.0", "1.10.0", "2.0.0"],                           # semantic
    ["1.9.0rc1", "1.9.0", "2.0.0"],                         # the late rc never beats a later release
    ["1.10.0-dev", "1.10.0-alpha.1", "1.10.0a2", "1.10.0-beta", "1.10.0-rc.1", "1.10.0rc2", "1.10.0"],
    ["v9b", "v9", "v10"],                                   # v9 beta
    ["20261101", "20261102"],                               # plain numbers
    ["2026-01-31", "2026-02-01", "2026-02-01T00-00-01Z", "2026-02-01T12-00-00", "20260202T000000Z"],
]


@pytest.mark.parametrize("chain", ASCENDING, ids=lambda c: " < ".join(c))
def test_versions_sort_in_the_documented_order(chain):
    for older, later in itertools.pairwise(chain):
        assert compare(older, later) == -1 and compare(later, older) == 1
        assert newer(later, older) and not newer(older, later)


@pytest.mark.parametrize("a, b", [("v2", "2"), ("1.2", "1.2.0"), ("2026-02-01", "2026-02-01T00-00-00Z")])
def test_two_spellings_of_one_rank_are_different_folders_and_cannot_be_ordered(a, b):
    for x, y in ((a, b), (b, a)):
        with pytest.raises(UnorderableVersion, match="spell one rank in different folders"):
            compare(x, y)
        with pytest.raises(UnorderableVersion):
            newer(x, y)
    assert compare(a, a) == 0 and not newer(a, a)  # the very same folder


@pytest.mark.parametrize("version", ["latest", "v2-hotfix", "1.0.0-foo", "2026-02-30", "v", "1..2", "release-3"])
def test_a_version_outside_the_order_is_unorderable(version):
    with pytest.raises(UnorderableVersion, match="orderable|real date"):
        compare(version, "v1")


def test_versions_of_different_families_are_not_compared():
    with pytest.raises(UnorderableVersion, match="cannot be ordered"):
        compare("2026-11-01", "v3")


def _client_error(code: str, message: str = "") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, "Op")


@pytest.mark.parametrize("code, message", [("ResourceInUse", "endpoint busy"),
                                           ("ValidationError", "Cannot update in-progress endpoint 'x'.")])
def test_an_endpoint_update_in_progress_is_transient(code, message):
    error = endpoint._fail(_client_error(code, message), "UpdateEndpoint llama")
    assert isinstance(error, TransientError) and error.reason == "endpoint-busy"


def test_a_missing_file_answered_with_403_is_reported_missing_not_mismatched():
    class S3:
        def head_object(self, **_):
            raise _client_error("403", "Forbidden")
    files = (manifest.ManifestFile("weights.bin", 10, "0" * 64),)
    with pytest.raises(PermanentError) as raised:
        manifest.verify(S3(), "bucket", "models/llama/v2", files, fill_verified=False)
    assert raised.value.reason == "manifest-object-missing"
    assert "not found or not readable" in raised.value.message
