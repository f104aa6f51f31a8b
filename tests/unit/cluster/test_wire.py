"""chaos.cluster.wire without a cluster: frames built and read with kio's own writers and readers.

The socket tests talk to a scripted peer on 127.0.0.1 that answers with frames kio wrote; what Kafka
itself answers is checked on a real KRaft node (see the module docstring of chaos.cluster.wire and
the lead's integration test).
"""

from __future__ import annotations

import datetime
import io
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable

import pytest
from kio.index import load_request_schema
from kio.schema.api_versions.v0 import response as av0
from kio.schema.api_versions.v3 import response as av3
from kio.schema.api_versions.v4 import response as av4
from kio.schema.consumer_group_describe.v1 import response as cgd1
from kio.schema.describe_quorum.v0 import response as dq0
from kio.schema.describe_quorum.v2 import response as dq2
from kio.schema.errors import ErrorCode
from kio.schema.index import schema_name_map
from kio.schema.types import BrokerId, GroupId, TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64, u16

from chaos.cluster import wire
from chaos.errors import InfrastructureError, UsageError

ADDRESS = "127.0.0.1:9093"
NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))


def frame(response: object, correlation_id: int) -> bytes:
    """A response frame as a node sends it: INT32 size, the message's response header, the body."""
    header_type = type(response).__header_schema__  # type: ignore[attr-defined]
    with io.BytesIO() as buf:
        entity_writer(header_type)(buf, header_type(correlation_id=i32(correlation_id)))
        entity_writer(type(response))(buf, response)
        body = buf.getvalue()
    return struct.pack(">i", len(body)) + body


def body(response: object, correlation_id: int) -> bytes:
    return frame(response, correlation_id)[4:]


def replica2(replica_id: int, leo: int) -> dq2.ReplicaState:
    return dq2.ReplicaState(replica_id=BrokerId(replica_id), replica_directory_id=uuid.uuid4(), log_end_offset=i64(leo))


def quorum_response(partition_error: ErrorCode = ErrorCode.none, top_error: ErrorCode = ErrorCode.none,
                    topic: str = "__cluster_metadata") -> dq2.DescribeQuorumResponse:
    partition = dq2.PartitionData(
        partition_index=i32(0), error_code=partition_error, error_message=None, leader_id=BrokerId(2),
        leader_epoch=i32(7), high_watermark=i64(120),
        current_voters=(replica2(3, 118), replica2(2, 120), replica2(1, -1)), observers=(replica2(4, 119),))
    return dq2.DescribeQuorumResponse(
        error_code=top_error, error_message=None,
        topics=(dq2.TopicData(topic_name=TopicName(topic), partitions=(partition,)),),
        nodes=(dq2.Node(node_id=BrokerId(2), listeners=(dq2.Listener(name="CONTROLLER", host="127.0.0.1",
                                                                     port=u16(9093)),)),))


def assignment(*pairs: tuple[str, int]) -> cgd1.Assignment:
    topics = sorted({t for t, _ in pairs})
    return cgd1.Assignment(topic_partitions=tuple(
        cgd1.TopicPartitions(topic_id=uuid.uuid4(), topic_name=TopicName(t),
                             partitions=tuple(i32(p) for tt, p in pairs if tt == t)) for t in topics))


def member(member_id: str, epoch: int, owned: tuple[tuple[str, int], ...],
           target: tuple[tuple[str, int], ...]) -> cgd1.Member:
    return cgd1.Member(member_id=member_id, instance_id=None, rack_id=None, member_epoch=i32(epoch),
                       client_id=f"client-{member_id}", client_host="/127.0.0.1", subscribed_topic_names=(TopicName("t"),),
                       assignment=assignment(*owned), target_assignment=assignment(*target), member_type=i8(1))


def group_response(error: ErrorCode = ErrorCode.none, group: str = "g") -> cgd1.ConsumerGroupDescribeResponse:
    members = () if error else (
        member("m-b", 5, owned=(("t", 2), ("t", 3)), target=(("t", 2), ("t", 3))),
        member("m-a", 4, owned=(("t", 1), ("t", 0)), target=(("t", 0),)),
    )
    described = cgd1.DescribedGroup(
        error_code=error, group_id=GroupId(group), group_state="" if error else "Reconciling",
        group_epoch=i32(-1 if error else 5), assignment_epoch=i32(-1 if error else 5),
        assignor_name="" if error else "uniform", members=members)
    return cgd1.ConsumerGroupDescribeResponse(throttle_time=NO_THROTTLE, groups=(described,))


# ------------------------------------------------------------------------------------------ versions


@pytest.mark.parametrize("name, table", [("api_versions", wire.API_VERSIONS_TYPES),
                                         ("describe_quorum", wire.DESCRIBE_QUORUM_TYPES),
                                         ("consumer_group_describe", wire.CONSUMER_GROUP_DESCRIBE_TYPES),
                                         ("share_group_describe", wire.SHARE_GROUP_DESCRIBE_TYPES),
                                         ("describe_share_group_offsets", wire.DESCRIBE_SHARE_GROUP_OFFSETS_TYPES)])
def test_version_tables_cover_every_version_kio_has(name, table):
    """A kio upgrade with a new version fails here until the new version's fields are read in wire.py."""
    assert sorted(table) == sorted(schema_name_map[name])
    assert all(t.__version__ == v for v, t in table.items())


def test_choose_version_takes_the_highest_common_one():
    ours = wire.DESCRIBE_QUORUM_TYPES
    assert wire.choose_version(ADDRESS, 55, "DescribeQuorum", {55: (0, 2)}, ours) == 2
    assert wire.choose_version(ADDRESS, 55, "DescribeQuorum", {55: (0, 7)}, ours) == 2
    assert wire.choose_version(ADDRESS, 55, "DescribeQuorum", {55: (0, 1)}, ours) == 1
    with pytest.raises(wire.WireError, match=r"^127.0.0.1:9093: DescribeQuorum versions 3-4 on the node, 0-2 here"):
        wire.choose_version(ADDRESS, 55, "DescribeQuorum", {55: (3, 4)}, ours)
    with pytest.raises(wire.WireError, match="does not answer ConsumerGroupDescribe \\(API key 69\\)"):
        wire.choose_version(ADDRESS, 69, "ConsumerGroupDescribe", {18: (0, 4)}, wire.CONSUMER_GROUP_DESCRIBE_TYPES)


# ----------------------------------------------------------------------------------------- requests


def read_request(data: bytes) -> tuple[object, object]:
    """Parse a request frame the way a node does: size, then header and body by (api key, version)."""
    (size,) = struct.unpack_from(">i", data, 0)
    assert size == len(data) - 4
    api_key, version = struct.unpack_from(">hh", data, 4)
    request_type = load_request_schema(api_key, version)
    header, n = entity_reader(request_type.__header_schema__)(data, 4)
    request, m = entity_reader(request_type)(data, 4 + n)
    assert 4 + n + m == len(data)
    return header, request


@pytest.mark.parametrize("version", sorted(wire.DESCRIBE_QUORUM_TYPES))
def test_describe_quorum_request_round_trips(version):
    request = wire.describe_quorum_request(version)
    header, decoded = read_request(wire.encode_request(request, correlation_id=41))
    assert decoded == request
    assert (header.request_api_key, header.request_api_version, header.correlation_id) == (55, version, 41)
    assert header.client_id == wire.CLIENT_ID
    assert type(header).__version__ == 2  # flexible at every version: request header v2 (KIP-482)
    assert [(t.topic_name, [p.partition_index for p in t.partitions]) for t in decoded.topics] == \
        [("__cluster_metadata", [0])]


@pytest.mark.parametrize("version", sorted(wire.CONSUMER_GROUP_DESCRIBE_TYPES))
def test_consumer_group_describe_request_round_trips(version):
    request = wire.consumer_group_describe_request(version, "orders")
    header, decoded = read_request(wire.encode_request(request, correlation_id=3))
    assert decoded == request
    assert (header.request_api_key, header.request_api_version, type(header).__version__) == (69, version, 2)
    assert decoded.group_ids == ("orders",) and decoded.include_authorized_operations is False


@pytest.mark.parametrize("version", sorted(wire.DESCRIBE_SHARE_GROUP_OFFSETS_TYPES))
def test_describe_share_group_offsets_request_round_trips(version):
    request = wire.describe_share_group_offsets_request(version, "queue", "orders", (0, 1, 2))
    header, decoded = read_request(wire.encode_request(request, correlation_id=9))
    assert decoded == request
    assert (header.request_api_key, header.request_api_version) == (90, version)
    (group,) = decoded.groups
    assert group.group_id == "queue"
    assert [(t.topic_name, list(t.partitions)) for t in group.topics] == [("orders", [0, 1, 2])]


@pytest.mark.parametrize("version, header_version", [(0, 1), (1, 1), (2, 1), (3, 2), (4, 2)])
def test_api_versions_request_uses_the_header_its_version_names(version, header_version):
    header, decoded = read_request(wire.encode_request(wire.api_versions_request(version), correlation_id=1))
    assert (header.request_api_key, header.request_api_version, type(header).__version__) == (18, version,
                                                                                              header_version)
    if version >= 3:
        assert decoded.client_software_name == "kafka-chaos"


# ---------------------------------------------------------------------------------------- responses


def test_describe_quorum_answer_reduces_to_the_leader_and_replicas():
    response = wire.decode_response(ADDRESS, body(quorum_response(), 9), dq2.DescribeQuorumResponse, 9)
    assert wire.quorum_view(ADDRESS, response) == wire.QuorumView(
        leader_id=2, leader_epoch=7, high_watermark=120, voters=((1, -1), (2, 120), (3, 118)),
        observers=((4, 119),), error_code=0)


def test_describe_quorum_v0_answer_decodes():
    old = dq0.DescribeQuorumResponse(error_code=ErrorCode.none, topics=(dq0.TopicData(
        topic_name=TopicName("__cluster_metadata"), partitions=(dq0.PartitionData(
            partition_index=i32(0), error_code=ErrorCode.none, leader_id=BrokerId(1), leader_epoch=i32(1),
            high_watermark=i64(5), current_voters=(dq0.ReplicaState(replica_id=BrokerId(1), log_end_offset=i64(5)),),
            observers=()),)),))
    view = wire.quorum_view(ADDRESS, wire.decode_response(ADDRESS, body(old, 1), dq0.DescribeQuorumResponse, 1))
    assert (view.leader_id, view.voters, view.observers) == (1, ((1, 5),), ())


@pytest.mark.parametrize("partition_error, top_error, code", [
    (ErrorCode.not_leader_or_follower, ErrorCode.none, 6),
    (ErrorCode.unknown_topic_or_partition, ErrorCode.none, 3),
    (ErrorCode.none, ErrorCode.cluster_authorization_failed, 31),
])
def test_describe_quorum_errors_come_back_without_a_leader(partition_error, top_error, code):
    response = wire.decode_response(ADDRESS, body(quorum_response(partition_error, top_error), 2),
                                    dq2.DescribeQuorumResponse, 2)
    assert wire.quorum_view(ADDRESS, response) == wire.QuorumView(
        leader_id=-1, leader_epoch=-1, high_watermark=-1, voters=(), observers=(), error_code=code)


def test_describe_quorum_answer_without_the_metadata_partition_is_a_wire_error():
    response = wire.decode_response(ADDRESS, body(quorum_response(topic="other"), 2), dq2.DescribeQuorumResponse, 2)
    with pytest.raises(wire.WireError, match="has no __cluster_metadata partition 0"):
        wire.quorum_view(ADDRESS, response)


def test_consumer_group_answer_reduces_to_epochs_and_sorted_assignments():
    response = wire.decode_response(ADDRESS, body(group_response(), 5), cgd1.ConsumerGroupDescribeResponse, 5)
    view = wire.group_view(ADDRESS, "g", response)
    assert (view.group_id, view.state, view.group_epoch, view.assignment_epoch, view.assignor, view.error_code) == \
        ("g", "Reconciling", 5, 5, "uniform", 0)
    assert view.members == (
        wire.MemberView(member_id="m-a", instance_id=None, member_epoch=4, client_id="client-m-a",
                        assignment=(("t", 0), ("t", 1)), target_assignment=(("t", 0),), member_type=1,
                        subscribed_topics=("t",)),
        wire.MemberView(member_id="m-b", instance_id=None, member_epoch=5, client_id="client-m-b",
                        assignment=(("t", 2), ("t", 3)), target_assignment=(("t", 2), ("t", 3)), member_type=1,
                        subscribed_topics=("t",)),
    )


@pytest.mark.parametrize("error, code", [(ErrorCode.group_id_not_found, 69), (ErrorCode.not_coordinator, 16),
                                         (ErrorCode.coordinator_load_in_progress, 14)])
def test_consumer_group_errors_are_returned_not_raised(error, code):
    response = wire.decode_response(ADDRESS, body(group_response(error), 5), cgd1.ConsumerGroupDescribeResponse, 5)
    assert wire.group_view(ADDRESS, "g", response) == wire.ConsumerGroupView(
        group_id="g", state="", group_epoch=-1, assignment_epoch=-1, assignor="", members=(), error_code=code)


def test_consumer_group_answer_about_another_group_is_a_wire_error():
    response = wire.decode_response(ADDRESS, body(group_response(group="h"), 5), cgd1.ConsumerGroupDescribeResponse, 5)
    with pytest.raises(wire.WireError, match="does not mention group 'g'"):
        wire.group_view(ADDRESS, "g", response)


def one_line_wire_error(fn: Callable[[], object]) -> str:
    with pytest.raises(wire.WireError) as err:
        fn()
    text = str(err.value)
    assert "\n" not in text and text.startswith("127.0.0.1:")
    return text


@pytest.mark.parametrize("response_type, response", [
    (dq2.DescribeQuorumResponse, quorum_response()),
    (cgd1.ConsumerGroupDescribeResponse, group_response()),
])
def test_every_truncation_of_an_answer_is_one_line_wire_error(response_type, response):
    data = body(response, 8)
    for cut in range(len(data)):
        one_line_wire_error(lambda cut=cut: wire.decode_response(ADDRESS, data[:cut], response_type, 8))


def test_trailing_bytes_wrong_correlation_id_and_unknown_error_codes_are_wire_errors():
    data = body(quorum_response(), 8)
    assert "1 bytes after the message" in one_line_wire_error(
        lambda: wire.decode_response(ADDRESS, data + b"\0", dq2.DescribeQuorumResponse, 8))
    assert "correlation id 8, expected 9" in one_line_wire_error(
        lambda: wire.decode_response(ADDRESS, data, dq2.DescribeQuorumResponse, 9))
    # the top-level ErrorCode is the first body field, after the 4-byte id and 1-byte tag count of header v1
    unknown = data[:5] + struct.pack(">h", 999) + data[7:]
    assert "999 is not a valid ErrorCode" in one_line_wire_error(
        lambda: wire.decode_response(ADDRESS, unknown, dq2.DescribeQuorumResponse, 8))


def test_bad_arguments_are_usage_errors():
    for address in ("localhost", "127.0.0.1:", ":9092", "127.0.0.1:99999", "127.0.0.1:x"):
        with pytest.raises(UsageError, match="give host:port"):
            wire.describe_quorum(address)
    with pytest.raises(UsageError, match="positive number of seconds"):
        wire.describe_quorum(ADDRESS, timeout_s=0)
    with pytest.raises(UsageError, match="non-empty consumer group id"):
        wire.describe_consumer_group(ADDRESS, "")
    assert issubclass(wire.WireError, InfrastructureError)


# ------------------------------------------------------------------------------- over a socket


class CloseAfter(bytes):
    """An answer after which the scripted node closes the connection."""


Handler = Callable[[int, int, int], bytes | None]


class ScriptedNode:
    """A loopback listener answering each request frame with ``handler(api_key, version, correlation_id)``.

    ``None`` closes the connection, :class:`CloseAfter` sends then closes; b"" answers nothing (the
    client must time out). Bounded: every accept and read has a timeout and the thread stops with the test.
    """

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[tuple[int, int]] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(0.2)
                self._session(conn)

    def _session(self, conn: socket.socket) -> None:
        while not self.stop.is_set():
            try:
                head = conn.recv(4, socket.MSG_WAITALL)
                if len(head) < 4:
                    return
                data = conn.recv(struct.unpack(">i", head)[0], socket.MSG_WAITALL)
            except TimeoutError:
                continue
            api_key, version, correlation_id = struct.unpack_from(">hhi", data, 0)
            self.requests.append((api_key, version))
            answer = self.handler(api_key, version, correlation_id)
            if answer is None:
                return
            conn.sendall(answer)
            if isinstance(answer, CloseAfter):
                return

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.listener.close()


@pytest.fixture
def scripted():
    nodes: list[ScriptedNode] = []

    def start(handler: Handler) -> ScriptedNode:
        nodes.append(ScriptedNode(handler))
        return nodes[-1]

    yield start
    for node in nodes:
        node.close()
        wire.forget(node.address)


def api_versions_v3(correlation_id: int, **ranges: tuple[int, int]) -> bytes:
    keys = {18: (0, 3), **{int(k.removeprefix("k")): v for k, v in ranges.items()}}
    return frame(av3.ApiVersionsResponse(error_code=ErrorCode.none, throttle_time=NO_THROTTLE, api_keys=tuple(
        av3.ApiVersion(api_key=i16(k), min_version=i16(lo), max_version=i16(hi)) for k, (lo, hi) in keys.items())),
        correlation_id)


def test_an_old_node_refusing_api_versions_v4_is_asked_again_at_its_highest(scripted):
    """KIP-511: an unknown ApiVersions version gets a v0 UNSUPPORTED_VERSION body naming the node's range."""

    def old_node(api_key: int, version: int, correlation_id: int) -> bytes | None:
        if api_key == 18 and version > 3:
            return frame(av0.ApiVersionsResponse(error_code=ErrorCode.unsupported_version, api_keys=(
                av0.ApiVersion(api_key=i16(18), min_version=i16(0), max_version=i16(3)),)), correlation_id)
        if api_key == 18:
            return api_versions_v3(correlation_id, k55=(0, 1))
        assert (api_key, version) == (55, 1)
        return frame(wire.DESCRIBE_QUORUM_TYPES[1](error_code=ErrorCode.none, topics=()), correlation_id)

    node = scripted(old_node)
    with pytest.raises(wire.WireError, match="has no __cluster_metadata partition 0"):
        wire.describe_quorum(node.address, timeout_s=3)
    assert node.requests == [(18, 4), (18, 3), (55, 1)]
    assert node.address not in wire._api_ranges  # forgotten after the error


def test_api_ranges_are_cached_per_address(scripted):
    def kraft_node(api_key: int, version: int, correlation_id: int) -> bytes | None:
        if api_key == 18:
            return frame(av4.ApiVersionsResponse(error_code=ErrorCode.none, throttle_time=NO_THROTTLE,
                                                  api_keys=(av4.ApiVersion(api_key=i16(55), min_version=i16(0),
                                                                           max_version=i16(9)),)), correlation_id)
        return frame(quorum_response(), correlation_id)

    node = scripted(kraft_node)
    first = wire.describe_quorum(node.address, timeout_s=3)
    second = wire.describe_quorum(node.address, timeout_s=3)
    assert first == second and first.leader_id == 2
    assert node.requests == [(18, 4), (55, 2), (55, 2)]
    assert "node does not answer ConsumerGroupDescribe" in one_line_wire_error(
        lambda: wire.describe_consumer_group(node.address, "g", timeout_s=3))


def test_a_silent_node_times_out_within_the_budget(scripted):
    node = scripted(lambda *_: b"")
    start = time.monotonic()
    assert "no answer within 0.3 s" in one_line_wire_error(lambda: wire.describe_quorum(node.address, timeout_s=0.3))
    assert time.monotonic() - start < 1.5


def test_a_node_closing_mid_frame_is_one_line_wire_error(scripted):
    half = scripted(lambda api_key, version, cid: CloseAfter(api_versions_v3(cid)[:9]))
    at_once = scripted(lambda *_: None)
    assert "connection closed by the node after 5 of " in one_line_wire_error(
        lambda: wire.describe_quorum(half.address, timeout_s=3))
    assert "connection closed by the node after 0 of 4 bytes" in one_line_wire_error(
        lambda: wire.describe_quorum(at_once.address, timeout_s=3))


def test_a_refused_connection_is_one_line_wire_error():
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    address = f"127.0.0.1:{port}"
    wire._api_ranges[address] = {55: (0, 2)}  # as if asked before the node went down
    assert "connect failed: Connection refused" in one_line_wire_error(
        lambda: wire.describe_quorum(address, timeout_s=1))
    assert address not in wire._api_ranges  # a restarted node may run another version: negotiate again


def test_a_frame_size_that_is_not_kafka_is_refused(scripted):
    node = scripted(lambda *_: struct.pack(">i", 1 << 30))
    assert "answer size 1073741824 is not a Kafka frame" in one_line_wire_error(
        lambda: wire.describe_quorum(node.address, timeout_s=3))
