"""What the Hub token sync function and its construct (``hyperwarm.caches.hub``) agree on: the Secret's key, the
metric the function publishes when it restarts a pod stuck on a missing key, and when a pod counts as stuck.
Standard library only: synth imports it."""

TOKEN_KEY = "token"
"""The key of the Kubernetes Secret (the operator's ``tokenSecretRef.key``)."""

METRICS_NAMESPACE = "Hyperwarm/HubTokens"
RESTARTED_METRIC = "StuckPodsRestarted"
"""Pods the scheduled run deleted because they still waited for the token key after it was there (published at
every scheduled run, 0 included, in the embedded metric format)."""
CLUSTER_DIMENSION = "ClusterName"
NAMESPACE_DIMENSION = "Namespace"
"""The models' Kubernetes namespace: two syncs on one cluster (two ``CachedModels``) count apart."""

STUCK_AFTER_SECONDS = 120
"""A pod counts as stuck on a missing token key once it is this old: kubelet tries a pod's containers again at its
next syncs (about a minute apart), so a younger pod may still start by itself."""
