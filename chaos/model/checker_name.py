"""The checkers by name: what an experiment's ``checkers:`` section selects (an enum alone, so the model does not
import the checkers; each name's checker is registered in :mod:`chaos.checkers.registry`)."""

from __future__ import annotations

from enum import StrEnum


class CheckerName(StrEnum):
    """The nine invariants, in order, the fault-execution precondition (every planned fault fired), then rebalance
    liveness during chaos (issue 17)."""

    OWNERSHIP_GENERATION = "ownership-generation"
    OWNERSHIP_TIME = "ownership-time"
    FENCING = "fencing"
    DELIVERY = "delivery"
    COMMITTED_OFFSETS = "committed-offsets"
    GENERATIONS = "generations"
    CONVERGENCE = "convergence"
    STATIC_MEMBERSHIP = "static-membership"
    ASSIGNOR = "assignor"
    #: not an invariant: every planned fault fired, took effect and healed (else the run is unknown)
    FAULTS = "faults"
    #: liveness during chaos: every rebalance phase ends within its protocol bound (issue 17)
    REBALANCE_LIVENESS = "rebalance-liveness"
    #: record-level anomalies: lost records, poll skips / steps back within one ownership, inconsistent offsets;
    #: duplicates per rebalance as figures (issue 16)
    RECORD_ANOMALIES = "record-anomalies"
    #: a keyed workload's keys on the partitions murmur2 gives them, and per-key order within a partition (issue 16)
    KEY_PLACEMENT = "key-placement"
