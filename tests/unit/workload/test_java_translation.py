"""The Java translator: VerifiableConsumer JSON lines and Java consumer log lines -> our events.

``RECORDED`` is real stdout of ``VerifiableConsumer`` (kafka-tools 3.9.1) under the
log4j config :mod:`chaos.workload.clients.java` writes, captured from a member that
joined alone (generation 1), shared the group with a confluent-kafka member
(generation 2), got everything back (generation 3) and was stopped with SIGTERM
(first-generation ``record_data`` lines trimmed). The lost / failed-commit / fatal
error samples are built from the same Kafka log and message formats.
"""

from __future__ import annotations

import pytest

from chaos.history.event import Assigned, Commit, Consumed, ErrorEvent, Lost, Revoked
from chaos.history.reader import parse_line
from chaos.history.writer import EventWriter
from chaos.model.workload import ConsumerSpec
from chaos.workload.clients.java import Translator, check_spec, commit_error_name

MEMBER = "consumer-1-3935a12c-0459-4b4a-93f8-515b147332cd"
LOG = "@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerCoordinator [Consumer clientId=consumer-1, groupId=gl] "
INVOKER = "@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerRebalanceListenerInvoker [Consumer clientId=consumer-1, groupId=gl] "

RECORDED = r"""{"timestamp":1795305685544,"name":"startup_complete"}
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerCoordinator [Consumer clientId=consumer-1, groupId=gl] Discovered group coordinator 127.0.0.1:35187 (id: 2147483645 rack: null)
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerCoordinator [Consumer clientId=consumer-1, groupId=gl] (Re-)joining group
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerCoordinator [Consumer clientId=consumer-1, groupId=gl] Request joining group due to: need to re-join with the given member-id: consumer-1-3935a12c-0459-4b4a-93f8-515b147332cd
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerCoordinator [Consumer clientId=consumer-1, groupId=gl] (Re-)joining group
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerCoordinator [Consumer clientId=consumer-1, groupId=gl] Successfully joined group with generation Generation{generationId=1, memberId='consumer-1-3935a12c-0459-4b4a-93f8-515b147332cd', protocol='range'}
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerCoordinator [Consumer clientId=consumer-1, groupId=gl] Finished assignment for group at generation 1: {consumer-1-3935a12c-0459-4b4a-93f8-515b147332cd=Assignment(partitions=[tj-0, tj-1, tj-2, tj-3, tj-4, tj-5])}
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerCoordinator [Consumer clientId=consumer-1, groupId=gl] Successfully synced group in generation Generation{generationId=1, memberId='consumer-1-3935a12c-0459-4b4a-93f8-515b147332cd', protocol='range'}
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerCoordinator [Consumer clientId=consumer-1, groupId=gl] Notifying assignor about the new Assignment(partitions=[tj-0, tj-1, tj-2, tj-3, tj-4, tj-5])
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerRebalanceListenerInvoker [Consumer clientId=consumer-1, groupId=gl] Adding newly assigned partitions: tj-0, tj-1, tj-2, tj-3, tj-4, tj-5
{"timestamp":1795305685947,"name":"partitions_assigned","partitions":[{"topic":"tj","partition":0},{"topic":"tj","partition":1},{"topic":"tj","partition":2},{"topic":"tj","partition":3},{"topic":"tj","partition":4},{"topic":"tj","partition":5}]}
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerCoordinator [Consumer clientId=consumer-1, groupId=gl] Found no committed offset for partition tj-5
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerCoordinator [Consumer clientId=consumer-1, groupId=gl] Found no committed offset for partition tj-4
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerCoordinator [Consumer clientId=consumer-1, groupId=gl] Found no committed offset for partition tj-3
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerCoordinator [Consumer clientId=consumer-1, groupId=gl] Found no committed offset for partition tj-2
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerCoordinator [Consumer clientId=consumer-1, groupId=gl] Found no committed offset for partition tj-1
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerCoordinator [Consumer clientId=consumer-1, groupId=gl] Found no committed offset for partition tj-0
{"timestamp":1795305686150,"name":"records_consumed","count":120,"partitions":[{"topic":"tj","partition":5,"count":20,"minOffset":0,"maxOffset":19},{"topic":"tj","partition":4,"count":20,"minOffset":0,"maxOffset":19},{"topic":"tj","partition":3,"count":20,"minOffset":0,"maxOffset":19},{"topic":"tj","partition":2,"count":20,"minOffset":0,"maxOffset":19},{"topic":"tj","partition":1,"count":20,"minOffset":0,"maxOffset":19},{"topic":"tj","partition":0,"count":20,"minOffset":0,"maxOffset":19}]}
{"timestamp":1795305686224,"name":"offsets_committed","offsets":[{"topic":"tj","partition":5,"offset":20},{"topic":"tj","partition":4,"offset":20},{"topic":"tj","partition":3,"offset":20},{"topic":"tj","partition":2,"offset":20},{"topic":"tj","partition":1,"offset":20},{"topic":"tj","partition":0,"offset":20}],"success":true}
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerCoordinator [Consumer clientId=consumer-1, groupId=gl] Request joining group due to: group is already rebalancing
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerRebalanceListenerInvoker [Consumer clientId=consumer-1, groupId=gl] Revoke previously assigned partitions tj-0, tj-1, tj-2, tj-3, tj-4, tj-5
{"timestamp":1795305690958,"name":"partitions_revoked","partitions":[{"topic":"tj","partition":0},{"topic":"tj","partition":1},{"topic":"tj","partition":2},{"topic":"tj","partition":3},{"topic":"tj","partition":4},{"topic":"tj","partition":5}]}
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerCoordinator [Consumer clientId=consumer-1, groupId=gl] (Re-)joining group
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerCoordinator [Consumer clientId=consumer-1, groupId=gl] Successfully joined group with generation Generation{generationId=2, memberId='consumer-1-3935a12c-0459-4b4a-93f8-515b147332cd', protocol='range'}
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerCoordinator [Consumer clientId=consumer-1, groupId=gl] Finished assignment for group at generation 2: {consumer-1-3935a12c-0459-4b4a-93f8-515b147332cd=Assignment(partitions=[tj-0, tj-1, tj-2]), consumer-2-47107792-040a-410d-9240-79961221514b=Assignment(partitions=[tj-3, tj-4, tj-5])}
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerCoordinator [Consumer clientId=consumer-1, groupId=gl] Successfully synced group in generation Generation{generationId=2, memberId='consumer-1-3935a12c-0459-4b4a-93f8-515b147332cd', protocol='range'}
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerCoordinator [Consumer clientId=consumer-1, groupId=gl] Notifying assignor about the new Assignment(partitions=[tj-0, tj-1, tj-2])
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerRebalanceListenerInvoker [Consumer clientId=consumer-1, groupId=gl] Adding newly assigned partitions: tj-0, tj-1, tj-2
{"timestamp":1795305690974,"name":"partitions_assigned","partitions":[{"topic":"tj","partition":0},{"topic":"tj","partition":1},{"topic":"tj","partition":2}]}
{"timestamp":1795305710877,"name":"record_data","key":null,"value":"x","topic":"tj","partition":2,"offset":20}
{"timestamp":1795305710877,"name":"record_data","key":null,"value":"x","topic":"tj","partition":2,"offset":21}
{"timestamp":1795305710879,"name":"record_data","key":null,"value":"x","topic":"tj","partition":2,"offset":22}
{"timestamp":1795305710879,"name":"record_data","key":null,"value":"x","topic":"tj","partition":2,"offset":23}
{"timestamp":1795305710879,"name":"record_data","key":null,"value":"x","topic":"tj","partition":2,"offset":24}
{"timestamp":1795305710879,"name":"records_consumed","count":5,"partitions":[{"topic":"tj","partition":2,"count":5,"minOffset":20,"maxOffset":24}]}
{"timestamp":1795305710904,"name":"offsets_committed","offsets":[{"topic":"tj","partition":2,"offset":25}],"success":true}
{"timestamp":1795305710906,"name":"record_data","key":null,"value":"x","topic":"tj","partition":1,"offset":20}
{"timestamp":1795305710907,"name":"record_data","key":null,"value":"x","topic":"tj","partition":1,"offset":21}
{"timestamp":1795305710907,"name":"record_data","key":null,"value":"x","topic":"tj","partition":1,"offset":22}
{"timestamp":1795305710907,"name":"record_data","key":null,"value":"x","topic":"tj","partition":1,"offset":23}
{"timestamp":1795305710907,"name":"record_data","key":null,"value":"x","topic":"tj","partition":1,"offset":24}
{"timestamp":1795305710907,"name":"record_data","key":null,"value":"x","topic":"tj","partition":0,"offset":20}
{"timestamp":1795305710907,"name":"record_data","key":null,"value":"x","topic":"tj","partition":0,"offset":21}
{"timestamp":1795305710907,"name":"record_data","key":null,"value":"x","topic":"tj","partition":0,"offset":22}
{"timestamp":1795305710907,"name":"record_data","key":null,"value":"x","topic":"tj","partition":0,"offset":23}
{"timestamp":1795305710907,"name":"record_data","key":null,"value":"x","topic":"tj","partition":0,"offset":24}
{"timestamp":1795305710907,"name":"records_consumed","count":10,"partitions":[{"topic":"tj","partition":1,"count":5,"minOffset":20,"maxOffset":24},{"topic":"tj","partition":0,"count":5,"minOffset":20,"maxOffset":24}]}
{"timestamp":1795305710918,"name":"offsets_committed","offsets":[{"topic":"tj","partition":1,"offset":25},{"topic":"tj","partition":0,"offset":25}],"success":true}
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerCoordinator [Consumer clientId=consumer-1, groupId=gl] Request joining group due to: group is already rebalancing
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerRebalanceListenerInvoker [Consumer clientId=consumer-1, groupId=gl] Revoke previously assigned partitions tj-0, tj-1, tj-2
{"timestamp":1795305714012,"name":"partitions_revoked","partitions":[{"topic":"tj","partition":0},{"topic":"tj","partition":1},{"topic":"tj","partition":2}]}
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerCoordinator [Consumer clientId=consumer-1, groupId=gl] (Re-)joining group
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerCoordinator [Consumer clientId=consumer-1, groupId=gl] Successfully joined group with generation Generation{generationId=3, memberId='consumer-1-3935a12c-0459-4b4a-93f8-515b147332cd', protocol='range'}
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerCoordinator [Consumer clientId=consumer-1, groupId=gl] Finished assignment for group at generation 3: {consumer-1-3935a12c-0459-4b4a-93f8-515b147332cd=Assignment(partitions=[tj-0, tj-1, tj-2, tj-3, tj-4, tj-5])}
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerCoordinator [Consumer clientId=consumer-1, groupId=gl] Successfully synced group in generation Generation{generationId=3, memberId='consumer-1-3935a12c-0459-4b4a-93f8-515b147332cd', protocol='range'}
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerCoordinator [Consumer clientId=consumer-1, groupId=gl] Notifying assignor about the new Assignment(partitions=[tj-0, tj-1, tj-2, tj-3, tj-4, tj-5])
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerRebalanceListenerInvoker [Consumer clientId=consumer-1, groupId=gl] Adding newly assigned partitions: tj-0, tj-1, tj-2, tj-3, tj-4, tj-5
{"timestamp":1795305714021,"name":"partitions_assigned","partitions":[{"topic":"tj","partition":0},{"topic":"tj","partition":1},{"topic":"tj","partition":2},{"topic":"tj","partition":3},{"topic":"tj","partition":4},{"topic":"tj","partition":5}]}
{"timestamp":1795305596089,"name":"partitions_revoked","partitions":[{"topic":"tj","partition":0},{"topic":"tj","partition":1},{"topic":"tj","partition":2},{"topic":"tj","partition":3},{"topic":"tj","partition":4},{"topic":"tj","partition":5}]}
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerCoordinator [Consumer clientId=consumer-1, groupId=gl] Member consumer-1-3935a12c-0459-4b4a-93f8-515b147332cd sending LeaveGroup request to coordinator 127.0.0.1:35187 (id: 2147483645 rack: null) due to the consumer is being closed
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerCoordinator [Consumer clientId=consumer-1, groupId=gl] Resetting generation and member id due to: consumer pro-actively leaving the group
{"timestamp":1795305596461,"name":"shutdown_complete"}
"""


def translate(tmp_path, text: str, incremental: bool = False):
    writer = EventWriter(tmp_path / "consumer-1.jsonl", "consumer-1")
    t = Translator("gl", writer, incremental=incremental)
    for line in text.splitlines(keepends=True):
        t.feed(line)
    t.finish()
    writer.close()
    events = [parse_line(raw, f"line {i}") for i, raw in enumerate((tmp_path / "consumer-1.jsonl").read_bytes().splitlines(), 1)]
    return t, events


def of(events, cls):
    return [e for e in events if isinstance(e, cls)]


def test_recorded_run_carries_the_generation_of_each_rebalance(tmp_path):
    t, events = translate(tmp_path, RECORDED)
    assigned = of(events, Assigned)
    assert [(a.generation, [p for _, p in a.partitions]) for a in assigned] == [
        (1, [0, 1, 2, 3, 4, 5]), (2, [0, 1, 2]), (3, [0, 1, 2, 3, 4, 5])]
    assert {a.member_id for a in assigned} == {MEMBER}
    assert not any(a.incremental for a in assigned)
    # revocations happen in the generation being left (eager: before the JoinGroup)
    assert [r.generation for r in of(events, Revoked)] == [1, 2, 3]
    assert t.shutdown and t.generation is None and t.member_id is None  # LeaveGroup reset the generation


def test_recorded_consumed_offsets_come_from_record_data_or_the_summary(tmp_path):
    _, events = translate(tmp_path, RECORDED)
    consumed = of(events, Consumed)
    first = [c for c in consumed if c.generation == 1]
    assert sorted(c.partition for c in first) == [0, 1, 2, 3, 4, 5]
    assert all(c.offsets == tuple(range(20)) for c in first)  # min..max (record_data trimmed)
    second = {c.partition: c.offsets for c in consumed if c.generation == 2}
    assert second == {p: (20, 21, 22, 23, 24) for p in (0, 1, 2)}  # from record_data lines


def test_recorded_commits_are_ok_with_the_generation_they_were_sent_in(tmp_path):
    _, events = translate(tmp_path, RECORDED)
    commits = of(events, Commit)
    assert [c.generation for c in commits] == [1, 2, 2]
    assert all(c.outcome.value == "ok" and c.member_id == MEMBER and not c.auto for c in commits)
    assert commits[1].offsets == (("tj", 2, 25),)


SYNCED = LOG + "Successfully synced group in generation Generation{generationId=7, memberId='m-1', protocol='range'}\n"
ASSIGNED = '{"timestamp":1,"name":"partitions_assigned","partitions":[{"topic":"tj","partition":0},{"topic":"tj","partition":1}]}\n'
REVOKED = '{"timestamp":3,"name":"partitions_revoked","partitions":[{"topic":"tj","partition":0},{"topic":"tj","partition":1}]}\n'


def test_partitions_lost_reported_through_revoke_become_lost_in_the_old_generation(tmp_path):
    text = (SYNCED + ASSIGNED
            + LOG + "Resetting generation and member id due to: encountered UNKNOWN_MEMBER_ID from HEARTBEAT response\n"
            + INVOKER + "Lost previously assigned partitions tj-0, tj-1\n" + REVOKED)
    _, events = translate(tmp_path, text)
    lost = of(events, Lost)
    assert len(lost) == 1 and lost[0].generation == 7 and lost[0].member_id == "m-1"
    assert not of(events, Revoked)


def test_failed_commit_is_classified_from_the_java_message(tmp_path):
    consumed = '{"timestamp":2,"name":"records_consumed","count":1,"partitions":[{"topic":"tj","partition":0,"count":1,"minOffset":4,"maxOffset":4}]}\n'
    failed = ('{"timestamp":3,"name":"offsets_committed","offsets":[{"topic":"tj","partition":0,"offset":5}],'
              '"error":"Commit cannot be completed since the group has already rebalanced and assigned the partitions '
              'to another member.","success":false}\n')
    reset = LOG + "Resetting generation and member id due to: encountered ILLEGAL_GENERATION from OFFSET_COMMIT response\n"
    _, events = translate(tmp_path, SYNCED + ASSIGNED + consumed + reset + failed)
    (commit,) = of(events, Commit)
    assert commit.outcome.value == "fail" and commit.error_name == "CommitFailedException"
    assert commit.generation == 7  # the generation current when commitSync was called, not the reset one


def test_unknown_commit_error_text_is_unknown_and_fatal_errors_name_the_exception(tmp_path):
    odd = '{"timestamp":3,"name":"offsets_committed","offsets":[{"topic":"tj","partition":0,"offset":5}],"error":"something new","success":false}\n'
    fatal = ("@@log ERROR org.apache.kafka.tools.VerifiableConsumer Error during processing, terminating consumer process: \n"
             "org.apache.kafka.common.errors.FencedInstanceIdException: The broker rejected this static consumer since another consumer with the same group.instance.id has registered with a different member.id.\n"
             "\tat org.apache.kafka.clients.consumer.internals.ConsumerCoordinator.commitOffsetsSync(ConsumerCoordinator.java:1)\n")
    _, events = translate(tmp_path, SYNCED + odd + fatal)
    assert of(events, Commit)[0].outcome.value == "unknown"
    (err,) = of(events, ErrorEvent)
    assert err.fatal and err.error_name == "org.apache.kafka.common.errors.FencedInstanceIdException"


def test_cooperative_assignments_are_incremental(tmp_path):
    _, events = translate(tmp_path, SYNCED + ASSIGNED, incremental=True)
    assert of(events, Assigned)[0].incremental


def test_commit_messages_map_to_outcome_table_names():
    assert commit_error_name("Offset commit cannot be completed since the consumer is undergoing a rebalance for auto partition assignment.") == "RebalanceInProgressException"
    assert commit_error_name("Timeout of 60000ms expired before successfully committing offsets {tj-0=...}") == "TimeoutException"
    assert commit_error_name(None) is None


@pytest.mark.parametrize("bad", [{"commit_mode": "async"}, {"commit_mode": "auto"}, {"wrong_mode": "skip_records"},
                                 {"processing_delay_ms": 5}])
def test_what_verifiable_consumer_cannot_do_is_rejected(bad):
    with pytest.raises(ValueError, match="VerifiableConsumer"):
        check_spec(ConsumerSpec(client="java", **bad))


def test_events_are_stamped_when_the_jvm_made_them_not_when_read(tmp_path):
    """A worker frozen and resumed reads old lines: each event keeps the JVM's own timestamp, and a commit is
    stamped when sent (its batch's records_consumed) and answered when offsets_committed was made."""
    import orjson

    writer = EventWriter(tmp_path / "consumer-1.jsonl", "consumer-1")
    t = Translator("gl", writer, clock=lambda ms: ms * 1_000_000 - 5)
    for line in RECORDED.splitlines(keepends=True):
        t.feed(line)
    t.finish()
    writer.close()
    events = [parse_line(raw, "x") for raw in (tmp_path / "consumer-1.jsonl").read_bytes().splitlines()]
    json_lines = [orjson.loads(l) for l in RECORDED.splitlines() if l.startswith("{")]
    assigned_ms = [o["timestamp"] for o in json_lines if o["name"] == "partitions_assigned"]
    assert [a.mono_ns for a in of(events, Assigned)] == [ms * 1_000_000 - 5 for ms in assigned_ms]
    consumed_ms = [o["timestamp"] for o in json_lines if o["name"] == "records_consumed"]
    committed_ms = [o["timestamp"] for o in json_lines if o["name"] == "offsets_committed" and o.get("offsets")]
    commits = of(events, Commit)
    assert commits and len(commits) == len(committed_ms)
    for c, sent, answered in zip(commits, consumed_ms, committed_ms, strict=False):
        assert c.mono_ns == sent * 1_000_000 - 5 and c.answered_ns == answered * 1_000_000 - 5
        assert c.mono_ns <= c.answered_ns
