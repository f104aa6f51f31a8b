"""Topology faults: the workload topic grows (``add_partitions``); every broker or member restarted in turn
(``rolling_restart``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import Field

from chaos.model.fault_traits import FaultTrait
from chaos.model.faults.base import Family, FaultSpec
from chaos.model.target import Role
from chaos.model.workload import MAX_PARTITIONS

if TYPE_CHECKING:  # pragma: no cover
    import random

    from chaos.model.experiment import Experiment
    from chaos.model.trigger import Trigger


#: ``chaos explore`` grows the topic only of a workload whose members all refresh their metadata at least this often
EXPLORE_METADATA_AGE_MS = 5000


class AddPartitions(FaultSpec):
    type: Literal["add_partitions"]
    family: ClassVar[Family] = "topology"
    summary: ClassVar[str] = "topic grows to partitions (permanent: not undoable in Kafka)"
    targets: ClassVar[frozenset[Role]] = frozenset({Role.TOPIC})
    target_error: ClassVar[str | None] = "add_partitions needs target: topic and partitions: N (the new total)"
    traits: ClassVar[frozenset[FaultTrait]] = frozenset({FaultTrait.CHANGES_PARTITION_COUNT})

    #: the topic's new partition count (the total, not the number added)
    partitions: Annotated[int, Field(ge=1, le=MAX_PARTITIONS)]

    @classmethod
    def explore_fields(cls, rng: random.Random, experiment: Experiment, target: Role,
                       trigger: Trigger) -> dict[str, Any]:
        # a member notices new partitions at its next metadata refresh (librdkafka and Java: 5 minutes by default);
        # one that cannot inside a generated run leaves them unowned while its eager group looks converged, and the
        # run judges the client's refresh interval, not the group (found by exploring 4.4.0: baseline's members
        # never took the added partition, whose records only the final read saw)
        slow = [i for i, c in enumerate(experiment.workload.consumers)
                if c.metadata_max_age_ms is None or c.metadata_max_age_ms > EXPLORE_METADATA_AGE_MS]
        if slow:
            raise ValueError(f"consumer-{slow[0]} refreshes its metadata less often than every "
                             f"{EXPLORE_METADATA_AGE_MS} ms (metadata_max_age_ms): it would not see new partitions "
                             "inside a generated run")
        # one more, two more, or twice as many partitions
        now = experiment.workload.partitions
        return {"partitions": min(MAX_PARTITIONS, now + rng.choice([1, 2, now]))}


class RollingRestart(FaultSpec):
    type: Literal["rolling_restart"]
    family: ClassVar[Family] = "topology"
    summary: ClassVar[str] = "every broker (or member) restarted in turn"
    targets: ClassVar[frozenset[Role]] = frozenset({Role.ALL_BROKERS, Role.ALL_MEMBERS})
    target_error: ClassVar[str | None] = "rolling_restart needs target all_brokers or all_members"
