"""Targeted semantics that the fixtures do not pin down: client differences the checkers must tolerate."""

from __future__ import annotations

from chaos.checkers.registry import run_checkers
from chaos.checkers.result import Validity
from chaos.history import Header, History, from_dict
from chaos.model.checker_name import CheckerName

HEADER = Header(1, "t", 0, {}, {}, {})


def history(*events: dict) -> History:
    out = []
    for i, e in enumerate(events, 1):
        out.append(from_dict({"seq": i, "ts": float(i), "mono_ns": i * 10_000_000, **e}))
    return History(HEADER, tuple(out))


def own(kind: str, src: str, parts: list[int], gen: int | None, mid: str, incremental: bool = False) -> dict:
    return {"source": src, "kind": kind, "group": "g", "partitions": [["t", p] for p in parts], "generation": gen,
            "member_id": mid, "incremental": incremental}


def test_eager_revoke_tagged_with_the_new_generation_is_not_ownership_in_it():
    # Some clients report the generation of the join that follows an eager revocation.
    h = history(
        own("assigned", "consumer-0", [0], 1, "m0"),
        own("revoked", "consumer-0", [0], 2, "m0"),
        own("assigned", "consumer-1", [0], 2, "m1"),
        own("assigned", "consumer-0", [], 2, "m0"),
    )
    v = run_checkers(h, [CheckerName.OWNERSHIP_GENERATION, CheckerName.OWNERSHIP_TIME])
    assert v.valid is Validity.TRUE, [r.summary for r in v.results]


def test_cooperative_revoke_in_new_generation_still_owns_until_revoked():
    h = history(
        own("assigned", "consumer-0", [0], 1, "m0", incremental=True),
        own("revoked", "consumer-0", [0], 2, "m0", incremental=True),
        own("assigned", "consumer-1", [0], 2, "m1", incremental=True),
    )
    # Revoked before B got it: legal even within generation 2 in time, but it is the same
    # generation, which KIP-429 forbids (the move takes a second rebalance).
    r = run_checkers(h, [CheckerName.OWNERSHIP_GENERATION]).result(CheckerName.OWNERSHIP_GENERATION)
    assert r.valid is Validity.FALSE


def test_commit_with_newer_generation_than_observed_timeline_is_not_stale():
    h = history(
        {"source": "observer", "kind": "broker_log", "broker": 1, "group": "g", "event": "stabilized",
         "generation": 3, "member_id": None, "line": "Stabilized group g generation 3"},
        {"source": "consumer-0", "kind": "commit", "group": "g", "offsets": [["t", 0, 1]], "generation": 4,
         "member_id": "m0", "outcome": "ok", "error_code": None, "error_name": None, "auto": False},
    )
    assert run_checkers(h, [CheckerName.FENCING]).valid is Validity.TRUE


def test_fencing_unknown_without_timeline():
    h = history({"source": "consumer-0", "kind": "commit", "group": "g", "offsets": [["t", 0, 1]], "generation": 4,
                 "member_id": "m0", "outcome": "ok", "error_code": None, "error_name": None, "auto": False})
    assert run_checkers(h, [CheckerName.FENCING]).valid is Validity.UNKNOWN


def test_empty_history_is_vacuously_valid_or_unknown_never_a_crash():
    v = run_checkers(History(HEADER, ()))
    assert all(r.valid is not Validity.FALSE for r in v.results)
    assert not any("crashed" in r.summary for r in v.results), [r.summary for r in v.results]


# ---------------------------------------------------------------------- issue 18: counted by what they are


def sample(members: dict[str, list[int]], gen: int = 2, state: str = "Stable") -> dict:
    return {"source": "observer", "kind": "group_state", "group": "g", "state": state, "coordinator": 1,
            "protocol": "range", "generation": gen,
            "members": [{"member_id": m, "instance_id": None, "client_id": f"consumer-{m[1:]}", "host": "/127.0.0.1",
                         "assignment": [["t", p] for p in ps]} for m, ps in members.items()]}


def test_a_double_listing_seen_in_many_samples_is_counted_per_partition_not_per_sample():
    """The issue's "22 partition(s) owned by two members" for 2 partitions seen in 11 samples."""
    h = history(*[sample({"m0": [0, 1], "m1": [0, 1]}) for _ in range(11)])
    r = run_checkers(h, [CheckerName.OWNERSHIP_GENERATION]).result(CheckerName.OWNERSHIP_GENERATION)
    assert r.valid is Validity.FALSE
    assert r.summary.startswith("2 partition(s) owned by two members"), r.summary
    assert "1 member pair(s)" in r.summary and "11 sample(s)" in r.summary
    assert len(r.violations) == 2 and all("in 11 sample(s)" in f.description for f in r.violations)
    assert r.metrics["overlapping_partitions"] == 2 and r.metrics["samples_listing_twice"] == 11


def test_the_same_overlap_in_claims_and_samples_is_one_partition_and_one_pair():
    h = history(own("assigned", "consumer-0", [0], 1, "m0"), own("assigned", "consumer-1", [0], 1, "m1"),
                sample({"m0": [0], "m1": [0]}, gen=1), sample({"m0": [0], "m1": [0]}, gen=1))
    r = run_checkers(h, [CheckerName.OWNERSHIP_GENERATION]).result(CheckerName.OWNERSHIP_GENERATION)
    assert r.metrics["overlapping_partitions"] == 1 and r.metrics["overlap_pairs"] == 1, r.summary


def offsets(value: int) -> dict:
    return {"source": "observer", "kind": "committed_offsets", "group": "g", "coordinator": 1,
            "offsets": [["t", 0, value], ["t", 1, value]]}


def test_a_rollback_visible_in_many_samples_is_one_finding_per_partition():
    h = history(offsets(300), *[offsets(200) for _ in range(6)])
    r = run_checkers(h, [CheckerName.COMMITTED_OFFSETS]).result(CheckerName.COMMITTED_OFFSETS)
    assert r.valid is Validity.FALSE
    assert r.summary.startswith("2 partition(s) whose committed offset moved backwards"), r.summary
    assert len(r.violations) == 2 and all("by 6 observation(s)" in f.description for f in r.violations)
    assert all(f.evidence[0] == 1 and len(f.evidence) == 7 for f in r.violations)


def test_zombie_overlaps_are_counted_per_partition_and_member_pair():
    h = history(own("assigned", "consumer-0", [0, 1], 1, "m0"), own("assigned", "consumer-1", [0, 1], 2, "m1"),
                own("revoked", "consumer-1", [0, 1], 2, "m1"), own("assigned", "consumer-1", [0, 1], 3, "m1"))
    r = run_checkers(h, [CheckerName.OWNERSHIP_TIME]).result(CheckerName.OWNERSHIP_TIME)
    assert r.valid is Validity.FALSE
    # 4 windows (two partitions, twice), 2 partitions, one pair
    assert r.summary.startswith("2 partition(s) held by two members at once"), r.summary
    assert "1 member pair(s); 2 overlap(s), 4 finding(s)" in r.summary


# ---------------------------------------------------------------------- issue 18: evidence you can stand on


def test_an_unknown_sample_lists_nobody_and_is_no_evidence_of_eviction():
    h = history(own("assigned", "consumer-0", [0], 1, "m0"), own("assigned", "consumer-1", [0], 2, "m1"),
                {**sample({}, gen=None, state="Unknown"), "coordinator": None, "protocol": None},
                own("revoked", "consumer-0", [0], 1, "m0"))
    assert run_checkers(h, [CheckerName.OWNERSHIP_TIME]).valid is Validity.FALSE
    h = history(own("assigned", "consumer-0", [0], 1, "m0"), own("assigned", "consumer-1", [0], 2, "m1"),
                sample({"m1": [0]}), own("revoked", "consumer-0", [0], 1, "m0"))
    assert run_checkers(h, [CheckerName.OWNERSHIP_TIME]).valid is Validity.TRUE  # a real sample without m0


def fault(kind: str, fault_type: str) -> dict:
    base = {"source": "nemesis", "kind": kind, "fault_id": "f1", "fault_type": fault_type, "node": "consumer-0"}
    return base if kind == "fault_end" else {**base, "target_role": "member", "params": {}, "trigger": "at_s=1"}


def test_a_slow_link_is_named_as_such_beside_a_real_eviction_and_never_excuses_alone():
    failed = {"source": "observer", "kind": "broker_log", "broker": 1, "group": "g", "event": "member_failed",
              "generation": None, "member_id": "m0", "line": "Member m0 in group g has failed"}
    window = [own("assigned", "consumer-0", [0], 1, "m0"), fault("fault_start", "latency")]
    h = history(*window, own("assigned", "consumer-1", [0], 2, "m1"), own("revoked", "consumer-0", [0], 1, "m0"),
                fault("fault_end", "latency"))
    assert run_checkers(h, [CheckerName.OWNERSHIP_TIME]).valid is Validity.FALSE
    h = history(*window, failed, own("assigned", "consumer-1", [0], 2, "m1"),
                own("revoked", "consumer-0", [0], 1, "m0"), fault("fault_end", "latency"))
    r = run_checkers(h, [CheckerName.OWNERSHIP_TIME]).result(CheckerName.OWNERSHIP_TIME)
    assert r.valid is Validity.TRUE
    assert any("coordinator declared m0 failed (a latency fault" in f.description for f in r.findings), r.findings


def test_a_stale_assignment_delivered_after_an_eviction_makes_its_receiver_the_zombie():
    # found exploring the python-service example: consumer-0, paused past its session timeout after receiving
    # generation 4, was removed; consumer-1 held its partitions in generation 5; on resuming, consumer-0's app was
    # handed generation 4's assignment, then lost it 8 ms later
    failed = {"source": "observer", "kind": "broker_log", "broker": 1, "group": "g", "event": "member_failed",
              "generation": None, "member_id": "m0", "line": "Member m0 in group g has failed"}
    held = [own("assigned", "consumer-1", [0], 5, "m1")]
    stale = [own("assigned", "consumer-0", [0], 4, "m0"), own("lost", "consumer-0", [0], 4, "m0")]
    r = run_checkers(history(failed, *held, *stale), [CheckerName.OWNERSHIP_TIME]).result(CheckerName.OWNERSHIP_TIME)
    assert r.valid is Validity.TRUE, r.summary
    [note] = [f for f in r.findings if "stale" in f.description]
    assert ("consumer-0 was handed it at" in note.description and "in generation 4 while consumer-1 held it in "
            "generation 5 (a stale assignment)" in note.description
            and "zombie window explained: coordinator declared m0 failed" in note.description), note.description
    # no eviction of the receiver: a second owner, not a zombie
    r = run_checkers(history(*held, *stale), [CheckerName.OWNERSHIP_TIME]).result(CheckerName.OWNERSHIP_TIME)
    assert r.valid is Validity.FALSE and "no eviction of consumer-0 explains it" in r.findings[0].description
    # evicted, but its work in the stale generation was then accepted by the coordinator
    work = {"source": "consumer-0", "kind": "consumed", "group": "g", "topic": "t", "partition": 0, "offsets": [7],
            "generation": 4, "member_id": "m0"}
    commit = {"source": "consumer-0", "kind": "commit", "group": "g", "offsets": [["t", 0, 8]], "generation": 4,
              "member_id": "m0", "outcome": "ok", "error_code": None, "error_name": None, "auto": False}
    h = history(failed, *held, stale[0], work, commit, stale[1])
    r = run_checkers(h, [CheckerName.OWNERSHIP_TIME]).result(CheckerName.OWNERSHIP_TIME)
    assert r.valid is Validity.FALSE and "got an accepted commit" in r.findings[0].description, r.findings
    # the same generation order the other way round is the ordinary zombie: the older holder is the zombie
    r = run_checkers(history(*stale[:1], *held, stale[1]), [CheckerName.OWNERSHIP_TIME]).result(
        CheckerName.OWNERSHIP_TIME)
    assert r.valid is Validity.FALSE and "consumer-1 acquired it at" in r.findings[0].description


def test_an_assignment_known_only_within_an_interval_past_the_release_is_not_judged():
    """consumer-1's assignment was read late (ts_uncertain_ns 50 ms): it may have come after consumer-0's revoke
    10 ms after its lower bound, so the overlap is not certain."""
    late = {**own("assigned", "consumer-1", [0], 2, "m1"), "ts_uncertain_ns": 50_000_000}
    h = history(own("assigned", "consumer-0", [0], 1, "m0"), late, own("revoked", "consumer-0", [0], 1, "m0"))
    r = run_checkers(h, [CheckerName.OWNERSHIP_TIME]).result(CheckerName.OWNERSHIP_TIME)
    assert r.valid is Validity.TRUE and r.metrics["uncertain_windows"] == 1, r.summary
    exact = own("assigned", "consumer-1", [0], 2, "m1")
    h = history(own("assigned", "consumer-0", [0], 1, "m0"), exact, own("revoked", "consumer-0", [0], 1, "m0"))
    assert run_checkers(h, [CheckerName.OWNERSHIP_TIME]).valid is Validity.FALSE


def test_an_uncertain_commit_is_judged_by_fencing_over_its_whole_interval():
    """A Java commit read late (no JVM time) is stamped at the last JVM time before it, with ts_uncertain_ns up
    to its reading: sent in [mono_ns, mono_ns + ts_uncertain_ns]. Generation 1 was current at the lower end:
    legal. Stamped when read (after generation 2 stabilised), the same commit would read as stale."""
    log = {"source": "observer", "kind": "broker_log", "broker": 1, "group": "g", "member_id": None}

    def stabilized(gen: int) -> dict:
        return {**log, "event": "stabilized", "generation": gen, "line": f"Stabilized group g generation {gen}"}

    commit = {"source": "consumer-0", "kind": "commit", "group": "g", "offsets": [["t", 0, 1]], "generation": 1,
              "member_id": "m0", "outcome": "ok", "error_code": None, "error_name": None, "auto": False}
    uncertain = {**commit, "ts_uncertain_ns": 500_000_000, "answered_ns": 520_000_000}  # at position 2: 20 ms
    assert run_checkers(history(stabilized(1), uncertain, stabilized(2)), [CheckerName.FENCING]).valid is Validity.TRUE
    read_late = {**commit, "answered_ns": 31_000_000}  # at position 3: 30 ms, after generation 2
    h = history(stabilized(1), stabilized(2), read_late)
    assert run_checkers(h, [CheckerName.FENCING]).valid is Validity.FALSE


def test_a_replaced_coordinators_generation_does_not_make_the_new_ones_commits_stale():
    """Broker 1 was cut off: broker 2 loaded the group at generation 3 and accepts commits of 3, while broker 1,
    not knowing it was replaced, completes a join and logs generation 4 (never stored: the group never had it).
    Broker 1's line is not the group's generation. Near miss and bad case: the same commit after broker 2 itself
    logs generation 4 is stale."""
    log = {"source": "observer", "kind": "broker_log", "group": "g", "member_id": None}

    def commit(pos: int) -> dict:  # sent at its place in the history, answered 1 ms later
        return {"source": "consumer-2", "kind": "commit", "group": "g", "offsets": [["t", 0, 1]], "generation": 3,
                "member_id": "m2", "outcome": "ok", "error_code": None, "error_name": None, "auto": False,
                "answered_ns": pos * 10_000_000 + 1_000_000}

    def line(broker: int, event: str, gen: int) -> dict:
        return {**log, "broker": broker, "event": event, "generation": gen, "line": f"{event} g generation {gen}"}

    loaded = line(2, "loading", 3)
    replaced = history(line(1, "stabilized", 3), loaded, line(1, "stabilized", 4), commit(4))
    assert run_checkers(replaced, [CheckerName.FENCING]).valid is Validity.TRUE
    moved_on = history(line(1, "stabilized", 3), loaded, line(2, "stabilized", 4), commit(4))
    assert run_checkers(moved_on, [CheckerName.FENCING]).valid is Validity.FALSE
    # before any loading line, every broker's lines are the group's
    assert run_checkers(history(line(1, "stabilized", 3), line(1, "stabilized", 4), commit(3)),
                        [CheckerName.FENCING]).valid is Validity.FALSE
    # the old coordinator loading the group again is the coordinator again
    back = history(line(1, "stabilized", 3), loaded, line(1, "loading", 3), line(1, "stabilized", 4), commit(5))
    assert run_checkers(back, [CheckerName.FENCING]).valid is Validity.FALSE
