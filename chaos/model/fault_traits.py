"""What a fault does, as the checkers need to know it: the traits a fault kind declares.

A checker never asks which kind a fault was; it asks what the fault did. Each kind
(:mod:`chaos.nemesis.kinds`) declares its traits, the nemesis records them with the fault
(``fault_start.traits``), and the checkers read them from the history — so a new kind that stops a
member is judged as one without any checker knowing its name.
"""

from __future__ import annotations

from enum import StrEnum


class FaultTrait(StrEnum):
    """One thing a fault does while it is in effect (a kind has any number, or none)."""

    #: the target takes no part while the fault is in effect: its process is stopped or ended, or its links carry
    #: nothing. A member under it cannot consume (rebalance-liveness counts its partitions as without a consuming
    #: owner), and a coordinator may remove it (ownership-time: the fault explains a zombie window)
    TAKES_TARGET_OUT = "takes_target_out"
    #: the target's links still carry every byte, late or in pieces: a heartbeat still arrives, so the fault alone
    #: never makes a coordinator remove a member (ownership-time names it as context, not as the cause)
    SLOWS_ONLY = "slows_only"
    #: a member subscribes to other topics: the assignment changes by design (the assignor checker judges
    #: balance against the subscriptions; rebalance-liveness does not blame a slow rebalance on it)
    CHANGES_SUBSCRIPTION = "changes_subscription"
    #: the topic's partition count changes (KIP-429/KIP-848: the group rebalances onto the new partitions; the
    #: assignor and key-placement checkers judge each side of the change apart)
    CHANGES_PARTITION_COUNT = "changes_partition_count"
    #: the group's committed offsets are moved back on purpose (an offset reset): committed-offsets compares
    #: commits and samples only within the stretches between such faults. No kind of this version has it
    REWINDS_COMMITTED_OFFSETS = "rewinds_committed_offsets"
    #: clients may get answers the broker did not give: an ``rpc`` fault with ``action: error`` replaces the error
    #: codes of one API's answers by ``fault_start.params["error"]``. A checker that reads Kafka's behaviour from the
    #: errors a client reports sets aside those the fault injected (:mod:`chaos.checkers.injected_errors`)
    FALSIFIES_ANSWERS = "falsifies_answers"
    #: requests or their answers are lost on connections that stay open (Toxiproxy's timeout toxic; an ``rpc``
    #: fault's ``drop_request`` / ``drop_response``): the client learns of the loss only when its request timeout runs
    #: out, and waits meanwhile, e.g. in a synchronous commit inside its revocation callback, past
    #: ``max.poll.interval.ms``, out of its group. So the fault acts on the clients for up to their request timeout
    #: after it ends, and ``convergence`` counts its bound from then (:mod:`chaos.checkers.convergence`)
    LOSES_REQUESTS = "loses_requests"
