"""The Spark re-check of delivery (both halves: lost records, commits ahead of processing), committed-offset
monotonicity and fencing (issue 15, item 4).

Each invariant gets hand-made histories: one both sides find bad (agree), one near miss both pass, and a
copy of the bad one whose ``checks.json`` was edited so the checker no longer says so (or says something
else): the re-check must report the disagreement with both sides' example. One small archive, judged by
the real checkers (``tests/recheck_archive.py``), one table build and one re-check over it, on the session's
SparkSession, built once per session (``recheck_report``, ``tests/conftest.py``).
"""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="module")
def recheck_rows(recheck_report) -> dict[tuple[str, str], dict[str, Any]]:
    """recheck.csv by (run name, invariant), its empty cells None."""
    import pandas as pd

    rc = pd.read_csv(recheck_report[0] / "recheck.csv", dtype={"agree": "object"})
    rows = [{k: (None if isinstance(v, float) and pd.isna(v) else v) for k, v in r.items()}
            for r in rc.to_dict("records")]
    for r in rows:
        r["agree"] = None if r["agree"] is None else str(r["agree"]) == "True"
    return {(r["run"].split("/")[-1].removeprefix("run-"), r["invariant"]): r for r in rows}


def test_the_new_invariants_are_rechecked():
    from chaos.report.recheck import INVARIANTS

    assert {"delivery-commits", "committed-offsets", "fencing"} <= set(INVARIANTS)


def test_restated_constants_match_the_checkers():
    from chaos.checkers.bounds import CheckerBounds
    from chaos.checkers.coordinator import LOG_STAMP_UNCERTAINTY_NS
    from chaos.report import recheck

    assert recheck.LOG_STAMP_UNCERTAINTY_NS == LOG_STAMP_UNCERTAINTY_NS
    assert recheck.DEFAULT_SLACK_S == CheckerBounds().clock_slack_s
    assert recheck.DEFAULT_MAX_FINDINGS == CheckerBounds().max_findings


def test_commit_ahead_of_processing_found_by_both(recheck_rows):
    row = recheck_rows[("commit-ahead", "delivery-commits")]
    assert row["compared"] and row["agree"] is True, row
    assert row["spark_violations"] == row["checker_findings"] == 1
    assert "t-0 at 4" in row["spark_example"] and "offset 2" in row["spark_example"]
    assert "had not been processed" in row["checker_example"]
    # the lost half is compared on its own: nothing lost here
    lost = recheck_rows[("commit-ahead", "delivery")]
    assert lost["agree"] is True and lost["spark_violations"] == 0


def test_commit_near_miss_passes_both(recheck_rows):
    row = recheck_rows[("commit-near-miss", "delivery-commits")]
    assert row["compared"] and row["agree"] is True, row
    assert row["spark_violations"] == row["checker_findings"] == 0


@pytest.mark.parametrize("run,invariant", [("auto-commit-never-processed", "delivery-commits"),
                                           ("offsets-deposed-not-loaded", "committed-offsets"),
                                           ("offsets-lower-without-reset", "committed-offsets")])
def test_near_misses_without_their_excuse_are_found_by_both(recheck_rows, run, invariant):
    row = recheck_rows[(run, invariant)]
    assert row["compared"] and row["agree"] is True, row
    assert row["spark_violations"] == row["checker_findings"] >= 1, row


def test_a_lost_record_is_found_by_both_and_a_checks_json_that_missed_it_is_a_disagreement(recheck_rows):
    row = recheck_rows[("lost-record", "delivery")]
    assert row["compared"] and row["agree"] is True, row
    assert row["spark_violations"] == row["checker_findings"] == 1, row
    assert "t-0@2" in row["spark_example"], row
    row = recheck_rows[("lost-record-unreported", "delivery")]
    assert row["compared"] and row["agree"] is False, row
    assert row["spark_violations"] == 1 and row["checker_findings"] == 0, row
    assert row["note"] == "checker lost=0, Spark lost=1", row


def test_commit_ahead_unreported_is_a_disagreement(recheck_rows):
    row = recheck_rows[("commit-ahead-unreported", "delivery-commits")]
    assert row["compared"] and row["agree"] is False, row
    assert row["spark_violations"] == 1 and row["checker_findings"] == 0
    assert "t-0 at 4" in row["spark_example"] and "Spark: 1" in row["note"]


@pytest.mark.parametrize(("run", "invariant", "example"), [
    ("offsets-back", "committed-offsets", "group g t-0"),  # one partition
    ("fencing-stale", "fencing", "generation 1"),  # the commit during PreparingRebalance is legal
])
def test_one_violation_found_by_both(recheck_rows, run, invariant, example):
    row = recheck_rows[(run, invariant)]
    assert row["compared"] and row["agree"] is True, row
    assert row["spark_violations"] == row["checker_findings"] == 1
    assert example in row["spark_example"] and example in row["checker_example"]


@pytest.mark.parametrize(("run", "invariant"), [("offsets-near-miss", "committed-offsets"),
                                                ("fencing-in-flight", "fencing")])
def test_near_miss_passes_both(recheck_rows, run, invariant):
    row = recheck_rows[(run, invariant)]
    assert row["compared"] and row["agree"] is True, row
    assert row["spark_violations"] == row["checker_findings"] == 0


def test_offsets_back_unreported_is_a_disagreement(recheck_rows):
    row = recheck_rows[("offsets-back-unreported", "committed-offsets")]
    assert row["compared"] and row["agree"] is False, row
    assert "Spark only: group g t-0" in row["note"] and "group g t-0" in row["spark_example"]


def test_offsets_back_on_another_partition_shows_both_sides(recheck_rows):
    row = recheck_rows[("offsets-back-other-partition", "committed-offsets")]
    assert row["compared"] and row["agree"] is False, row
    assert "checker only: group g t-1" in row["note"] and "Spark only: group g t-0" in row["note"]
    assert "group g t-0" in row["spark_example"] and "group g t-1" in row["checker_example"]


def test_every_other_pair_agrees_or_says_why_not(recheck_rows):
    edited = {("lost-record-unreported", "delivery"), ("commit-ahead-unreported", "delivery-commits"),
              ("offsets-back-unreported", "committed-offsets"), ("offsets-back-other-partition", "committed-offsets"),
              ("fencing-stale-unreported", "fencing"), ("fencing-in-flight-reported", "fencing")}
    for (run, inv), row in recheck_rows.items():
        if (run, inv) in edited:
            continue
        assert row["agree"] is True or (not row["compared"] and row["note"]), (run, inv, row)


def test_fencing_disagreements_show_both_sides(recheck_rows):
    row = recheck_rows[("fencing-stale-unreported", "fencing")]
    assert row["compared"] and row["agree"] is False and row["spark_example"], row
    assert "did not report" in row["note"]
    row = recheck_rows[("fencing-in-flight-reported", "fencing")]
    assert row["compared"] and row["agree"] is False and "(edited)" in row["checker_example"], row
    assert "did not find" in row["note"]


def test_fencing_not_compared_for_kip848_groups(recheck_rows):
    row = recheck_rows[("fencing-kip848-line", "fencing")]
    assert not row["compared"] and row["agree"] is None and "KIP-848" in row["note"], row


def test_report_page_shows_the_disagreements_with_both_sides(recheck_report):
    import html as html_mod

    out, summary = recheck_report
    assert not summary["recheck"]["agree"]
    disagreeing = {(d["run"].split("/")[-1], d["invariant"]) for d in summary["recheck"]["disagreements"]}
    assert disagreeing == {("run-lost-record-unreported", "delivery"),
                           ("run-commit-ahead-unreported", "delivery-commits"),
                           ("run-offsets-back-unreported", "committed-offsets"),
                           ("run-offsets-back-other-partition", "committed-offsets"),
                           ("run-fencing-stale-unreported", "fencing"),
                           ("run-fencing-in-flight-reported", "fencing")}
    page = html_mod.unescape((out / "report.html").read_text())
    row = next(r for r in page.split("<tr") if "run-offsets-back-other-partition" in r and "committed-offsets" in r)
    assert "group g t-0: committed offset below" in row  # Spark's side
    assert "group g t-1: committed offset sample 2 is below the earlier sample 4" in row  # the checker's side
    for inv in ("delivery-commits", "fencing"):
        assert f">{inv}<" in page


def test_an_app_members_late_consumed_is_no_generation_going_back_on_either_side(recheck_rows):
    # chaos.instrument tags an app member's consumed with the generation its record was handed over in
    row = recheck_rows[("app-consumed-late", "generations")]
    assert row["compared"] and row["agree"] is True, row
    assert row["spark_violations"] == row["checker_findings"] == 0, row
    # the same history from a reference member: its generation went back, and both sides say so
    row = recheck_rows[("member-consumed-back", "generations")]
    assert row["compared"] and row["agree"] is True, row
    assert row["spark_violations"] >= 1 and row["checker_findings"] >= 1, row
