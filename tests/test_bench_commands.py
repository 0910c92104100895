"""``make bench``'s commands load as the Makefile runs them: each program's imports resolve with the recipe's own
environment (PYTHONPATH), so a benchmark is never found broken only when someone wants its figures. (The warm rollout
bench once lost an import path when the cluster model started reading tests/admission.py.)"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _bench_commands() -> list[tuple[dict[str, str], list[str]]]:
    """(environment assignments, python arguments) of each line of the Makefile's ``bench`` recipe."""
    recipe = re.search(r"^bench:.*\n((?:\t.*\n)+)", (REPO / "Makefile").read_text(), re.M)
    assert recipe, "the Makefile has a bench target"
    commands = []
    for line in recipe.group(1).splitlines():
        words = shlex.split(line.strip())
        env = dict(w.split("=", 1) for w in words if re.match(r"^[A-Z_]+=", w))
        args = [w for w in words if not re.match(r"^[A-Z_]+=", w)]
        assert args[0] == "$(PY)", line
        commands.append((env, args[1:]))
    return commands


def test_every_bench_program_loads_with_its_recipes_environment() -> None:
    commands = _bench_commands()
    assert len(commands) >= 3
    for env, args in commands:
        load = (f"import importlib; importlib.import_module({args[1]!r})" if args[0] == "-m" else
                "import importlib.util, sys; s = importlib.util.spec_from_file_location('bench', sys.argv[1]); "
                "s.loader.exec_module(importlib.util.module_from_spec(s))")
        argv = [sys.executable, "-c", load, *([] if args[0] == "-m" else [args[0]])]
        result = subprocess.run(argv, cwd=REPO, env={**os.environ, **env}, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, (args, result.stderr[-2000:])
