"""KIP-848 members (``group_protocol: consumer``) on a KRaft cluster of Kafka 4.4.0.

What a member records as its generation is its *member epoch*: librdkafka keeps it in the field it
serializes as group metadata, the Java client logs it (chaos.workload.clients.java). Here it is held
against the coordinator's own answer (ConsumerGroupDescribe, :func:`chaos.cluster.wire.describe_consumer_group`):
while the group is stable, each member's latest commit carries exactly the epoch and member id the
coordinator describes, and the partitions its assigned / revoked events leave it owning are the ones the
coordinator says it owns. A member frozen past the group's session timeout (``consumer.session.timeout.ms``
set per group, :meth:`chaos.cluster.admin.ClusterAdmin.set_group_config`) is fenced: it records ``lost`` in
the epoch it held and rejoins with a higher one.
"""

from __future__ import annotations

import signal
import time

import pytest

from chaos.cluster import wire
from chaos.cluster.admin import retry
from chaos.history.event import Kind
from chaos.history.reader import EventTail, read_history
from chaos.model.cluster import KRAFT_KAFKA_VERSION, ClusterSpec
from chaos.model.workload import ConsumerSpec, ProducerSpec, WorkloadSpec
from chaos.workload.run import WorkloadRun

SPEC = ClusterSpec.build(brokers=1, lanes=2, kafka_version=KRAFT_KAFKA_VERSION)
SESSION_MS = 3000
PARTITIONS = 6


@pytest.fixture
def kraft(_chaos_pool):
    cluster = _chaos_pool.get(SPEC)
    yield cluster
    cluster.heal()


def _events(run_dir, name):
    return EventTail(run_dir / "events" / f"{name}.jsonl").poll()


def _commits(run_dir, name) -> int:
    return sum(e.kind is Kind.COMMIT for e in _events(run_dir, name))


def _owned(events) -> set[int]:
    """Partitions a member owns after replaying its (incremental) assigned / revoked / lost events."""
    owned: set[int] = set()
    for e in events:
        if e.kind is Kind.ASSIGNED:
            owned |= {p for _, p in e.partitions}
        elif e.kind in (Kind.REVOKED, Kind.LOST):
            owned -= {p for _, p in e.partitions}
    return owned


def _stable(address: str, group: str):
    """The coordinator's view once both members own their whole target assignment (3 partitions each)."""
    view = wire.describe_consumer_group(address, group)
    members = view.members
    if (view.error_code == 0 and len(members) == 2 and view.group_epoch == view.assignment_epoch
            and all(len(m.assignment) == PARTITIONS // 2 and m.assignment == m.target_assignment for m in members)):
        return view
    return None


@pytest.mark.parametrize("second", ["confluent-kafka", "java"])
def test_kip848_members_record_the_member_epoch_the_coordinator_gives_them(kraft, tmp_path, second):
    members = tuple(ConsumerSpec(client=client, group_protocol="consumer", remote_assignor="uniform",
                                 session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500, lane=f"lane{i}")
                    for i, client in enumerate(("confluent-kafka", second)))
    spec = WorkloadSpec(partitions=PARTITIONS, replication=1, consumers=members, producers=(ProducerSpec(rate=100),))
    run_dir = tmp_path / "run"
    address = kraft.topology.listen(kraft.topology.link("ctl.broker-1"))  # the only broker: the coordinator
    with WorkloadRun(kraft, spec, run_dir) as run:
        run.wait_assigned(timeout=60)
        view = retry(lambda: _stable(address, run.group), time.monotonic() + 60, "both members stable")
        # commits keep flowing in the stable epochs; then the coordinator is asked again. Only commits recorded
        # after the stable view count: a member that joined first has earlier ones from the epoch before the
        # late joiner's (a Java member starts seconds after a librdkafka one), and its next commit may come
        # after the late joiner's third.
        before = {n: _commits(run_dir, n) for n in ("consumer-0", "consumer-1")}
        retry(lambda: True if all(_commits(run_dir, n) >= before[n] + 3 for n in before) else None,
              time.monotonic() + 30, "three more commits from both members")
        again = _stable(address, run.group)
        assert again is not None and again.members == view.members  # nothing moved meanwhile
        epochs = {m.member_id: (m.member_epoch, {p for _, p in m.assignment}) for m in view.members}
        held = {}
        for name in ("consumer-0", "consumer-1"):
            events = _events(run_dir, name)
            last = [e for e in events if e.kind is Kind.COMMIT][-1]
            assert last.outcome.value == "ok" and last.member_id in epochs, (name, last)
            epoch, partitions = epochs[last.member_id]
            assert last.generation == epoch > 0, (name, last.generation, epoch)
            assert _owned(events) == partitions, name
            held[name] = (epoch, last.member_id)
        assert {p for _, ps in epochs.values() for p in ps} == set(range(PARTITIONS))

        # freeze the second member past the group's session timeout: the coordinator fences it
        frozen = "consumer-1"
        run.kill_member(frozen, signal.SIGSTOP)
        try:
            retry(lambda: True if (v := wire.describe_consumer_group(address, run.group)).error_code == 0
                  and held[frozen][1] not in {m.member_id for m in v.members} else None,
                  time.monotonic() + 30, f"{frozen} to be fenced")
        finally:
            run.kill_member(frozen, signal.SIGCONT)
        retry(lambda: True if any(e.kind is Kind.LOST for e in _events(run_dir, frozen)) else None,
              time.monotonic() + 30, f"{frozen} to record its partitions lost")
        retry(lambda: _stable(address, run.group), time.monotonic() + 60, "both members stable again")
    history = read_history(run.close())

    mine = [e for e in history.events if e.source == frozen]
    (lost,) = [e for e in mine if e.kind is Kind.LOST]
    assert (lost.generation, lost.member_id) == held[frozen]  # the epoch it held when fenced
    rejoined = [e for e in mine if e.kind is Kind.ASSIGNED and e.seq > lost.seq and e.partitions]
    assert rejoined and all(e.generation > held[frozen][0] for e in rejoined)
    # an accepted commit names its epoch, unless the member's epoch moved while it was in flight: then what was
    # sent is not known and it names none (chaos.workload.consumer._sent_with). fc18 (a core busy): consumer-0's
    # commit sent at epoch 3 was answered 12 ms later, after the fencing of consumer-1 bumped it to 4.
    for c in history.events:
        if c.kind is Kind.COMMIT and c.outcome.value == "ok" and c.generation is None:
            own = [e for e in history.events if e.source == c.source and getattr(e, "generation", None) is not None]
            before = [e.generation for e in own if e.seq < c.seq]
            after = [e.generation for e in own if e.seq > c.seq]
            assert before and after and before[-1] != after[0], (c, before[-1:], after[:1])
    # none is accepted from the frozen member's fenced epoch after the loss
    assert not [c for c in mine if c.kind is Kind.COMMIT and c.seq > lost.seq and c.outcome.value == "ok"
                and c.generation == held[frozen][0]]


def test_a_crash_replaced_kip848_member_is_listed_by_the_coordinator(kraft, tmp_path):
    """crash_replace's heal evidence asks the coordinator for the replacement: for a KIP-848 group that is
    ConsumerGroupDescribe (DescribeGroups lists no member of it, and every such run was unknown: found by
    ``chaos explore`` on 4.4.0)."""
    from chaos.experiment import parse_experiment
    from chaos.runner import judge_once

    exp = parse_experiment({
        "name": "kip848-crash-replace", "cluster": SPEC.model_dump(mode="json"),
        "workload": {"partitions": 4, "replication": 1, "consumers": [
            {"lane": "lane0", "group_protocol": "consumer"}, {"lane": "lane1", "group_protocol": "consumer"}],
            "producers": [{"rate": 100, "lane": "lane0"}]},
        "faults": [{"type": "crash_replace", "target": "member", "node": "consumer-1", "trigger": {"at_s": 1}}],
        "phases": {"warmup_s": 1, "chaos_s": 8, "quiesce_s": 30}})
    oc = judge_once(kraft, exp, 848, tmp_path / "run")
    [fault] = oc.faults
    assert fault["effect_ok"] and fault["healed_ok"], fault
    assert oc.valid == "true", (oc.valid, oc.failed_checkers, oc.explanation)
