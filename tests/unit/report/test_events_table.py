"""The events table carries what the derived schema reads that the hand-kept DDL dropped.

Uses the session's one report (``report`` fixture in conftest.py, shared with test_report.py).
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pandas as pd

from chaos.history import HISTORY_FILE


def _lines(archive: Path, key: bytes) -> list[dict]:
    """Every event line of the archive that mentions ``key``."""
    out = []
    for path in sorted(archive.rglob(HISTORY_FILE)):
        for line in path.open("rb"):
            if key in line and b'"header"' not in line:
                out.append(orjson.loads(line))
    return out


def test_commit_answer_times_and_member_subscriptions_reach_the_events_table(archive, report):
    out, _ = report
    events = pd.read_parquet(out / "tables" / "events")

    answered = sorted(e["answered_ns"] for e in _lines(archive, b'"answered_ns"') if e.get("answered_ns") is not None)
    assert answered, "the fixture archive has commits with answered_ns"
    assert sorted(events["answered_ns"].dropna().astype("int64")) == answered

    # consumer-group samples (share_group_state samples carry members with subscriptions too)
    subscribed = sorted(tuple(m["subscription"]) for e in _lines(archive, b'"subscription"')
                        if e["kind"] == "group_state" for m in e.get("members", []) if m.get("subscription"))
    assert subscribed, "the fixture archive has group samples with subscriptions"
    samples = events[events["kind"] == "group_state"]["members"]
    got = sorted(tuple(m["subscription"]) for members in samples for m in members
                 if m["subscription"] is not None and len(m["subscription"]))
    assert got == subscribed
