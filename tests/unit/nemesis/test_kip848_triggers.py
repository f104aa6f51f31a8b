"""KIP-848 state and epoch triggers: the live watch's signals, the trigger matching, the landing verdict,
and the load-time refusals (issue 13).

The streams are replayed from real Kafka 4.4.0 runs (``/tmp/kr-out``, confluent-kafka 2.16.1 members
under ``group.protocol=consumer``): the new coordinator's INFO lines verbatim after their timestamp
(``GroupMetadataManager``), the members' events and the observer's ConsumerGroupDescribe samples at
the times, epochs and states those runs recorded (offsets in ms from the run's own clock). Each line
and event is written into a run directory with timestamps re-stamped relative to now, as the broker
and the workers would write them, and read by a real :class:`LiveWatch`.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from chaos.errors import UsageError
from chaos.experiment import catalogue, parse_experiment
from chaos.history.event import Kind
from chaos.history.writer import EventWriter
from chaos.model.faults import FaultSpec
from chaos.model.trigger import Trigger
from chaos.nemesis.interpreter import FaultRecord, Nemesis, kip848_landing, landing, trigger_match
from chaos.nemesis.schedule import PlannedFault
from chaos.nemesis.watch import LiveWatch, Signal

ROOT = Path(__file__).resolve().parents[3]
GROUP = "group-8402442007"    # coordinator-kill-preparing-eager, run-000-seed-5 (KIP-848)
CLASSIC = "group-99b13d45c6"  # coordinator-kill-preparing-eager, run-000-seed-3 (classic, same release)
CTX = "INFO [GroupCoordinator id=1 topic=__consumer_offsets partition=4] "
MGR = " (org.apache.kafka.coordinator.group.GroupMetadataManager)"


def _k(text: str) -> str:
    return f"{CTX}[GroupId {GROUP}] {text}{MGR}"


HASH = "with metadata hash -8108531378606255149."
#: (ms, broker, line after the timestamp) — run-000-seed-5's coordinator lines for its group
KIP848_LINES = [
    (528, 1, _k("Member G1fkvvOMQ4WAzHKICyYetA joins the consumer group using the consumer protocol.")),
    (528, 1, _k(f"Bumped group epoch to 2 {HASH}")),
    (528, 1, _k("Computed a new target assignment for epoch 2 with 'uniform' assignor in 0ms.")),
    (567, 1, _k("Member 1lkExbSeQLC5dyaCEj00LQ joins the consumer group using the consumer protocol.")),
    (568, 1, _k(f"Bumped group epoch to 3 {HASH}")),
    (607, 1, _k("Member Del9bghTTX+e8/ZibEYswg joins the consumer group using the consumer protocol.")),
    (608, 1, _k(f"Bumped group epoch to 4 {HASH}")),
    (1535, 1, _k("Computed a new target assignment for epoch 4 with 'uniform' assignor in 0ms.")),
    (3651, 1, _k("Member Del9bghTTX+e8/ZibEYswg left the consumer group.")),
    (3652, 1, _k(f"Bumped group epoch to 5 {HASH}")),
    (4542, 1, _k("Computed a new target assignment for epoch 5 with 'uniform' assignor in 0ms.")),
    (5945, 1, _k("Member dZPnFVxOSkC7zS5hHf2zAw joins the consumer group using the consumer protocol.")),
    (5945, 1, _k(f"Bumped group epoch to 6 {HASH}")),
    (5946, 1, _k("Computed a new target assignment for epoch 6 with 'uniform' assignor in 0ms.")),
]
#: the chaos phase of that run began at 2629 ms; the kill's trigger had not_before_s 0.5
CHAOS_MS, NOT_BEFORE_MS = 2629, 500

M0, M1, M2, M2B = "1lkExbSeQLC5dyaCEj00LQ", "G1fkvvOMQ4WAzHKICyYetA", "Del9bghTTX+e8/ZibEYswg", "dZPnFVxOSkC7zS5hHf2zAw"
TOPIC = "chaos-8402442007"


def _parts(*ps: int) -> list[list]:
    return [[TOPIC, p] for p in ps]


def _member(mid: str, name: str, epoch: int, owned: tuple[int, ...], target: tuple[int, ...]) -> dict:
    return {"member_id": mid, "instance_id": None, "client_id": name, "host": "", "assignment": _parts(*owned),
            "member_epoch": epoch, "target_assignment": _parts(*target)}


def _sample(state: str, epoch: int, assignment_epoch: int, members: list[dict]) -> dict:
    return {"group": GROUP, "state": state, "coordinator": 1, "protocol": "uniform", "generation": epoch,
            "members": members, "group_epoch": epoch, "assignment_epoch": assignment_epoch, "group_type": "consumer"}


def _own(source: str, kind: Kind, gen: int, mid: str, *ps: int) -> tuple[str, Kind, dict]:
    return source, kind, {"group": GROUP, "partitions": _parts(*ps), "incremental": True, "generation": gen,
                          "member_id": mid}


ALL = tuple(range(12))
#: (ms, source, kind, fields) — the members' rebalance callbacks and the observer's samples of that run
KIP848_EVENTS = [
    (534, *_own("consumer-1", Kind.ASSIGNED, 2, M1, *ALL)),
    (544, "observer", Kind.GROUP_STATE, _sample("Stable", 2, 2, [_member(M1, "consumer-1", 2, ALL, ALL)])),
    (631, "observer", Kind.GROUP_STATE, _sample("Assigning", 4, 2, [
        _member(M0, "consumer-0", 2, (), ()), _member(M2, "consumer-2", 2, (), ()),
        _member(M1, "consumer-1", 2, ALL, ALL)])),
    (1539, *_own("consumer-1", Kind.REVOKED, 2, M1, 4, 5, 6, 7, 8, 9, 10, 11)),
    (1540, *_own("consumer-1", Kind.ASSIGNED, 2, M1)),   # librdkafka: the epoch before the ack
    (1571, *_own("consumer-0", Kind.ASSIGNED, 4, M0, 8, 9, 10, 11)),
    (1613, *_own("consumer-2", Kind.ASSIGNED, 4, M2, 4, 5, 6, 7)),
    (1635, "observer", Kind.GROUP_STATE, _sample("Stable", 4, 4, [
        _member(M0, "consumer-0", 4, (8, 9, 10, 11), (8, 9, 10, 11)),
        _member(M2, "consumer-2", 4, (4, 5, 6, 7), (4, 5, 6, 7)),
        _member(M1, "consumer-1", 4, (0, 1, 2, 3), (0, 1, 2, 3))])),
    (3651, *_own("consumer-2", Kind.REVOKED, 4, M2, 4, 5, 6, 7)),
    (3737, "observer", Kind.GROUP_STATE, _sample("Assigning", 5, 4, [
        _member(M0, "consumer-0", 4, (8, 9, 10, 11), (8, 9, 10, 11)),
        _member(M1, "consumer-1", 4, (0, 1, 2, 3), (0, 1, 2, 3))])),
    (4555, *_own("consumer-1", Kind.ASSIGNED, 5, M1, 4, 5)),
    (4578, *_own("consumer-0", Kind.ASSIGNED, 5, M0, 6, 7)),
    (4639, "observer", Kind.GROUP_STATE, _sample("Stable", 5, 5, [
        _member(M0, "consumer-0", 5, (6, 7, 8, 9, 10, 11), (6, 7, 8, 9, 10, 11)),
        _member(M1, "consumer-1", 5, (0, 1, 2, 3, 4, 5), (0, 1, 2, 3, 4, 5))])),
    (6048, "observer", Kind.GROUP_STATE, _sample("Reconciling", 6, 6, [
        _member(M0, "consumer-0", 5, (6, 7, 8, 9, 10, 11), (6, 7, 8, 9)),
        _member(M1, "consumer-1", 5, (0, 1, 2, 3, 4, 5), (0, 1, 2, 3)),
        _member(M2B, "consumer-2", 6, (), (4, 5, 10, 11))])),
    (6563, *_own("consumer-1", Kind.REVOKED, 5, M1, 4, 5)),
    (6563, *_own("consumer-1", Kind.ASSIGNED, 5, M1)),
    (6582, *_own("consumer-0", Kind.REVOKED, 5, M0, 10, 11)),
    (6583, *_own("consumer-0", Kind.ASSIGNED, 5, M0)),
    (6644, "observer", Kind.GROUP_STATE, _sample("Reconciling", 6, 6, [
        _member(M0, "consumer-0", 6, (6, 7, 8, 9), (6, 7, 8, 9)),
        _member(M1, "consumer-1", 6, (0, 1, 2, 3), (0, 1, 2, 3)),
        _member(M2B, "consumer-2", 6, (), (4, 5, 10, 11))])),
    (6951, *_own("consumer-2", Kind.ASSIGNED, 6, M2B, 4, 5, 10, 11)),
    (7046, "observer", Kind.GROUP_STATE, _sample("Stable", 6, 6, [
        _member(M0, "consumer-0", 6, (6, 7, 8, 9), (6, 7, 8, 9)),
        _member(M1, "consumer-1", 6, (0, 1, 2, 3), (0, 1, 2, 3)),
        _member(M2B, "consumer-2", 6, (4, 5, 10, 11), (4, 5, 10, 11))])),
]


class Replay:
    """A run directory holding a stream replayed at ``base`` (a whole second, two minutes ago)."""

    def __init__(self, root: Path):
        self.root = root
        self.base_wall = float(int(time.time()) - 120)
        self.base_mono = int((self.base_wall + time.monotonic() - time.time()) * 1e9)
        self.logs = {b: root / f"broker-{b}.log" for b in (1, 2, 3)}
        self.events = root / "events"
        self._writers: dict[str, EventWriter] = {}

    def ns(self, ms: float) -> int:
        return self.base_mono + int(ms * 1e6)

    def lines(self, lines: list[tuple[int, int, str]]) -> None:
        for ms, broker, text in lines:
            wall = self.base_wall + ms / 1000
            stamp = datetime.fromtimestamp(wall).strftime("%Y-%m-%d %H:%M:%S") + f",{ms % 1000:03d}"
            with self.logs[broker].open("a") as f:
                f.write(f"[{stamp}] {text}\n")

    def emit(self, events: list) -> None:
        for ms, source, kind, fields in events:
            if source not in self._writers:
                self._writers[source] = EventWriter.for_run(self.root, source)
            self._writers[source].emit(kind, mono_ns=self.ns(ms), ts=self.base_wall + ms / 1000, **fields)

    def watch(self, group: str = GROUP, *, kip848: bool = True) -> LiveWatch:
        for w in self._writers.values():
            w.close(fsync=False)
        self._writers.clear()
        w = LiveWatch(group, self.logs, self.events, kip848=kip848)
        w.poll_once()
        return w

    def ms(self, sig: Signal) -> float:
        return round((sig.happened_ns - self.base_mono) / 1e6)


@pytest.fixture
def kip848(tmp_path: Path) -> Replay:
    r = Replay(tmp_path)
    r.lines(KIP848_LINES)
    r.emit(KIP848_EVENTS)
    return r


def _first(w: LiveWatch, trig: Trigger, since_ns: int) -> Signal | None:
    return w.wait_for(trigger_match(trig), since_ns, time.monotonic() + 0.05, threading.Event())


# ------------------------------------------------------------------ the watch


def test_epoch_bumps_assignments_and_stable_samples_become_signals(kip848: Replay):
    w = kip848.watch()
    by = {k: [(s.generation, kip848.ms(s)) for s in w.signals if s.kind == k]
          for k in ("PreparingRebalance", "assignment", "Stable", "CompletingRebalance", "leader")}
    # "Bumped group epoch to N": a rebalance started, with the NEW epoch
    assert by["PreparingRebalance"] == [(2, 528), (3, 568), (4, 608), (5, 3652), (6, 5945)]
    assert by["assignment"] == [(2, 528), (4, 1535), (5, 4542), (6, 5946)]
    # Stable: the coordinator's own Stable answer, once per epoch, at the sample
    assert by["Stable"] == [(2, 544), (4, 1635), (5, 4639), (6, 7046)]
    assert by["CompletingRebalance"] == [] and by["leader"] == []
    assert all(s.protocol == "consumer" for s in w.signals if s.kind != "revoked")
    assert [(s.state, s.generation) for s in w.signals if s.kind == "sample"] == [
        ("Stable", 2), ("Assigning", 4), ("Stable", 4), ("Assigning", 5), ("Stable", 5), ("Reconciling", 6),
        ("Reconciling", 6), ("Stable", 6)]
    assert {s.broker for s in w.signals if s.kind == "Stable"} == {1} and w.coordinator == 1
    assert [s.member for s in w.signals if s.kind == "joined"] == [M1, M0, M2, M2B]
    assert w.member_ids[M2B] == "consumer-2"


def test_a_members_new_epoch_is_not_the_group_reconciled(kip848: Replay):
    """consumer-1 reported epoch 5 at 4555 ms while consumer-0 had not reconciled (Stable only at 4639);
    at epoch 4 consumer-1 never reported 4 at all (it only lost partitions)."""
    classic_reading = kip848.watch(kip848=False)
    assert [(s.generation, kip848.ms(s)) for s in classic_reading.signals if s.kind == "Stable"] == \
        [(2, 534), (4, 1571), (5, 4555), (6, 6951)]
    w = kip848.watch()
    stable5 = next(s for s in w.signals if s.kind == "Stable" and s.generation == 5)
    assert kip848.ms(stable5) == 4639 and "Stable at group epoch 5" in stable5.line


def test_classic_lines_keep_their_signals(tmp_path: Path):
    r = Replay(tmp_path)
    ctx = "INFO [GroupCoordinator id=2 topic=__consumer_offsets partition=4] "
    r.lines([
        (636, 2, f"{ctx}Preparing to rebalance group {CLASSIC} in state PreparingRebalance with old generation 2 "
                 "(reason: Adding new member consumer-2-7e1cc72b-46dc-4393-83af-e11ff7187c1d with group instance id "
                 f"null; client reason: not provided).{MGR}"),
        (5958, 2, f"{ctx}Stabilized group {CLASSIC} generation 3 with 3 members.{MGR}"),
        (5967, 2, f"{ctx}Assignment received from leader consumer-1-c9a3efc0-dde8-4a7b-890c-b59e6180c242 for group "
                  f"{CLASSIC} for generation 3. The group has 3 members, 0 of which are static.{MGR}"),
    ])
    w = r.watch(CLASSIC, kip848=False)
    assert [(s.kind, s.generation, s.protocol, s.broker) for s in w.signals] == [
        ("PreparingRebalance", 2, "classic", 2), ("CompletingRebalance", 3, "classic", 2),
        ("leader", 3, "classic", 2)]
    assert w.samples is None  # classic runs read no samples
    # the leader's id came with no assignment yet: no member is known to hold it
    assert w.leader_name() is None
    # a black-box member records no assignment at all: named by its id's prefix among the run's members, the
    # longer name first (consumer-10's ids start with "consumer-1" too); a name that is no prefix stays unknown
    assert w.leader_name(["consumer-0", "consumer-10", "consumer-1"]) == "consumer-1"
    assert w.leader_name(["consumer-0", "consumer-2"]) is None
    r.emit([(5960, "consumer-1", Kind.ASSIGNED, {"group": CLASSIC, "partitions": [["t", 0]], "generation": 2,
                                                 "member_id": "consumer-1-0f27d3a2", "incremental": False}),
            (5961, "consumer-10", Kind.ASSIGNED, {"group": CLASSIC, "partitions": [["t", 1]], "generation": 2,
                                                  "member_id": "consumer-10-3ff17e7c", "incremental": False})])
    w = r.watch(CLASSIC, kip848=False)
    # consumer-1 rejoined under a new id its assigned event has not shown yet: named by the id's client-id prefix
    assert w.leader_name() == "consumer-1"


def test_an_after_fault_trigger_meets_the_rebalance_under_way_and_on_revoked_meets_a_loss(tmp_path: Path):
    # found exploring 4.4.0 and the black-box example: a bounced member back while its leave's rebalance was still
    # PreparingRebalance joined that rebalance (no new line), and a member waited for by on_revoked lost its
    # partitions (fenced) instead of revoking them; both faults never fired
    r = Replay(tmp_path)
    ctx = "INFO [GroupCoordinator id=2 topic=__consumer_offsets partition=4] "
    r.lines([
        (636, 2, f"{ctx}Preparing to rebalance group {CLASSIC} in state PreparingRebalance with old generation 2 "
                 "(reason: Removing member consumer-0-7e1cc72b on LeaveGroup; client reason: not provided).{MGR}"),
        (5958, 2, f"{ctx}Stabilized group {CLASSIC} generation 3 with 3 members.{MGR}"),
    ])
    r.emit([(3000, "consumer-2", Kind.LOST, {"group": CLASSIC, "partitions": [["t", 4]], "generation": 2,
                                             "member_id": "consumer-2-55aa", "incremental": False})])
    w = r.watch(CLASSIC, kip848=False)
    assert w.state_at(r.ns(600)) is None
    assert w.state_at(r.ns(1000)).kind == "PreparingRebalance"    # type: ignore[union-attr]
    assert w.state_at(r.ns(6000)).kind == "CompletingRebalance"   # type: ignore[union-attr]
    lost = _first(w, Trigger(on_revoked="consumer-2"), r.ns(0))
    assert lost is not None and r.ms(lost) == 3000 and "lost" in lost.line
    assert _first(w, Trigger(on_revoked="consumer-1"), r.ns(0)) is None

    def wait(state: str, w: LiveWatch = w) -> tuple[tuple[int, Signal | None] | None, FaultRecord]:
        """The interpreter's wait for ``state`` after f0, over (fired) now."""
        over = threading.Event()
        over.set()
        spec = FaultSpec.build(type="kill", target="coordinator", duration_s=1,
                               trigger={"state": state, "after_fault": "f0", "timeout_s": 0.2})
        nemesis = SimpleNamespace(_t0_ns=r.ns(0), cancel=threading.Event(), _over={"f0": over}, watch=w, _woke={},
                                  records={"f0": FaultRecord("f0", "bounce", "member", "at_s=1")})
        nemesis.records["f0"].fired = True
        rec = FaultRecord("f1", "kill", "coordinator", f"state={state}, after f0")
        return Nemesis._wait_trigger(nemesis, PlannedFault("f1", 1, 0, spec, None), rec), rec  # type: ignore[arg-type]

    # the group's last line is its Stabilized one: it is in CompletingRebalance as f0 is over
    (at, sig), rec = wait("CompletingRebalance")  # type: ignore[misc]
    assert at >= r.ns(6000) and sig is not None and sig.kind == "CompletingRebalance"
    assert sig.line.endswith(" [under way when f0 was over]") and "Stabilized group" in sig.line
    assert rec.intended_state == "CompletingRebalance"
    # not the state under way: waits for its next entry, which does not come here
    missed, rec = wait("PreparingRebalance")
    assert missed is None and rec.skipped_reason == "trigger not seen in 0.2s"
    # Stable is never met under way: the rejoin brings a rebalance of its own, whose Stable the trigger waits for
    r.emit([(6100, "consumer-1", Kind.ASSIGNED, {"group": CLASSIC, "partitions": [["t", 1]], "generation": 3,
                                                 "member_id": "consumer-1-0f27d3a2", "incremental": False})])
    stable = r.watch(CLASSIC, kip848=False)
    assert stable.state_at(r.ns(7000)).kind == "Stable"  # type: ignore[union-attr]
    missed, rec = wait("Stable", stable)
    assert missed is None and rec.skipped_reason == "trigger not seen in 0.2s"


# ------------------------------------------------------------------ triggers


def test_preparing_rebalance_fires_on_the_epoch_bump_the_kip848_run_missed(kip848: Replay):
    """coordinator-kill-preparing-eager under --group-protocol consumer: 'trigger not seen in 10.0s'.
    The member bounce at 1 s into the chaos phase bumped the epoch to 5: that is the rebalance."""
    w = kip848.watch()
    sig = _first(w, Trigger(state="PreparingRebalance"), kip848.ns(CHAOS_MS + NOT_BEFORE_MS))
    assert sig is not None and (sig.generation, kip848.ms(sig), sig.broker) == (5, 3652, 1)
    assert "Bumped group epoch to 5" in sig.line
    stable = _first(w, Trigger(state="Stable"), kip848.ns(CHAOS_MS + NOT_BEFORE_MS))
    assert stable is not None and (stable.generation, kip848.ms(stable)) == (5, 4639)


def test_after_epoch_fires_when_the_group_epoch_reaches_n(kip848: Replay):
    w = kip848.watch()
    for n, expected in ((1, (2, 528)), (4, (4, 608)), (5, (5, 3652)), (6, (6, 5945))):
        sig = _first(w, Trigger(after_epoch=n), 0)
        assert sig is not None and (sig.generation, kip848.ms(sig)) == expected, n
    late = _first(w, Trigger(after_epoch=5), kip848.ns(4000))  # the next bump at or past 5 after 4 s
    assert late is not None and late.generation == 6
    assert _first(w, Trigger(after_epoch=7), 0) is None
    # generations are classic time: a KIP-848 stream never satisfies after_generation
    assert _first(w, Trigger(after_generation=1), 0) is None


def test_after_epoch_ignores_classic_preparing_lines():
    classic = Signal("PreparingRebalance", 9, 1, 1, 2)
    assert not trigger_match(Trigger(after_epoch=2))(classic)
    assert trigger_match(Trigger(after_generation=2))(Signal("Stable", 2, 1, 1))
    assert trigger_match(Trigger(state="PreparingRebalance"))(classic)


# ------------------------------------------------------------------ landing


def _bump(w: LiveWatch, epoch: int) -> Signal:
    return next(s for s in w.signals if s.kind == "PreparingRebalance" and s.generation == epoch)


def test_preparing_landing_while_the_group_is_assigning(kip848: Replay):
    w = kip848.watch()
    landed, why = landing("PreparingRebalance", _bump(w, 5), w.signals, kip848.ns(3661))
    assert landed is True and "target assignment not yet computed: the group was Assigning" in why


def test_preparing_landing_while_members_reconcile(kip848: Replay):
    """Bump to 6 at 5945, target at 5946; a fault at 6000 ms: the sample written at 6048 may have been
    answered before the fault, the next one (6644, asked after it) is still Reconciling at epoch 6."""
    w = kip848.watch()
    landed, why = kip848_landing("PreparingRebalance", _bump(w, 6), w.signals, kip848.ns(6000))
    assert landed is True and "a sample asked after it (644.0 ms later) is Reconciling at epoch 6" in why


def test_the_first_sample_written_after_the_effect_is_not_trusted(kip848: Replay):
    """A fault at 6600 ms: the sample written at 6644 may have been answered before it; the next one is Stable."""
    w = kip848.watch()
    landed, why = kip848_landing("PreparingRebalance", _bump(w, 6), w.signals, kip848.ns(6600))
    assert landed is None and "first asked after: Stable at epoch 6" in why
    # an undescribed sample (the observer could not ask) written after the fault makes the next answer count
    kip848.emit([(6620, "observer", Kind.GROUP_STATE, {"group": GROUP, "state": "Unknown", "coordinator": None,
                                                       "protocol": None, "generation": None, "members": []})])
    w = kip848.watch()
    landed, why = kip848_landing("PreparingRebalance", _bump(w, 6), w.signals, kip848.ns(6600))
    assert landed is True and "(44.0 ms later) is Reconciling at epoch 6" in why


def test_preparing_landing_after_the_group_reconciled(kip848: Replay):
    w = kip848.watch()
    landed, why = landing("PreparingRebalance", _bump(w, 5), w.signals, kip848.ns(4700))
    assert landed is False and "Stable at epoch 5" in why


def test_preparing_landing_undecided_between_two_samples(kip848: Replay):
    """Target for 5 at 4542, a fault at 4600: the group may have reconciled before it (Stable written at 4639),
    and the next answer is already at epoch 6."""
    w = kip848.watch()
    landed, why = landing("PreparingRebalance", _bump(w, 5), w.signals, kip848.ns(4600))
    assert landed is None and "last before: Assigning at epoch 5" in why, why
    assert "first asked after: Reconciling at epoch 6" in why and "static" not in why, why


def test_a_static_replacement_leaves_the_verdict_open(kip848: Replay):
    kip848.lines([(6300, 1, _k("Static member with instance id i-2 re-joins the consumer group using the consumer "
                                "protocol. Created a new member AbCdEfGhIjKlMnOpQrStUv to replace the existing "
                                f"member {M2B}."))])
    w = kip848.watch()
    # without the replacement this is the Reconciling verdict above (landed): a replaced member restarts
    # at member epoch 0 within the same group epoch, so Reconciling after it says nothing of before it
    landed, why = landing("PreparingRebalance", _bump(w, 6), w.signals, kip848.ns(6000))
    assert landed is None and "a static member was replaced" in why


def test_stable_landing_until_the_next_epoch_bump(kip848: Replay):
    w = kip848.watch()
    stable4 = next(s for s in w.signals if s.kind == "Stable" and s.generation == 4)
    assert landing("Stable", stable4, w.signals, kip848.ns(1640))[0] is True
    landed, why = landing("Stable", stable4, w.signals, kip848.ns(3700))
    assert landed is False and "bumped to 5" in why and "48.0 ms before the effect" in why


def test_classic_landing_is_unchanged():
    trig = Signal("PreparingRebalance", 2, 1_000, 1_001, 2)
    completing = Signal("CompletingRebalance", 3, 5_000_000, 5_000_001, 2)
    assert landing("PreparingRebalance", trig, [trig, completing], 4_000_000) == \
        (True, "no CompletingRebalance signal between the trigger and the effect")
    assert landing("PreparingRebalance", trig, [trig, completing], 7_000_000) == \
        (False, "CompletingRebalance seen 2.0 ms before the effect")


# ------------------------------------------------------------------ load-time refusals

KIP848 = {"cluster": {"kafka_version": "4.4.0"}, "workload": {"consumers": [{"group_protocol": "consumer"}] * 2}}
CLASSIC_MEMBERS = {"cluster": {"kafka_version": "4.4.0"}, "workload": {"consumers": [{}, {}]}}


def _exp(base: dict, trigger: dict) -> dict:
    return {"name": "x", **base, "faults": [{"type": "kill", "target": "coordinator", "trigger": trigger}]}


@pytest.mark.parametrize("base, trigger, fragment", [
    (KIP848, {"state": "CompletingRebalance"},
     "faults.0.trigger.state: CompletingRebalance has no KIP-848 counterpart (no SyncGroup phase: the coordinator "
     "assigns): use state PreparingRebalance (the group epoch was bumped) or Stable"),
    (KIP848, {"after_generation": 3}, "faults.0.trigger.after_generation: a KIP-848 group counts group epochs, not "
                                      "generations: use after_epoch"),
    (CLASSIC_MEMBERS, {"after_epoch": 3}, "faults.0.trigger.after_epoch: group epochs exist for KIP-848 groups only"),
    ({"workload": {"consumers": [{}]}}, {"after_epoch": 3}, "use after_generation"),  # ZooKeeper, classic
    # one consumer-protocol member makes it a KIP-848 group
    ({"cluster": {"kafka_version": "4.4.0"}, "workload": {"consumers": [{}, {"group_protocol": "consumer"}]}},
     {"state": "CompletingRebalance"}, "has no KIP-848 counterpart"),
])
def test_triggers_without_meaning_for_the_protocol_are_refused_in_one_line(base, trigger, fragment):
    with pytest.raises(UsageError) as err:
        parse_experiment(_exp(base, trigger), "x.yaml")
    assert fragment in str(err.value) and "\n" not in str(err.value), err.value


def test_kip848_triggers_load():
    for trigger in ({"after_epoch": 4}, {"state": "PreparingRebalance"}, {"state": "Stable"}):
        exp = parse_experiment(_exp(KIP848, trigger), "x.yaml")
        assert exp.faults[0].trigger.kind == next(iter(trigger))
    assert parse_experiment(_exp(KIP848, {"after_epoch": 4}), "x.yaml").faults[0].trigger.describe() == "after_epoch=4"
    # classic members keep every classic trigger
    for trigger in ({"after_generation": 2}, {"state": "CompletingRebalance"}):
        parse_experiment(_exp(CLASSIC_MEMBERS, trigger), "x.yaml")
    with pytest.raises(UsageError, match="give exactly one of at_s, random, state, on_revoked, after_generation, "
                                         "after_epoch"):
        parse_experiment(_exp(KIP848, {"after_epoch": 4, "state": "Stable"}), "x.yaml")


def test_the_catalogue_under_kip848_refuses_only_completing_rebalance_triggers():
    from chaos.experiment import apply_overrides

    completing = set()
    for _, exp in catalogue():
        assert not isinstance(exp, UsageError), exp
        if not any(f.trigger.state == "CompletingRebalance" for f in exp.faults):
            continue
        completing.add(exp.name)
        with pytest.raises(UsageError, match=r"CompletingRebalance has no KIP-848 counterpart") as err:
            apply_overrides(exp, kafka_version="4.4.0", group_protocol="consumer")
        assert str(err.value).startswith(f"{exp.name} with --kafka-version 4.4.0 --group-protocol consumer: ")
    assert {"coordinator-kill-completing-eager", "coordinator-kill-completing-cooperative"} <= completing
    for name in ("coordinator-kill-preparing-eager", "coordinator-kill-stable-cooperative"):
        exp = next(e for _, e in catalogue() if not isinstance(e, UsageError) and e.name == name)
        apply_overrides(exp, kafka_version="4.4.0", group_protocol="consumer")


def test_chaos_run_refuses_completing_rebalance_under_kip848_with_exit_2(tmp_path: Path):
    res = subprocess.run([sys.executable, "-m", "chaos.cli", "run", "coordinator-kill-completing-eager",
                          "--kafka-version", "4.4.0", "--group-protocol", "consumer", "--out", str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert res.returncode == 2, res
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "CompletingRebalance has no KIP-848 counterpart" in lines[0], res.stderr
    assert not (tmp_path / "out").exists()
