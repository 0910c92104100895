"""The install tests run only under ``make test-install`` (which sets HYPERWARM_TEST_INSTALL): they build virtualenvs
from the package registries, minutes that ``make test`` does not spend."""

import os

collect_ignore_glob = [] if os.environ.get("HYPERWARM_TEST_INSTALL") else ["*.py"]
