"""The report's pure readability parts: the Wilson interval, the flaky rule, pass rates per
experiment x Kafka version x client, relative run links, and "no data" sentences instead of empty plots.

No Spark here: these take pandas frames shaped like the report's tables.
"""

from __future__ import annotations

import pandas as pd
import pytest

from chaos.report.metrics import flaky_commits, pass_rates, wilson_interval
from chaos.report.render import EvidenceLine, distribution_plots, run_href, timeline, violation_blocks

SHA = "0123456789abcdef0123456789abcdef01234567"


def test_wilson_interval_known_values():
    # reference values: Wilson (1927) score interval, z = 1.96 (e.g. statsmodels proportion_confint method="wilson")
    assert wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson_interval(10, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)
    assert wilson_interval(1, 1) == pytest.approx((0.2065, 1.0), abs=1e-4)
    assert wilson_interval(0, 0) is None
    lo, hi = wilson_interval(3, 1000)  # type: ignore[misc]
    assert 0 < lo < 0.003 < hi < 0.01
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def _runs(*rows: tuple[str, str | None, str | None, str, str | None]) -> pd.DataFrame:
    return pd.DataFrame([{"experiment": e, "kafka_version": v, "client": c, "valid": ok, "kafka_chaos_commit": sha}
                         for e, v, c, ok, sha in rows])


def test_flaky_needs_a_pass_and_a_fail_on_the_same_known_commit():
    runs = _runs(
        ("a", "3.9.1", "confluent-kafka", "true", SHA), ("a", "3.9.1", "confluent-kafka", "false", SHA),  # flaky
        ("b", "3.9.1", "confluent-kafka", "true", SHA), ("b", "3.9.1", "confluent-kafka", "false", "f" * 40),
        ("c", "3.9.1", "confluent-kafka", "true", None), ("c", "3.9.1", "confluent-kafka", "false", None),
        ("d", "3.9.1", "java", "true", SHA), ("d", "4.4.0", "java", "false", SHA),  # other Kafka version
        ("e", "3.9.1", "java", "true", SHA), ("e", "3.9.1", "java", "unknown", SHA),  # inconclusive: neither side
        ("f", "3.9.1", "java", "true", SHA), ("f", "3.9.1", "java", "false", SHA + "+dirty"),
    )
    assert flaky_commits(runs) == {("a", "3.9.1", "confluent-kafka", SHA)}


def test_pass_rates_per_experiment_version_client():
    runs = _runs(("a", "3.9.1", "confluent-kafka", "true", SHA), ("a", "3.9.1", "confluent-kafka", "false", SHA),
                 ("a", "3.9.1", "confluent-kafka", "unknown", SHA), ("a", "4.4.0", "confluent-kafka", "true", None),
                 ("a", None, None, "true", None))
    rates = pass_rates(runs)
    assert list(zip(rates["kafka_version"], rates["client"], strict=True)) == [
        ("3.9.1", "confluent-kafka"), ("4.4.0", "confluent-kafka"), (None, None)]
    first = rates.iloc[0]
    assert (first["runs"], first["passed"], first["failed"], first["inconclusive"]) == (3, 1, 1, 1)
    assert first["pass_rate"] == pytest.approx(1 / 3)
    assert (first["pass_rate_low95"], first["pass_rate_high95"]) == pytest.approx(wilson_interval(1, 3))
    assert bool(first["flaky"]) and first["flaky_commits"] == SHA[:12] and first["commits"] == 1
    assert not rates.iloc[1]["flaky"] and rates.iloc[1]["commits"] == 0
    assert len(pass_rates(runs.iloc[0:0])) == 0


def test_run_href_is_relative_beside_and_inside(tmp_path):
    run = tmp_path / "results" / "2026-01-02" / "exp a" / "run-000-seed-1"
    run.mkdir(parents=True)
    assert run_href(run, tmp_path / "report") == "../results/2026-01-02/exp%20a/run-000-seed-1/"
    assert run_href(run, tmp_path / "results" / "report") == "../2026-01-02/exp%20a/run-000-seed-1/"


def test_violation_links_run_dir_and_evidence_line(tmp_path):
    run_dir = tmp_path / "results" / "exp" / "run-000-seed-1"
    run_dir.mkdir(parents=True)
    v = pd.DataFrame([{"run": "2026-01-02/exp/run-000-seed-1", "checker": "delivery", "description": "lost t-0@3",
                       "evidence": [7, 9], "at_s": 1.5}])
    page = violation_blocks(v, {("2026-01-02/exp/run-000-seed-1", 7): EvidenceLine(8, '{"seq":7,"kind":"send_ok"}')},
                            10, {"2026-01-02/exp/run-000-seed-1": str(run_dir)}, tmp_path / "report")
    assert 'href="../results/exp/run-000-seed-1/"' in page
    assert 'href="../results/exp/run-000-seed-1/history.jsonl">history.jsonl</a> line 8 (seq 7)' in page
    assert "seq 9: not in the history" in page
    assert "&quot;seq&quot;:7" in page


def test_no_empty_plot_frames():
    empty = pd.DataFrame({"run": [], "fault_type": [], "ttr_s": []})
    out = distribution_plots(empty, pd.DataFrame({"run": [], "duration_s": []}), pd.DataFrame({"zombie_window_s": []}),
                             pd.DataFrame({"run": [], "unowned_s": []}), pd.DataFrame())
    assert "<img" not in out
    for sentence in ("No faults in this archive.", "No completed rebalance", "No zombie windows",
                     "without an owner", "No nights in this archive"):
        assert sentence in out
    some = distribution_plots(empty, pd.DataFrame({"run": ["r"] * 3, "duration_s": [0.5, 1.0, 2.0]}),
                              pd.DataFrame({"zombie_window_s": []}), pd.DataFrame({"run": [], "unowned_s": []}),
                              pd.DataFrame())
    assert some.count("<img") == 1 and "No faults in this archive." in some
    tl = timeline("r", pd.DataFrame({"run": [], "topic": [], "partition": [], "member": [], "start_t_s": [],
                                     "end_t_s": []}), pd.DataFrame(), pd.DataFrame())
    assert "<img" not in tl and "no timeline" in tl
