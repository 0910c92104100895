"""Counting jsii requests (each a round trip from Python to Node; synth time, docs/performance.md).

Keys: the request's kind (``get``, ``invoke``, ``create``, ... and ``complete`` for a callback's answer), and
``"<kind> <Class>.<member>"`` (``"sinvoke Stack.of"``; ``"get .node"`` where jsii names no class).
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from jsii._kernel.providers import process


@contextmanager
def counted() -> Iterator[collections.Counter[str]]:
    """The requests made inside the block, counted as they are sent."""
    requests: collections.Counter[str] = collections.Counter()
    send = process._NodeProcess.send

    def counting(self: Any, request: Any, response_type: Any) -> Any:
        sent = self._serializer.unstructure(request)
        kind = sent.get("api") or next(iter(sent))
        requests[kind] += 1
        requests[f"{kind} {sent.get('fqn', '').rsplit('.', 1)[-1]}.{sent.get('method') or sent.get('property') or ''}"] += 1
        return send(self, request, response_type)

    process._NodeProcess.send = counting  # type: ignore[method-assign]
    try:
        yield requests
    finally:
        process._NodeProcess.send = send  # type: ignore[method-assign]
