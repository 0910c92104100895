"""Which host AMI runs the CUDA a serving image was built for: a SageMaker variant's ``InferenceAmiVersion``,
and the HyperPod AMI under a HyperPod worker.

Pure Python, so the cdk.json models and the deploy rehearsal check it without aws-cdk.
"""

from __future__ import annotations

import re

INFERENCE_AMI_CUDA: dict[str, tuple[int, int]] = {
    "al2-ami-sagemaker-inference-gpu-2": (12, 2),  # NVIDIA driver 535
    "al2-ami-sagemaker-inference-gpu-2-1": (12, 2),  # driver 535
    "al2-ami-sagemaker-inference-gpu-3-1": (12, 4),  # driver 550
    "al2023-ami-sagemaker-inference-gpu-4-1": (13, 0),  # driver 580
}
"""Highest CUDA version each SageMaker ``InferenceAmiVersion``'s GPU driver runs (botocore 1.44.8's
``ProductionVariant.InferenceAmiVersion`` documentation). Without one, SageMaker picks a default AMI with
driver 470 (CUDA 11.4) or 535 (CUDA 12.2) by instance family: "Best practices to minimize interruptions
during GPU driver upgrades", https://docs.aws.amazon.com/sagemaker/latest/dg/inference-gpu-drivers.html."""

HYPERPOD_AMI_CUDA: tuple[int, int] = (13, 0)
"""Highest CUDA version the NVIDIA driver of HyperPod's EKS AMIs runs. Every supported HyperPod EKS AMI, 1.0.x
(January 2026) to 1.3.x (June 2026), ships NVIDIA driver 580 (580.126 to 580.167; the host CUDA toolkit is
12.8, which a container does not use): the "HyperPod EKS" AMI version list of the SageMaker HyperPod AMI
support policy, with the full package lists in "SageMaker HyperPod AMI releases for Amazon EKS",
https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-release-ami-eks.html. Driver 580 runs
CUDA 13.0, as for the SageMaker AMI above. HyperPod picks the newest supported AMI when a cluster is created
and changes it only on ``UpdateClusterSoftware``; a cluster created before 2026 may run an older AMI (driver
570, CUDA 12.8) until updated."""
HYPERPOD_AMI_RELEASE = re.compile(r"^1\.\d+\.\d+$")
"""``ImageReleaseVersion`` values of the HyperPod EKS AMIs above (1.x.y); others have an unknown driver."""

_CUDA_TAG = re.compile(r"(?:^|[-_.])cu(\d{2,3})(?=$|[-_.])")


def image_cuda(uri: str) -> tuple[int, int] | None:
    """The CUDA version an image's tag names (``...-cu130-...`` -> (13, 0)); None when it names none."""
    tag = uri.rsplit("/", 1)[-1].partition(":")[2]
    match = _CUDA_TAG.search(tag)
    if match is None:
        return None
    digits = match[1]
    return int(digits[:-1]), int(digits[-1])


def cuda_ami_problem(uri: str, ami: str | None) -> str | None:
    """Why a SageMaker variant running ``uri`` on host AMI ``ami`` (an ``InferenceAmiVersion``) cannot
    start its CUDA; None when it can, or when the image names no CUDA or the AMI is unknown."""
    cuda = image_cuda(uri)
    if cuda is None or (ami is not None and ami not in INFERENCE_AMI_CUDA):
        return None
    if ami is not None and INFERENCE_AMI_CUDA[ami] >= cuda:
        return None
    fitting = [name for name, supported in INFERENCE_AMI_CUDA.items() if supported >= cuda]
    wanted = f"set inference_ami_version to {' or '.join(fitting)}" if fitting \
        else "no known InferenceAmiVersion supports it; use an image built for an older CUDA"
    have = "SageMaker's default AMI runs CUDA <= 12.2 (driver 470 or 535)" if ami is None \
        else f"that AMI's driver runs CUDA <= {'.'.join(map(str, INFERENCE_AMI_CUDA[ami]))}"
    return f"the image {uri} needs CUDA {cuda[0]}.{cuda[1]} but {have}; {wanted}"


def hyperpod_cuda_problem(uri: str) -> str | None:
    """Why a HyperPod worker running ``uri`` on HyperPod's EKS AMI cannot start its CUDA; None when it can or
    the image names no CUDA."""
    cuda = image_cuda(uri)
    if cuda is None or cuda <= HYPERPOD_AMI_CUDA:
        return None
    return (f"the image needs CUDA {cuda[0]}.{cuda[1]} but HyperPod's EKS AMIs run NVIDIA driver 580, CUDA <= "
            f"{HYPERPOD_AMI_CUDA[0]}.{HYPERPOD_AMI_CUDA[1]}; use an image built for CUDA "
            f"{HYPERPOD_AMI_CUDA[0]}.{HYPERPOD_AMI_CUDA[1]} or older (e.g. a cu130 tag)")
