"""Fault kinds: one module per family, each declaring its types, validation, capability and injection.

Modelled on Jepsen's ``nemesis/combined.clj`` packages: a family module
(``process``, ``link``, ``network``, ``topology``, ``membership``,
``container``, …) registers one :class:`FaultKind` per fault type with
:func:`register`. A kind carries

* ``targets`` — the roles it accepts (checked when an experiment is loaded);
* ``fields`` — the optional spec fields it owns (``peer``, ``subscription``,
  ``partitions``, ``links``); any other kind given them is rejected;
* ``check`` / ``check_in`` — its own validation of a fault spec, alone and
  within its experiment (raise ``ValueError`` with what to change);
* ``capability`` — the backend capability it needs beyond process and link faults;
* ``inject(Injection) -> list[Active]`` — the fault itself, each
  :class:`~chaos.nemesis.evidence.Active` carrying its heal and the evidence
  that it took effect and that it healed.

Every module of this package is imported by :func:`kinds`, so a new kind is a
new module here and nothing else: the experiment model builds its
``FaultType`` enum, its validation and its JSON Schema from the registry.
Modules must stay importable without a cluster: runtime libraries (psutil,
the Toxiproxy client, the admin client) are imported inside ``inject``.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from chaos.model.target import Role

if TYPE_CHECKING:  # pragma: no cover
    from chaos.nemesis.evidence import Active


@dataclass
class Injection:
    """Everything a kind's ``inject`` may use for one occurrence of a fault.

    ``nodes`` are the resolved targets; ``resolve(role)`` resolves another role
    now (a partition's peer); ``cancel`` is set when the chaos phase ends (a
    long fault such as a rolling restart stops early). A kind that knows the
    instant its fault took hold (a signal sent) sets ``effect_ns``.
    """

    cluster: Any
    run: Any
    fault_id: str
    spec: Any
    nodes: list[str]
    cancel: threading.Event
    resolve: Callable[[Role], list[str]]
    effect_ns: int | None = None


Family = Literal["process", "link", "network", "topology", "membership", "container"]


@dataclass(frozen=True)
class FaultKind:
    """One fault type: what it does, what it accepts, and how it is injected and healed."""

    name: str
    family: Family
    summary: str
    inject: Callable[[Injection], list[Active]]
    targets: frozenset[Role] = frozenset(Role)
    #: the one-line error for a target outside ``targets`` (default: names the allowed ones)
    target_error: str | None = None
    fields: frozenset[str] = frozenset()
    check: Callable[[Any], None] | None = None
    check_in: Callable[[Any, Any, int], None] | None = None
    capability: str | None = None
    #: required ``params`` keys (toxic parameters)
    params: frozenset[str] = frozenset()
    examples: tuple[str, ...] = field(default_factory=tuple)


_REGISTRY: dict[str, FaultKind] = {}
_LOADED = False
_LOCK = threading.Lock()


def register(*new: FaultKind) -> None:
    """Add kinds (called by the family modules at import); a name may be registered once."""
    for k in new:
        if k.name in _REGISTRY and _REGISTRY[k.name] is not k:
            raise ValueError(f"fault kind {k.name!r} registered twice")
        _REGISTRY[k.name] = k


def kinds() -> Mapping[str, FaultKind]:
    """Every registered kind, by name (imports every module of this package on first use)."""
    global _LOADED
    with _LOCK:
        if not _LOADED:
            for mod in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
                importlib.import_module(f"{__name__}.{mod.name}")
            _LOADED = True
    return dict(_REGISTRY)


def kind(name: str) -> FaultKind:
    """The kind registered as ``name`` (KeyError if none)."""
    return kinds()[str(name)]
