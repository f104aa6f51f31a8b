"""kafka-python 2.x and 3.x members in one group on a real cluster (issue 34): each records the generations the
coordinator handed out, read from whichever internals its release has.

Two members on kafka-python 2.2.15 (the last release pinned before 3.x), one on 2.3.3 (the last 2.x) and one on
the project's own 3.0.12 share a group (eager range assignor, synchronous commits); one 2.2.15 member is SIGKILLed
and started again, so the group rebalances twice. The 2.x members run
:mod:`chaos.workload.clients.kafka_python2`, the 3.x member :mod:`chaos.workload.clients.kafka_python`. Judged
by the checkers, and against the coordinator's own evidence: its log's ``Stabilized group G generation N``
lines and its DescribeGroups samples (which member id it held in which generation).
"""

from __future__ import annotations

from chaos.checkers.judge import judge_run
from chaos.checkers.result import Validity
from chaos.history.event import Assigned, BrokerLog, BrokerLogEvent, Commit, GroupStateSample, MemberStart
from chaos.history.reader import read_history
from chaos.model.experiment import Experiment
from chaos.runner import run_once

#: member -> the release it runs (None: the project's own kafka-python)
RELEASES = {"consumer-0": "2.2.15", "consumer-1": "2.2.15", "consumer-2": "2.3.3", "consumer-3": None}
OLD = [m for m, v in RELEASES.items() if v is not None]
KILLED = "consumer-0"


def _member(lane: str, release: str | None) -> dict:
    return {"client": "kafka-python", "assignor": "range", "commit_mode": "sync", "lane": lane,
            "session_timeout_ms": 6000, "heartbeat_interval_ms": 1000,
            **({"client_version": release} if release else {})}


def test_2x_members_record_the_coordinators_generations_across_a_rebalance(kafka_cluster, tmp_path):
    exp = Experiment.model_validate({
        "name": "kafka-python-releases",
        "workload": {"partitions": 6,
                     "consumers": [_member(f"lane{i % 2}", v) for i, v in enumerate(RELEASES.values())],
                     "producers": [{"rate": 100, "lane": "lane0"}]},
        # SIGKILLed at 1 s (the group rebalances once its session expires), started again 5 s later (it rejoins)
        "faults": [{"type": "kill", "target": "member", "node": KILLED, "trigger": {"at_s": 1}, "duration_s": 5}],
        "phases": {"warmup_s": 0.5, "chaos_s": 14, "quiesce_s": 30},
    })
    run_dir = run_once(kafka_cluster, exp, 5, tmp_path / "run")
    verdict = judge_run(run_dir, exp.checkers.names())
    results = {r.checker.value: r for r in verdict.results}
    for checker in ("generations", "ownership-generation", "ownership-time", "fencing", "delivery"):
        assert results[checker].valid is Validity.TRUE, (checker, results[checker].summary)
    # every other checker too, but the assignor's: a leader that has no metadata of the topic yet assigns nothing
    # and rejoins at once (kafka-python 3.0.12 alone in generation 1, 1 run in 3), a Stable generation with every
    # partition unassigned that it flags -- the library's assignment, not what this test is about
    assert all(r.valid is Validity.TRUE for r in verdict.results if r.checker.value != "assignor"), \
        [(r.checker.value, r.summary) for r in verdict.results if r.valid is not Validity.TRUE]

    h = read_history(run_dir / "history.jsonl")
    group = h.header.experiment["group"]
    starts = [e for e in h.events if type(e) is MemberStart]
    # every start of a member (the killed one twice) on the release it names; the default one on 3.x
    assert sorted(e.source for e in starts) == sorted([*RELEASES, KILLED])
    for e in starts:
        want = RELEASES[e.source]
        assert e.client.value == "kafka-python" and (e.client_version == want if want
                                                      else int(e.client_version.split(".")[0]) >= 3), e

    # the coordinator's generations: what its log says it stabilized, and whom it listed in each
    stabilized = {e.generation for e in h.events
                  if type(e) is BrokerLog and e.group == group and e.event is BrokerLogEvent.STABILIZED}
    listed = {(e.generation, m.client_id, m.member_id) for e in h.events
              if type(e) is GroupStateSample and e.group == group and e.state.value == "Stable" for m in e.members}
    assert stabilized and listed
    for member in OLD:
        assigned = [e for e in h.events if type(e) is Assigned and e.source == member]
        gens = [e.generation for e in assigned]
        assert gens and all(g is not None and g > 0 for g in gens), (member, gens)
        assert set(gens) <= stabilized, (member, gens, sorted(stabilized))
        # the member id recorded with a generation is the one the coordinator held for that member then
        for e in assigned:
            held = {m for g, c, m in listed if g == e.generation and c == member}
            assert not held or held == {e.member_id}, (member, e.generation, e.member_id, held)
        assert any((e.generation, member, e.member_id) in listed for e in assigned), member
        # across the rebalance(s) the generation only rises, and did rise
        assert gens == sorted(gens) and len(set(gens)) >= 2, (member, gens)
        # its accepted commits went out in generations it was assigned in
        ok = [c for c in h.events if type(c) is Commit and c.source == member and c.outcome.value == "ok"]
        assert ok and all(c.generation in set(gens) and c.member_id for c in ok), member
    # the killed member came back in a later generation, under a new member id
    _, again = sorted(e.mono_ns for e in starts if e.source == KILLED)
    before = [e for e in h.events if type(e) is Assigned and e.source == KILLED and e.mono_ns < again]
    after = [e for e in h.events if type(e) is Assigned and e.source == KILLED and e.mono_ns > again]
    assert before and after and after[0].generation > before[-1].generation, (before, after)
    assert {e.member_id for e in after}.isdisjoint({e.member_id for e in before})
