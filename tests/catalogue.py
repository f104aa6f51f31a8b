"""The catalogue's experiments as the integration tests run them.

The wrong consumers (``wrong-*``) are written for users to watch them fail; their ``quiesce_s`` (60-90 s)
gives a group that can still commit everything the time to do it. A group with a member that commits
offsets of partitions it was revoked from, or skips records, often cannot: the run then waits out the
whole bound (measured at 90 s of a 107 s test, docs/testing.md). What the tests assert — the expected
checker answers false — is decided by what happened in the chaos phase, so the tests bound the quiesce
to :data:`WRONG_QUIESCE_S`; the final read still reads every partition to its end.
"""

from __future__ import annotations

from pathlib import Path

from chaos.experiment import load_experiment
from chaos.model.experiment import Experiment

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"
#: the quiesce bound of a wrong consumer's run in the tests
WRONG_QUIESCE_S = 8.0


def wrong_consumer(name: str) -> Experiment:
    """Catalogue experiment ``name`` (a ``wrong-*`` one) with its quiesce bounded to :data:`WRONG_QUIESCE_S`."""
    exp = load_experiment(EXPERIMENTS / f"{name}.yaml")
    assert exp.expect_violation, f"{name} is not a wrong consumer"
    return exp.model_copy(update={"phases": exp.phases.model_copy(update={"quiesce_s": WRONG_QUIESCE_S})})


def experiment(name: str) -> Experiment:
    """Catalogue experiment ``name`` as the tests run it: a wrong consumer's quiesce bounded, others as written."""
    return wrong_consumer(name) if name.startswith("wrong-") else load_experiment(EXPERIMENTS / f"{name}.yaml")
