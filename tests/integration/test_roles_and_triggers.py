"""Role targets and member-event triggers, checked against what Kafka and the members recorded.

The nemesis says whom it hit and when; these tests confirm it from other
sources: the coordinator's own log ("Assignment received from leader M" names
the group leader), the coordinator's DescribeGroups samples (the members'
subscriptions), and the members' own events (revocations, generations).
"""

import json
import re
from pathlib import Path

from chaos.checkers.judge import judge_run
from chaos.checkers.result import Validity
from chaos.experiment import load_experiment, parse_experiment
from chaos.history import read_history
from chaos.history.event import Kind
from chaos.runner import run_once

ROOT = Path(__file__).resolve().parents[2]
LEADER_LINE = re.compile(r"Assignment received from leader (\S+) for group (\S+) for generation (\d+)")


def _faults(run_dir: Path) -> list[dict]:
    """faults.json in the experiment's order (f0, f1, ...)."""
    return sorted(json.loads((run_dir / "faults.json").read_text()), key=lambda f: int(f["fault_id"][1:]))


def _leader_before(run_dir: Path, group: str, ts: float) -> str | None:
    """The member id the coordinator last named as group leader before wall time ``ts`` (any broker's log)."""
    best: tuple[str, str] | None = None
    for log in (run_dir / "logs").glob("broker-*.log"):
        for line in log.read_text(errors="replace").splitlines():
            m = LEADER_LINE.search(line)
            if m and m.group(2) == group:
                stamp = line[1:24]  # "[2026-11-22 02:50:01,123]"
                if best is None or stamp > best[0]:
                    if _wall(stamp) <= ts:
                        best = (stamp, m.group(1))
    return best[1] if best else None


def _wall(stamp: str) -> float:
    import datetime as dt
    return dt.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def test_subscription_change_on_the_group_leader_and_a_random_member(kafka_cluster, tmp_path):
    exp = load_experiment(ROOT / "experiments" / "subscription-changed.yaml")
    run_dir = run_once(kafka_cluster, exp, 7, tmp_path / "run")
    widen, leave = _faults(run_dir)
    assert widen["fired"] and widen["effect_ok"] and widen["healed_ok"], widen
    assert leave["fired"] and leave["effect_ok"] and leave["healed_ok"], leave
    h = read_history(run_dir / "history.jsonl")
    group, topic = h.header.experiment["group"], h.header.experiment["topic"]
    extra = f"{topic}-extra"
    starts = {e.fault_id: e for e in h.events if e.kind is Kind.FAULT_START}
    ends = {e.fault_id: e for e in h.events if e.kind is Kind.FAULT_END}

    # group_leader resolved to the member the coordinator's log names as leader at that moment
    names = {e.member_id: e.source for e in h.events if e.kind is Kind.ASSIGNED and e.member_id}
    start = starts[widen["fault_id"]]
    assert names.get(_leader_before(run_dir, group, start.ts)) == widen["nodes"][0]

    # the coordinator held each requested subscription during the fault, and the original after it
    def subs_of(member: str, lo: int, hi: int) -> set[tuple[str, ...]]:
        return {m.subscription for e in h.events if e.kind is Kind.GROUP_STATE and lo <= e.mono_ns <= hi
                for m in e.members if m.client_id == member}

    for rec, want in ((widen, (topic, extra)), (leave, (extra,))):
        member, fid = rec["nodes"][0], rec["fault_id"]
        assert tuple(sorted(want)) in subs_of(member, starts[fid].mono_ns, ends[fid].mono_ns), rec
    # (member metadata is only described once a protocol is chosen: Stable samples)
    last_sample = [e for e in h.events if e.kind is Kind.GROUP_STATE and e.members and e.state.value == "Stable"][-1]
    assert {m.subscription for m in last_sample.members} == {(topic,)}
    # the widened member really consumed assignments of the second topic; the other one gave its up
    assert any(e.kind is Kind.ASSIGNED and e.source == widen["nodes"][0] and any(t == extra for t, _ in e.partitions)
               for e in h.events)
    assert any(e.kind is Kind.REVOKED and e.source == leave["nodes"][0] and any(t == topic for t, _ in e.partitions)
               and e.mono_ns > starts[leave["fault_id"]].mono_ns for e in h.events)

    verdict = judge_run(run_dir, exp.checkers.names())
    assert all(r.valid is Validity.TRUE for r in verdict.results), [r.summary for r in verdict.results]


def test_on_revoked_and_after_generation_triggers_fire_on_the_members_events(kafka_cluster, tmp_path):
    exp = parse_experiment({
        "name": "member-triggers",
        "cluster": {"brokers": 3, "zookeepers": 1, "lanes": 3},
        "workload": {"partitions": 6, "consumers": [{"lane": f"lane{i}", "session_timeout_ms": 6000,
                                                     "heartbeat_interval_ms": 1000} for i in range(3)],
                     "producers": [{"rate": 100, "lane": "lane0"}]},
        "faults": [
            # consumer-0 leaves cleanly and rejoins: every member is revoked, the generation moves on
            {"type": "bounce", "target": "member", "node": "consumer-0", "trigger": {"at_s": 1}, "duration_s": 2},
            # fires on consumer-1's revocation caused by that bounce
            {"type": "latency", "target": "member", "node": "consumer-2", "params": {"latency_ms": 50},
             "trigger": {"on_revoked": "consumer-1", "not_before_s": 0.5, "timeout_s": 20}, "duration_s": 1},
            # fires at the first Stable generation (>= 1) once the bounce is over (consumer-0 started again): the
            # one its rejoin makes; a random member then is never one on its way out
            {"type": "pause", "target": "random_member", "trigger": {"after_generation": 1, "after_fault": "f0",
                                                                     "timeout_s": 20}, "duration_s": 1},
            # generation 99 is never reached in this run
            {"type": "latency", "target": "member", "node": "consumer-1", "params": {"latency_ms": 50},
             "trigger": {"after_generation": 99, "timeout_s": 8}, "duration_s": 1},
        ],
        "phases": {"warmup_s": 1, "chaos_s": 12, "quiesce_s": 60},
    }, "member-triggers")
    run_dir = run_once(kafka_cluster, exp, 5, tmp_path / "run")
    bounce, on_revoked, after_gen, never = _faults(run_dir)
    h = read_history(run_dir / "history.jsonl")
    assert bounce["fired"], bounce
    starts = {e.fault_id: e for e in h.events if e.kind is Kind.FAULT_START}

    # on_revoked: injected after consumer-1's first revocation (or loss) of the chaos phase, within a short delay
    assert on_revoked["fired"] and on_revoked["effect_ok"], on_revoked
    chaos_ns = next(e.mono_ns for e in h.events if e.kind is Kind.PHASE and e.name.value == "chaos")
    revoked = [e for e in h.events if e.kind in (Kind.REVOKED, Kind.LOST) and e.source == "consumer-1"
               and e.mono_ns >= chaos_ns + 0.5e9]
    start = starts[on_revoked["fault_id"]]
    assert revoked and revoked[0].mono_ns <= start.mono_ns, on_revoked
    assert (start.mono_ns - revoked[0].mono_ns) / 1e6 < 1000, on_revoked

    # after_generation with after_fault: injected after the first assignment of a new generation seen once the
    # bounce was over (its fault_end: consumer-0 started again), i.e. the generation of consumer-0's rejoin
    assert after_gen["fired"] and after_gen["effect_ok"] and after_gen["healed_ok"], after_gen
    assert "after f0" in after_gen["trigger"], after_gen
    start = starts[after_gen["fault_id"]]
    bounce_over = next(e.mono_ns for e in h.events if e.kind is Kind.FAULT_END and e.fault_id == bounce["fault_id"])
    first_of_gen: dict[int, int] = {}
    for e in h.events:
        if e.kind is Kind.ASSIGNED and e.generation is not None:
            first_of_gen.setdefault(e.generation, e.mono_ns)
    due = min(ns for g, ns in first_of_gen.items() if g >= 1 and ns >= bounce_over)
    assert bounce_over <= due <= start.mono_ns and (start.mono_ns - due) / 1e6 < 1000, after_gen
    assert after_gen["nodes"][0] in {"consumer-0", "consumer-1", "consumer-2"}

    # a generation never reached: recorded as not fired, and nothing injected
    assert not never["fired"] and "not seen" in (never["skipped_reason"] or ""), never
    assert never["fault_id"] not in starts
    verdict = judge_run(run_dir, exp.checkers.names())
    # the group kept every promise, but the run did not test everything it planned: not a pass
    assert all(r.valid is Validity.TRUE for r in verdict.results if r.checker.value != "faults"), \
        [r.summary for r in verdict.results]
    faults = verdict.result("faults")
    assert faults.valid is Validity.UNKNOWN and f"fault {never['fault_id']} never fired" in faults.summary, \
        faults.summary
    assert verdict.valid is Validity.UNKNOWN
