"""Root cause first (issue 10, item 5), on the session's real cluster.

A group whose handler raises on some records: with ``on_handler_error: stop``
(the default) the members die of it and the failure text must *start* with
that death and the exception text, before any invariant; with ``skip`` the run
completes, every record counts as processed and the errors are recorded.

The handler is this module's function; the workers import it by name, so the
directory of this file goes on their ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import orjson
import pytest

from chaos.harness import ChaosTest, explain
from chaos.history.reader import read_history

HERE = Path(__file__).resolve().parent
HANDLER = "test_root_cause:refuses_every_fifth_record"
MESSAGE = "downstream service unavailable"


def refuses_every_fifth_record(rec) -> None:
    """The user's processing logic: a downstream call that fails for offsets 4, 9, 14 ... of each partition."""
    if rec.offset % 5 == 4:
        raise RuntimeError(MESSAGE)


@pytest.fixture
def importable_handler(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p))


def _stopped(run_dir: Path, members: list[str]) -> bool:
    for m in members:
        path = run_dir / "events" / f"{m}.jsonl"
        if not path.exists() or b'"kind":"member_stop"' not in path.read_bytes():
            return False
    return True


def test_a_handler_that_raises_stops_its_members_and_the_failure_text_starts_with_that(
        kafka_cluster, tmp_path, importable_handler):
    test = ChaosTest(kafka_cluster, tmp_path / "run", seed=3)
    try:
        group = test.consumer_group(members=2, handler=HANDLER)  # on_handler_error: stop (the default)
        test.producer(rate=100, count=300)
        # each member dies at its first refused record; the survivor inherits the partitions and dies too
        deadline = time.monotonic() + 120
        while not _stopped(test.run_dir, group.members) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _stopped(test.run_dir, group.members), "the members did not stop on the handler's exception"
        verdict = test.finish()
    except BaseException:
        test.abort()
        raise
    assert verdict.valid.value != "true"
    text = explain(verdict, test.run_dir)
    first = text.splitlines()[0]
    assert first.startswith("kafka-chaos: member consumer-") and " died: handler raised on " in first, text
    assert f"RuntimeError: {MESSAGE}" in first and "traceback: " in first, text
    # the cause comes before every checker's line
    checker_lines = [i for i, line in enumerate(text.splitlines()) if line.startswith("[")]
    assert checker_lines and all(i > 1 for i in checker_lines), text
    # the traceback the failure text points at is there, with the user's frame in it
    tb_file = Path(first.split("traceback: ", 1)[1].rstrip(")"))
    tb = tb_file.read_text()
    assert "Traceback (most recent call last)" in tb and "refuses_every_fifth_record" in tb and MESSAGE in tb
    # the history holds it as events, and checks.json lists the incidents before the results
    h = read_history(test.run_dir / "history.jsonl")
    fatal = [e for e in h.events if e.kind.value == "error" and e.fatal]
    assert {e.source for e in fatal} == set(group.members) and all(MESSAGE in e.message for e in fatal)
    stops = [e for e in h.events if e.kind.value == "member_stop" and e.source in group.members]
    assert stops and not stops[0].clean
    checks = orjson.loads((test.run_dir / "checks.json").read_bytes())
    assert list(checks).index("incidents") < list(checks).index("results")
    died = [i for i in checks["incidents"] if i["kind"] == "member_died"]
    assert {i["source"] for i in died} == set(group.members)
    assert all(i["traceback"] == f"workers/{i['source']}.traceback.txt" for i in died)


def test_with_skip_the_run_completes_and_the_errors_are_recorded(kafka_cluster, tmp_path, importable_handler):
    test = ChaosTest(kafka_cluster, tmp_path / "run", seed=4)
    try:
        test.consumer_group(members=2, handler=HANDLER, on_handler_error="skip")
        test.producer(rate=100, count=300)
        verdict = test.finish()
    except BaseException:
        test.abort()
        raise
    h = read_history(test.run_dir / "history.jsonl")
    errors = [e for e in h.events if e.kind.value == "error" and MESSAGE in e.message]
    assert errors and not any(e.fatal for e in errors)
    assert all("record skipped (on_handler_error=skip)" in e.message for e in errors)
    # every refused record counts as processed (consumed), so nothing acknowledged is missing
    refused = {(e.partition, e.offset) for e in h.events if e.kind.value == "send_ok" and e.offset % 5 == 4}
    consumed = {(e.partition, o) for e in h.events if e.kind.value == "consumed" for o in e.offsets}
    assert refused and refused <= consumed
    assert not [e for e in h.events if e.kind.value == "member_stop" and not e.clean
                and e.source.startswith("consumer-")]
    assert verdict.valid.value == "true", explain(verdict, test.run_dir)
