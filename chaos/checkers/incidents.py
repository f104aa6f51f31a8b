"""What happened to the run: the incidents every explanation starts with, before any invariant.

An invariant violation is often a *consequence*: a group whose members all
died "did not converge". The root cause is in the history as well, and this
module lists it, in time order, as a pure function of the history:

- a member that **died**: ``member_stop`` with ``clean`` false that no fault
  on that member explains (a ``kill`` fault's SIGKILL is the plan, not an
  incident), with why: the fatal ``error`` event the worker wrote before it
  stopped (the exception text; the worker writes the traceback to
  ``workers/<member>.traceback.txt``, see :func:`traceback_files`) or the
  signal that ended it, and the line of the member's client log that tells it
  (the error's ``log_ref``, ``workers/<member>.client.log:<line>``);
- a **fatal client error** (``error`` with ``fatal`` true) not followed by
  that member's stop;
- a **fault** that did not fire (``fault_verified`` stage ``fired``, ``ok``
  false), did not take effect or has no evidence it did, was never healed
  (no ``fault_end`` before ``teardown``), or whose heal was not confirmed —
  the same evidence :mod:`chaos.checkers.faults` judges;
- a member that **never joined**: started, never ``assigned`` (not even an
  empty assignment), and either stopped uncleanly or ran longer than its
  session timeout plus its rebalance timeout (``max.poll.interval.ms``,
  KIP-62) before its stop or the teardown;
- a producer that **could not produce**: ``send_fail`` / ``send_unknown``
  events (counted, the first error named), and a producer source with no
  ``send_ok`` at all, or a workload with producers and no send event at all.

Incidents are facts, not verdicts: they never change a checker's answer.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol, TypeVar

from chaos.checkers.evidence import declared
from chaos.history import (
    Assigned,
    ErrorEvent,
    Event,
    FaultEnd,
    FaultStart,
    FaultVerified,
    History,
    MemberStart,
    MemberStop,
    PhaseEvent,
    RunPhase,
    SendFail,
    SendOk,
    SendUnknown,
    VerificationStage,
)

#: where a worker writes the traceback of the exception that ended it (relative to the run directory)
TRACEBACK_GLOB = "workers/*.traceback.txt"


_E = TypeVar("_E", bound=Event)


class IncidentKind(StrEnum):
    MEMBER_DIED = "member_died"
    FATAL_CLIENT_ERROR = "fatal_client_error"
    FAULT_NOT_FIRED = "fault_not_fired"
    FAULT_NOT_IN_EFFECT = "fault_not_in_effect"
    FAULT_NOT_HEALED = "fault_not_healed"
    NEVER_JOINED = "never_joined"
    PRODUCER_FAILED = "producer_failed"


@dataclass(frozen=True, slots=True)
class Incident:
    """One thing that happened to the run; ``at_s`` is seconds from the first event."""

    kind: IncidentKind
    at_s: float
    source: str
    description: str
    evidence: tuple[int, ...]
    #: the traceback file of the exception, relative to the run directory (None: none recorded)
    traceback: str | None = None

    def line(self) -> str:
        where = f" (traceback: {self.traceback})" if self.traceback else ""
        return f"at {self.at_s:.3f}s: {self.description}{where}"


def traceback_path(run_dir: str | os.PathLike[str], source: str) -> Path:
    """The file a worker writes the traceback of the exception that ended (or troubled) it to."""
    return Path(run_dir) / "workers" / f"{source}.traceback.txt"


def traceback_files(run_dir: str | os.PathLike[str]) -> dict[str, str]:
    """Worker source -> its traceback file (relative to ``run_dir``), for the workers that wrote one."""
    run = Path(run_dir)
    return {p.name.removesuffix(".traceback.txt"): str(p.relative_to(run)) for p in sorted(run.glob(TRACEBACK_GLOB))}


def collect(history: History, tracebacks: Mapping[str, str] | None = None) -> tuple[Incident, ...]:
    """The run's incidents in time order (see the module docstring).

    ``tracebacks`` maps a worker's source to its traceback file (:func:`traceback_files`); without it
    incidents name no file.
    """
    events = history.events
    if not events:
        return ()
    first = events[0].mono_ns
    tb = dict(tracebacks or {})
    cutoff = next((e.mono_ns for e in events if type(e) is PhaseEvent and e.name is RunPhase.TEARDOWN),
                  events[-1].mono_ns + 1)
    out: list[tuple[int, int, Incident]] = []

    def add(kind: IncidentKind, at: Event, source: str, text: str, *evidence: int, traceback: str | None = None) -> None:
        out.append((at.mono_ns, at.seq, Incident(kind, (at.mono_ns - first) / 1e9, source, text,
                                                 tuple(evidence), traceback)))

    by_type: dict[type, list[Any]] = {}
    for e in events:
        by_type.setdefault(type(e), []).append(e)

    def of(cls: type[_E]) -> list[_E]:
        return by_type.get(cls, [])

    _members(history, of, cutoff, tb, add)
    _faults(of, cutoff, add)
    _producers(history, of, add)
    out.sort(key=lambda x: (x[0], x[1]))
    return tuple(i for _, _, i in out)


class _Of(Protocol):
    """The events of one type, in history order."""

    def __call__(self, cls: type[_E]) -> list[_E]: ...


class _Add(Protocol):
    """Record one incident at an event."""

    def __call__(self, kind: IncidentKind, at: Event, source: str, text: str, *evidence: int,
                 traceback: str | None = None) -> None: ...


#: a client error this close before an unexplained stop is taken as what the member said about it
_RECENT_NS = 5_000_000_000


def _log_ref(e: ErrorEvent) -> str:
    """Where the member's own client log tells the error (``workers/<member>.client.log:<line>``)."""
    return f" (client log: {e.log_ref})" if e.log_ref else ""


def _members(history: History, of: _Of, cutoff: int, tb: dict[str, str], add: _Add) -> None:
    fault_windows: dict[str, list[tuple[int, int]]] = {}
    ends = {f.fault_id: f.mono_ns for f in of(FaultEnd)}
    for f in of(FaultStart):
        for node in f.nodes:  # a fault on all_members covers each of them
            fault_windows.setdefault(node, []).append((f.mono_ns, ends.get(f.fault_id, cutoff)))
    errors: dict[str, list[ErrorEvent]] = {}
    any_errors: dict[str, list[ErrorEvent]] = {}
    for e in of(ErrorEvent):
        any_errors.setdefault(e.source, []).append(e)
        if e.fatal:
            errors.setdefault(e.source, []).append(e)
    explained_errors: set[int] = set()
    for stop in of(MemberStop):
        if stop.clean:
            continue
        fatal = [e for e in errors.get(stop.source, ()) if e.mono_ns <= stop.mono_ns and e.seq not in explained_errors]
        # a fault on this member that began before the stop and had not ended before it: the plan
        planned = any(s <= stop.mono_ns <= e for s, e in fault_windows.get(stop.source, ()))
        if planned and not fatal:
            continue
        if stop.mono_ns >= cutoff and not fatal:
            continue  # stopped by the teardown: not an incident of the run
        explained_errors.update(e.seq for e in fatal)
        if fatal:
            last = fatal[-1]
            why = f"{last.message}" + (f" [{last.error_name}]" if last.error_name and last.error_name not in
                                       last.message else "")
            text = f"member {stop.source} died: {why}"
            if len(fatal) > 1:
                text += f" (after {len(fatal) - 1} earlier fatal error(s))"
            text += _log_ref(last)
            add(IncidentKind.MEMBER_DIED, stop, stop.source, text, last.seq, stop.seq,
                traceback=tb.get(stop.source))
        else:
            # no fatal error, but the client may have said why in a non-fatal one just before (e.g.
            # librdkafka's "Static consumer fenced" delivered as _FATAL while fatal() is false)
            before = [e for e in any_errors.get(stop.source, ())
                      if stop.mono_ns - _RECENT_NS <= e.mono_ns <= stop.mono_ns]
            if stop.signal:
                how = f"ended by {stop.signal}"
            elif before:
                how = f"exited after the client error: {before[-1].message}"
            else:
                how = "exited without recording why"
            add(IncidentKind.MEMBER_DIED, stop, stop.source, f"member {stop.source} died: {how} (no fault on it)",
                stop.seq, *([before[-1].seq] if before and not stop.signal else []), traceback=tb.get(stop.source))
    for source, errs in sorted(errors.items()):
        for e in errs:
            if e.seq not in explained_errors:
                add(IncidentKind.FATAL_CLIENT_ERROR, e, source, f"{source}: fatal client error: {e.message}"
                    + (f" [{e.error_name}]" if e.error_name and e.error_name not in e.message else "")
                    + _log_ref(e), e.seq, traceback=tb.get(source))
    assigned_at: dict[str, list[int]] = {}
    for a in of(Assigned):
        assigned_at.setdefault(a.source, []).append(a.mono_ns)
    stops: dict[str, list[MemberStop]] = {}
    for s in of(MemberStop):
        stops.setdefault(s.source, []).append(s)
    for start in of(MemberStart):
        if declared(start):
            continue  # a command member records no assignment; the warm-up saw it join through the coordinator
        end = next((s for s in stops.get(start.source, ()) if s.mono_ns >= start.mono_ns), None)
        until = min(end.mono_ns if end else cutoff, cutoff)
        if any(start.mono_ns <= t <= until for t in assigned_at.get(start.source, ())):
            continue
        patience = (start.session_timeout_ms + start.max_poll_interval_ms) * 1_000_000
        crashed = end is not None and not end.clean and end.mono_ns < cutoff
        if crashed or until - start.mono_ns > patience:
            ran = (until - start.mono_ns) / 1e9
            ending = "then stopped uncleanly" if crashed else "before the teardown" if end is None else "before it stopped"
            add(IncidentKind.NEVER_JOINED, start, start.source,
                f"member {start.source} started but was never assigned (not even an empty assignment) in "
                f"{ran:.1f}s, {ending}", start.seq, *([end.seq] if end else []))


def _faults(of: _Of, cutoff: int, add: _Add) -> None:
    verified: dict[tuple[str, VerificationStage], FaultVerified] = {}
    for v in of(FaultVerified):
        verified.setdefault((v.fault_id, v.stage), v)
        if v.stage is VerificationStage.FIRED and not v.ok:
            add(IncidentKind.FAULT_NOT_FIRED, v, "nemesis", f"fault {v.fault_id} never fired: {v.evidence}", v.seq)
    ends = {f.fault_id: f for f in of(FaultEnd)}
    for start in of(FaultStart):
        fid = start.fault_id
        what = f"fault {fid} ({start.fault_type} on {start.node or start.target_role})"
        effect = verified.get((fid, VerificationStage.EFFECT))
        if effect is None:
            add(IncidentKind.FAULT_NOT_IN_EFFECT, start, "nemesis", f"{what}: no evidence that it took effect",
                start.seq)
        elif not effect.ok:
            add(IncidentKind.FAULT_NOT_IN_EFFECT, effect, "nemesis", f"{what} did not take effect: {effect.evidence}",
                start.seq, effect.seq)
        end = ends.get(fid)
        if end is None or end.mono_ns >= cutoff:
            add(IncidentKind.FAULT_NOT_HEALED, start, "nemesis", f"{what} was never healed before the teardown",
                start.seq)
            continue
        healed = verified.get((fid, VerificationStage.HEALED))
        if healed is None:
            add(IncidentKind.FAULT_NOT_HEALED, end, "nemesis", f"{what}: no evidence that its heal took effect",
                start.seq, end.seq)
        elif not healed.ok:
            add(IncidentKind.FAULT_NOT_HEALED, healed, "nemesis", f"{what}: heal not confirmed: {healed.evidence}",
                start.seq, healed.seq)


def _producers(history: History, of: _Of, add: _Add) -> None:
    ok: dict[str, int] = {}
    for s in of(SendOk):
        ok[s.source] = ok.get(s.source, 0) + 1
    failed: dict[str, list[SendFail | SendUnknown]] = {}
    for e in sorted(of(SendFail) + of(SendUnknown), key=lambda e: e.seq):
        failed.setdefault(e.source, []).append(e)
    for source, bad in sorted(failed.items()):
        e = bad[0]
        n_ok = ok.get(source, 0)
        what = "could not produce" if not n_ok else "had sends fail"
        add(IncidentKind.PRODUCER_FAILED, e, source,
            f"producer {source} {what}: {len(bad)} send(s) failed or unknown, {n_ok} acknowledged "
            f"(first: {e.error_name} on {e.topic})", e.seq)
    producers = (history.header.experiment.get("workload") or {}).get("producers") if isinstance(
        history.header.experiment.get("workload"), Mapping) else None
    if producers and not ok and not failed:
        add(IncidentKind.PRODUCER_FAILED, history.events[0], "producer",
            f"the workload has {len(producers)} producer(s) but no send was recorded at all", history.events[0].seq)


def incident_dict(i: Incident) -> dict[str, Any]:
    """The JSON form in ``checks.json``."""
    return {"kind": i.kind.value, "at_s": i.at_s, "source": i.source, "description": i.description,
            "evidence": list(i.evidence), "traceback": i.traceback}
