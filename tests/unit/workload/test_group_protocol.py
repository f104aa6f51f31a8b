# ruff: noqa: E501 - holds a recorded VerifiableConsumer output verbatim: Kafka's log lines run to ~220 characters
"""KIP-848 (``group_protocol: consumer``) members: what each client is given, and what it records.

Pure: the config / argv built from a ConsumerSpec, librdkafka's serialized group metadata taken from
real ``Consumer`` objects (no broker needed), and the Java translator fed a recorded output.

``RECORDED`` is real stdout of ``VerifiableConsumer`` (kafka-tools 4.3.1 on kafka-clients 4.4.0, log4j2
config of :mod:`chaos.workload.clients.java`, ``--group-protocol consumer --group-remote-assignor
uniform``) against a single KRaft node of Kafka 4.4.0 with ``consumer.session.timeout.ms=3000`` on the
group: the member joined alone (member epoch 2, six partitions), released t848-3..5 to a second member
(epoch 3), was frozen (SIGSTOP) for 8 s, found itself fenced (its commit in flight failed with
UNKNOWN_MEMBER_ID, its partitions lost), rejoined (epoch 5, t848-3..5) and was stopped with SIGTERM.
``record_data`` lines and most polls are trimmed. The coordinator's log of that run has the same epochs
("Member _gfyOvsBR9GTjluvby1vdA new assignment state: epoch=2 ... epoch=3 ... fenced from the group because
the member session expired ... epoch=5").
"""

from __future__ import annotations

import struct

import pytest
from confluent_kafka import Consumer, KafkaException

from chaos.history.event import Assigned, Commit, Consumed, Lost, Revoked
from chaos.history.reader import parse_line
from chaos.history.writer import EventWriter
from chaos.model.workload import ConsumerSpec, GroupProtocol
from chaos.workload.clients.confluent import consumer_config, member_view, parse_group_metadata
from chaos.workload.clients.java import (
    CLIENT_LOGGERS,
    LOG4J,
    LOG4J2,
    Translator,
    commit_error_name,
    consumer_properties,
    verifiable_consumer_args,
)
from chaos.workload.spec import WorkerConfig

MEMBER = "_gfyOvsBR9GTjluvby1vdA"
CLASSIC_ONLY = ("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy", "group.protocol.type")

RECORDED = r"""{"timestamp":1795437690283,"name":"startup_complete"}
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerMembershipManager [Consumer clientId=consumer-1, groupId=g848] Member _gfyOvsBR9GTjluvby1vdA with epoch 0 transitioned from UNSUBSCRIBED to JOINING.
@@log DEBUG org.apache.kafka.clients.consumer.internals.CommitRequestManager [Consumer clientId=consumer-1, groupId=g848] Member _gfyOvsBR9GTjluvby1vdA will include new member epoch Optional[2] in following offset commit/fetch requests.
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerMembershipManager [Consumer clientId=consumer-1, groupId=g848] Member _gfyOvsBR9GTjluvby1vdA with epoch 2 transitioned from JOINING to RECONCILING.
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerMembershipManager [Consumer clientId=consumer-1, groupId=g848] Reconciling assignment with local epoch 0
	Member:                                    _gfyOvsBR9GTjluvby1vdA
	Assigned partitions:                       [t848-0, t848-1, t848-2, t848-3, t848-4, t848-5]
	Current owned partitions:                  []
	Added partitions (assigned - owned):       [t848-0, t848-1, t848-2, t848-3, t848-4, t848-5]
	Revoked partitions (owned - assigned):     []

@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerRebalanceListenerInvoker [Consumer clientId=consumer-1, groupId=g848] Adding newly assigned partitions: [t848-0, t848-1, t848-2, t848-3, t848-4, t848-5]
{"timestamp":1795437690842,"name":"partitions_assigned","partitions":[{"topic":"t848","partition":0},{"topic":"t848","partition":1},{"topic":"t848","partition":2},{"topic":"t848","partition":3},{"topic":"t848","partition":4},{"topic":"t848","partition":5}]}
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerMembershipManager [Consumer clientId=consumer-1, groupId=g848] Member _gfyOvsBR9GTjluvby1vdA with epoch 2 transitioned from RECONCILING to ACKNOWLEDGING.
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerMembershipManager [Consumer clientId=consumer-1, groupId=g848] Member _gfyOvsBR9GTjluvby1vdA with epoch 2 transitioned from ACKNOWLEDGING to STABLE.
@@log DEBUG org.apache.kafka.clients.consumer.internals.CommitRequestManager [Consumer clientId=consumer-1, groupId=g848] Enqueuing offset fetch request for partitions: [t848-4, t848-5, t848-2, t848-3, t848-0, t848-1]
@@log INFO org.apache.kafka.clients.consumer.internals.CommitRequestManager [Consumer clientId=consumer-1, groupId=g848] Found no committed offset for partition t848-4
{"timestamp":1795437691050,"name":"records_consumed","count":50,"partitions":[{"topic":"t848","partition":0,"count":50,"minOffset":0,"maxOffset":49}]}
@@log DEBUG org.apache.kafka.clients.consumer.internals.CommitRequestManager [Consumer clientId=consumer-1, groupId=g848] Enqueuing OffsetCommit request for offsets: {t848-0=OffsetAndMetadata{offset=50, leaderEpoch=null, metadata=''}}
@@log DEBUG org.apache.kafka.clients.consumer.internals.CommitRequestManager [Consumer clientId=consumer-1, groupId=g848] OffsetCommit completed successfully for offset 50 partition t848-0
{"timestamp":1795437691072,"name":"offsets_committed","offsets":[{"topic":"t848","partition":0,"offset":50}],"success":true}
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerMembershipManager [Consumer clientId=consumer-1, groupId=g848] Member _gfyOvsBR9GTjluvby1vdA with epoch 2 transitioned from STABLE to RECONCILING.
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerMembershipManager [Consumer clientId=consumer-1, groupId=g848] Reconciling assignment with local epoch 1
	Member:                                    _gfyOvsBR9GTjluvby1vdA
	Assigned partitions:                       [t848-0, t848-1, t848-2]
	Current owned partitions:                  [t848-0, t848-1, t848-2, t848-3, t848-4, t848-5]
	Added partitions (assigned - owned):       []
	Revoked partitions (owned - assigned):     [t848-3, t848-4, t848-5]

@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerMembershipManager [Consumer clientId=consumer-1, groupId=g848] Revoking previously assigned partitions [t848-4, t848-5, t848-3]
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerRebalanceListenerInvoker [Consumer clientId=consumer-1, groupId=g848] Revoke previously assigned partitions [t848-3, t848-4, t848-5]
{"timestamp":1795437691990,"name":"partitions_revoked","partitions":[{"topic":"t848","partition":3},{"topic":"t848","partition":4},{"topic":"t848","partition":5}]}
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerRebalanceListenerInvoker [Consumer clientId=consumer-1, groupId=g848] Adding newly assigned partitions: []
{"timestamp":1795437692093,"name":"partitions_assigned","partitions":[]}
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerMembershipManager [Consumer clientId=consumer-1, groupId=g848] Member _gfyOvsBR9GTjluvby1vdA with epoch 2 transitioned from RECONCILING to ACKNOWLEDGING.
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerMembershipManager [Consumer clientId=consumer-1, groupId=g848] Member _gfyOvsBR9GTjluvby1vdA with epoch 2 transitioned from ACKNOWLEDGING to STABLE.
@@log DEBUG org.apache.kafka.clients.consumer.internals.CommitRequestManager [Consumer clientId=consumer-1, groupId=g848] Member _gfyOvsBR9GTjluvby1vdA will include new member epoch Optional[3] in following offset commit/fetch requests.
{"timestamp":1795437696719,"name":"records_consumed","count":50,"partitions":[{"topic":"t848","partition":0,"count":50,"minOffset":100,"maxOffset":149}]}
@@log DEBUG org.apache.kafka.clients.consumer.internals.CommitRequestManager [Consumer clientId=consumer-1, groupId=g848] Enqueuing OffsetCommit request for offsets: {t848-0=OffsetAndMetadata{offset=150, leaderEpoch=null, metadata=''}}
@@log DEBUG org.apache.kafka.clients.consumer.internals.CommitRequestManager [Consumer clientId=consumer-1, groupId=g848] OffsetCommit completed successfully for offset 150 partition t848-0
{"timestamp":1795437696726,"name":"offsets_committed","offsets":[{"topic":"t848","partition":0,"offset":150}],"success":true}
{"timestamp":1795437708729,"name":"records_consumed","count":50,"partitions":[{"topic":"t848","partition":0,"count":50,"minOffset":150,"maxOffset":199}]}
@@log DEBUG org.apache.kafka.clients.consumer.internals.CommitRequestManager [Consumer clientId=consumer-1, groupId=g848] Enqueuing OffsetCommit request for offsets: {t848-0=OffsetAndMetadata{offset=200, leaderEpoch=null, metadata=''}}
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerMembershipManager [Consumer clientId=consumer-1, groupId=g848] Member _gfyOvsBR9GTjluvby1vdA with epoch 3 transitioned from STABLE to FENCED.
@@log INFO org.apache.kafka.clients.consumer.internals.CommitRequestManager [Consumer clientId=consumer-1, groupId=g848] Member _gfyOvsBR9GTjluvby1vdA won't include epoch in following offset commit/fetch requests because it has left the group.
@@log ERROR org.apache.kafka.clients.consumer.internals.CommitRequestManager [Consumer clientId=consumer-1, groupId=g848] OffsetCommit failed with UNKNOWN_MEMBER_ID
{"timestamp":1795437708735,"name":"offsets_committed","offsets":[{"topic":"t848","partition":0,"offset":200}],"error":"OffsetCommit failed with unknown member ID. The coordinator is not aware of this member.","success":false}
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerRebalanceListenerInvoker [Consumer clientId=consumer-1, groupId=g848] Lost previously assigned partitions [t848-0, t848-1, t848-2]
{"timestamp":1795437708736,"name":"partitions_revoked","partitions":[{"topic":"t848","partition":0},{"topic":"t848","partition":1},{"topic":"t848","partition":2}]}
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerMembershipManager [Consumer clientId=consumer-1, groupId=g848] Member _gfyOvsBR9GTjluvby1vdA with epoch 0 transitioned from FENCED to JOINING.
@@log DEBUG org.apache.kafka.clients.consumer.internals.CommitRequestManager [Consumer clientId=consumer-1, groupId=g848] Member _gfyOvsBR9GTjluvby1vdA will include new member epoch Optional[5] in following offset commit/fetch requests.
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerMembershipManager [Consumer clientId=consumer-1, groupId=g848] Member _gfyOvsBR9GTjluvby1vdA with epoch 5 transitioned from JOINING to RECONCILING.
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerMembershipManager [Consumer clientId=consumer-1, groupId=g848] Reconciling assignment with local epoch 0
	Member:                                    _gfyOvsBR9GTjluvby1vdA
	Assigned partitions:                       []
	Current owned partitions:                  []
	Added partitions (assigned - owned):       []
	Revoked partitions (owned - assigned):     []

@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerRebalanceListenerInvoker [Consumer clientId=consumer-1, groupId=g848] Adding newly assigned partitions: []
{"timestamp":1795437708837,"name":"partitions_assigned","partitions":[]}
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerMembershipManager [Consumer clientId=consumer-1, groupId=g848] Member _gfyOvsBR9GTjluvby1vdA with epoch 5 transitioned from RECONCILING to ACKNOWLEDGING.
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerMembershipManager [Consumer clientId=consumer-1, groupId=g848] Member _gfyOvsBR9GTjluvby1vdA with epoch 5 transitioned from ACKNOWLEDGING to STABLE.
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerMembershipManager [Consumer clientId=consumer-1, groupId=g848] Member _gfyOvsBR9GTjluvby1vdA with epoch 5 transitioned from STABLE to RECONCILING.
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerMembershipManager [Consumer clientId=consumer-1, groupId=g848] Reconciling assignment with local epoch 1
	Member:                                    _gfyOvsBR9GTjluvby1vdA
	Assigned partitions:                       [t848-3, t848-4, t848-5]
	Current owned partitions:                  []
	Added partitions (assigned - owned):       [t848-3, t848-4, t848-5]
	Revoked partitions (owned - assigned):     []

@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerRebalanceListenerInvoker [Consumer clientId=consumer-1, groupId=g848] Adding newly assigned partitions: [t848-3, t848-4, t848-5]
{"timestamp":1795437709440,"name":"partitions_assigned","partitions":[{"topic":"t848","partition":3},{"topic":"t848","partition":4},{"topic":"t848","partition":5}]}
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerMembershipManager [Consumer clientId=consumer-1, groupId=g848] Member _gfyOvsBR9GTjluvby1vdA with epoch 5 transitioned from RECONCILING to ACKNOWLEDGING.
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerMembershipManager [Consumer clientId=consumer-1, groupId=g848] Member _gfyOvsBR9GTjluvby1vdA with epoch 5 transitioned from ACKNOWLEDGING to STABLE.
@@log DEBUG org.apache.kafka.clients.consumer.internals.CommitRequestManager [Consumer clientId=consumer-1, groupId=g848] Enqueuing offset fetch request for partitions: [t848-4, t848-5, t848-3]
{"timestamp":1795437718730,"name":"shutdown_requested"}
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerRebalanceListenerInvoker [Consumer clientId=consumer-1, groupId=g848] Revoke previously assigned partitions [t848-3, t848-4, t848-5]
{"timestamp":1795437718738,"name":"partitions_revoked","partitions":[{"topic":"t848","partition":3},{"topic":"t848","partition":4},{"topic":"t848","partition":5}]}
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerMembershipManager [Consumer clientId=consumer-1, groupId=g848] Member _gfyOvsBR9GTjluvby1vdA with epoch 5 transitioned from STABLE to PREPARE_LEAVING.
@@log INFO org.apache.kafka.clients.consumer.internals.CommitRequestManager [Consumer clientId=consumer-1, groupId=g848] Member _gfyOvsBR9GTjluvby1vdA won't include epoch in following offset commit/fetch requests because it has left the group.
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerMembershipManager [Consumer clientId=consumer-1, groupId=g848] Member _gfyOvsBR9GTjluvby1vdA with epoch -1 transitioned from PREPARE_LEAVING to LEAVING.
@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerMembershipManager [Consumer clientId=consumer-1, groupId=g848] Member _gfyOvsBR9GTjluvby1vdA with epoch -1 transitioned from LEAVING to UNSUBSCRIBED.
{"timestamp":1795437719124,"name":"shutdown_complete"}
"""


def worker(**spec) -> WorkerConfig:
    return WorkerConfig(role="consumer", name="consumer-1", run_id="r", run_dir="/nonexistent", bootstrap="127.0.0.1:1",
                        topic="t848", group="g848", consumer=ConsumerSpec(**spec))


KIP848 = {"group_protocol": "consumer", "remote_assignor": "uniform"}


# ------------------------------------------------------------------ confluent-kafka: configuration


def test_classic_member_gets_its_own_timeouts_and_assignor():
    conf = consumer_config(worker(assignor="cooperative-sticky", session_timeout_ms=6000, heartbeat_interval_ms=1000))
    assert conf["group.protocol"] == "classic"
    assert (conf["session.timeout.ms"], conf["heartbeat.interval.ms"]) == (6000, 1000)
    assert conf["partition.assignment.strategy"] == "cooperative-sticky"
    assert "group.remote.assignor" not in conf


def test_kip848_member_gets_the_protocol_and_remote_assignor_and_no_classic_only_setting():
    conf = consumer_config(worker(**KIP848, instance_id="i-1"))
    assert conf["group.protocol"] == "consumer" and conf["group.remote.assignor"] == "uniform"
    assert not set(CLASSIC_ONLY) & set(conf)
    assert conf["group.instance.id"] == "i-1"  # static membership exists under KIP-848 too
    # no remote assignor named: the broker's first group.consumer.assignors decides
    assert "group.remote.assignor" not in consumer_config(worker(group_protocol="consumer"))


def test_librdkafka_takes_the_kip848_config_and_refuses_each_classic_only_setting():
    conf = {**consumer_config(worker(**KIP848)), "log_level": 0}
    Consumer(conf).close()  # accepted as built
    for key, value in (("session.timeout.ms", 6000), ("heartbeat.interval.ms", 1000),
                       ("partition.assignment.strategy", "range"), ("group.protocol.type", "consumer")):
        with pytest.raises(KafkaException, match="not supported for `group.protocol=consumer`"):
            Consumer({**conf, key: value})


# ------------------------------------------------------------------ confluent-kafka: group metadata


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
@pytest.mark.parametrize("instance_id", [None, "static-1"])
def test_metadata_serialized_by_librdkafka_parses(protocol, instance_id):
    """Real metadata from a Consumer that never reached a broker: no generation yet (-1); under KIP-848 the
    client made its member id itself (KIP-1082), and consumer_group_metadata() carries it."""
    conf = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g848", "group.protocol": protocol, "log_level": 0}
    if instance_id:
        conf["group.instance.id"] = instance_id
    c = Consumer(conf)
    try:
        raw = c.consumer_group_metadata()
        generation, member = parse_group_metadata(raw)
        assert raw.startswith(b"CGMDv2:") and generation is None
        assert member == c.memberid()
        assert (member is not None) is (protocol == "consumer")
    finally:
        c.close()


def metadata(generation: int, member: str = MEMBER) -> bytes:
    # rd_kafka_consumer_group_metadata_write: magic, int32 generation (host order), group\\0, member\\0, is-null byte
    return b"CGMDv2:" + struct.pack("=i", generation) + b"g848\x00" + member.encode() + b"\x00\x01"


def test_the_member_epoch_is_the_generation_and_epoch_0_is_none():
    kip848 = ConsumerSpec(group_protocol="consumer")
    assert member_view(kip848, metadata(5)) == (5, MEMBER)
    assert member_view(kip848, metadata(0)) == (None, MEMBER)  # joining (or rejoining after a fence)
    assert member_view(kip848, metadata(-1)) == (None, MEMBER)
    assert member_view(ConsumerSpec(), metadata(0)) == (0, MEMBER)  # classic: passed through as librdkafka has it


def test_kip848_members_are_incremental():
    assert ConsumerSpec(group_protocol="consumer").protocol.value == "cooperative"


# ------------------------------------------------------------------ Java: command line


def test_classic_java_member_keeps_its_assignor_and_timeouts(tmp_path):
    cfg = worker(client="java", session_timeout_ms=6000, heartbeat_interval_ms=1000)
    argv = verifiable_consumer_args(cfg, (3, 9), tmp_path / "p")
    assert argv[argv.index("--session-timeout") + 1] == "6000"
    assert "--assignment-strategy" in argv and "--group-protocol" not in argv
    assert argv[argv.index("--consumer.config") + 1] == str(tmp_path / "p")
    assert "heartbeat.interval.ms=1000" in consumer_properties(cfg)


def test_kip848_java_member_passes_protocol_and_remote_assignor_only(tmp_path):
    cfg = worker(client="java", **KIP848)
    argv = verifiable_consumer_args(cfg, (4, 3), tmp_path / "p")
    assert argv[argv.index("--group-protocol") + 1] == "consumer"
    assert argv[argv.index("--group-remote-assignor") + 1] == "uniform"
    assert "--session-timeout" not in argv and "--assignment-strategy" not in argv
    assert "--command-config" in argv and "--consumer.config" not in argv  # KIP-1147, tools 4.2+
    assert not any(line.startswith("heartbeat.interval.ms") for line in consumer_properties(cfg))
    assert "--group-remote-assignor" not in verifiable_consumer_args(worker(client="java", group_protocol="consumer"),
                                                                     (4, 3), tmp_path / "p")


def test_kip848_needs_a_verifiable_consumer_that_has_the_flag(tmp_path):
    with pytest.raises(ValueError, match="3.7"):
        verifiable_consumer_args(worker(client="java", group_protocol="consumer"), (3, 6), tmp_path / "p")


def test_both_logging_backends_route_the_kip848_loggers_to_stdout():
    for logger, level in CLIENT_LOGGERS.items():
        assert f"log4j.logger.{logger}={level}" in LOG4J
        assert f"name = {logger}" in LOG4J2
    # each line carries the JVM's time of logging (the Translator stamps errors with it, issue 18)
    pattern = "@@log %d{yyyy-MM-dd'T'HH:mm:ss.SSSZ} %p %c %m%n"
    assert "CommitRequestManager" in LOG4J2 and "SYSTEM_OUT" in LOG4J2 and pattern in LOG4J2 and pattern in LOG4J


# ------------------------------------------------------------------ Java: translation


def translate(tmp_path, text: str):
    writer = EventWriter(tmp_path / "consumer-1.jsonl", "consumer-1")
    t = Translator("g848", writer, incremental=True)
    for line in text.splitlines(keepends=True):
        t.feed(line)
    t.finish()
    writer.close()
    raw = (tmp_path / "consumer-1.jsonl").read_bytes().splitlines()
    return t, [parse_line(line, f"line {i}") for i, line in enumerate(raw, 1)]


def of(events, cls):
    return [e for e in events if isinstance(e, cls)]


def test_recorded_kip848_member_carries_its_member_epochs(tmp_path):
    t, events = translate(tmp_path, RECORDED)
    assert [(a.generation, [p for _, p in a.partitions]) for a in of(events, Assigned)] == [
        (2, [0, 1, 2, 3, 4, 5]), (2, []), (5, []), (5, [3, 4, 5])]
    # the revocation that lets the second member in happens in the epoch being left, as the coordinator logged
    assert [(r.generation, [p for _, p in r.partitions]) for r in of(events, Revoked)] == [(2, [3, 4, 5]), (5, [3, 4, 5])]
    assert all(e.member_id == MEMBER and e.incremental for e in of(events, Assigned) + of(events, Revoked))
    assert t.shutdown and t.generation is None  # left the group: no epoch any more


def test_recorded_fenced_member_loses_its_partitions_in_its_last_epoch_and_its_commit_fails(tmp_path):
    _, events = translate(tmp_path, RECORDED)
    (lost,) = of(events, Lost)
    assert (lost.generation, lost.member_id, [p for _, p in lost.partitions]) == (3, MEMBER, [0, 1, 2])
    commits = of(events, Commit)
    assert [(c.generation, c.outcome.value) for c in commits] == [(2, "ok"), (3, "ok"), (3, "fail")]
    assert commits[-1].error_name == "CommitFailedException" and commits[-1].offsets == (("t848", 0, 200),)
    assert {c.generation for c in of(events, Consumed)} == {2, 3}


def test_clients_without_the_debug_epoch_line_give_it_in_state_transitions(tmp_path):
    """Older kafka-clients (the 3.9/4.0-era sources) have no DEBUG epoch line; their INFO lines still carry it."""
    log = "@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerMembershipManager [Consumer clientId=c, groupId=g848] "
    commits = "@@log INFO org.apache.kafka.clients.consumer.internals.CommitRequestManager [Consumer clientId=c, groupId=g848] "
    assigned = '{"timestamp":1,"name":"partitions_assigned","partitions":[{"topic":"t848","partition":0}]}\n'
    revoked = '{"timestamp":2,"name":"partitions_revoked","partitions":[{"topic":"t848","partition":0}]}\n'
    text = (log + "Member m-1 with epoch 0 transitioned from UNSUBSCRIBED to JOINING.\n"
            + log + "Member m-1 with epoch 7 transitioned from JOINING to RECONCILING.\n" + assigned
            + log + "Member m-1 with epoch 7 transitioned from STABLE to FENCED.\n"
            + commits + "Member m-1 won't include member id and epoch in following offset commit/fetch requests because it has left the group.\n"
            + "@@log INFO org.apache.kafka.clients.consumer.internals.ConsumerRebalanceListenerInvoker [Consumer clientId=c, groupId=g848] Lost previously assigned partitions t848-0\n"
            + revoked)
    _, events = translate(tmp_path, text)
    assert [(a.generation, a.member_id) for a in of(events, Assigned)] == [(7, "m-1")]
    assert [(lost.generation, lost.member_id) for lost in of(events, Lost)] == [(7, "m-1")]


def test_kip848_commit_failures_are_named_for_the_outcome_table():
    assert commit_error_name("OffsetCommit failed with stale member epoch.The member epoch is stale. The member must "
                             "retry after receiving its updated member epoch via the ConsumerGroupHeartbeat API.") == "CommitFailedException"
    assert commit_error_name("OffsetCommit failed with unknown member ID. The coordinator is not aware of this member.") == "CommitFailedException"
    assert commit_error_name("The member epoch is fenced by the group coordinator. The member must abandon all its "
                             "partitions and rejoin.") == "FencedMemberEpochException"


def test_group_protocol_enum_values_are_the_client_settings():
    # both clients take these words verbatim (librdkafka group.protocol, VerifiableConsumer --group-protocol)
    assert [p.value for p in GroupProtocol] == ["classic", "consumer"]


def test_metadata_refresh_reaches_every_client_only_when_asked():
    """partitions-added needs members that notice a grown topic within the chaos phase."""
    from chaos.workload.clients.java import consumer_properties

    assert "topic.metadata.refresh.interval.ms" not in consumer_config(worker())
    assert consumer_config(worker(metadata_max_age_ms=2000))["topic.metadata.refresh.interval.ms"] == 2000
    assert "metadata.max.age.ms=2000" in consumer_properties(worker(client="java", metadata_max_age_ms=2000))
    assert not any(l.startswith("metadata.max.age.ms") for l in consumer_properties(worker(client="java")))


def test_request_timeout_reaches_every_client_only_when_asked():
    """An rpc fault's lost answer holds a member for its client's request timeout: an experiment can lower it."""
    from chaos.workload.clients.java import consumer_properties

    assert "socket.timeout.ms" not in consumer_config(worker())
    assert consumer_config(worker(request_timeout_ms=5000))["socket.timeout.ms"] == 5000
    assert "request.timeout.ms=5000" in consumer_properties(worker(client="java", request_timeout_ms=5000))
    assert not any(l.startswith("request.timeout.ms") for l in consumer_properties(worker(client="java")))
