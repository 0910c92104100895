"""What kind of construct a jsii object is, and its stack, answered in Python (synth time: docs/performance.md).

``isinstance(x, cdk.CfnResource)`` goes through ``ABCMeta``: the first negative answer for each class walks all
of ``CfnResource``'s ~1,500 subclasses (about 1 ms a class, 0.15 s for prod's 125 construct classes). jsii gives
every object its own class (or its nearest exported base), so the class's MRO answers the same question at once.
A resource's CloudFormation type is its L1 class's, read once per class instead of once per resource.
"""

from __future__ import annotations

import functools
import weakref
from typing import TypeGuard, TypeVar

import aws_cdk as cdk
from constructs import IConstruct

T = TypeVar("T")


def is_a(value: object, cls: type[T]) -> TypeGuard[T]:
    """``isinstance(value, cls)`` for aws-cdk-lib's (and constructs') classes, without ABC subclass walks."""
    return cls in type(value).__mro__


def resource_type(resource: cdk.CfnResource) -> str:
    """``resource.cfn_resource_type``: an L1 class's own type (one jsii read per class), else the resource's."""
    return _class_type(type(resource)) or resource.cfn_resource_type


@functools.cache
def _class_type(cls: type) -> str | None:
    defined = next((c for c in cls.__mro__ if "CFN_RESOURCE_TYPE_NAME" in vars(c)), None)
    return None if defined is None else str(defined.CFN_RESOURCE_TYPE_NAME)  # type: ignore[attr-defined]


def stack_of(construct: IConstruct) -> cdk.Stack:
    """``cdk.Stack.of(construct)``, asked of jsii once per construct: a construct never changes stack."""
    stack = _stacks.get(construct)
    if stack is None:
        stack = _stacks[construct] = cdk.Stack.of(construct)
    return stack


_stacks: weakref.WeakKeyDictionary[IConstruct, cdk.Stack] = weakref.WeakKeyDictionary()
