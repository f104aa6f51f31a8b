"""What the `chaos` commands print when the input is good: stable JSON shapes, readable tables that fit
the terminal, help a person can use, completion of experiment names, and `cluster down` touching only
this user's clusters. These run the real executable (no cluster is started)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from chaos.experiment import PACKAGED_CATALOGUE

CHAOS = [sys.executable, "-m", "chaos.cli"]
ROOT = Path(__file__).resolve().parents[2]
HISTORY = ROOT / "fixtures" / "histories" / "delivery-lost-record.jsonl"


def chaos(*args, cwd=None, env=None, timeout=120):
    return subprocess.run(CHAOS + list(args), capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)


# ------------------------------------------------------------------ catalogue

def test_the_catalogue_is_package_data_and_experiments_points_at_it():
    assert (PACKAGED_CATALOGUE / "baseline.yaml").is_file()
    assert (ROOT / "experiments").resolve() == PACKAGED_CATALOGUE.resolve()


def test_list_json_from_an_empty_directory(tmp_path):
    res = chaos("list", "--json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    docs = json.loads(res.stdout)
    assert {d["name"] for d in docs} >= {"baseline", "coordinator-kill-completing-eager"}
    assert all(d["valid"] and d["origin"] == "packaged" for d in docs)
    assert set(docs[0]) >= {"name", "path", "origin", "valid", "faults", "runs", "description"}


def test_local_experiments_add_to_and_override_the_catalogue(tmp_path):
    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / "baseline.yaml").write_text("name: baseline\ndescription: mine\n")
    (tmp_path / "extra").mkdir()
    (tmp_path / "extra" / "extra-one.yaml").write_text("name: extra-one\n")
    docs = {d["name"]: d for d in json.loads(chaos("list", "--json", "--dir", "extra", cwd=tmp_path).stdout)}
    assert docs["baseline"]["description"] == "mine" and docs["baseline"]["origin"] == "local"
    assert docs["extra-one"]["valid"] and docs["coordinator-kill-completing-eager"]["origin"] == "packaged"
    res = chaos("plan", "extra-one", "--dir", "extra", cwd=tmp_path)
    assert res.returncode == 0 and res.stdout.startswith("extra-one, seed 1: 0 fault(s)"), res.stderr


@pytest.mark.parametrize("columns", [60, 80, 200])
def test_list_lines_fit_the_terminal_and_descriptions_are_whole(tmp_path, columns):
    res = chaos("list", env=dict(os.environ, COLUMNS=str(columns)), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert max(len(line) for line in res.stdout.splitlines()) <= columns
    # the end of a long description is there (words wrap, nothing is cut)
    text = " ".join(res.stdout.split())
    assert "Run it many times to measure false positives." in text


# ------------------------------------------------------------------ plan

def test_plan_is_a_table_by_default_and_json_on_request():
    res = chaos("plan", "nightly-mixed", "--seed", "3")
    assert res.returncode == 0, res.stderr
    header = res.stdout.splitlines()[1].split()
    assert header == ["fault", "at", "type", "target", "duration", "trigger"]
    docs = json.loads(chaos("plan", "nightly-mixed", "--seed", "3", "--json").stdout)
    assert {d["type"] for d in docs} >= {"kill", "pause"}
    random = next(d for d in docs if "random" in d["trigger"])
    assert isinstance(random["trigger"]["random"], dict)  # data, not a Python repr
    assert "{'" not in json.dumps(docs)
    # the same seed gives the same schedule
    assert docs == json.loads(chaos("plan", "nightly-mixed", "--seed", "3", "--json").stdout)


# ------------------------------------------------------------------ check

def _run(tmp_path, name="run"):
    d = tmp_path / name
    d.mkdir(parents=True)
    (d / "history.jsonl").write_bytes(HISTORY.read_bytes())
    return d


def test_check_json_is_always_a_list_with_errors_as_entries(tmp_path):
    good = _run(tmp_path)
    one = json.loads(chaos("check", str(good), "--json").stdout)
    assert isinstance(one, list) and len(one) == 1 and one[0]["error"] is None and one[0]["valid"] == "false"
    res = chaos("check", str(good), str(tmp_path / "missing"), "--json")
    both = json.loads(res.stdout)
    assert [d["valid"] for d in both] == ["false", "error"]
    assert both[1]["error"].endswith("missing: no such run directory")
    assert res.stderr.count("chaos: error:") == 1
    only_bad = json.loads(chaos("check", str(tmp_path / "missing"), "--json").stdout)
    assert only_bad[0]["valid"] == "error"


def test_max_evidence_bounds_the_evidence_printed(tmp_path):
    d = _run(tmp_path)
    full = chaos("check", str(d)).stdout
    none = chaos("check", str(d), "--max-evidence", "0").stdout
    evidence = lambda out: [l for l in out.splitlines() if l.startswith("          {")]  # noqa: E731
    assert evidence(full) and not evidence(none)
    assert "more evidence event(s) (--max-evidence)" in none


# ------------------------------------------------------------------ help

COMMANDS = [["setup"], ["cluster"], ["cluster", "up"], ["cluster", "status"], ["cluster", "down"], ["demo"],
            ["list"], ["schema"], ["plan"], ["run"], ["check"], ["report"]]


@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
def test_every_command_has_examples_and_every_option_is_explained(command):
    res = chaos(*command, "-h")
    assert res.returncode == 0, res.stderr
    assert "Examples:" in res.stdout
    from chaos.cli import main

    cmd = main
    for name in command:
        cmd = cmd.commands[name]
    assert cmd.short_help, command  # the summary in `chaos -h` is written out, not cut at 45 characters
    undocumented = [p.name for p in cmd.params if p.param_type_name == "option" and not p.help]
    assert not undocumented, (command, undocumented)


def test_main_help_lists_full_summaries_env_vars_exit_codes_and_completion():
    out = chaos("--help").stdout
    assert "..." not in out.split("Commands:")[1].split("Exit codes:")[0]  # summaries are not cut
    used = set(re.findall(r"KAFKA_CHAOS_[A-Z_]+", "".join(
        p.read_text() for p in (ROOT / "chaos").rglob("*.py"))))
    internal = {"KAFKA_CHAOS_DOCKER_UNAVAILABLE", "KAFKA_CHAOS_DOCKER_NETNS"}  # set by scripts for their children
    for name in used - internal:
        assert name in out, name
    for code in ("0 ", "1 ", "2 ", "3 ", "130"):
        assert f"  {code}" in out
    assert "_CHAOS_COMPLETE=bash_source chaos" in out


def test_completion_offers_experiment_names():
    env = dict(os.environ, _CHAOS_COMPLETE="bash_complete", COMP_WORDS="chaos run coordinator-kill-c", COMP_CWORD="2")
    res = subprocess.run(CHAOS, capture_output=True, text=True, env=env, timeout=60)
    names = {line.split(",", 1)[1] for line in res.stdout.splitlines()}
    assert names == {"coordinator-kill-completing-cooperative", "coordinator-kill-completing-eager"}


# ------------------------------------------------------------------ cluster down

def _fake_session(root: Path, name: str, uid: int | None = None) -> subprocess.Popen:
    """A detached session directory as `chaos cluster up` leaves it, whose one process is a real sleep."""
    d = root / name
    (d / "procs").mkdir(parents=True)
    proc = subprocess.Popen(["sleep", "300"])
    me = psutil.Process()
    (d / "owner.json").write_text(json.dumps({"pid": me.pid, "create_time": me.create_time(), "detached": True}))
    (d / "procs" / "sleep.json").write_text(json.dumps(
        {"name": "sleep", "pid": proc.pid, "create_time": psutil.Process(proc.pid).create_time(), "argv0": "sleep"}))
    if uid is not None:
        for p in (d, d / "procs", d / "owner.json", d / "procs" / "sleep.json"):
            os.chown(p, uid, uid)
    return proc


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to make a session owned by another user")
def test_cluster_down_stops_only_this_users_clusters_or_the_one_named(tmp_path):
    env = dict(os.environ, KAFKA_CHAOS_STATE=str(tmp_path))
    mine_a = _fake_session(tmp_path, "cluster-a")
    mine_b = _fake_session(tmp_path, "cluster-b")
    theirs = _fake_session(tmp_path, "cluster-other", uid=65534)
    try:
        res = chaos("cluster", "down", "cluster-a", env=env)
        assert res.returncode == 0 and "stopped cluster-a: 1 processes" in res.stdout, res.stderr
        assert mine_a.wait(10) is not None and mine_b.poll() is None and theirs.poll() is None
        res = chaos("cluster", "down", "cluster-other", env=env)
        assert res.returncode == 2 and "started by another user" in res.stderr
        res = chaos("cluster", "down", env=env)
        assert res.returncode == 0 and "stopped cluster-b" in res.stdout and "cluster-other" not in res.stdout
        assert mine_b.wait(10) is not None and theirs.poll() is None and (tmp_path / "cluster-other").is_dir()
    finally:
        for p in (mine_a, mine_b, theirs):
            p.kill()
            p.wait()
