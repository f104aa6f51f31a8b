"""pytest plugin (entry point ``pytest11: chaos``): thin and lazy.

It maps options onto settings, hands out real clusters and the harness of
:mod:`chaos.harness`, and turns a failed invariant into a failed test whose
text is the checkers' explanation. The library does the work; nothing heavy is
imported until a fixture is used.

Fixtures
  ``kafka_cluster``   a real cluster shared by the session (started on first use), healed after each test and
                      stopped after the last test that can use it (:func:`pytest_runtest_teardown`)
  ``consumer_group``  ``consumer_group(members=3, handler=fn, **ConsumerSpec fields)`` starts the group under test
  ``producer``        ``producer(rate=200)`` writes checkable records to the group's topic
  ``chaos``           faults on roles as context managers: ``with chaos.kill("coordinator", when="CompletingRebalance"):``
  ``history``         ends the test's run (heal, quiesce, final read, judge) and returns the recorded History
  ``run_experiment``  ``run_experiment("coordinator-kill-completing-eager")`` runs a catalogue file

A test that started a consumer group is judged after its body: a verdict other
than valid fails it with the explanation; the run directory and seed are
attached to the report and, as properties, to JUnit XML so CI can rerun the
exact schedule (``--chaos-seed``).

Options (ini keys in brackets): ``--chaos-backend`` [chaos_backend],
``--chaos-seed`` [chaos_seed], ``--chaos-runs`` [chaos_runs],
``--chaos-kafka-version`` (alias ``--kafka-version``) [chaos_kafka_version],
``--chaos-group-protocol`` [chaos_group_protocol],
``--chaos-client-version CLIENT=X.Y.Z`` (repeatable) [chaos_client_versions, one per line], ``--chaos-out`` [chaos_out],
``--chaos-cluster`` [chaos_cluster] (run on a running ``chaos cluster up`` cluster, as ``chaos run --cluster``:
the shared cluster is that one, and a ``run_experiment`` of another shape fails saying what differs),
``--run-slow`` (nightly-size tests marked ``slow``).

The Kafka version and group protocol act as ``chaos run --kafka-version/--group-protocol`` do
(:func:`chaos.experiment.apply_overrides`): every ``run_experiment`` experiment is moved onto them and validated
again (a 4.x version means KRaft); one the move makes impossible (a ZooKeeper fault on KRaft,
kafka-python under KIP-848) is skipped with the model's reason. The shared cluster runs the version
(default 3.9.1), and ``consumer_group`` members get the protocol unless the test names one. A client version acts
as ``chaos run --client-version`` does: every member of that client, in ``run_experiment`` experiments and
``consumer_group`` groups (unless the test names a ``client_version``), runs that library release, prepared into
the cache before its run (docs/client-versions.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from chaos.model.backend import BackendName  # an enum alone: nothing heavy is imported with the plugin

if TYPE_CHECKING:
    from chaos.cluster import Cluster
    from chaos.model.cluster import ClusterSpec
    from chaos.runner import ClusterPool

_ITEM_KEY = pytest.StashKey[dict]()
#: the node id of the last test that can use the shared cluster
_LAST_USER = pytest.StashKey[str]()


@dataclass(frozen=True)
class SessionCluster:
    """The shared cluster once started, with the pool and spec that release it (:func:`pytest_runtest_teardown`)."""
    pool: ClusterPool
    spec: ClusterSpec
    cluster: Cluster


SHARED = pytest.StashKey[SessionCluster]()
#: the fixtures through which a test can reach the shared cluster: itself, and ``run_experiment`` (an
#: experiment of the shared cluster's shape runs on it)
_SHARED_CLUSTER_FIXTURES = frozenset({"_chaos_session_cluster", "run_experiment"})


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("chaos", "kafka-chaos")
    group.addoption("--chaos-backend", default=None, choices=[b.value for b in BackendName],
                    help="cluster backend [ini chaos_backend]")
    group.addoption("--chaos-seed", default=None, type=int, help="seed of the fault schedules [ini chaos_seed]")
    group.addoption("--chaos-runs", default=None, type=int, help="runs per run_experiment call [ini chaos_runs]")
    group.addoption("--chaos-kafka-version", "--kafka-version", dest="chaos_kafka_version", default=None,
                    metavar="X.Y.Z", help="Kafka release of the clusters and experiments: 2.8.x-3.9.x ZooKeeper, "
                                          "3.7.x-4.x KRaft (4.x: KRaft only) [ini chaos_kafka_version]")
    group.addoption("--chaos-group-protocol", dest="chaos_group_protocol", default=None,
                    choices=["classic", "consumer"],
                    help="group protocol of every member: classic, or consumer (KIP-848; needs KRaft) "
                         "[ini chaos_group_protocol]")
    group.addoption("--chaos-client-version", dest="chaos_client_versions", action="append", default=None,
                    metavar="CLIENT=X.Y.Z",
                    help="run every member of CLIENT (confluent-kafka, kafka-python, java) on that library release "
                         "(repeatable) [ini chaos_client_versions]")
    group.addoption("--chaos-shard", dest="chaos_shard", default=None, metavar="K/N",
                    help="chaos_explore: run shard K of N of the plan (give every shard the same --chaos-seed)")
    group.addoption("--chaos-out", default=None, help="directory for run directories (default: pytest's tmp)")
    group.addoption("--chaos-cluster", default=None, metavar="SESSION",
                    help="run on this running local cluster (`chaos cluster up --like EXPERIMENT`) instead of "
                         "starting one: the shared cluster, and every run_experiment's [ini chaos_cluster]")
    group.addoption("--run-slow", action="store_true", default=False, help="also run tests marked slow (nightly-size)")
    parser.addini("chaos_backend", "cluster backend", default=BackendName.LOCAL.value)
    parser.addini("chaos_seed", "seed of the fault schedules", default="1")
    parser.addini("chaos_runs", "runs per run_experiment call", default="1")
    # empty: the experiments' own versions, and 3.9.1 for the shared cluster
    parser.addini("chaos_kafka_version", "Kafka version (default: each experiment's; 3.9.1 for the shared cluster)",
                  default="")
    parser.addini("chaos_group_protocol", "group protocol of every member: classic or consumer (default: each "
                                          "experiment's)", default="")
    parser.addini("chaos_client_versions", "CLIENT=X.Y.Z client library releases of every member of CLIENT",
                  type="linelist", default=[])
    parser.addini("chaos_out", "directory for run directories", default="")
    parser.addini("chaos_cluster", "a running local cluster to run on (chaos cluster up)", default="")
    parser.addini("chaos_experiments", "directory of the experiment catalogue", default="experiments")


#: kafka-python 3.0.12 loads its protocol schemas with ``importlib.resources.read_text`` (which calls
#: ``open_text``), deprecated on Python 3.11-3.12 and undeprecated in 3.13: two DeprecationWarnings per schema,
#: over 200 lines under every test session that imports ``kafka``, none of them the user's to fix
KAFKA_PYTHON_WARNINGS = (
    "ignore:read_text is deprecated:DeprecationWarning:kafka.protocol.schemas.load_json",
    "ignore:open_text is deprecated:DeprecationWarning:importlib.resources._legacy",
)


def pytest_configure(config: pytest.Config) -> None:
    for line in KAFKA_PYTHON_WARNINGS:
        config.addinivalue_line("filterwarnings", line)
    config.addinivalue_line("markers", "integration: starts real Kafka/ZooKeeper/Toxiproxy processes")
    config.addinivalue_line("markers", "slow: nightly-size suite, runs only with --run-slow")
    config.addinivalue_line("markers", "chaos(experiment=None, seed=None, runs=None): parameters for run_experiment "
                                       "and the chaos fixtures of this test")
    attach = _opt(config, "--chaos-cluster", "chaos_cluster") or None
    if attach is not None:
        _check_attach(config, attach)
    _client_versions(config)  # refused at once, before any test runs
    version, protocol = _kafka_version(config), _group_protocol(config)
    if version is None and protocol is None:
        return  # nothing to check: the model is not even imported
    from chaos.errors import UsageError
    from chaos.model.cluster import (
        DEFAULT_KAFKA_VERSION,
        KRAFT_KAFKA_VERSION,
        ClusterMode,
        modes_of,
        validate_kafka_version,
    )

    if version is not None:
        try:
            validate_kafka_version(version)
        except UsageError as exc:
            raise pytest.UsageError(f"--chaos-kafka-version: {exc}") from None
    # KIP-848 needs KRaft, which the shared cluster runs only on a version whose default mode is KRaft
    if protocol == "consumer" and modes_of(version or DEFAULT_KAFKA_VERSION)[0] is not ClusterMode.KRAFT:
        raise pytest.UsageError(f"--chaos-group-protocol consumer (KIP-848) needs a KRaft cluster: add "
                                f"--chaos-kafka-version 4.x (e.g. {KRAFT_KAFKA_VERSION})")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="nightly-size: in make test-all (--run-slow)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def pytest_collection_finish(session: pytest.Session) -> None:
    users = [item.nodeid for item in session.items if _SHARED_CLUSTER_FIXTURES & set(getattr(item, "fixturenames", ()))]
    if users:
        session.config.stash[_LAST_USER] = users[-1]


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    """After the last test that can use the shared cluster, stop it rather than keep it idle under the rest of
    the session (:meth:`chaos.runner.ClusterPool.release`); at the session's end the pool stops it anyway."""
    yield
    if nextitem is not None and item.config.stash.get(_LAST_USER, None) == item.nodeid:
        shared = item.config.stash.get(SHARED, None)
        if shared is not None:
            shared.pool.release(shared.spec)


def _check_attach(config: pytest.Config, name: str) -> None:
    """``--chaos-cluster``: a running local cluster of this user, of the version asked for (if one is)."""
    from chaos.cluster.attach import attachable, attached_spec
    from chaos.errors import UsageError

    try:
        spec = attached_spec(attachable(name))
    except UsageError as exc:
        raise pytest.UsageError(str(exc).replace("--cluster", "--chaos-cluster", 1)) from None
    version = _kafka_version(config)
    if version is not None and version != spec.kafka_version:
        raise pytest.UsageError(f"--chaos-cluster {name} runs Kafka {spec.kafka_version}, not {version}: drop "
                                "--chaos-kafka-version or start a cluster of that version")
    if _opt(config, "--chaos-backend", "chaos_backend") not in (None, "", BackendName.LOCAL):
        raise pytest.UsageError("--chaos-cluster attaches a local cluster: drop --chaos-backend docker")


def _opt(config: pytest.Config, name: str, ini: str):
    value = config.getoption(name)
    return value if value is not None else config.getini(ini)


def _kafka_version(config: pytest.Config) -> str | None:
    """The Kafka version asked for (option, else ini), or None: the experiments' own."""
    return _opt(config, "chaos_kafka_version", "chaos_kafka_version") or None


def _group_protocol(config: pytest.Config) -> str | None:
    """The group protocol asked for (option, else ini), or None: the experiments' own."""
    protocol = _opt(config, "chaos_group_protocol", "chaos_group_protocol") or None
    if protocol not in (None, "classic", "consumer"):
        raise pytest.UsageError(f"chaos_group_protocol = {protocol}: write classic or consumer")
    return protocol


def _client_versions(config: pytest.Config) -> dict:
    """{Client: release} asked for (options, else ini); a pytest.UsageError saying what to write otherwise."""
    items = config.getoption("chaos_client_versions") or config.getini("chaos_client_versions")
    if not items:
        return {}
    from chaos.model.workload import parse_client_release

    out: dict = {}
    for item in items:
        try:
            client, version = parse_client_release(item)
        except ValueError as exc:
            raise pytest.UsageError(f"--chaos-client-version {exc}") from None
        out[client] = version
    return out


def _marker(request: pytest.FixtureRequest) -> dict:
    m = request.node.get_closest_marker("chaos")
    return dict(m.kwargs) if m else {}


@pytest.fixture(scope="session")
def chaos_settings(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = _opt(pytestconfig, "--chaos-out", "chaos_out")
    return {
        "backend": _opt(pytestconfig, "--chaos-backend", "chaos_backend"),
        "seed": int(_opt(pytestconfig, "--chaos-seed", "chaos_seed")),
        "runs": int(_opt(pytestconfig, "--chaos-runs", "chaos_runs")),
        "kafka_version": _kafka_version(pytestconfig),
        "group_protocol": _group_protocol(pytestconfig),
        "client_versions": _client_versions(pytestconfig),
        "out": Path(out) if out else tmp_path_factory.mktemp("chaos-runs"),
        "cluster": _opt(pytestconfig, "--chaos-cluster", "chaos_cluster") or None,
        "experiments": Path(pytestconfig.rootpath) / pytestconfig.getini("chaos_experiments"),
    }


@pytest.fixture(scope="session")
def kafka_cluster_spec(chaos_settings):
    from chaos.model.cluster import DEFAULT_KAFKA_VERSION, ClusterSpec

    if chaos_settings["cluster"] is not None:  # the attached cluster is the shared one, whatever its shape
        from chaos.cluster.attach import attachable, attached_spec

        return attached_spec(attachable(chaos_settings["cluster"]))
    # the version's default mode: ZooKeeper up to 3.9.x, KRaft on 4.x
    return ClusterSpec.build(brokers=3, zookeepers=1, lanes=3,
                             kafka_version=chaos_settings["kafka_version"] or DEFAULT_KAFKA_VERSION)


@pytest.fixture(scope="session")
def _chaos_pool(kafka_cluster_spec, chaos_settings):
    from chaos.process import terminate_on_sigterm
    from chaos.runner import ClusterPool

    # a CI runner's SIGTERM becomes SystemExit, so the clusters are stopped rather than orphaned
    attach = None
    if chaos_settings["cluster"] is not None:
        from chaos.cluster.attach import attachable

        attach = attachable(chaos_settings["cluster"])
    with terminate_on_sigterm(), ClusterPool(backend=chaos_settings["backend"], attach=attach) as pool:
        yield pool


@pytest.fixture(scope="session")
def _chaos_session_cluster(pytestconfig: pytest.Config, _chaos_pool, kafka_cluster_spec):
    cluster = _chaos_pool.get(kafka_cluster_spec, pin=True)
    pytestconfig.stash[SHARED] = SessionCluster(_chaos_pool, kafka_cluster_spec, cluster)
    return cluster


@pytest.fixture
def kafka_cluster(_chaos_session_cluster):
    """The shared cluster, healed after the test so the next one starts whole."""
    yield _chaos_session_cluster
    _chaos_session_cluster.heal()


@pytest.fixture
def _chaos_test(request, kafka_cluster, chaos_settings):
    from chaos.harness import ChaosTest

    params = _marker(request)
    seed = params.get("seed", chaos_settings["seed"])
    safe = request.node.name.replace("/", "_").replace("[", "-").replace("]", "")[:80]
    test = ChaosTest(kafka_cluster, chaos_settings["out"] / safe, seed=seed)
    request.node.stash[_ITEM_KEY] = {"test": test, "seed": seed}
    yield test
    test.abort()  # no-op once judged


@pytest.fixture
def consumer_group(_chaos_test, chaos_settings):
    protocol, clients = chaos_settings["group_protocol"], chaos_settings["client_versions"]
    if protocol is None and not clients:
        return _chaos_test.consumer_group

    def start(members: int = 3, **fields):
        from chaos.model.workload import Client

        if protocol is not None:
            fields.setdefault("group_protocol", protocol)  # a test that names its protocol keeps it
        client = Client(fields.get("client", Client.CONFLUENT_KAFKA))
        if client in clients and fields.get("command") is None:
            fields.setdefault("client_version", clients[client])  # ... and one that names its release too
        return _chaos_test.consumer_group(members, **fields)
    return start


@pytest.fixture
def producer(_chaos_test):
    return _chaos_test.producer


@pytest.fixture
def chaos(_chaos_test):
    return _chaos_test.chaos


@pytest.fixture
def history(_chaos_test):
    """Call it to end the run and get its History: ``h = history()`` (judging happens then too)."""
    def finish():
        _chaos_test.finish()
        return _chaos_test.history
    return finish


@pytest.fixture
def run_experiment(request: pytest.FixtureRequest, chaos_settings, _chaos_pool, kafka_cluster_spec):
    """``run_experiment(name_or_path=None, seed=None, runs=None)`` -> list of RunOutcome; unexpected verdicts fail
    the test."""
    from chaos.runner import RunOutcome, run_series

    state = request.node.stash.setdefault(_ITEM_KEY, {})
    outcomes: list[RunOutcome] = state.setdefault("outcomes", [])

    def run(experiment: str | None = None, seed: int | None = None, runs: int | None = None):
        params = _marker(request)
        name = experiment or params.get("experiment")
        if not name:
            raise pytest.UsageError("run_experiment needs an experiment: run_experiment('name') "
                                    "or @pytest.mark.chaos(experiment='name')")
        exp = experiment_on(session_experiment(name, chaos_settings), chaos_settings)
        s0 = seed if seed is not None else params.get("seed", chaos_settings["seed"])
        n = runs or params.get("runs") or chaos_settings["runs"]
        state["seed"] = s0
        planned = [(exp, k, s0 + k, chaos_settings["out"] / exp.name / f"{request.node.name}-{k}") for k in range(n)]
        got = run_series(planned, pool=_chaos_pool)
        outcomes.extend(got)
        return got

    return run


@pytest.fixture
def chaos_explore(request: pytest.FixtureRequest, chaos_settings, _chaos_pool):
    """``chaos_explore(workload, budget="10m", families=None, seed=None, runs=None, shrink_share=0.4)`` -> the
    :class:`chaos.explore.search.Explorer` after its search (``.findings``, ``.summary()``, ``.out``): what
    ``chaos explore`` does, on the session's clusters, for a nightly job on a team's own consumer. The first
    finding ends the search and fails the test with its explanation (what happened first) and where its minimal
    experiment is; unknown runs are in the summary. ``--chaos-shard K/N`` runs one shard of the plan (with
    ``--chaos-seed``)."""
    from chaos.explore.plan import parse_families
    from chaos.explore.search import Explorer
    from chaos.model.shard import Shard
    from chaos.runner import parse_budget

    def explore(workload: str, budget: str = "10m", *, families: str | None = None, seed: int | None = None,
                runs: int | None = None, shrink_share: float = 0.4) -> Explorer:
        exp = experiment_on(session_experiment(workload, chaos_settings), chaos_settings)
        shard = Shard.parse(request.config.getoption("chaos_shard"))
        out = chaos_settings["out"] / "explore" / f"{request.node.name}-shard-{shard.k}-of-{shard.n}"
        explorer = Explorer(exp, out, parse_budget(budget), seed if seed is not None else chaos_settings["seed"],
                            shard, parse_families(families) if families else None, shrink_share, runs,
                            max_findings=1, pool=_chaos_pool)
        found = explorer.run()
        if found:
            lines = [f"{f.signature} {f.finding_class}: {f.explanation} -> {out / 'findings' / f.signature}"
                     for f in found]
            pytest.fail(f"chaos explore of {exp.name} found {len(found)} finding(s):\n" + "\n".join(lines),
                        pytrace=False)
        return explorer

    return explore


def session_experiment(name: str, settings: dict):
    """The experiment ``name`` names: a file, else ``<chaos_experiments>/<name>.yaml``, else a catalogue name
    (./experiments/ or the catalogue shipped with kafka-chaos)."""
    from chaos.experiment import load_experiment

    path = Path(name)
    if not path.exists() and (settings["experiments"] / f"{name}.yaml").is_file():
        path = settings["experiments"] / f"{name}.yaml"
    return load_experiment(path)


def experiment_on(exp, settings: dict):
    """``exp`` moved onto the session's Kafka version and group protocol (``--chaos-kafka-version``,
    ``--chaos-group-protocol``); skips the test when the experiment cannot run there (the model's reason)."""
    from chaos.errors import UsageError
    from chaos.experiment import apply_overrides

    try:
        return apply_overrides(exp, kafka_version=settings["kafka_version"], group_protocol=settings["group_protocol"],
                               client_versions=settings["client_versions"], flag="--chaos-")
    except UsageError as exc:
        pytest.skip(f"cannot run here: {exc}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    outcome = yield
    state = item.stash.get(_ITEM_KEY, None)
    if not state:
        return
    test = state.get("test")
    if outcome.excinfo is not None:
        if test is not None:
            test.abort()
        return
    from chaos.harness import explain

    failures = []
    if test is not None and test.run is not None:
        verdict = test.finish()
        item.user_properties += [("chaos_seed", state["seed"]), ("chaos_run_dir", str(test.run_dir)),
                                 ("chaos_verdict", verdict.valid.value)]
        item.add_report_section("call", "chaos", f"run directory: {test.run_dir}\nseed: {state['seed']}\n"
                                                 f"verdict: {verdict.valid.value}")
        if verdict.valid.value != "true":
            failures.append(explain(verdict, test.run_dir))
    for oc in state.get("outcomes", []):
        item.user_properties += [("chaos_seed", oc.seed), ("chaos_run_dir", oc.run_dir),
                                 ("chaos_verdict", oc.valid)]
        item.add_report_section("call", "chaos", f"{oc.experiment} seed {oc.seed}: {oc.valid} -> {oc.run_dir}")
        if not oc.expected:
            failures.append(oc.explanation or f"{oc.experiment} seed {oc.seed}: verdict {oc.valid} ({oc.error or ''}) "
                                              f"run directory {oc.run_dir}")
    if failures:
        outcome.force_exception(pytest.fail.Exception("\n\n".join(failures), pytrace=False))
