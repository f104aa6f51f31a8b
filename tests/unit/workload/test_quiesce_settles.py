"""``WorkloadRun._wait_settled``: once every record is committed, quiesce waits (bounded) for a group sample taken
after that moment which is Stable and lists as many members as member processes are alive; only then do the
members stop (chaos.workload.run.WorkloadRun.quiesce). The observer and the processes are stand-ins that answer
from a script; the waits are real but short."""

from __future__ import annotations

import time

from chaos.history.event import GroupMember, GroupState
from chaos.workload.observer import GroupSample
from chaos.workload.run import WorkloadRun


class _Proc:
    def __init__(self, alive: bool = True) -> None:
        self._alive = alive

    def alive(self) -> bool:
        return self._alive


class _Observer:
    """Answers the scripted samples one per read of ``latest``, each stamped as taken now."""

    def __init__(self, script: list[GroupSample]) -> None:
        self.script = list(script)
        self.last_sample_ns = 0
        self._latest: GroupSample | None = None

    @property
    def latest(self) -> GroupSample | None:
        if self.script:
            self._latest = self.script.pop(0)
            self.last_sample_ns = time.monotonic_ns()
        return self._latest


def _member(i: int) -> GroupMember:
    return GroupMember(member_id=f"m{i}", instance_id=None, client_id=f"c{i}", host="", assignment=())


def _sample(state: GroupState, members: int) -> GroupSample:
    return GroupSample(state, 1, "range", 3, tuple(_member(i) for i in range(members)))


def _run(script: list[GroupSample], procs: dict[str, _Proc]) -> WorkloadRun:
    run = WorkloadRun.__new__(WorkloadRun)  # only the observer and the member processes are read
    run.observer = _Observer(script)  # type: ignore[assignment]
    run.members = procs  # type: ignore[assignment]
    return run


def test_a_rebalancing_group_is_waited_for_until_stable_with_every_live_member():
    script = [_sample(GroupState.PREPARING_REBALANCE, 2), _sample(GroupState.COMPLETING_REBALANCE, 2),
              _sample(GroupState.STABLE, 1), _sample(GroupState.STABLE, 2)]
    run = _run(script, {"a": _Proc(), "b": _Proc()})
    assert run._wait_settled(time.monotonic() + 5)
    assert run.observer.script == []  # type: ignore[union-attr]  # every unsettled sample was read past


def test_a_group_that_never_settles_ends_the_wait_at_the_bound():
    run = _run([_sample(GroupState.PREPARING_REBALANCE, 2)], {"a": _Proc(), "b": _Proc()})
    t0 = time.monotonic()
    assert not run._wait_settled(t0 + 0.5)
    assert time.monotonic() - t0 >= 0.5


def test_a_stable_sample_lists_only_live_members_to_settle():
    # a killed member's id lingering in a Stable group is not settled; a dead process is not counted
    lingering = _run([_sample(GroupState.STABLE, 2)], {"a": _Proc(), "b": _Proc(alive=False)})
    assert not lingering._wait_settled(time.monotonic() + 0.3)
    settled = _run([_sample(GroupState.STABLE, 1)], {"a": _Proc(), "b": _Proc(alive=False)})
    assert settled._wait_settled(time.monotonic() + 5)
