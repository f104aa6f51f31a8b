"""`chaos check RUN_DIR...` and judge_run: checks.json, readable output, exit codes."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from chaos.checkers.command import check
from chaos.checkers.judge import judge_run
from chaos.checkers.result import Validity
from chaos.history import EventWriter, Kind
from chaos.model.checker_name import CheckerName

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "histories"


def run_dir(tmp_path: Path, fixture: str) -> Path:
    d = tmp_path / fixture.removesuffix(".jsonl")
    d.mkdir()
    shutil.copy(FIXTURES / fixture, d / "history.jsonl")
    return d


def test_pass_exit_0_and_checks_json(tmp_path):
    d = run_dir(tmp_path, "static-restart-within-timeout.jsonl")
    res = CliRunner().invoke(check, [str(d)])
    assert res.exit_code == 0, res.output
    doc = orjson.loads((d / "checks.json").read_bytes())
    assert doc["valid"] == "true" and len(doc["results"]) == len(CheckerName)


def test_failure_exit_1_names_what_when_and_evidence(tmp_path):
    d = run_dir(tmp_path, "fencing-stale-generation.jsonl")
    res = CliRunner().invoke(check, [str(d)])
    assert res.exit_code == 1
    out = res.output
    assert "[FAIL] fencing" in out and "generation 1 while the coordinator was at generation 2" in out
    assert "at 1" in out  # relative seconds
    assert '"kind":"commit"' in out and '"event":"stabilized"' in out  # evidence printed as history lines


def test_unknown_exit_3(tmp_path):
    d = run_dir(tmp_path, "convergence-no-samples.jsonl")
    assert CliRunner().invoke(check, [str(d)]).exit_code == 3


def test_bad_input_exit_2_one_line(tmp_path):
    res = CliRunner().invoke(check, [str(tmp_path / "missing")])
    assert res.exit_code == 2 and "no such run directory" in res.output and "Traceback" not in res.output
    d = tmp_path / "corrupt"
    d.mkdir()
    lines = (FIXTURES / "delivery-duplicates.jsonl").read_bytes().splitlines()
    lines[3] = lines[3][:15]
    (d / "history.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    res = CliRunner().invoke(check, [str(d)])
    assert res.exit_code == 2
    # the line names the run directory too: `chaos check runs/*/*` must say which run is broken
    assert res.output.strip() == f"chaos: error: {d}: history.jsonl:4: not valid JSON (unexpected end of data)"


def test_false_wins_over_bad_input_across_runs(tmp_path):
    bad = run_dir(tmp_path, "delivery-lost-record.jsonl")
    res = CliRunner().invoke(check, [str(tmp_path / "missing"), str(bad)])
    assert res.exit_code == 1


def test_json_flag(tmp_path):
    d = run_dir(tmp_path, "delivery-lost-record.jsonl")
    res = CliRunner().invoke(check, [str(d), "--json", "--checker", "delivery"])
    [doc] = orjson.loads(res.output)  # always a list, one entry per run
    assert doc["run_dir"] == str(d) and doc["error"] is None
    assert doc["valid"] == "false" and doc["results"][0]["checker"] == "delivery"
    assert doc["results"][0]["findings"][0]["evidence"] == [19]


def test_judge_run_merges_events_when_history_missing(tmp_path):
    (tmp_path / "header.json").write_bytes(orjson.dumps({"schema_version": 1, "run_id": "r", "seed": 1,
                                                         "experiment": {}, "versions": {}, "configs": {}}))
    w = EventWriter.for_run(tmp_path, "producer-0")
    w.emit(Kind.SEND_OK, mono_ns=10, topic="t", partition=0, offset=0, key=None, value="r:p0:0")
    w.close()
    v = judge_run(tmp_path)
    assert (tmp_path / "history.jsonl").exists() and (tmp_path / "checks.json").exists()
    assert v.result("delivery").valid is Validity.FALSE  # produced, never consumed


def test_judge_run_rejects_non_run_dir(tmp_path):
    from chaos.errors import UsageError

    with pytest.raises(UsageError, match="neither history.jsonl nor events/"):
        judge_run(tmp_path)


def test_rejudging_never_overwrites_the_recorded_verdict(tmp_path):
    """A run judged false keeps checks.json; `--checker fencing` (true alone) goes to checks.rejudged.json."""
    d = run_dir(tmp_path, "delivery-lost-record.jsonl")
    first = CliRunner().invoke(check, [str(d)])
    assert first.exit_code == 1, first.output
    recorded = (d / "checks.json").read_bytes()
    again = CliRunner().invoke(check, [str(d), "--checker", "fencing"])
    assert again.exit_code == 0, again.output
    assert (d / "checks.json").read_bytes() == recorded
    assert orjson.loads(recorded)["valid"] == "false"
    rejudged = orjson.loads((d / "checks.rejudged.json").read_bytes())
    assert rejudged["valid"] == "true" and [r["checker"] for r in rejudged["results"]] == ["fencing"]
    assert "checks.rejudged.json" in again.output
