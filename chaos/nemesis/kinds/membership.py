"""Membership faults: a member changes its subscription (``change_subscription``), its group protocol
(``switch_protocol``) or its client library release (``client_upgrade``), and back.

The subscription travels in the member's JoinGroup metadata (KIP-848: its next
heartbeat), so the coordinator holds the new one only after the member
rejoined; the evidence is the coordinator's own DescribeGroups answer
(ConsumerGroupDescribe for a consumer group). A protocol switch is KIP-848's
online migration path, one member at a time: the evidence is the coordinator's
ConsumerGroupDescribe listing the member with the new member type. A client upgrade's evidence is the member's
own start record naming the new release, and the coordinator listing it again under its client id (and its
instance id, for a static member).
"""

from __future__ import annotations

import signal
import time

from chaos.errors import InfrastructureError
from chaos.model.faults.membership import ChangeSubscription, ClientUpgrade, SwitchProtocol
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
    bound = run.consumer_spec(member).session_timeout_ms / 1000 + 15

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


def restart_as(run, n: Nodes, member: str, spec) -> None:
    """Stop ``member`` cleanly (SIGTERM: the worker closes its consumer, which leaves the group; bounded) and
    start it again, under the same name, as ``spec`` describes."""
    if n.alive(member):
        run.kill_member(member, signal.SIGTERM)
    run.member_specs[member] = spec
    run.start_member(member)


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
    original = run.consumer_spec(member)
    other = (GroupProtocol.CLASSIC if original.group_protocol is GroupProtocol.CONSUMER
             else GroupProtocol.CONSUMER)
    bound = original.session_timeout_ms / 1000 + 15  # one rejoin: a session plus a margin

    restart_as(run, n, member, switched(original, other))
    inj.effect_ns = time.monotonic_ns()

    def heal() -> None:
        restart_as(run, n, member, original)

    return [Active([member], heal, lambda: member_protocol_at_coordinator(run, member, other, bound),
                   lambda: member_protocol_at_coordinator(run, member, original.group_protocol, bound))]


register(SwitchProtocol, switch_protocol)


# --------------------------------------------------------------------------- client_upgrade (issue 34)


def _started_on(run, member: str, since_ns: int) -> str | None:
    """The ``client_version`` of ``member``'s latest ``member_start`` at or after ``since_ns`` (its events file as
    written so far; a line being written is skipped), None when it has not started since."""
    import orjson

    path = run.run_dir / "events" / f"{member}.jsonl"
    found = None
    try:
        lines = path.read_bytes().splitlines()
    except FileNotFoundError:
        return None
    for line in lines:
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if event.get("kind") == "member_start" and event.get("mono_ns", 0) >= since_ns:
            found = str(event.get("client_version"))
    return found


def listed_as(run, member: str, instance_id: str | None) -> tuple[bool, str]:
    """Does the coordinator list a member with client id ``member`` (and ``instance_id``, KIP-345)?
    ConsumerGroupDescribe for a consumer group (KIP-848), DescribeGroups for a classic one."""
    ids: list[tuple[str, str | None]] = []
    if run.cluster.spec.kip848:
        from chaos.cluster.wire import describe_consumer_group

        view = describe_consumer_group(run.broker_address(run.admin.coordinator_id(run.group, wait=False)), run.group)
        if view.error_code == 0:
            ids = [(m.client_id, m.instance_id) for m in view.members]
        elif view.error_code != _GROUP_ID_NOT_FOUND:
            return False, f"ConsumerGroupDescribe error {view.error_code}"
    if not ids:
        ids = [(m.client_id, m.instance_id) for m in run.admin.describe_group(run.group).members]
    listed = (member, instance_id) in ids
    what = f"{member}" + (f" (instance {instance_id})" if instance_id else "")
    return listed, f"coordinator lists {what}" if listed else f"coordinator lists {sorted(ids) or 'no member'}"


def on_release(run, member: str, spec, since_ns: int, timeout: float) -> Evidence:
    """Wait (bounded) until ``member`` has started since ``since_ns`` reporting ``spec``'s release (what its library
    says of itself, :func:`chaos.workload.libraries.expected_release`) and the coordinator lists it again as
    the same member (client id; instance id when static)."""
    from chaos.workload.libraries import expected_release

    want = expected_release(spec, run.cluster.spec.kafka_version)
    deadline = time.monotonic() + timeout
    while True:
        reported = _started_on(run, member, since_ns)
        started = reported is not None and reported.split(" ", 1)[0] == want
        try:
            listed, seen = listed_as(run, member, spec.instance_id)
        except Exception as e:  # noqa: BLE001 - coordinator moving or loading: ask again
            listed, seen = False, f"no answer ({type(e).__name__})"
        if started and listed:
            return True, f"{member} started reporting {spec.client.value} {reported}; {seen}"
        if time.monotonic() >= deadline:
            return False, (f"{member} not back on {spec.client.value} {want} after {timeout:g} s: it reported "
                           f"{reported or 'no start'}; {seen}")
        time.sleep(0.2)


def client_upgrade(inj: Injection[ClientUpgrade]) -> list[Active]:
    """The member leaves cleanly and starts again on ``client_version`` (:func:`restart_as`); the heal moves it back
    to its own release the same way. Its release is prepared before the run (``chaos run`` refuses one it cannot
    prepare before any cluster starts)."""
    run, member = inj.run, inj.nodes[0]
    n = Nodes(inj.cluster, run)
    if not n.alive(member):
        raise InfrastructureError(f"{member} is not running: its client cannot be upgraded")
    original = run.consumer_spec(member)
    upgraded = inj.spec.upgraded(original)
    # one rejoin: a session plus a JVM's or an interpreter's start and a margin
    bound = original.session_timeout_ms / 1000 + 20
    since = {"upgrade": time.monotonic_ns()}
    restart_as(run, n, member, upgraded)
    inj.effect_ns = time.monotonic_ns()

    def heal() -> None:
        since["heal"] = time.monotonic_ns()
        restart_as(run, n, member, original)

    return [Active([member], heal, lambda: on_release(run, member, upgraded, since["upgrade"], bound),
                   lambda: on_release(run, member, original, since.get("heal", 0), bound))]


register(ClientUpgrade, client_upgrade)
