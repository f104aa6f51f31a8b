"""``phases.settle_s``: the chaos phase ends that long after every planned fault is over, ``chaos_s`` being the
bound (chaos.lifecycle.Run._chaos_phase). The nemesis is a stand-in that records what the phase waited for;
nothing sleeps."""

from __future__ import annotations

from chaos.lifecycle import Run
from chaos.model.experiment import Experiment, Phases


class _Cancel:
    def __init__(self) -> None:
        self.waits: list[float] = []

    def wait(self, timeout: float) -> bool:
        self.waits.append(round(timeout, 3))
        return False


class _Nemesis:
    def __init__(self, busy_polls: int) -> None:
        self.cancel = _Cancel()
        self.busy = busy_polls

    def settled(self) -> bool:
        self.busy -= 1
        return self.busy < 0


def _phase(phases: Phases, busy_polls: int) -> list[float]:
    run = Run.__new__(Run)  # only the experiment is read
    run.experiment = Experiment(name="x", phases=phases)
    nemesis = _Nemesis(busy_polls)
    run._chaos_phase(nemesis)  # type: ignore[arg-type]
    return nemesis.cancel.waits


def test_without_settle_the_chaos_phase_is_chaos_s():
    assert _phase(Phases(chaos_s=12), busy_polls=3) == [12.0]


def test_with_settle_it_ends_settle_s_after_the_last_fault_is_over():
    waits = _phase(Phases(chaos_s=30, settle_s=3), busy_polls=4)
    assert waits[:-1] == [0.2] * 4 and waits[-1] == 3.0  # polled while faults were on, then settle_s


def test_an_experiment_without_faults_has_a_chaos_phase_of_settle_s():
    assert _phase(Phases(chaos_s=30, settle_s=2), busy_polls=0) == [2.0]
