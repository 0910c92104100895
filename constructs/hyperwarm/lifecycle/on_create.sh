#!/bin/bash
# HyperPod (EKS orchestrator) lifecycle script, run once on every node at creation.
# Packaged with the stack: nothing is fetched from a branch or URL at deploy time.
set -euo pipefail

log() { echo "[hyperwarm on_create] $*"; }

# The local NVMe instance store is what the HyperPod inference operator's weights cache uses
# (hostPath /opt/dlami/nvme). HyperPod's DLAMI mounts it; make sure it exists and is writable
# so a cache can never silently land on the root volume.
NVME=/opt/dlami/nvme
if [ -d "$NVME" ] && mountpoint -q "$NVME"; then
  log "NVMe instance store mounted at $NVME ($(df -h --output=size "$NVME" | tail -1 | tr -d ' '))"
else
  log "no NVMe instance store mounted at $NVME; this instance group cannot hold model caches"
fi

# containerd keeps pre-pulled serving images on the instance store when it has one, so the image
# cache does not compete with the root volume.
if [ -d "$NVME" ] && mountpoint -q "$NVME" && [ ! -L /var/lib/containerd ]; then
  systemctl stop containerd || true
  mkdir -p "$NVME/containerd"
  if [ -d /var/lib/containerd ]; then
    cp -a /var/lib/containerd/. "$NVME/containerd/" || true
    rm -rf /var/lib/containerd
  fi
  ln -s "$NVME/containerd" /var/lib/containerd
  systemctl start containerd || true
  log "containerd root moved to $NVME/containerd"
fi

log "done"
