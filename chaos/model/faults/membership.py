"""Membership faults: a member changes its subscription (``change_subscription``), its group protocol
(``switch_protocol``) or its client library release (``client_upgrade``) and back, or crashes and is replaced by a
fresh process (``crash_replace``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import model_validator

from chaos.model.fault_traits import FaultTrait
from chaos.model.faults.base import Family, FaultSpec
from chaos.model.target import MEMBER_ROLES, Role
from chaos.model.workload import Client, ConsumerSpec

if TYPE_CHECKING:  # pragma: no cover
    import random

    from chaos.model.experiment import Experiment
    from chaos.model.trigger import Trigger


class _MembershipFault(FaultSpec):
    family: ClassVar[Family] = "membership"


class ChangeSubscription(_MembershipFault):
    type: Literal["change_subscription"]
    summary: ClassVar[str] = "a member subscribes to `subscription` (back to the topic)"
    targets: ClassVar[frozenset[Role]] = frozenset({Role.GROUP_LEADER, Role.RANDOM_MEMBER, Role.MEMBER})
    target_error: ClassVar[str | None] = ("change_subscription applies to one member: target member, group_leader, "
                                         "random_member")
    traits: ClassVar[frozenset[FaultTrait]] = frozenset({FaultTrait.CHANGES_SUBSCRIPTION})

    #: the member's new subscription — ``topic`` (the workload topic) and/or ``extra`` (a second topic of the run,
    #: created on first use, never produced to)
    subscription: tuple[Literal["topic", "extra"], ...]

    @classmethod
    def explore_fields(cls, rng: random.Random, experiment: Experiment, target: Role,
                       trigger: Trigger) -> dict[str, Any]:
        # widen the subscription, or leave the workload topic for the other one
        return {"subscription": list(rng.choice([("topic", "extra"), ("extra",)]))}

    @model_validator(mode="after")
    def _distinct_and_new(self) -> ChangeSubscription:
        if not self.subscription or len(set(self.subscription)) != len(self.subscription):
            raise ValueError("change_subscription needs subscription: a list of distinct topic, extra "
                             "(e.g. [topic, extra] to widen, [extra] to leave the workload topic)")
        if set(self.subscription) == {"topic"}:
            raise ValueError("subscription [topic] is the member's subscription already: add extra")
        return self

    def check_in(self, experiment: Experiment, i: int) -> None:
        if any(c.client is Client.JAVA for c in experiment.workload.consumers):
            raise ValueError(f"faults.{i}: change_subscription needs Python clients (VerifiableConsumer "
                             "subscribes once); use client confluent-kafka or kafka-python")
        # the reference worker resubscribes on SIGUSR1; an app or command member owns its subscribe call, and
        # SIGUSR1's default action ends its process (found exploring the python-service example: an app member
        # died silently at the change)
        named = self.target is Role.MEMBER
        members = experiment.workload.consumers
        picks = [members[int(str(self.node).split("-")[1])]] if named else list(members)
        if any(m.app is not None or m.command is not None for m in picks):
            which = self.node if named else f"{self.target.value} (it may pick one)"
            raise ValueError(f"faults.{i}: change_subscription on {which}: an app or command member owns its "
                             "subscription; target a reference member (client: confluent-kafka, kafka-python) by "
                             "name")


class SwitchProtocol(_MembershipFault):
    type: Literal["switch_protocol"]
    summary: ClassVar[str] = ("a member leaves and rejoins under the other group protocol, classic <-> consumer "
                              "(back at the heal; KIP-848)")
    targets: ClassVar[frozenset[Role]] = frozenset({Role.RANDOM_MEMBER, Role.MEMBER})
    target_error: ClassVar[str | None] = "switch_protocol applies to one member: target member or random_member"

    def check_in(self, experiment: Experiment, i: int) -> None:
        if not experiment.cluster.kip848:
            raise ValueError(f"faults.{i}: switch_protocol moves a member between the classic and the KIP-848 "
                             "consumer protocol, which needs a KRaft cluster of Kafka 4.x: set cluster.kafka_version "
                             "(e.g. 4.4.0)")
        if self.target is Role.MEMBER:
            member = experiment.workload.consumers[int(str(self.node).split("-")[1])]
            if member.client is Client.KAFKA_PYTHON:
                raise ValueError(f"faults.{i}: {self.node} uses kafka-python, which has no KIP-848 consumer "
                                 "protocol: use client confluent-kafka or java")
        elif any(c.client is Client.KAFKA_PYTHON for c in experiment.workload.consumers):
            raise ValueError(f"faults.{i}: switch_protocol on {self.target.value} may pick a kafka-python member, "
                             "which has no KIP-848 consumer protocol: target a member by name, or use "
                             "confluent-kafka / java")


class ClientUpgrade(_MembershipFault):
    """A rolling client upgrade, one member at a time (issue 34).

    The member leaves cleanly (as an application being redeployed does: close, so LeaveGroup or a KIP-848 leave
    heartbeat, except for a static member, which keeps its instance id's place for a session, KIP-345) and comes
    back as the same member -- the same name (client id), lane, settings and ``instance_id`` -- on
    ``client_version``; at the heal it is moved back to the release it had, the same way. Several of them staggered
    over the chaos phase leave the group mixed meanwhile.
    """

    type: Literal["client_upgrade"]
    summary: ClassVar[str] = ("a member leaves cleanly and comes back as the same member (same instance id) on "
                              "another client_version (back at the heal): a rolling client upgrade")
    targets: ClassVar[frozenset[Role]] = frozenset({Role.RANDOM_MEMBER, Role.MEMBER})
    target_error: ClassVar[str | None] = "client_upgrade applies to one member: target member or random_member"
    explore_refusal: ClassVar[str | None] = ("the release a member moves to is the team's choice (and a download): "
                                             "write it in an experiment (docs/client-versions.md)")

    #: the release the member comes back on (X.Y.Z of its client library); null = the default library (the
    #: project's pinned Python client, or the broker's own release for a Java member)
    client_version: str | None

    def upgraded(self, member: ConsumerSpec) -> ConsumerSpec:
        """``member`` on :attr:`client_version`, validated like a member loaded from a file."""
        return ConsumerSpec.model_validate({**member.model_dump(), "client_version": self.client_version})

    def candidates(self, experiment: Experiment) -> tuple[ConsumerSpec, ...]:
        """The members the fault may move: the one named (``target: member``), else any of them."""
        members = experiment.workload.consumers
        if self.target is Role.MEMBER:
            return (members[int(str(self.node).split("-")[1])],)
        return members

    def check_in(self, experiment: Experiment, i: int) -> None:
        members = self.candidates(experiment)
        clients = {m.client for m in members}
        if len(clients) > 1:
            raise ValueError(f"faults.{i}: client_upgrade on {self.target.value} may pick a member of any of "
                             f"{sorted(c.value for c in clients)}, and one release is of one client: target a "
                             "member by name")
        for m in members:
            if m.command is not None:
                raise ValueError(f"faults.{i}: a command member brings its own client, which kafka-chaos cannot "
                                 "upgrade: target another member")
            if m.client_version == self.client_version:
                raise ValueError(f"faults.{i}: the member runs {m.client.value} "
                                 f"{self.client_version or 'default'} already: name another client_version")
            try:
                self.upgraded(m)
            except ValueError as exc:
                reason = str(exc).split("Value error, ", 1)[-1].split(" [type=", 1)[0]
                raise ValueError(f"faults.{i}: {reason}") from None


class CrashReplace(_MembershipFault):
    type: Literal["crash_replace"]
    summary: ClassVar[str] = "a member is SIGKILLed and a fresh process joins in its place (none to undo)"
    targets: ClassVar[frozenset[Role]] = MEMBER_ROLES
    target_error: ClassVar[str | None] = ("crash_replace applies to members: use target member, group_leader, "
                                         "random_member, all_members")
    replaces_target: ClassVar[bool] = True
