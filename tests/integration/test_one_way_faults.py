"""One-way link faults (issue 16 item 3) on the session's real cluster: requests arrive, responses are lost.

One group, two members on their own lanes; consumer-1 is slow (a backlog in its client's queue, so it
commits every ~100 ms, each commit synchronous). Two faults on consumer-1's lane, each shorter than its
session timeout:

* ``to_client`` black hole (Toxiproxy ``downstream`` only): the commit consumer-1 sends reaches the
  coordinator and is stored — an OffsetFetch of our own over the control lane during the fault, and the
  observer's samples, read exactly its offsets — while consumer-1 gets no answer before the fault ends
  (the toxic's removal closes the connection: Toxiproxy's ``TimeoutToxic.Cleanup``; the commit is then
  answered by a retry, or fails, after the fault);
* ``to_broker`` black hole (``upstream`` only): the commit never arrives — during the fault the stored
  offsets are still the last ones consumer-1 had acknowledged — and it is not answered within the fault
  either.

The effect evidence reads each toxic's stream back from Toxiproxy's API. The run is then judged: the
at-least-once checkers hold (a commit of unknown outcome is never counted for or against the member).
"""

from __future__ import annotations

import time

from chaos.harness import ChaosTest
from chaos.history.event import Commit, CommittedOffsets, FaultEnd, FaultStart, FaultVerified
from chaos.model.faults import FaultSpec
from tests.waiting import live_events, wait_for

SLOW = "consumer-1"  # lane1: nobody else's traffic goes through its proxies
FAULT_S = 2.5        # < session.timeout.ms (6 s): heartbeats that do not arrive must not cost the membership


def _commits(run_dir, member: str) -> list[dict]:
    return live_events(run_dir, member, "commit")


def _ok_commit_after(run_dir, member: str, after_ns: int) -> bool:
    return any(c["outcome"] == "ok" and c.get("answered_ns", c["mono_ns"]) > after_ns
               for c in _commits(run_dir, member))


def _one_way(test: ChaosTest, direction: str) -> dict[tuple[str, int], int]:
    """Black-hole ``SLOW``'s lane in ``direction`` for FAULT_S; the group's committed offsets read over
    the control lane in the middle of it (OffsetFetch at the coordinator)."""
    assert test.run is not None and test.run.nemesis is not None
    spec = FaultSpec.build(type="black_hole", target="member", node=SLOW, direction=direction, duration_s=0)
    with test.run.nemesis.fire(spec) as nodes:
        assert nodes == [SLOW]
        time.sleep(FAULT_S * 0.6)  # the commit sent at the fault has been stored (or dropped) by now
        during = test.cluster.admin.committed_offsets(test.workload.group)
        time.sleep(FAULT_S * 0.4)
    return during


def _answered(c: Commit) -> int:
    return c.answered_ns if c.answered_ns is not None else c.mono_ns  # None: answered at once


def _unanswered(commits: list[Commit], end: FaultEnd) -> list[Commit]:
    """The commits sent before the fault ended that got no answer before it ended (sync: at most one)."""
    return [c for c in commits if c.mono_ns < end.mono_ns < _answered(c)]


def test_a_commit_applied_but_never_answered_and_one_that_never_arrives(kafka_cluster, tmp_path):
    test = ChaosTest(kafka_cluster, tmp_path / "run", seed=16, partitions=4)
    try:
        group = test.consumer_group(members=2, processing_delay_ms=20, max_records=5)
        assert group.members == ["consumer-0", SLOW]
        test.producer(rate=200, count=2400)  # 12 s of records; each member processes ~50/s: a backlog
        group.wait_assigned(60)
        wait_for(f"{SLOW}'s first acknowledged commit", lambda: _ok_commit_after(test.run_dir, SLOW, 0), 60)
        to_client = _one_way(test, "to_client")
        healed = time.monotonic_ns()
        # the member is back (reconnected, answered) before the reverse fault
        wait_for(f"{SLOW} answered again after the fault", lambda: _ok_commit_after(test.run_dir, SLOW, healed), 30)
        to_broker = _one_way(test, "to_broker")
        verdict = test.finish()
    except BaseException:
        test.abort()
        raise
    h = test.history
    assert h is not None and verdict is not None
    starts = {e.fault_id: e for e in h.events if isinstance(e, FaultStart)}
    ends = {e.fault_id: e for e in h.events if isinstance(e, FaultEnd)}
    verified = {(e.fault_id, e.stage): e for e in h.events if isinstance(e, FaultVerified)}
    commits = [e for e in h.events if isinstance(e, Commit) and e.source == SLOW]

    # the evidence: Toxiproxy lists the toxic on the one stream only, on every proxy of lane1
    for fid, stream, other in (("t1", "downstream", "upstream"), ("t2", "upstream", "downstream")):
        eff = verified[(fid, "effect")]
        assert eff.ok and f"timeout on {stream} on 3/3 links, on {other} none" in eff.evidence, eff.evidence
        assert verified[(fid, "healed")].ok
        assert sorted(starts[fid].params["links"]) == ["lane1.broker-1", "lane1.broker-2", "lane1.broker-3"]
    assert "direction to_client" in verified[("t1", "effect")].evidence
    assert "direction to_broker" in verified[("t2", "effect")].evidence

    # to_client: the request arrived and was applied, the answer never came within the fault
    held = _unanswered(commits, ends["t1"])
    assert len(held) == 1, f"to_client: commits without an answer in the fault: {held}"
    (c1,) = held
    stored = {(t, p): o for t, p, o in c1.offsets}
    assert {tp: to_client.get(tp) for tp in stored} == stored, (
        f"to_client: commit {c1.offsets} (seq {c1.seq}) not stored at the coordinator: {to_client}")
    seen = [s for s in h.events if isinstance(s, CommittedOffsets) and c1.mono_ns < s.mono_ns < ends["t1"].mono_ns]
    assert any(all((t, p, o) in s.offsets for t, p, o in c1.offsets) for s in seen), (
        f"to_client: no observer sample in the fault shows {c1.offsets}: {[s.offsets for s in seen]}")
    # no commit of consumer-1 was answered in the fault after this one was sent
    assert not [c for c in commits if c1.mono_ns < c.mono_ns and _answered(c) < ends["t1"].mono_ns]

    # to_broker: the request never arrived: the stored offsets are the last acknowledged ones
    held = _unanswered(commits, ends["t2"])
    assert len(held) == 1, f"to_broker: commits without an answer in the fault: {held}"
    (c2,) = held
    acked: dict[tuple[str, int], int] = {}
    for c in commits:
        if c.outcome.value == "ok" and _answered(c) < ends["t2"].mono_ns:
            acked.update({(t, p): o for t, p, o in c.offsets})
    for t, p, o in c2.offsets:
        assert to_broker.get((t, p)) != o, f"to_broker: commit {c2.offsets} (seq {c2.seq}) was stored: {to_broker}"
        assert to_broker.get((t, p)) == acked.get((t, p)), (t, p, to_broker, acked)

    # the history holds both commits without a definite answer in their faults, and the run is judged valid:
    # an unknown or late commit is never counted for or against the member
    results = {r.checker.value: r.valid.value for r in verdict.results}
    for name in ("delivery", "committed-offsets", "record-anomalies", "faults"):
        assert results.get(name) == "true", (name, results)
