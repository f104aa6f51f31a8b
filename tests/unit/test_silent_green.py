"""No silent green: faults that can never fire, non-positive budgets, seeds that cannot be recorded, and a
batch whose infrastructure is broken are all refused — at load time where that is knowable."""

import os
import subprocess
import sys

import pytest

from chaos.errors import UsageError
from chaos.experiment import parse_experiment
from chaos.model.experiment import SEED_MAX, check_seed
from chaos.runner import parse_budget, run_nightly


def _exp(trigger, chaos_s=8):
    return {"name": "x", "faults": [{"type": "kill", "target": "coordinator", "trigger": trigger}],
            "phases": {"chaos_s": chaos_s}}


@pytest.mark.parametrize("trigger, field", [
    ({"at_s": 999}, "trigger.at_s=999"),
    ({"at_s": 8}, "trigger.at_s=8"),
    ({"state": "Stable", "not_before_s": 9}, "trigger.not_before_s=9"),
    ({"on_revoked": "consumer-0", "not_before_s": 8}, "trigger.not_before_s=8"),
    ({"random": {"start_s": 8.5}}, "trigger.random.start_s=8.5"),
])
def test_a_fault_that_cannot_fire_in_the_chaos_phase_is_rejected(trigger, field):
    with pytest.raises(UsageError) as err:
        parse_experiment(_exp(trigger), "x.yaml")
    msg = str(err.value)
    assert f"faults.0.{field}" in msg and "phases.chaos_s=8" in msg and "\n" not in msg


@pytest.mark.parametrize("trigger", [{"at_s": 7.9}, {"state": "Stable", "not_before_s": 7}, {"random": {"count": 2}}])
def test_a_fault_that_can_fire_is_accepted(trigger):
    assert parse_experiment(_exp(trigger), "x.yaml").faults[0].trigger is not None


def test_no_chaos_phase_means_no_fault_can_fire():
    with pytest.raises(UsageError, match="could never fire"):
        parse_experiment(_exp({"at_s": 0}, chaos_s=0), "x.yaml")


@pytest.mark.parametrize("text", ["-3m", "0", "0s", "nan", "inf", "-1"])
def test_budgets_must_be_positive(text):
    with pytest.raises(UsageError, match="positive"):
        parse_budget(text)


def test_a_budget_below_the_shortest_run_is_refused():
    exp = parse_experiment({"name": "x", "phases": {"chaos_s": 20}}, "x.yaml")
    with pytest.raises(UsageError, match="shorter than the shortest run"):
        run_nightly([exp], __import__("pathlib").Path("/nonexistent"), 5.0)


@pytest.mark.parametrize("seed", [-1, SEED_MAX + 1, 2**70, True, 1.5])
def test_seeds_outside_the_recordable_range_are_refused(seed):
    with pytest.raises(UsageError, match="2\\^63-1"):
        check_seed(seed)


def test_seed_limits_are_accepted():
    assert check_seed(0) == 0 and check_seed(SEED_MAX) == SEED_MAX


def _chaos(args, env):
    return subprocess.run([sys.executable, "-m", "chaos.cli", *args], capture_output=True, text=True, env=env,
                          timeout=120)


@pytest.mark.parametrize("args", [["run", "baseline", "--runs", "3", "--seed", "7"],
                                  ["run", "--nightly", "--budget", "10m", "--seed", "7", "baseline"]])
def test_broken_infrastructure_stops_the_batch_at_the_first_run(tmp_path, args):
    """Without java the cluster cannot start: one error line, exit 2, one run recorded, not a spin."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    env = dict(os.environ, PATH=str(bindir), JAVA_HOME="", KAFKA_CHAOS_STATE=str(tmp_path / "state"))
    out = tmp_path / "out"
    res = _chaos([*args, "--out", str(out)], env)
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr + res.stdout
    errors = [line for line in res.stderr.splitlines() if line.startswith("chaos: error:")]
    assert len(errors) == 1, res.stderr
    assert "stopped after 1 run(s)" in errors[0] and "java" in errors[0], errors[0]
    assert not out.exists(), sorted(out.rglob("*"))   # nothing ran: no run directory, no nightly summary
