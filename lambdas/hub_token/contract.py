"""What the Hub token sync function and its construct (``hyperwarm.caches.hub``) agree on: the Secret's key, the
metrics the function publishes on pods stuck on a missing key (restarted or left), and when a pod counts as stuck.
Standard library only: synth imports it."""

TOKEN_KEY = "token"
"""The key of the Kubernetes Secret (the operator's ``tokenSecretRef.key``)."""

METRICS_NAMESPACE = "Hyperwarm/HubTokens"
RESTARTED_METRIC = "StuckPodsRestarted"
"""Pods the scheduled run deleted because they still waited for the token key after it was there (published at
every scheduled run, 0 included, in the embedded metric format)."""
LEFT_METRIC = "StuckPodsLeft"
"""Pods that still wait, :data:`STUCK_AFTER_SECONDS` after creation, for kubelet to create a container that takes
the token key of a Secret holding it, and that the run did not restart: kubelet's message names another cause or
words the missing key otherwise, or no ReplicaSet would start the pod again (published with
:data:`RESTARTED_METRIC`). The sync does not restart them: a person must look."""
CLUSTER_DIMENSION = "ClusterName"
NAMESPACE_DIMENSION = "Namespace"
"""The models' Kubernetes namespace: two syncs on one cluster (two ``CachedModels``) count apart."""

STUCK_AFTER_SECONDS = 120
"""A pod counts as stuck on a missing token key once it is this old: kubelet tries a pod's containers again at its
next syncs (about a minute apart), so a younger pod may still start by itself."""
