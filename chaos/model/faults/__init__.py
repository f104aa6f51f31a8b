"""Fault kinds, declared: one pydantic model per kind (:mod:`chaos.model.faults.base`), one module per family.

Every module of this package is imported here, and every concrete subclass of
:class:`~chaos.model.faults.base.FaultSpec` (one with a ``Literal`` ``type``) is a kind: :func:`declarations` lists
them (families in :data:`~chaos.model.faults.base.FAMILIES` order, then module, then definition order) and
:data:`AnyFault` is their union discriminated by ``type`` — what an experiment's ``faults`` holds. A new kind is a
new class here (and its injection in ``chaos.nemesis.kinds``); the experiment model, its validation, its JSON
Schema, ``chaos plan`` and the fault reference pick it up.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Union, get_args, get_origin

from pydantic import Field, TypeAdapter

from chaos.model.faults.base import FAMILIES, FaultSpec, Params

for _module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    importlib.import_module(f"{__name__}.{_module.name}")


def _concrete(cls: type[FaultSpec]) -> Iterator[type[FaultSpec]]:
    for sub in cls.__subclasses__():
        if get_origin(sub.model_fields["type"].annotation) is not None and \
                len(get_args(sub.model_fields["type"].annotation)) == 1:
            yield sub
        yield from _concrete(sub)


def _order(cls: type[FaultSpec]) -> tuple[int, str]:
    return (FAMILIES.index(cls.family), cls.__module__)


_DECLARED: dict[str, type[FaultSpec]] = {}
for _cls in sorted(_concrete(FaultSpec), key=_order):  # sorted() is stable: definition order within a module
    if _cls.kind_name() in _DECLARED:
        raise TypeError(f"fault kind {_cls.kind_name()!r} declared twice ({_DECLARED[_cls.kind_name()]}, {_cls})")
    _DECLARED[_cls.kind_name()] = _cls


def declarations() -> Mapping[str, type[FaultSpec]]:
    """Every declared kind's model, by name."""
    return dict(_DECLARED)


if TYPE_CHECKING:
    # the union is built from the declarations, which a type checker cannot see: it checks the common fields
    AnyFault = FaultSpec
else:
    AnyFault = Annotated[Union[tuple(_DECLARED.values())], Field(discriminator="type")]  # noqa: UP007

_ADAPTER: TypeAdapter[FaultSpec] = TypeAdapter(AnyFault)


def parse_fault(data: Any) -> FaultSpec:
    """``data`` validated as the fault kind its ``type`` names (pydantic's ValidationError if it is not one)."""
    return _ADAPTER.validate_python(data)


__all__ = ["AnyFault", "FaultSpec", "Params", "declarations", "parse_fault"]
