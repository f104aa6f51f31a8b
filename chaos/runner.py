"""Running experiments: clusters reused across runs, one directory per run, a verdict per run.

For each experiment and each of its runs:

1. a cluster of the experiment's shape — reused from the previous run when the
   shape is the same (healed in between: paused nodes thawed, dead ones
   restarted, proxies reset); each run gets a fresh topic and group;
2. one :class:`chaos.lifecycle.Run` — the lifecycle every entry point shares:
   warm-up → chaos (the seeded plan) → heal → quiesce → final read → merge →
   judge (``checks.json``).

Batch (``chaos run``), nightly (``chaos run --nightly``) and the pytest
plugin's ``run_experiment`` are all :func:`run_series` over their own list of
planned runs.

The seed of run *k* is ``seed + k``; the same seed and spec give the same
fault schedule (``chaos plan``). Exit codes: 0 every run valid (or failed
exactly as ``expect_violation`` says), 1 an invariant failed, 2 bad input or
infrastructure failure, 3 a verdict was unknown.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import random
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from chaos.checkers.result import Validity
from chaos.cluster import Cluster, new_cluster
from chaos.errors import InfrastructureError, UsageError
from chaos.lifecycle import Run
from chaos.model.backend import BackendName
from chaos.model.cluster import ClusterSpec
from chaos.model.experiment import Experiment, check_seed
from chaos.model.shard import WHOLE, Shard

if TYPE_CHECKING:
    from chaos.cluster.container_engine import DockerEngine

EXIT_OK, EXIT_FALSE, EXIT_BAD, EXIT_UNKNOWN = 0, 1, 2, 3


@dataclass
class RunOutcome:
    experiment: str
    index: int
    seed: int
    run_dir: str
    valid: str                      # true | false | unknown | error
    expected: bool                  # the verdict is what the experiment expects
    failed_checkers: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    error: str | None = None
    faults: list[dict] = field(default_factory=list)
    explanation: str | None = None

    @property
    def details(self) -> str:
        """`` (details in RUN_DIR)`` for an error message when the run directory exists now, else nothing: a run
        that found no cluster (Kafka not set up) never created it."""
        return f" (details in {self.run_dir})" if Path(self.run_dir).is_dir() else ""

    @property
    def exit_code(self) -> int:
        if self.valid == "error":
            return EXIT_BAD
        if self.expected:
            return EXIT_OK
        return {"false": EXIT_FALSE, "unknown": EXIT_UNKNOWN}.get(self.valid, EXIT_FALSE)


def refuse_unfit(experiments: Iterable[Experiment], cluster_dir: Path, backend: str | None = None) -> None:
    """Every experiment must fit the running cluster ``--cluster`` names (its shape, :meth:`ClusterSpec.shape`, on
    the local backend), or nothing runs: one :class:`UsageError` naming the first that does not and what differs."""
    from chaos.cluster.attach import attached_spec

    have = attached_spec(cluster_dir)
    for exp in experiments:
        if (backend or exp.backend) != BackendName.LOCAL:
            raise UsageError(f"--cluster attaches a local cluster; {exp.name} runs on the {backend or exp.backend} "
                             "backend: drop --cluster or --backend docker")
        diff = exp.cluster.differences(have)
        if diff:
            raise UsageError(f"--cluster {cluster_dir.name}: {exp.name} needs {', '.join(diff)}: start a cluster "
                             f"of its shape with `chaos cluster up --like {exp.name}`, or drop --cluster")


#: the pool's key of the attached cluster (``--cluster``): one for every spec it fits
ATTACHED = "attached"


class ClusterPool:
    """Keeps clusters alive across runs, one per shape (at most ``size``, least recently used
    stopped first); a cluster handed out again is healed first, and the topics earlier runs created on it
    are deleted (:meth:`chaos.cluster.kafka_cluster.KafkaCluster.drop_run_topics`).

    With ``attach`` (the session directory of a running local cluster, ``--cluster``) every run gets that
    cluster, attached and healed (:meth:`chaos.cluster.kafka_cluster.KafkaCluster.adopt`), and closing lets it
    go running, every run's topic kept (the cluster is the user's); a spec it does not fit is refused
    (:func:`refuse_unfit`)."""

    def __init__(self, size: int = 2, backend: str | None = None, attach: Path | None = None) -> None:
        self.size = size
        #: overrides every experiment's ``backend`` (CLI --backend, plugin --chaos-backend)
        self.backend = backend
        self.attach = attach
        self._clusters: dict[str, Cluster] = {}
        self._pinned: set[str] = set()
        self._engine: DockerEngine | None = None  # our dockerd, started on the first docker cluster, stopped by close()

    def get(self, spec: ClusterSpec, pin: bool = False, backend: str = BackendName.LOCAL) -> Cluster:
        """A started, healed cluster of ``spec``; a pinned one is never evicted for another shape."""
        backend = self.backend or backend
        if self.attach is not None:
            return self._attached(spec, backend)
        key = self._key(spec, backend)
        if pin:
            self._pinned.add(key)
        cluster = self._clusters.pop(key, None)
        if cluster is not None:
            cluster.heal()
            cluster.drop_run_topics()  # the last runs' topics, kept until now for whoever reads them
        else:
            evictable = [k for k in self._clusters if k not in self._pinned]
            while len(self._clusters) >= self.size and evictable:
                self._clusters.pop(evictable.pop(0)).stop()
            if backend == BackendName.DOCKER and self._engine is None and not os.environ.get("KAFKA_CHAOS_DOCKER_HOST"):
                from chaos.cluster.container_engine import DockerEngine
                self._engine = DockerEngine().start()  # reuses a running one (docker-engine.sh start/run)
            cluster = new_cluster(backend, spec)
            cluster.start()
        self._clusters[key] = cluster  # most recently used last
        return cluster

    @staticmethod
    def _key(spec: ClusterSpec, backend: str) -> str:
        return f"{backend}:{spec.model_dump_json()}"

    def release(self, spec: ClusterSpec, backend: str = BackendName.LOCAL) -> None:
        """Stop the pinned cluster of ``spec`` now that nothing will ask for it again, and give its slot up:
        the pool keeps one cluster fewer from here on. An idle cluster is not free on a small machine (four
        JVMs with their fetchers and timers slowed a Spark job beside them by a fifth, docs/testing.md), so
        the slot is not handed to the next shape. A ``get`` of ``spec`` after this starts a new cluster.
        An attached cluster is left as it is: it is the user's."""
        if self.attach is not None:
            return
        key = self._key(spec, self.backend or backend)
        if key in self._pinned:
            self._pinned.discard(key)
            self.size = max(1, self.size - 1)
        cluster = self._clusters.pop(key, None)
        if cluster is not None:
            cluster.stop()

    def _attached(self, spec: ClusterSpec, backend: str) -> Cluster:
        """The attached cluster for every run whose cluster it fits (attached once, healed before each run)."""
        from chaos.cluster.attach import attached_spec
        from chaos.cluster.local import LocalCluster

        assert self.attach is not None
        have = attached_spec(self.attach)
        diff = spec.differences(have)
        if backend != BackendName.LOCAL or diff:  # the CLI said so before any run (refuse_unfit); the plugin says it here
            raise UsageError(f"cluster {self.attach.name} does not fit this run: it needs "
                             f"{', '.join(diff) if diff else f'the {backend} backend'}")
        cluster = self._clusters.pop(ATTACHED, None)
        if cluster is not None:
            cluster.heal()
        else:
            cluster = LocalCluster.attach(self.attach)
        self._clusters[ATTACHED] = cluster
        return cluster

    def discard(self) -> None:
        """Throw every cluster away (a run broke one beyond healing)."""
        self.close()

    def close(self) -> None:
        try:
            while self._clusters:
                self._clusters.popitem()[1].stop()
        finally:
            if self._engine is not None:
                self._engine.stop()  # only if it started it
                self._engine = None

    def __enter__(self) -> ClusterPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def run_once(cluster: Cluster, exp: Experiment, seed: int, run_dir: Path) -> Path:
    """One run of ``exp`` on a started cluster, not judged; returns the run directory (history merged)."""
    with Run(cluster, exp, run_dir, seed) as run:
        run.record()
    return run_dir


def judge_once(cluster: Cluster, exp: Experiment, seed: int, run_dir: Path, index: int = 0) -> RunOutcome:
    """Run ``exp`` once on ``cluster`` and judge it; infrastructure errors become an ``error`` outcome."""
    t0 = time.monotonic()
    oc = RunOutcome(exp.name, index, seed, str(run_dir), "error", False)
    try:
        with Run(cluster, exp, run_dir, seed) as run:
            verdict = run.execute()
        oc.valid = verdict.valid.value
        oc.failed_checkers = [r.checker.value for r in verdict.results if r.valid is Validity.FALSE]
        if exp.expect_violation:
            oc.expected = set(oc.failed_checkers) >= {c.value for c in exp.expect_violation}
        else:
            oc.expected = verdict.valid is Validity.TRUE
        if verdict.valid is not Validity.TRUE:  # an expected violation is explained too: what broke, and why
            from chaos.harness import explain
            oc.explanation = explain(verdict, run_dir)
    except UsageError as exc:
        oc.error = str(exc)
    except Exception as exc:  # noqa: BLE001 - an infrastructure failure ends this run, not the batch
        oc.error = f"{type(exc).__name__}: {exc}"
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "error.txt").write_text(traceback.format_exc())
    oc.wall_s = round(time.monotonic() - t0, 2)
    try:
        oc.faults = json.loads((run_dir / "faults.json").read_text())
    except (FileNotFoundError, ValueError):
        pass
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "outcome.json").write_text(json.dumps(asdict(oc), indent=1))
    return oc


def prepare_clients(exp: Experiment) -> str | None:
    """The client releases ``exp`` runs members on, prepared (a no-op when cached); why one cannot be, else None."""
    from chaos.workload.libraries import ensure_for, releases_of

    try:
        ensure_for(releases_of(exp), progress=lambda _: None)
    except UsageError as exc:
        return str(exc)
    return None


def pooled_run(pool: ClusterPool, exp: Experiment, seed: int, run_dir: Path, index: int) -> RunOutcome:
    """One judged run on a cluster from ``pool``; a run that failed on infrastructure discards the pool's
    clusters (it may have broken them)."""
    from chaos.workload.application import unstartable

    why = next(filter(None, (unstartable(f"consumer-{i}", c) for i, c in enumerate(exp.workload.consumers))), None)
    if why is None:
        why = prepare_clients(exp)
    if why is not None:  # before a cluster is started or attached for it
        return RunOutcome(exp.name, index, seed, str(run_dir), "error", False, error=why)
    try:
        cluster = pool.get(exp.cluster, backend=exp.backend)
    except UsageError as exc:
        pool.discard()
        return RunOutcome(exp.name, index, seed, str(run_dir), "error", False, error=str(exc))
    oc = judge_once(cluster, exp, seed, run_dir, index)
    if oc.valid == "error":
        pool.discard()
    return oc


class BatchStopped(InfrastructureError):
    """A run could not be judged (the infrastructure failed); the batch stopped there.

    Carries the outcomes of the runs done so far (each written to its run directory).
    """

    def __init__(self, message: str, outcomes: list[RunOutcome]):
        super().__init__(message)
        self.outcomes = outcomes


def _stop_on_error(oc: RunOutcome, outcomes: list[RunOutcome]) -> None:
    """A run that ended in ``error`` stops the batch: the next runs would meet the same broken
    infrastructure (a nightly once made 2,521 failed "runs" in 1.5 s without Kafka set up)."""
    if oc.valid == "error":
        raise BatchStopped(f"{oc.experiment} run {oc.index} (seed {oc.seed}) could not run: {oc.error}; "
                           f"stopped after {len(outcomes)} run(s) — fix that and run again{oc.details}", outcomes)


#: one planned run of a series: (experiment, index, seed, run directory)
PlannedRun = tuple[Experiment, int, int, Path]


def run_series(runs: Iterable[PlannedRun], *, pool: ClusterPool,
               on_run: Callable[[RunOutcome], None] | None = None,
               on_start: Callable[[Experiment, int, int], None] | None = None) -> list[RunOutcome]:
    """The run loop of every series — batch, nightly, the pytest plugin's ``run_experiment``.

    Each planned run gets a healed cluster of its shape from ``pool`` and is judged; the first run that
    could not be judged (infrastructure) stops the series with :class:`BatchStopped`. ``runs`` may be a
    generator that decides the next run from the outcomes so far (the nightly budget).
    """
    outcomes: list[RunOutcome] = []
    for exp, k, seed, run_dir in runs:
        if on_start:
            on_start(exp, k, seed)
        oc = pooled_run(pool, exp, seed, run_dir, k)
        outcomes.append(oc)
        if on_run:
            on_run(oc)
        _stop_on_error(oc, outcomes)
    return outcomes


def free_run_dir(out: Path, name: str, k: int, seed: int) -> tuple[int, int, Path]:
    """``(index, seed, run directory)`` of run ``k`` of experiment ``name`` under ``out``: ``run-<k>-seed-<seed>``,
    or the next index whose directory does not exist yet. A run never writes into an earlier run's directory
    (its event files would be appended to, and its history would mix two runs): running the same experiment
    and seed into the same ``--out`` again (``make demo`` twice) keeps the earlier run and writes the next index."""
    while (run_dir := out / name / f"run-{k:03d}-seed-{seed}").exists():
        k += 1
    return k, seed, run_dir


def run_experiments(experiments: list[Experiment], out: Path, *, runs: int | None = None, seed: int | None = None,
                    on_run: Callable[[RunOutcome], None] | None = None,
                    on_start: Callable[[Experiment, int, int], None] | None = None,
                    backend: str | None = None, attach: Path | None = None) -> list[RunOutcome]:
    """Run each experiment ``runs`` times (default: its own ``runs``), seeds ``seed``, ``seed+1``…;
    raises :class:`BatchStopped` at the first run that could not be judged."""
    base_seed = check_seed(seed) if seed is not None else random.SystemRandom().randrange(1, 2**31)
    check_seed(base_seed + max(runs or e.runs for e in experiments) - 1 if experiments else base_seed,
               "--seed (plus the run count)")
    planned = [(exp, *free_run_dir(out, exp.name, k, base_seed + k))
               for exp in experiments for k in range(runs or exp.runs)]
    with ClusterPool(backend=backend, attach=attach) as pool:
        return run_series(planned, pool=pool, on_run=on_run, on_start=on_start)


def parse_budget(text: str) -> float:
    """'90m', '2h', '45s' or plain seconds -> seconds; a budget must be positive and finite."""
    units = {"s": 1, "m": 60, "h": 3600}
    t = text.strip().lower()
    try:
        seconds = float(t[:-1]) * units[t[-1]] if t and t[-1] in units else float(t)
    except ValueError:
        raise UsageError(f"--budget {text!r}: write a duration such as 60m, 2h or 900s") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise UsageError(f"--budget {text!r}: a budget must be a positive duration such as 60m, 2h or 900s")
    return seconds


def estimate_s(exp: Experiment) -> float:
    """A run's expected wall time: its configured phases plus measured overhead (bench/experiments.py)."""
    return 1.5 * (exp.phases.warmup_s + exp.phases.chaos_s + exp.phases.heal_s) + 10.0


def nightly_plan(experiments: list[Experiment], base_seed: int) -> Iterator[tuple[int, Experiment, int]]:
    """The nightly's plan, without end: ``(index, experiment, seed)``, round after round of ``experiments``
    (one cluster shape after the other, in a seeded order within each), every seed drawn from ``base_seed``."""
    rng = random.Random(base_seed)
    index = 0
    while True:
        for exp in sorted(experiments, key=lambda e: (e.cluster.model_dump_json(), rng.random())):
            yield index, exp, rng.randrange(1, 2**31)
            index += 1


class Interleaved(Protocol):
    """An exploration interleaved with a nightly's catalogue: :class:`chaos.explore.search.Explorer` (the
    runner does not import the explorer, which is built on it)."""

    spent_s: float
    outcomes: list[RunOutcome]
    out: Path

    def begin(self, pool: ClusterPool, deadline: float | None = None) -> None: ...
    def step(self, pool: ClusterPool) -> bool: ...
    def close(self) -> None: ...
    def summary(self) -> dict[str, Any]: ...


#: ``(archive, base seed, budget) -> explorer``: how :func:`run_nightly` makes its interleaved exploration
ExplorerFactory = Callable[[Path, int, float], Interleaved]


def run_nightly(experiments: list[Experiment], results: Path, budget_s: float, *, seed: int | None = None,
                on_run: Callable[[RunOutcome], None] | None = None,
                on_start: Callable[[Experiment, int, int], None] | None = None,
                attach: Path | None = None, shard: Shard = WHOLE,
                explore: ExplorerFactory | None = None, explore_share: float = 0.25) -> list[RunOutcome]:
    """Run the catalogue in rounds, with fresh seeds, until the budget is spent.

    The rounds are a plan decided by the seed alone (each round the experiments in a seeded order, each run
    a seeded seed, run ``i`` of the plan in ``run-<i>-seed-<s>``); ``shard`` runs its share of it
    (:class:`chaos.model.shard.Shard`), so N machines with one seed run the plan one machine would, each
    run once. Each shard skips what does not fit in its own budget.

    Runs are archived under ``results/<YYYY-MM-DD>/<experiment>/run-<k>-seed-<s>/`` — the results
    directory accumulates across nights (``chaos report`` reads it) — and a summary is written to
    ``results/<YYYY-MM-DD>/nightly-<HHMMSS>.json`` once a run has recorded anything. A run that would not
    fit in what is left of the budget (by :func:`estimate_s`) is not started.

    With ``explore``, an exploration is interleaved: made with the night's base seed (and ``shard``), its
    archive ``results/<YYYY-MM-DD>/explore-<HHMMSS>/``, ``explore_share`` of the budget its own. After each
    catalogue run, the explorer runs its plan (with the replays and shrinks of what it finds) until its time
    is ``explore_share`` of the time spent so far; once no catalogue run fits any more, it has what is left.
    Its runs go through ``on_start`` / ``on_run`` too; the outcomes returned are the catalogue's (the
    explorer keeps its own, and the nightly summary names its archive).
    """
    if budget_s <= 0:
        raise UsageError(f"nightly budget {budget_s:g} s: a budget must be positive")
    if not 0 < explore_share < 1:
        raise UsageError(f"--explore-share {explore_share:g}: a fraction of the budget above 0 and below 1")
    shortest = min((estimate_s(e) for e in experiments), default=0.0)
    if budget_s < shortest:
        raise UsageError(f"nightly budget {budget_s:g} s is shorter than the shortest run (about {shortest:.0f} s): "
                         f"give at least {math.ceil(shortest / 60)}m")
    night = time.strftime("%Y-%m-%d")
    base = check_seed(seed) if seed is not None else random.SystemRandom().randrange(1, 2**31)
    out = results / night
    started = time.monotonic()
    deadline = started + budget_s
    explorer = (explore(out / f"explore-{time.strftime('%H%M%S')}{shard.suffix}", base, explore_share * budget_s)
                if explore else None)

    plan = nightly_plan(experiments, base)

    def keep_up(pool: ClusterPool) -> None:
        """The explorer's runs until its time is its share of the time spent so far."""
        while explorer is not None and explorer.spent_s < explore_share * (time.monotonic() - started):
            if not explorer.step(pool):
                return

    def rounds(pool: ClusterPool) -> Iterator[PlannedRun]:
        """This shard's runs of the plan, round by round, while they fit in the budget, the explorer's
        between them."""
        while experiments:
            owned_any = started_any = False
            for i, exp, s in itertools.islice(plan, len(experiments)):  # one round
                if not shard.owns(i):
                    continue
                owned_any = True
                if time.monotonic() + estimate_s(exp) > deadline:
                    continue
                k, s, run_dir = free_run_dir(out, exp.name, i, s)
                started_any = True
                yield exp, k, s, run_dir
                keep_up(pool)
            if owned_any and not started_any:
                break
        while explorer is not None and explorer.step(pool):  # what the catalogue leaves
            pass

    outcomes: list[RunOutcome] = []

    def record(oc: RunOutcome) -> None:
        outcomes.append(oc)
        if on_run:
            on_run(oc)

    try:
        with ClusterPool(attach=attach) as pool:
            if explorer is not None:
                explorer.begin(pool, deadline)
            run_series(rounds(pool), pool=pool, on_run=record, on_start=on_start)
    finally:
        if explorer is not None:
            explorer.close()
        # a night that recorded no run (its first cluster did not start) leaves no dated directory behind
        if any(Path(o.run_dir).exists() for o in [*outcomes, *(explorer.outcomes if explorer else [])]):
            _write_nightly_summary(out, night, base, budget_s, outcomes, shard, explorer)
    return outcomes


def _write_nightly_summary(out: Path, night: str, base: int, budget_s: float, outcomes: list[RunOutcome],
                           shard: Shard, explorer: Interleaved | None = None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    name = f"nightly-{time.strftime('%H%M%S')}{shard.suffix}"
    explored = None
    if explorer is not None:
        s = explorer.summary()
        explored = {"archive": explorer.out.name, "runs": s["runs"], "verdicts": s["verdicts"],
                    "spent_s": s["spent_s"], "findings": s["findings"]}
    (out / f"{name}.json").write_text(json.dumps({
        "night": night, "base_seed": base, "shard": str(shard) if shard.n > 1 else None, "budget_s": budget_s,
        "runs": len(outcomes),
        "expected": sum(o.expected for o in outcomes), "outcomes": [asdict(o) for o in outcomes],
        "explore": explored}, indent=1))


def exit_code(outcomes: list[RunOutcome]) -> int:
    codes = {o.exit_code for o in outcomes}
    for code in (EXIT_BAD, EXIT_FALSE, EXIT_UNKNOWN):
        if code in codes:
            return code
    return EXIT_OK
