"""A platform team's virtualenv: hyperwarm's wheel installed with the extras the package README names, nothing else.

Used by ``make test-install`` (``test_install.py``) and ``make footprint`` (``footprint.py``). Needs the package
registries (pip), never AWS.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "constructs" / "hyperwarm" / "README.md"
EXAMPLE = REPO / "examples" / "my_platform_app.py"


def build_wheel(outdir: Path) -> Path:
    """hyperwarm's wheel, built from this checkout (with the functions' locked wheels: make lambda-wheels)."""
    shutil.rmtree(REPO / "build", ignore_errors=True)  # setuptools keeps files of earlier layouts there
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(outdir), str(REPO)],
                   check=True, capture_output=True)
    (wheel,) = outdir.glob("hyperwarm-*.whl")
    return wheel


def readme_extras() -> set[str]:
    """The extras the package README's Install section tells users to install (``pip install 'hyperwarm[x]'``)."""
    section = README.read_text().split("## Install", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"pip install 'hyperwarm\[([a-z]+)\]'", section))


def _name(distribution: str) -> str:
    """A distribution name as PEP 503 compares them: lower case, runs of ``-_.`` as ``-``."""
    return re.sub(r"[-_.]+", "-", distribution).lower()


def floors(extras: tuple[str, ...]) -> dict[str, str]:
    """``name -> version`` at the lower end of each range the library and ``extras`` declare (``>=``), the
    extras they include followed."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    requirements, todo, seen = list(project["dependencies"]), list(extras), set()
    while todo:
        extra = todo.pop()
        seen.add(extra)
        for requirement in project["optional-dependencies"][extra]:
            included = re.fullmatch(r"hyperwarm\[(.+)\]", requirement)
            if included:
                todo += [e for e in included[1].split(",") if e not in seen]
            else:
                requirements.append(requirement)
    found = {}
    for requirement in requirements:
        match = re.match(r"^([A-Za-z0-9._-]+)\s*(?:\[.*\])?.*>=\s*([0-9][^,;\s]*)", requirement)
        if match:
            found[_name(match[1])] = match[2]
    return found


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without its virtualenv, the project on the path or the tests' settings: what a
    user's shell has (pip's own settings, such as a package index, are kept)."""
    dropped = ("VIRTUAL_ENV", "PYTHONPATH", "CDK_VALIDATION", "JSII_NODE", "CDK_OUTDIR", "XDG_CACHE_HOME")
    env = {k: v for k, v in os.environ.items() if k not in dropped and not k.startswith("AWS_")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not p.startswith(str(REPO)))
    return env | extra


def new_venv(path: Path, wheel: Path, extras: tuple[str, ...], pins: dict[str, str] | None = None) -> Path:
    """A new virtualenv at ``path`` with ``wheel[extras]`` installed by pip (``pins`` as constraints); its python."""
    shutil.rmtree(path, ignore_errors=True)
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(path)], check=True, env=clean_env())
    python = path / "bin" / "python"
    command = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--quiet",
               f"{wheel}[{','.join(extras)}]" if extras else str(wheel)]
    if pins:
        constraints = path / "constraints.txt"
        constraints.write_text("".join(f"{name}=={version}\n" for name, version in pins.items()))
        command += ["--constraint", str(constraints)]
    result = subprocess.run(command, env=clean_env(), capture_output=True, text=True)
    if result.returncode:  # pip's own account of a conflict: which floor or range cannot be installed
        raise RuntimeError(f"{' '.join(command)}:\n{result.stdout}{result.stderr}")
    return python


def installed(python: Path) -> dict[str, str]:
    """The distributions of ``python``'s environment, ``name -> version`` (names lower case)."""
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format", "json", "--disable-pip-version-check"],
                            check=True, capture_output=True, text=True, env=clean_env()).stdout
    return {_name(d["name"]): d["version"] for d in json.loads(listed)}


def site_packages_bytes(python: Path) -> int:
    """The size of everything installed into ``python``'s site-packages, as ``du`` counts files."""
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True, env=clean_env()).stdout.strip()
    pip_itself = {"pip", "setuptools", "_distutils_hack"}
    total = 0
    for entry in Path(purelib).iterdir():
        if entry.name.split("-")[0] in pip_itself or entry.name == "distutils-precedence.pth":
            continue
        files = entry.rglob("*") if entry.is_dir() else [entry]
        total += sum(f.lstat().st_size for f in files if f.is_file() and not f.is_symlink())
    return total


def synthesize(python: Path, outdir: Path, app: Path = EXAMPLE) -> dict[str, object]:
    """Run ``app`` as a user does (``python -m hyperwarm.run``, aws-cdk-lib's validation on) from an empty folder;
    its one template."""
    outdir.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(python), "-m", "hyperwarm.run", str(app)], cwd=outdir, check=True, capture_output=True,
                   text=True, env=clean_env(CDK_OUTDIR=str(outdir)))
    (template,) = outdir.glob("*.template.json")
    loaded: dict[str, object] = json.loads(template.read_text())
    return loaded
