"""Fault execution: did the run test what it set out to?

Not an invariant of the group but a precondition of every verdict on it: a
run whose planned fault never fired, did not take effect, or was not healed
says nothing about the fault — it must not pass as if it did. From the
nemesis's own records in the history:

- ``fault_verified`` stage ``fired`` with ``ok`` false: a planned fault never
  fired (its trigger was not seen in time, its target resolved to nothing);
- every ``fault_start`` needs a ``fault_verified`` stage ``effect`` with ``ok``
  true (the kernel state of each process, the proxy refusing connections, the
  toxic listed …), a ``fault_end`` and a ``fault_verified`` stage ``healed``
  with ``ok`` true;
- a fault that acts on what passes (an ``rpc`` fault) records a stage ``acted``
  at its heal: ``ok`` false (it matched no RPC while it was on) means it tested
  nothing.

Anything missing makes the answer ``unknown`` with the reason; this checker
never answers ``false`` (nothing about the group was shown to be wrong), and
answers ``true`` only with that evidence in hand for every fault.
"""

from __future__ import annotations

from chaos.checkers.bounds import ResolvedBounds
from chaos.checkers.index import index_of
from chaos.checkers.result import FindingLog, Result
from chaos.history import FaultEnd, FaultStart, FaultVerified, History, VerificationStage
from chaos.model.checker_name import CheckerName

#: reasons quoted in the summary (the rest are findings)
_SUMMARY_REASONS = 3


def check(history: History, bounds: ResolvedBounds) -> Result:  # noqa: ARG001 - same signature as every checker
    idx = index_of(history)
    starts: dict[str, FaultStart] = {}
    for ev in idx.of(FaultStart):
        starts.setdefault(ev.fault_id, ev)
    ended = {ev.fault_id for ev in idx.of(FaultEnd)}
    verified: dict[tuple[str, VerificationStage], FaultVerified] = {}
    log = FindingLog(limit=50)
    problems: list[str] = []

    def problem(text: str, *evidence: int) -> None:
        problems.append(text)
        log.note(text, *evidence)

    for fv in idx.of(FaultVerified):
        verified[(fv.fault_id, fv.stage)] = fv
        if fv.stage is VerificationStage.FIRED and not fv.ok:
            problem(f"fault {fv.fault_id} never fired: {fv.evidence}", fv.seq)
    for fid, start in starts.items():
        what = f"fault {fid} ({start.fault_type} on {start.node or start.target_role})"
        effect = verified.get((fid, VerificationStage.EFFECT))
        if effect is None:
            problem(f"{what}: no evidence that it took effect", start.seq)
        elif not effect.ok:
            problem(f"{what} did not take effect: {effect.evidence}", start.seq, effect.seq)
        if fid not in ended:
            problem(f"{what} was never healed (no fault_end)", start.seq)
            continue
        healed = verified.get((fid, VerificationStage.HEALED))
        if healed is None:
            problem(f"{what}: no evidence that its heal took effect", start.seq)
        elif not healed.ok:
            problem(f"{what}: heal not confirmed: {healed.evidence}", start.seq, healed.seq)
        acted = verified.get((fid, VerificationStage.ACTED))
        if acted is not None and not acted.ok:  # in place, but what it acts on never passed
            problem(f"{what} was in place but acted on nothing: {acted.evidence}", start.seq, acted.seq)
    metrics = {"faults_fired": float(len(starts)),
               "faults_not_fired": float(sum(1 for (_, st), v in verified.items()
                                             if st is VerificationStage.FIRED and not v.ok)),
               "fault_problems": float(len(problems))}
    unknown = None
    if problems:
        shown = "; ".join(problems[:_SUMMARY_REASONS])
        more = f" (+{len(problems) - _SUMMARY_REASONS} more)" if len(problems) > _SUMMARY_REASONS else ""
        unknown = f"the run did not test what it planned: {shown}{more}"
    ok = (f"{len(starts)} fault(s) fired, took effect and healed, each with evidence" if starts
          else "no fault was planned or fired in this run")
    return log.result(CheckerName.FAULTS, ok, "", metrics, unknown=unknown)
