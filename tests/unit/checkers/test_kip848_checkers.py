"""The checkers other than fencing on KIP-848 groups: member epochs, group epochs, server-side assignors.

The fixtures (fixtures/histories/*-kip848-*.jsonl, judged in test_checker_fixtures.py) show each checker fires on a
bad history and passes its near miss; these tests pin down the rules behind them where the fixtures do not: what
is left undecided, which Kafka version gets which assignor rule, which classic rules must not apply.
"""

from __future__ import annotations

from typing import Any

from chaos.checkers import assignor, convergence, generations, ownership_generation, static_membership
from chaos.checkers.bounds import CheckerBounds, resolve
from chaos.checkers.coordinator import not_reconciled
from chaos.checkers.result import Validity
from chaos.history import GroupStateSample, Header, History, MemberStart, from_dict

MS = 1_000_000


def history(*events: dict[str, Any], kafka: str = "4.4.0") -> History:
    """Events with ``t`` (ms) for their CLOCK_MONOTONIC stamp, in time order."""
    out = []
    for i, e in enumerate(events, 1):
        fields = {k: v for k, v in e.items() if k != "t"}
        out.append(from_dict({"seq": i, "ts": e["t"] / 1e3, "mono_ns": e["t"] * MS, **fields}))
    return History(Header(1, "t", 0, {}, {"kafka": kafka}, {}), tuple(out))


def judge(module: Any, h: History) -> Any:
    starts = [e for e in h.events if isinstance(e, MemberStart)]
    return module.check(h, resolve(CheckerBounds(), h, starts))


def start(t: int, src: str, instance: str | None = None) -> dict[str, Any]:
    return {"t": t, "source": src, "kind": "member_start", "group": "g", "client": "confluent-kafka",
            "client_version": "2.16.1", "instance_id": instance, "assignor": "range", "protocol": "cooperative",
            "commit_mode": "sync", "session_timeout_ms": 6000, "max_poll_interval_ms": 30000,
            "auto_commit_interval_ms": None, "wrong_mode": None}


def stop(t: int, src: str, clean: bool) -> dict[str, Any]:
    return {"t": t, "source": src, "kind": "member_stop", "group": "g", "clean": clean,
            "signal": None if clean else "SIGKILL"}


def own(t: int, kind: str, src: str, mid: str, parts: list[int], epoch: int | None,
        incremental: bool = True) -> dict[str, Any]:
    return {"t": t, "source": src, "kind": kind, "group": "g", "partitions": [["t", p] for p in parts],
            "generation": epoch, "member_id": mid, "incremental": incremental}


def sample(t: int, members: dict[str, tuple[int, list[int]]], group_epoch: int, assignment_epoch: int | None = None,
           state: str = "Stable", protocol: str = "uniform",
           targets: dict[str, list[int]] | None = None) -> dict[str, Any]:
    """A ConsumerGroupDescribe sample: member id -> (member epoch, assignment); targets default to assignments."""
    return {"t": t, "source": "observer", "kind": "group_state", "group": "g", "state": state, "coordinator": 1,
            "protocol": protocol, "generation": group_epoch, "group_epoch": group_epoch,
            "assignment_epoch": group_epoch if assignment_epoch is None else assignment_epoch,
            "group_type": "consumer",
            "members": [{"member_id": m, "instance_id": None, "client_id": m, "host": "",
                         "assignment": [["t", p] for p in parts], "member_epoch": e,
                         "target_assignment": [["t", p] for p in (targets or {}).get(m, parts)]}
                        for m, (e, parts) in members.items()]}


def log(t: int, event: str, epoch: int | None = None, member_id: str | None = None, broker: int = 1) -> dict[str, Any]:
    return {"t": t, "source": "observer", "kind": "broker_log", "broker": broker, "group": "g", "event": event,
            "generation": epoch, "member_id": member_id, "line": event}


# --------------------------------------------------------------------------- ownership-generation


def test_overlap_with_a_member_listed_on_both_sides_is_a_violation() -> None:
    h = history(start(0, "consumer-0"), start(1, "consumer-1"), own(10, "assigned", "consumer-0", "m0", [0], 2),
                sample(20, {"m0": (2, [0])}, 2), sample(900, {"m0": (2, [0]), "m1": (3, [])}, 3),
                own(1000, "assigned", "consumer-1", "m1", [0], 3),
                sample(1100, {"m0": (2, [0]), "m1": (3, [])}, 3))
    r = judge(ownership_generation, h)
    assert r.valid is Validity.FALSE
    assert r.metrics["kip848_overlaps_current"] == 1


def test_overlap_the_samples_cannot_decide_is_unknown_not_true() -> None:
    # the last sample listing m0 is 5 s before, the next 5 s after: a blind spot, not evidence of anything
    h = history(start(0, "consumer-0"), start(1, "consumer-1"), own(10, "assigned", "consumer-0", "m0", [0], 2),
                sample(20, {"m0": (2, [0])}, 2), own(5000, "assigned", "consumer-1", "m1", [0], 3),
                sample(10000, {"m0": (2, [0]), "m1": (3, [])}, 3))
    r = judge(ownership_generation, h)
    assert r.valid is Validity.UNKNOWN
    assert "cannot tell" in r.summary


def test_member_leaving_between_samples_needs_the_coordinators_line_before_the_assignment() -> None:
    def run(removed_at: int) -> Validity:
        h = history(start(0, "consumer-0"), start(1, "consumer-1"), own(10, "assigned", "consumer-0", "m0", [0], 2),
                    sample(800, {"m0": (2, [0])}, 2),
                    log(removed_at, "member_failed", member_id="m0"),
                    own(1000, "assigned", "consumer-1", "m1", [0], 3),
                    sample(1200 if removed_at < 1200 else removed_at + 1, {"m1": (3, [0])}, 3))
        return judge(ownership_generation, h).valid

    assert run(900) is Validity.TRUE  # removed, then reassigned: m0 is a zombie (ownership-time's case)
    assert run(1100) is Validity.UNKNOWN  # the removal is logged after the reassignment: order unknown


# --------------------------------------------------------------------------- generations


def test_same_epoch_different_partitions_is_not_the_eager_rule_for_kip848() -> None:
    # a member waiting at its new epoch for unreleased partitions gets them later at the same epoch
    h = history(start(0, "consumer-0"), own(10, "assigned", "consumer-0", "m0", [0], 3, incremental=False),
                own(20, "assigned", "consumer-0", "m0", [0, 1], 3, incremental=False),
                sample(30, {"m0": (3, [0, 1])}, 3))
    assert judge(generations, h).valid is Validity.TRUE


def test_group_epoch_is_judged_on_every_usable_sample_not_only_stable_ones() -> None:
    h = history(start(0, "consumer-0"), sample(10, {"m0": (5, [0])}, 5, state="Reconciling"),
                sample(20, {"m0": (4, [0])}, 4, state="Assigning"))
    r = judge(generations, h)
    assert r.valid is Validity.FALSE
    assert "went back from 5 to 4" in r.findings[0].description


# --------------------------------------------------------------------------- convergence


def test_stable_is_converged_only_at_the_target_of_the_current_group_epoch() -> None:
    s = from_dict({"seq": 1, "ts": 0.0, "mono_ns": 0, **{k: v for k, v in sample(0, {"m0": (3, [0])}, 3).items()
                                                          if k != "t"}})
    assert isinstance(s, GroupStateSample) and not_reconciled(s) is None
    lagging = from_dict({"seq": 1, "ts": 0.0, "mono_ns": 0, **{k: v for k, v in sample(
        0, {"m0": (3, [0])}, 4, assignment_epoch=3).items() if k != "t"}})
    assert isinstance(lagging, GroupStateSample) and "assignment epoch 3" in (not_reconciled(lagging) or "")
    off_target = from_dict({"seq": 1, "ts": 0.0, "mono_ns": 0, **{k: v for k, v in sample(
        0, {"m0": (3, [0])}, 3, targets={"m0": [0, 1]}).items() if k != "t"}})
    assert isinstance(off_target, GroupStateSample) and "target" in (not_reconciled(off_target) or "")


def test_server_side_range_is_not_the_eager_client_side_range() -> None:
    # after convergence a Stable range sample without t-1's owner: an episode (converged again), not a violation
    members = {"m0": (3, [0, 1])}
    h = history(start(0, "consumer-0"), own(10, "assigned", "consumer-0", "m0", [0, 1], 3),
                sample(20, members, 3, protocol="range"),
                sample(30, {"m0": (3, [0])}, 3, protocol="range", targets={"m0": [0]}),
                sample(40, members, 3, protocol="range"), {"t": 50, "source": "runner", "kind": "phase",
                                                            "name": "teardown"})
    assert judge(convergence, h).valid is Validity.TRUE


# --------------------------------------------------------------------------- assignor


def noncontiguous(kafka: str) -> History:
    members = {"m0": (4, [0, 2]), "m1": (4, [1, 3])}
    return history(start(0, "consumer-0"), start(1, "consumer-1"), sample(10, members, 4, protocol="range"),
                   kafka=kafka)


def test_server_side_range_contiguity_is_judged_from_kafka_3_9() -> None:
    assert judge(assignor, noncontiguous("4.0.0")).valid is Validity.FALSE
    old = judge(assignor, noncontiguous("3.8.1"))
    assert old.valid is Validity.TRUE
    assert old.metrics["kip848_epochs_not_judged"] == 1 and "sticky" in old.summary


def test_a_sample_not_at_its_target_is_not_judged_by_the_assignor() -> None:
    members = {"m0": (4, [0, 1, 2]), "m1": (4, [3])}
    h = history(start(0, "consumer-0"), sample(10, members, 4, targets={"m0": [0, 1], "m1": [2, 3]}))
    r = judge(assignor, h)
    assert r.valid is Validity.TRUE and r.metrics["kip848_epochs_judged"] == 0


# --------------------------------------------------------------------------- static-membership


def test_killed_static_member_restart_is_not_judged_in_a_kip848_group() -> None:
    # a killed static member keeps its instance id until its session expires (UNRELEASED_INSTANCE_ID): the
    # rebalance that lets the restart in is expected
    h = history(start(0, "consumer-0", "i0"), own(10, "assigned", "consumer-0", "m0", [0], 2),
                sample(20, {"m0": (2, [0])}, 2), stop(100, "consumer-0", clean=False),
                start(200, "consumer-0", "i0"), log(6100, "member_failed", member_id="m0"),
                log(6110, "epoch_bumped", 3), own(6200, "assigned", "consumer-0", "m1", [0], 3),
                sample(6300, {"m1": (3, [0])}, 3))
    r = judge(static_membership, h)
    assert r.valid is Validity.TRUE
    assert r.metrics["kip848_killed_static_restarts"] == 1 and r.metrics["static_restarts_judged"] == 0


# --------------------------------------------------------------------------- generations across online migration


def _recreated_group(recreated: bool) -> History:
    """A consumer group at epoch 5 whose members all leave; the coordinator converts the *empty* group (4.4.0's
    "Converted the empty consumer group to a classic group", then back) and the new group counts from 1 again —
    shaped on a real run of classic-group-migrated-to-consumer-protocol."""
    middle = [log(3000, "group_recreated")] if recreated else []
    return history(start(0, "consumer-0"), own(100, "assigned", "consumer-0", "m0", [0, 1], 5),
                   sample(200, {"m0": (5, [0, 1])}, 5), stop(2000, "consumer-0", clean=True), *middle,
                   start(3100, "consumer-0"), log(3200, "epoch_bumped", 1), log(3300, "epoch_bumped", 2),
                   own(3400, "assigned", "consumer-0", "m9", [0, 1], 2), sample(3500, {"m9": (2, [0, 1])}, 2))


def test_an_empty_group_converted_starts_its_epochs_again() -> None:
    r = judge(generations, _recreated_group(recreated=True))
    assert r.valid is Validity.TRUE, r.summary


def test_epochs_starting_again_without_a_conversion_are_a_violation() -> None:
    r = judge(generations, _recreated_group(recreated=False))
    assert r.valid is Validity.FALSE, r.summary
    assert any("bumped the group epoch to 1 although group epoch 5" in f.description for f in r.findings), r.findings


# --------------------------------------------------------------------------- generations: a deposed coordinator


def _moved_coordinator(late_bump_by: int) -> History:
    """Broker 1 coordinates the group up to epoch 6; broker 2 loads it, bumps to 7, and a member and a sample
    show 7; then ``late_bump_by`` logs a bump to 7 again — shaped on an explored run (4.4.0, a reset of the
    coordinator's links)."""
    return history(start(0, "consumer-0"), log(100, "epoch_bumped", 6), own(200, "assigned", "consumer-0", "m0", [0], 6),
                   log(3000, "loading", broker=2), log(4000, "epoch_bumped", 7, broker=2),
                   own(4100, "assigned", "consumer-0", "m0", [0, 1], 7), sample(4200, {"m0": (7, [0, 1])}, 7),
                   log(6500, "epoch_bumped", 7, broker=late_bump_by),
                   log(7000, "epoch_bumped", 8, broker=2), own(7100, "assigned", "consumer-0", "m0", [0, 1], 8),
                   sample(7200, {"m0": (8, [0, 1])}, 8))


def test_a_deposed_coordinators_bump_is_not_judged() -> None:
    r = judge(generations, _moved_coordinator(late_bump_by=1))
    assert r.valid is Validity.TRUE, r.findings


def test_the_coordinator_that_loaded_the_group_bumping_to_a_durable_epoch_is_a_violation() -> None:
    r = judge(generations, _moved_coordinator(late_bump_by=2))
    assert r.valid is Validity.FALSE, r.summary
    assert any("broker 2 bumped the group epoch to 7 although group epoch 7" in f.description
               for f in r.findings), r.findings
