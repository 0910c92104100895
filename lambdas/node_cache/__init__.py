"""hyperwarm's node cache (see README.md): the shared layout (:mod:`.layout`) and the filler (:mod:`.fill`)."""
