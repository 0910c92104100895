"""on_create.sh moves containerd's root to the NVMe instance store without ever losing its contents.

The script runs against a scratch directory tree with ``systemctl``, ``mountpoint`` and ``mount``
replaced by recorders (``HYPERWARM_*`` variables point it at the scratch paths). The previous
script copied with ``cp ... || true`` and then deleted ``/var/lib/containerd`` unconditionally:
a failed copy destroyed containerd's state, including the AMI's pre-loaded pause image, which no
registry serves. ``test_a_failed_copy_keeps_containerd_on_the_root_volume`` fails on it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "constructs" / "hyperwarm" / "cluster" / "lifecycle" / "on_create.sh"

_STUBS = {
    # A path is a mount point when the scratch tree says so (NVMe) or `mount` made it one.
    "mountpoint": 'p="${@: -1}"; [ -e "$p/.mounted" ] || grep -qs " $p\\$" "$WORLD/mounts"',
    "systemctl": 'echo "$*" >> "$WORLD/systemctl"; [ "$1" = is-active ] && echo active; exit 0',
    "mount": 'echo "$*" >> "$WORLD/mounts"',
}


@pytest.fixture(name="world")
def world_fixture(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in _STUBS.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    nvme = tmp_path / "nvme"
    nvme.mkdir()
    (nvme / ".mounted").touch()
    root = tmp_path / "containerd"
    (root / "io.containerd.content.v1.content").mkdir(parents=True)
    (root / "io.containerd.content.v1.content" / "pause-image").write_text("localhost/kubernetes/pause")
    return tmp_path


def run(world: Path, *, failing_cp: bool = False, failing_mount: bool = False) -> subprocess.CompletedProcess[str]:
    for name, fails in (("cp", failing_cp), ("mount", failing_mount)):
        if fails:
            (world / "bin" / name).write_text("#!/bin/bash\nexit 1\n")
            (world / "bin" / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{world / 'bin'}:{os.environ['PATH']}", "WORLD": str(world),
           "HYPERWARM_NVME": str(world / "nvme"), "HYPERWARM_CONTAINERD_ROOT": str(world / "containerd"),
           "HYPERWARM_FSTAB": str(world / "fstab")}
    return subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, check=True)


def test_containerd_root_is_copied_then_bind_mounted_and_persisted(world: Path) -> None:
    run(world)
    copied = world / "nvme" / "containerd" / "io.containerd.content.v1.content" / "pause-image"
    assert copied.read_text() == "localhost/kubernetes/pause"
    assert (world / "containerd" / "io.containerd.content.v1.content" / "pause-image").exists()
    assert (world / "mounts").read_text().split() == ["--bind", str(world / "nvme" / "containerd"),
                                                      str(world / "containerd")]
    assert (world / "fstab").read_text() == (
        f"{world}/nvme/containerd {world}/containerd none bind,nofail,"
        f"x-systemd.requires-mounts-for={world}/nvme 0 0\n")
    assert (world / "systemctl").read_text().splitlines() == [
        "is-active containerd", "stop containerd", "start containerd"]


def test_a_second_run_leaves_the_mount_alone(world: Path) -> None:
    run(world)
    result = run(world)
    assert "already a mount point" in result.stdout
    assert len((world / "fstab").read_text().splitlines()) == 1


def test_a_failed_copy_keeps_containerd_on_the_root_volume(world: Path) -> None:
    result = run(world, failing_cp=True)
    assert (world / "containerd" / "io.containerd.content.v1.content" / "pause-image").exists()
    assert not (world / "nvme" / "containerd").exists() and not (world / "mounts").exists()
    assert "containerd stays on the root volume" in result.stdout
    assert (world / "systemctl").read_text().splitlines()[-1] == "start containerd"


def test_a_node_without_nvme_is_left_untouched(world: Path) -> None:
    (world / "nvme" / ".mounted").unlink()
    result = run(world)
    assert "cannot hold model caches" in result.stdout
    assert not (world / "systemctl").exists() and not (world / "mounts").exists()


def test_a_failed_bind_mount_restarts_containerd_on_the_root_volume(world: Path) -> None:
    # Under `set -e` a failing mount used to end the script with containerd stopped.
    result = run(world, failing_mount=True)
    assert "bind-mounting" in result.stdout and "containerd stays on the root volume" in result.stdout
    assert (world / "containerd" / "io.containerd.content.v1.content" / "pause-image").exists()
    assert not (world / "nvme" / "containerd").exists() and not (world / "fstab").exists()
    assert (world / "systemctl").read_text().splitlines()[-1] == "start containerd"
