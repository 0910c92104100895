"""``make footprint``: the wheel's size and what each extra installs, each in a new virtualenv (a markdown table for
docs/performance.md). Needs the package registries; a few minutes (one virtualenv per row)."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from consumer import build_wheel, installed, new_venv, site_packages_bytes

ROWS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("hyperwarm (endpoints, refresh, observability)", ()),
    ("hyperwarm[hyperpod] (+ HyperPodEksCluster)", ("hyperpod",)),
    ("hyperwarm[caches] (+ CachedModels)", ("caches",)),
    ("hyperwarm[caches,node] (the example app on a machine without Node)", ("caches", "node")),
    ("hyperwarm[images]", ("images",)),
    ("hyperwarm[tools]", ("tools",)),
)


def _mb(size: int) -> str:
    return f"{size / 1e6:,.0f} MB"


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="hyperwarm-footprint-") as tmp:
        root = Path(tmp)
        wheel = build_wheel(root / "dist")
        print(f"wheel {wheel.name}: {wheel.stat().st_size / 1e6:.2f} MB\n")
        print("| install | site-packages | distributions |\n|---|---|---|")
        base = 0
        for label, extras in ROWS:
            python = new_venv(root / "venv", wheel, extras)
            size = site_packages_bytes(python)
            base = base or size
            added = f" (+{_mb(size - base)})" if size != base else ""
            distributions = len(set(installed(python)) - {"pip", "setuptools"})
            print(f"| `{label}` | {_mb(size)}{added} | {distributions} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
