"""The explorer's plan: a seeded, coverage-steered sequence of generated experiments (``chaos explore``).

A *workload* experiment gives the cluster, the members and the phases; its faults are dropped. From it the
plan builds run after run, each one experiment that passes the same load-time validation as a written one:

- **What is tried** is a *cell* of the coverage map, :class:`Cell`: fault kind × target role × trigger phase
  (:class:`Phase`: a time, or a live group state, a revocation, a generation or epoch) × duration class
  (:class:`DurationClass`: below, around or above the session timeout, or past ``max.poll.interval.ms``) ×
  the client of the member hit. The kinds are the registry's declarations
  (:func:`chaos.model.faults.declarations`) of the chosen families whose backend capability the cluster has
  and that do not refuse exploration (``explore_refusal``); each kind draws its own parameters
  (``FaultSpec.explore_fields``) — the plan knows roles, triggers and durations only.
- **Steering**: each run's first fault fills a cell tried least so far (fewest planned faults; among those, one
  whose fault kind and target role were tried least, then the seeded generator), and so do its one or two
  overlapping companions (one fault in two runs, two in three
  of ten, three in one of five). A cell whose draws the model refuses a few times in a row is
  *unreachable* here (a KIP-848 group has no ``CompletingRebalance``, a ZooKeeper cluster no
  ``active_controller``) and is never tried again. Every reachable cell is tried once before any is tried
  twice: coverage, not chance, decides what the next run tries (the fuzzers' lesson; Jepsen composes its
  nemeses the same way, by package and target).
- **Live triggers need a rebalance.** A fault triggered by a group state, a revocation or a generation comes
  with a *provoker*: a member's clean leave and rejoin (``bounce``, what a redeploy does) a second or three
  into the chaos phase, so the state it waits for happens. A revocation trigger and a fault on a named member
  pick another member than the bounced one (which is on its way out when the rebalance starts). A fault that
  acts on member processes or their membership (the families in :data:`_ON_MEMBER_PROCESSES`) on a role that
  may include the bounced member (all members, a random member, the group leader) waits until the bounced
  member is back: its time moves :data:`PROVOKER_CLEAR_S` past the planned bounce, or its live trigger waits
  for the bounce's heal (``after_fault``: the member started again, whose rejoin is the rebalance the trigger
  then meets). Found by exploring: a pause of all members overlapping the bounce
  stopped a process the bounce then replaced, and the pause's heal found it gone; a subscription change on a
  random member landed on the bounced one and never took effect.
  A planned fault that never fires makes the run's verdict unknown (the ``faults`` checker), so the plan does
  not leave firing to chance. The chaos phase is a generous bound (every live fault counted one after the
  other); it ends :data:`TAIL_S` after the last fault is over (``phases.settle_s``).
- **Durations** are placed relative to the timeouts that decide what a fault does to a group: the members'
  shortest ``session.timeout.ms`` (KIP-848 members: the broker's ``group.consumer.session.timeout.ms``,
  :data:`chaos.cluster.settings.KIP848_GROUP_SETTINGS`) and their ``max.poll.interval.ms`` when it is short
  enough to run past (at most :data:`MAX_FAULT_S`).

The plan depends only on the workload, the seed, the families and the capabilities — never on what a run
answered — so it is the same sequence on every machine: ``--shard K/N`` runs the plan's indices ``i`` with
``i % N == K - 1`` (:class:`Shard`), and N shards together run exactly the runs one machine would.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pydantic import ValidationError

from chaos.errors import UsageError
from chaos.model.backend import Capability
from chaos.model.experiment import Experiment
from chaos.model.faults import FaultSpec, declarations
from chaos.model.faults.base import FAMILIES
from chaos.model.shard import WHOLE, Shard
from chaos.model.target import MEMBER_ROLES, Role
from chaos.model.trigger import Trigger
from chaos.model.workload import ConsumerSpec, GroupProtocol

#: a fault lasts at most this long (a longer one mostly waits: the group has long since reacted)
MAX_FAULT_S = 20.0
#: the chaos phase of a generated run is at least this long, and at most :data:`MAX_CHAOS_S`
MIN_CHAOS_S, MAX_CHAOS_S = 8.0, 40.0
#: the chaos phase ends this long after the last fault is over (``phases.settle_s``: the group reacts to the heal)
TAIL_S = 3.0
#: when a live-triggered fault is expected to fire at the latest (s into the chaos phase): after the provoker's
#: rebalance, or :data:`LIVE_SLACK_S` after the last timed fault healed (the group rebalances once it is back).
#: Generous: ``chaos_s`` is only the bound — the phase ends :data:`TAIL_S` after the last fault is over
LIVE_START_S, LIVE_SLACK_S = 5.0, 5.0
#: seconds after the provoker's planned bounce (its time and duration) before a fault that may hit the bounced
#: member begins: the bounce's clean stop comes first and takes its own time (2.8 s for a bounce planned at 1.6 s
#: in an explored 4.4.0 run, whose pause one second after the plan's end found the member's process gone)
PROVOKER_CLEAR_S = 4.0
#: the provoker's fault id: it is listed first (``after_fault`` of a fault that waits for its heal)
PROVOKER_ID = "f0"
#: roles that may resolve to any member at run time: the provoker's (a named member is chosen to avoid it), the
#: one a revocation trigger waits for
_ANY_MEMBER = frozenset({Role.ALL_MEMBERS, Role.RANDOM_MEMBER, Role.GROUP_LEADER})
#: families whose faults on members act on their processes or their membership (a rolling restart of all
#: members is topology's); link and rpc faults act on the member's proxy and client id, which a bounce keeps
_ON_MEMBER_PROCESSES = frozenset({"process", "membership", "topology"})
#: draws of a cell's free choices (member, parameters, times) before the cell is called unreachable
DRAWS_PER_CELL = 4
#: how many faults a run has, with their weights: (1, 2, 3) faults in 50 %, 30 % and 20 % of the runs
FAULT_COUNTS, FAULT_WEIGHTS = (1, 2, 3), (5, 3, 2)
#: the session timeout of a KIP-848 member: the broker's ``group.consumer.session.timeout.ms`` as the cluster
#: sets it (chaos.cluster.settings.KIP848_GROUP_SETTINGS); a member's own ``session_timeout_ms`` is not used
KIP848_SESSION_S = 6.0
#: the explored name of a workload's runs: ``<workload>-explore``
NAME_SUFFIX = "-explore"


class Phase(StrEnum):
    """When a fault fires, as the coverage map counts it."""

    TIME = "time"                # at a second of the chaos phase
    PREPARING = "preparing"      # a rebalance starts (classic PreparingRebalance, KIP-848 epoch bump)
    COMPLETING = "completing"    # the join phase ended, SyncGroup pending (classic only)
    STABLE = "stable"            # the group is stable again after a rebalance
    REVOKED = "revoked"          # a member's partitions are revoked
    GENERATION = "generation"    # the group reaches a generation (classic) or epoch (KIP-848)


class DurationClass(StrEnum):
    """How long a fault lasts, against the timeouts that decide what it does to the group."""

    SHORT = "short"    # 0.2-0.5 x the session timeout: the member should stay in the group
    NEAR = "near"      # 0.85-1.15 x: the coordinator's decision is a race
    LONG = "long"      # 1.5-2.2 x: the member is removed
    POLL = "poll"      # 1.1-1.4 x max.poll.interval.ms: the member leaves on its own (when that fits)


_FACTORS = {DurationClass.SHORT: (0.2, 0.5), DurationClass.NEAR: (0.85, 1.15), DurationClass.LONG: (1.5, 2.2),
            DurationClass.POLL: (1.1, 1.4)}


@dataclass(frozen=True, order=True)
class Cell:
    """One cell of the coverage map: what a generated fault tried."""

    kind: str
    role: str
    phase: str
    duration: str
    #: the client of the member the fault names (``target: member``); ``*`` for any other target
    client: str = "*"

    def label(self) -> str:
        return f"{self.kind} {self.role} @{self.phase} {self.duration}" + ("" if self.client == "*" else
                                                                           f" [{self.client}]")


@dataclass(frozen=True)
class PlannedRun:
    """Run ``index`` of the plan: its seed, its experiment and the cells its faults try."""

    index: int
    seed: int
    experiment: Experiment
    cells: tuple[Cell, ...]


def client_label(member: ConsumerSpec) -> str:
    """What the coverage map calls a member's client: ``app``, ``command``, or the client and its release."""
    if member.command is not None:
        return "command"
    if member.app is not None:
        return "app"
    return member.client.value + (f" {member.client_version}" if member.client_version else "")


def explorable_kinds(families: Iterable[str], capabilities: Iterable[Capability]) -> list[type[FaultSpec]]:
    """The kinds of ``families`` the explorer generates on a cluster with ``capabilities``, in registry order."""
    fams, caps = set(families), set(capabilities)
    return [k for k in declarations().values()
            if k.family in fams and (k.capability is None or k.capability in caps) and k.explore_refusal is None]


def parse_families(text: str | None) -> tuple[str, ...]:
    """``--families process,link,…`` (None: every family); a UsageError naming the families there are."""
    if text is None:
        return FAMILIES
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in FAMILIES]
    if unknown or not names:
        raise UsageError(f"--families {text!r}: {'no family named' if names else 'name at least one'} "
                         f"{', '.join(unknown)}; the families are {', '.join(FAMILIES)}".replace("  ", " "))
    return names


@dataclass
class Plan:
    """The seeded sequence of generated runs over ``workload`` (module docstring). Iterate :meth:`runs`."""

    workload: Experiment
    seed: int
    families: Sequence[str] = FAMILIES
    capabilities: frozenset[Capability] = frozenset(Capability)
    #: planned faults per cell so far (every index of the plan, whichever shard runs it)
    counts: Counter[Cell] = field(default_factory=Counter)
    #: cells the model refused :data:`DRAWS_PER_CELL` times: never tried again
    unreachable: set[Cell] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.base = self.workload.model_copy(update={"faults": (), "expect_violation": (), "runs": 1,
                                                     "name": self.workload.name + NAME_SUFFIX})
        self.kinds = explorable_kinds(self.families, self.capabilities)
        if not self.kinds:
            raise UsageError(f"no fault kind of {', '.join(self.families)} runs here: choose other --families")
        if self.base.workload.share is not None:
            raise UsageError(f"{self.workload.name} is a share group (workload.share): chaos explore places faults "
                             "on consumer groups only; run share-group experiments with chaos run")
        members = self.base.workload.consumers
        if not members:
            raise UsageError(f"{self.workload.name} has no consumers: explore needs a group to put under faults")
        self.kip848 = any(c.group_protocol is GroupProtocol.CONSUMER for c in members)
        self.session_s = min(KIP848_SESSION_S if c.group_protocol is GroupProtocol.CONSUMER
                             else c.session_timeout_ms / 1000 for c in members)
        self.max_poll_s = min(c.max_poll_interval_ms / 1000 for c in members)
        self.cells = self._cells()
        self._rng = random.Random(self.seed)
        self._index = 0

    # ------------------------------------------------------------ the space
    def _cells(self) -> list[Cell]:
        durations = [d for d in DurationClass if d is not DurationClass.POLL
                     or self.max_poll_s * _FACTORS[d][1] <= MAX_FAULT_S]
        clients = sorted({client_label(c) for c in self.base.workload.consumers})
        cells = []
        for kind in self.kinds:
            for role in sorted(kind.targets, key=list(Role).index):
                for phase in Phase:
                    for d in durations:
                        for client in (clients if role is Role.MEMBER else ["*"]):
                            cells.append(Cell(kind.kind_name(), role.value, phase.value, d.value, client))
        return cells

    def reachable(self) -> list[Cell]:
        """Every cell some draw can fill (each cell tried now, up to :data:`DRAWS_PER_CELL` draws; for tests
        and the summary's denominator — the plan itself finds out lazily)."""
        rng = random.Random(self.seed ^ 0x5EED)
        return [c for c in self.cells if any(self._fault(c, rng, provoker=None) is not None
                                             for _ in range(DRAWS_PER_CELL))]

    # ------------------------------------------------------------ drawing one fault
    def _members(self, client: str) -> list[str]:
        return [f"consumer-{i}" for i, c in enumerate(self.base.workload.consumers)
                if client == "*" or client_label(c) == client]

    def _recording(self) -> list[str]:
        """The members whose assignments and revocations the history records: not a ``command`` (black-box)
        member, which records nothing of what it owns. A trigger on its revocation would never fire (found by
        exploring the black-box example: every run with one was unknown), and neither would a classic
        ``after_generation`` or ``state: Stable``, which wait for a member's ``assigned`` event of the generation
        (the same exploration: every one was unknown). A KIP-848 group's ``after_epoch`` and ``Stable`` read the
        coordinator's lines and samples."""
        return [f"consumer-{i}" for i, c in enumerate(self.base.workload.consumers) if c.command is None]

    def _duration(self, d: str, rng: random.Random) -> float:
        lo, hi = _FACTORS[DurationClass(d)]
        base = self.max_poll_s if d == DurationClass.POLL else self.session_s
        return round(min(MAX_FAULT_S, max(0.5, base * rng.uniform(lo, hi))), 1)

    def _trigger(self, phase: str, rng: random.Random, provoker: str | None) -> dict[str, Any]:
        p = Phase(phase)
        if p is Phase.TIME:
            return {"at_s": round(rng.uniform(1.0, 6.0), 1)}
        live: dict[str, Any] = {"not_before_s": 0.0}
        if p is Phase.PREPARING:
            live["state"] = "PreparingRebalance"
        elif p is Phase.COMPLETING:
            live["state"] = "CompletingRebalance"
        elif p is Phase.STABLE:
            live["state"] = "Stable"
        elif p is Phase.REVOKED:
            # another member's revocation: the provoker's own comes as it leaves, when a fault on it would meet a
            # process on its way out (found by exploring: a pause whose heal found the process gone)
            others = [m for m in self._recording() if m != provoker]
            live["on_revoked"] = rng.choice(others or self._recording())
        elif self.kip848:
            live["after_epoch"] = rng.randint(2, 5)
        else:
            live["after_generation"] = rng.randint(2, 4)
        return live

    def _fault(self, cell: Cell, rng: random.Random, provoker: str | None) -> dict[str, Any] | None:
        """A fault filling ``cell`` (its dump), or None when the model refuses this draw."""
        kind = declarations()[cell.kind]
        role = Role(cell.role)
        if not self._recording() and (cell.phase == Phase.REVOKED.value or (
                cell.phase in (Phase.GENERATION.value, Phase.STABLE.value) and not self.kip848)):
            return None  # no member records its revocations, nor its assignments (classic Stable, generations)
        trigger = self._trigger(cell.phase, rng, provoker)
        data: dict[str, Any] = {"type": cell.kind, "target": role.value, "trigger": trigger,
                                "duration_s": self._duration(cell.duration, rng)}
        if role is Role.MEMBER:
            # not the member the provoker bounces: a fault on it would meet its leave and rejoin
            members = [m for m in self._members(cell.client) if m != provoker] or self._members(cell.client)
            data["node"] = rng.choice(members)
        elif role is Role.NODE:
            data["node"] = rng.choice(list(self.base.cluster.node_names))
        elif role is Role.LEADER:
            data["partition"] = rng.randrange(self.base.workload.partitions)
        try:
            # a kind may refuse the workload itself (add_partitions: members that would not see new partitions)
            data.update(kind.explore_fields(rng, self.base, role, Trigger.model_validate(trigger)))
            fault = FaultSpec.build(**data)
            self._experiment([fault.model_dump(mode="json", exclude_defaults=True) | {"type": fault.type}], "")
        except (ValidationError, UsageError, ValueError):
            return None
        return fault.model_dump(mode="json", exclude_defaults=True) | {"type": fault.type}

    def _experiment(self, faults: list[dict[str, Any]], description: str) -> Experiment:
        """The generated experiment of ``faults``: the workload with a chaos phase that holds them."""
        timed = [f["trigger"]["at_s"] + f["duration_s"] for f in faults if "at_s" in f["trigger"]]
        # a live trigger waits for a rebalance: the provoker's, or the group's recovery from the faults before it
        # (one live fault's state may come only after another's heal: they are counted one after the other)
        end = max([LIVE_START_S, *timed, *(f["trigger"].get("not_before_s", 0.0)
                                            + (PROVOKER_CLEAR_S if "after_fault" in f["trigger"] else 0.0)
                                            for f in faults)])
        for f in faults:
            if "at_s" not in f["trigger"]:
                end += LIVE_SLACK_S + f["duration_s"]
        ends = [*timed, end]
        chaos_s = round(min(MAX_CHAOS_S, max(MIN_CHAOS_S, max(ends, default=0.0) + TAIL_S)), 1)
        for f in faults:
            if "at_s" not in f.get("trigger", {}):
                f["trigger"]["timeout_s"] = chaos_s
        data = self.base.model_dump(mode="json")
        data.update(faults=faults, description=description,
                    phases={**data["phases"], "chaos_s": chaos_s, "settle_s": TAIL_S})
        return Experiment.model_validate(data)

    # ------------------------------------------------------------ steering
    def _least_tried(self, rng: random.Random, exclude: set[Cell]) -> Cell | None:
        """A cell tried least so far; among those, one of a fault kind and target role tried least (breadth over
        what a fault is and whom it hits before when it fires and how long), then the seeded draw."""
        open_cells = [c for c in self.cells if c not in self.unreachable and c not in exclude]
        if not open_cells:
            return None
        least = min(self.counts[c] for c in open_cells)
        ties = [c for c in open_cells if self.counts[c] == least]
        pairs: Counter[tuple[str, str]] = Counter()
        for c, n in [*self.counts.items(), *((c, 1) for c in exclude)]:  # this run's faults so far count too
            pairs[c.kind, c.role] += n
        fewest = min(pairs[c.kind, c.role] for c in ties)
        return rng.choice([c for c in ties if pairs[c.kind, c.role] == fewest])

    def _fill(self, rng: random.Random, exclude: set[Cell], provoker: str | None) -> tuple[Cell, dict] | None:
        """The least-tried reachable cell and a fault for it; cells refused :data:`DRAWS_PER_CELL` times are
        marked unreachable on the way."""
        while (cell := self._least_tried(rng, exclude)) is not None:
            for _ in range(DRAWS_PER_CELL):
                fault = self._fault(cell, rng, provoker)
                if fault is not None:
                    return cell, fault
            self.unreachable.add(cell)
        return None

    def _provoker(self, rng: random.Random) -> tuple[Cell, dict[str, Any]]:
        """A member's clean leave and rejoin early in the chaos phase: the rebalance a live trigger waits for."""
        i = rng.randrange(len(self.base.workload.consumers))
        member = self.base.workload.consumers[i]
        fault = {"type": "bounce", "target": Role.MEMBER.value, "node": f"consumer-{i}",
                 "trigger": {"at_s": round(rng.uniform(1.0, 3.0), 1)}, "duration_s": round(rng.uniform(1.0, 2.0), 1)}
        return Cell("bounce", Role.MEMBER.value, Phase.TIME.value, DurationClass.SHORT.value,
                    client_label(member)), fault

    def next(self) -> PlannedRun:
        """The plan's next run (the same sequence for the same workload, seed, families and capabilities)."""
        rng = self._rng
        index, seed = self._index, rng.randrange(1, 2**31)
        self._index += 1
        how_many = rng.choices(FAULT_COUNTS, FAULT_WEIGHTS)[0]
        provoker_cell, provoker = self._provoker(rng)
        member = provoker["node"]
        chosen: list[tuple[Cell, dict[str, Any]]] = []
        for _ in range(how_many):
            filled = self._fill(rng, {c for c, _ in chosen}, member)
            if filled is None or not _fits(chosen, filled):
                # a fault that cannot join this run ends its draw: it stays least-tried and comes first in a
                # later run, and no companion tried before takes its place (breadth over kinds and roles)
                break
            chosen.append(filled)
        if not chosen:
            raise UsageError(f"no fault of {', '.join(self.families)} can be placed in {self.workload.name}: "
                             "choose other --families")
        chosen.sort(key=lambda x: not declarations()[x[0].kind].replaces_target)  # a replacing fault first
        first = chosen[0][1]
        for _cell, f in chosen[1:]:
            if "at_s" in f["trigger"] and "at_s" in first["trigger"]:  # overlap the first fault's window
                f["trigger"]["at_s"] = round(first["trigger"]["at_s"] + rng.uniform(0, first["duration_s"]), 1)
        self._spare_revoked_members(chosen, member, rng)
        description = (f"Generated by chaos explore from {self.workload.name}: plan seed {self.seed}, run {index}.")
        try:
            exp, cells = self._with_provoker(chosen, provoker_cell, provoker, description)
        except (ValidationError, ValueError):
            # the faults validate one by one but not together: the first alone (its cell is still tried)
            exp, cells = self._with_provoker(chosen[:1], provoker_cell, provoker, description)
        self.counts.update(cells)
        return PlannedRun(index, seed, exp, cells)

    def _with_provoker(self, chosen: list[tuple[Cell, dict[str, Any]]], provoker_cell: Cell,
                       provoker: dict[str, Any], description: str) -> tuple[Experiment, tuple[Cell, ...]]:
        """The experiment of ``chosen``, the provoker first when a fault waits for a live trigger."""
        if any("at_s" not in f["trigger"] for _c, f in chosen):
            clear = round(provoker["trigger"]["at_s"] + provoker["duration_s"] + PROVOKER_CLEAR_S, 1)
            chosen = [(provoker_cell, provoker), *(self._after_provoker(c, f, provoker, clear) for c, f in chosen)]
        cells = tuple(c for c, _ in chosen)
        text = f"{description} Cells: {'; '.join(c.label() for c in cells)}."
        return self._experiment([f for _c, f in chosen], text), cells

    def _spare_revoked_members(self, chosen: list[tuple[Cell, dict[str, Any]]], provoker: str,
                               rng: random.Random) -> None:
        """A revocation trigger waits for another member than those the run's other faults stop, pause or
        replace by name: a killed member revokes nothing (found by exploring: a limit on a member waiting for
        consumer-0's revocation while a kill of consumer-0 ran never fired, and the run was unknown)."""
        hit = {f["node"] for c, f in chosen
               if declarations()[c.kind].family in _ON_MEMBER_PROCESSES and Role(c.role) is Role.MEMBER}
        spare = [m for m in self._recording() if m not in hit and m != provoker]
        for _c, f in chosen:
            if f["trigger"].get("on_revoked") in hit and spare:
                f["trigger"]["on_revoked"] = rng.choice(spare)

    @staticmethod
    def _after_provoker(cell: Cell, fault: dict[str, Any], provoker: dict[str, Any],
                        clear: float) -> tuple[Cell, dict[str, Any]]:
        """``fault``, moved past the provoker's bounce when it acts on member processes and may hit the
        bounced member (the module docstring); ``clear`` is when the bounced member is back."""
        if declarations()[cell.kind].family not in _ON_MEMBER_PROCESSES or Role(cell.role) not in _ANY_MEMBER:
            return cell, fault
        trigger = dict(fault["trigger"])
        if "at_s" in trigger:
            if trigger["at_s"] < clear and trigger["at_s"] + fault["duration_s"] > provoker["trigger"]["at_s"]:
                trigger["at_s"] = clear
        else:
            # the bounce's heal (the member started again) opens the window, and its rejoin is the rebalance the
            # trigger meets; a second fixed in advance came after that rebalance as often as not (found by
            # exploring: 18 of 31 such runs on 3.9.1 never fired, the chaos phase over first)
            planned_end = round(provoker["trigger"]["at_s"] + provoker["duration_s"], 1)
            trigger["not_before_s"] = max(trigger.get("not_before_s", 0.0), planned_end)
            trigger["after_fault"] = PROVOKER_ID
        return cell, {**fault, "trigger": trigger}

    def runs(self, shard: Shard = WHOLE) -> Iterator[PlannedRun]:
        """The plan's runs for ``shard``, in index order, without end (the caller stops on its budget)."""
        while True:
            planned = self.next()
            if shard.owns(planned.index):
                yield planned


def _fits(chosen: list[tuple[Cell, dict[str, Any]]], fault: tuple[Cell, dict[str, Any]]) -> bool:
    """Whether ``fault`` can join the run's ``chosen`` faults and every heal still find what it acts on.

    - A fault that replaces its member (``replaces_target``): that member never comes back, so no other fault
      of the run is on members (its heal could not happen: the run would be unknown).
    - A fault that stops, replaces or changes a process (the families in :data:`_ON_MEMBER_PROCESSES`) and
      another fault on a process it may hit (:func:`_may_meet`): the other's heal finds its process gone or
      replaced, or an rpc fault acts on nothing (found exploring the python-service example: a subscription
      change undone by a bounce of every member, a pause of consumer-0 while the group leader consumer-0 was
      killed, a pause of one partition leader killed as the controller, a Heartbeat fault on the coordinator
      killed by another fault).
    - A fault that waits for a member's revocation and such a fault on a role that may resolve to any member
      (:func:`_may_hide_revocation`)."""
    run = [*chosen, fault]
    if (any(declarations()[c.kind].replaces_target for c, _f in run)
            and sum(Role(c.role) in MEMBER_ROLES for c, _f in run) > 1):
        return False
    return not any(_may_meet(k, fault) or _may_hide_revocation(k, fault) or _may_hide_revocation(fault, k)
                   for k in chosen)


def _may_hide_revocation(waiting: tuple[Cell, dict[str, Any]], other: tuple[Cell, dict[str, Any]]) -> bool:
    """Whether ``waiting`` waits for a member's revocation (``on_revoked``) that ``other`` may keep from ever
    being seen: ``other`` stops, replaces or changes member processes (:data:`_ON_MEMBER_PROCESSES`) on a role
    that may resolve to any member, the awaited one included, and a killed or replaced member revokes nothing.
    A fault on a named member is spared by the draw instead (:meth:`Plan._spare_revoked_members`). Found
    exploring 4.4.0 with KIP-848 members: a kill and a crash_replace of a random member each took consumer-0
    while another fault waited for consumer-0's revocation, which never came; both runs were unknown."""
    (_cell, fault), (other_cell, _other_fault) = waiting, other
    return ("on_revoked" in fault.get("trigger", {})
            and declarations()[other_cell.kind].family in _ON_MEMBER_PROCESSES and Role(other_cell.role) in _ANY_MEMBER)


def _may_meet(one: tuple[Cell, dict[str, Any]], other: tuple[Cell, dict[str, Any]]) -> bool:
    """Whether two faults of a run may act on one process while one of them stops, replaces or changes it (a
    family in :data:`_ON_MEMBER_PROCESSES`) and the other is one too or an rpc fault (which needs the process's
    requests): both on members, or both on cluster nodes, unless both name different ones; or one stops every
    broker at once, which no rpc fault can meet."""
    (cell, fault), (other_cell, other_fault) = one, other
    fam, other_fam = declarations()[cell.kind].family, declarations()[other_cell.kind].family
    stops, other_stops = fam in _ON_MEMBER_PROCESSES, other_fam in _ON_MEMBER_PROCESSES
    if not ((stops and (other_stops or other_fam == "rpc")) or (other_stops and fam == "rpc")):
        return False
    role, other_role = Role(cell.role), Role(other_cell.role)
    if ((fam == "process" and role is Role.ALL_BROKERS and other_fam == "rpc")
            or (other_fam == "process" and other_role is Role.ALL_BROKERS and fam == "rpc")):
        # every broker stopped at once (kill, pause, terminate): no request reaches one, so an rpc fault on any
        # process acts on nothing (found exploring the python-service example: an OffsetCommit fault on a member
        # while all brokers were killed); a restart, one broker after the other, is kept apart too
        # (conservative); a rolling restart (topology) keeps all but one up and is not
        return True
    if Role.TOPIC in (role, other_role) or (role in MEMBER_ROLES) != (other_role in MEMBER_ROLES):
        return False
    named = {role, other_role} <= {Role.MEMBER, Role.NODE}
    return not named or fault.get("node") == other_fault.get("node")


def coverage(plan: Plan, ran: Iterable[Cell]) -> dict[str, Any]:
    """The coverage map of the cells ``ran`` (with repeats): per cell how often, and the totals against the
    plan's space (cells in the space, found unreachable so far, tried)."""
    tried = Counter(ran)
    return {"cells": len(plan.cells), "unreachable": len(plan.unreachable), "tried": len(tried),
            "map": {c.label(): n for c, n in sorted(tried.items())}}


__all__ = ["Cell", "DurationClass", "Phase", "Plan", "PlannedRun", "coverage"]
