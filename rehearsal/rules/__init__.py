"""One module per area; each registers its rules with `rehearsal.rule` on import."""
