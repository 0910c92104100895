#!/bin/bash
# HyperPod (EKS orchestrator) lifecycle script, run once on every node at creation.
# Packaged with the stack: nothing is fetched from a branch or URL at deploy time.
#
# containerd's root moves to the local NVMe instance store (where pre-pulled serving images
# belong), like AWS's reference script (aws-samples/awsome-distributed-training,
# 1.architectures/7.sagemaker-hyperpod-eks/LifecycleScripts/base-config/on_create.sh) moves it to a
# larger disk. AWS points containerd's `root` at the new disk by rewriting its configuration (a
# sed on AL2, a complete replacement config plus a systemd override on AL2023). Here a bind mount
# of the same directory does it instead: the AMI's containerd configuration (runtimes, sandbox
# image, registry settings) stays exactly as the AMI ships it, on AL2 and AL2023 alike.
# The old contents are copied first and never deleted: if the copy fails, containerd stays on
# the root volume (a slower image cache, never a node whose pause image is gone).
set -euo pipefail

NVME=${HYPERWARM_NVME:-/opt/dlami/nvme}
CONTAINERD_ROOT=${HYPERWARM_CONTAINERD_ROOT:-/var/lib/containerd}
FSTAB=${HYPERWARM_FSTAB:-/etc/fstab}

log() { echo "[hyperwarm on_create] $*"; }

# The local NVMe instance store is what the HyperPod inference operator's weights cache uses
# (hostPath /opt/dlami/nvme). HyperPod's DLAMI mounts it; say so, so a cache never silently lands
# on the root volume.
if [ -d "$NVME" ] && mountpoint -q "$NVME"; then
  log "NVMe instance store mounted at $NVME ($(df -h --output=size "$NVME" | tail -1 | tr -d ' '))"
else
  log "no NVMe instance store mounted at $NVME; this instance group cannot hold model caches"
  log "done"
  exit 0
fi

relocate_containerd() {
  local target="$NVME/containerd"
  if mountpoint -q "$CONTAINERD_ROOT"; then
    log "$CONTAINERD_ROOT is already a mount point; left as it is"
    return 0
  fi
  local was_active=inactive
  was_active=$(systemctl is-active containerd 2>/dev/null || true)
  if [ "$was_active" = active ]; then
    systemctl stop containerd
  fi
  mkdir -p "$target" "$CONTAINERD_ROOT"
  if ! cp -a "$CONTAINERD_ROOT/." "$target/"; then
    log "copying $CONTAINERD_ROOT to $target failed; containerd stays on the root volume"
    rm -rf "$target"
  elif ! mount --bind "$target" "$CONTAINERD_ROOT"; then
    log "bind-mounting $target at $CONTAINERD_ROOT failed; containerd stays on the root volume"
    rm -rf "$target"
  else
    # Again after a reboot, once the instance store is mounted; nofail keeps a boot without it going.
    if ! grep -qs " $CONTAINERD_ROOT none bind" "$FSTAB"; then
      echo "$target $CONTAINERD_ROOT none bind,nofail,x-systemd.requires-mounts-for=$NVME 0 0" >> "$FSTAB"
    fi
    log "containerd root on $target (bind mount at $CONTAINERD_ROOT)"
  fi
  if [ "$was_active" = active ]; then
    systemctl start containerd
  fi
}

relocate_containerd
log "done"
