"""Public names of ``hyperwarm.serving`` (read by type checkers, and by lazy_loader at run time)."""

# Renamed in 0.2.0, removed in 0.3.0: typed as deprecated; reading one warns at run time, and __all__ leaves them out
# (hyperwarm._internal.deprecation).
from ._renamed import ContainerImage as ContainerImage, ContainerImageConfig as ContainerImageConfig
from .buckets import declare_existing_buckets as declare_existing_buckets, model_bucket as model_bucket
from .images import (
    ServingImage as ServingImage,
    ServingImageConfig as ServingImageConfig,
    official_image_uri as official_image_uri,
)
from .inference_ami import cuda_ami_problem as cuda_ami_problem
from .settings import (
    MODEL_DIR as MODEL_DIR,
    ServerSettings as ServerSettings,
    Serving as Serving,
    sagemaker_placement as sagemaker_placement,
    server_settings as server_settings,
)
