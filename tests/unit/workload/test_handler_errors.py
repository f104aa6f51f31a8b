"""on_handler_error (stop | skip | retry): what a member records when the user's handler raises.

The member's loop runs against a stand-in client library (no broker involved: what is under test is the
member's own bookkeeping); the real-cluster behaviour is in tests/integration/test_root_cause.py.
"""

from __future__ import annotations

import pytest

from chaos.checkers.incidents import IncidentKind, collect, traceback_files
from chaos.history import read_history
from chaos.history.merge import merge_run
from chaos.model.workload import HANDLER_RETRIES, ConsumerSpec, HandlerErrorPolicy
from chaos.outcome import Outcome
from chaos.workload import consumer
from chaos.workload.consumer import CommitResult, Record
from chaos.workload.spec import WorkerConfig

CALLS: list[int] = []


def fails_on_offset_3(rec: Record) -> None:
    """The user's handler: offset 3 of every partition is refused by a 'downstream service'."""
    CALLS.append(rec.offset)
    if rec.offset == 3:
        raise RuntimeError("downstream service unavailable")


class FakeClient:
    """Stands in for a client library: one partition of 6 records, then nothing; commits succeed."""

    name = "confluent-kafka"
    version = "test"

    def __init__(self, member_stopping):
        self._records = [Record("t", 0, o, None, b"v") for o in range(6)]
        self._stop = member_stopping
        self.committed: list[list[tuple[str, int, int]]] = []

    def subscribe(self, topics, callbacks):
        self._cb = callbacks
        callbacks.assigned([("t", 0)], False)

    def poll(self, max_records, timeout):
        out, self._records = self._records[:2], self._records[2:]
        if not out:
            self._stop()
        return out

    def group_view(self):
        return 1, "m0"

    def commit_sync(self, offsets):
        self.committed.append(offsets)
        return CommitResult(Outcome.OK)

    def commit_async(self, offsets, done):
        done(self.commit_sync(offsets))

    def close(self):
        pass


def run_member(tmp_path, monkeypatch, policy: HandlerErrorPolicy) -> tuple[int, FakeClient]:
    CALLS.clear()
    monkeypatch.setattr(consumer, "HANDLER_RETRY_BACKOFF_S", 0.0)  # the waits are not under test
    cfg = WorkerConfig(role="consumer", name="consumer-0", run_id="r", run_dir=str(tmp_path), bootstrap="unused:1",
                       topic="t", group="g", consumer=ConsumerSpec(on_handler_error=policy),
                       handler=f"{__name__}:fails_on_offset_3")
    holder: dict = {}

    def make(_cfg, _log=None):
        holder["client"] = FakeClient(lambda: setattr(holder["member"], "stopping", True))
        return holder["client"]

    real_member = consumer.Member

    def member(*a, **kw):
        holder["member"] = real_member(*a, **kw)
        return holder["member"]

    monkeypatch.setattr(consumer.signal, "signal", lambda *a: None)  # keep pytest's own SIGINT/SIGTERM handlers
    monkeypatch.setattr(consumer, "make_client", make)
    monkeypatch.setattr(consumer, "Member", member)
    (tmp_path / "events").mkdir()
    (tmp_path / "workers").mkdir()  # the runner makes it before spawning workers
    (tmp_path / "header.json").write_text('{"schema_version": 1, "run_id": "r", "seed": 1, "experiment": {}, '
                                          '"versions": {}, "configs": {}}')
    code = consumer.run_consumer(cfg)
    merge_run(tmp_path)
    return code, holder["client"]


def kinds(tmp_path):
    return [e for e in read_history(tmp_path / "history.jsonl").events]


def test_stop_records_the_fatal_error_with_its_traceback_and_an_unclean_stop(tmp_path, monkeypatch):
    code, client = run_member(tmp_path, monkeypatch, HandlerErrorPolicy.STOP)
    assert code == 1
    events = kinds(tmp_path)
    [err] = [e for e in events if e.kind.value == "error"]
    assert err.fatal and err.message == "handler raised on t-0@3: RuntimeError: downstream service unavailable"
    assert events[-1].kind.value == "member_stop" and events[-1].clean is False
    consumed = [o for e in events if e.kind.value == "consumed" for o in e.offsets]
    assert consumed == [0, 1, 2]  # processed before the failing record; 3 is not, nothing after it ran
    assert CALLS == [0, 1, 2, 3]
    tb = (tmp_path / "workers" / "consumer-0.traceback.txt").read_text()
    assert "Traceback" in tb and "RuntimeError: downstream service unavailable" in tb and "fails_on_offset_3" in tb
    [inc] = collect(read_history(tmp_path / "history.jsonl"), traceback_files(tmp_path))
    assert inc.kind is IncidentKind.MEMBER_DIED and "downstream service unavailable" in inc.description
    assert inc.traceback == "workers/consumer-0.traceback.txt"


def test_skip_records_a_non_fatal_error_and_counts_the_record_processed(tmp_path, monkeypatch):
    code, client = run_member(tmp_path, monkeypatch, HandlerErrorPolicy.SKIP)
    assert code == 0
    events = kinds(tmp_path)
    [err] = [e for e in events if e.kind.value == "error"]
    assert not err.fatal and "t-0@3, record skipped" in err.message and "downstream service unavailable" in err.message
    consumed = [o for e in events if e.kind.value == "consumed" for o in e.offsets]
    assert consumed == [0, 1, 2, 3, 4, 5]
    assert client.committed[-1] == [("t", 0, 6)]
    assert events[-1].kind.value == "member_stop" and events[-1].clean is True
    assert collect(read_history(tmp_path / "history.jsonl")) == ()


def test_retry_calls_the_handler_again_a_bounded_number_of_times_then_stops(tmp_path, monkeypatch):
    code, _ = run_member(tmp_path, monkeypatch, HandlerErrorPolicy.RETRY)
    assert code == 1
    assert CALLS == [0, 1, 2] + [3] * (1 + HANDLER_RETRIES)
    events = kinds(tmp_path)
    errors = [e for e in events if e.kind.value == "error"]
    assert [e.fatal for e in errors] == [False] * HANDLER_RETRIES + [True]
    assert "attempt 1 of 4, retrying" in errors[0].message
    assert errors[-1].message == "handler raised on t-0@3 (4 attempts): RuntimeError: downstream service unavailable"
    assert events[-1].kind.value == "member_stop" and events[-1].clean is False
    assert (tmp_path / "workers" / "consumer-0.traceback.txt").read_text().count("Traceback") == 1 + HANDLER_RETRIES


def test_the_java_client_refuses_a_policy_it_cannot_apply():
    with pytest.raises(ValueError, match="on_handler_error does not apply"):
        ConsumerSpec(client="java", on_handler_error="skip")
    assert ConsumerSpec().on_handler_error is HandlerErrorPolicy.STOP
