"""A black-box member's processed-record reports (chaos.workload.processed_reports): what they become, and that the
delivery checker judges them as a member's own consumed events — true when every record is reported, false when one
is not and nothing else saw it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from chaos.checkers.index import fmt_tp
from chaos.checkers.registry import run_checkers
from chaos.checkers.result import Validity
from chaos.history import Consumed, History, read_history
from chaos.history.event import REPORTS_INCOMPLETE, ErrorEvent, from_dict
from chaos.history.merge import merge_run
from chaos.model.checker_name import CheckerName
from chaos.model.workload import ConsumerSpec
from chaos.workload import processed_reports
from chaos.workload.processed_reports import RawReport, translate

from ..checkers.test_evidence import FIXTURES, black_box_started, declared

MS = 1_000_000


def _report(position: int, key: str | None, value: object, ts_ms: int) -> RawReport:
    raw = value if isinstance(value, bytes) else json.dumps(value).encode()
    return RawReport(position, key.encode() if key is not None else None, raw, ts_ms)


def test_a_report_is_a_consumed_event_between_the_members_latest_start_and_its_timestamp():
    # consumer-0 started at mono 1 s and again (bounced) at 5 s; the machine's wall clock is mono + 1000 s
    offset = 1000 * 10**9
    tr = translate([_report(0, "consumer-0", {"partition": 2, "offset": 7}, ts_ms=1_003_000),
                    _report(1, "consumer-0", {"partition": 2, "offset": 8, "topic": "t"}, ts_ms=1_006_000)],
                   members={"consumer-0": [1 * 10**9, 5 * 10**9]}, group="g", topic="t", wall_minus_mono_ns=offset)
    first, second = tr.consumed["consumer-0"]
    assert (first["mono_ns"], first["ts_uncertain_ns"]) == (1 * 10**9, 2 * 10**9 + MS)  # [1 s, 3 s + 1 ms]
    assert (second["mono_ns"], second["ts_uncertain_ns"]) == (5 * 10**9, 1 * 10**9 + MS)  # after the bounce
    assert (first["partition"], first["offsets"], first["generation"], first["member_id"]) == (2, [7], None, None)
    assert not tr.notes and not tr.errors["consumer-0"]


def test_a_report_stamped_before_the_member_started_begins_at_its_first_start():
    tr = translate([_report(0, "consumer-0", {"partition": 0, "offset": 0}, ts_ms=500)],
                   members={"consumer-0": [10**9]}, group="g", topic="t", wall_minus_mono_ns=0)
    (ev,) = tr.consumed["consumer-0"]
    assert ev["mono_ns"] == 10**9 and ev["ts_uncertain_ns"] == 0


@pytest.mark.parametrize(("value", "reason"), [
    (b"not json", "Invalid JSON"),
    ({"partition": 0}, "offset: Field required"),
    ({"partition": 0, "offset": 1, "extra": 1}, "extra: Extra inputs are not permitted"),
    ({"partition": "0", "offset": 1}, "partition: Input should be a valid integer"),
    ({"partition": 0, "offset": 1, "topic": "other"}, "topic 'other' is not the run's topic t"),
])
def test_an_unreadable_report_is_an_error_of_its_member_and_a_note_never_a_guess(value, reason):
    tr = translate([_report(4, "consumer-1", value, ts_ms=2000)], members={"consumer-1": [10**9]}, group="g",
                   topic="t", wall_minus_mono_ns=0)
    assert tr.consumed["consumer-1"] == []
    (err,) = tr.errors["consumer-1"]
    assert err["fatal"] is False and reason in err["message"] and "t-processed@4" in err["message"]
    assert len(tr.notes) == 1 and tr.notes[0].startswith("t-processed@4 (consumer-1): unreadable report")


def test_a_report_of_no_reporting_member_is_noted_and_ignored():
    tr = translate([_report(0, "intruder", {"partition": 0, "offset": 0}, 1), _report(1, None, {}, 1)],
                   members={"consumer-0": [0]}, group="g", topic="t", wall_minus_mono_ns=0)
    assert tr.consumed["consumer-0"] == [] and tr.errors["consumer-0"] == []
    assert [n.split(":")[0] for n in tr.notes] == ["t-processed@0", "t-processed@1"]
    assert "key 'intruder' names no member that reports processed records (consumer-0)" in tr.notes[0]


def test_recorded_reports_are_valid_events_of_their_member_and_merge_into_the_history(tmp_path: Path):
    (tmp_path / "header.json").write_text(json.dumps({"schema_version": read_history(
        FIXTURES / "realistic-static-range.jsonl").header.schema_version, "run_id": "r", "seed": 1,
        "experiment": {}, "versions": {}, "configs": {}}))
    processed_reports.record(tmp_path, [_report(0, "consumer-0", {"partition": 1, "offset": 3}, 10**12),
                                        _report(1, "consumer-0", b"{", 10**12)],
                             members={"consumer-0": [5]}, group="g", topic="t", read_complete=False)
    lines = (tmp_path / "events" / "consumer-0.processed.jsonl").read_bytes().splitlines()
    events = [from_dict(json.loads(line)) for line in lines]
    assert [e.kind.value for e in events] == ["consumed", "error", "error"]
    # the unreadable report, then the read that did not reach the end: the member's account is incomplete
    assert [getattr(e, "error_name", None) for e in events[1:]] == ["_UNREADABLE_REPORT", REPORTS_INCOMPLETE]
    notes = (tmp_path / "workers" / processed_reports.NOTES_FILE).read_text().splitlines()
    assert notes[0].startswith("the output topic t-processed could not be read to its end") and len(notes) == 2
    history = read_history(merge_run(tmp_path))
    (c,) = [e for e in history.events if isinstance(e, Consumed)]
    assert (c.source, c.mono_ns, c.offsets) == ("consumer-0", 5, (3,)) and c.ts_uncertain_ns is not None


def _reporting(history: History) -> History:
    """``history`` with every member declared a command member that reports what it processed."""
    return declared(history, command=["./service"], reports_processed=True)


def _reported(history: History, drop: tuple[str, int, int] | None = None, started_ns: int | None = None) -> History:
    """The fixture's members as command members reporting, on the output topic, every record their own events say
    they processed (``drop``: one (topic, partition, offset) left unreported; ``started_ns``: every member process
    started then instead), translated back into the history."""
    source = read_history(FIXTURES / "realistic-static-range.jsonl")
    starts: dict[str, list[int]] = {}
    reports: list[RawReport] = []
    for e in source.events:
        if e.kind.value == "member_start" and e.source.startswith("consumer-"):
            starts.setdefault(e.source, []).append(e.mono_ns if started_ns is None else started_ns)
        if isinstance(e, Consumed):
            for o in e.offsets:
                if (e.topic, e.partition, o) != drop:
                    reports.append(_report(len(reports), e.source, {"partition": e.partition, "offset": o},
                                           ts_ms=e.mono_ns // MS + 1))
    topic = next(e.topic for e in source.events if isinstance(e, Consumed))
    group = next(e.group for e in source.events if isinstance(e, Consumed))
    tr = translate(reports, members=starts, group=group, topic=topic, wall_minus_mono_ns=0)
    seq = max(e.seq for e in history.events)
    added = []
    for name, items in tr.consumed.items():
        for fields in items:
            seq += 1
            added.append(Consumed(seq=seq, ts=fields["mono_ns"] / 1e9, source=name, **{
                **fields, "offsets": tuple(fields["offsets"])}))
    events = sorted((*history.events, *added), key=lambda e: (e.mono_ns, e.seq))
    return replace(history, events=tuple(events))


def test_delivery_is_judged_from_reports_true_when_all_are_reported_false_when_one_is_not():
    bare = black_box_started(read_history(FIXTURES / "realistic-static-range.jsonl"))
    assert run_checkers(bare, [CheckerName.DELIVERY]).result(CheckerName.DELIVERY).valid is not Validity.TRUE
    verdict = run_checkers(_reported(bare))
    r = verdict.result(CheckerName.DELIVERY)
    assert r.valid is Validity.TRUE and r.metrics["lost"] == 0, r.summary
    # reports known only within an interval do not say when consumption resumed; the committed offsets still do
    conv = verdict.result(CheckerName.CONVERGENCE)
    assert conv.valid is Validity.TRUE and "consumption resumed" in conv.summary, conv.summary
    # a record no member reported and no final read saw (this fixture has none) is lost, and named
    first = next(e for e in bare.events if e.kind.value == "send_ok")
    gap = (first.topic, first.partition, first.offset)  # type: ignore[attr-defined]
    r = run_checkers(_reported(bare, drop=gap), [CheckerName.DELIVERY]).result(CheckerName.DELIVERY)
    assert r.valid is Validity.FALSE and r.metrics["lost"] == 1, r.summary
    assert any(f"record {fmt_tp(gap[:2])}@{gap[2]} was acknowledged" in v.description for v in r.violations)


def test_reports_processed_is_for_command_members_only():
    assert ConsumerSpec(command=("./svc",), reports_processed=True).reports_processed
    for spec in ({}, {"app": "svc:main"}):
        with pytest.raises(ValueError, match="reports_processed applies to command members only"):
            ConsumerSpec(**spec, reports_processed=True)


def _delivery(history: History):
    return run_checkers(history, [CheckerName.DELIVERY]).result(CheckerName.DELIVERY)


def _first_committed(history: History) -> tuple[str, int, int]:
    """An acknowledged record below a committed offset the coordinator showed."""
    committed = {(t, p): n for e in history.events if e.kind.value == "committed_offsets" for t, p, n in e.offsets}
    return next((e.topic, e.partition, e.offset) for e in history.events  # type: ignore[attr-defined]
                if e.kind.value == "send_ok" and committed.get((e.topic, e.partition), -1) > e.offset)  # type: ignore[attr-defined]


def test_the_coordinators_committed_offsets_are_judged_against_the_reports():
    bare = _reporting(black_box_started(read_history(FIXTURES / "realistic-static-range.jsonl")))
    r = _delivery(_reported(bare))
    assert r.valid is Validity.TRUE and r.metrics["coordinator_commits_checked"] > 0, r.summary
    assert "committed offset(s) the coordinator showed were covered by reports" in r.summary
    # a committed record nobody reported: the commit ran ahead of processing (and, with no final read here, lost)
    gap = _first_committed(bare)
    r = _delivery(_reported(bare, drop=gap))
    assert r.valid is Validity.FALSE, r.summary
    assert any(f"committed offset of {fmt_tp(gap[:2])}, owned by " in v.description and "but 1 acknowledged "
               f"offset(s) below it were never reported processed by the group ({gap[2]})" in v.description
               for v in r.violations), r.violations
    # reports from processes started after the commits cannot have been processed before them
    late = max(e.mono_ns for e in bare.events) + 1
    r = _delivery(_reported(bare, started_ns=late))
    assert r.valid is Validity.FALSE and any("only by member processes started after that" in v.description
                                            for v in r.violations), r.summary


def test_without_every_command_member_reporting_the_coordinators_offsets_are_not_judged():
    h = read_history(FIXTURES / "realistic-static-range.jsonl")
    bare = black_box_started(h)  # command members that do not declare reports_processed
    r = _delivery(_reported(bare, drop=_first_committed(bare)))
    assert "coordinator_commits_checked" not in r.metrics
    assert not any("coordinator's committed offset" in v.description for v in r.violations)
    # kafka-chaos's own members record their commits: the coordinator's side is not needed for them
    assert "coordinator_commits_checked" not in _delivery(h).metrics


def test_reports_not_read_to_the_end_leave_the_coordinators_offsets_unjudged():
    bare = _reporting(black_box_started(read_history(FIXTURES / "realistic-static-range.jsonl")))
    h = _reported(bare, drop=_first_committed(bare))
    last = h.events[-1]
    incomplete = ErrorEvent(seq=last.seq + 1, ts=last.ts, mono_ns=last.mono_ns, source="consumer-0",
                            message="the output topic could not be read to its end", error_code=None,
                            error_name=REPORTS_INCOMPLETE, fatal=False)
    r = _delivery(replace(h, events=(*h.events, incomplete)))
    assert "coordinator_commits_checked" not in r.metrics
    assert any("could not be read to its end" in n.description for n in r.findings if not n.violation), r.findings


def test_consumed_events_stamped_as_an_interval_by_members_that_are_not_command_members_still_show_resumption():
    # the instrumented consumer (app members) stamps a batch between its poll and the next one (ts_uncertain_ns):
    # only a command member's reports are set aside for "consumption resumed" (a fresh-clone run caught convergence
    # answering unknown for app members when every interval was set aside)
    h = read_history(FIXTURES / "realistic-static-range.jsonl")
    stamped = replace(h, events=tuple(replace(e, ts_uncertain_ns=2_000_000) if isinstance(e, Consumed) else e
                                      for e in h.events))
    conv = run_checkers(stamped, [CheckerName.CONVERGENCE]).result(CheckerName.CONVERGENCE)
    assert conv.valid is Validity.TRUE and "consumption resumed" in conv.summary, conv.summary
