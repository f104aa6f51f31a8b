"""Replay and shrink, the parts that need no cluster: the schedule as fired, the experiment file written,
delta debugging, and the search's order over a run function whose verdict is a rule of the test's own
(the real runs are tests/integration/test_shrink.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from chaos.cli import main
from chaos.errors import UsageError
from chaos.experiment import catalogue, load_experiment
from chaos.model.experiment import Experiment
from chaos.model.target import Role
from chaos.replay import LIVE_LEAD_S, Verdict, as_fired, experiment_yaml, load_recorded
from chaos.runner import RunOutcome
from chaos.shrink import Shrinker, ddmin, without_member


# ---------------------------------------------------------------- ddmin
@pytest.mark.parametrize("needed", [{3}, {2, 5}, {0, 7}, {1, 4, 6}, set(range(8))])
def test_ddmin_finds_the_needed_items_and_nothing_else(needed):
    calls: list[list[int]] = []

    def fails(sub: list[int]) -> bool:
        calls.append(sub)
        return needed <= set(sub)

    assert ddmin(list(range(8)), fails) == sorted(needed)
    assert all(sub == sorted(sub) for sub in calls)          # order kept
    assert len(calls) <= 8 * 8                                # bounded (Zeller: O(n^2) at worst)


def test_ddmin_of_one_item_asks_nothing():
    assert ddmin([9], lambda sub: pytest.fail("not asked")) == [9]


# ---------------------------------------------------------------- a recorded run on disk
#: a judged history from the fixtures: its header line (and schema version) is what replay and shrink read
HISTORY = Path(__file__).resolve().parents[2] / "fixtures" / "histories" / "delivery-lost-record.jsonl"


def _record(tmp: Path, exp: Experiment, faults: list[dict], valid: str = "false",
            failed: tuple[str, ...] = ("delivery",), schema_version: int = 1) -> Path:
    run = tmp / "run-000-seed-41"
    run.mkdir(parents=True)
    header, rest = HISTORY.read_bytes().split(b"\n", 1)
    (run / "history.jsonl").write_bytes(
        json.dumps(json.loads(header) | {"schema_version": schema_version}).encode() + b"\n" + rest)
    resolved = json.loads(exp.model_dump_json()) | {"topic": "chaos-x", "group": "group-x"}
    (run / "resolved.json").write_text(json.dumps(resolved))
    (run / "header.json").write_text(json.dumps({"seed": 41, "experiment": resolved}))
    (run / "faults.json").write_text(json.dumps(faults))
    results = [{"checker": c, "valid": "false"} for c in failed] + [{"checker": "fencing", "valid": "true"}]
    (run / "checks.json").write_text(json.dumps({"valid": valid, "results": results}))
    return run


def _fired(fault_id: str, start_s: float | None, nodes: list[str], fired: bool = True, why: str | None = None):
    return {"fault_id": fault_id, "fired": fired, "start_s": start_s, "nodes": nodes, "skipped_reason": why}


def test_as_fired_pins_times_and_random_targets_and_keeps_live_triggers(tmp_path):
    exp = load_experiment("nightly-mixed")
    run = _record(tmp_path, exp, [
        _fired("f4", 13.622, ["broker-3"]),
        _fired("f0.0", 5.728, ["broker-2"]), _fired("f0.1", 21.84, ["broker-1"]),
        _fired("f1.0", 7.225, ["consumer-0"]),
        _fired("f2.0", None, [], fired=False, why="its member was not alive"),
        _fired("f3.0", 6.51, ["consumer-0"]),
    ])
    rec = load_recorded(run)
    assert rec.seed == 41 and rec.verdict == Verdict("false", frozenset({"delivery"}))
    replay, notes = as_fired(rec)
    assert [f.trigger.at_s for f in replay.faults if f.trigger.at_s is not None] == [5.728, 6.51, 7.225, 21.84]
    kills = [f for f in replay.faults if f.type == "kill" and f.trigger.at_s is not None]
    assert [(f.target, f.node) for f in kills] == [(Role.NODE, "broker-2"), (Role.NODE, "broker-1")]
    pause = next(f for f in replay.faults if f.type == "pause")
    assert (pause.target, pause.node, pause.duration_s) == (Role.MEMBER, "consumer-0", 7.0)
    live = next(f for f in replay.faults if f.trigger.state is not None)
    assert live.target is Role.COORDINATOR                    # a role is asked of the cluster again
    assert live.trigger.state == "CompletingRebalance"
    assert live.trigger.not_before_s == pytest.approx(13.622 - LIVE_LEAD_S)
    assert len(replay.faults) == 5 and replay.runs == 1
    assert len(notes) == 1 and "f2.0" in notes[0] and "its member was not alive" in notes[0]
    # everything else is the recorded run's
    assert replay.workload == exp.workload and replay.phases == exp.phases and replay.cluster == exp.cluster


def test_as_fired_drops_after_fault_and_pins_the_second_the_fault_fired_at(tmp_path):
    # the replay lists faults in the order they fired: its f0 would be another fault; the second pins the rebalance
    exp = load_experiment("baseline").model_copy(update={"faults": ()})
    exp = Experiment.model_validate(exp.model_dump(mode="json") | {"faults": [
        {"type": "bounce", "target": "member", "node": "consumer-1", "trigger": {"at_s": 2}, "duration_s": 1},
        {"type": "pause", "target": "random_member", "trigger": {"state": "Stable", "after_fault": "f0",
                                                                  "not_before_s": 3}},
    ]})
    run = _record(tmp_path, exp, [_fired("f0", 2.0, ["consumer-1"]), _fired("f1", 7.5, ["consumer-2"])])
    replay, notes = as_fired(load_recorded(run))
    live = next(f for f in replay.faults if f.trigger.state is not None)
    assert live.trigger.after_fault is None and notes == []
    assert live.trigger.not_before_s == pytest.approx(7.5 - LIVE_LEAD_S)
    assert (live.target, live.node) == (Role.MEMBER, "consumer-2")


@pytest.mark.parametrize("damage, says", [
    (lambda run: (run / "faults.json").unlink(), "no faults.json"),
    (lambda run: (run / "header.json").write_text("{not json"), "header.json: not valid JSON"),
    (lambda run: (run / "header.json").write_text('{"seed": "x"}'), "no integer `seed`"),
    (lambda run: (run / "faults.json").write_text('[{"fault_id": "f9", "fired": true, "start_s": 1}]'),
     "names no fault of the experiment"),
    (lambda run: (run / "resolved.json").write_text('{"name": "x", "faults": [{"type": "nope"}]}'), "resolved.json"),
    (lambda run: (run / "checks.json").write_text('{"valid": "false"}'), "chaos check"),
])
def test_a_damaged_run_directory_is_one_line_that_names_the_file(tmp_path, damage, says):
    run = _record(tmp_path, load_experiment("wrong-commit-before-process"), [_fired("f0", 3.0, ["consumer-1"])])
    damage(run)
    with pytest.raises(UsageError) as err:
        as_fired(load_recorded(run))
    assert says in str(err.value) and "\n" not in str(err.value)


# ---------------------------------------------------------------- refusals: one line, before any cluster
@pytest.fixture
def no_cluster(monkeypatch):
    """A ClusterPool created fails the test: every refusal below comes before any cluster could start."""
    import chaos.runner

    class NoPool:
        def __init__(self, *args, **kwargs):
            raise AssertionError("a ClusterPool was created before the command refused its input")

    monkeypatch.setattr(chaos.runner, "ClusterPool", NoPool)


def _files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its content (a recorded run, a working directory)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _refused(args: list[str], *says: str) -> str:
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2, (args, res.output, res.exception)
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("chaos: error:"), res.output
    for fragment in says:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0].removeprefix("chaos: error: ")


def _baseline_red(tmp: Path, **kw) -> Path:
    """A recorded red run of baseline (no faults, no expect_violation): delivery answered false."""
    return _record(tmp, load_experiment("baseline"), [], **kw)


def test_replay_and_shrink_refuse_bad_input_with_one_line_and_exit_2(tmp_path, monkeypatch, no_cluster):
    monkeypatch.chdir(tmp_path)
    green = _record(tmp_path / "g", load_experiment("baseline"), [], valid="true", failed=())
    red = _baseline_red(tmp_path / "r")
    before = _files(tmp_path)
    for args, says in [(["replay", str(tmp_path / "nothing")], ["no such run directory"]),
                       (["shrink", str(green)], ["the run's verdict was true; shrink needs a red run "
                                                 "(a checker that answered false)"]),
                       (["shrink", str(red), "--checker", "fencing"],
                        ["the run's verdict was false (delivery), and none of fencing (--checker) answered false"]),
                       (["shrink", str(green), "--checker", "nope"], ["no such checker"]),
                       (["shrink", str(green), "--budget", "soon"], ["--budget"])]:
        _refused(args, *says)
    assert _files(tmp_path) == before                               # nothing written, anywhere


def test_an_unknown_schema_version_is_refused_by_replay_shrink_and_check_alike(tmp_path, monkeypatch, no_cluster):
    monkeypatch.chdir(tmp_path)
    run = _baseline_red(tmp_path, schema_version=99)
    before = _files(tmp_path)
    said = {cmd: _refused([cmd, str(run)], "history.jsonl:1: schema_version 99 is not supported")
            for cmd in ("check", "replay", "shrink")}
    assert said["replay"] == said["shrink"] == said["check"], said  # the same refusal, word for word
    assert said["check"].startswith(f"{run}: ")
    assert _files(tmp_path) == before
    # the same run at the version this reader knows is accepted by the same code (what the refusal hangs on)
    assert load_recorded(_baseline_red(tmp_path / "ok")).seed == 41


def test_a_run_without_a_history_is_refused_before_its_other_files_are_read(tmp_path):
    run = _baseline_red(tmp_path)
    (run / "history.jsonl").unlink()
    with pytest.raises(UsageError, match="no history.jsonl"):
        load_recorded(run)


@pytest.mark.parametrize("where", ["the run", "inside the run"])
def test_no_command_writes_into_a_recorded_run(tmp_path, monkeypatch, no_cluster, where):
    monkeypatch.chdir(tmp_path)
    run = _baseline_red(tmp_path / "runs" / "baseline")
    out = run if where == "the run" else run / "sub"
    is_what = "is the recorded run" if where == "the run" else "is inside the recorded run"
    before = _files(tmp_path)
    shown = run.relative_to(tmp_path)
    for args in (["replay", str(run), "--out", str(out)],
                 ["shrink", str(run), "--out", str(out)],
                 ["run", "baseline", "--out", str(out)],
                 ["run", "--nightly", "--out", str(out)],
                 ["report", str(tmp_path / "runs"), "--out", str(out)],
                 ["schema", "--out", str(out / "schema.json")],
                 ["demo", "--out", str(out)]):
        line = _refused(args, is_what if args[0] != "schema" else "is inside the recorded run", f" {shown},",
                        "never written into")
        assert line.startswith("--out "), line
    assert _files(tmp_path) == before and not (run / "sub").exists()


def test_a_default_out_inside_a_recorded_run_is_refused_too(tmp_path, monkeypatch, no_cluster):
    run = _baseline_red(tmp_path)
    monkeypatch.chdir(run)                                          # runs/shrink/... would land in the run
    before = _files(run)
    _refused(["shrink", "."], "--out runs/shrink/baseline-", "is inside the recorded run")
    _refused(["run", "baseline"], "--out runs: is inside the recorded run")
    assert _files(run) == before


def test_an_out_beside_a_run_is_not_refused():
    from chaos.replay import recorded_run_around, refuse_out_in_run

    run = Path(__file__).resolve().parents[2] / "fixtures"          # no run files anywhere up the tree
    assert recorded_run_around(run / "out") is None
    refuse_out_in_run(run / "out")


def test_a_budget_that_cannot_hold_one_run_is_refused_with_the_smallest_that_can(tmp_path, monkeypatch, no_cluster):
    from chaos.runner import estimate_s

    monkeypatch.chdir(tmp_path)
    run = _baseline_red(tmp_path / "r")
    need = estimate_s(load_experiment("baseline"))                   # 1.5 x (1 + 8 + 0) s + 10 s
    assert need == 23.5
    line = _refused(["shrink", str(run), "--budget", "1s", "--out", "shrunk"],
                    "--budget 1s cannot hold one run of baseline (about 24 s: warmup 1 s, chaos 8 s and heal 0 s",
                    "give at least 24s")
    assert "NOT REPRODUCED" not in line
    assert not (tmp_path / "shrunk").exists() and not (tmp_path / "runs").exists()
    with pytest.raises(UsageError, match="give at least 24s"):       # the library refuses it the same way
        Shrinker(load_recorded(run), tmp_path / "shrunk", budget_s=23, run=lambda e, s, d: pytest.fail("ran"))
    Shrinker(load_recorded(run), tmp_path / "shrunk", budget_s=24, run=lambda e, s, d: pytest.fail("ran"))
    assert not (tmp_path / "shrunk").exists()                       # constructing writes nothing


# ---------------------------------------------------------------- a run that found no cluster
@pytest.fixture
def kafka_not_set_up(monkeypatch):
    """Every cluster the pool asks for is refused as a cache without Kafka refuses it (no process starts)."""
    import chaos.runner

    def new_cluster(backend, spec):
        raise UsageError(f"Kafka {spec.kafka_version} is not set up: run `chaos setup --kafka-version "
                         f"{spec.kafka_version}` (or `make setup`)")

    monkeypatch.setattr(chaos.runner, "new_cluster", new_cluster)


@pytest.mark.parametrize("command", ["run", "replay", "shrink"])
def test_an_error_names_only_directories_that_exist(tmp_path, monkeypatch, kafka_not_set_up, command):
    monkeypatch.chdir(tmp_path)
    run = _baseline_red(tmp_path / "recorded")
    before = _files(tmp_path)
    args = {"run": ["run", "baseline", "--out", "out", "--seed", "5"], "replay": ["replay", str(run), "--out", "out"],
            "shrink": ["shrink", str(run), "--out", "out"]}[command]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2, (res.output, res.exception)
    line = res.output.strip().splitlines()[-1]
    assert line.startswith("chaos: error:") and "Kafka 3.9.1 is not set up" in line, res.output
    assert "details in" not in line and "minimal.yaml" not in line, line
    assert _files(tmp_path) == before and not (tmp_path / "out").exists()   # a shrink that ran nothing leaves nothing


def test_details_are_named_when_the_run_directory_exists(tmp_path):
    from chaos.runner import BatchStopped, _stop_on_error

    oc = RunOutcome("baseline", 0, 5, str(tmp_path / "run-000-seed-5"), "error", False, error="broker-1 exited")
    with pytest.raises(BatchStopped) as err:
        _stop_on_error(oc, [oc])
    assert oc.details == "" and "details in" not in str(err.value)
    (tmp_path / "run-000-seed-5").mkdir()
    with pytest.raises(BatchStopped) as err:
        _stop_on_error(oc, [oc])
    assert oc.details == f" (details in {tmp_path / 'run-000-seed-5'})" and str(err.value).endswith(oc.details)


def test_a_shrink_whose_first_run_recorded_an_error_says_where_and_logs_it(tmp_path):
    from chaos.errors import InfrastructureError

    run = _baseline_red(tmp_path / "r")

    def broken(e, seed, run_dir):
        run_dir.mkdir(parents=True)
        (run_dir / "error.txt").write_text("Traceback ...")
        return RunOutcome(e.name, 0, seed, str(run_dir), "error", False, error="broker-1 exited")

    s = Shrinker(load_recorded(run), tmp_path / "out", budget_s=3600, run=broken)
    with pytest.raises(InfrastructureError) as err:
        s.shrink()
    assert f"(details in {tmp_path / 'out' / 'runs' / '001-replay-try0'})" in str(err.value)
    assert "minimal.yaml" not in str(err.value)                     # no failing experiment yet: none named
    assert (tmp_path / "out" / "shrink-log.jsonl").is_file() and (tmp_path / "out" / "shrink.json").is_file()


@pytest.mark.parametrize("name", [p.stem for p, e in catalogue() if isinstance(e, Experiment)])
def test_every_catalogue_experiment_written_as_a_file_loads_as_itself(name):
    exp = load_experiment(name)
    text = experiment_yaml(exp, "a header\n\nof two paragraphs")
    assert text.startswith("# a header\n#\n# of two paragraphs\n")
    assert f"kafka_version: {exp.cluster.kafka_version}" in text   # pinned even at today's default


# ---------------------------------------------------------------- candidates
def test_without_member_renumbers_later_members_and_keeps_one_that_is_aimed_at():
    exp = load_experiment("wrong-commit-before-process")              # kills aimed at consumer-1
    assert without_member(exp, 1) is None
    fewer = without_member(exp, 0)
    assert fewer is not None and len(fewer.workload.consumers) == 2
    assert {f.node for f in fewer.faults} == {"consumer-0"}           # consumer-1 is consumer-0 now
    assert fewer.workload.consumers[0].wrong_mode == exp.workload.consumers[1].wrong_mode


# ---------------------------------------------------------------- the search, over a rule
def _outcome(exp: Experiment, seed: int, run_dir: Path, failed: bool) -> RunOutcome:
    return RunOutcome(exp.name, 0, seed, str(run_dir), "false" if failed else "true", False,
                      failed_checkers=["delivery"] if failed else [])


def _shrinker(tmp_path: Path, rule, **kw) -> Shrinker:
    exp = load_experiment("nightly-mixed").with_overrides(**{"workload.consumers": [
        c.model_dump() for c in load_experiment("wrong-commit-before-process").workload.consumers]})
    faults = [_fired("f4", 13.6, ["broker-3"]), _fired("f0.0", 5.7, ["broker-2"]), _fired("f0.1", 21.8, ["broker-1"]),
              _fired("f1.0", 7.2, ["consumer-2"]), _fired("f2.0", 8.0, ["consumer-1"]),
              _fired("f3.0", 6.5, ["consumer-0"])]
    rec = load_recorded(_record(tmp_path, exp, faults))
    runs: list[Experiment] = []

    def run(e: Experiment, seed: int, run_dir: Path) -> RunOutcome:
        runs.append(e)
        return _outcome(e, seed, run_dir, rule(e))

    s = Shrinker(rec, tmp_path / "out", budget_s=3600, run=run, **kw)
    s.runs_seen = runs  # type: ignore[attr-defined]
    return s


def _breaks(e: Experiment) -> bool:
    """The rule: consumer "wrong" (the commit_before_process member) black-holed for at least 3 s."""
    wrong = next(i for i, c in enumerate(e.workload.consumers) if c.wrong_mode is not None)
    return any(f.type == "black_hole" and f.node == f"consumer-{wrong}" and f.duration_s >= 3 for f in e.faults)


def test_the_search_keeps_the_one_fault_that_matters_and_shrinks_the_rest(tmp_path):
    s = _shrinker(tmp_path, _breaks, confirm=2)
    best = s.shrink()
    assert best is not None and len(best.faults) == 1
    (f,) = best.faults
    assert f.type == "black_hole" and f.duration_s == 3.0        # 6 -> 3 kept, 1.5 passed
    assert len(best.workload.consumers) == 1 and f.node == "consumer-0"  # the others removed, renumbered
    assert best.workload.partitions == 1
    assert best.phases.chaos_s == pytest.approx(8.0 + 3.0 + 2.0)       # ends 2 s after the fault heals
    assert s.rate() == (3, 3)                                          # the kept run and two confirmations
    loaded = load_experiment(s.out / "minimal.yaml")
    assert loaded.faults == best.faults and loaded.name == "nightly-mixed-minimal"
    summary = json.loads((s.out / "shrink.json").read_text())
    assert summary["minimal_faults"] == 1 and summary["recorded_faults"] == 6 and summary["stopped_by"] == "done"
    log = [json.loads(line) for line in (s.out / "shrink-log.jsonl").read_text().splitlines()]
    assert log[0]["step"] == "replay" and log[0]["failing"] and log[1]["change"].startswith("no fault at all")
    assert all(a["kept"] == a["failing"] for a in log if a["step"] != "confirm")
    searched = [e.model_dump_json(exclude={"description"}) for e in s.runs_seen[:-2]]  # before the confirmations
    assert len(searched) == len(set(searched))                        # no candidate ran twice


def test_a_minimal_experiment_that_failed_once_by_chance_gives_way_to_one_that_fails_reliably(tmp_path):
    seen: set[str] = set()

    def rule(e: Experiment) -> bool:
        if not e.faults:  # without faults it fails the first time only: chance, not the failure
            key = e.model_dump_json(exclude={"description"})
            first = key not in seen
            seen.add(key)
            return first
        return _breaks(e)

    s = _shrinker(tmp_path, rule, confirm=2)
    best = s.shrink()
    assert s.kept[1].faults == () and len(s.kept) > 2 and s.kept[0] is best  # fault-free ones kept, given up
    assert best is not None and len(best.faults) == 6               # the replay: the last reliable one
    assert s.rate() == (3, 3)
    confirms = [a for a in s.attempts if a.step == "confirm"]
    assert [(a.faults, a.failing) for a in confirms[-2:]] == [(6, True)] * 2
    assert all(a.faults == 0 and not a.failing for a in confirms[:-2])
    assert len(confirms) <= 2 * (1 + math.ceil(math.log2(len(s.kept))))  # a bisection, not a walk back
    summary = json.loads((s.out / "shrink.json").read_text())
    assert summary["minimal_faults"] == 6 and (summary["minimal_failed_runs"], summary["minimal_runs"]) == (3, 3)
    assert load_experiment(s.out / "minimal.yaml").faults == best.faults


def test_a_replay_that_passes_is_reported_not_shrunk(tmp_path):
    s = _shrinker(tmp_path, lambda e: False, tries=3)
    assert s.shrink() is None and s.stopped_by == "not reproduced"
    assert len(s.attempts) == 1 and len(s.attempts[0].runs) == 3     # three tries, then given up
    assert not (s.out / "minimal.yaml").exists()


def test_a_failure_that_needs_no_fault_ends_with_none(tmp_path):
    s = _shrinker(tmp_path, lambda e: True, confirm=0)
    best = s.shrink()
    assert best is not None and best.faults == () and best.phases.chaos_s == 2.0


def test_the_budget_keeps_the_best_so_far(tmp_path):
    s = _shrinker(tmp_path, _breaks)
    calls = {"n": 0}
    inner = s.run_one

    def run(e, seed, run_dir):
        calls["n"] += 1
        if calls["n"] == 4:
            s.deadline = 0.0          # the budget runs out before the fifth run
        return inner(e, seed, run_dir)

    s.run_one = run
    best = s.shrink()
    assert s.stopped_by == "budget" and best is not None and len(best.faults) < 6
    assert load_experiment(s.out / "minimal.yaml").faults == best.faults
