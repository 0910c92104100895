"""The functions' code assets: a function package, the code they share and their pinned dependencies.

:func:`pinned_code` is the general form (the refresh functions and the cache metrics exporter use it).
An asset's root mirrors the wheel: ``hyperwarm/functions/<package>/`` and the shared
``hyperwarm/functions/eks_auth/``, so the packages' relative imports work in both and handlers are
``hyperwarm.functions.<package>.<module>.<function>`` (:data:`contract.REFRESH_HANDLER`). The asset's
``hyperwarm/__init__.py`` is empty: the construct library itself is never deployed. Dependencies come
from the function's own ``requirements.txt``: bundling copies them from this environment (offline,
no Docker) only when the installed versions are exactly the pinned ones, so the function never ships
whatever the synth environment happened to have.
"""

from __future__ import annotations

import importlib.metadata
import shutil
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_lambda as lambda_

from hyperwarm.functions import cache_refresh, eks_auth
from hyperwarm.functions.cache_refresh import contract

SOURCE = Path(cache_refresh.__file__).resolve().parent
"""The function's package folder (``lambdas/cache_refresh`` in the project)."""
REQUIREMENTS = SOURCE / "requirements.txt"
SHARED = (Path(eks_auth.__file__).resolve().parent,)
"""Packages every function asset carries beside its own (``lambdas/eks_auth``)."""
_ASSET_INIT = {
    "hyperwarm": '"""A hyperwarm Lambda asset: only the function packages, never the construct library."""\n',
    "hyperwarm/functions": '"""The function packages (the same import names as in the wheel)."""\n',
}
_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc")


class BundlingError(RuntimeError):
    """The synth environment cannot produce the function's pinned bundle."""


def pinned_requirements(path: Path | None = None) -> dict[str, str]:
    """``name==version`` lines of a requirements file (default: the function's), by distribution name."""
    path = path or REQUIREMENTS
    pins: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        if not sep or not version.strip():
            raise BundlingError(f"{path}: {line!r} -- allowed: exact pins name==version only")
        pins[name.strip()] = version.strip()
    return pins


def _installed(name: str, pinned: str, requirements: Path, function: str,
               extra: str) -> importlib.metadata.Distribution:
    """The installed distribution ``name`` at exactly ``pinned``, or a :class:`BundlingError` saying what to do."""
    fix = f"install the function's pinned dependencies: pip install -r {requirements} (or hyperwarm[{extra}])"
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        raise BundlingError(f"cannot bundle {function}: {name}=={pinned} is pinned in "
                            f"{requirements.name} but not installed; {fix}") from None
    if dist.version != pinned:
        raise BundlingError(f"cannot bundle {function}: {name} is pinned to {pinned} in "
                            f"{requirements.name} but {dist.version} is installed; {fix}")
    return dist


def _top_level(dist: importlib.metadata.Distribution) -> list[Path]:
    """The importable packages and modules a distribution installed (no scripts, metadata or caches)."""
    tops = {f.parts[0] for f in dist.files or () if f.parts[0] not in ("..", "__pycache__")
            and not f.parts[0].endswith((".dist-info", ".data", ".pth"))}
    return [Path(str(dist.locate_file(top))) for top in sorted(tops)]


def lay_out(out: Path, source: Path) -> None:
    """Write the function package ``source`` and the :data:`SHARED` ones into ``out`` as the asset holds
    them (``hyperwarm/functions/<name>/``), without the pinned dependencies."""
    for folder, text in _ASSET_INIT.items():
        (out / folder).mkdir(parents=True, exist_ok=True)
        (out / folder / "__init__.py").write_text(text)
    for package in (source, *SHARED):
        shutil.copytree(package, out / "hyperwarm" / "functions" / package.name, ignore=_IGNORED)


@jsii.implements(cdk.ILocalBundling)
class _Bundle:
    """Copies a function's package and its pinned dependencies from this environment."""

    def __init__(self, source: Path, requirements: Path, function: str, extra: str) -> None:
        self._source, self._requirements = source, requirements
        self._function, self._extra = function, extra

    def try_bundle(self, output_dir: str, *, image: Any = None, **_: Any) -> bool:
        out = Path(output_dir)
        lay_out(out, self._source)
        for name, pinned in pinned_requirements(self._requirements).items():
            for source in _top_level(_installed(name, pinned, self._requirements, self._function, self._extra)):
                if source.is_dir():
                    shutil.copytree(source, out / source.name, ignore=_IGNORED)
                else:
                    shutil.copy2(source, out / source.name)
        return True


def pinned_code(source: Path, requirements: Path, function: str, extra: str) -> lambda_.Code:
    """A Lambda asset holding ``hyperwarm/functions/<source's name>/`` (a copy of ``source``), the
    :data:`SHARED` packages and the distributions pinned in ``requirements``, copied from this environment,
    offline. ``function`` names it in messages, ``extra`` is the hyperwarm extra that installs its pins.
    The pins are checked here, at construction, so a mismatch fails synth with this module's message."""
    for name, pinned in pinned_requirements(requirements).items():
        _installed(name, pinned, requirements, function, extra)
    return lambda_.Code.from_asset(
        str(source),
        asset_hash_type=cdk.AssetHashType.OUTPUT,
        bundling=cdk.BundlingOptions(image=cdk.DockerImage.from_registry("unused-local-bundling"),
                                     local=_Bundle(source, requirements, function, extra)),
    )


def function_code() -> lambda_.Code:
    """The code of every hyperwarm refresh function (the refresh functions and the deploy guard share one asset)."""
    return pinned_code(SOURCE, REQUIREMENTS, "the cache refresh function", "refresh")
