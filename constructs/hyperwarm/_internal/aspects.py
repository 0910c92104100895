"""An aspect that runs once at synth over a whole scope, instead of once per construct.

jsii calls a Python aspect back for every construct under the scope it is added to (a round trip each: ~500
for prod's stacks; synth time, docs/performance.md). Added to a construct of its own with no children, it is
visited once, during synth's aspect phase like any other, and walks the scope itself with one ``find_all``.
The walk sees what exists when synth reaches it: everything the app made, not what another aspect adds later
during synth (aws-cdk-lib invokes aspects node by node in tree order; a priority orders them only on one node).
A policy that must also cover those stays a per-construct aspect (``hyperwarm.read_through_outputs``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import aws_cdk as cdk
import jsii
from constructs import Construct, IConstruct


def at_synth(scope: IConstruct, id: str, visit: Callable[[list[IConstruct]], None],
             priority: float = cdk.AspectPriority.MUTATING) -> None:
    """Call ``visit`` with every construct under ``scope`` (``scope`` first) once, at synth. ``id`` names the
    childless construct that carries the aspect (a number is added when ``scope`` already has one)."""
    name, n = id, 1
    while scope.node.try_find_child(name) is not None:
        n += 1
        name = f"{id}{n}"
    carrier = Construct(cast(Construct, scope), name)  # a scope is a Construct in practice
    cdk.Aspects.of(carrier).add(_Once(scope, visit), priority=priority)


@jsii.implements(cdk.IAspect)
class _Once:
    def __init__(self, scope: IConstruct, visit: Callable[[list[IConstruct]], None]) -> None:
        self._scope, self._visit = scope, visit

    def visit(self, node: IConstruct) -> None:
        self._visit(self._scope.node.find_all())
