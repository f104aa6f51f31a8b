"""The nemesis interpreter: the only code that injects faults, on the clock or on the live stream.

For every planned fault a thread waits for its trigger, resolves its target
role *at that moment*, injects it, records ``fault_start`` (with the trigger
and the trigger→effect latency), checks the effect (``fault_verified``
stage=effect), waits ``duration_s`` — cut short when the chaos phase ends —
and heals it in ``finally`` (``fault_end``, then ``fault_verified``
stage=healed). ``faults.json`` in the run directory summarises each fault:
trigger signal, latencies, whether a phase-targeted fault landed in the
intended group state (:func:`landing`).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from chaos.errors import UsageError
from chaos.history.event import Kind
from chaos.history.writer import EventWriter
from chaos.model.experiment import Experiment
from chaos.model.faults import FaultSpec
from chaos.model.faults.link import LinkFault
from chaos.model.faults.membership import ChangeSubscription
from chaos.model.faults.rpc import RPC_FIELDS, Rpc
from chaos.model.target import Role
from chaos.model.trigger import Trigger
from chaos.model.workload import GroupProtocol
from chaos.nemesis.evidence import Active
from chaos.nemesis.kinds import Injection, kind
from chaos.nemesis.schedule import PlannedFault
from chaos.nemesis.target import resolve
from chaos.nemesis.watch import LiveWatch, Signal

#: for a state trigger, the signal that means the group *left* that state (classic groups)
_EXIT = {"PreparingRebalance": "CompletingRebalance", "CompletingRebalance": "Stable", "Stable": "PreparingRebalance"}
#: states a rebalance passes through: an ``after_fault`` trigger on one fires at once when the group is in it as the
#: fault is over (:class:`chaos.model.trigger.Trigger`)
_UNDER_WAY = frozenset({"PreparingRebalance", "CompletingRebalance"})


def landing(intended_state: str, trigger: Signal, signals: Sequence[Signal],
            effect_ns: int) -> tuple[bool | None, str]:
    """Did a fault triggered by ``trigger`` take effect (at ``effect_ns``) while the group was still in
    ``intended_state``? ``(landed, evidence)``, judged from the watch's ``signals``; None: the
    signals cannot tell.

    Classic groups: the group left the state when the next state's line/event came between the
    trigger and the effect (``_EXIT``). KIP-848 groups (a ``trigger`` whose ``protocol`` is
    "consumer"): :func:`kip848_landing`.
    """
    if trigger.protocol == "consumer":
        return kip848_landing(intended_state, trigger, signals, effect_ns)
    exit_kind = _EXIT[intended_state]
    left = [s for s in signals if s.kind == exit_kind and trigger.happened_ns <= s.happened_ns <= effect_ns
            and s is not trigger]
    if not left:
        return True, f"no {exit_kind} signal between the trigger and the effect"
    return False, f"{exit_kind} seen {_ms(effect_ns - left[0].happened_ns)} ms before the effect"


def _ms(ns: int) -> float:
    return round(ns / 1e6, 1)


def kip848_landing(intended_state: str, trigger: Signal, signals: Sequence[Signal],
                   effect_ns: int) -> tuple[bool | None, str]:
    """Landing against the KIP-848 meaning of the state (:class:`chaos.model.trigger.Trigger`).

    ``Stable`` (the coordinator answered Stable at group epoch N): landed unless the group epoch was
    bumped past N before the effect — the next rebalance had started. Epochs, not timestamps, order
    the two: a log line's stamp is truncated to the millisecond.

    ``PreparingRebalance`` (the group epoch was bumped to N): landed when, at the effect, the group
    had not reconciled since. Not landed: a Stable sample at an epoch >= N before the effect. Landed,
    with M the newest epoch bumped by then: the target assignment of epoch M was not yet computed
    (the group was Assigning: "Computed a new target assignment for epoch M" comes later or never), or
    a sample asked after the effect is still not Stable at epoch M. Within one group epoch the
    coordinator's state only moves forward — Assigning, Reconciling, Stable — as member epochs only
    rise to the assignment epoch (``ConsumerGroup.maybeUpdateGroupState``); the one exception, a
    static member's replacement (member epoch 0 at the same group epoch,
    ``GroupMetadataManager``'s "Static member ... re-joins"), leaves the verdict undecided, as does a
    group that reconciled between two samples around the effect (None).
    """
    mine = sorted((s for s in signals if s.protocol == "consumer"), key=lambda s: s.happened_ns)
    n = trigger.generation if trigger.generation is not None else 0
    if intended_state == "Stable":
        bumped = [s for s in mine if s.kind == "PreparingRebalance" and (s.generation or 0) > n
                  and s.happened_ns <= effect_ns]
        if bumped:
            return False, (f"group epoch bumped to {bumped[0].generation} {_ms(effect_ns - bumped[0].happened_ns)} ms "
                           f"before the effect: the group had left Stable at epoch {n}")
        return True, f"Stable at group epoch {n}; no epoch bump past it before the effect"
    stable = [s for s in mine if s.kind == "Stable" and (s.generation or 0) >= n and s.happened_ns <= effect_ns]
    if stable:
        return False, (f"the group was reconciled (Stable at epoch {stable[0].generation}) "
                       f"{_ms(effect_ns - stable[0].happened_ns)} ms before the effect")
    bumps = [s for s in mine if s.kind == "PreparingRebalance" and (s.generation or 0) >= n and s.happened_ns <= effect_ns]
    m = max([n, *(s.generation or 0 for s in bumps)])
    bump = next((s for s in reversed(bumps) if s.generation == m), trigger)
    computed = [s for s in mine if s.kind == "assignment" and (s.generation or 0) >= m and s.happened_ns <= effect_ns]
    if not computed:
        return True, (f"group epoch {m} bumped {_ms(effect_ns - bump.happened_ns)} ms before the effect, its target "
                      "assignment not yet computed: the group was Assigning")
    at = f"target assignment of epoch {m} computed {_ms(effect_ns - computed[0].happened_ns)} ms before the effect"
    samples = [s for s in mine if s.kind == "sample"]
    # a sample is stamped when written: the first one written after the effect may have been answered
    # before it; the observer asks one question at a time, so every later one was asked after it
    later = [s for s in samples if s.happened_ns >= effect_ns][1:]
    after = next((s for s in later if s.state != "Unknown"), None)
    # at the same epoch a join is a static member's replacement (a new member's join bumps the epoch)
    replaced = after is not None and after.generation == m and any(
        s.kind == "joined" and effect_ns <= s.happened_ns <= after.happened_ns for s in mine)
    if after is not None and after.generation == m and after.state != "Stable" and not replaced:
        return True, (f"{at}; a sample asked after it ({_ms(after.happened_ns - effect_ns)} ms later) is "
                      f"{after.state} at epoch {m}: not reconciled at the effect")
    before = next((s for s in reversed(samples) if s.happened_ns <= effect_ns and s.state != "Unknown"), None)
    return None, (f"{at}; the samples do not tell whether the group reconciled before it (last before: "
                  f"{_sample(before, effect_ns)}; first asked after: {_sample(after, effect_ns)}"
                  f"{'; a static member was replaced' if replaced else ''})")


def _sample(s: Signal | None, effect_ns: int) -> str:
    if s is None:
        return "none"
    return f"{s.state} at epoch {s.generation}, {_ms(abs(effect_ns - s.happened_ns))} ms away"


def trigger_match(trig: Trigger) -> Callable[[Signal], bool]:
    """Which live signals fire a non-time ``trig`` (:class:`chaos.model.trigger.Trigger` says what each means).

    A state matches the signal of that name, whichever protocol made it (a KIP-848 group's epoch
    bump is its PreparingRebalance); ``after_generation`` counts classic generations (the first
    ``assigned`` event of generation >= N), ``after_epoch`` KIP-848 group epochs (an epoch bump to
    >= N).
    """
    if trig.state is not None:
        state = trig.state
        return lambda s: s.kind == state
    if trig.on_revoked is not None:
        member = trig.on_revoked
        return lambda s: s.kind == "revoked" and s.member == member
    if trig.after_epoch is not None:
        epoch = trig.after_epoch
        return lambda s: (s.kind == "PreparingRebalance" and s.protocol == "consumer" and s.generation is not None
                          and s.generation >= epoch)
    n = trig.after_generation
    if n is None:
        raise ValueError(f"{trig.describe()} is not a live trigger")
    return lambda s: s.kind == "Stable" and s.protocol == "classic" and s.generation is not None and s.generation >= n


@dataclass
class FaultRecord:
    fault_id: str
    type: str
    target: str
    trigger: str
    nodes: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    fired: bool = False
    skipped_reason: str | None = None
    trigger_signal: str | None = None
    trigger_to_effect_ms: float | None = None
    seen_lag_ms: float | None = None      # the trigger's own time -> the live watch saw it
    wake_lag_ms: float | None = None      # seen -> the fault's thread resumed
    inject_ms: float | None = None        # resumed -> the fault took effect (target resolved, signal sent)
    intended_state: str | None = None
    landed: bool | None = None
    landing_evidence: str | None = None
    #: link faults: which way the toxic acts (both, to_broker, to_client; ``FaultSpec.direction``)
    direction: str = "both"
    effect_ok: bool | None = None
    healed_ok: bool | None = None
    start_s: float | None = None
    end_s: float | None = None
    #: CLOCK_MONOTONIC ns when the fault took effect (the signal sent, the toxic listed): what landing is judged at
    effect_ns: int | None = None


class _LiveView:
    """The cluster as :func:`chaos.nemesis.target.resolve` sees it at injection: roles asked now.

    The coordinator comes from the trigger's own log line when there is one (the broker that logged
    the coordinator line *is* the coordinator at that instant; asking FindCoordinator would cost a
    round trip inside a window of a few ms), else from the latest coordinator line the live watch saw
    (a member-event trigger), else from FindCoordinator.
    """

    def __init__(self, nemesis: Nemesis, sig: Signal | None):
        self._n, self._sig = nemesis, sig
        self.topic = nemesis.run.topic

    def coordinator(self) -> str | None:
        sig, watch = self._sig, self._n.watch
        if sig is not None and sig.broker is not None:
            return f"broker-{sig.broker}"
        if sig is not None and watch.coordinator is not None:
            return f"broker-{watch.coordinator}"
        return self._n.cluster.coordinator_of(self._n.run.group)

    def controller(self) -> str | None:
        return self._n.cluster.controller()

    def leader(self, partition: int) -> str | None:
        return self._n.cluster.leader_of(self._n.run.topic, partition)

    def group_leader(self) -> str | None:
        return self._n.watch.leader_name(self._n.run.member_specs)

    def live_members(self) -> list[str]:
        return [n for n, p in self._n.run.members.items() if p.alive()]

    def all_members(self) -> list[str]:
        return list(self._n.run.member_specs)

    def running_brokers(self) -> list[str]:
        c = self._n.cluster
        return [b.node for b in c.topology.brokers if c.is_running(b.node)]

    def all_brokers(self) -> list[str]:
        return [b.node for b in self._n.cluster.topology.brokers]

    def zookeepers(self) -> list[str]:
        return [z.node for z in self._n.cluster.topology.zookeepers]

    def controllers(self) -> list[str]:
        return [c.node for c in self._n.cluster.topology.controllers]


class Nemesis:
    def __init__(self, cluster, run, experiment: Experiment, seed: int, planned: tuple[PlannedFault, ...]):
        self.cluster = cluster
        self.run = run
        self.experiment = experiment
        self.seed = seed
        self.planned = planned
        self.events = EventWriter.for_run(run.run_dir, "nemesis")
        broker_logs = {b.broker_id: cluster.log_path(b.node) for b in cluster.topology.brokers}
        #: a consumer-protocol member makes the group a KIP-848 group: its states come from epochs and samples
        self.kip848 = any(c.group_protocol is GroupProtocol.CONSUMER for c in experiment.workload.consumers)
        self.watch = LiveWatch(run.group, broker_logs, run.run_dir / "events", kip848=self.kip848)
        self.cancel = threading.Event()
        self.records: dict[str, FaultRecord] = {}
        self._threads: list[threading.Thread] = []
        self._t0_ns = 0
        self._woke: dict[str, int] = {}  # fault id -> when its thread resumed after the trigger
        #: fault id -> set once its thread is over (healed, or gave up): what an ``after_fault`` trigger waits for
        self._over: dict[str, threading.Event] = {pf.fault_id: threading.Event() for pf in planned}
        self._adhoc = 0  # faults fired by code (fire), numbered t1, t2 …
        #: KIP-848 state faults: (intended state, trigger, effect) — judged again once the chaos phase ends,
        #: when the samples after the effect (a failed-over coordinator's first answer) have come in
        self._landings: dict[str, tuple[str, Signal, int]] = {}

    # ------------------------------------------------------------ lifecycle
    def start(self) -> Nemesis:
        if any(isinstance(pf.spec, ChangeSubscription) and "extra" in pf.spec.subscription for pf in self.planned):
            self.run.create_extra_topic()  # not inside a fault's trigger-to-effect time
        self._t0_ns = time.monotonic_ns()
        self.watch.start()
        for pf in self.planned:
            self.records[pf.fault_id] = FaultRecord(pf.fault_id, pf.spec.type, pf.spec.target.value,
                                                    pf.spec.trigger.describe())
            t = threading.Thread(target=self._run_one, args=(pf,), name=f"fault-{pf.fault_id}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def settled(self) -> bool:
        """Every planned fault is over: healed, or its trigger gave up or never came (its thread ended)."""
        return not any(t.is_alive() for t in self._threads)

    def stop(self) -> list[FaultRecord]:
        """End the chaos phase: pending triggers are dropped, active faults healed (in their threads)."""
        self.cancel.set()
        for t in self._threads:
            t.join(180)
        self.watch.stop()
        self.watch.poll_once()  # what was written since the watch's last pass
        for fault_id, (intended, sig, effect_ns) in self._landings.items():
            rec = self.records[fault_id]
            rec.landed, rec.landing_evidence = landing(intended, sig, self.watch.since(0), effect_ns)
        # a planned fault that never fired is recorded in the history: the run did not test what it
        # set out to, and the judge must say so (the faults checker answers unknown)
        for rec in self.records.values():
            if not rec.fired:
                reason = rec.skipped_reason or "did not fire before the chaos phase ended"
                rec.skipped_reason = reason
                self.events.emit(Kind.FAULT_VERIFIED, fault_id=rec.fault_id, stage="fired", ok=False,
                                 evidence=f"{rec.type} on {rec.target} ({rec.trigger}) did not fire: {reason}")
        self.events.close()
        (self.run.run_dir / "faults.json").write_text(
            json.dumps([asdict(r) for r in self.records.values()], indent=1))
        return list(self.records.values())

    def _rel_s(self, ns: int) -> float:
        return round((ns - self._t0_ns) / 1e9, 3)

    # ------------------------------------------------------------ triggers
    def _wait_trigger(self, pf: PlannedFault, rec: FaultRecord) -> tuple[int, Signal | None] | None:
        trig = pf.spec.trigger
        if pf.at_s is not None:
            when = self._t0_ns + int(pf.at_s * 1e9)
            if self.cancel.wait(max(0.0, (when - time.monotonic_ns()) / 1e9)):
                return None
            return when, None
        since = self._t0_ns + int(trig.not_before_s * 1e9)
        if self.cancel.wait(max(0.0, (since - time.monotonic_ns()) / 1e9)):
            return None
        if trig.after_fault is not None:
            over = self._over[trig.after_fault]
            while not over.is_set():  # the fault's heal (a bounced member back) opens the window, not a guess
                if self.cancel.wait(0.05):
                    rec.skipped_reason = f"chaos phase ended first ({trig.after_fault} was not over)"
                    return None
            if not self.records[trig.after_fault].fired:
                rec.skipped_reason = f"{trig.after_fault}, which it waits for, did not fire"
                return None
            since = max(since, time.monotonic_ns())
            under_way = self.watch.state_at(since) if trig.state in _UNDER_WAY else None
            if under_way is not None and under_way.kind == trig.state:
                # the rebalance the heal causes is the one under way: a member rejoining a group still in
                # PreparingRebalance joins that rebalance, and no new line comes (found exploring 4.4.0 and the
                # black-box example: a PreparingRebalance trigger after a bounce never fired)
                rec.intended_state = trig.state
                # said last: faults.json keeps a trigger line's last 300 characters
                return since, replace(under_way, line=f"{under_way.line.strip()} [under way when {trig.after_fault} "
                                                       "was over]")
        deadline = time.monotonic() + trig.timeout_s
        if trig.state is not None:
            rec.intended_state = trig.state
        sig = self.watch.wait_for(trigger_match(trig), since, deadline, self.cancel)
        if sig is not None:
            self._woke[pf.fault_id] = time.monotonic_ns()
        if sig is None:
            rec.skipped_reason = ("chaos phase ended first" if self.cancel.is_set()
                                  else f"trigger not seen in {trig.timeout_s}s")
            return None
        return sig.happened_ns, sig

    # ------------------------------------------------------------ targets
    def _resolve(self, pf: PlannedFault, sig: Signal | None, role: Role | None = None) -> list[str]:
        """Resolve ``role`` (default: the fault's target) now, with the fault's own seeded choices."""
        spec = pf.spec
        view = _LiveView(self, sig)
        return resolve(role or spec.target, view, pf.target_rng(self.seed), node=spec.node, partition=spec.partition)

    # ------------------------------------------------------------ one fault
    def _inject(self, pf: PlannedFault, nodes: list[str]) -> tuple[list[Active], int | None]:
        """Inject through the fault's registered kind; returns the active faults and when they took effect."""
        inj = Injection(self.cluster, self.run, pf.fault_id, pf.spec, nodes, self.cancel,
                        resolve=lambda role: self._resolve(pf, None, role), seed=self.seed)
        actives = kind(pf.spec.type).inject(inj)
        return actives, inj.effect_ns

    def _emit_verified(self, fault_id: str, stage: str, actives: list[Active]) -> bool:
        results = [(a.verify_effect() if stage == "effect" else a.verify_healed()) for a in actives]
        ok = bool(results) and all(r[0] for r in results)
        self.events.emit(Kind.FAULT_VERIFIED, fault_id=fault_id, stage=stage, ok=ok,
                         evidence="; ".join(r[1] for r in results)[:2000])
        return ok

    def _landing(self, rec: FaultRecord, intended_state: str, trigger: Signal, effect_ns: int) -> None:
        """Did the fault take effect before the group left the intended state? Judged from later signals
        (:func:`landing`); a KIP-848 one is judged again when the chaos phase ends (:meth:`stop`)."""
        time.sleep(0.3)  # let the watch read lines logged around the effect
        rec.landed, rec.landing_evidence = landing(intended_state, trigger, self.watch.since(0), effect_ns)
        if trigger.protocol == "consumer":
            self._landings[rec.fault_id] = (intended_state, trigger, effect_ns)

    def inject(self, pf: PlannedFault, trigger_ns: int, sig: Signal | None) -> list[Active]:
        """Resolve the target now, inject, record ``fault_start`` and the effect evidence.

        Returns the active faults (empty when the target resolved to nothing).
        The caller must :meth:`heal` them.
        """
        rec = self.records.setdefault(pf.fault_id, FaultRecord(pf.fault_id, pf.spec.type,
                                                               pf.spec.target.value, pf.spec.trigger.describe()))
        nodes = self._resolve(pf, sig)
        if not nodes:
            rec.skipped_reason = f"target {pf.spec.target.value} resolved to nothing"
            return []
        inject_ns = time.monotonic_ns()
        actives, effect_ns = self._inject(pf, nodes)
        effect_ns = effect_ns or time.monotonic_ns()
        rec.fired, rec.nodes, rec.effect_ns = True, nodes, effect_ns
        if isinstance(pf.spec, LinkFault):
            rec.direction = pf.spec.direction.value
        rec.links = [l for a in actives for l in a.links]
        rec.start_s = self._rel_s(inject_ns)
        rec.trigger_to_effect_ms = round((effect_ns - trigger_ns) / 1e6, 2)
        if sig is not None:
            rec.trigger_signal = sig.line.strip()[-300:] or f"{sig.kind} gen {sig.generation} ({sig.member})"
            rec.seen_lag_ms = round((sig.seen_ns - sig.happened_ns) / 1e6, 2)
            woke = self._woke.get(pf.fault_id)
            if woke is not None:
                rec.wake_lag_ms = round((woke - sig.seen_ns) / 1e6, 2)
                rec.inject_ms = round((effect_ns - woke) / 1e6, 2)
        params: dict[str, Any] = {"trigger_to_effect_ms": rec.trigger_to_effect_ms, "links": rec.links,
                                  "duration_s": pf.spec.duration_s}
        if isinstance(pf.spec, LinkFault):
            # the kind's typed params as in effect (defaults included), first, and which way it acts
            params = {**pf.spec.params.model_dump(mode="json"), **params, "direction": rec.direction}
        elif isinstance(pf.spec, Rpc):  # what it acts on, and how
            params = {**pf.spec.model_dump(mode="json", include=set(RPC_FIELDS)), **params}
        self.events.emit(Kind.FAULT_START, mono_ns=inject_ns, fault_id=pf.fault_id,
                         fault_type=pf.spec.type, target_role=pf.spec.target.value,
                         node=",".join(nodes), params=params, trigger=rec.trigger,
                         traits=sorted(pf.spec.traits_in_effect))
        rec.effect_ok = self._emit_verified(pf.fault_id, "effect", actives)
        if sig is not None and rec.intended_state:
            self._landing(rec, rec.intended_state, sig, effect_ns)
        return actives

    def heal(self, pf: PlannedFault, actives: list[Active]) -> None:
        """Undo ``actives`` (every heal runs even if one fails), record ``fault_end`` and the heal evidence."""
        rec = self.records[pf.fault_id]
        for a in actives:
            try:
                a.heal()
            except Exception as exc:  # noqa: BLE001 - the next heal must still run
                self.events.emit(Kind.ERROR, message=f"heal of {pf.fault_id} failed: {exc}",
                                 error_code=None, error_name=None, fatal=False)
        end_ns = time.monotonic_ns()
        self.events.emit(Kind.FAULT_END, mono_ns=end_ns, fault_id=pf.fault_id,
                         fault_type=pf.spec.type, node=",".join(rec.nodes) or None)
        rec.end_s = self._rel_s(end_ns)
        rec.healed_ok = self._emit_verified(pf.fault_id, "healed", actives)
        acting = [a.verify_acted for a in actives if a.verify_acted is not None]
        if acting:
            results = [v() for v in acting]
            self.events.emit(Kind.FAULT_VERIFIED, fault_id=pf.fault_id, stage="acted",
                             ok=all(r[0] for r in results), evidence="; ".join(r[1] for r in results)[:2000])

    @contextmanager
    def fire(self, spec: FaultSpec, *, when: str | None = None, timeout_s: float = 30.0) -> Iterator[list[str]]:
        """Inject ``spec`` now — or as soon as the group enters state ``when`` — and heal it on exit.

        Yields the resolved nodes (empty when the target resolved to nothing). Raises
        ``TimeoutError`` when the state does not come within ``timeout_s`` (recorded as not fired).
        The fault goes through the same resolution, injection, evidence and records as planned ones.
        """
        if when == "CompletingRebalance" and self.kip848:
            raise UsageError("when=CompletingRebalance has no KIP-848 counterpart (no SyncGroup phase): use "
                             "PreparingRebalance (the group epoch was bumped) or Stable")
        self._adhoc += 1
        trigger = f"state={when}" if when else "at_s=0"
        pf = PlannedFault(f"t{self._adhoc}", self._adhoc, 0, spec, None if when else 0.0)
        rec = FaultRecord(pf.fault_id, spec.type, spec.target.value, trigger, intended_state=when)
        self.records[pf.fault_id] = rec
        start = time.monotonic_ns()
        if when:
            sig = self.watch.wait_for(lambda s: s.kind == when, start, time.monotonic() + timeout_s, self.cancel)
            if sig is None:
                rec.skipped_reason = f"group {self.run.group} did not enter {when} within {timeout_s}s"
                raise TimeoutError(rec.skipped_reason)
            trigger_ns = sig.happened_ns
        else:
            sig, trigger_ns = None, start
        actives = self.inject(pf, trigger_ns, sig)
        try:
            yield rec.nodes
        finally:
            if actives:
                self.heal(pf, actives)

    def _run_one(self, pf: PlannedFault) -> None:
        actives: list[Active] = []
        try:
            fired = self._wait_trigger(pf, self.records[pf.fault_id])
            if fired is None:
                return
            try:
                actives = self.inject(pf, *fired)
            except Exception as exc:  # noqa: BLE001 - a fault that could not be injected is the run's root cause
                # said as such (faults.json, the history, the faults checker), not "did not fire in time"
                rec = self.records[pf.fault_id]
                rec.skipped_reason = f"injection failed: {type(exc).__name__}: {str(exc)[:300]}"
                self.events.emit(Kind.ERROR, message=f"{pf.fault_id} ({pf.spec.type} on "
                                 f"{pf.spec.target.value}): {rec.skipped_reason}",
                                 error_code=None, error_name=type(exc).__name__, fatal=False)
                return
            if actives:
                self.cancel.wait(pf.spec.duration_s)
        finally:
            try:
                if actives:
                    self.heal(pf, actives)
            finally:
                self._over[pf.fault_id].set()
