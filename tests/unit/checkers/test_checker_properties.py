"""Property-based: simulated valid histories pass every checker; each mutation is caught by its checker."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from chaos.checkers.registry import run_checkers
from chaos.checkers.result import Validity
from chaos.history import Consumed
from chaos.model.checker_name import CheckerName
from chaos.model.workload import Assignor
from tests.simulation import CAUGHT_BY, Mutation, SimulationSpec, mutate, simulate

specs = st.builds(
    SimulationSpec,
    seed=st.integers(0, 2**32 - 1),
    events=st.integers(60, 700),
    members=st.integers(1, 4),
    partitions=st.integers(1, 7),
    assignor=st.sampled_from(list(Assignor)),
    static=st.booleans(),
    faults=st.booleans(),
    batch=st.integers(1, 6),
)

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(specs)
def test_valid_histories_pass_every_checker(spec):
    history = simulate(spec)
    verdict = run_checkers(history)
    # a history too short to consume anything leaves record-anomalies without evidence: unknown, never true
    consumed = any(type(e) is Consumed for e in history.events)
    bad = {r.checker.value: (r.summary, [f.description for f in r.violations][:3])
           for r in verdict.results if r.valid is not Validity.TRUE
           and (consumed or r.checker is not CheckerName.RECORD_ANOMALIES or r.valid is not Validity.UNKNOWN)}
    assert not bad


@SETTINGS
@given(specs, st.sampled_from(list(Mutation)), st.integers(0, 2**16))
def test_each_mutation_is_caught_by_its_checker(spec, mutation, salt):
    broken = mutate(simulate(spec), mutation, random.Random(salt))
    assume(broken is not None)
    checker = CAUGHT_BY[mutation]
    result = run_checkers(broken, [checker]).result(checker)
    assert result.valid is Validity.FALSE, (mutation, result.summary)
    assert all(f.evidence for f in result.violations)


def test_simulation_is_deterministic():
    a = simulate(SimulationSpec(seed=5, events=300, static=True))
    b = simulate(SimulationSpec(seed=5, events=300, static=True))
    assert a.events == b.events
