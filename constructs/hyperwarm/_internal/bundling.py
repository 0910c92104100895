"""Lambda code assets of hyperwarm's functions: a function package, the packages it shares, its pinned dependencies.

Each function is described once, beside the construct that deploys it, as a :class:`FunctionPackage`
(:mod:`hyperwarm.refresh.asset`, :mod:`hyperwarm.observability.cache_exporter`,
:mod:`hyperwarm.observability.endpoint_metrics`); this module only knows how to bundle one.
An asset's root mirrors the wheel: ``hyperwarm/functions/<package>/`` and the shared packages beside it
(``hyperwarm/functions/eks_auth/``, ...), so the packages' relative imports work in both and handlers are
``hyperwarm.functions.<package>.<module>.<function>``. The asset's ``hyperwarm/__init__.py`` is empty: the
construct library itself is never deployed. Dependencies come from the function's own ``requirements.txt``:
bundling copies them from this environment (offline, no Docker) only when the installed versions are exactly
the pinned ones, so the function never ships whatever the synth environment happened to have.
"""

from __future__ import annotations

import importlib.metadata
import shutil
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_lambda as lambda_

ASSET_INIT = {
    "hyperwarm": '"""A hyperwarm Lambda asset: only the function packages, never the construct library."""\n',
    "hyperwarm/functions": '"""The function packages (the same import names as in the wheel)."""\n',
}
_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc")


class BundlingError(RuntimeError):
    """The synth environment cannot produce the function's pinned bundle."""


def package_folder(package: ModuleType) -> Path:
    """The folder of a ``hyperwarm.functions`` package, its link resolved (``lambdas/<name>`` in the project)."""
    if package.__file__ is None:
        raise BundlingError(f"{package.__name__} is not a regular package with an __init__.py")
    return Path(package.__file__).resolve().parent


@dataclass(frozen=True)
class FunctionPackage:
    """One function's code: its package, the packages it shares with other functions, and its pins."""

    source: Path
    """The function's package folder (``lambdas/<name>``); the asset holds it as ``hyperwarm/functions/<name>/``."""
    description: str
    """Names the function in messages, e.g. ``"the cache refresh function"``."""
    shared: tuple[Path, ...] = ()
    """Other function packages it imports (e.g. ``lambdas/eks_auth``), carried beside its own. Default: none."""
    requirements: Path | None = None
    """Its ``requirements.txt`` of exact pins, bundled from this environment. Default: none (only what the
    Lambda runtime brings: boto3, botocore, urllib3)."""
    extra: str | None = None
    """The hyperwarm extra that installs the pins, named in the message when they are missing. Default: none."""

    @classmethod
    def of(cls, package: ModuleType, description: str, *, shared: tuple[ModuleType, ...] = (),
           extra: str | None = None) -> FunctionPackage:
        """The function whose package is ``package``; with ``extra``, its pins are the package's
        ``requirements.txt``, which that hyperwarm extra installs."""
        source = package_folder(package)
        return cls(source, description, tuple(package_folder(p) for p in shared),
                   source / "requirements.txt" if extra is not None else None, extra)

    def pins(self) -> dict[str, str]:
        """Its pinned distributions, by name (none without a requirements file)."""
        return {} if self.requirements is None else pinned_requirements(self.requirements)

    def lay_out(self, out: Path) -> None:
        """Write its package and the shared ones into ``out`` as the asset holds them
        (``hyperwarm/functions/<name>/``), without the pinned dependencies."""
        for folder, text in ASSET_INIT.items():
            (out / folder).mkdir(parents=True, exist_ok=True)
            (out / folder / "__init__.py").write_text(text)
        for package in (self.source, *self.shared):
            shutil.copytree(package, out / "hyperwarm" / "functions" / package.name, ignore=_IGNORED)

    def code(self) -> lambda_.Code:
        """Its Lambda asset, written by :meth:`bundle` from this environment, offline. The pins are checked
        here, at construction, so a mismatch fails synth with this module's message."""
        self._distributions()
        return lambda_.Code.from_asset(
            str(self.source),
            asset_hash_type=cdk.AssetHashType.OUTPUT,
            bundling=cdk.BundlingOptions(image=cdk.DockerImage.from_registry("unused-local-bundling"),
                                         local=_Bundle(self)),
        )

    def _distributions(self) -> list[importlib.metadata.Distribution]:
        """The installed distribution of each pin, at exactly the pinned version, or a :class:`BundlingError`
        saying what to do."""
        if self.requirements is None:
            return []
        fix = f"install the function's pinned dependencies: pip install -r {self.requirements}"
        fix += f" (or hyperwarm[{self.extra}])" if self.extra else ""
        where = self.requirements.name
        found = []
        for name, pinned in pinned_requirements(self.requirements).items():
            try:
                dist = importlib.metadata.distribution(name)
            except importlib.metadata.PackageNotFoundError:
                raise BundlingError(f"cannot bundle {self.description}: {name}=={pinned} is pinned in "
                                    f"{where} but not installed; {fix}") from None
            if dist.version != pinned:
                raise BundlingError(f"cannot bundle {self.description}: {name} is pinned to {pinned} in "
                                    f"{where} but {dist.version} is installed; {fix}")
            found.append(dist)
        return found

    def bundle(self, out: Path) -> None:
        """Write the whole asset into ``out``: :meth:`lay_out` and the pinned distributions beside it."""
        self.lay_out(out)
        for dist in self._distributions():
            for source in _top_level(dist):
                if source.is_dir():
                    shutil.copytree(source, out / source.name, ignore=_IGNORED)
                else:
                    shutil.copy2(source, out / source.name)


def pinned_requirements(path: Path) -> dict[str, str]:
    """``name==version`` lines of a requirements file, by distribution name."""
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


def _top_level(dist: importlib.metadata.Distribution) -> list[Path]:
    """The importable packages and modules a distribution installed (no scripts, metadata or caches)."""
    tops = {f.parts[0] for f in dist.files or () if f.parts[0] not in ("..", "__pycache__")
            and not f.parts[0].endswith((".dist-info", ".data", ".pth"))}
    return [Path(str(dist.locate_file(top))) for top in sorted(tops)]


@jsii.implements(cdk.ILocalBundling)
class _Bundle:
    """Copies a function's packages and its pinned dependencies from this environment."""

    def __init__(self, function: FunctionPackage) -> None:
        self._function = function

    def try_bundle(self, output_dir: str, *, image: Any = None, **_: Any) -> bool:
        self._function.bundle(Path(output_dir))
        return True
