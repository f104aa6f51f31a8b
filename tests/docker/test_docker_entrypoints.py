"""The docker backend through the entry points users run: `pytest --chaos-backend docker` and
`chaos run --backend docker`."""

import json
from pathlib import Path

import pytest

from chaos.cluster.container_engine import DockerEngine

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def real_cache(monkeypatch):
    # pytester points HOME at a temporary directory; the runtime cache (jars, images' inputs) is the real one
    from chaos.cluster.runtime import cache_root
    monkeypatch.setenv("KAFKA_CHAOS_CACHE", str(cache_root()))


def test_readme_plugin_example_on_the_docker_backend(docker_host, pytester: pytest.Pytester):
    from tests.integration.test_pytest_plugin import readme_example

    handler, test = readme_example()
    pytester.makepyfile(orders=handler, test_orders=test)
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--chaos-backend", "docker", "--chaos-seed", "5",
                                        f"--chaos-out={pytester.path / 'runs'}", timeout=900)
    res.assert_outcomes(passed=1)
    [run_dir] = [p for p in (pytester.path / "runs").iterdir() if p.is_dir()]
    header = json.loads((run_dir / "history.jsonl").read_text().splitlines()[0])
    assert header["configs"]["cluster"]["backend"] == "docker"
    assert any((pytester.path / "processed").iterdir())
    # the session's clusters are gone with it; the engine (ours, reused) is still up for the next test
    assert DockerEngine().ping()


def test_chaos_run_with_backend_docker_from_the_command_line(docker_host, tmp_path):
    import subprocess
    import sys

    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "chaos.cli", "run", str(ROOT / "experiments" / "consumer-black-holed.yaml"),
                           "--backend", "docker", "--seed", "9", "--out", str(out), "--json"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    [outcome] = json.loads(proc.stdout[proc.stdout.index("["):])
    assert outcome["valid"] == "true" and outcome["error"] is None, outcome
    histories = list(out.rglob("history.jsonl"))
    assert len(histories) == 1
    header = json.loads(histories[0].read_text().splitlines()[0])
    assert header["configs"]["cluster"]["backend"] == "docker"
