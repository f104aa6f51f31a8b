"""The application as a member (issue 14, items 2-3): ``app`` and ``command`` members on the session's cluster.

An ``app`` member runs the application's own loop in a kafka-chaos process, its consumer instrumented; a
``command`` member is any program, judged from the coordinator's side. Bad input — a program that is not
found, exits at once or never joins, an app that cannot be imported — is one line naming the member, what
happened and its output's tail, and nothing is left running.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chaos.checkers.result import Validity
from chaos.errors import UsageError
from chaos.harness import ChaosTest
from chaos.history.event import Consumed, MemberStart, MemberStop
from chaos.model.checker_name import CheckerName

#: the application: a poll loop configured only from the member environment, commits after processing
SERVICE = '''
import os
from confluent_kafka import Consumer, TopicPartition

def main():
    done = {}
    def on_revoke(consumer, partitions):
        mine = [TopicPartition(p.topic, p.partition, done.pop((p.topic, p.partition)))
                for p in partitions if (p.topic, p.partition) in done]
        if mine:
            consumer.commit(offsets=mine, asynchronous=False)
    c = Consumer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"],
                  "group.id": os.environ["KAFKA_GROUP_ID"], "client.id": os.environ["KAFKA_CLIENT_ID"],
                  "session.timeout.ms": int(os.environ["KAFKA_SESSION_TIMEOUT_MS"]),
                  "enable.auto.commit": False, "auto.offset.reset": "earliest", "log_level": 0})
    c.subscribe([os.environ["KAFKA_TOPIC"]], on_revoke=on_revoke)
    try:
        while True:
            batch = c.consume(100, 0.2)
            for m in batch:
                if m.error() is None:
                    done[(m.topic(), m.partition())] = m.offset() + 1
            if batch and done:
                c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in done.items()], asynchronous=False)
    finally:
        c.close()
'''


def _run_until_consumed(test: ChaosTest, records: int, timeout: float = 60.0) -> None:
    test.producer(rate=200, count=records)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sum(p.read_bytes().count(b'"kind":"send_ok"') for p in (test.run_dir / "events").glob("producer-*")) >= records:
            return
        time.sleep(0.5)


def test_an_app_member_runs_the_applications_loop_and_is_judged_on_everything(kafka_cluster, tmp_path):
    (tmp_path / "svc.py").write_text(SERVICE)
    test = ChaosTest(kafka_cluster, tmp_path / "run", seed=1)
    try:
        test.consumer_group(members=2, app="svc:main", cwd=str(tmp_path), session_timeout_ms=6000)
        _run_until_consumed(test, 300)
        verdict = test.finish()
    except BaseException:
        test.abort()
        raise
    assert verdict.valid is Validity.TRUE, [(r.checker.value, r.summary) for r in verdict.results]
    h = test.history
    starts = [e for e in h.events if type(e) is MemberStart]
    assert {e.source for e in starts} == {"consumer-0", "consumer-1"}
    assert sum(len(e.offsets) for e in h.events if type(e) is Consumed) >= 300
    # SIGTERM at teardown reached the application's finally: its consumer closed and said so
    stops = [e for e in h.events if type(e) is MemberStop]
    assert stops and all(e.clean for e in stops), stops


def test_a_command_member_is_judged_from_the_coordinator_and_unknown_where_it_recorded_nothing(kafka_cluster, tmp_path):
    (tmp_path / "svc.py").write_text(SERVICE + "\nmain()\n")
    test = ChaosTest(kafka_cluster, tmp_path / "run", seed=2)
    try:
        group = test.consumer_group(members=2, command=[sys.executable, "svc.py"], cwd=str(tmp_path))
        _run_until_consumed(test, 200)
        procs = [test.workload.members[m] for m in group.members]
        verdict = test.finish()
    except BaseException:
        test.abort()
        raise
    assert not any(p.alive() for p in procs)
    assert verdict.result(CheckerName.COMMITTED_OFFSETS).valid is Validity.TRUE
    for name in (CheckerName.DELIVERY, CheckerName.OWNERSHIP_GENERATION, CheckerName.FENCING):
        r = verdict.result(name)
        assert r.valid is Validity.UNKNOWN and "consumer-0 (command)" in r.summary, (name, r.summary)
    assert verdict.valid is Validity.UNKNOWN
    # the runner recorded how each program ended: asked to stop (Python's default SIGTERM: killed by it)
    stops = {e.source: e for e in test.history.events if type(e) is MemberStop}
    assert set(stops) == {"consumer-0", "consumer-1"} and all(e.clean for e in stops.values())


@pytest.mark.parametrize(("fields", "said"), [
    ({"command": ["kafka-chaos-no-such-program"]}, "member consumer-0: command 'kafka-chaos-no-such-program' was not found"),
    ({"command": [sys.executable, "-c", "import sys; print('bad config: no topic', file=sys.stderr); sys.exit(3)"]},
     "member consumer-0 (command "),
    ({"app": "no_such_module:main"},
     "could not import its app during the warm-up; its output ends: app no_such_module:main: ModuleNotFoundError"),
], ids=["not-found", "exits-at-once", "app-not-importable"])
def test_an_application_member_that_cannot_run_is_one_line_naming_it(kafka_cluster, tmp_path, fields, said):
    test = ChaosTest(kafka_cluster, tmp_path / "run", seed=3)
    with pytest.raises(UsageError) as err:
        try:
            test.consumer_group(members=1, **fields)
        finally:
            test.abort()
    text = str(err.value)
    assert said in text and "\n" not in text, text
    if "exits-at-once" in str(fields):
        assert "exited with code 3" in text and "bad config: no topic" in text
    assert test.workload is None or not any(p.alive() for p in test.workload.members.values())


def test_a_command_that_never_joins_is_named_after_the_warm_up(kafka_cluster, tmp_path):
    test = ChaosTest(kafka_cluster, tmp_path / "run", seed=4, warmup_timeout_s=8)  # joins in ~2 s when it does
    with pytest.raises(UsageError) as err:
        try:
            test.consumer_group(members=1, command=[sys.executable, "-c", "print('waiting for nothing', flush=True); "
                                                                        "import time; time.sleep(120)"])
        finally:
            test.abort()
    text = str(err.value)
    assert text.startswith("member consumer-0 (command ") and "did not join the group" in text, text
    assert "waiting for nothing" in text
    assert not any(p.alive() for p in test.workload.members.values())


def test_the_cli_refuses_a_program_that_is_not_found_with_exit_2(tmp_path):
    exp = tmp_path / "mine.yaml"
    exp.write_text("name: mine\ncluster: {brokers: 1, zookeepers: 1}\n"
                   "workload: {partitions: 2, replication: 1, consumers: [{command: [kafka-chaos-no-such-program]}]}\n"
                   "phases: {warmup_s: 1, chaos_s: 1}\n")
    chaos = Path(sys.executable).parent / "chaos"
    state = tmp_path / "state"
    got = subprocess.run([str(chaos), "run", str(exp), "--out", str(tmp_path / "runs")], capture_output=True,
                         text=True, timeout=300, env=dict(os.environ, KAFKA_CHAOS_STATE=str(state)))
    assert got.returncode == 2, (got.stdout, got.stderr)
    lines = got.stderr.strip().splitlines()
    assert lines and "command 'kafka-chaos-no-such-program' was not found" in lines[-1], got.stderr
    assert "Traceback" not in got.stderr
    # refused before a cluster: no process was started (no session directory), no run directory written
    assert not state.exists() and not (tmp_path / "runs").exists()
