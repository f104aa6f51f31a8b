"""The checkers by name: what an experiment's ``checkers:`` section selects (an enum alone, so the model does not
import the checkers; each name's checker is registered in :mod:`chaos.checkers.registry`)."""

from __future__ import annotations

from enum import StrEnum


class CheckerName(StrEnum):
    """The nine invariants, in order, the fault-execution precondition (every planned fault fired), then rebalance
    liveness during chaos (issue 17), record anomalies and key placement (issue 16), then the share-group
    invariants (issue 36, KIP-932: docs/share-groups.md)."""

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
    #: share groups (KIP-932): one holder per record at a time, no acknowledgement accepted once its lock passed
    SHARE_OWNERSHIP = "share-ownership"
    #: share groups: delivery counts strictly increase within the limit; nothing delivered after accept / reject
    SHARE_DELIVERY = "share-delivery"
    #: share groups: every acknowledged record ends accepted, rejected or archived (at-least-once for queues)
    SHARE_COMPLETION = "share-completion"
    #: share groups: the share-partition start offset never goes back; a dead member's records are acquired again
    #: within their lock
    SHARE_PROGRESS = "share-progress"
    #: share groups, the application's side: a record processed while its lock holds, accepted only once processed
    SHARE_PROCESSING = "share-processing"


#: the checkers of share groups (KIP-932)
SHARE_CHECKERS = frozenset({CheckerName.SHARE_OWNERSHIP, CheckerName.SHARE_DELIVERY, CheckerName.SHARE_COMPLETION,
                            CheckerName.SHARE_PROGRESS, CheckerName.SHARE_PROCESSING})
#: the checkers that judge whatever group the run had: the fault-execution precondition
GROUP_NEUTRAL_CHECKERS = frozenset({CheckerName.FAULTS})
