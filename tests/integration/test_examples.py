"""The examples a newcomer runs (examples/, issue 14 item 4), run as a newcomer runs them.

Each example directory is copied outside the repository (``tmp_path``) and ``chaos run <experiment>.yaml``
is run there with the venv's ``chaos`` in a subprocess (``PATH`` starting with the venv's ``bin``, so a
``python3`` command member has confluent-kafka, and ``java`` / ``mvn`` come from the system). The verdicts
are read from ``chaos run --json`` and each run's ``checks.json``; the broken variants' text from
``chaos check RUN_DIR``, the text a user reads, which must start with what happened to the run.

One ``chaos run`` per example directory (python-service and black-box: one for what ``make test`` runs, one for
what ``make test-all`` adds): its experiments share one cluster (the runner's pool).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from chaos.cluster.runtime import cache_root

if TYPE_CHECKING:
    from tests.integration.conftest import SharedCluster

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
BIN = Path(sys.executable).parent
#: what a member records of its own when it is not instrumented (chaos.checkers.evidence.MemberEvidence)
NOTHING_OF = "recorded nothing of"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nothing of the repository on the path
    env["PATH"] = os.pathsep.join([str(BIN), env.get("PATH", "/usr/bin:/bin")])
    return env


def _copy(example: str, tmp_path: Path) -> Path:
    dest = tmp_path / example
    shutil.copytree(EXAMPLES / example, dest, ignore=shutil.ignore_patterns("target", "__pycache__", "runs"))
    return dest


def _chaos(cwd: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "chaos"), *args], cwd=cwd, env=_env(), capture_output=True, text=True,
                          timeout=timeout)


def _run(shared: SharedCluster, cwd: Path, *experiments: str) -> dict[str, dict[str, Any]]:
    """``chaos run EXPERIMENTS --json`` in ``cwd``, on the session's cluster (a run that starts its own is
    test_installed_package's); experiment name -> its outcome, with its checks.json."""
    with shared.lent() as attach:
        res = _chaos(cwd, "run", *experiments, "--seed", "1", "--out", str(cwd / "runs"), "--json", *attach)
    assert res.returncode in (0, 1, 3), f"exit {res.returncode}: {res.stderr[-3000:]}"
    outcomes = {o["experiment"]: o for o in json.loads(res.stdout)}
    for o in outcomes.values():
        assert o["valid"] != "error", o["error"]
        o["exit"] = res.returncode
        checks = json.loads((Path(o["run_dir"]) / "checks.json").read_text())
        o["checks"] = {r["checker"]: r for r in checks["results"]}
        o["incidents"] = checks["incidents"]
    return outcomes


def _example_runs(factory: pytest.TempPathFactory, shared: SharedCluster, example: str,
                  *names: str) -> dict[str, dict[str, Any]]:
    """The example copied outside the repository, its experiments ``names`` (files ``NAME.yaml``) run there."""
    return _run(shared, _copy(example, factory.mktemp("outside-the-repo")), *(f"{name}.yaml" for name in names))


def _verdicts(outcome: dict[str, Any]) -> dict[str, str]:
    return {name: r["valid"] for name, r in outcome["checks"].items()}


# ----------------------------------------------------------------------------------------- python-service

#: the python-service experiment make test runs (one that must hold, judged on the application's own records);
#: make test-all runs the other three (a pause is shown on a real cluster by test_fault_targets, committing before
#: processing by the black-box example below, processing revoked partitions caught by ownership-time by
#: test_shrink's red run and under KIP-848 by test_kraft_experiments; the root cause first by the black-box one)
PYTHON_SERVICE = ("orders-coordinator-kill",)
PYTHON_SERVICE_MORE = ("orders-paused-past-session-timeout", "broken-commit-before-process", "broken-keeps-revoked")


@pytest.fixture(scope="module")
def python_service(tmp_path_factory, shared_cluster) -> dict[str, dict[str, Any]]:
    return _example_runs(tmp_path_factory, shared_cluster, "python-service", *PYTHON_SERVICE)


@pytest.fixture(scope="module")
def python_service_more(tmp_path_factory, shared_cluster) -> dict[str, dict[str, Any]]:
    return _example_runs(tmp_path_factory, shared_cluster, "python-service", *PYTHON_SERVICE_MORE)


def _python_service(request: pytest.FixtureRequest, experiment: str) -> dict[str, Any]:
    fixture = "python_service" if experiment in PYTHON_SERVICE else "python_service_more"
    return request.getfixturevalue(fixture)[experiment]


def _more(*args: str):
    return pytest.param(*args, marks=pytest.mark.slow)


@pytest.mark.parametrize("experiment", ["orders-coordinator-kill", _more("orders-paused-past-session-timeout")])
def test_the_orders_service_keeps_its_promises(request, experiment):
    o = _python_service(request, experiment)
    assert o["valid"] == "true", (_verdicts(o), o["explanation"])
    assert o["expected"]
    # judged on the application's own records: the instrumented consumer recorded what it processed
    assert all("members_without_evidence" not in r["metrics"] for r in o["checks"].values())
    assert o["checks"]["delivery"]["metrics"]["consumed_records"] >= o["checks"]["delivery"]["metrics"]["produced"] > 0
    if experiment == "orders-paused-past-session-timeout":
        # the frozen member was a zombie (the coordinator gave its partitions away) and that was explained
        assert o["checks"]["ownership-time"]["metrics"]["zombie_windows"] > 0


@pytest.mark.parametrize(("experiment", "checker", "root_cause"), [
    # the planned kills of consumer-1 are the plan, not incidents: the first failure names its early commits
    _more("broken-commit-before-process", "delivery", ("consumer-1 committed", "had not been processed")),
    _more("broken-keeps-revoked", "ownership-time", ("consumer-1 processed", "without holding it while")),
])
def test_a_broken_variant_is_caught_by_the_right_checker_root_cause_first(request, experiment, checker, root_cause):
    _caught_root_cause_first(_python_service(request, experiment), checker, root_cause)


def _caught_root_cause_first(o: dict[str, Any], checker: str, root_cause: tuple[str, ...], exit_code: int = 0) -> None:
    """A broken variant's run: false as it expects, and ``chaos check``'s text, root cause first (``exit_code``: of
    the ``chaos run`` it shared with the other experiments of its example)."""
    assert o["valid"] == "false" and o["expected"] and o["exit"] == exit_code, _verdicts(o)
    assert checker in o["failed_checkers"]
    run_dir = Path(o["run_dir"])
    res = _chaos(run_dir.parent, "check", str(run_dir), timeout=300)
    assert res.returncode == 1, res.stderr[-2000:]
    text = [line.strip() for line in res.stdout.splitlines()[1:] if not line.strip().startswith("note:")]
    # what happened to the run comes first (none here: nothing died that the plan did not kill), then the
    # checkers; the first failing one is the one this variant is written to be caught by, and its first
    # finding names the broken member and what it did
    failing = [i for i, line in enumerate(text) if line.startswith("[FAIL]")]
    assert failing, text[:20]
    if o["incidents"]:
        assert text[0].startswith("what happened to the run"), text[:5]
    assert text[failing[0]].split()[1] == checker, text[:20]
    first = text[failing[0] + 1]
    assert all(part in first for part in root_cause), first


# ----------------------------------------------------------------------------------------- java-consumer

def _maven_build(cwd: Path) -> None:
    mvn = shutil.which("mvn")
    if mvn is None or shutil.which("java") is None:
        pytest.skip("the Java example needs a JDK and Maven on PATH (make setup checks both)")
    base = [mvn, "-B", "-q", f"-Dmaven.repo.local={cache_root() / 'm2'}", "package"]
    for argv in ([*base, "-o"], base):  # offline first: kafka-clients and the plugins are cached by make setup
        res = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600)
        if res.returncode == 0:
            return
    raise AssertionError(f"mvn package failed: {res.stdout[-2000:]}{res.stderr[-2000:]}")


@pytest.fixture(scope="module")
def java_consumer(tmp_path_factory) -> Path:
    """The java-consumer example copied outside the repository and built with Maven (once for the module)."""
    cwd = _copy("java-consumer", tmp_path_factory.mktemp("outside-the-repo"))
    _maven_build(cwd)
    assert (cwd / "target" / "orders-consumer.jar").is_file()
    return cwd


def test_the_java_consumer_is_judged_through_the_interceptor(java_consumer, shared_cluster):
    cwd = java_consumer
    o = _run(shared_cluster, cwd, "java-consumer.yaml")["java-consumer"]
    verdicts = _verdicts(o)
    # what the interceptor lines and the coordinator support is judged ...
    assert verdicts["delivery"] == "true", o["checks"]["delivery"]["summary"]
    assert o["checks"]["delivery"]["metrics"]["consumed_records"] >= o["checks"]["delivery"]["metrics"]["produced"] > 0
    assert verdicts["committed-offsets"] == "true", o["checks"]["committed-offsets"]["summary"]
    assert verdicts["convergence"] == "true", o["checks"]["convergence"]["summary"]
    # ... what needs assignments or generations (the interceptor sees neither) is not, and says why
    for name in ("ownership-generation", "ownership-time", "generations"):
        assert verdicts[name] == "unknown" and NOTHING_OF in o["checks"][name]["summary"], (name, verdicts)
    assert verdicts["fencing"] == "unknown" and "no generation" in o["checks"]["fencing"]["summary"], verdicts
    assert "false" not in verdicts.values(), verdicts
    assert o["valid"] == "unknown" and o["exit"] == 3


#: the example's member with the interceptor jar left off the classpath: the consumer is still told to load
#: the interceptor ($KAFKA_CHAOS_INTERCEPTOR_JAR is set), so KafkaConsumer's constructor cannot find the class
NO_JAR_ON_CLASSPATH = """\
name: interceptor-not-loadable
cluster: {brokers: 1, zookeepers: 1, lanes: 1}
workload:
  partitions: 2
  replication: 1
  consumers:
    - {lane: lane0, session_timeout_ms: 6000,
       command: [sh, -c, 'exec java -Xmx128m -cp "target/orders-consumer.jar:target/lib/*" example.OrdersConsumer']}
  producers: [{rate: 50, lane: lane0}]
phases: {warmup_s: 1, chaos_s: 2, quiesce_s: 10, warmup_timeout_s: 60}
"""


def _processes_under(path: Path) -> list[str]:
    """Command lines of live processes that name ``path`` (the example's copy) in their argv or cwd."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue  # ended meanwhile, or not ours to read
        if str(path) in argv or cwd.startswith(str(path)):
            found.append(f"{proc.name}: {argv}")
    return found


def test_an_interceptor_that_cannot_be_loaded_is_one_line_naming_the_member(java_consumer):
    """Issue 14, bad input: the JVM member dies constructing its consumer; one line, exit 2, nothing left running."""
    (java_consumer / "no-jar.yaml").write_text(NO_JAR_ON_CLASSPATH)
    out = java_consumer / "runs-no-jar"
    res = _chaos(java_consumer, "run", "no-jar.yaml", "--seed", "1", "--out", str(out))
    assert res.returncode == 2, (res.returncode, res.stderr[-2000:])
    errors = [line for line in res.stderr.splitlines() if line.startswith("chaos: error:")]
    assert len(errors) == 1, res.stderr[-2000:]
    line = errors[0]
    assert "Traceback" not in res.stderr
    # names the member, what happened, and the root cause from the tail of its output
    assert "member consumer-0 (command sh) exited with code 1 during the warm-up" in line, line
    assert "ClassNotFoundException: io.kafkachaos.interceptor.RecordingConsumerInterceptor" in line, line
    # nothing lost: the run directory is kept and named; nothing of the run is left running
    run_dirs = list(out.glob("interceptor-not-loadable/run-*"))
    assert len(run_dirs) == 1 and str(run_dirs[0]) in line and (run_dirs[0] / "history.jsonl").is_file()
    assert (run_dirs[0] / "workers" / "consumer-0.out").is_file()
    assert _processes_under(java_consumer) == []


# ----------------------------------------------------------------------------------------- black-box

@pytest.fixture(scope="module")
def black_box(tmp_path_factory, shared_cluster) -> dict[str, dict[str, Any]]:
    return _example_runs(tmp_path_factory, shared_cluster, "black-box", "black-box", "broken-commit-before-process")


@pytest.fixture(scope="module")
def black_box_reporting(tmp_path_factory, shared_cluster) -> dict[str, dict[str, Any]]:
    """make test-all: the reporting variant (parsing the reports: tests/unit/workload/test_processed_reports.py)."""
    return _example_runs(tmp_path_factory, shared_cluster, "black-box", "black-box-reporting")


def test_an_uninstrumented_process_is_judged_unknown_from_coordinator_evidence_alone(black_box):
    o = black_box["black-box"]
    verdicts = _verdicts(o)
    assert o["valid"] == "unknown" and o["exit"] == 3, verdicts
    assert "false" not in verdicts.values(), verdicts
    # nothing the members would have had to record comes out true; each says which members lacked what
    for name in ("delivery", "ownership-generation", "ownership-time", "fencing", "generations"):
        assert verdicts[name] == "unknown" and NOTHING_OF in o["checks"][name]["summary"], (name, verdicts)
    assert "consumer-1 (command)" in o["checks"]["delivery"]["summary"]
    # the coordinator's own evidence is judged: committed offsets, and convergence after consumer-1's pause
    # (its members named by client.id, consumption resumed shown by committed offsets moving on)
    assert verdicts["committed-offsets"] == "true", o["checks"]["committed-offsets"]["summary"]
    assert verdicts["convergence"] == "true", o["checks"]["convergence"]["summary"]
    # what needs the members' own configuration is not judged from the declared one
    for name in ("static-membership", "rebalance-liveness"):
        assert verdicts[name] == "unknown" and NOTHING_OF in o["checks"][name]["summary"], (name, verdicts)
    assert not [i for i in o["incidents"] if i["kind"] == "never_joined"], o["incidents"]


@pytest.mark.slow
def test_a_process_reporting_what_it_processed_on_the_output_topic_is_judged_for_delivery(black_box_reporting):
    o = black_box_reporting["black-box-reporting"]
    verdicts = _verdicts(o)
    assert "false" not in verdicts.values(), verdicts
    # every member's reports became its consumed events: delivery is judged, on every record acknowledged
    run_dir = Path(o["run_dir"])
    for i in range(3):
        assert (run_dir / "events" / f"consumer-{i}.processed.jsonl").stat().st_size > 0
    assert not (run_dir / "workers" / "processed-reports-notes.txt").exists()
    delivery = o["checks"]["delivery"]
    assert verdicts["delivery"] == "true", delivery["summary"]
    assert delivery["metrics"]["produced"] > 0 and delivery["metrics"]["lost"] == 0
    assert delivery["metrics"]["consumed_records"] >= delivery["metrics"]["produced"]
    assert verdicts["convergence"] == "true", o["checks"]["convergence"]["summary"]
    # reports say what was processed, not what was owned when, nor with which generation
    for name in ("ownership-generation", "ownership-time", "fencing", "generations"):
        assert verdicts[name] == "unknown" and NOTHING_OF in o["checks"][name]["summary"], (name, verdicts)


def test_a_black_box_committing_before_processing_is_caught_from_the_coordinators_offsets_and_its_reports(black_box):
    # consumer-1 commits each batch as it polls it and is killed mid-batch: the coordinator shows offsets committed
    # past records no member reported processed; the finding names the partition's owner in the coordinator's view
    _caught_root_cause_first(black_box["black-box-broken-commit-before-process"], "delivery",
                             ("the coordinator's committed offset of", "owned by consumer-1",
                              "never reported processed by the group"),
                             exit_code=3)  # the run's other experiment, black-box.yaml, is unknown by design
