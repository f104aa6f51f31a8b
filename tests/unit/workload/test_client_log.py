"""A member's client log in the run directory (issue 18, item 3): bounded, line-numbered, linked from errors."""

from __future__ import annotations

import logging
import re
import subprocess
import sys

from chaos.history.event import ErrorEvent
from chaos.history.reader import parse_line
from chaos.history.writer import EventWriter
from chaos.model.workload import ConsumerSpec
from chaos.workload.clients.client_log import ClientLog, client_log_path
from chaos.workload.clients.confluent import client_log_line
from chaos.workload.consumer import Member
from chaos.workload.spec import WorkerConfig


def test_lines_are_numbered_and_referenced_relative_to_the_run_dir(tmp_path):
    log = ClientLog(tmp_path, "consumer-0")
    assert log.ref() is None
    assert log.write("first") == 1 and log.write("second\n") == 2
    assert log.ref() == "workers/consumer-0.client.log:2" and log.ref(1) == "workers/consumer-0.client.log:1"
    log.close()
    assert client_log_path(tmp_path, "consumer-0").read_text() == "first\nsecond\n"


def test_the_log_is_capped_not_rotated_so_references_stay_valid(tmp_path):
    log = ClientLog(tmp_path, "consumer-0", max_bytes=100)
    numbers = [log.write("x" * 29) for _ in range(5)]  # 30 bytes a line: three fit
    assert numbers == [1, 2, 3, None, None]
    log.close()
    lines = client_log_path(tmp_path, "consumer-0").read_text().splitlines()
    assert lines[:3] == ["x" * 29] * 3
    assert "capped at 100 bytes" in lines[3] and "2 line(s) dropped" in lines[4]


def test_logging_records_are_written_with_their_utc_time_level_and_logger(tmp_path):
    log = ClientLog(tmp_path, "consumer-0")
    logger = logging.getLogger("test.client-log")
    logger.propagate = False
    logger.addHandler(log.handler())
    logger.setLevel(logging.DEBUG)
    logger.debug("Sending JoinGroup %s", "(v5)")
    log.close()
    (line,) = client_log_path(tmp_path, "consumer-0").read_text().splitlines()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+0000 DEBUG test.client-log Sending JoinGroup \(v5\)",
                        line), line


def test_a_line_librdkafka_prints_is_written_in_the_client_log_format_with_its_own_time():
    printed = '%7|1795973377.103|JOINGROUP|consumer-0#consumer-1| [thrd:main]: JoinGroup response: GenerationId 3'
    assert client_log_line(printed, "librdkafka.consumer-0") == (
        "2026-11-29T17:29:37.103+0000 DEBUG librdkafka.consumer-0 JOINGROUP [consumer-0#consumer-1] "
        "[thrd:main]: JoinGroup response: GenerationId 3")
    assert client_log_line("%3|1795973377.004|FAIL|c#consumer-1| [thrd:x]: down", "l").split()[1] == "ERROR"
    # anything else on fd 2 (Python's last words) is kept as printed
    assert client_log_line("Fatal Python error: Aborted", "l") == "Fatal Python error: Aborted"


#: a member that never polls: librdkafka's lines must reach the client log all the same
NOT_POLLING = """
import sys, time
from confluent_kafka import Consumer
from chaos.workload.clients.client_log import ClientLog, client_log_path
from chaos.workload.clients.confluent import DEBUG_CONTEXTS, debug_config

run_dir = sys.argv[1]
log = ClientLog(run_dir, "consumer-0")
conf = debug_config("consumer-0", log)
assert conf == {"debug": DEBUG_CONTEXTS, "log_level": 7}, conf
c = Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "client.id": "consumer-0", **conf})
c.subscribe(["t"])
print("python's own stderr", file=sys.stderr, flush=True)
time.sleep(1.5)
print(client_log_path(run_dir, "consumer-0").read_text().count("\\n"), flush=True)
log.close()
"""


def test_librdkafka_lines_reach_the_client_log_while_the_member_does_not_poll(tmp_path):
    """confluent-kafka serves a ``logger``'s lines only in ``poll``; printed on stderr and captured, librdkafka's
    lines arrive from its own threads (the member here never polls, as one blocked in ``commit()``)."""
    res = subprocess.run([sys.executable, "-c", NOT_POLLING, str(tmp_path)], capture_output=True, text=True,
                         timeout=60, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert int(res.stdout.strip()) > 0, "no line reached the client log before the member polled (it never did)"
    text = client_log_path(tmp_path, "consumer-0").read_text()
    assert re.search(r"^\S+\+0000 DEBUG librdkafka\.consumer-0 CGRPSTATE \[consumer-0#consumer-1\] \[thrd:main\]: ",
                     text, flags=re.MULTILINE), text[:2000]
    assert "python's own stderr" in res.stderr and "python's own stderr" not in text


def test_a_member_error_links_the_client_log_line_it_follows(tmp_path):
    cfg = WorkerConfig(role="consumer", name="consumer-0", run_id="r", run_dir=str(tmp_path), bootstrap="x:1",
                       topic="t", group="g", consumer=ConsumerSpec())
    log = ClientLog(tmp_path, "consumer-0")
    events = EventWriter.for_run(tmp_path, "consumer-0")
    member = Member(cfg, client=None, events=events, log=log)  # type: ignore[arg-type] - error() needs no client
    log.write("HEARTBEAT [rdkafka#consumer-1] Heartbeat failed: UNKNOWN_MEMBER_ID")
    member.error("Broker: Unknown member", 25, "UNKNOWN_MEMBER_ID", False)
    events.close()
    log.close()
    (err,) = [parse_line(raw, "x") for raw in (tmp_path / "events" / "consumer-0.jsonl").read_bytes().splitlines()]
    assert type(err) is ErrorEvent and err.log_ref == "workers/consumer-0.client.log:1"
