"""A simulated consumer group that writes valid histories, and mutations that break them.

Used by the property-based tests (every simulated history must pass every
checker; every mutation must be caught by its checker) and by the benchmark
(``bench/checkers.py``) to produce histories of any size without a cluster.

The simulation follows the eager protocol as Kafka implements it: a
rebalance starts (coordinator log "Preparing to rebalance ... old generation
N"), every member commits what it processed and revokes everything, the join
completes with generation N+1, the leader's assignment is handed out, the
group stabilises ("Stabilized group ... generation N+1"); new owners resume
from the committed offsets (so uncommitted work is processed twice: allowed
duplicates). Faults: a killed dynamic member is declared failed by the
coordinator; a paused member is evicted without knowing (an explained zombie
window), resumes, processes one stale batch, has its commit rejected with
ILLEGAL_GENERATION and loses its partitions; a killed static member restarts
within its session timeout and gets its assignment back without a rebalance
(KIP-345).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from chaos.history import (
    Assigned,
    BrokerLog,
    BrokerLogEvent,
    Commit,
    CommittedOffsets,
    Consumed,
    Event,
    FaultEnd,
    FaultStart,
    FaultVerified,
    FinalRead,
    GroupMember,
    GroupState,
    GroupStateSample,
    Header,
    History,
    Lost,
    MemberStart,
    MemberStop,
    PhaseEvent,
    Revoked,
    RunPhase,
    SendOk,
    VerificationStage,
)
from chaos.model.checker_name import CheckerName
from chaos.model.workload import Assignor, Client, CommitMode, RebalanceProtocol
from chaos.outcome import Outcome

GROUP = "g"
TOPIC = "t"
SESSION_TIMEOUT_MS = 10_000
MAX_POLL_INTERVAL_MS = 30_000


@dataclass(frozen=True, slots=True)
class SimulationSpec:
    """What to simulate; every choice is drawn from ``seed``."""

    seed: int = 0
    events: int = 500  # approximate number of events to produce
    members: int = 3
    partitions: int = 6
    assignor: Assignor = Assignor.ROUNDROBIN
    static: bool = False  # members use group.instance.id (KIP-345)
    faults: bool = True
    batch: int = 5  # max records per consumed batch


@dataclass(slots=True)
class _Member:
    source: str
    instance_id: str | None
    auto: bool
    member_id: str = ""
    holding: list[tuple[str, int]] = field(default_factory=list)
    position: dict[int, int] = field(default_factory=dict)
    generation: int = 0
    paused: bool = False


class _Sim:
    def __init__(self, spec: SimulationSpec) -> None:
        self.spec = spec
        self.rng = random.Random(spec.seed)
        self.events: list[Event] = []
        self.ns = 1_000_000_000
        self.log_end = [0] * spec.partitions
        self.committed = [0] * spec.partitions
        self.members: dict[str, _Member] = {}
        self.gen = 0
        self.next_member = 0
        self.member_ids = 0
        self.faults = 0
        self.run_id = f"sim{spec.seed}"

    # -- event plumbing -------------------------------------------------------------------
    def add(self, cls: type[Event], source: str, gap_ns: int | None = None, **fields: Any) -> None:
        self.ns += gap_ns if gap_ns is not None else self.rng.randint(100_000, 3_000_000)
        n = len(self.events) + 1
        self.events.append(cls(n, self.ns / 1e9, self.ns, source, **fields))

    def tps(self) -> list[tuple[str, int]]:
        return [(TOPIC, p) for p in range(self.spec.partitions)]

    def live(self) -> list[_Member]:
        return [m for m in self.members.values() if not m.paused]

    # -- membership -----------------------------------------------------------------------
    def start_member(self, source: str | None = None, instance_id: str | None = None) -> _Member:
        if source is None:
            source = f"consumer-{self.next_member}"
            self.next_member += 1
            if self.spec.static:
                instance_id = f"static-{source}"
        auto = self.rng.random() < 0.3
        m = _Member(source, instance_id, auto)
        self.members[source] = m
        self.add(MemberStart, source, group=GROUP, client=Client.CONFLUENT_KAFKA, client_version="2.11.0",
                 instance_id=instance_id, assignor=self.spec.assignor, protocol=RebalanceProtocol.EAGER,
                 commit_mode=CommitMode.AUTO if auto else CommitMode.SYNC, session_timeout_ms=SESSION_TIMEOUT_MS,
                 max_poll_interval_ms=MAX_POLL_INTERVAL_MS, auto_commit_interval_ms=5000 if auto else None,
                 wrong_mode=None)
        return m

    def assign(self, members: list[_Member], prev: dict[str, list[tuple[str, int]]]) -> dict[str, list[tuple[str, int]]]:
        parts = self.tps()
        order = sorted(members, key=lambda m: (m.instance_id is None, m.instance_id or "", m.member_id))
        out: dict[str, list[tuple[str, int]]] = {m.source: [] for m in order}
        if not order:
            return out
        k = len(order)
        if self.spec.assignor is Assignor.RANGE:
            base, extra = divmod(len(parts), k)
            i = 0
            for j, m in enumerate(order):
                take = base + (1 if j < extra else 0)
                out[m.source] = parts[i:i + take]
                i += take
        elif self.spec.assignor in (Assignor.STICKY, Assignor.COOPERATIVE_STICKY):
            base, extra = divmod(len(parts), k)
            ranked = sorted(order, key=lambda m: -len(prev.get(m.source, ())))
            quota = {m.source: base + (1 if j < extra else 0) for j, m in enumerate(ranked)}
            free = set(parts)
            for m in ranked:
                keep = [tp for tp in sorted(prev.get(m.source, ())) if tp in free][: quota[m.source]]
                out[m.source] = keep
                free.difference_update(keep)
            for tp in sorted(free):
                m = min(ranked, key=lambda m: (len(out[m.source]) - quota[m.source], m.source))
                out[m.source].append(tp)
        else:
            for i, tp in enumerate(parts):
                out[order[i % k].source].append(tp)
        return out

    def commit(self, m: _Member, auto: bool | None = None) -> None:
        offsets = [(TOPIC, p, m.position[p]) for _, p in m.holding if p in m.position]
        if not offsets:
            return
        self.add(Commit, m.source, group=GROUP, offsets=tuple(offsets), generation=m.generation,
                 member_id=m.member_id, outcome=Outcome.OK, error_code=None, error_name=None,
                 auto=m.auto if auto is None else auto)
        for _, p, o in offsets:
            self.committed[p] = max(self.committed[p], o)

    def rebalance(self, leaving: _Member | None = None) -> None:
        """Eager rebalance of every live member (``leaving`` commits, revokes and stops)."""
        self.add(BrokerLog, "observer", broker=1, group=GROUP, event=BrokerLogEvent.PREPARING_REBALANCE,
                 generation=self.gen, member_id=None,
                 line=f"Preparing to rebalance group {GROUP} in state PreparingRebalance with old generation {self.gen}")
        prev = {m.source: list(m.holding) for m in self.members.values()}
        for m in self.live():
            if m.holding:
                self.commit(m)
            self.add(Revoked, m.source, group=GROUP, partitions=tuple(m.holding), generation=m.generation or None,
                     member_id=m.member_id or None, incremental=False)
            m.holding = []
        if leaving is not None:
            self.add(MemberStop, leaving.source, group=GROUP, clean=True, signal=None)
            del self.members[leaving.source]
        self.gen += 1
        live = self.live()
        for m in live:
            if not m.member_id:
                self.member_ids += 1
                m.member_id = f"{m.source}-{self.member_ids:04d}"
        plan = self.assign(live, prev)
        # as GroupCoordinator logs it: "Stabilized" when the join completes, before anyone is assigned
        self.add(BrokerLog, "observer", broker=1, group=GROUP, event=BrokerLogEvent.STABILIZED, generation=self.gen,
                 member_id=None, line=f"Stabilized group {GROUP} generation {self.gen}")
        for m in live:
            m.holding = plan[m.source]
            m.generation = self.gen
            m.position = {p: self.committed[p] for _, p in m.holding}
            self.add(Assigned, m.source, group=GROUP, partitions=tuple(m.holding), generation=self.gen,
                     member_id=m.member_id, incremental=False)
        self.sample()

    def sample(self, state: GroupState = GroupState.STABLE) -> None:
        members = tuple(GroupMember(m.member_id, m.instance_id, m.source, "/127.0.0.1", tuple(m.holding))
                        for m in sorted(self.live(), key=lambda m: m.member_id))
        self.add(GroupStateSample, "observer", group=GROUP, state=state, coordinator=1,
                 protocol=self.spec.assignor.value, generation=self.gen, members=members)

    # -- steady-state actions ---------------------------------------------------------------
    def produce(self) -> None:
        p = self.rng.randrange(self.spec.partitions)
        off = self.log_end[p]
        self.log_end[p] += 1
        self.add(SendOk, "producer-0", topic=TOPIC, partition=p, offset=off, key=None,
                 value=f"{self.run_id}:p{p}:{off}")

    def consume(self, m: _Member) -> bool:
        ready = [p for _, p in m.holding if m.position.get(p, 0) < self.log_end[p]]
        if not ready:
            return False
        p = self.rng.choice(ready)
        start = m.position[p]
        end = min(self.log_end[p], start + self.rng.randint(1, self.spec.batch))
        self.add(Consumed, m.source, group=GROUP, topic=TOPIC, partition=p, offsets=tuple(range(start, end)),
                 generation=m.generation, member_id=m.member_id)
        m.position[p] = end
        return True

    def committed_sample(self) -> None:
        self.add(CommittedOffsets, "observer", group=GROUP, coordinator=1,
                 offsets=tuple((TOPIC, p, self.committed[p]) for p in range(self.spec.partitions)))

    # -- faults ---------------------------------------------------------------------------
    def verified(self, fid: str, stage: str, node: str) -> None:
        """The nemesis's evidence that a fault took effect / healed (the faults checker needs it)."""
        self.add(FaultVerified, "nemesis", fault_id=fid, stage=VerificationStage(stage), ok=True,
                 evidence=f"{node}: {stage} confirmed")

    def fault_kill(self, m: _Member) -> None:
        self.faults += 1
        fid = f"f{self.faults}"
        self.add(FaultStart, "nemesis", fault_id=fid, fault_type="kill", target_role="consumer", node=m.source,
                 params={"signal": "SIGKILL"}, trigger="time")
        self.verified(fid, "effect", m.source)
        self.add(MemberStop, m.source, group=GROUP, clean=False, signal="SIGKILL")
        if m.instance_id is not None:
            # KIP-345: restarted within session.timeout.ms, the static member gets its assignment back.
            holding, gen = m.holding, m.generation
            del self.members[m.source]
            self.add(FaultEnd, "nemesis", fault_id=fid, fault_type="kill", node=m.source)
            self.verified(fid, "healed", m.source)
            n = self.start_member(m.source, m.instance_id)
            self.member_ids += 1
            n.member_id = f"{n.source}-{self.member_ids:04d}"
            n.holding, n.generation = holding, gen
            n.position = {p: self.committed[p] for _, p in holding}
            self.add(Assigned, n.source, group=GROUP, partitions=tuple(holding), generation=gen,
                     member_id=n.member_id, incremental=False)
            return
        del self.members[m.source]
        self.add(BrokerLog, "observer", gap_ns=SESSION_TIMEOUT_MS * 1_000_000, broker=1, group=GROUP,
                 event=BrokerLogEvent.MEMBER_FAILED, generation=self.gen, member_id=m.member_id,
                 line=f"Member {m.member_id} in group {GROUP} has failed, removing it from the group")
        self.rebalance()
        self.add(FaultEnd, "nemesis", fault_id=fid, fault_type="kill", node=m.source)
        self.verified(fid, "healed", m.source)

    def fault_pause(self, m: _Member) -> None:
        """SIGSTOP: evicted at session.timeout.ms without knowing; a zombie until it resumes."""
        self.faults += 1
        fid = f"f{self.faults}"
        self.add(FaultStart, "nemesis", fault_id=fid, fault_type="pause", target_role="consumer", node=m.source,
                 params={}, trigger="time")
        self.verified(fid, "effect", m.source)
        m.paused = True
        self.add(BrokerLog, "observer", gap_ns=SESSION_TIMEOUT_MS * 1_000_000, broker=1, group=GROUP,
                 event=BrokerLogEvent.MEMBER_FAILED, generation=self.gen, member_id=m.member_id,
                 line=f"Member {m.member_id} in group {GROUP} has failed, removing it from the group")
        self.rebalance()
        for _ in range(self.rng.randint(0, 8)):
            self.step_steady()
        self.add(FaultEnd, "nemesis", fault_id=fid, fault_type="pause", node=m.source)
        self.verified(fid, "healed", m.source)
        m.paused = False
        self.consume(m)  # one stale batch from before the pause
        offsets = tuple((TOPIC, p, m.position[p]) for _, p in m.holding if p in m.position)
        if offsets:
            self.add(Commit, m.source, group=GROUP, offsets=offsets, generation=m.generation,
                     member_id=m.member_id, outcome=Outcome.FAIL, error_code=22, error_name="ILLEGAL_GENERATION",
                     auto=False)
        self.add(Lost, m.source, group=GROUP, partitions=tuple(m.holding), generation=m.generation,
                 member_id=m.member_id, incremental=False)
        m.holding, m.position, m.member_id = [], {}, ""
        self.rebalance()

    # -- driver ---------------------------------------------------------------------------
    def step_steady(self) -> None:
        r = self.rng.random()
        live = [m for m in self.live() if m.holding]
        if r < 0.42 or not live:
            self.produce()
        elif r < 0.86:
            m = self.rng.choice(live)
            if not self.consume(m):
                self.produce()
        elif r < 0.95:
            self.commit(self.rng.choice(live))
        elif r < 0.98:
            self.sample()
        else:
            self.committed_sample()

    def run(self) -> History:
        spec = self.spec
        self.add(PhaseEvent, "runner", name=RunPhase.SETUP)
        for _ in range(spec.members):
            self.start_member()
        self.rebalance()
        self.add(PhaseEvent, "runner", name=RunPhase.CHAOS)
        budget = max(spec.events - 40 - 4 * spec.partitions, 10)
        while len(self.events) < budget:
            r = self.rng.random()
            if r < 0.002 and len(self.members) < spec.members + 2:
                self.start_member()
                self.rebalance()
            elif r < 0.003 and len(self.members) > 1:
                self.rebalance(leaving=self.rng.choice(list(self.members.values())))
            elif spec.faults and r < 0.0045 and len(self.members) > 1:
                victim = self.rng.choice(list(self.members.values()))
                if victim.instance_id is not None or self.rng.random() < 0.5:
                    self.fault_kill(victim)
                else:
                    self.fault_pause(victim)
            else:
                self.step_steady()
        self.add(PhaseEvent, "runner", name=RunPhase.HEAL)
        if not self.members:
            self.start_member()
            self.rebalance()
        self.add(PhaseEvent, "runner", name=RunPhase.QUIESCE)
        for m in self.live():
            while self.consume(m):
                pass
            self.commit(m)
        self.sample()
        self.committed_sample()
        self.add(PhaseEvent, "runner", name=RunPhase.FINAL_READ)
        self.add(FinalRead, "runner", group=GROUP, topic=TOPIC, records=())
        self.add(PhaseEvent, "runner", name=RunPhase.TEARDOWN)
        header = Header(1, self.run_id, spec.seed, {"simulation": dataclasses.asdict(spec)},
                        {"kafka": "simulated"}, {"consumer": {"session.timeout.ms": SESSION_TIMEOUT_MS}})
        return History(header, tuple(self.events))


def simulate(spec: SimulationSpec) -> History:
    """A valid history of a simulated group (every checker must pass it)."""
    return _Sim(spec).run()


# ------------------------------------------------------------------------------------------ mutations


class Mutation(StrEnum):
    """One deliberate break of a valid history, named by what it does."""

    DUPLICATE_ASSIGNMENT = "duplicate-assignment"
    SECOND_OWNER = "second-owner"
    STALE_COMMIT = "stale-commit"
    DROP_CONSUMED = "drop-consumed"
    COMMIT_AHEAD = "commit-ahead"
    ROLLBACK_COMMIT = "rollback-commit"
    REUSE_GENERATION = "reuse-generation"
    MEMBER_GENERATION_BACKWARDS = "member-generation-backwards"
    NO_CONVERGENCE = "no-convergence"
    STATIC_REBALANCE = "static-rebalance"
    UNBALANCE = "unbalance"


CAUGHT_BY: dict[Mutation, CheckerName] = {
    Mutation.DUPLICATE_ASSIGNMENT: CheckerName.OWNERSHIP_GENERATION,
    Mutation.SECOND_OWNER: CheckerName.OWNERSHIP_TIME,
    Mutation.STALE_COMMIT: CheckerName.FENCING,
    Mutation.DROP_CONSUMED: CheckerName.DELIVERY,
    Mutation.COMMIT_AHEAD: CheckerName.DELIVERY,
    Mutation.ROLLBACK_COMMIT: CheckerName.COMMITTED_OFFSETS,
    Mutation.REUSE_GENERATION: CheckerName.GENERATIONS,
    Mutation.MEMBER_GENERATION_BACKWARDS: CheckerName.GENERATIONS,
    Mutation.NO_CONVERGENCE: CheckerName.CONVERGENCE,
    Mutation.STATIC_REBALANCE: CheckerName.STATIC_MEMBERSHIP,
    Mutation.UNBALANCE: CheckerName.ASSIGNOR,
}


def _renumber(history: History, events: list[Event]) -> History:
    out = [e if e.seq == i else dataclasses.replace(e, seq=i) for i, e in enumerate(events, 1)]
    return History(history.header, tuple(out))


def _at(e: Event, cls: type[Event], source: str, **fields: Any) -> Event:
    """A new event at the same instant as ``e``."""
    return cls(0, e.ts, e.mono_ns, source, **fields)


def mutate(history: History, mutation: Mutation, rng: random.Random) -> History | None:
    """``history`` with one ``mutation`` applied, or None when it does not apply to this history."""
    ev = list(history.events)
    fn: Callable[[list[Event], random.Random], list[Event] | None] = _MUTATORS[mutation]
    got = fn(ev, rng)
    return None if got is None else _renumber(history, got)


def _duplicate_assignment(ev: list[Event], rng: random.Random) -> list[Event] | None:
    firsts: dict[tuple[str, int], tuple[int, Assigned]] = {}
    for i, e in enumerate(ev):
        if type(e) is Assigned and e.generation is not None:
            firsts.setdefault((e.source, e.generation), (i, e))
    cands = [(i, j, a, b) for (sa, g), (i, a) in firsts.items() for (sb, h), (j, b) in firsts.items()
             if g == h and sa != sb and a.partitions]
    if not cands:
        return None
    i, j, a, b = rng.choice(cands)
    k = max(i, j)
    ev.insert(k + 1, _at(ev[k], Assigned, b.source, group=a.group, partitions=(rng.choice(a.partitions),),
                         generation=a.generation, member_id=b.member_id, incremental=True))
    return ev


def _faulted(ev: list[Event]) -> set[str]:
    return {e.node for e in ev if type(e) is FaultStart and e.node}


def _second_owner(ev: list[Event], rng: random.Random) -> list[Event] | None:
    faulted = _faulted(ev)
    alive: set[str] = set()
    cands: list[tuple[int, list[str], Consumed]] = []
    for i, e in enumerate(ev):
        if type(e) is MemberStart:
            alive.add(e.source)
        elif type(e) is MemberStop:
            alive.discard(e.source)
        elif type(e) is Consumed and e.source not in faulted:
            others = sorted(alive - {e.source} - faulted)
            if others:
                cands.append((i, others, e))
    if not cands:
        return None
    i, others, c = rng.choice(cands)
    ev.insert(i + 1, _at(c, Assigned, rng.choice(others), group=c.group, partitions=((c.topic, c.partition),),
                         generation=None, member_id=None, incremental=True))
    return ev


def _stale_commit(ev: list[Event], rng: random.Random) -> list[Event] | None:
    last_gen = max((e.generation for e in ev if type(e) is BrokerLog and e.event is BrokerLogEvent.STABILIZED
                    and e.generation is not None), default=0)
    commits = [e for e in ev if type(e) is Commit and e.outcome is Outcome.OK]
    if last_gen < 2 or not commits:
        return None
    c = commits[-1]
    late = ev[-1].mono_ns + 5_000_000_000
    ev.append(Commit(0, late / 1e9, late, c.source, group=c.group, offsets=c.offsets, generation=last_gen - 1,
                     member_id=c.member_id, outcome=Outcome.OK, error_code=None, error_name=None, auto=False))
    return ev


def _drop_consumed(ev: list[Event], rng: random.Random) -> list[Event] | None:
    count: dict[tuple[str, int, int], int] = {}
    for e in ev:
        if type(e) is Consumed:
            for o in e.offsets:
                k = (e.topic, e.partition, o)
                count[k] = count.get(k, 0) + 1
        elif type(e) is FinalRead:
            for p, o in e.records:
                count[(e.topic, p, o)] = 2
    cands = [i for i, e in enumerate(ev) if type(e) is Consumed
             and any(count[(e.topic, e.partition, o)] == 1 for o in e.offsets)]
    if not cands:
        return None
    del ev[rng.choice(cands)]
    return ev


def _commit_ahead(ev: list[Event], rng: random.Random) -> list[Event] | None:
    """A manual commit beyond what the group processed (commit_before_process)."""
    produced: dict[tuple[str, int], int] = {}
    for e in ev:
        if type(e) is SendOk:
            k = (e.topic, e.partition)
            produced[k] = max(produced.get(k, -1), e.offset)
    cands = [(i, e) for i, e in enumerate(ev) if type(e) is Consumed and produced.get((e.topic, e.partition), -1)
             > e.offsets[-1] + 1]
    if not cands:
        return None
    i, c = rng.choice(cands)
    n = produced[(c.topic, c.partition)] + 1
    ev.insert(i + 1, _at(c, Commit, c.source, group=c.group, offsets=((c.topic, c.partition, n),),
                         generation=c.generation, member_id=c.member_id, outcome=Outcome.OK, error_code=None,
                         error_name=None, auto=False))
    return ev


def _rollback_commit(ev: list[Event], rng: random.Random) -> list[Event] | None:
    cands = [(i, e) for i, e in enumerate(ev) if type(e) is Commit and e.outcome is Outcome.OK
             and any(o > 0 for _, _, o in e.offsets)]
    if not cands:
        return None
    i, c = rng.choice(cands)
    t, p, o = next(x for x in c.offsets if x[2] > 0)
    ev.insert(i + 1, _at(c, Commit, c.source, group=c.group, offsets=((t, p, o - 1),), generation=c.generation,
                         member_id=c.member_id, outcome=Outcome.OK, error_code=None, error_name=None, auto=c.auto))
    return ev


def _reuse_generation(ev: list[Event], rng: random.Random) -> list[Event] | None:
    stab = [i for i, e in enumerate(ev) if type(e) is BrokerLog and e.event is BrokerLogEvent.STABILIZED]
    if len(stab) < 2:
        return None
    k = rng.randrange(len(stab) - 1)
    old, later = ev[stab[k]], stab[k + 1]
    ev.insert(later + 1, dataclasses.replace(old, seq=0, ts=ev[later].ts, mono_ns=ev[later].mono_ns))
    return ev


def _member_generation_backwards(ev: list[Event], rng: random.Random) -> list[Event] | None:
    cands = [(i, e, e.generation) for i, e in enumerate(ev)
             if type(e) is Consumed and e.generation and e.generation >= 2]
    if not cands:
        return None
    i, c, gen = rng.choice(cands)
    ev.insert(i + 1, dataclasses.replace(c, generation=gen - 1))
    return ev


def _no_convergence(ev: list[Event], rng: random.Random) -> list[Event] | None:
    ends = [i for i, e in enumerate(ev) if type(e) is FaultEnd]
    base = ends[-1] if ends else 0
    changed = False
    for i in range(base, len(ev)):
        e = ev[i]
        if type(e) is GroupStateSample:
            ev[i] = dataclasses.replace(e, state=GroupState.PREPARING_REBALANCE)
            changed = True
    if not changed:
        return None
    # Make the history outlast the convergence bound, with the group still rebalancing.
    tail = [e for e in ev if type(e) is PhaseEvent and e.name is RunPhase.TEARDOWN]
    ev = [e for e in ev if not (type(e) is PhaseEvent and e.name is RunPhase.TEARDOWN)]
    late = ev[-1].mono_ns + 3600 * 1_000_000_000
    last_sample = next(e for e in reversed(ev) if type(e) is GroupStateSample)
    ev.append(dataclasses.replace(last_sample, ts=late / 1e9, mono_ns=late))
    for t in tail:
        ev.append(dataclasses.replace(t, ts=late / 1e9, mono_ns=late + 1))
    return ev


def _static_rebalance(ev: list[Event], rng: random.Random) -> list[Event] | None:
    instance: dict[str, str | None] = {}
    stopped: set[str] = set()
    cands: list[tuple[int, MemberStart]] = []
    for i, e in enumerate(ev):
        if type(e) is MemberStart:
            if e.instance_id is not None and e.source in stopped:
                cands.append((i, e))
            instance[e.source] = e.instance_id
        elif type(e) is MemberStop and instance.get(e.source):
            stopped.add(e.source)
    if not cands:
        return None
    i, s = rng.choice(cands)
    gen = max((e.generation for e in ev[:i] if type(e) is BrokerLog and e.generation is not None), default=0)
    ev.insert(i + 1, _at(s, BrokerLog, "observer", broker=1, group=s.group, event=BrokerLogEvent.PREPARING_REBALANCE,
                         generation=gen, member_id=None, line="Preparing to rebalance group (injected)"))
    return ev


def _unbalance(ev: list[Event], rng: random.Random) -> list[Event] | None:
    seen: set[int | None] = set()
    cands: list[tuple[int, GroupStateSample]] = []
    for i, e in enumerate(ev):
        if type(e) is GroupStateSample and e.state is GroupState.STABLE and e.generation not in seen:
            seen.add(e.generation)
            if len(e.members) >= 2 and sum(len(m.assignment) for m in e.members) >= 3 \
                    and all(m.assignment for m in e.members[:2]):
                cands.append((i, e))
    if not cands:
        return None
    i, s = rng.choice(cands)
    a, b, *rest = s.members
    moved = (dataclasses.replace(a, assignment=a.assignment + b.assignment), dataclasses.replace(b, assignment=()))
    ev[i] = dataclasses.replace(s, members=moved + tuple(rest))
    return ev


_MUTATORS: dict[Mutation, Callable[[list[Event], random.Random], list[Event] | None]] = {
    Mutation.DUPLICATE_ASSIGNMENT: _duplicate_assignment,
    Mutation.SECOND_OWNER: _second_owner,
    Mutation.STALE_COMMIT: _stale_commit,
    Mutation.DROP_CONSUMED: _drop_consumed,
    Mutation.COMMIT_AHEAD: _commit_ahead,
    Mutation.ROLLBACK_COMMIT: _rollback_commit,
    Mutation.REUSE_GENERATION: _reuse_generation,
    Mutation.MEMBER_GENERATION_BACKWARDS: _member_generation_backwards,
    Mutation.NO_CONVERGENCE: _no_convergence,
    Mutation.STATIC_REBALANCE: _static_rebalance,
    Mutation.UNBALANCE: _unbalance,
}
