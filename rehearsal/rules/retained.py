"""What a stack retains outlives it, never a failed create; under a fixed name, a stack created again adopts it.

A resource with `DeletionPolicy: Retain` outlives its stack (the refresh state table keeps what each
target serves, for the deploy guards; a created model bucket keeps the models). When the stack is
created again its create of that name fails ("already exists") unless the deploy imports the resource:
`make deploy` passes `--import-existing-resources`, and CloudFormation then imports a resource only if
its name is a static string in the template, the name is the type's primary identifier and its
DeletionPolicy is Retain or RetainExceptOnCreate.
"""

from __future__ import annotations

from collections.abc import Iterator

from rehearsal.core import Assembly, Finding, at_pointer, direct_dependencies, resource_schema, rule

_RETAINED = ("Retain", "RetainExceptOnCreate")


@rule("retained.importable",
      source="https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/import-resources-automatically.html")
def importable(assembly: Assembly) -> Iterator[Finding]:
    """A retained resource that names itself (sets its type's primary identifier) names itself with a
    static string, which CloudFormation's automatic import requires. A name without one, or built from a
    resource of its stack (``/aws/lambda/<function>``), is new when the stack is created again and needs
    nothing; one built from literals and parameters alone comes back and cannot be imported. A retained
    resource whose type has no schema cannot be judged."""
    for stack, logical_id, resource in assembly.resources():
        if resource.get("DeletionPolicy") not in _RETAINED:
            continue
        schema = resource_schema(resource.get("Type", ""))
        if schema is None:
            yield Finding("retained.importable", stack, logical_id,
                          f"cannot tell whether a retained {resource.get('Type')} can be imported when its stack is "
                          "created again: cfn-lint has no resource schema for the type")
            continue
        for pointer in schema.get("primaryIdentifier", ()):
            value = at_pointer(resource.get("Properties", {}), pointer)
            resources = assembly.templates[stack].get("Resources", {})
            if value is not None and not isinstance(value, str) \
                    and not direct_dependencies({"Value": value}) & set(resources):
                field = pointer.removeprefix("/properties/")
                yield Finding("retained.importable", stack, logical_id,
                              f"is retained and builds its name {field} from literals and parameters: a stack "
                              "created again fails on the name it left and cannot import it (automatic import "
                              "needs a static name); give a literal name, or none")


@rule("retained.except-on-create",
      source="https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-attribute-deletionpolicy.html")
def except_on_create(assembly: Assembly) -> Iterator[Finding]:
    """A retained resource is retained with ``DeletionPolicy: RetainExceptOnCreate``, never ``Retain``.

    ``Retain`` keeps a resource even when the stack operation that created it rolls back: a failed first
    create of production leaves its clusters, keys, buckets and log groups behind, outside any stack,
    nameless and billing. ``RetainExceptOnCreate`` retains it on every other operation (a stack deletion,
    a resource removed from the template) and deletes it only then; a resource the stack imported is
    existing and stays. CloudFormation allows it in every ``DeletionPolicy``; ``UpdateReplacePolicy``
    has no such value (it stays ``Retain``). aws-cdk-lib: ``RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE``,
    and ``hyperwarm._internal.retention.retain_except_on_create`` for its own defaults."""
    for stack, logical_id, resource in assembly.resources():
        if resource.get("DeletionPolicy") == "Retain":
            yield Finding("retained.except-on-create", stack, logical_id, (
                f"a {resource.get('Type')} with DeletionPolicy Retain: a failed first create leaves it behind, "
                "outside any stack; use RetainExceptOnCreate (cdk.RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE)"))
