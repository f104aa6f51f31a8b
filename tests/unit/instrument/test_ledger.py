"""The processed-default bookkeeping of chaos.instrument (pure: no client, times passed in)."""

from __future__ import annotations

from chaos.instrument.ledger import Handover, ProcessedLedger, ProcessedMode


def handover(records, at_ns=1_000, generation=3, member="m-1"):
    return Handover(tuple(records), generation, member, at_ns, at_ns / 1e9)


def test_next_poll_settles_each_partition_with_the_interval_from_handover_to_next_poll():
    ledger = ProcessedLedger()
    ledger.hand_over(handover([("t", 0, 5), ("t", 1, 7), ("t", 0, 6)], at_ns=1_000))
    batches = ledger.settle(now_ns=4_000)
    assert [(b.topic, b.partition, b.offsets) for b in batches] == [("t", 0, (5, 6)), ("t", 1, (7,))]
    # processing ended after the handover and before the next poll: [1000, 1000 + 3000]
    assert {(b.mono_ns, b.ts_uncertain_ns, b.generation, b.member_id) for b in batches} == {(1_000, 3_000, 3, "m-1")}
    assert ledger.settle(now_ns=5_000) == []  # recorded once


def test_generation_is_the_one_reported_when_the_records_were_returned():
    ledger = ProcessedLedger()
    ledger.hand_over(handover([("t", 0, 1)], at_ns=10, generation=4))
    ledger.hand_over(handover([("t", 0, 2)], at_ns=20, generation=5))  # consume() twice before polling again
    assert [(b.offsets, b.generation, b.mono_ns) for b in ledger.settle(30)] == [((1,), 4, 10), ((2,), 5, 20)]


def test_a_mark_switches_to_explicit_and_only_marked_records_are_processed():
    ledger = ProcessedLedger()
    ledger.hand_over(handover([("t", 0, 1), ("t", 0, 2), ("t", 0, 3)], at_ns=100, generation=7))
    b = ledger.mark(("t", 0, 2), now_ns=150, now_ts=0.15)
    assert ledger.mode is ProcessedMode.EXPLICIT
    assert b is not None and (b.offsets, b.mono_ns, b.ts_uncertain_ns, b.generation) == ((2,), 150, None, 7)
    assert ledger.settle(now_ns=200) == []  # unmarked records of the batch are not counted at the next poll
    assert ledger.mark(("t", 0, 2), 210, 0.21) is None  # marked already
    assert ledger.mark(("t", 9, 9), 210, 0.21) is None  # never handed out
    ledger.hand_over(handover([("t", 0, 4)], at_ns=300, generation=8))
    assert ledger.settle(400) == []
    late = ledger.mark(("t", 0, 1), 500, 0.5)  # a record of the first batch, marked late, keeps its generation
    assert late is not None and (late.offsets, late.generation) == ((1,), 7)
    assert ledger.holds(("t", 0, 4)) and not ledger.holds(("t", 0, 1))


def test_unmarked_records_are_bounded_oldest_forgotten_first():
    ledger = ProcessedLedger(max_unmarked=3)
    ledger.hand_over(handover([("t", 0, 0)]))
    ledger.mark(("t", 0, 0), 1, 0.0)
    ledger.hand_over(handover([("t", 0, o) for o in range(1, 6)]))
    assert [o for o in range(1, 6) if ledger.holds(("t", 0, o))] == [3, 4, 5]


def test_records_handed_again_after_a_rewind_keep_the_latest_handover():
    ledger = ProcessedLedger()
    ledger.mark(("x", 0, 0), 0, 0.0)  # explicit from the start (nothing handed: no batch)
    ledger.hand_over(handover([("t", 0, 1)], at_ns=10, generation=1))
    ledger.hand_over(handover([("t", 0, 1)], at_ns=20, generation=2))
    b = ledger.mark(("t", 0, 1), 30, 0.0)
    assert b is not None and b.generation == 2
