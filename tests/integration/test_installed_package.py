"""kafka-chaos installed (not editable) into a fresh virtual environment outside the repository works
from an empty directory: the catalogue ships as package data, and `chaos run` starts a real cluster.

The install is without the [report] extras (Spark is not needed to run experiments). pip's cache is
allowed; the Kafka/Toxiproxy runtime comes from $KAFKA_CHAOS_CACHE, set up by `chaos setup`.
"""

import json
import os
import subprocess
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    from chaos.cluster.runtime import cache_root

    if not (cache_root() / "kafka" / "3.9.1" / ".complete").exists():
        pytest.skip("runtime not set up (run `chaos setup`)")
    base = tmp_path_factory.mktemp("installed")
    env_dir = base / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    # -v shows the build backend's own output (-q hides it)
    res = subprocess.run([str(py), "-m", "pip", "install", "-v", "--disable-pip-version-check", str(ROOT)],
                         capture_output=True, text=True, timeout=900, cwd=base)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    # the build backend warns about nothing (`license` as a TOML table gave 56 lines of BuildBackendWarning)
    out = res.stdout + res.stderr
    assert "BuildBackendWarning" not in out and "DeprecationWarning" not in out, out[-3000:]
    empty = base / "empty"
    empty.mkdir()
    return env_dir / "bin" / "chaos", empty


def chaos(installed, *args, timeout=300):
    exe, cwd = installed
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run([str(exe), *args], capture_output=True, text=True, cwd=cwd, timeout=timeout, env=env)


def test_installed_outside_the_repository(installed):
    exe, _ = installed
    res = subprocess.run([str(exe.parent / "python"), "-c", "import chaos; print(chaos.__file__)"],
                         capture_output=True, text=True, timeout=60, cwd=installed[1])
    assert "site-packages" in res.stdout and str(ROOT) not in res.stdout, res.stdout + res.stderr


def test_list_from_an_empty_directory(installed):
    res = chaos(installed, "list", "--json")
    assert res.returncode == 0, res.stderr
    docs = json.loads(res.stdout)
    names = {d["name"] for d in docs}
    assert {"baseline", "coordinator-kill-completing-eager", "nightly-mixed"} <= names
    assert all(d["valid"] and d["origin"] == "packaged" for d in docs), [d for d in docs if not d["valid"]]
    res = chaos(installed, "list")
    assert res.returncode == 0 and "baseline" in res.stdout


def test_plan_baseline_from_an_empty_directory(installed):
    res = chaos(installed, "plan", "coordinator-kill-completing-eager", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)[0]["trigger"]["state"] == "CompletingRebalance"
    res = chaos(installed, "plan", "baseline")
    assert res.returncode == 0 and res.stdout.startswith("baseline, seed 1: 0 fault(s)"), res.stdout + res.stderr


def test_a_local_experiments_directory_overrides_the_packaged_one(installed):
    _, cwd = installed
    local = cwd.parent / "project"
    (local / "experiments").mkdir(parents=True)
    (local / "experiments" / "baseline.yaml").write_text("name: baseline\ndescription: my own\n")
    res = subprocess.run([str(installed[0]), "list", "--json"], capture_output=True, text=True, cwd=local, timeout=60)
    doc = next(d for d in json.loads(res.stdout) if d["name"] == "baseline")
    assert doc["origin"] == "local" and doc["description"] == "my own"


def test_run_baseline_from_an_empty_directory(installed):
    res = chaos(installed, "run", "baseline", "--runs", "1", "--seed", "5", "--json", timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    [outcome] = json.loads(res.stdout)
    assert outcome["valid"] == "true" and outcome["experiment"] == "baseline"
    run_dir = installed[1] / outcome["run_dir"]
    assert (run_dir / "history.jsonl").exists() and (run_dir / "checks.json").exists()
    # progress on stderr: the phases as they happen, no developer file:line suffix
    assert "phase chaos" in res.stderr and "phase heal" in res.stderr, res.stderr[-3000:]
    assert "cli.py:" not in res.stderr
