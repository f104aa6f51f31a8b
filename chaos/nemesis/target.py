"""Who a fault hits: target roles, and their resolution as a pure function of what the cluster says now.

A fault names a *role* ("the group coordinator", "the leader of partition 2",
"a random live member"); the role is resolved at the moment of injection
(:func:`resolve`), against a :class:`ClusterView` — the interpreter's live
view asks the cluster and the live stream, a test's view is a record. The
seeded choice of a random member or broker is made here, from the fault's own
random stream, so the same seed picks the same one.
"""

from __future__ import annotations

import random
from typing import Protocol

from chaos.model.target import (
    Role,
)


class ClusterView(Protocol):
    """What :func:`resolve` may ask; each answer is the cluster's *now* (None: there is none)."""

    topic: str

    def coordinator(self) -> str | None: ...
    def controller(self) -> str | None: ...
    def leader(self, partition: int) -> str | None: ...
    def group_leader(self) -> str | None: ...
    def live_members(self) -> list[str]: ...
    def all_members(self) -> list[str]: ...
    def running_brokers(self) -> list[str]: ...
    def all_brokers(self) -> list[str]: ...
    def zookeepers(self) -> list[str]: ...
    def controllers(self) -> list[str]: ...


def resolve(role: Role, view: ClusterView, rng: random.Random, *, node: str | None = None,
            partition: int = 0) -> list[str]:
    """The nodes or members ``role`` means now; empty when it means nobody (no coordinator, no live member)."""
    if role is Role.COORDINATOR:
        picked = view.coordinator()
    elif role in (Role.CONTROLLER, Role.ACTIVE_CONTROLLER):
        picked = view.controller()  # under KRaft: the quorum leader
    elif role is Role.LEADER:
        picked = view.leader(partition)
    elif role is Role.GROUP_LEADER:
        picked = view.group_leader()
    elif role is Role.RANDOM_MEMBER:
        live = sorted(view.live_members())
        picked = rng.choice(live) if live else None
    elif role is Role.RANDOM_BROKER:
        live = sorted(view.running_brokers())
        picked = rng.choice(live) if live else None
    elif role in (Role.MEMBER, Role.NODE):
        picked = node
    elif role is Role.ALL_BROKERS:
        return list(view.all_brokers())
    elif role is Role.ALL_MEMBERS:
        return sorted(view.all_members())
    elif role is Role.ZOOKEEPER_QUORUM:
        zks = list(view.zookeepers())
        return sorted(rng.sample(zks, len(zks) // 2 + 1))
    elif role is Role.CONTROLLER_QUORUM:
        voters = list(view.controllers())
        return sorted(rng.sample(voters, len(voters) // 2 + 1))
    elif role is Role.TOPIC:
        return [view.topic]
    else:  # pragma: no cover - the enum is exhaustive
        raise ValueError(role)
    return [picked] if picked else []
