"""The composite: crashes become unknown, merging is false > unknown > true, bounds derive from configs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from chaos.checkers import CheckerBounds
from chaos.checkers.bounds import resolve
from chaos.checkers.index import index_of
from chaos.checkers.registry import CHECKERS, parse_names, run_checkers
from chaos.checkers.result import Result, Validity, merge_validity
from chaos.errors import UsageError
from chaos.history import MemberStart, read_history
from chaos.model.checker_name import CheckerName
from tests.simulation import SimulationSpec, simulate

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "histories"


def test_merge_order():
    T, F, U = Validity.TRUE, Validity.FALSE, Validity.UNKNOWN
    assert merge_validity([T, U, T]) is U
    assert merge_validity([U, F, T]) is F
    assert merge_validity([T, T]) is T
    assert merge_validity([]) is T


def test_crashing_checker_is_unknown_never_a_pass():
    def boom(history, bounds):
        raise ZeroDivisionError("division by zero in a checker")

    registry = {**CHECKERS, CheckerName.FENCING: boom}
    v = run_checkers(simulate(SimulationSpec(seed=1, events=200)), registry=registry)
    r = v.result(CheckerName.FENCING)
    assert r.valid is Validity.UNKNOWN and "ZeroDivisionError: division by zero" in r.summary
    assert v.valid is Validity.UNKNOWN


def test_checker_returning_garbage_is_unknown():
    registry = {**CHECKERS, CheckerName.ASSIGNOR: lambda h, b: True}
    v = run_checkers(simulate(SimulationSpec(seed=1, events=200)), [CheckerName.ASSIGNOR], registry=registry)
    assert v.valid is Validity.UNKNOWN


def test_false_beats_unknown_across_checkers():
    registry = {**CHECKERS, CheckerName.FENCING: lambda h, b: 1 / 0}
    h = read_history(FIXTURES / "delivery-lost-record.jsonl")
    v = run_checkers(h, registry=registry)
    assert v.valid is Validity.FALSE


def test_selected_checkers_only():
    v = run_checkers(simulate(SimulationSpec(seed=2, events=200)), ["delivery", CheckerName.FENCING])
    assert [r.checker for r in v.results] == [CheckerName.DELIVERY, CheckerName.FENCING]
    with pytest.raises(UsageError, match="unknown checker 'fencin'; choose from"):
        parse_names(["fencin"])


def test_bounds_derive_from_member_configs_and_header():
    h = simulate(SimulationSpec(seed=3, events=200))
    r = resolve(CheckerBounds(), h, index_of(h).of(MemberStart))
    assert r.session_timeout_ns == 10_000 * 10**6 and r.rebalance_timeout_ns == 30_000 * 10**6
    assert r.convergence_ns == (10 + 30 + 5) * 10**9
    r = resolve(CheckerBounds(convergence_s=7.0), h, [])
    assert r.convergence_ns == 7 * 10**9
    assert r.session_timeout_ns == 10_000 * 10**6  # from header configs when no member_start
    with pytest.raises(UsageError, match="clock_slack_s=-1"):
        CheckerBounds(clock_slack_s=-1)


def test_the_request_timeout_is_the_members_largest_declared_or_their_clients_default():
    """librdkafka 60 s, the Java client 30 s, kafka-python 305 s before 3.0; a spec's ``request_timeout_ms`` wins."""
    h = simulate(SimulationSpec(seed=3, events=200))
    starts = index_of(h).of(MemberStart)
    assert resolve(CheckerBounds(), h, starts).request_timeout_ns == 60 * 10**9  # confluent-kafka members
    java = [replace(s, client="java", client_version="4.1.0") for s in starts]
    assert resolve(CheckerBounds(), h, java).request_timeout_ns == 30 * 10**9
    older = [*java, replace(starts[0], client="kafka-python", client_version="2.2.15")]
    assert resolve(CheckerBounds(), h, older).request_timeout_ns == 305 * 10**9
    newer = [*java, replace(starts[0], client="kafka-python", client_version="3.0.12")]
    assert resolve(CheckerBounds(), h, newer).request_timeout_ns == 30 * 10**9
    declared = replace(h, header=replace(h.header, experiment={"workload": {"consumers": [
        {"client": "java", "request_timeout_ms": 90_000}]}}))
    assert java[0].source == "consumer-0"  # the spec's first consumer
    assert resolve(CheckerBounds(), declared, java).request_timeout_ns == 90 * 10**9
    assert resolve(CheckerBounds(), h, []).request_timeout_ns == 60 * 10**9  # nothing known: librdkafka's


def test_result_shape():
    v = run_checkers(read_history(FIXTURES / "fencing-stale-generation.jsonl"))
    r = v.result("fencing")
    assert isinstance(r, Result) and r.valid is Validity.FALSE
    assert r.metrics["judged"] >= 1 and len(r.violations) == 1
