"""The Lambda functions' hashed locks and the wheels they name: what a function's asset holds besides its code.

Each function with dependencies has a ``requirements.txt`` in pip's hash-checking format: every distribution of
its closure at one version, with the sha256 of its wheel for the Lambda's platform (Python
:data:`LAMBDA_PYTHON` on :data:`LAMBDA_PLATFORM`, what the constructs deploy: ``PYTHON_3_13`` on ``ARM_64``).
Those wheels are downloaded once, when hyperwarm's own wheel is built, into ``hyperwarm/functions/_wheels/<name>/``
and ship inside it; synth only checks them against the lock and unpacks them (:mod:`hyperwarm._internal.bundling`).
So the bundle is the same on every machine, whatever the synth environment has installed, and synth needs no
network, no Docker and none of the functions' dependencies.

``python -m hyperwarm._internal.lock fetch`` downloads the locked wheels (``make lambda-wheels``, before a wheel
build); ``python -m hyperwarm._internal.lock lock`` rewrites each lock's hashes after a version is edited
(``make lambda-lock``). Neither imports aws-cdk.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

LAMBDA_PYTHON = "3.13"
"""The functions' runtime (``lambda_.Runtime.PYTHON_3_13``)."""
LAMBDA_PLATFORM = "manylinux2014_aarch64"
"""The functions' platform (``lambda_.Architecture.ARM_64``, Amazon Linux 2023: glibc 2.34)."""
_PYTHON_TAGS = {"py3", f"py{LAMBDA_PYTHON.replace('.', '')}", f"cp{LAMBDA_PYTHON.replace('.', '')}"}
_ABI_TAGS = {"none", "abi3", f"cp{LAMBDA_PYTHON.replace('.', '')}"}
_PLATFORM_TAG = re.compile(r"^(any|manylinux(2014|_2_(1[7-9]|2[0-9]|3[0-4]))_aarch64)$")
_PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[A-Za-z0-9.+!_-]+)$")
_HASH = re.compile(r"^--hash=sha256:(?P<hash>[0-9a-f]{64})$")

FUNCTIONS = Path(__file__).resolve().parent.parent / "functions"
"""``hyperwarm/functions``: one folder per function (a link to ``lambdas/<name>`` in the project)."""
WHEELS = FUNCTIONS / "_wheels"
"""Where the locked wheels are, one folder per function; filled at wheel build (``make lambda-wheels``)."""
LOCK = "requirements.txt"


class LockError(RuntimeError):
    """A lock, or the wheels shipped for it, that cannot make a function's bundle."""


@dataclass(frozen=True)
class Pin:
    """One locked distribution: its name, its version and the sha256 of each wheel allowed for it."""

    name: str
    version: str
    hashes: frozenset[str]


def read_lock(path: Path, *, hashed: bool = True) -> list[Pin]:
    """The pins of a hash-checking requirements file: ``name==version --hash=sha256:...`` entries only
    (without ``hashed``, hashes may be missing: a lock being rewritten)."""
    text = re.sub(r"\\\n", " ", path.read_text())
    pins = []
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        pin, hashes = _PIN.match(words[0]), [_HASH.match(word) for word in words[1:]]
        if pin is None or not all(hashes) or (hashed and not hashes):
            raise LockError(f"{path}: {line.strip()!r} -- allowed: name==version followed by one or more "
                            "--hash=sha256:<hex> (pip's hash-checking format; make lambda-lock writes it)")
        pins.append(Pin(pin["name"], pin["version"], frozenset(h["hash"] for h in hashes if h)))
    return pins


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _wheel_tags_problem(wheel: Path) -> str | None:
    """Why the Lambda runtime cannot load ``wheel`` (its file name's tags), or None."""
    parts = wheel.name.removesuffix(".whl").split("-")
    python, abi, platform = parts[-3:]
    if (set(python.split(".")) & _PYTHON_TAGS and abi in _ABI_TAGS
            and all(_PLATFORM_TAG.match(tag) for tag in platform.split("."))):
        return None
    return (f"{wheel.name}: built for {python}-{abi}-{platform} -- allowed: Python {LAMBDA_PYTHON} on "
            f"{LAMBDA_PLATFORM} (pure wheels: py3-none-any)")


def _normalized(name: str) -> str:
    """A distribution name as wheel files spell it (PEP 503 runs of ``-_.`` as ``_``), lower case."""
    return re.sub(r"[-_.]+", "_", name).lower()


def _pin_problem(lock: Path, pin: Pin, wheel: Path | None) -> str | None:
    """What is wrong with ``wheel`` as the one wheel of ``pin``, or None."""
    if wheel is None:
        return f"no wheel of {pin.name}=={pin.version}"
    version = wheel.name.split("-")[1]
    if version != pin.version:
        return f"{wheel.name}: {pin.name} {version}, but {lock} locks {pin.version}"
    digest = _sha256(wheel)
    if digest not in pin.hashes:
        return f"{wheel.name}: sha256 {digest} is none of the hashes {lock} locks for it"
    return _wheel_tags_problem(wheel)


def locked_wheels(lock: Path, folder: Path) -> list[Path]:
    """The wheels in ``folder``, one per pin of ``lock``, each with a hash the lock allows and tags the Lambda
    runtime loads; a :class:`LockError` naming every difference otherwise."""
    found = {_normalized(w.name.split("-")[0]): w for w in (folder.glob("*.whl") if folder.is_dir() else ())}
    pins = read_lock(lock)
    problems = [_pin_problem(lock, pin, found.pop(_normalized(pin.name), None)) for pin in pins]
    problems += [f"{wheel.name}: not in {lock}" for wheel in found.values()]
    if any(problems):
        raise LockError(f"{folder}: " + "; ".join(p for p in problems if p) + " -- the wheels hyperwarm ships for "
                        "its functions are not the locked ones (a build without make lambda-wheels, or changed "
                        "files): install a hyperwarm wheel, or in its project run make lambda-wheels")
    return sorted(folder.glob("*.whl"))


def locks() -> dict[str, Path]:
    """Each function's lock, by function package name."""
    return {path.parent.name: path for path in sorted(FUNCTIONS.glob(f"*/{LOCK}"))}


def _pip_download(requirements: list[str], into: Path, *extra: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--quiet",
                    "--only-binary=:all:", "--platform", LAMBDA_PLATFORM, "--python-version", LAMBDA_PYTHON,
                    "--implementation", "cp", "--dest", str(into), *extra, *requirements], check=True)


def fetch() -> None:
    """Download every lock's wheels into :data:`WHEELS`, pip checking each hash (and that the lock is whole)."""
    for name, lock in locks().items():
        folder = WHEELS / name
        try:
            locked_wheels(lock, folder)
            continue  # already there
        except LockError:
            shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        _pip_download(["-r", str(lock)], folder, "--require-hashes")
        locked_wheels(lock, folder)
        print(f"{name}: {len(read_lock(lock))} locked wheels in {folder}")


def relock() -> None:
    """Rewrite each lock with the hashes of its pins' wheels for the Lambda platform, adding any dependency the
    pins now need (after a version was edited); its leading comment is kept."""
    for name, lock in locks().items():
        with tempfile.TemporaryDirectory() as tmp:
            _pip_download([f"{pin.name}=={pin.version}" for pin in read_lock(lock, hashed=False)], Path(tmp))
            lines = lock.read_text().splitlines()
            header = lines[:next((i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))]
            for wheel in sorted(Path(tmp).glob("*.whl"), key=lambda w: w.name.lower()):
                distribution, version = wheel.name.split("-")[:2]
                header.append(f"{distribution.replace('_', '-').lower()}=={version} \\\n"
                              f"    --hash=sha256:{_sha256(wheel)}")
        lock.write_text("\n".join(header) + "\n")
        print(f"{name}: {lock} rewritten")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("command", choices=("fetch", "lock"), help="fetch the locked wheels, or rewrite the locks")
    args = parser.parse_args(argv)
    try:
        fetch() if args.command == "fetch" else relock()
    except LockError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
