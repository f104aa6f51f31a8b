"""Membership faults: a member changes its subscription (``change_subscription``) and back.

The subscription travels in the member's JoinGroup metadata, so the
coordinator holds the new one only after the member rejoined; the evidence is
the coordinator's own DescribeGroups answer.
"""

from __future__ import annotations

import time

from chaos.errors import InfrastructureError
from chaos.model.target import Role
from chaos.nemesis.evidence import Active, Evidence
from chaos.nemesis.kinds import FaultKind, Injection, register
from chaos.nemesis.nodes import Nodes


def subscription_at_coordinator(run, member: str, topics: list[str], timeout: float) -> Evidence:
    """Wait (bounded) until the coordinator's DescribeGroups lists ``member`` subscribed to ``topics``
    (the member is recognised by its client id, the worker name)."""
    deadline = time.monotonic() + timeout
    seen: list[list[str]] = []
    while True:
        try:
            info = run.admin.describe_group(run.group)
            seen = [sorted(getattr(getattr(m, "member_metadata", None), "subscription", None) or [])
                    for m in info.members if m.client_id == member]
        except Exception:  # noqa: BLE001 - coordinator moving: ask again
            seen = []
        if sorted(topics) in seen:
            return True, f"coordinator lists {member} subscribed to {sorted(topics)}"
        if time.monotonic() >= deadline:
            return False, f"coordinator lists {member} subscribed to {seen or 'nothing'}, not {sorted(topics)}"
        time.sleep(0.2)


def change_subscription(inj: Injection) -> list[Active]:
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


def _check(spec) -> None:
    if not spec.subscription or len(set(spec.subscription)) != len(spec.subscription):
        raise ValueError("change_subscription needs subscription: a list of distinct topic, extra "
                         "(e.g. [topic, extra] to widen, [extra] to leave the workload topic)")
    if set(spec.subscription) == {"topic"}:
        raise ValueError("subscription [topic] is the member's subscription already: add extra")


def _check_in(spec, experiment, i: int) -> None:
    if any(c.client.value == "java" for c in experiment.workload.consumers):
        raise ValueError(f"faults.{i}: change_subscription needs Python clients (VerifiableConsumer "
                         "subscribes once); use client confluent-kafka or kafka-python")


register(FaultKind(
    "change_subscription", "membership", "a member subscribes to `subscription` (back to the topic)",
    change_subscription, targets=frozenset({Role.GROUP_LEADER, Role.RANDOM_MEMBER, Role.MEMBER}),
    fields=frozenset({"subscription"}), check=_check, check_in=_check_in,
    target_error="change_subscription applies to one member: target member, group_leader, random_member"))
