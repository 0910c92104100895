"""The ``refresh`` section: which model prefixes refresh which caches and endpoints.

A new model version is a new folder ``s3://<bucket>/<prefix>/<version>/`` that is complete once its
``manifest.json`` lands. Each entry maps one ``prefix`` to the cached HyperPod deployments
(names from ``caches.models``) and the SageMaker endpoints (names from ``endpoints``) that serve
it; cross-section rules (names exist, they really read that prefix) live in
:func:`refresh_problems`, called from the environment's validator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, model_validator

from hyperwarm.caches import ModelSource
from hyperwarm.functions.cache_refresh import versions
from hyperwarm.refresh import MaxStep, ReservedConcurrency, RolloutTimeout, VersionPattern, refresh_source_problem

from .library import config_type
from .strict import BUCKET, KEY_PREFIX, KMS_KEY, PRINCIPAL, StrictModel, repeated

if TYPE_CHECKING:
    Versions = VersionPattern
else:
    Versions = config_type(VersionPattern)  # the library's rule, applied by pydantic too


class RefreshedModel(StrictModel):
    """One model prefix and everything that serves it."""

    prefix: str = Field(pattern=KEY_PREFIX, description="S3 key prefix in front of <version>/manifest.json")
    caches: tuple[str, ...] = Field(default=(), description="names of caches.models served from this prefix")
    endpoints: tuple[str, ...] = Field(default=(), description="names of endpoints with a variant on this prefix")
    staging_timeout: RolloutTimeout | None = Field(
        default=None, description="seconds a warm version change of these caches may take to stage the new version on "
                                  "the nodes (HyperPodRefreshTarget.staging_timeout; default from the model's size)")
    switch_timeout: RolloutTimeout | None = Field(
        default=None, description="seconds the deployment's rollout to the staged version may take "
                                  "(HyperPodRefreshTarget.switch_timeout; default 30 minutes)")
    versions: Versions | None = Field(
        default=None, description="a regular expression every new version folder must match whole, e.g. v\\d+ "
                                  "(RefreshedPrefix.versions); default: any orderable version")
    max_step: MaxStep | None = Field(
        default=None, description="how far a numeric version may move past the one that serves in the first part that "
                                  "differs (RefreshedPrefix.max_step); default: at most one digit more")
    pinned: bool = Field(
        default=False, description="deploy exactly the versions cdk.json names for these caches and endpoints, even "
                                   "where a refresh moved them further (a deliberate rollback), and refresh nothing "
                                   "under the prefix until unpinned; default false: deploys follow what the refresh "
                                   "made serve (stacks/served.py)")

    @model_validator(mode="after")
    def _has_targets(self) -> RefreshedModel:
        if not self.caches and not self.endpoints:
            raise ValueError(f"refresh of prefix {self.prefix!r} names no caches and no endpoints")
        return self


class SigningConfig(StrictModel):
    """Who may publish the versions a refresh moves targets to (CacheRefreshHookProps.signing)."""

    required: bool | None = Field(
        default=None, description="only versions signed with the publisher key move anything (model.sig, hyperwarm "
                                  "publish); default: true in production, else false")
    publishers: tuple[Annotated[str, Field(pattern=PRINCIPAL)], ...] = Field(
        default=(), description="IAM roles or users that may sign with the key (kms:Sign), the only principals a new "
                                "key's policy does not deny it to; writing the refreshed prefixes of an existing "
                                "bucket stays their own policy")
    key_arn: str | None = Field(
        default=None, pattern=KMS_KEY, description="an existing ECC_NIST_P256 SIGN_VERIFY key, whose policy stays its "
                                                   "owner's (it must deny kms:Sign to all but the publishers); "
                                                   "default: a new one")


class RefreshConfig(StrictModel):
    """Event-driven refresh of caches and endpoints; off (no models) by default."""

    bucket: str | None = Field(default=None, pattern=BUCKET, description="the model-source bucket")
    create_bucket: bool = Field(default=False, description="moved: model_buckets[].create")
    dry_run: bool = Field(default=False, description="decide and log, change nothing")
    models: tuple[RefreshedModel, ...] = ()
    signing: SigningConfig = Field(default_factory=SigningConfig)
    reserved_concurrency: ReservedConcurrency | None = Field(
        default=None, description="concurrent executions each refresh function reserves and may not exceed "
                                  "(CacheRefreshHookProps.reserved_concurrency); default none reserved")

    @model_validator(mode="after")
    def _rules(self) -> RefreshConfig:
        if self.create_bucket:
            raise ValueError(f"refresh.create_bucket moved to model_buckets: declare "
                             f'{{"name": "{self.bucket}", "create": true}} there, so the bucket exists before the '
                             "caches and endpoints that read it deploy")
        if self.models and not self.bucket:
            raise ValueError("refresh.models needs refresh.bucket, the bucket new versions land in")
        dupes = repeated(m.prefix for m in self.models)
        if dupes:
            raise ValueError(f"refresh prefixes must be unique; repeated: {', '.join(dupes)}")
        if self.models and not self.active:
            raise ValueError("refresh.models: every prefix is pinned, so the refresh stack would refresh nothing; "
                             "leave one unpinned, or remove the refresh section (its state table is retained)")
        return self

    @property
    def active(self) -> tuple[RefreshedModel, ...]:
        """The prefixes the refresh function refreshes: every one not pinned."""
        return tuple(m for m in self.models if not m.pinned)

    @property
    def cached_models(self) -> tuple[str, ...]:
        """Names of the cached models a refresh prefix targets (each reserves two versions on its NVMe)."""
        return tuple(dict.fromkeys(name for m in self.models for name in m.caches))


def refresh_problems(refresh: RefreshConfig, caches: Any, endpoints: Any) -> list[str]:
    """Rules across sections: every named cache and endpoint exists and reads the refreshed prefix."""
    problems = []
    cached = {m.name: m for m in caches.models}
    served = {e.name: e for e in endpoints}
    for entry in refresh.models:
        root = f"s3://{refresh.bucket}/{entry.prefix}/"
        for name in entry.caches:
            model = cached.get(name)
            if name in caches.rollback:
                problems.append(f"caches.rollback: {name!r} is refreshed from prefix {entry.prefix!r}, whose versions "
                                "the refresh records: roll it back with that entry's pinned: true instead")
            if model is None:
                problems.append(f"refresh prefix {entry.prefix!r}: no cached model {name!r}; "
                                f"caches.models: {', '.join(cached) or 'none'}")
            elif problem := refresh_source_problem(model.source, refresh.bucket, entry.prefix):
                problems.append(f"refresh prefix {entry.prefix!r}: cached model {name!r} {problem}")
            elif isinstance(model.source, ModelSource):
                problems += _unorderable(entry.prefix, f"cached model {name!r}", model.source.version)
        for name in entry.endpoints:
            endpoint = served.get(name)
            if endpoint is None:
                problems.append(f"refresh prefix {entry.prefix!r}: no endpoint {name!r}; "
                                f"endpoints: {', '.join(served) or 'none'}")
            elif not any((v.model_data or "").startswith(root) for v in endpoint.variants):
                problems.append(f"refresh prefix {entry.prefix!r}: no variant of endpoint {name!r} "
                                f"reads model data under {root}")
            else:
                for v in endpoint.variants:
                    if (v.model_data or "").startswith(root):
                        version = v.model_data[len(root):].partition("/")[0]
                        problems += _unorderable(entry.prefix, f"endpoint {name!r} variant {v.name!r}", version)
    return problems


def _unorderable(prefix: str, what: str, version: str) -> list[str]:
    """The refresh function orders versions (cache_refresh.versions): one it cannot order would make every
    refresh of the target fail, and the deploy guard could not compare it."""
    try:
        versions.parse(version)
    except versions.UnorderableVersion as exc:
        return [(f"refresh prefix {prefix!r}: {what} serves version {version!r}, which the refresh function "
                 f"cannot order ({exc}); name versions like v3, 1.2.0 or 2026-11-29 under {prefix}/<version>/")]
    return []


def signing_problems(env: str, production: bool, refresh: RefreshConfig) -> list[str]:
    """Production refreshes only what a named publisher signed, unless it says otherwise."""
    signing = refresh.signing
    if not refresh.models or not (production if signing.required is None else signing.required):
        return []
    if not signing.publishers and not signing.key_arn:
        return [(f"environments.{env}.refresh.signing.publishers: [] -- "
                 f"{'a production environment' if signing.required is None else 'signing.required'} moves only "
                 "versions a named publisher signed: name the IAM roles or users that publish (hyperwarm publish), "
                 "or give signing.key_arn; signing.required: false accepts any complete upload")]
    return []


def signing_required(production: bool, refresh: RefreshConfig) -> bool:
    """Whether the environment's refresh admits signed versions only."""
    return production if refresh.signing.required is None else refresh.signing.required
