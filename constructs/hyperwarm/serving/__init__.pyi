"""Public names of ``hyperwarm.serving`` (read by type checkers, and by lazy_loader at run time)."""

from .buckets import declare_existing_buckets as declare_existing_buckets
from .buckets import model_bucket as model_bucket
from .images import ContainerImage as ContainerImage
from .images import ContainerImageConfig as ContainerImageConfig
from .settings import (
    MODEL_DIR as MODEL_DIR,
)
from .settings import (
    ServerSettings as ServerSettings,
)
from .settings import (
    Serving as Serving,
)
from .settings import (
    server_settings as server_settings,
)
