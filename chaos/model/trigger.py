"""When a fault fires: a trigger (a time, a seeded random schedule, or a group state seen live).

Triggers are the model's: an experiment's faults carry one each (:mod:`chaos.model.faults`), the nemesis
waits for it (:mod:`chaos.nemesis.watch`, :mod:`chaos.nemesis.schedule`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# The upper bound of a run's planned faults, refused at load time with the bound in the message (the cluster's
# and the workload's are in chaos.model.cluster and chaos.model.workload).
#: planned faults of a run (a random trigger's ``count`` included): the nemesis runs each in a thread of its
#: own, waiting for its trigger from the start of the chaos phase. 1,000 mostly sleeping threads still run on a
#: 2-core machine; more is a typo, not a schedule anyone reads
MAX_FAULTS = 1000


class RandomTrigger(_Strict):
    """``count`` occurrences at seeded random times in [start_s, end_s] of the chaos phase."""

    count: Annotated[int, Field(ge=1, le=MAX_FAULTS)] = 1
    start_s: Annotated[float, Field(ge=0)] = 0.0
    end_s: Annotated[float, Field(gt=0)] | None = None
    min_gap_s: Annotated[float, Field(ge=0)] = 0.0


#: the trigger fields of which exactly one is given
_TRIGGER_KINDS = ("at_s", "random", "state", "on_revoked", "after_generation", "after_epoch")


class Trigger(_Strict):
    """When a fault fires. Exactly one of ``at_s``, ``random``, ``state``, ``on_revoked``,
    ``after_generation``, ``after_epoch``.

    State triggers follow the live stream (:mod:`chaos.nemesis.watch`: the coordinator's own log
    lines, the members' events and, for KIP-848 groups, the observer's ConsumerGroupDescribe
    samples). A state means the same thing under both group protocols where the protocol has one.

    Classic groups (JoinGroup/SyncGroup): the GroupCoordinator
    (``kafka.coordinator.group.GroupCoordinator``, 2.8–3.9; the same words from 4.x's
    ``GroupMetadataManager``) logs its transitions:

    * ``PreparingRebalance`` — "Preparing to rebalance group G … with old generation N";
    * ``CompletingRebalance`` — "Stabilized group G generation N+1": despite its
      wording this is logged in ``onCompleteJoin``, when the join phase ends,
      the generation is bumped and the coordinator starts waiting for the
      leader's SyncGroup; the group is Stable only after the leader's
      assignment is durably stored in ``__consumer_offsets``;
    * ``Stable`` — the first member's ``assigned`` event of the new
      generation: SyncGroup responses are sent only after that store.

    KIP-848 groups (any member with ``group_protocol: consumer``; Kafka 4.x's
    ``org.apache.kafka.coordinator.group.GroupMetadataManager``, whose INFO lines carry no
    PreparingRebalance/Stabilized words; KIP-848, "Group Epoch - Trigger a rebalance", "Member Epoch
    - Reconciliation of the group"):

    * ``PreparingRebalance`` — a rebalance (reconciliation) started: "[GroupId G] Bumped group
      epoch to N" (the membership or the subscriptions changed; the coordinator computes the target
      assignment of epoch N on a later heartbeat, "Computed a new target assignment for epoch N",
      and the members then reconcile to it). ``N`` is the *new* epoch (a classic line names the old
      generation);
    * ``Stable`` — the group reconciled at its epoch: the first ConsumerGroupDescribe sample of the
      observer (``group_state``, every 100 ms) in state Stable at group epoch N. That state is the
      coordinator's own (``ConsumerGroup.maybeUpdateGroupState``: the assignment epoch equals the
      group epoch and every member has reached it). There is no INFO line for it (the per-member
      "new assignment state" line is DEBUG: none in 4.4.0's logs), and members' events cannot show
      it: a member that only loses partitions reaches the new epoch without a callback, and
      librdkafka's callbacks carry the epoch the member had before. The signal lags the transition
      by at most the observer's interval and one describe;
    * ``CompletingRebalance`` has no counterpart (no SyncGroup phase: the coordinator assigns) and
      is refused at load time.

    ``on_revoked: consumer-k`` fires when that member's partitions are taken away: its ``revoked`` event, or its
    ``lost`` one (KIP-429 ``onPartitionsLost``: fenced or its session expired, no commit possible).

    ``after_fault: fN`` with a state a rebalance passes through (PreparingRebalance, CompletingRebalance) fires at
    once when the group is in that state as fN is over: a member that rejoins while a rebalance is under way
    joins it, and no new line comes. Stable waits for the next entry (the rejoin's rebalance).

    ``after_generation: N`` (classic) fires at the first ``assigned`` event of generation >= N;
    ``after_epoch: N`` (KIP-848) fires when the group epoch reaches N ("Bumped group epoch to M",
    M >= N). Each is refused for the other protocol's groups.
    """

    at_s: Annotated[float, Field(ge=0)] | None = None
    random: RandomTrigger | None = None
    state: Literal["PreparingRebalance", "CompletingRebalance", "Stable"] | None = None
    on_revoked: str | None = None
    after_generation: Annotated[int, Field(ge=1)] | None = None
    #: KIP-848 groups: fire when the group epoch reaches this value
    after_epoch: Annotated[int, Field(ge=1)] | None = None
    #: state triggers: do not fire before this many seconds into the chaos phase
    not_before_s: Annotated[float, Field(ge=0)] = 0.0
    #: state triggers: do not fire before fault ``fN`` of this experiment (the N-th of ``faults``, from 0, as runs
    #: and reports name it) is over — healed, or given up — and not before ``not_before_s`` either. A fault that
    #: waits for the rebalance another fault's heal causes (a bounced member's rejoin) waits for that heal, not for
    #: a second guessed in advance; when fN never fires, this one does not either
    after_fault: Annotated[str, Field(pattern=r"^f[0-9]+$")] | None = None
    #: state triggers: give up (fault not injected, recorded) after this many seconds
    timeout_s: Annotated[float, Field(gt=0)] = 60.0

    @model_validator(mode="after")
    def _one(self) -> Trigger:
        chosen = [k for k in _TRIGGER_KINDS if getattr(self, k) is not None]
        if len(chosen) != 1:
            raise ValueError(f"give exactly one of {', '.join(_TRIGGER_KINDS)} (got {chosen or 'none'})")
        if self.after_fault is not None and chosen[0] in ("at_s", "random"):
            raise ValueError(f"after_fault {self.after_fault} applies to live triggers (state, on_revoked, "
                             f"after_generation, after_epoch): give the fault one, or drop after_fault")
        return self

    @property
    def after_index(self) -> int | None:
        """The position in ``faults`` of the fault ``after_fault`` names (None: waits for no fault)."""
        return None if self.after_fault is None else int(self.after_fault[1:])

    @property
    def kind(self) -> str:
        return next(k for k in _TRIGGER_KINDS if getattr(self, k) is not None)

    def describe(self) -> str:
        k = self.kind
        v = getattr(self, k)
        text = f"{k}={v.model_dump() if isinstance(v, BaseModel) else v}"
        return text if self.after_fault is None else f"{text}, after {self.after_fault}"
