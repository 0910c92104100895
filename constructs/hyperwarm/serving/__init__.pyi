"""Public names of ``hyperwarm.serving`` (read by type checkers, and by lazy_loader at run time)."""

from .buckets import declare_existing_buckets as declare_existing_buckets, model_bucket as model_bucket
from .images import ContainerImage as ContainerImage, ContainerImageConfig as ContainerImageConfig
from .settings import (
    MODEL_DIR as MODEL_DIR,
    ServerSettings as ServerSettings,
    Serving as Serving,
    server_settings as server_settings,
)
