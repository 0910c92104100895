"""How long a new pod of a cached model takes to serve on a cold and on a warm node (estimates).

A pod serves once its node has the image and the weights, and its engine has started. The node part follows
AWS's published HyperPod figures: a multi-GB serving image takes 5..7 min to pull (6 min), 145 GB of weights
take more than 20 min from S3 (an effective ~1 Gbit/s per node, well below the ~5 Gbit/s ceiling of one S3
connection), local NVMe reads ~7 GB/s. The engine part is what every vLLM start costs, cached or not, measured
by vLLM's maintainers on Llama 3 70B at tensor parallelism 8 (https://github.com/vllm-project/vllm/issues/19824:
"~10s to load weights --- from hot page cache, ~15s to convert dynamo bytecode, ~70s to run torch.compile,
~60s to capture the cudagraphs"):

- container start: AWS and vLLM publish no figure for a pod whose image is on the node; 30 s is an assumption
  (the process, its imports, CUDA and NCCL initialisation). The same issue measured a further ~60 s peer-to-peer
  access check at tensor parallelism 8, which ``VLLM_SKIP_P2P_CHECK=1`` skips; it is not counted.
- weight load into GPU memory: ~70 GB (70B parameters in FP8) in ~10 s, 7 GB/s; counted after the weights
  arrive on the node, although vLLM's loader overlaps part of it with the read (the conservative side).
- torch.compile: 15 s Dynamo bytecode transform + 70 s Inductor compilation = 85 s. hyperwarm keeps no compile
  cache between pods; vLLM's cache (``~/.cache/vllm/torch_compile_cache``, https://docs.vllm.ai/en/latest/design/torch_compile/)
  cuts this to the bytecode transform (7.5 s for a small Llama 3.2 in https://github.com/vllm-project/vllm/issues/20264).
- CUDA-graph capture: 60 s (vLLM captures one graph per batch size, 67 by default:
  https://github.com/vllm-project/vllm/issues/20098). Smaller models compile and capture faster (Llama 3 8B:
  19 s and 15 s, https://github.com/vllm-project/vllm/pull/11005), so the 70B figures are the conservative side.

The weights' download rate depends on the source (:meth:`ColdStart.rate_gbps`):

- S3 (and JumpStart, whose artifacts are S3 objects): the ~1 Gbit/s per node above.
- the Hugging Face Hub: 0.5 Gbit/s per node, an assumption. No per-node figure is published for the operator's
  download init container (AWS does not say which client it runs). The one published figure is a ceiling: the
  Hub's Python client tops out near 500 MB/s (4 Gbit/s), which hf_transfer exists to exceed "on very high
  bandwidth network" (https://github.com/huggingface/hf_transfer). The download crosses the internet through
  the VPC's NAT gateway, which every downloading node shares (5 Gbit/s, scaling to 100 Gbit/s:
  https://docs.aws.amazon.com/vpc/latest/userguide/nat-gateway-basics.html), so half the S3 figure is taken: a
  low rate lengthens the startup probe's budget, the safe side (a probe sized for a fast download kills a pod
  whose download is merely slow). ``python -m stacks plan cache --hub-bandwidth-gbps`` replaces it.

- FSx for Lustre: the file system's disk throughput shared by the nodes reading it at once
  (:attr:`ColdStart.fsx_readers`, :mod:`hyperwarm.caches.fsx`).

The startup probe of a cached model is sized from :meth:`ColdStart.cold_s`; the planner (``python -m stacks plan
cache``) reports all of it, each part on its own (:meth:`ColdStart.breakdown`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hyperwarm._internal.constraints import in_gigabytes
from hyperwarm._internal.lazy import on_first_use
from hyperwarm.caches.sources import FsxModelSource, HuggingFaceModelSource

if TYPE_CHECKING:
    from hyperwarm.caches import props
else:  # loaded on first use (typing.get_type_hints): the planner loads this module without aws-cdk
    props = on_first_use("hyperwarm.caches.props")

DEFAULT_BANDWIDTH_GBPS = 1.0
HUB_BANDWIDTH_GBPS = 0.5
"""The Hugging Face Hub per node, Gbit/s: an assumption (the module's docstring says why)."""
DEFAULT_IMAGE_PULL_MIN = 6.0
NVME_GB_PER_S = 7.0
DEFAULT_CONTAINER_START_S = 30.0
GPU_LOAD_GB_PER_S = 7.0
DEFAULT_COMPILE_S = 85.0
DEFAULT_CUDA_GRAPH_S = 60.0


@dataclass(frozen=True)
class StartBreakdown:
    """Where one pod's start goes, in seconds; the parts add up to :attr:`total_s`."""

    image_s: float
    """Pulling the serving image (0 when the node has it)."""
    weights_s: float
    """The weights onto the node: the S3 download, or the read from the NVMe cache."""
    container_s: float
    load_s: float
    """The weights into GPU memory."""
    compile_s: float
    cuda_graph_s: float

    @property
    def total_s(self) -> float:
        return self.image_s + self.weights_s + self.container_s + self.load_s + self.compile_s + self.cuda_graph_s


@dataclass(frozen=True)
class ColdStart:
    """Assumptions of the estimate (the module's docstring gives the source of every default)."""

    bandwidth_gbps: float = DEFAULT_BANDWIDTH_GBPS
    """Effective S3 download rate per node, Gbit/s. Default: 1."""
    image_pull_s: float = DEFAULT_IMAGE_PULL_MIN * 60
    """Default: 6 minutes."""
    nvme_gb_per_s: float = NVME_GB_PER_S
    """Default: 7 GB/s."""
    container_start_s: float = DEFAULT_CONTAINER_START_S
    """The server process up on a node that has its image (no published figure). Default: 30 seconds."""
    gpu_load_gb_per_s: float = GPU_LOAD_GB_PER_S
    """Weights into GPU memory, GB/s. Default: 7 GB/s."""
    compile_s: float = DEFAULT_COMPILE_S
    """torch.compile without a compile cache. Default: 85 seconds."""
    cuda_graph_s: float = DEFAULT_CUDA_GRAPH_S
    """CUDA-graph capture. Default: 60 seconds."""
    hub_bandwidth_gbps: float = HUB_BANDWIDTH_GBPS
    """Effective Hugging Face Hub download rate per node, Gbit/s (an assumption). Default: 0.5."""
    fsx_readers: Mapping[str, int] = field(default_factory=dict, hash=False)
    """FSx file system id -> nodes reading it at once, which share its throughput
    (:func:`hyperwarm.caches.fsx.file_system_readers`: every model on it, every node of a cached model's groups).
    A file system not listed: the model's own ``max_replicas``. :class:`~hyperwarm.caches.CachedModels` and the
    planner fill it from the cluster's groups. Default: none."""

    def fsx_reader_count(self, model: props.CachedModelSpec) -> int:
        """Nodes sharing the file system ``model`` is read from (:attr:`fsx_readers`); its max_replicas elsewhere."""
        if not isinstance(model.source, FsxModelSource):
            return model.max_replicas
        return self.fsx_readers.get(model.source.file_system_id, model.max_replicas)

    def rate_gbps(self, model: props.CachedModelSpec) -> float:
        """The per-node download rate from the model's source (Gbit/s). A JumpStart model's artifacts are S3 objects
        in the region's JumpStart bucket (``jumpstart-cache-prod-<region>``), so it takes S3's figure,
        :attr:`bandwidth_gbps` (AWS's 145 GB in more than 20 minutes above); AWS publishes none of its own."""
        if isinstance(model.source, HuggingFaceModelSource):
            return self.hub_bandwidth_gbps
        if isinstance(model.source, FsxModelSource):
            # The file system's disk rate shared by every node reading it at once (hyperwarm.caches.fsx).
            from hyperwarm.caches.fsx import per_node_gbps

            return per_node_gbps(model.source, self.fsx_reader_count(model))
        return self.bandwidth_gbps

    def download_s(self, model: props.CachedModelSpec) -> float:
        """The weights from the model's source onto one node at the per-node rate."""
        return in_gigabytes(model.size) * 8 / self.rate_gbps(model)

    def breakdown(self, model: props.CachedModelSpec, *, warm: bool) -> StartBreakdown:
        """A new pod on a prepared (``warm``) node, or on a node without caches: what is cached costs (almost)
        nothing, the rest is fetched; the engine starts either way."""
        size_gb = in_gigabytes(model.size)
        image = 0.0 if warm and model.image_cache else self.image_pull_s
        weights = size_gb / self.nvme_gb_per_s if warm and model.weights_cached else self.download_s(model)
        return StartBreakdown(image, weights, self.container_start_s, size_gb / self.gpu_load_gb_per_s,
                              self.compile_s, self.cuda_graph_s)

    def cold_s(self, model: props.CachedModelSpec) -> float:
        """A new pod on a node without caches: pull the image, download the weights, start the engine."""
        return self.breakdown(model, warm=False).total_s

    def fill_s(self, model: props.CachedModelSpec) -> float:
        """One node's weights cache fills at the S3 rate; nothing fills when weights are not cached."""
        return self.download_s(model) if model.weights_cached else 0.0

    def warm_s(self, model: props.CachedModelSpec) -> float:
        """A new pod on a prepared node: the cache's read, then the engine's start."""
        return self.breakdown(model, warm=True).total_s
