"""Membership faults: a member changes its subscription (``change_subscription``) or its group protocol
(``switch_protocol``), and back.

The subscription travels in the member's JoinGroup metadata (KIP-848: its next
heartbeat), so the coordinator holds the new one only after the member
rejoined; the evidence is the coordinator's own DescribeGroups answer
(ConsumerGroupDescribe for a consumer group). A protocol switch is KIP-848's
online migration path, one member at a time: the evidence is the coordinator's
ConsumerGroupDescribe listing the member with the new member type.
"""

from __future__ import annotations

import signal
import time

from chaos.errors import InfrastructureError
from chaos.model.faults.membership import ChangeSubscription, SwitchProtocol
from chaos.nemesis.evidence import Active, Evidence
from chaos.nemesis.kinds import Injection, register
from chaos.nemesis.nodes import Nodes


def _subscriptions(run, member: str) -> list[list[str]]:
    """The subscriptions the coordinator holds for ``member`` (by client id): ConsumerGroupDescribe's
    ``SubscribedTopicNames`` for a consumer group (KIP-848), else DescribeGroups' JoinGroup metadata."""
    if run.cluster.spec.kip848:
        from chaos.cluster.wire import describe_consumer_group

        bid = run.admin.coordinator_id(run.group, wait=False)
        view = describe_consumer_group(run.broker_address(bid), run.group)
        if view.error_code == 0:
            return [list(m.subscribed_topics) for m in view.members if m.client_id == member]
    info = run.admin.describe_group(run.group)
    return [list(m.subscription) for m in info.members if m.client_id == member]


def subscription_at_coordinator(run, member: str, topics: list[str], timeout: float) -> Evidence:
    """Wait (bounded) until the coordinator lists ``member`` subscribed to ``topics`` (the member is recognised by
    its client id, the worker name; :func:`_subscriptions`)."""
    deadline = time.monotonic() + timeout
    seen: list[list[str]] = []
    while True:
        try:
            seen = _subscriptions(run, member)
        except Exception:  # noqa: BLE001 - coordinator moving: ask again
            seen = []
        if sorted(topics) in seen:
            return True, f"coordinator lists {member} subscribed to {sorted(topics)}"
        if time.monotonic() >= deadline:
            return False, f"coordinator lists {member} subscribed to {seen or 'nothing'}, not {sorted(topics)}"
        time.sleep(0.2)


def change_subscription(inj: Injection[ChangeSubscription]) -> list[Active]:
    """Member subscribes to ``subscription`` (topic/extra) instead of the workload topic; heal restores it."""
    run, member = inj.run, inj.nodes[0]
    n = Nodes(inj.cluster, run)
    if not n.alive(member):
        raise InfrastructureError(f"{member} is not running: its subscription cannot change")
    names = {"topic": run.topic, "extra": run.extra_topic}
    topics = [names[t] for t in inj.spec.subscription]
    run.change_subscription(member, topics)
    inj.effect_ns = time.monotonic_ns()
    # a rejoin takes one rebalance: bounded by the member's session timeout plus a margin
    bound = run.member_specs[member].session_timeout_ms / 1000 + 15

    def heal() -> None:
        if n.alive(member):
            run.change_subscription(member, [run.topic])

    def healed() -> Evidence:
        if not n.alive(member):
            return True, f"{member} not running: it restarts with the workload topic only"
        return subscription_at_coordinator(run, member, [run.topic], bound)

    return [Active([member], heal, lambda: subscription_at_coordinator(run, member, topics, bound), healed)]


register(ChangeSubscription, change_subscription)


# --------------------------------------------------------------------------- switch_protocol (KIP-848 migration)

#: ConsumerGroupDescribe v1 member types (KIP-1099, KAFKA-17750)
_CLASSIC_MEMBER, _CONSUMER_MEMBER = 0, 1
#: ConsumerGroupDescribe's answer for a group that is not a consumer group (a classic group, or none)
_GROUP_ID_NOT_FOUND = 69


def member_protocol_at_coordinator(run, member: str, protocol, timeout: float) -> Evidence:
    """Wait (bounded) until the coordinator holds ``member`` (by client id) under ``protocol``.

    A consumer group (KIP-848) lists each member with its type: 1 joined with ConsumerGroupHeartbeat, 0 a classic
    member whose JoinGroup/SyncGroup the coordinator translates (KIP-848 "Online Migration"). A group converted
    back to classic answers ConsumerGroupDescribe with GROUP_ID_NOT_FOUND; then DescribeGroups must list the
    member.
    """
    from chaos.cluster.wire import describe_consumer_group
    from chaos.model.workload import GroupProtocol

    want = _CONSUMER_MEMBER if protocol is GroupProtocol.CONSUMER else _CLASSIC_MEMBER
    deadline = time.monotonic() + timeout
    seen = "nothing"
    while True:
        try:
            bid = run.admin.coordinator_id(run.group, wait=False)
            view = describe_consumer_group(run.broker_address(bid), run.group)
            if view.error_code == _GROUP_ID_NOT_FOUND:
                info = run.admin.describe_group(run.group, bid, wait=False)
                listed = any(m.client_id == member for m in info.members)
                seen = f"a classic group ({info.state}) {'listing' if listed else 'without'} {member}"
                if listed and want == _CLASSIC_MEMBER:
                    return True, f"coordinator broker {bid}: {seen}"
            elif view.error_code:
                seen = f"ConsumerGroupDescribe error {view.error_code}"
            else:
                types = [m.member_type for m in view.members if m.client_id == member]
                seen = (f"a consumer group at epoch {view.group_epoch} listing {member} as member type "
                        f"{types or 'absent'} (0 classic, 1 consumer)")
                if want in types:
                    return True, f"coordinator broker {bid}: {seen}"
        except Exception as e:  # noqa: BLE001 - coordinator moving or loading: ask again
            seen = f"no answer ({type(e).__name__})"
        if time.monotonic() >= deadline:
            return False, f"{member} not held under {protocol.value} after {timeout:g} s: last seen {seen}"
        time.sleep(0.2)


def switched(spec, protocol):
    """``spec`` (a ConsumerSpec) under the other group protocol, validated like a spec loaded from a file.

    Consumer-protocol members take no client-side assignor (the coordinator assigns, KIP-848): the switched spec
    keeps the default ``range`` there, and gets its original assignor back when it switches back.
    """
    from chaos.model.workload import Assignor, ConsumerSpec, GroupProtocol

    data = spec.model_dump()
    data["group_protocol"] = protocol
    if protocol is GroupProtocol.CONSUMER:
        data["assignor"] = Assignor.RANGE
    else:
        data["remote_assignor"] = None
    return ConsumerSpec.model_validate(data)


def switch_protocol(inj: Injection[SwitchProtocol]) -> list[Active]:
    """The member leaves cleanly (SIGTERM: LeaveGroup / a heartbeat with epoch -1), starts again under the other
    group protocol and rejoins the same group; the heal switches it back the same way.

    This is KIP-848's online upgrade path, taken one member at a time: the first consumer-protocol member converts
    a classic group into a consumer group, the last one leaving converts it back
    (``group.consumer.migration.policy=bidirectional``, set by the framework on Kafka 4.x).
    """
    from chaos.model.workload import GroupProtocol

    run, member = inj.run, inj.nodes[0]
    n = Nodes(inj.cluster, run)
    if not n.alive(member):
        raise InfrastructureError(f"{member} is not running: its group protocol cannot be switched")
    original = run.member_specs[member]
    other = (GroupProtocol.CLASSIC if original.group_protocol is GroupProtocol.CONSUMER
             else GroupProtocol.CONSUMER)
    bound = original.session_timeout_ms / 1000 + 15  # one rejoin: a session plus a margin

    def restart_as(spec) -> None:
        if n.alive(member):
            run.kill_member(member, signal.SIGTERM)  # waits for the clean close (bounded)
        run.member_specs[member] = spec
        run.start_member(member)

    restart_as(switched(original, other))
    inj.effect_ns = time.monotonic_ns()

    def heal() -> None:
        restart_as(original)

    return [Active([member], heal, lambda: member_protocol_at_coordinator(run, member, other, bound),
                   lambda: member_protocol_at_coordinator(run, member, original.group_protocol, bound))]


register(SwitchProtocol, switch_protocol)
