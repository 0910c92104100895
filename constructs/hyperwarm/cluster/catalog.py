"""The instance catalog, under its public name: it lives in :mod:`hyperwarm._internal.catalog`, below every package
that reads it (serving, cluster, caches, endpoints), so none of them imports the cluster's package for it."""

from hyperwarm._internal.catalog import (
    CATALOG as CATALOG,
    EFA_INSTANCE_TYPES as EFA_INSTANCE_TYPES,
    SMT_THREADS_PER_CORE as SMT_THREADS_PER_CORE,
    InstanceSpec as InstanceSpec,
    instance_spec as instance_spec,
)
