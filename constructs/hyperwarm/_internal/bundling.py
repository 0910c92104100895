"""Lambda code assets of hyperwarm's functions: a function package, the packages it shares, its locked dependencies.

Each function is described once, beside the construct that deploys it, as a :class:`FunctionPackage`
(:mod:`hyperwarm.refresh.asset`, :mod:`hyperwarm.observability.cache_exporter`,
:mod:`hyperwarm.observability.endpoint_metrics`); this module only knows how to bundle one.
An asset's root mirrors the wheel: ``hyperwarm/functions/<package>/`` and the shared packages beside it
(``hyperwarm/functions/eks_auth/``, ...), so the packages' relative imports work in both and handlers are
``hyperwarm.functions.<package>.<module>.<function>``. The asset's ``hyperwarm/__init__.py`` is empty: the
construct library itself is never deployed. Dependencies are the wheels of the function's hashed lock, built for
the Lambda's own Python and platform and shipped inside hyperwarm (:mod:`hyperwarm._internal.lock`): synth checks
their hashes and unpacks them, so the asset is the same whatever the synth environment has installed, and synth
needs neither Docker nor the network. An unpacked asset is kept in the user's cache under the digest of everything
it is made from (:meth:`FunctionPackage.digest`), so the next synth neither unpacks it again nor, its folder being
the same, has aws-cdk-lib hash its files again (aws-cdk-lib keeps fingerprints per folder in ``~/.cdk/cache``).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import importlib.util
import os
import shutil
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import aws_lambda as lambda_

from hyperwarm._internal.lock import LOCK, WHEELS, LockError, locked_wheels
from hyperwarm._internal.user_cache import cache_root

ASSET_INIT = {
    "hyperwarm": '"""A hyperwarm Lambda asset: only the function packages, never the construct library."""\n',
    "hyperwarm/functions": '"""The function packages (the same import names as in the wheel)."""\n',
}
_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc")
KEPT = 4
"""Cached assets kept per function: the newest, and besides them any used in the last hour (a concurrent synth's)."""


class BundlingError(RuntimeError):
    """The function's bundle cannot be made from what hyperwarm ships."""


def package_folder(name: str) -> Path:
    """The folder of the ``hyperwarm.functions`` package ``name`` (its link resolved: ``lambdas/<name>`` in the
    project), found without importing it: the functions import boto3, which synth does not need."""
    spec = importlib.util.find_spec(f"hyperwarm.functions.{name}")
    if spec is None or spec.origin is None or not spec.submodule_search_locations:
        raise BundlingError(f"hyperwarm.functions.{name} is not a regular package with an __init__.py")
    return Path(spec.origin).resolve().parent


@dataclass(frozen=True)
class FunctionPackage:
    """One function's code: its package, the packages it shares with other functions, and its lock."""

    source: Path
    """The function's package folder (``lambdas/<name>``); the asset holds it as ``hyperwarm/functions/<name>/``."""
    description: str
    """Names the function in messages, e.g. ``"the cache refresh function"``."""
    shared: tuple[Path, ...] = ()
    """Other function packages it imports (e.g. ``lambdas/eks_auth``), carried beside its own. Default: none."""
    wheels: Path | None = None
    """The folder of its locked wheels (``hyperwarm/functions/_wheels/<name>``), checked against the lock beside
    its source. Default: none (only what the Lambda runtime brings: boto3, botocore, urllib3)."""

    @classmethod
    def of(cls, name: str, description: str, *, shared: tuple[str, ...] = (), locked: bool = False) -> FunctionPackage:
        """The function whose package is ``hyperwarm.functions.<name>``; ``locked``: its dependencies are the
        wheels of its ``requirements.txt`` lock."""
        return cls(package_folder(name), description, tuple(package_folder(p) for p in shared),
                   WHEELS / name if locked else None)

    @property
    def handler_prefix(self) -> str:
        """``hyperwarm.functions.<name>``: its handlers' module prefix, the same in the wheel and the asset."""
        return f"hyperwarm.functions.{self.source.name}"

    def lay_out(self, out: Path) -> None:
        """Write its package and the shared ones into ``out`` as the asset holds them
        (``hyperwarm/functions/<name>/``), without the locked dependencies."""
        for folder, text in ASSET_INIT.items():
            (out / folder).mkdir(parents=True, exist_ok=True)
            (out / folder / "__init__.py").write_text(text)
        for package in (self.source, *self.shared):
            shutil.copytree(package, out / "hyperwarm" / "functions" / package.name, ignore=_IGNORED)

    def dependency_wheels(self) -> list[Path]:
        """Its locked wheels, each checked against the lock (hash, version, Lambda platform tags)."""
        if self.wheels is None:
            return []
        try:
            return locked_wheels(self.source / LOCK, self.wheels)
        except LockError as error:
            raise BundlingError(f"cannot bundle {self.description}: {error}") from None

    def bundle(self, out: Path) -> None:
        """Write the whole asset into ``out``: :meth:`lay_out`, and each locked wheel unpacked as pip installs
        a pure wheel (its ``.data/purelib`` and ``.data/platlib`` at the top; scripts and headers left out)."""
        self.lay_out(out)
        for wheel in self.dependency_wheels():
            with zipfile.ZipFile(wheel) as archive:
                for member in archive.infolist():
                    target = _install_path(member.filename)
                    if target and not member.is_dir():
                        (out / target).parent.mkdir(parents=True, exist_ok=True)
                        (out / target).write_bytes(archive.read(member))

    def digest(self) -> str:
        """The sha256 of everything :meth:`bundle` makes the asset from: this module (how an asset is laid out), its
        packages' files as ``copytree`` copies them (path, bytes, mode; linked folders followed) and its locked wheels,
        each checked against the lock first (so a wrong wheel fails synth, cached or not)."""
        digest = hashlib.sha256(Path(__file__).read_bytes())
        for folder in (self.source, *self.shared):
            for file in _copied_files(folder):
                digest.update(f"\0{folder.name}/{file.relative_to(folder)}\0{file.stat().st_mode & 0o777:o}\0".encode())
                digest.update(file.read_bytes())
        for wheel in self.dependency_wheels():
            digest.update(f"\0{wheel.name}\0".encode())
            digest.update(wheel.read_bytes())
        return digest.hexdigest()

    def code(self) -> lambda_.Code:
        """Its Lambda asset: the folder :func:`bundled` gives, so a function whose wheels do not match its lock
        fails synth here, at construction, with this module's message."""
        return lambda_.Code.from_asset(str(bundled(self)))


def _copied_files(folder: Path) -> list[Path]:
    """The files ``shutil.copytree(folder, ..., ignore=_IGNORED)`` copies, sorted: linked folders followed, ignored
    names left out."""
    found = []
    for parent, folders, files in os.walk(folder, followlinks=True):
        ignored = _IGNORED(parent, [*folders, *files])
        folders[:] = sorted(f for f in folders if f not in ignored)
        found += [Path(parent) / f for f in files if f not in ignored]
    return sorted(found)


def _install_path(member: str) -> str | None:
    """Where a wheel's member goes in the asset: purelib and platlib data at the top, other data nowhere."""
    top, _, rest = member.partition("/")
    if not top.endswith(".data"):
        return member
    scheme, _, path = rest.partition("/")
    return path if scheme in ("purelib", "platlib") and path else None


@functools.cache
def bundled(function: FunctionPackage) -> Path:
    """The folder holding ``function``'s asset: ``<user cache>/assets/<package>-<digest>``, made once (unpacked into
    a scratch folder beside it and renamed, so a concurrent synth never sees half of one) and reused by every later
    synth of the same code and wheels. A temporary folder for this process where the cache cannot be written, or
    where a folder there is not the user's own alone (another user could have written what would be deployed)."""
    digest = function.digest()
    try:
        root = cache_root() / "assets"
        final = root / f"{function.source.name}-{digest[:32]}"
        if _own(final):
            os.utime(final)  # used now: the last to be evicted
            return final
        root.mkdir(parents=True, exist_ok=True)
        if final.exists() or not _own(root):
            return _temporary(function)
        scratch = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=root))
    except (OSError, RuntimeError):  # a read-only or missing home (Path.home raises RuntimeError)
        return _temporary(function)
    try:
        function.bundle(scratch)
        scratch.rename(final)
    except OSError:
        if not _own(final):  # else another synth made the same folder first: it is as good as this one
            raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    _evict(root, function.source.name)
    return final


def _own(folder: Path) -> bool:
    """Whether ``folder`` is a folder of this user's that no one else may write to."""
    try:
        status = folder.stat()
    except OSError:
        return False
    return folder.is_dir() and status.st_uid == os.getuid() and not status.st_mode & 0o022


def _temporary(function: FunctionPackage) -> Path:
    out = Path(tempfile.mkdtemp(prefix="hyperwarm-asset-"))
    atexit.register(shutil.rmtree, out, ignore_errors=True)
    try:
        function.bundle(out)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    return out


def _evict(root: Path, package: str) -> None:
    """Remove ``package``'s cached assets beyond the :data:`KEPT` newest, and scratch folders a killed synth left,
    that no synth touched in the last hour. Each goes out of the way by rename first: a synth stopped halfway
    through removing one leaves a hidden folder (removed at a later eviction), never a partial asset under its name."""
    hour_ago = time.time() - 3600
    entries = sorted(root.glob(f"{package}-*"), key=_mtime, reverse=True)
    for entry in entries[KEPT:]:
        if _mtime(entry) < hour_ago:
            with contextlib.suppress(OSError):  # gone already, or renamed by another synth's eviction
                entry.rename(root / f".{entry.name}.evicted.{os.getpid()}")
    for leftover in root.glob(f".{package}-*"):
        if _mtime(leftover) < hour_ago or leftover.name.endswith(f".evicted.{os.getpid()}"):
            shutil.rmtree(leftover, ignore_errors=True)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:  # removed meanwhile by another synth's eviction
        return float("inf")
