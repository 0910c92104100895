"""The functions' bundles: their code and the wheels of their hashed locks, whatever the synth environment holds."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from hyperwarm._internal.bundling import KEPT, BundlingError, FunctionPackage, bundled
from hyperwarm._internal.lock import LAMBDA_PLATFORM, LAMBDA_PYTHON, LOCK, WHEELS, LockError, locks, read_lock
from hyperwarm.observability.cache_exporter import FUNCTION as EXPORTER
from hyperwarm.observability.endpoint_metrics import FUNCTION as BRIDGE
from hyperwarm.refresh.asset import FUNCTION as REFRESH

REPO = Path(__file__).resolve().parent.parent


def _tree(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` by relative path -> the sha256 of its bytes."""
    return {str(f.relative_to(folder)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(folder.rglob("*")) if f.is_file()}


def test_each_lock_pins_a_whole_closure_with_hashes_and_the_tests_run_those_versions() -> None:
    """The tests run the functions' code in this venv: at the versions the bundles ship (the dev extra)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    dev = set(project["optional-dependencies"]["dev"])
    assert set(locks()) == {"cache_refresh", "cache_exporter"}
    for name, lock in locks().items():
        pins = read_lock(lock)
        assert pins and all(pin.hashes for pin in pins), name
        assert {f"{pin.name}=={pin.version}" for pin in pins} <= dev, name
    assert not {n for n in ("aws-lambda-powertools", "prometheus-client", "boto3")
                if any(r.startswith(n) for r in project["dependencies"])}  # never needed at synth


@pytest.mark.parametrize("function", [REFRESH, EXPORTER, BRIDGE], ids=lambda f: f.source.name)
def test_a_bundle_is_the_functions_packages_and_its_locked_wheels_unpacked(function: FunctionPackage,
                                                                            tmp_path) -> None:
    function.bundle(tmp_path)
    wheels = function.dependency_wheels()
    assert [w.name.split("-")[0] for w in wheels] == sorted(p.name.replace("-", "_") for p in (
        read_lock(function.source / LOCK) if function.wheels else ()))
    expected = {"hyperwarm"}
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.infolist():
                top = member.filename.split("/")[0]
                if not member.is_dir() and not top.endswith(".data"):  # byte for byte, where pip installs it
                    assert (tmp_path / member.filename).read_bytes() == archive.read(member), member.filename
                    expected.add(top)
    # Scripts (jmespath's jp.py) stay out: a function imports, it runs no command.
    assert {p.name for p in tmp_path.iterdir()} == expected
    packages = {p.name for p in (tmp_path / "hyperwarm" / "functions").iterdir() if p.is_dir()}
    assert packages == {function.source.name, *(s.name for s in function.shared)}


def test_the_bundle_is_the_same_whatever_the_synth_environment_has_installed(tmp_path, monkeypatch) -> None:
    """A consumer's own typing-extensions and Powertools (here: stand-ins first on sys.path) change nothing."""
    REFRESH.bundle(tmp_path / "before")
    site = tmp_path / "site"
    for name, version in (("typing_extensions", "4.8.0"), ("aws_lambda_powertools", "2.0.0"), ("jmespath", "0.9.0")):
        (site / name).mkdir(parents=True)
        (site / name / "__init__.py").write_text("CONSUMER = True\n")
        info = site / f"{name}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (info / "RECORD").write_text(f"{name}/__init__.py,,\n")
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    assert importlib.metadata.version("aws_lambda_powertools") == "2.0.0"  # what the old bundling would have copied
    REFRESH.bundle(tmp_path / "after")
    assert _tree(tmp_path / "after") == _tree(tmp_path / "before")
    assert "typing_extensions-4.16.0.dist-info/METADATA" in _tree(tmp_path / "after")  # the lock's, not 4.8.0


@pytest.fixture
def wheels(tmp_path) -> Path:
    """A copy of the refresh function's locked wheels, to spoil."""
    copy = tmp_path / "wheels"
    shutil.copytree(WHEELS / "cache_refresh", copy)
    return copy


def test_a_wheel_that_is_not_the_locked_one_stops_synth_naming_it_and_the_fix(wheels) -> None:
    function = dataclasses.replace(REFRESH, wheels=wheels)
    jmespath = next(wheels.glob("jmespath-*.whl"))
    jmespath.write_bytes(jmespath.read_bytes() + b"\0")
    (wheels / "six-1.16.0-py2.py3-none-any.whl").write_bytes(b"")
    next(wheels.glob("typing_extensions-*.whl")).unlink()
    with pytest.raises(BundlingError) as error:
        function.bundle(wheels.parent / "out")
    message = str(error.value)
    assert message.startswith("cannot bundle the cache refresh function: ")
    assert f"{jmespath.name}: sha256 " in message and "is none of the hashes" in message
    assert "no wheel of typing-extensions==4.16.0" in message
    assert "six-1.16.0-py2.py3-none-any.whl: not in" in message
    assert message.endswith("install a hyperwarm wheel, or in its project run make lambda-wheels")


def test_without_its_wheels_a_function_cannot_be_bundled(tmp_path) -> None:
    function = dataclasses.replace(EXPORTER, wheels=tmp_path / "missing")
    with pytest.raises(BundlingError, match=r"no wheel of prometheus-client==0\.26\.0"):
        function.code()


@pytest.fixture
def user_cache(tmp_path, monkeypatch) -> Iterator[Path]:
    """An empty user cache, and a process that has bundled nothing yet."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    bundled.cache_clear()
    yield tmp_path / "cache" / "hyperwarm" / "assets"
    bundled.cache_clear()


@pytest.fixture
def own_refresh(tmp_path, wheels) -> FunctionPackage:
    """The refresh function from copies of its package and wheels, to edit."""
    source = tmp_path / "cache_refresh"
    shutil.copytree(REFRESH.source, source)
    return dataclasses.replace(REFRESH, source=source, wheels=wheels)


def test_a_function_is_unpacked_once_into_the_user_cache_and_every_later_synth_reuses_it(user_cache, tmp_path,
                                                                                         monkeypatch) -> None:
    folder = bundled(REFRESH)
    assert folder.parent == user_cache and folder.name.startswith("cache_refresh-")
    REFRESH.bundle(tmp_path / "fresh")
    assert _tree(folder) == _tree(tmp_path / "fresh")
    bundled.cache_clear()  # a new synth process

    def unpacking(*args: object) -> None:
        raise AssertionError("unpacked again")
    monkeypatch.setattr(FunctionPackage, "bundle", unpacking)
    assert bundled(REFRESH) == folder
    assert sorted(p.name for p in user_cache.iterdir()) == [folder.name]  # no scratch folder left


def test_edited_code_gets_a_folder_of_its_own_and_compiled_files_change_nothing(user_cache, own_refresh) -> None:
    before = bundled(own_refresh)
    (own_refresh.source / "__pycache__").mkdir(exist_ok=True)
    (own_refresh.source / "__pycache__" / "handler.cpython-311.pyc").write_bytes(b"compiled")
    bundled.cache_clear()
    assert bundled(own_refresh) == before
    handler = own_refresh.source / "handler.py"
    handler.write_text(handler.read_text() + "\n# edited\n")
    bundled.cache_clear()
    after = bundled(own_refresh)
    assert after != before and (after / "hyperwarm/functions/cache_refresh/handler.py").read_text().endswith("# edited\n")
    assert not any("__pycache__" in path for path in _tree(after))


def test_the_digest_follows_what_copytree_copies_linked_folders_and_modes_included(tmp_path, own_refresh) -> None:
    shared = tmp_path / "outside"
    shared.mkdir()
    (shared / "helper.py").write_text("A = 1\n")
    (own_refresh.source / "linked").symlink_to(shared, target_is_directory=True)
    before = own_refresh.digest()
    (shared / "helper.py").write_text("A = 2\n")  # an edit inside the linked folder, which the asset copies
    edited = own_refresh.digest()
    (own_refresh.source / "handler.py").chmod(0o755)
    assert len({before, edited, own_refresh.digest()}) == 3
    own_refresh.bundle(tmp_path / "out")
    assert (tmp_path / "out/hyperwarm/functions/cache_refresh/linked/helper.py").read_text() == "A = 2\n"


def test_a_cached_folder_others_may_write_to_is_not_used(user_cache) -> None:
    first = bundled(BRIDGE)
    first.chmod(0o777)  # another user (or a group) could have put code there that would be deployed
    bundled.cache_clear()
    other = bundled(BRIDGE)
    assert other != first and other.parent == Path(tempfile.gettempdir())
    first.chmod(0o700)


def test_without_a_home_the_asset_goes_to_a_temporary_folder(monkeypatch) -> None:
    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    bundled.cache_clear()
    try:
        assert bundled(BRIDGE).parent == Path(tempfile.gettempdir())
    finally:
        bundled.cache_clear()


def test_an_evicted_folder_leaves_its_name_before_it_is_removed(user_cache, monkeypatch) -> None:
    """A synth stopped while removing an old asset must not leave part of it under its name for a later synth."""
    user_cache.mkdir(parents=True)
    day_ago = time.time() - 86400
    old = [user_cache / f"endpoint_metrics-old{i}" for i in range(KEPT + 1)]
    for age, folder in enumerate(old):
        (folder / "hyperwarm").mkdir(parents=True)
        os.utime(folder, (day_ago - age, day_ago - age))
    monkeypatch.setattr(shutil, "rmtree", lambda *args, **kwargs: None)  # stopped before removing anything
    current = bundled(BRIDGE)
    named = {p.name for p in user_cache.glob("endpoint_metrics-*")}
    assert named == {current.name, *(p.name for p in old[:KEPT - 1])}


def test_a_wheel_that_is_not_the_locked_one_stops_synth_even_when_its_asset_is_cached(user_cache, own_refresh) -> None:
    bundled(own_refresh)
    jmespath = next(own_refresh.wheels.glob("jmespath-*.whl"))
    jmespath.write_bytes(jmespath.read_bytes() + b"\0")
    bundled.cache_clear()
    with pytest.raises(BundlingError, match=f"{jmespath.name}: sha256 "):
        bundled(own_refresh)


def test_where_the_cache_cannot_be_written_the_asset_goes_to_a_temporary_folder(tmp_path, monkeypatch) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    bundled.cache_clear()
    try:
        folder = bundled(EXPORTER)
    finally:
        bundled.cache_clear()
    assert folder.parent == Path(tempfile.gettempdir()) and folder.name.startswith("hyperwarm-asset-")
    EXPORTER.bundle(tmp_path / "fresh")
    assert _tree(folder) == _tree(tmp_path / "fresh")


def test_when_a_concurrent_synth_makes_the_same_folder_first_its_folder_is_used(user_cache, monkeypatch) -> None:
    unpack = FunctionPackage.bundle
    final = user_cache / f"endpoint_metrics-{BRIDGE.digest()[:32]}"

    def racing(self: FunctionPackage, out: Path) -> None:
        unpack(self, out)
        unpack(self, final)  # the other synth renames its folder in between
    monkeypatch.setattr(FunctionPackage, "bundle", racing)
    assert bundled(BRIDGE) == final
    assert [p.name for p in user_cache.iterdir()] == [final.name]


def test_the_cache_keeps_recent_assets_and_the_newest_old_ones_and_removes_the_rest(user_cache) -> None:
    user_cache.mkdir(parents=True)
    day_ago, minute_ago = time.time() - 86400, time.time() - 60
    old = [user_cache / f"endpoint_metrics-old{i}" for i in range(KEPT + 2)]
    recent, scratch, other = (user_cache / "endpoint_metrics-recent", user_cache / ".endpoint_metrics-x.killed",
                              user_cache / "cache_exporter-old")
    for age, folder in enumerate([*old, recent, scratch, other]):
        folder.mkdir()
        stamp = minute_ago if folder == recent else day_ago - age
        os.utime(folder, (stamp, stamp))
    current = bundled(BRIDGE)
    left = {p.name for p in user_cache.iterdir()}
    # kept: this synth's, the one used a minute ago, the newest old ones up to KEPT, other functions' entries
    assert left == {current.name, recent.name, *(p.name for p in old[:KEPT - 2]), other.name}


def test_a_lock_admits_only_hashed_exact_pins_and_wheels_the_lambda_runtime_loads(tmp_path) -> None:
    lock = tmp_path / LOCK
    lock.write_text("somepkg>=1.0\n")
    with pytest.raises(LockError, match=r"'somepkg>=1\.0' -- allowed: name==version followed by one or more --hash"):
        read_lock(lock)
    lock.write_text("somepkg==1.0\n")
    with pytest.raises(LockError, match="--hash=sha256"):
        read_lock(lock)
    folder = tmp_path / "wheels"
    folder.mkdir()
    wheel = folder / "somepkg-1.0-cp311-cp311-manylinux2014_x86_64.whl"
    wheel.write_bytes(b"compiled for another platform")
    lock.write_text(f"somepkg==1.0 \\\n    --hash=sha256:{hashlib.sha256(wheel.read_bytes()).hexdigest()}\n")
    function = FunctionPackage(tmp_path, "a function", wheels=folder)
    with pytest.raises(BundlingError, match=rf"built for cp311-cp311-manylinux2014_x86_64 -- allowed: Python "
                                            rf"{LAMBDA_PYTHON} on {LAMBDA_PLATFORM}"):
        function.dependency_wheels()


def test_every_bundled_function_runs_on_the_python_and_platform_its_lock_was_made_for(synthesized) -> None:
    assert (LAMBDA_PYTHON, LAMBDA_PLATFORM) == ("3.13", "manylinux2014_aarch64")
    functions = [f["Properties"] for stack in synthesized.stack_names()
                 for f in synthesized.resources(stack, "AWS::Lambda::Function").values()
                 if str(f["Properties"].get("Handler", "")).startswith("hyperwarm.functions.")]
    assert functions
    assert {(f["Runtime"], tuple(f["Architectures"])) for f in functions} == {("python3.13", ("arm64",))}


_WITHOUT_RUN_TIME_PACKAGES = """
import sys
for name in ("boto3", "botocore", "aws_lambda_powertools", "prometheus_client", "jmespath"):
    sys.modules[name] = None  # an import of any of these fails
import hyperwarm
for name in hyperwarm.__all__:
    getattr(hyperwarm, name)
from hyperwarm.observability.cache_exporter import FUNCTION as EXPORTER
from hyperwarm.observability.endpoint_metrics import FUNCTION as BRIDGE
from hyperwarm.refresh.asset import FUNCTION as REFRESH
for function in (REFRESH, EXPORTER, BRIDGE):
    function.dependency_wheels()
"""


@pytest.mark.gate
def test_every_public_name_loads_without_the_functions_run_time_packages() -> None:
    """Synth needs no boto3 and none of the functions' dependencies: neither is a dependency of the library."""
    subprocess.run([sys.executable, "-c", _WITHOUT_RUN_TIME_PACKAGES], check=True, capture_output=True, cwd=REPO)


def test_each_functions_readme_names_what_its_asset_holds() -> None:
    """Its README is where an operator looks for what runs in the function (a review found two that left shared
    packages out)."""
    from hyperwarm.caches import hub
    from hyperwarm.observability import cache_exporter, endpoint_metrics
    from hyperwarm.refresh import asset

    repo = Path(__file__).resolve().parent.parent
    missing = {}
    for package in (asset.FUNCTION, cache_exporter.FUNCTION, endpoint_metrics.FUNCTION, hub.FUNCTION):
        readme = (repo / "lambdas" / package.source.name / "README.md").read_text()
        left = [p.name for p in (package.source, *package.shared) if f"hyperwarm/functions/{p.name}/" not in readme]
        if left:
            missing[package.source.name] = left
    assert missing == {}


def test_the_front_page_names_every_function_package() -> None:
    repo = Path(__file__).resolve().parent.parent
    readme = (repo / "README.md").read_text()
    packages = sorted(p.name for p in (repo / "lambdas").iterdir() if (p / "__init__.py").exists())
    assert len(packages) >= 8 and [p for p in packages if f"`{p}`" not in readme] == []
