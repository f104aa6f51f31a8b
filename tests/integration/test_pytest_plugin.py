"""The pytest plugin, tested with pytester against real clusters.

The README's plugin example is extracted and run as is, so it cannot rot.
"""

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parents[2]


def readme_example() -> tuple[str, str]:
    """(handler module, test module) from the README block after `<!-- pytest-example -->`."""
    text = (ROOT / "README.md").read_text()
    block = text.split("<!-- pytest-example -->", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    handler, test = block.split("# test_orders.py", 1)
    return handler.replace("# orders.py", "").strip() + "\n", test.strip() + "\n"


@pytest.fixture(autouse=True)
def real_cache(monkeypatch):
    # pytester points HOME at a temporary directory; the runtime cache lives under the real one
    from chaos.cluster.runtime import cache_root
    monkeypatch.setenv("KAFKA_CHAOS_CACHE", str(cache_root()))


def _props(xml_path: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        for p in case.iter("property"):
            out.setdefault(f"{case.get('name')}:{p.get('name')}", []).append(p.get("value"))
    return out


FAILING = '''
def test_a_consumer_that_skips_records(consumer_group, producer, history):
    consumer_group(members=2, wrong_mode="skip_records", skip_every=5)
    producer(rate=100, count=300)
    h = history()
    assert h.events
'''

EXPERIMENT = '''
import pytest

@pytest.mark.chaos(experiment="baseline")
def test_baseline(run_experiment):
    [outcome] = run_experiment()
    assert outcome.valid == "true"
'''


def test_readme_example_passes_a_failed_invariant_fails_with_its_explanation_and_the_seed_reruns(
        pytester: pytest.Pytester, shared_cluster):
    """One pytest session of a user's (one cluster, as in a user's CI): the README's example, a consumer that skips
    records and a catalogue experiment, each a test of its own. The session runs on this session's cluster
    (``--chaos-cluster``, as a CI job that started one with ``chaos cluster up`` would); the plugin starting its
    own is what this session did (and the docker stage's plugin example does)."""
    handler, test = readme_example()
    pytester.makepyfile(orders=handler, test_orders=test, test_bad=FAILING, test_exp=EXPERIMENT)
    pytester.makeini(f"[pytest]\nchaos_experiments = {ROOT / 'experiments'}\n")
    xml = pytester.path / "junit.xml"
    with shared_cluster.lent():
        res = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--junitxml={xml}", "--chaos-seed", "7",
                                            f"--chaos-out={pytester.path / 'runs'}",
                                            f"--chaos-cluster={shared_cluster.name}", timeout=900)
    res.assert_outcomes(passed=2, failed=1)
    props = _props(xml)

    # the README's example passed, and its JUnit case carries the seed and its run directory
    (name,) = re.findall(r"^def (test_\w+)", test, flags=re.MULTILINE)
    assert props[f"{name}:chaos_seed"] == ["7"], props
    run_dir = Path(props[f"{name}:chaos_run_dir"][0])
    assert (run_dir / "history.jsonl").exists() and (run_dir / "checks.json").exists()
    # the user's own processing function ran in the members: it writes a marker per record
    assert any((pytester.path / "processed").iterdir())

    # the consumer that skips records failed, the explanation and the evidence in the test's report
    out = res.stdout.str()
    assert "kafka-chaos: invariant violated" in out and "[delivery]" in out and "chaos check" in out
    assert re.search(r"evidence seq \d+", out)
    failed = [line for line in out.splitlines() if line.startswith("FAILED ")]
    assert len(failed) == 1 and "test_bad.py::test_a_consumer_that_skips_records" in failed[0], failed

    assert props["test_baseline:chaos_seed"] == ["7"]
    run_dir = Path(props["test_baseline:chaos_run_dir"][0])
    # the same seed gives the same schedule: rerunning with --chaos-seed 7 replays it
    import json

    from chaos.experiment import load_experiment
    from chaos.nemesis.schedule import plan, timeline
    assert json.loads((run_dir / "schedule.json").read_text()) == json.loads(json.dumps(
        timeline(plan(load_experiment(ROOT / "experiments" / "baseline.yaml"), 7))))


EXPLORE = '''
def test_nightly_exploration(chaos_explore):
    explorer = chaos_explore("baseline", budget="5m", families="process", runs=1)
    summary = explorer.summary()
    assert summary["runs"] == 1 and summary["plan_indices"] == [0] and summary["findings"] == []
    assert (explorer.out / "explore.json").is_file()
'''


def test_chaos_explore_fixture_explores_on_the_sessions_cluster(pytester: pytest.Pytester, shared_cluster):
    """The plugin's entry to ``chaos explore`` (a nightly job on a team's own consumer): the plan's first run on
    the session's cluster, a correct consumer, no finding; the archive under ``--chaos-out``. A finding failing
    the test is the CLI's path (tests/integration/test_explore.py), through the same Explorer."""
    pytester.makepyfile(test_explore=EXPLORE)
    pytester.makeini(f"[pytest]\nchaos_experiments = {ROOT / 'experiments'}\n")
    with shared_cluster.lent():
        res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--chaos-seed", "3",
                                            f"--chaos-out={pytester.path / 'runs'}",
                                            f"--chaos-cluster={shared_cluster.name}", timeout=600)
    res.assert_outcomes(passed=1)
    [archive] = (pytester.path / "runs" / "explore").iterdir()
    assert archive.name == "test_nightly_exploration-shard-1-of-1"
    assert (archive / "baseline-explore").is_dir()
