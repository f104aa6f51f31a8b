"""Workload recording against a real cluster: workers, observer, history."""

import time
from collections import defaultdict

import pytest

from chaos.checkers.judge import judge_run
from chaos.cluster.admin import retry
from chaos.history.event import Kind
from chaos.history.reader import read_history
from chaos.lifecycle import Run
from chaos.model.experiment import Experiment, Phases
from chaos.model.workload import ConsumerSpec, ProducerSpec, WorkloadSpec
from chaos.workload.consumer import inflight_path
from chaos.workload.run import WorkloadRun


def _events(run_dir, name):
    from chaos.history.reader import EventTail
    return EventTail(run_dir / "events" / f"{name}.jsonl").poll()


def _first_stable_assignment(history):
    """Per member, its assignment in the first generation every member was assigned in."""
    by_gen = defaultdict(dict)
    for e in history.events:
        if e.kind is Kind.ASSIGNED:
            by_gen[e.generation][e.source] = set(e.partitions)
    return by_gen


@pytest.fixture
def run_dir(tmp_path):
    return tmp_path / "run"


def test_three_members_get_disjoint_assignments_in_one_generation_and_nothing_acked_is_lost(kafka_cluster, run_dir):
    exp = Experiment(name="workload", workload=WorkloadSpec(partitions=12, producers=(ProducerSpec(rate=300),)),
                     phases=Phases(warmup_s=0, chaos_s=3))
    with Run(kafka_cluster, exp, run_dir, seed=7) as run:
        run.execute()
    path = run_dir / "history.jsonl"
    h = read_history(path)
    by_gen = _first_stable_assignment(h)
    gen, owners = next((g, o) for g, o in sorted(by_gen.items()) if len(o) == 3)
    parts = [p for ps in owners.values() for p in ps]
    assert len(parts) == 12 and len(set(parts)) == 12  # disjoint and complete
    # the coordinator's own log says it stabilized that same generation
    stabilized = {e.generation for e in h.events if e.kind is Kind.BROKER_LOG and e.event.value == "stabilized"}
    assert gen in stabilized
    # every acknowledged record is in the final read
    acked = {(e.partition, e.offset) for e in h.events if e.kind is Kind.SEND_OK}
    final = {tuple(r) for e in h.events if e.kind is Kind.FINAL_READ for r in e.records}
    assert acked and acked <= final
    # consumed records carry the generation and member id the client reported
    consumed = [e for e in h.events if e.kind is Kind.CONSUMED]
    assert consumed and all(e.generation is not None and e.member_id for e in consumed)
    commits = [e for e in h.events if e.kind is Kind.COMMIT]
    assert commits and all(c.outcome.value == "ok" for c in commits)
    # __consumer_offsets, read after the run, holds every commit answered before that read, stored before its answer
    [stored] = [e for e in h.events if e.kind is Kind.STORED_OFFSETS]
    wall_minus_mono = int(stored.ts * 1e9) - stored.mono_ns
    appended: dict[tuple, int] = {}  # each value's first record (a value committed again keeps its first)
    for t, p, o, _log, ms in stored.stored:
        appended.setdefault((t, p, o), ms * 1_000_000 - wall_minus_mono)
    final_read_ns = next(e.mono_ns for e in h.events if e.kind is Kind.PHASE and e.name.value == "final_read")
    answered = [c for c in commits if c.answered_ns is not None and c.answered_ns < final_read_ns]
    assert answered
    for c in answered:
        for t, p, o in c.offsets:
            assert (t, p, o) in appended, (c, stored.log_partition)
            assert appended[(t, p, o)] <= c.answered_ns + 2_000_000, c  # ms stamps: 1 ms, and the wall/mono pair
    assert [log for *_, log, _ms in stored.stored] == sorted(log for *_, log, _ms in stored.stored)
    assert judge_run(run_dir).valid.value == "true"


def test_members_leaving_and_joining_produce_revokes_and_increasing_generations(kafka_cluster, run_dir):
    spec = WorkloadSpec(partitions=6, consumers=(ConsumerSpec(), ConsumerSpec()),
                        producers=(ProducerSpec(rate=100),))
    def newest(name):
        return max((e.generation or 0 for e in _events(run_dir, name) if e.kind is Kind.ASSIGNED), default=0)

    with WorkloadRun(kafka_cluster, spec, run_dir) as run:
        run.wait_assigned()
        # both members in one generation before anything changes
        retry(lambda: True if newest("consumer-0") == newest("consumer-1") > 0 else None,
              time.monotonic() + 30, "both members in the same generation")
        before = newest("consumer-0")
        run.kill_member("consumer-1", __import__("signal").SIGTERM)  # clean leave
        retry(lambda: True if newest("consumer-0") > before else None,
              time.monotonic() + 30, "a rebalance after the leave")
        after_leave = newest("consumer-0")
        run.start_member("consumer-1")  # rejoin
        retry(lambda: True if newest("consumer-0") > after_leave and newest("consumer-1") > after_leave else None,
              time.monotonic() + 30, "a rebalance after the rejoin")
        run.quiesce()
        path = run.close()
    h = read_history(path)
    gens = [e.generation for e in h.events if e.kind is Kind.ASSIGNED and e.source == "consumer-0"]
    assert len(gens) >= 3 and gens == sorted(gens) and len(set(gens)) == len(gens)
    assert any(e.kind is Kind.REVOKED and e.source == "consumer-0" for e in h.events)
    stops = [e for e in h.events if e.kind is Kind.MEMBER_STOP and e.source == "consumer-1"]
    assert stops[0].clean


def test_sigkilled_member_leaves_its_inflight_commit_unknown(kafka_cluster, run_dir):
    spec = WorkloadSpec(partitions=3,
                        # slower than the producer: librdkafka's prefetch queue keeps a backlog,
                        # so the member goes on processing and committing after its links go dark
                        consumers=(ConsumerSpec(lane="lane1", session_timeout_ms=30000, heartbeat_interval_ms=3000,
                                                processing_delay_ms=30, max_records=20),),
                        producers=(ProducerSpec(rate=50, lane="lane0"),))
    from chaos.cluster.toxiproxy import Stream, Toxic, ToxicType
    with WorkloadRun(kafka_cluster, spec, run_dir) as run:
        run.wait_assigned()
        retry(lambda: True if any(e.kind is Kind.COMMIT for e in _events(run_dir, "consumer-0")) else None,
              time.monotonic() + 30, "a first commit")
        # black-hole every link of lane1: the member's next commit can never be answered
        for link in kafka_cluster.links_of("lane1"):
            kafka_cluster.add_toxic(link, Toxic("hole", ToxicType.TIMEOUT, Stream.UPSTREAM, attributes={"timeout": 0}))
        inflight = inflight_path(run_dir, "consumer-0")
        retry(lambda: True if inflight.exists() and inflight.read_bytes() not in (b"[]", b"") else None,
              time.monotonic() + 30, "a commit in flight")
        run.kill_member("consumer-0")
        kafka_cluster.reset_links()
        path = run.close()
    h = read_history(path)
    mine = [e for e in h.events if e.source == "consumer-0"]
    unknown = [e for e in mine if e.kind is Kind.COMMIT and e.outcome.value == "unknown"]
    assert unknown and unknown[-1].error_name == "_KILLED_SIGKILL"
    assert mine[-1].kind is Kind.MEMBER_STOP and not mine[-1].clean and mine[-1].signal == "SIGKILL"


def test_a_member_fenced_by_its_static_twin_ends_and_says_so(kafka_cluster, run_dir):
    # KIP-345: two members with one group.instance.id; the coordinator fences one of them
    twin = ConsumerSpec(instance_id="twin", session_timeout_ms=6000, heartbeat_interval_ms=1000)
    spec = WorkloadSpec(partitions=6, consumers=(twin, twin.model_copy(update={"lane": "lane1"})),
                        producers=(ProducerSpec(rate=50),))
    with WorkloadRun(kafka_cluster, spec, run_dir, seed=3) as run:
        def fenced_member_gone():
            for name, proc in run.members.items():
                events = _events(run_dir, name)
                if not proc.alive() and any(e.kind is Kind.MEMBER_STOP and not e.clean for e in events):
                    return name, events
            return None

        name, events = retry(fenced_member_gone, time.monotonic() + 45, "the fenced twin to end")
        # it ended because the client said it was fenced, and recorded its own stop
        assert any(e.kind is Kind.ERROR and "fenced" in e.message.lower() for e in events), events
        survivor = next(n for n in run.members if n != name)
        assert run.members[survivor].alive()
