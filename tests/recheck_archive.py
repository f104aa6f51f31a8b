"""The small archive of the Spark re-check tests (``tests/unit/report/test_recheck_more.py``).

Each invariant the report re-checks gets hand-made histories: one both sides find bad (agree), one near miss
both pass, and a copy of the bad one whose ``checks.json`` was edited so the checker no longer says so (or
says something else). Every history is judged by the real checkers. :func:`build` writes them all; the
session builds the report over it once (``tests/conftest.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chaos.checkers.judge import judge_run
from chaos.history import HISTORY_FILE

GROUP = "g"


class _History:
    """A hand-made history: a classic eager group ``g``, two members, topic ``t`` with partitions 0 and 1."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.lines: list[dict[str, Any]] = [{
            "header": True, "schema_version": 1, "run_id": f"recheck-{name}", "seed": 0,
            "experiment": {"fixture": name}, "versions": {"kafka": "3.9.1", "confluent-kafka": "2.11.0"},
            "configs": {"consumer": {"session.timeout.ms": 10000, "max.poll.interval.ms": 30000}}}]
        self.ns = 1_000_000_000
        self.add("runner", "phase", name="setup")
        for m in (0, 1):
            self.add(f"consumer-{m}", "member_start", group=GROUP, client="confluent-kafka", client_version="2.11.0",
                     instance_id=None, assignor="roundrobin", protocol="eager", commit_mode="sync",
                     session_timeout_ms=10000, max_poll_interval_ms=30000, auto_commit_interval_ms=None,
                     wrong_mode=None)
        for m in (0, 1):
            self.add(f"consumer-{m}", "assigned", group=GROUP, partitions=[["t", m]], generation=1,
                     member_id=f"m{m}", incremental=False)
        self.add("runner", "phase", name="chaos")

    def add(self, source: str, kind: str, *, step_ms: float = 10, **fields: Any) -> int:
        self.ns += int(step_ms * 1_000_000)
        seq = len(self.lines)
        self.lines.append({"seq": seq, "ts": 1_800_000_000 + self.ns / 1e9, "mono_ns": self.ns, "source": source,
                           "kind": kind, **fields})
        return seq

    def send(self, partition: int, *offsets: int) -> None:
        for o in offsets:
            self.add("producer-0", "send_ok", topic="t", partition=partition, offset=o, key=None,
                     value=f"fx:p{partition}:{o}")

    def consume(self, member: int, partition: int, *offsets: int) -> int:
        return self.add(f"consumer-{member}", "consumed", group=GROUP, topic="t", partition=partition,
                        offsets=list(offsets), generation=1, member_id=f"m{member}")

    def commit(self, member: int, partition: int, offset: int, *, auto: bool = False, step_ms: float = 10,
               answered_after_ms: float | None = None, generation: int = 1) -> int:
        fields: dict[str, Any] = {}
        if answered_after_ms is not None:
            fields["answered_ns"] = self.ns + int((step_ms + answered_after_ms) * 1_000_000)
        return self.add(f"consumer-{member}", "commit", step_ms=step_ms, group=GROUP, offsets=[["t", partition, offset]],
                        generation=generation, member_id=f"m{member}", outcome="ok", error_code=None, error_name=None,
                        auto=auto, **fields)

    def sample(self, broker: int, offsets: dict[int, int], *, step_ms: float = 10) -> int:
        return self.add("observer", "committed_offsets", step_ms=step_ms, group=GROUP, coordinator=broker,
                        offsets=[["t", p, o] for p, o in sorted(offsets.items())])

    def loading(self, broker: int, *, step_ms: float = 10) -> int:
        return self.add("observer", "broker_log", step_ms=step_ms, broker=broker, group=GROUP, event="loading",
                        generation=None, member_id=None,
                        line=f"Loading group metadata for {GROUP} with generation 1 (broker {broker})")

    def coordinator_line(self, event: str, generation: int, *, step_ms: float = 10) -> int:
        """A GroupCoordinator line: ``stabilized`` N, ``preparing_rebalance`` (old generation N), ..."""
        return self.add("observer", "broker_log", step_ms=step_ms, broker=1, group=GROUP, event=event,
                        generation=generation, member_id=None, line=f"{event} {GROUP} generation {generation}")

    def finish(self, *final: tuple[int, int]) -> None:
        self.add("runner", "phase", name="final_read")
        self.add("runner", "final_read", group=GROUP, topic="t", records=[list(r) for r in final])
        self.add("runner", "phase", name="teardown")

    def write(self, results: Path) -> Path:
        run_dir = results / "2026-11-23" / "recheck" / f"run-{self.name}"
        run_dir.mkdir(parents=True)
        (run_dir / HISTORY_FILE).write_text("".join(json.dumps(line) + "\n" for line in self.lines))
        judge_run(run_dir)
        return run_dir


# --------------------------------------------------------------------------- delivery: commits ahead

def _commit_ahead() -> _History:
    """consumer-0 commits t-0 at 4 (manual) having processed 0..1 only; 2..3 are processed afterwards."""
    h = _History("commit-ahead")
    h.send(0, 0, 1, 2, 3)
    h.send(1, 0)
    h.consume(0, 0, 0, 1)
    h.consume(1, 1, 0)
    h.commit(1, 1, 1)
    h.commit(0, 0, 4)  # ahead: offsets 2 and 3 acknowledged, not processed
    h.consume(0, 0, 2, 3)
    h.finish()
    return h


def _commit_near_miss(name: str = "commit-near-miss", *, next_batch: bool = True) -> _History:
    """Legal: a manual commit at exactly what was processed (4 is acknowledged but above it), and an auto
    commit covering the batch its member processes next (``next_batch=False``: never processed, a violation)."""
    h = _History(name)
    h.send(0, 0, 1, 2, 3, 4)
    h.send(1, 0, 1)
    h.consume(0, 0, 0, 1, 2, 3)
    h.commit(0, 0, 4)                  # 0..3 processed; 4 is not covered
    h.consume(1, 1, 0)
    h.commit(1, 1, 2, auto=True)       # covers 1, in flight: the member's next batch processes it
    if next_batch:
        h.consume(1, 1, 1)
    h.consume(0, 0, 4)
    h.commit(0, 0, 5)
    h.finish(*([] if next_batch else [(1, 1)]))  # read at the end: not lost, only committed unprocessed
    return h


# --------------------------------------------------------------------------- delivery: lost

def _lost() -> _History:
    """t-0@2 acknowledged, never consumed, and not read at the end: lost."""
    h = _History("lost-record")
    h.send(0, 0, 1, 2)
    h.consume(0, 0, 0, 1)
    h.commit(0, 0, 2)
    h.finish()
    return h


# --------------------------------------------------------------------------- committed offsets

def _offsets_back() -> _History:
    """An accepted commit of t-0 at 4, then samples (well after it) read 2: a rollback."""
    h = _History("offsets-back")
    h.send(0, 0, 1, 2, 3)
    h.consume(0, 0, 0, 1, 2, 3)
    h.commit(0, 0, 2)
    h.commit(0, 0, 4, answered_after_ms=5)
    h.sample(1, {0: 4})
    h.sample(1, {0: 2}, step_ms=2000)  # the store went back
    h.sample(1, {0: 2}, step_ms=1000)
    h.finish()
    return h


def _offsets_near_miss(name: str = "offsets-near-miss", *, load: bool = True, reset: bool = True) -> _History:
    """Legal: a sample answered before a commit it races (within slack of the commit's answer), a deposed
    coordinator's stale read (another broker loaded the group), and a lower commit after an offset reset.
    Without the loading line or the reset, the same history is a violation."""
    h = _History(name)
    h.send(0, 0, 1, 2, 3, 4, 5)
    h.send(1, 0, 1)
    h.consume(0, 0, 0, 1, 2, 3)
    h.consume(1, 1, 0, 1)
    h.commit(0, 0, 4, answered_after_ms=300)
    h.sample(1, {0: 2, 1: 0}, step_ms=100)  # answered before the commit was applied: within its answer + slack
    h.commit(1, 1, 2)
    h.sample(1, {0: 4, 1: 2}, step_ms=600)
    if load:
        h.loading(2, step_ms=200)           # broker 2 becomes the coordinator
    h.sample(1, {0: 2, 1: 2}, step_ms=1000)  # broker 1, deposed, answers from its cache: set aside
    h.sample(2, {0: 4, 1: 2}, step_ms=100)
    if reset:
        # a fault that rewinds the committed offsets on purpose, as its recorded trait says (no kind of this
        # version has it; a reset_peer, which resets TCP connections, does not restart the comparison)
        h.add("nemesis", "fault_start", fault_id="f1", fault_type="offset_rewind", target_role="member",
              node="consumer-1", params={}, trigger="time", traits=["rewinds_committed_offsets"])
    h.commit(1, 1, 1, step_ms=100)           # after a reset the comparison restarts
    h.sample(2, {0: 4, 1: 1}, step_ms=1000)
    h.consume(0, 0, 4, 5)
    h.commit(0, 0, 6)
    h.sample(2, {0: 6, 1: 1}, step_ms=1000)
    h.finish()
    return h


# --------------------------------------------------------------------------- fencing

def _fencing(name: str, *, in_flight: bool, kip848_line: bool = False) -> _History:
    """Generation 1 is Stable, a rebalance bumps it to 2, and consumer-0 commits with generation 1: sent 200 ms
    after the coordinator logged generation 2 (a violation), or ``in_flight``, sent before the bump and
    answered after it (legal), next to a commit during PreparingRebalance (legal: 1 is still current)."""
    h = _History(name)
    h.coordinator_line("stabilized", 1)
    if kip848_line:
        h.coordinator_line("epoch_bumped", 1)
    h.send(0, 0, 1, 2, 3)
    h.consume(0, 0, 0, 1)
    h.coordinator_line("preparing_rebalance", 1, step_ms=100)
    h.commit(0, 0, 2, answered_after_ms=5)  # during PreparingRebalance: legal
    h.consume(0, 0, 2, 3)
    if in_flight:
        h.commit(0, 0, 4, step_ms=100, answered_after_ms=30)  # answered 20 ms after the bump
        h.coordinator_line("stabilized", 2, step_ms=10)
    else:
        h.coordinator_line("stabilized", 2, step_ms=100)
        h.commit(0, 0, 4, step_ms=200, answered_after_ms=5)
    h.add("consumer-0", "assigned", group=GROUP, partitions=[["t", 0]], generation=2, member_id="m0",
          incremental=False)
    h.finish()
    return h


# --------------------------------------------------------------------------- generations: an app member's late consumed

def _consumed_late(name: str, *, app: bool) -> _History:
    """consumer-0 is revoked in generation 1 and assigned again in 2, then records a ``consumed`` tagged with
    generation 1. From chaos.instrument's app member (``app=True``) that is the generation the record was handed
    over in, recorded when the application was done with it: not a generation it went back to, and neither side
    may find it (both did not agree once: an explored run of the python-service example). From a member of the
    reference workload it is a generation going back: both must find it."""
    h = _History(name)
    if app:
        h.lines[0]["experiment"] = {"fixture": name, "workload": {"consumers": [{"app": "shop.orders:main"}, {}]}}
    h.send(0, 0, 1, 2)
    h.consume(0, 0, 0)
    h.add("consumer-0", "revoked", group=GROUP, partitions=[["t", 0]], generation=1, member_id="m0",
          incremental=False)
    h.add("consumer-0", "assigned", group=GROUP, partitions=[["t", 0]], generation=2, member_id="m0",
          incremental=False)
    h.consume(0, 0, 1)  # generation 1, after the assignment of generation 2
    h.add("consumer-0", "consumed", group=GROUP, topic="t", partition=0, offsets=[2], generation=2, member_id="m0")
    h.commit(0, 0, 3, generation=2)
    h.finish()
    return h


def _edit_result(run_dir: Path, checker: str, edit) -> None:
    """Rewrite one checker's result in checks.json in place (a stale or wrong checks.json)."""
    path = run_dir / "checks.json"
    checks = json.loads(path.read_text())
    for r in checks["results"]:
        if r["checker"] == checker:
            edit(r)
    path.write_text(json.dumps(checks))


def _edit_checks(run_dir: Path, checker: str, edit) -> None:
    """Rewrite one checker's findings (and its verdict with them)."""
    def findings(r: dict[str, Any]) -> None:
        r["findings"] = edit(r["findings"])
        r["valid"] = "false" if any(f.get("violation", True) for f in r["findings"]) else "true"
    _edit_result(run_dir, checker, findings)


def _edit_metric(run_dir: Path, checker: str, metric: str, value: float) -> None:
    """Rewrite one checker's metric (the delivery half reads ``lost`` from there)."""
    _edit_result(run_dir, checker, lambda r: r["metrics"].__setitem__(metric, value))


def _copy(h: _History, name: str) -> _History:
    c = _History(name)
    c.lines = [dict(h.lines[0], run_id=f"recheck-{name}"), *h.lines[1:]]
    return c


def build(results: Path) -> Path:
    """Write every history of the archive under ``results`` (judged, with their edited copies); returns it."""
    for h in (_lost(), _commit_ahead(), _commit_near_miss(), _offsets_back(), _offsets_near_miss(),
              # the near misses without what makes them legal: both sides must find them
              _commit_near_miss("auto-commit-never-processed", next_batch=False),
              _offsets_near_miss("offsets-deposed-not-loaded", load=False),
              _offsets_near_miss("offsets-lower-without-reset", reset=False),
              _fencing("fencing-stale", in_flight=False), _fencing("fencing-in-flight", in_flight=True),
              _fencing("fencing-kip848-line", in_flight=False, kip848_line=True),
              _consumed_late("app-consumed-late", app=True), _consumed_late("member-consumed-back", app=False)):
        h.write(results)
    # the same bad histories, with a checks.json that no longer (or wrongly) reports them
    d = _copy(_lost(), "lost-record-unreported").write(results)
    _edit_metric(d, "delivery", "lost", 0)
    d = _copy(_commit_ahead(), "commit-ahead-unreported").write(results)
    _edit_checks(d, "delivery", lambda fs: [f for f in fs if "had not been processed" not in f["description"]])
    d = _copy(_offsets_back(), "offsets-back-unreported").write(results)
    _edit_checks(d, "committed-offsets", lambda fs: [])
    d = _copy(_offsets_back(), "offsets-back-other-partition").write(results)
    _edit_checks(d, "committed-offsets", lambda fs: [
        {**f, "description": f["description"].replace(" t-0:", " t-1:")} for f in fs])
    d = _copy(_fencing("fencing-stale", in_flight=False), "fencing-stale-unreported").write(results)
    _edit_checks(d, "fencing", lambda fs: [])
    d = _copy(_fencing("fencing-in-flight", in_flight=True), "fencing-in-flight-reported").write(results)
    _edit_checks(d, "fencing", lambda fs: [{"description": "group g: consumer-0 (member m0) had a commit of "
                                            "t-0@4 accepted with generation 1 (edited)", "evidence": [1]}])

    return results
