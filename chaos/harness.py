"""Chaos tests written as code: a consumer group under test and faults as context managers.

This is what the pytest plugin's fixtures hand out; it is plain Python and
works outside pytest too::

    with LocalCluster() as cluster:
        test = ChaosTest(cluster, Path("runs/t1"), seed=1)
        group = test.consumer_group(members=3, handler="mypkg.logic:process")
        test.producer(rate=200)
        group.bounce("consumer-2")                       # provoke a rebalance
        with test.chaos.fault("kill", "coordinator", when="CompletingRebalance"):
            time.sleep(3)                                 # healed (restarted) on exit
        verdict = test.finish()                           # quiesce, final read, merge, judge

The test is one :class:`chaos.lifecycle.Run` (the same lifecycle as
``chaos run``), its chaos phase lasting as long as the test body; faults go
through the run's :class:`chaos.nemesis.interpreter.Nemesis` (``fire``):
roles resolved at injection, ``fault_start``/``fault_end``/``fault_verified``
in the history, heal in ``finally``.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from chaos.checkers.bounds import CheckerBounds
from chaos.checkers.result import Verdict
from chaos.errors import UsageError
from chaos.history.reader import History, read_history
from chaos.lifecycle import Run
from chaos.model.checker_name import CheckerName
from chaos.model.experiment import Experiment, Phases
from chaos.model.faults import FaultSpec
from chaos.model.trigger import Trigger
from chaos.model.workload import ConsumerSpec, ProducerSpec, WorkloadSpec
from chaos.workload.run import WorkloadRun


def handler_ref(handler: str | Callable | None) -> str | None:
    """A processing function as ``module:function`` (workers are separate processes: it must be importable)."""
    if handler is None or isinstance(handler, str):
        return handler
    module, name = getattr(handler, "__module__", None), getattr(handler, "__qualname__", "")
    if not module or "<" in name or "." in name or module == "__main__":
        raise UsageError(f"handler {handler!r}: use a module-level function of an importable module "
                         "(or pass 'module:function')")
    return f"{module}:{name}"


class ConsumerGroup:
    """The group under test: its members are worker processes of the run."""

    def __init__(self, test: ChaosTest):
        self._test = test

    @property
    def workload(self) -> WorkloadRun:
        workload = self._test.workload
        if workload is None:  # a ConsumerGroup is handed out by consumer_group(), which starts the run
            raise UsageError("start the group first: consumer_group()")
        return workload

    @property
    def members(self) -> list[str]:
        return sorted(self.workload.member_specs)

    @property
    def group_id(self) -> str:
        return self.workload.group

    @property
    def topic(self) -> str:
        return self.workload.topic

    def bounce(self, member: str, down_s: float = 1.0) -> None:
        """Leave cleanly (SIGTERM) and rejoin after ``down_s``: two rebalances."""
        self.workload.kill_member(member, signal.SIGTERM)
        time.sleep(down_s)
        self.workload.start_member(member)

    def wait_assigned(self, timeout: float = 30.0) -> None:
        self.workload.wait_assigned(timeout)


class ChaosControl:
    """Faults on roles, each a context manager that heals on exit (the run's nemesis fires them)."""

    def __init__(self, test: ChaosTest):
        self._test = test

    @contextmanager
    def fault(self, type: str, target: str, *, node: str | None = None, when: str | None = None,
              links: str = "all", params: dict[str, float] | None = None, partition: int = 0,
              direction: str = "both", timeout_s: float = 30.0) -> Iterator[list[str]]:
        """Inject a fault (waiting first for group state ``when``, if given); heal it on exit.

        Yields the resolved nodes. Raises :class:`UsageError` for an invalid
        fault and ``TimeoutError`` when the state never came.
        """
        run = self._test.run
        if run is None or run.nemesis is None:
            raise UsageError("start the group first: consumer_group() before chaos.fault()")
        trigger = Trigger(state=when, timeout_s=timeout_s) if when else Trigger(at_s=0)
        try:
            fields: dict[str, Any] = {"type": type, "target": target, "node": node, "links": links,
                                      "partition": partition, "trigger": trigger, "duration_s": 0}
            # params and direction belong to link kinds: given only when asked for, so other kinds take no field
            # they do not own (their models refuse one)
            if params:
                fields["params"] = params
            if direction != "both":
                fields["direction"] = direction
            spec = FaultSpec.build(**fields)
        except Exception as exc:  # pydantic's ValidationError: one line
            detail = exc.errors()[0]["msg"] if hasattr(exc, "errors") else exc
            raise UsageError(f"fault {type} on {target}: {detail}") from None
        with run.nemesis.fire(spec, when=when, timeout_s=timeout_s) as nodes:
            yield nodes

    def kill(self, target: str, **kw: Any):
        return self.fault("kill", target, **kw)

    def pause(self, target: str, **kw: Any):
        return self.fault("pause", target, **kw)

    def cut(self, target: str, **kw: Any):
        """Black-hole every link of the target (connections stay open, data is held)."""
        return self.fault("black_hole", target, **kw)


class ChaosTest:
    """One recorded run driven by test code, judged at :meth:`finish` (a :class:`chaos.lifecycle.Run`)."""

    def __init__(self, cluster, run_dir: Path, *, seed: int = 1, partitions: int = 6,
                 checkers: list[CheckerName] | None = None, bounds: CheckerBounds | None = None,
                 warmup_timeout_s: float = Phases().warmup_timeout_s, quiesce_s: float = Phases().quiesce_s):
        """``warmup_timeout_s`` bounds the wait for every member's first assignment in :meth:`consumer_group`;
        ``quiesce_s`` the wait for the group to commit every record in :meth:`finish` (the
        :class:`~chaos.model.experiment.Phases` of an experiment file, with the same defaults)."""
        self.phases = Phases(warmup_s=0, chaos_s=0, heal_s=0, warmup_timeout_s=warmup_timeout_s, quiesce_s=quiesce_s)
        self.cluster = cluster
        self.run_dir = Path(run_dir)
        self.seed = seed
        self.partitions = partitions
        self.checkers = checkers
        self.bounds = bounds
        #: the run's lifecycle (warm-up, chaos, heal, quiesce, judge), once the group started
        self.run: Run | None = None
        self.chaos = ChaosControl(self)
        self.verdict: Verdict | None = None
        self.history: History | None = None

    @property
    def workload(self) -> WorkloadRun | None:
        """The workload of the run (its members, producers, topic and group), once the group started."""
        return self.run.workload if self.run is not None else None

    def consumer_group(self, members: int = 3, *, handler: str | Callable | None = None,
                       lanes: list[str] | None = None, **consumer: Any) -> ConsumerGroup:
        """Start ``members`` group members (each a process; ``consumer`` fields go to every ConsumerSpec)."""
        if self.run is not None:
            raise UsageError("consumer_group() was already called in this test: one group per test")
        lane_names = lanes or [f"lane{i % self.cluster.spec.lanes}" for i in range(members)]
        specs = tuple(ConsumerSpec(lane=lane_names[i], **consumer) for i in range(members))
        spec = WorkloadSpec(partitions=self.partitions, consumers=specs, producers=(),
                            replication=min(3, self.cluster.spec.brokers))
        exp = Experiment(name="pytest", backend=self.cluster.backend_name, cluster=self.cluster.spec, workload=spec,
                         phases=self.phases)
        self.run = Run(self.cluster, exp, self.run_dir, self.seed, handler=handler_ref(handler),
                             source={"name": "pytest", "source": "chaos.harness"},
                             checkers=self.checkers, bounds=self.bounds).start()
        self.run.warm_up()
        self.run.begin_chaos()  # follow the live stream from now on
        return ConsumerGroup(self)

    def producer(self, rate: float = 200.0, count: int | None = None, lane: str = "lane0") -> str:
        if self.workload is None:
            raise UsageError("call consumer_group() before producer(): the producer writes to the group's topic")
        name = f"producer-{len(self.workload.producer_specs)}"
        self.workload.start_producer(name, ProducerSpec(rate=rate, count=count, lane=lane))
        return name

    def finish(self) -> Verdict | None:
        """Heal, quiesce, final read, merge, judge (idempotent). None when no group was started."""
        if self.run is None or self.verdict is not None:
            return self.verdict
        self.verdict = self.run.finish()
        self.history = read_history(self.run_dir / "history.jsonl")
        return self.verdict

    def abort(self) -> None:
        """Stop everything without judging (the test itself failed)."""
        if self.run is not None and self.verdict is None:
            self.run.abort()


def explain(verdict: Verdict, run_dir: Path, history: History | None = None) -> str:
    """The failure text of a failed verdict: first what happened to the run (members that died and why,
    faults that did not act, ... — :mod:`chaos.checkers.incidents`), then what failed and the evidence
    seqs, per checker."""
    from chaos.checkers import incidents

    lines: list[str] = []
    try:
        found = incidents.collect(history or read_history(Path(run_dir) / "history.jsonl"),
                                  incidents.traceback_files(run_dir))
    except (UsageError, OSError):
        found = ()  # no readable history: the verdict's own text below still says what failed
    if found:
        lines.append(f"kafka-chaos: {found[0].description}" + (f" (traceback: {Path(run_dir) / found[0].traceback})"
                                                                if found[0].traceback else ""))
        lines.append(f"what happened to the run ({len(found)} incident(s)), before any invariant:")
        lines.extend(f"    ! {i.line()}" for i in found[:10])
    lines.append(f"kafka-chaos: invariant violated (verdict {verdict.valid.value}); run directory {run_dir}")
    for r in verdict.results:
        if r.valid.value == "true":
            continue
        lines.append(f"[{r.checker.value}] {r.summary}")
        for f in r.violations[:5]:
            lines.append(f"    - {f.description}  (evidence seq {', '.join(map(str, f.evidence[:8]))})")
    lines.append(f"re-judge with: chaos check {run_dir}")
    return "\n".join(lines)


