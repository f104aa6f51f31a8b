"""``crash_replace``: a member is SIGKILLed and a fresh process joins in its place at once.

Jepsen's crash-clients: the crashed client never comes back; a new one, with
a new identity, takes its place. Here the replacement is a new worker
``<member>-r<k>`` with the same consumer settings (client library, assignor,
lane, timeouts — a static member's ``group.instance.id`` too, so KIP-345
hands the instance to the newcomer), which joins with a member id of its own
while the coordinator still holds the crashed one's until its session
expires. What that exercises: a rebalance that must wait out a dead member,
the new member's first fetch position (the committed offsets), and a
partition that two incarnations claim for a while.

There is nothing to undo: the heal is empty; its evidence is that the
replacement runs and the coordinator lists it as a member of the group.
"""

from __future__ import annotations

import signal
import time

from chaos.model.faults.membership import CrashReplace
from chaos.nemesis.evidence import Active, Evidence, states_text, tree_states
from chaos.nemesis.kinds import Injection, register
from chaos.nemesis.kinds.membership import listed_as
from chaos.nemesis.nodes import Nodes


def _replacement_name(run, member: str) -> str:
    k = 1
    while f"{member}-r{k}" in run.member_specs:
        k += 1
    return f"{member}-r{k}"


def _listed_at_coordinator(run, name: str, instance_id: str | None, timeout: float) -> Evidence:
    """Wait (bounded) until the coordinator lists a member whose client id is ``name`` (and ``instance_id``):
    ConsumerGroupDescribe for a KIP-848 group, DescribeGroups for a classic one (:func:`listed_as`; DescribeGroups
    alone listed no member of a KIP-848 group, found by ``chaos explore``)."""
    deadline = time.monotonic() + timeout
    evidence = f"coordinator not asked yet about {name}"
    while True:
        try:
            listed, evidence = listed_as(run, name, instance_id)
        except Exception as exc:  # noqa: BLE001 - coordinator moving: ask again
            listed, evidence = False, f"coordinator not reachable ({type(exc).__name__})"
        if listed:
            return True, evidence
        if time.monotonic() >= deadline:
            return False, f"{evidence}, not {name}"
        time.sleep(0.2)


def _crash_and_replace(inj: Injection, member: str) -> Active:
    run = inj.run
    nodes = Nodes(inj.cluster, run)
    tree = nodes.tree(member)
    run.kill_member(member, signal.SIGKILL)  # records member_stop (SIGKILL) on its behalf
    inj.effect_ns = time.monotonic_ns()
    new = _replacement_name(run, member)
    spec = run.consumer_spec(member)
    run.member_specs[new] = spec
    run.start_member(new)
    # a join takes one rebalance, which waits for the crashed member's session to expire
    bound = spec.session_timeout_ms / 1000 + spec.max_poll_interval_ms / 1000 + 15

    def crashed_and_replaced() -> Evidence:
        states = tree_states(tree, "gone")
        ended = all(st in ("gone", "zombie") for st in states.values())
        return ended and nodes.alive(new), (f"{member} after SIGKILL: {states_text(states)}; "
                                            f"replacement {new} running={nodes.alive(new)}")

    def joined() -> Evidence:
        if not nodes.alive(new):
            return False, f"replacement {new} is not running"
        return _listed_at_coordinator(run, new, spec.instance_id, bound)

    return Active([member, new], lambda: None, crashed_and_replaced, joined)


register(CrashReplace, lambda inj: [_crash_and_replace(inj, m) for m in inj.nodes])
