"""Checkers read what a fault does from the history (``fault_start.traits``), never which kind it was.

A kind the checkers have never heard of is judged by its recorded traits; a kind's name alone changes
nothing; a history recorded before traits were reads them from ``LEGACY_TRAITS``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import chaos.checkers
from chaos.checkers.registry import run_checkers
from chaos.checkers.result import Validity
from chaos.history import Header, History, from_dict, to_dict
from chaos.history.event import LEGACY_TRAITS
from chaos.model.checker_name import CheckerName
from chaos.model.fault_traits import FaultTrait
from chaos.model.faults import FaultSpec
from chaos.nemesis.kinds import kinds

HEADER = Header(1, "t", 0, {}, {}, {})


def history(*events: dict) -> History:
    return History(HEADER, tuple(from_dict({"seq": i, "ts": float(i), "mono_ns": i * 10_000_000, **e})
                                 for i, e in enumerate(events, 1)))


def start(fault_type: str, traits: list[str] | None, node: str = "consumer-0") -> dict:
    e = {"source": "nemesis", "kind": "fault_start", "fault_id": "f1", "fault_type": fault_type, "node": node,
         "target_role": "member", "params": {}, "trigger": "at_s=1"}
    return e if traits is None else {**e, "traits": traits}


def end(fault_type: str, node: str = "consumer-0") -> dict:
    return {"source": "nemesis", "kind": "fault_end", "fault_id": "f1", "fault_type": fault_type, "node": node}


def own(kind: str, src: str, gen: int, mid: str) -> dict:
    return {"source": src, "kind": kind, "group": "g", "partitions": [["t", 0]], "generation": gen,
            "member_id": mid, "incremental": False}


FAILED = {"source": "observer", "kind": "broker_log", "broker": 1, "group": "g", "event": "member_failed",
          "generation": None, "member_id": "m0", "line": "Member m0 in group g has failed"}


def test_no_checker_names_a_fault_kind():
    """Every string literal of every checker module is compared with every registered kind's name."""
    names = set(kinds())
    found = []
    for path in sorted(Path(chaos.checkers.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in names:
                found.append(f"{path.name}:{node.lineno} {node.value!r}")
    assert not found, found


def test_the_traits_recorded_are_read_and_an_older_history_reads_the_legacy_table():
    recorded = from_dict({"seq": 1, "ts": 1.0, "mono_ns": 1, **start("kill", [])})
    assert recorded.effects == frozenset()  # recorded as none: none, whatever the name
    older = from_dict({"seq": 1, "ts": 1.0, "mono_ns": 1, **start("kill", None)})
    assert older.traits is None and older.effects == {FaultTrait.TAKES_TARGET_OUT}
    unknown = from_dict({"seq": 1, "ts": 1.0, "mono_ns": 1, **start("freeze", None)})
    assert unknown.effects == frozenset()
    # written as recorded: an empty list stays in the line (absent would read as the legacy table)
    assert to_dict(recorded)["traits"] == () and "traits" not in to_dict(older)


@pytest.mark.parametrize("name", sorted(LEGACY_TRAITS))
def test_the_legacy_table_names_kinds_that_exist_and_says_what_they_declare(name):
    assert LEGACY_TRAITS[name] == kinds()[name].traits


@pytest.mark.parametrize(("fault_type", "traits", "named_as"), [
    ("freeze", ["slows_only"], "a slow link does not evict by itself"),  # a kind no checker knows: its trait
    ("latency", [], "during a latency fault on consumer-0"),               # the name alone says nothing
    ("latency", None, "a slow link does not evict by itself"),            # an older history: the legacy table
])
def test_ownership_time_names_a_slow_fault_by_its_trait(fault_type, traits, named_as):
    h = history(own("assigned", "consumer-0", 1, "m0"), start(fault_type, traits), FAILED,
                own("assigned", "consumer-1", 2, "m1"), own("revoked", "consumer-0", 1, "m0"), end(fault_type))
    r = run_checkers(h, [CheckerName.OWNERSHIP_TIME]).result(CheckerName.OWNERSHIP_TIME)
    assert r.valid is Validity.TRUE
    assert any(named_as in f.description for f in r.findings), [f.description for f in r.findings]


def offsets(value: int) -> dict:
    return {"source": "observer", "kind": "committed_offsets", "group": "g", "coordinator": 1,
            "offsets": [["t", 0, value]]}


@pytest.mark.parametrize(("fault_type", "traits", "valid"), [
    ("reset_peer", None, Validity.FALSE),       # resets TCP connections, not offsets: a move back is a move back
    ("reset_peer", [], Validity.FALSE),
    ("offset_rewind", ["rewinds_committed_offsets"], Validity.TRUE),  # a rewind on purpose restarts the comparison
])
def test_committed_offsets_restarts_only_at_a_fault_that_rewinds_them(fault_type, traits, valid):
    h = history(offsets(300), start(fault_type, traits, node="broker-1"), offsets(200), end(fault_type, "broker-1"))
    assert run_checkers(h, [CheckerName.COMMITTED_OFFSETS]).valid is valid


def test_a_member_taken_out_by_a_kind_no_checker_knows_leaves_its_partition_without_a_consuming_owner():
    """rebalance-liveness's unavailability: consumer-0 holds p0 throughout; 'freeze' is in effect for 10 ms."""
    from chaos.checkers.index import index_of
    from chaos.checkers.rebalance_liveness import unavailability

    def unavailable(traits: list[str]) -> float:
        idx = index_of(history(own("assigned", "consumer-0", 1, "m0"), start("freeze", traits), end("freeze"),
                               offsets(0)))
        return sum(unavailability(idx, idx.last_ns + 1).values())

    assert unavailable([]) == 0
    assert unavailable(["takes_target_out"]) == pytest.approx(0.01)


@pytest.mark.parametrize("action, extra, loses", [
    ("drop_request", {}, True), ("drop_response", {}, True), ("delay", {"delay_ms": 100}, False),
    ("error", {"error": "NOT_COORDINATOR"}, False), ("duplicate_request", {}, False)])
def test_an_rpc_fault_records_that_it_loses_requests_only_when_it_drops_them(action, extra, loses):
    spec = FaultSpec.build(type="rpc", target="member", node="consumer-0", api="OffsetCommit", action=action, **extra)
    assert (FaultTrait.LOSES_REQUESTS in spec.traits_in_effect) is loses
    assert spec.traits <= spec.traits_in_effect


def test_a_black_hole_loses_requests_and_a_link_down_closes_the_connections_instead():
    assert FaultTrait.LOSES_REQUESTS in FaultSpec.build(type="black_hole", target="coordinator").traits_in_effect
    assert FaultTrait.LOSES_REQUESTS not in FaultSpec.build(type="link_down", target="coordinator").traits_in_effect
