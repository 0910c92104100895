"""Fixtures of the refresh tests; the helpers themselves live in refresh_world.py."""

from refresh_world import context, kube_server, world  # noqa: F401  (pytest fixtures)
