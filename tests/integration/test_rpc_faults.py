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

The second test loses and copies one OffsetCommit each, on a member whose client gives up on an unanswered
request after ``request_timeout_ms``:

* ``drop_request``: the coordinator never stores the lost commit (read back every 0.1 s until the member's client
  has given up on it), and the member sees it unanswered for at least its request timeout;
* ``drop_response``: the coordinator stores it at once, and the member still sees it unanswered that long;
* ``duplicate_request``: the coordinator answers both copies (the toxic counts the copy's answer, which it drops),
  and the member sees one ordinary answer.
"""

from __future__ import annotations

import re
import time
from datetime import datetime

from chaos.harness import ChaosTest
from chaos.history.event import Commit, FaultStart, FaultVerified
from chaos.model.fault_traits import FaultTrait
from chaos.model.faults import FaultSpec
from tests.waiting import live_events, wait_for

SLOW = "consumer-1"  # lane1: nobody else's traffic goes through its proxies
DELAY_MS = 1500


def _commits(run_dir, member: str) -> list[dict]:
    return live_events(run_dir, member, "commit")


def _ok_commit_after(run_dir, after_ns: int) -> bool:
    return any(c["outcome"] == "ok" and c["mono_ns"] > after_ns for c in _commits(run_dir, SLOW))


def _read_offsets(test: ChaosTest, seconds: float) -> list[tuple[int, dict]]:
    """The coordinator's committed offsets of the group, read over the control lane every 0.1 s for ``seconds``."""
    assert test.workload is not None
    out = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        out.append((time.monotonic_ns(), test.cluster.admin.committed_offsets(test.workload.group)))
        time.sleep(0.1)
    return out


def _covers(offsets: dict, commit) -> bool:
    """The coordinator's offsets (an OffsetFetch of ours) are at or past every offset of ``commit``."""
    return all(offsets.get((t, p), -1) >= o for t, p, o in commit.offsets)


def test_one_members_offset_commits_answered_with_an_error_and_late(kafka_cluster, tmp_path):
    test = ChaosTest(kafka_cluster, tmp_path / "run", seed=33, partitions=4)
    reads: dict[str, dict] = {}
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
            during = _read_offsets(test, DELAY_MS / 1000 + 1.0)  # while the delayed answer is held
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


REQUEST_TIMEOUT_MS = 4000


def test_one_members_offset_commit_lost_on_the_way_out_lost_on_the_way_back_and_copied(kafka_cluster, tmp_path):
    test = ChaosTest(kafka_cluster, tmp_path / "run", seed=34, partitions=4)
    reads: dict[str, list[tuple[int, dict]]] = {}
    try:
        group = test.consumer_group(members=2, processing_delay_ms=20, max_records=5,
                                    request_timeout_ms=REQUEST_TIMEOUT_MS)
        test.producer(rate=200, count=3000)
        group.wait_assigned(60)
        wait_for(f"{SLOW}'s first acknowledged commit", lambda: _ok_commit_after(test.run_dir, 0), 60)
        assert test.run is not None and test.run.nemesis is not None
        for action in ("drop_request", "drop_response", "duplicate_request"):
            spec = FaultSpec.build(type="rpc", target="member", node=SLOW, api="OffsetCommit", action=action,
                                   count=1, duration_s=0)
            with test.run.nemesis.fire(spec):
                # consumer-1's next commit (it commits every ~0.1 s) is the one the fault acts on; a lost one is
                # given up on REQUEST_TIMEOUT_MS after it was sent
                reads[action] = _read_offsets(
                    test, 1.5 + (REQUEST_TIMEOUT_MS / 1000 if action.startswith("drop") else 0))
        verdict = test.finish()
    except BaseException:
        test.abort()
        raise
    h = test.history
    assert h is not None and verdict is not None
    starts = {e.params["action"]: e for e in h.events if isinstance(e, FaultStart)}
    acted = {e.fault_id: e for e in h.events if isinstance(e, FaultVerified) and e.stage.value == "acted"}
    commits = [e for e in h.events if isinstance(e, Commit) and e.source == SLOW]
    timeout_s = REQUEST_TIMEOUT_MS / 1000

    def acted_on(action: str) -> Commit:
        """The commit the fault acted on (count 1): the last one consumer-1 sent before the toxic acted, by the
        toxic's own clock ("from <first> to <last>" in its evidence; a commit is stamped before it is sent). Not
        bounded below by the fault's start: ``fault_start`` is stamped once the toxics are on every link, and a
        commit sent meanwhile over a link that has them already is acted on (seen in a busy run)."""
        ev = acted[starts[action].fault_id]
        assert ev.ok and "acted on 1 RPC(s) (OffsetCommit v" in ev.evidence, (action, ev.evidence)
        m = re.search(r" from (\S+)\.(\d+)Z to ", ev.evidence)
        assert m, ev.evidence
        at = datetime.fromisoformat(m[1] + "+00:00").timestamp() + float("0." + m[2])
        return [c for c in commits if c.ts <= at][-1]

    def waited(c: Commit) -> float:
        return ((c.answered_ns or c.mono_ns) - c.mono_ns) / 1e9

    def stored(action: str, c: Commit) -> list[int]:
        """When (ms after it was sent) the coordinator was read holding ``c``'s offsets, before the client could
        have given up on it and sent it again."""
        until = c.mono_ns + int(timeout_s * 0.9 * 1e9)
        return [(ns - c.mono_ns) // 10**6 for ns, offs in reads[action] if c.mono_ns < ns < until and _covers(offs, c)]

    drop_req, drop_resp, dup = (acted_on(a) for a in ("drop_request", "drop_response", "duplicate_request"))
    # what each fault did, as the checkers read it (convergence counts from a lost request's timeout): the two
    # drops lose a request, the copy loses none
    assert {a: FaultTrait.LOSES_REQUESTS in e.effects for a, e in starts.items()} == {
        "drop_request": True, "drop_response": True, "duplicate_request": False}
    # the client saw both lost commits unanswered for its request timeout (librdkafka then sends them again); the
    # copied one answered as usual
    assert waited(drop_req) >= timeout_s * 0.9, (waited(drop_req), drop_req)
    assert waited(drop_resp) >= timeout_s * 0.9, (waited(drop_resp), drop_resp)
    assert dup.outcome.value == "ok" and waited(dup) < timeout_s / 2, (waited(dup), dup)
    # the broker: the lost request was never stored, the lost answer's commit was, and the copy was answered
    assert not stored("drop_request", drop_req), (drop_req.offsets, reads["drop_request"])
    assert stored("drop_response", drop_resp), (drop_resp.offsets, reads["drop_response"])
    assert "the broker answered 1 of the copies" in acted[starts["duplicate_request"].fault_id].evidence

    results = {r.checker.value: r.valid.value for r in verdict.results}
    for name in ("delivery", "committed-offsets", "record-anomalies", "faults"):
        assert results.get(name) == "true", (name, results)
