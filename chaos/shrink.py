"""From a red run to the smallest experiment that still fails: ``chaos shrink RUN_DIR``.

Jepsen and Hypothesis shrink generated *data*; here the thing to shrink is a
fault schedule, and every candidate is tried on a real cluster, so the search
is small and ordered by what saves the most:

1. **the replay** (:func:`chaos.replay.as_fired`: the faults at the times they
   fired, random targets pinned) must fail first — a failure the replay does not
   reproduce in ``tries`` runs cannot be shrunk, and says so;
2. **fewer faults** — no fault at all first (a consumer that breaks without any
   fault is the strongest finding), then delta debugging over the fault list
   (Zeller and Hildebrandt, "Simplifying and Isolating Failure-Inducing Input",
   TSE 2002: ``ddmin``, halves, then complements, then finer, down to a list
   from which no single fault can be removed);
3. **a shorter chaos phase** — ending two seconds after the last fault heals;
4. **shorter faults** — each fault's ``duration_s`` halved while it still fails
   (down to :data:`MIN_DURATION_S`);
5. **fewer members** — each member removed in turn (faults aimed at a later
   member are renumbered; one aimed at the removed member keeps it);
6. **fewer partitions** — halved while it still fails; then the chaos phase again;
7. **a minimal experiment that fails reliably** — the smallest one is run
   ``confirm`` more times; when it fails in fewer than :data:`RELIABLE` of its
   runs (its one failure during the search was chance: a wrong consumer that
   only sometimes meets a rebalance without faults), the smallest that does is
   found by bisection over the candidates kept before it, back to the replay,
   so the experiment handed on fails in most runs rather than once (the replay
   is kept, with its rate, when none does).

A candidate *fails* when one of the target checkers answers false: those named with
``--checker``, else the experiment's ``expect_violation`` (the failure it exists to
show), else every checker that failed in the recorded run. "One of", not "all":
the checkers a failure trips vary from run to run (a replay of a red
``nightly-mixed-broken`` run failed committed-offsets and generations where the
recording had failed ownership-time and committed-offsets); name one checker to
hold the search to it. A failure that is not deterministic is
handled by running a candidate up to ``tries`` times (accepted at its first
failure; every verdict is logged), and the minimal experiment is run ``confirm``
more times at the end, so its failure rate is stated, not assumed. Candidates
reuse one cluster (:class:`chaos.runner.ClusterPool`: the same shape, healed in
between), each run in its own directory under ``OUT/runs``.

What is written, as it goes, so that the budget running out or Ctrl-C keeps the
best so far: ``OUT/minimal.yaml`` (the smallest failing experiment, rewritten at
each step that shrank it; loadable by ``chaos run``), ``OUT/shrink-log.jsonl``
(one line per candidate: what changed, each run's verdict, kept or not) and, at
the end, ``OUT/shrink.json`` (the summary). Nothing is written before the first
run is recorded: a shrink that ran nothing (its first run found no cluster)
leaves no files. What cannot be shrunk — a run that is not red, a budget shorter
than one run — is refused before anything starts (:func:`shrink_target`).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from chaos.errors import InfrastructureError, UsageError
from chaos.model.experiment import Experiment
from chaos.model.faults import FaultSpec
from chaos.replay import LIVE_LEAD_S, RecordedRun, as_fired, experiment_yaml
from chaos.runner import ClusterPool, RunOutcome, estimate_s, pooled_run

#: a fault is not shortened below this (a kill shorter than half a second is a restart, not an outage)
MIN_DURATION_S = 0.5
#: the chaos phase ends this long after the last fault's planned heal
CHAOS_TAIL_S = 2.0
#: halvings tried per fault duration (8 s → 0.5 s)
MAX_HALVINGS = 4
#: the least share of its runs the minimal experiment must fail in (step 7 of the module docstring)
RELIABLE = 2 / 3

T = TypeVar("T")


def ddmin(items: Sequence[T], fails: Callable[[list[T]], bool]) -> list[T]:
    """Zeller's ``ddmin``: a 1-minimal sublist of ``items`` on which ``fails`` holds (``fails(items)`` is assumed).

    Tests each of ``n`` chunks, then each complement; a failing one becomes the input (granularity back to
    2, or ``n - 1`` after a complement); when neither fails the chunks are split finer, until single items.
    ``fails`` is called with sublists in the original order; callers cache (a chunk and a complement can
    be the same list when ``n`` is 2).
    """
    current, n = list(items), 2
    while len(current) >= 2:
        size = math.ceil(len(current) / n)
        chunks = [current[i:i + size] for i in range(0, len(current), size)]
        reduced = next((c for c in chunks if fails(c)), None)
        if reduced is not None:
            current, n = reduced, 2
            continue
        if len(chunks) > 2:
            complement = next((c for i in range(len(chunks))
                               if fails(c := [x for j, ch in enumerate(chunks) if j != i for x in ch])), None)
            if complement is not None:
                current, n = complement, max(n - 1, 2)
                continue
        if n >= len(current):
            break
        n = min(len(current), 2 * n)
    return current


@dataclass
class Attempt:
    """One candidate and what its runs answered (a line of ``shrink-log.jsonl``)."""

    number: int
    step: str
    change: str
    faults: int
    runs: list[dict[str, Any]] = field(default_factory=list)
    failing: bool = False
    kept: bool = False


class BudgetSpent(Exception):
    """The next run would not fit in what is left of the budget."""


def shrink_target(recorded: RecordedRun, checkers: frozenset[str] | None, budget_s: float) -> frozenset[str]:
    """The checkers whose failure counts (module docstring); a one-line UsageError, before anything runs, when
    ``recorded`` cannot be shrunk: it is not red (or not red in those checkers), or ``budget_s`` cannot hold
    one run of it (:func:`chaos.runner.estimate_s` of its phases, the estimate the search stops by)."""
    verdict = recorded.verdict
    if verdict.valid != "false":
        raise UsageError(f"{recorded.run_dir}: the run's verdict was {verdict.describe()}; shrink needs a red run (a "
                         f"checker that answered false) — `chaos replay` reruns any run")
    target = checkers or frozenset(c.value for c in recorded.experiment.expect_violation) or verdict.failed
    if not target & verdict.failed:
        how = "--checker" if checkers else "the experiment's expect_violation"
        raise UsageError(f"{recorded.run_dir}: the run's verdict was {verdict.describe()}, and none of "
                         f"{', '.join(sorted(target))} ({how}) answered false; name one that did with --checker")
    need = estimate_s(recorded.experiment)
    if budget_s < need:
        phases = recorded.experiment.phases
        raise UsageError(f"--budget {budget_s:g}s cannot hold one run of {recorded.experiment.name} (about "
                         f"{need:.0f} s: warmup {phases.warmup_s:g} s, chaos {phases.chaos_s:g} s and heal "
                         f"{phases.heal_s:g} s, plus starting and judging): give at least {math.ceil(need)}s")
    return target


class Shrinker:
    """The search of the module docstring over ``recorded``, writing into ``out``."""

    def __init__(self, recorded: RecordedRun, out: Path, *, budget_s: float, tries: int = 1, confirm: int = 3,
                 checkers: frozenset[str] | None = None, pool: ClusterPool | None = None,
                 run: Callable[[Experiment, int, Path], RunOutcome] | None = None,
                 say: Callable[[str], None] = lambda line: None) -> None:
        self.recorded = recorded
        self.target = shrink_target(recorded, checkers, budget_s)
        if (pool is None) == (run is None):
            raise TypeError("give a cluster pool (real runs) or a run function, not both")
        self.out, self.tries, self.confirm, self.say = Path(out), tries, confirm, say
        if run is None and pool is not None:
            cluster_pool = pool

            def run(exp: Experiment, seed: int, run_dir: Path) -> RunOutcome:
                return pooled_run(cluster_pool, exp, seed, run_dir, 0)
        assert run is not None
        #: one judged run of a candidate: on a cluster of the pool (``chaos shrink``), or the caller's
        self.run_one = run
        self.deadline = time.monotonic() + budget_s
        self.started = time.monotonic()
        self.attempts: list[Attempt] = []
        self._cache: dict[str, bool] = {}
        self._runs: dict[str, list[dict[str, Any]]] = {}  # every run of a candidate, by candidate
        self.best: Experiment | None = None
        #: every failing candidate kept, in the order the search kept them (the last is :attr:`best`)
        self.kept: list[Experiment] = []
        self.stopped_by = "done"
        #: a run was recorded: until then nothing is written (a shrink that ran nothing leaves no files)
        self.ran = False
        self._log_opened = False

    # ------------------------------------------------------------ trying a candidate
    def _fails(self, exp: Experiment, step: str, change: str) -> bool:
        """Run ``exp`` up to ``tries`` times; true at its first failure of a target checker."""
        key = _key(exp)
        if key in self._cache:
            return self._cache[key]
        attempt = Attempt(len(self.attempts) + 1, step, change, len(exp.faults))
        self.attempts.append(attempt)
        try:
            for t in range(self.tries):
                oc = self._run(exp, f"{attempt.number:03d}-{step.replace(' ', '-')}-try{t}", self.recorded.seed + t)
                attempt.runs.append(self._run_record(oc))
                if self.target & set(oc.failed_checkers):
                    attempt.failing = True
                    break
            attempt.kept = attempt.failing  # the search keeps every failing candidate it tries (module docstring)
        finally:
            self._log(attempt)
        self._cache[key] = attempt.failing
        self._runs.setdefault(key, []).extend(attempt.runs)
        return attempt.failing

    def _run(self, exp: Experiment, name: str, seed: int) -> RunOutcome:
        left = self.deadline - time.monotonic()
        if estimate_s(exp) > left:
            raise BudgetSpent(f"{left / 60:.1f} min of budget left, a run takes about {estimate_s(exp) / 60:.1f}")
        oc = self.run_one(exp, seed, self.out / "runs" / name)
        # a run that could not start (no cluster) recorded nothing: no run directory, nothing to log yet
        self.ran = self.ran or oc.valid != "error" or Path(oc.run_dir).is_dir()
        if oc.valid == "error":
            best = self.out / "minimal.yaml"
            so_far = f"; the smallest failing experiment so far is in {best}" if best.is_file() else ""
            raise InfrastructureError(f"a shrink run could not run: {oc.error}{oc.details}{so_far}")
        return oc

    @staticmethod
    def _run_record(oc: RunOutcome) -> dict[str, Any]:
        return {"run_dir": oc.run_dir, "seed": oc.seed, "valid": oc.valid, "failed": oc.failed_checkers,
                "wall_s": oc.wall_s}

    def _writable_out(self) -> Path:
        self.out.mkdir(parents=True, exist_ok=True)
        return self.out

    def _log(self, a: Attempt) -> None:
        if self.ran:
            # the log starts with the shrink's first recorded run (an earlier shrink's log in OUT is replaced)
            with (self._writable_out() / "shrink-log.jsonl").open("a" if self._log_opened else "w") as f:
                f.write(json.dumps(asdict(a)) + "\n")
            self._log_opened = True
        verdicts = ", ".join(r["valid"] + (f" ({', '.join(r['failed'])})" if r["failed"] else "") for r in a.runs)
        left = max(0.0, self.deadline - time.monotonic()) / 60
        outcome = f"{verdicts}: {'still fails' if a.failing else 'passes'}" if a.runs else "not run"
        self.say(f"[{a.number}] {a.step}: {a.change} -> {outcome} ({left:.0f} min of budget left)")

    def _accept(self, exp: Experiment) -> None:
        self.best = exp
        self.kept.append(exp)
        self._write_minimal(exp, None)

    # ------------------------------------------------------------ candidates

    def _step_faults(self, exp: Experiment) -> Experiment:
        if not exp.faults:
            return exp
        none = changed(exp, faults=[])
        if none is not None and self._fails(none, "faults", f"no fault at all (of {len(exp.faults)})"):
            self._accept(none)
            return none
        if len(exp.faults) == 1:
            return exp
        names = {i: _fault_name(f) for i, f in enumerate(exp.faults)}
        found: dict[tuple[int, ...], Experiment] = {}

        def fails(keep: list[int]) -> bool:
            cand = changed(exp, faults=_dumped([exp.faults[i] for i in keep]))
            if cand is None:
                return False
            dropped = [names[i] for i in names if i not in keep]
            if self._fails(cand, "faults", f"{len(keep)} of {len(exp.faults)} faults, without {'; '.join(dropped)}"):
                found[tuple(keep)] = cand
                self._accept(cand)
                return True
            return False

        keep = ddmin(list(range(len(exp.faults))), fails)
        return found.get(tuple(keep), exp)

    def _step_chaos_phase(self, exp: Experiment) -> Experiment:
        ends = [(f.trigger.at_s if f.trigger.at_s is not None else f.trigger.not_before_s + 2 * LIVE_LEAD_S)
                + f.duration_s for f in exp.faults]
        chaos_s = round(max(ends, default=0.0) + CHAOS_TAIL_S, 1)
        if chaos_s >= exp.phases.chaos_s:
            return exp
        cand = changed(exp, **{"phases.chaos_s": chaos_s})
        if cand is not None and self._fails(cand, "chaos phase", f"chaos phase {exp.phases.chaos_s:g} s -> {chaos_s:g} s"):
            self._accept(cand)
            return cand
        return exp

    def _step_durations(self, exp: Experiment) -> Experiment:
        for i in range(len(exp.faults)):
            for _ in range(MAX_HALVINGS):
                d = exp.faults[i].duration_s
                shorter = max(MIN_DURATION_S, round(d / 2, 1))
                if shorter >= d:
                    break
                faults = _dumped(exp.faults)
                faults[i]["duration_s"] = shorter
                cand = changed(exp, faults=faults)
                if cand is None or not self._fails(cand, "duration",
                                                   f"{_fault_name(exp.faults[i])}: {d:g} s -> {shorter:g} s"):
                    break
                self._accept(cand)
                exp = cand
        return exp

    def _step_members(self, exp: Experiment) -> Experiment:
        j = len(exp.workload.consumers) - 1
        while j >= 0 and len(exp.workload.consumers) > 1:
            cand = without_member(exp, j)
            if cand is not None and self._fails(cand, "members", f"without consumer-{j} "
                                                f"({len(exp.workload.consumers) - 1} members)"):
                self._accept(cand)
                exp = cand
            j -= 1
        return exp

    def _step_partitions(self, exp: Experiment) -> Experiment:
        while exp.workload.partitions > 1:
            fewer = exp.workload.partitions // 2
            if any(f.partition >= fewer for f in exp.faults):
                break  # a fault aimed at a partition's leader needs that partition
            cand = changed(exp, **{"workload.partitions": fewer})
            if cand is None or not self._fails(cand, "partitions", f"{exp.workload.partitions} -> {fewer} partitions"):
                break
            self._accept(cand)
            exp = cand
        return exp

    # ------------------------------------------------------------ the search
    def shrink(self) -> Experiment | None:
        """Run the search; the smallest failing experiment (None when the replay never failed). Nothing is written
        into ``out`` before a run was recorded."""
        replay, notes = as_fired(self.recorded)
        for note in notes:
            self.say(f"replay: {note}")
        try:
            if not self._fails(replay, "replay", f"the recorded run's {len(replay.faults)} faults as they fired"):
                self.stopped_by = "not reproduced"
                return None
            self._accept(replay)
            exp = replay
            for step in (self._step_faults, self._step_chaos_phase, self._step_durations, self._step_members,
                         self._step_partitions, self._step_chaos_phase):
                exp = step(exp)
            self._settle()
        except BudgetSpent as exc:
            self.stopped_by = "budget"
            self.say(f"budget spent ({exc}): keeping the smallest failing experiment so far")
        except (KeyboardInterrupt, SystemExit):  # Ctrl-C, or SIGTERM (chaos.process.terminate_on_sigterm)
            self.stopped_by = "interrupted"
            raise
        finally:
            self._finish()
        return self.best

    def _settle(self) -> None:
        """Step 7 of the module docstring. The smallest kept candidate is confirmed; when it is not reliable, a
        bisection over the kept candidates (each derived from the one before, so the larger, the likelier to
        fail) finds the smallest that is, confirming one candidate per step; it becomes :attr:`best`. The
        first kept (the replay) is kept, with its rate, when none is reliable."""
        confirmed: set[int] = set()

        def reliable(i: int) -> bool:
            self.best = self.kept[i]
            if i not in confirmed:
                confirmed.add(i)
                self._confirm(self.best)
            failing, runs = self.rate()
            return failing >= RELIABLE * runs

        lo, hi = 0, len(self.kept) - 1
        if reliable(hi) or hi == 0:
            return
        failing, runs = self.rate()
        self.say(f"the minimal experiment failed in only {failing} of {runs} runs: looking among the "
                 f"{hi} larger ones kept before it for the smallest that fails reliably")
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if reliable(mid):
                lo = mid
            else:
                hi = mid
        reliable(lo)  # best: the largest reliable one found, or the replay (confirmed here if not yet)

    def _confirm(self, exp: Experiment) -> None:
        """Run the minimal experiment ``confirm`` more times (fresh seeds): its failure rate, measured."""
        for t in range(self.confirm):
            a = Attempt(len(self.attempts) + 1, "confirm", f"the minimal experiment again ({t + 1}/{self.confirm})",
                        len(exp.faults))
            self.attempts.append(a)
            try:
                oc = self._run(exp, f"{a.number:03d}-confirm", self.recorded.seed + self.tries + t)
                a.runs.append(self._run_record(oc))
                a.failing = bool(self.target & set(oc.failed_checkers))
                self._runs.setdefault(_key(exp), []).append(a.runs[-1])
            finally:
                self._log(a)

    def rate(self) -> tuple[int, int]:
        """How often the minimal experiment failed: (failing runs, runs) over every run of it."""
        runs = self._runs.get(_key(self.best), []) if self.best is not None else []
        return sum(bool(self.target & set(r["failed"])) for r in runs), len(runs)

    def _write_minimal(self, exp: Experiment, rate: tuple[int, int] | None) -> None:
        rec = self.recorded
        named = exp.model_copy(update={"name": f"{rec.experiment.name}-minimal" if not
                                       rec.experiment.name.endswith("-minimal") else rec.experiment.name,
                                       "description": (f"Smallest failing schedule found by `chaos shrink` from "
                                                       f"{rec.run_dir} (seed {rec.seed}).\n"
                                                       + (rec.experiment.description or ""))})
        how_often = (f"it failed {', '.join(sorted(self.target))} in {rate[0]} of {rate[1]} runs"
                     if rate else "shrinking still in progress or stopped early (shrink-log.jsonl)")
        use = ("It keeps the recorded experiment's expect_violation: a sensitivity check, `chaos run` passes\n"
               "while those checkers fail." if exp.expect_violation else
               "It runs red while the failure is there: commit it as a regression test\n"
               "(`chaos run minimal.yaml`, or the pytest plugin's run_experiment).")
        comment = (f"Found by `chaos shrink {rec.run_dir}`: {len(exp.faults)} of the recorded run's "
                   f"{len(rec.faults)} faults;\n{how_often}.\n{use}")
        (self._writable_out() / "minimal.yaml").write_text(experiment_yaml(named, comment))

    def _finish(self) -> None:
        if not self.ran:
            return  # nothing ran: nothing to summarise, and no directory left behind
        if self.best is not None:
            self._write_minimal(self.best, self.rate())
        failing, runs = self.rate()
        summary = {
            "recorded_run": str(self.recorded.run_dir), "seed": self.recorded.seed,
            "recorded_verdict": self.recorded.verdict.describe(), "target_checkers": sorted(self.target),
            "recorded_faults": len(self.recorded.faults),
            "minimal_faults": None if self.best is None else len(self.best.faults),
            "minimal": None if self.best is None else str(self.out / "minimal.yaml"),
            "minimal_failed_runs": failing, "minimal_runs": runs,
            "candidates": len(self.attempts), "runs": sum(len(a.runs) for a in self.attempts),
            "elapsed_s": round(time.monotonic() - self.started, 1), "stopped_by": self.stopped_by,
        }
        (self._writable_out() / "shrink.json").write_text(json.dumps(summary, indent=1))


def changed(exp: Experiment, **changes: Any) -> Experiment | None:
    """``exp`` with changes at dotted paths (:meth:`Experiment.with_overrides`), or None when the model refuses
    the result (a candidate that cannot exist is skipped, not run)."""
    try:
        return exp.with_overrides(**changes)
    except (ValidationError, UsageError):
        return None


def _dumped(faults: Sequence[FaultSpec]) -> list[dict[str, Any]]:
    return [f.model_dump(mode="json") for f in faults]


def without_member(exp: Experiment, j: int) -> Experiment | None:
    """``exp`` without member ``consumer-j``: later members renamed one down in the faults; None when a
    fault is aimed at ``consumer-j`` itself."""
    gone = f"consumer-{j}"

    def renamed(name: str | None) -> str | None:
        if name and name.startswith("consumer-") and name[9:].isdigit() and int(name[9:]) > j:
            return f"consumer-{int(name[9:]) - 1}"
        return name

    faults = [f.model_dump(mode="json") for f in exp.faults]
    for f in faults:
        if gone in (f.get("node"), f["trigger"].get("on_revoked")):
            return None
        if f["target"] == "member":
            f["node"] = renamed(f["node"])
        if f["trigger"].get("on_revoked"):
            f["trigger"]["on_revoked"] = renamed(f["trigger"]["on_revoked"])
    consumers = [c.model_dump(mode="json") for k, c in enumerate(exp.workload.consumers) if k != j]
    return changed(exp, faults=faults, **{"workload.consumers": consumers})


def _key(exp: Experiment) -> str:
    """A candidate's identity: the experiment without its description (which names where it came from)."""
    return exp.model_dump_json(exclude={"description"})


def _fault_name(f: FaultSpec) -> str:
    """``kill consumer-1 at 3 s`` — how a fault is named in the log."""
    who = f.node or f.target.value
    when = (f"at {f.trigger.at_s:g} s" if f.trigger.at_s is not None else f.trigger.describe())
    return f"{f.type} {who} {when}"
