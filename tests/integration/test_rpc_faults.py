"""Protocol-level faults (issue 33) on the session's real cluster: one member's OffsetCommit answers falsified
and delayed by the ``kafka`` toxic, the other member's traffic and every other API untouched.

One group, two members on their own lanes; consumer-1 is slow (a backlog in its client's queue) and commits
synchronously every ~100 ms. Two faults on consumer-1's lane, each acting on one OffsetCommit (``count: 1``):

* ``error`` OFFSET_METADATA_TOO_LARGE: the coordinator stores the commit (an OffsetFetch of our own over the
  control lane reads its offsets) while consumer-1 is told it failed, with exactly that error;
* ``delay`` 1500 ms: the commit is stored at once (read back, every 0.1 s, while its answer is held) and answered
  1.5 s or more after it was sent.

The toxic's own counts are the evidence that it acted on exactly one OffsetCommit each (``fault_verified`` stage
``acted``). The run is then judged.
"""

from __future__ import annotations

import time

from chaos.harness import ChaosTest
from chaos.history.event import Commit, FaultStart, FaultVerified
from chaos.model.faults import FaultSpec
from tests.waiting import live_events, wait_for

SLOW = "consumer-1"  # lane1: nobody else's traffic goes through its proxies
DELAY_MS = 1500


def _commits(run_dir, member: str) -> list[dict]:
    return live_events(run_dir, member, "commit")


def _ok_commit_after(run_dir, after_ns: int) -> bool:
    return any(c["outcome"] == "ok" and c["mono_ns"] > after_ns for c in _commits(run_dir, SLOW))


def test_one_members_offset_commits_answered_with_an_error_and_late(kafka_cluster, tmp_path):
    test = ChaosTest(kafka_cluster, tmp_path / "run", seed=33, partitions=4)
    reads: dict[str, dict] = {}
    during: list[tuple[int, dict]] = []
    try:
        group = test.consumer_group(members=2, processing_delay_ms=20, max_records=5)
        assert group.members == ["consumer-0", SLOW]
        test.producer(rate=200, count=2400)
        group.wait_assigned(60)
        wait_for(f"{SLOW}'s first acknowledged commit", lambda: _ok_commit_after(test.run_dir, 0), 60)
        assert test.run is not None and test.run.nemesis is not None
        falsify = FaultSpec.build(type="rpc", target="member", node=SLOW, api="OffsetCommit", action="error",
                                  error="OFFSET_METADATA_TOO_LARGE", count=1, duration_s=0)
        with test.run.nemesis.fire(falsify):
            time.sleep(1.5)  # consumer-1 commits every ~100 ms: the first one is answered with the error
            reads["error"] = test.cluster.admin.committed_offsets(test.workload.group)
        healed = time.monotonic_ns()
        wait_for(f"{SLOW} committing again", lambda: _ok_commit_after(test.run_dir, healed), 30)
        late = FaultSpec.build(type="rpc", target="member", node=SLOW, api="OffsetCommit", action="delay",
                               delay_ms=DELAY_MS, count=1, duration_s=0)
        with test.run.nemesis.fire(late):
            # the coordinator's offsets, read over the control lane while the delayed answer is held
            end = time.monotonic() + DELAY_MS / 1000 + 1.0
            while time.monotonic() < end:
                during.append((time.monotonic_ns(), test.cluster.admin.committed_offsets(test.workload.group)))
                time.sleep(0.1)
        verdict = test.finish()
    except BaseException:
        test.abort()
        raise
    h = test.history
    assert h is not None and verdict is not None
    starts = {e.fault_id: e for e in h.events if isinstance(e, FaultStart)}
    verified = {(e.fault_id, e.stage.value): e for e in h.events if isinstance(e, FaultVerified)}
    commits = [e for e in h.events if isinstance(e, Commit) and e.source == SLOW]
    others = [e for e in h.events if isinstance(e, Commit) and e.source != SLOW]

    for fid in ("t1", "t2"):
        assert verified[(fid, "effect")].ok, verified[(fid, "effect")].evidence
        assert verified[(fid, "healed")].ok, verified[(fid, "healed")].evidence
        acted = verified[(fid, "acted")]
        # the toxic's own count: one OffsetCommit (of the version librdkafka chose), on lane1 only
        assert acted.ok and "acted on 1 RPC(s) (OffsetCommit v" in acted.evidence, acted.evidence
        assert sorted(starts[fid].params["links"]) == ["lane1.broker-1", "lane1.broker-2", "lane1.broker-3"]
        assert starts[fid].params["api"] == "OffsetCommit"

    # error: consumer-1 was told its commit failed, with the injected error, and the coordinator stored it
    told = [c for c in commits if c.error_name == "OFFSET_METADATA_TOO_LARGE"]
    assert len(told) == 1, [(c.outcome.value, c.error_name) for c in commits if c.outcome.value != "ok"]
    (c1,) = told
    assert c1.outcome.value == "fail"
    assert all(reads["error"].get((t, p), -1) >= o for t, p, o in c1.offsets), (c1.offsets, reads["error"])
    assert not [c for c in others if c.error_name == "OFFSET_METADATA_TOO_LARGE"]

    # delay: the first commit sent under the fault was answered DELAY_MS late, and stored before its answer
    slow = [c for c in commits if c.mono_ns > starts["t2"].mono_ns and c.answered_ns is not None
            and c.answered_ns - c.mono_ns >= DELAY_MS * 1e6]
    assert slow, [(c.seq, (c.answered_ns or c.mono_ns) - c.mono_ns) for c in commits]
    c2 = slow[0]
    assert c2.outcome.value == "ok"
    assert c2.answered_ns is not None
    stored = [ns for ns, offs in during if c2.mono_ns < ns < c2.answered_ns
              and all(offs.get((t, p), -1) >= o for t, p, o in c2.offsets)]
    assert stored, (c2.offsets, [(ns - c2.mono_ns, offs) for ns, offs in during])

    results = {r.checker.value: r.valid.value for r in verdict.results}
    for name in ("delivery", "committed-offsets", "record-anomalies", "faults"):
        assert results.get(name) == "true", (name, results)
