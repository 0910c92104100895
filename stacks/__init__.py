"""Per-environment composition of hyperwarm's constructs into deployable stacks."""
