"""What every fault spec has, and what a fault kind declares about itself.

A fault kind is one pydantic model, a subclass of :class:`FaultSpec`: its ``type`` (a ``Literal``, the name an
experiment writes), the fields and typed ``params`` it owns, its own validation (a ``model_validator``, and
:meth:`FaultSpec.check_in` for what depends on the rest of the experiment), and as class variables what it *is*:
its family, summary, the roles it accepts, its traits (:class:`chaos.model.fault_traits.FaultTrait`, what the
checkers read of it) and the backend capability it needs. The experiment's ``faults`` are a union of these models
discriminated by ``type`` (:data:`chaos.model.faults.AnyFault`), so a field of one kind given to another is refused
by the model it was given to, and the JSON Schema has one entry per kind.

How a kind is injected is not here: ``chaos.nemesis.kinds`` registers one injection per declared kind.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from chaos.model.backend import Capability
from chaos.model.fault_traits import FaultTrait
from chaos.model.target import LinkScope, Role
from chaos.model.trigger import Trigger

if TYPE_CHECKING:  # pragma: no cover
    from chaos.model.experiment import Experiment

Family = Literal["process", "link", "rpc", "network", "topology", "membership", "container"]
#: the families in the order the schema, ``chaos plan`` and the fault reference list them
FAMILIES: tuple[Family, ...] = get_args(Family)

#: the roles every process-level fault accepts (all but the topic)
ANY_PROCESS = frozenset(Role) - {Role.TOPIC}


class FaultSpec(BaseModel):
    """One fault of an experiment: what it does (``type``, one subclass per kind), whom it hits (``target``,
    resolved at the moment of injection, ``node`` for target node/member), when (``trigger``) and for how long
    (``duration_s``, after which it is healed — always: healing runs in ``finally``).

    Build one from data with :meth:`build` (``FaultSpec.build(type="kill", target="coordinator")``), or as its
    kind's model (``Kill(type="kill", target="coordinator")``). ``type`` is always required and always dumped
    (even with ``exclude_defaults``): it is what tells the kinds apart when a dumped spec is read back.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: the kind (each subclass narrows it to its own name, a ``Literal`` without a default)
    type: str
    target: Role
    #: for target node/member: the node (broker-2, zk-1) or member (consumer-1)
    node: str | None = None
    #: for target leader: the partition of the workload topic
    partition: Annotated[int, Field(ge=0)] = 0
    #: which of a broker's links a link fault cuts (its client lanes, its ZooKeeper session, its quorum links)
    links: LinkScope = LinkScope.ALL
    trigger: Trigger = Trigger(at_s=0)
    #: how long the fault lasts before its heal (0 = heal at once)
    duration_s: Annotated[float, Field(ge=0)] = 5.0

    # ---- what the kind is (class variables: the same for every fault of the kind)
    family: ClassVar[Family]
    #: one line: what it does (what its heal does, in brackets)
    summary: ClassVar[str]
    #: the roles it accepts (checked when an experiment is loaded)
    targets: ClassVar[frozenset[Role]] = frozenset(Role)
    #: the one-line error for a target outside ``targets`` (``{target}`` is replaced); default: names the allowed
    target_error: ClassVar[str | None] = None
    #: what it does, as the checkers need to know it (recorded with every fault in ``fault_start.traits``)
    traits: ClassVar[frozenset[FaultTrait]] = frozenset()
    #: the backend capability it needs beyond process and link faults
    capability: ClassVar[Capability | None] = None
    #: YAML lines shown in the fault reference
    examples: ClassVar[tuple[str, ...]] = ()
    #: why ``chaos explore`` never generates this kind (None: it does, with :meth:`explore_fields`)
    explore_refusal: ClassVar[str | None] = None
    #: the target never comes back (another process takes its place): no other fault of a run can be healed on
    #: it, so ``chaos explore`` puts no other member fault beside one of these
    replaces_target: ClassVar[bool] = False

    @classmethod
    def build(cls, **fields: Any) -> FaultSpec:
        """The spec of the kind ``fields["type"]`` names, validated by that kind's model."""
        from chaos.model.faults import parse_fault

        return parse_fault(fields)

    @classmethod
    def kind_name(cls) -> str:
        """The name an experiment writes in ``type:`` for this kind."""
        return str(get_args(cls.model_fields["type"].annotation)[0])

    @property
    def traits_in_effect(self) -> frozenset[FaultTrait]:
        """What this fault does, as recorded in its ``fault_start.traits``: its kind's :attr:`traits`, and what its
        own fields add where a kind's effect depends on them (an ``rpc`` fault's ``action``)."""
        return self.traits

    def check_in(self, experiment: Experiment, i: int) -> None:
        """Refuse (``ValueError`` naming ``faults.{i}``) what this fault cannot do within ``experiment``."""

    @classmethod
    def explore_fields(cls, rng: random.Random, experiment: Experiment, target: Role,
                       trigger: Trigger) -> dict[str, Any]:
        """The fields of a fault of this kind beyond ``type``, ``target``, ``node``, ``trigger`` and ``duration_s``
        that ``chaos explore`` draws from ``rng`` for ``target`` and ``trigger`` in ``experiment``
        (:mod:`chaos.explore.plan`).

        The kind's own parameters have their home here, with the kind: the explorer knows only roles, triggers
        and durations. A draw may still be refused by the kind's validation (the explorer draws again, and calls
        a cell it can never fill unreachable). Default: none (the kind's defaults)."""
        return {}

    @model_validator(mode="before")
    @classmethod
    def _fields_of_other_kinds(cls, data: Any) -> Any:
        # a field another kind owns: say which kinds take it (pydantic would only say "unknown field")
        if isinstance(data, dict):
            from chaos.model.faults import declarations

            for name in data:
                if name not in cls.model_fields:
                    owners = [k for k in declarations().values() if name in k.model_fields]
                    names = sorted(k.kind_name() for k in owners)
                    families = {k.family for k in owners}
                    if len(owners) > 1 and len(families) == 1:
                        raise ValueError(f"{name} applies to {families.pop()} faults only ({', '.join(names)}), "
                                         f"not {cls.kind_name()}")
                    if owners:
                        raise ValueError(f"{name} applies to type {' or '.join(names)} only")
        return data

    @model_validator(mode="after")
    def _target(self) -> FaultSpec:
        r, name = self.target, self.kind_name()
        if r is Role.ZOOKEEPER_QUORUM and self.family != "process":
            raise ValueError("zookeeper_quorum takes process faults (kill, terminate, pause, restart)")
        if r not in self.targets:
            raise ValueError((self.target_error or f"{name} takes target "
                              f"{', '.join(sorted(t.value for t in self.targets))}").format(target=r.value))
        if r in (Role.NODE, Role.MEMBER) and not self.node:
            raise ValueError(f"target {r.value} needs `node` (e.g. {'consumer-1' if r is Role.MEMBER else 'broker-2'})")
        return self


class Params(BaseModel):
    """A kind's typed parameters (``params:``): unknown ones are refused."""

    model_config = ConfigDict(frozen=True, extra="forbid")
