"""Cache refresh Lambda (see README.md): handler entry points in :mod:`.handler`."""
