"""Two Kafka requests plain clients cannot make: DescribeQuorum and ConsumerGroupDescribe.

At the moment of a fault kafka-chaos needs the active KRaft controller (the
quorum leader of KIP-595's Raft log ``__cluster_metadata``) and, for KIP-848
groups (``group.protocol=consumer``), the group epoch, the assignment epoch and
each member's epoch, assignment and target assignment. Neither confluent-kafka's
AdminClient nor kafka-python exposes them, so this module speaks the wire
protocol itself, one request at a time, over a plain TCP socket.

Messages and their serialization come from ``kio`` (Aiven; classes generated
from Kafka's ``clients/src/main/resources/common/message/*.json``):
``ApiVersionsRequest``/``ApiVersionsResponse`` (API key 18),
``DescribeQuorumRequest``/``DescribeQuorumResponse`` (55) and
``ConsumerGroupDescribeRequest``/``ConsumerGroupDescribeResponse`` (69). This
module owns only the framing (a big-endian INT32 size, then header and body),
the version choice and the reduction of an answer to frozen views.

Version choice (KIP-511): the first call to an address sends ApiVersions at the
highest version kio has; a broker that does not know that version answers a
v0 body with UNSUPPORTED_VERSION (35) and its own ApiVersions range, and the
request is repeated once at the highest version both know. The answer is cached
per address for the process and dropped when a call to that address fails (a
node restarted on another Kafka version then negotiates again). Each request
then goes out at the highest version both the node and this module's tables
(versions of kio whose fields are read here) support. DescribeQuorum and
ConsumerGroupDescribe are flexible at every version (KIP-482), so they use
request header v2 (tagged fields; ``ClientId`` stays a legacy string) and
response header v1; ApiVersions responses always use response header v0.

Every call is bounded by one ``timeout_s`` budget covering connect, the
ApiVersions exchange and the request; the socket is closed on return. A refused
connection, a timeout, a closed connection or an answer that does not decode
raises :class:`WireError` with a one-line message. Errors *inside* a decoded
answer (NOT_COORDINATOR, GROUP_ID_NOT_FOUND, NOT_LEADER_OR_FOLLOWER, ...) are
returned as ``error_code`` for the caller to decide.
"""

from __future__ import annotations

import io
import itertools
import socket
import struct
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TypeAlias, TypeVar

from chaos import __version__
from chaos.errors import InfrastructureError, UsageError

# kio's phantom types (kio.static._phantom) import Hypothesis when it is installed and register a strategy for
# each type as it is defined; the text strategy computes Unicode tables (about 1.5 s) and caches them in
# ./.hypothesis of whatever directory the process runs in -- a `chaos` command that imported this module (run,
# replay, shrink), even one refusing bad input, wrote there. kafka-chaos never draws kio values from
# Hypothesis, so kio is imported with Hypothesis hidden (`import hypothesis` raises ImportError meanwhile),
# unless this process has imported it already (a test session keeps its own). Pointing
# HYPOTHESIS_STORAGE_DIRECTORY elsewhere would still pay the 1.5 s, and Hypothesis reads it once per process:
# set here, it would also move a user's test session's example database.
_HIDE_HYPOTHESIS = "hypothesis" not in sys.modules
if _HIDE_HYPOTHESIS:
    sys.modules["hypothesis"] = None  # type: ignore[assignment]
try:
    from kio.schema.api_versions import v0 as av0
    from kio.schema.api_versions import v1 as av1
    from kio.schema.api_versions import v2 as av2
    from kio.schema.api_versions import v3 as av3
    from kio.schema.api_versions import v4 as av4
    from kio.schema.consumer_group_describe import v0 as cgd0
    from kio.schema.consumer_group_describe import v1 as cgd1
    from kio.schema.consumer_group_describe.v0 import request as cgd0_req
    from kio.schema.consumer_group_describe.v1 import request as cgd1_req
    from kio.schema.describe_quorum import v0 as dq0
    from kio.schema.describe_quorum import v1 as dq1
    from kio.schema.describe_quorum import v2 as dq2
    from kio.schema.describe_quorum.v0 import request as dq0_req
    from kio.schema.describe_quorum.v1 import request as dq1_req
    from kio.schema.describe_quorum.v2 import request as dq2_req
    from kio.schema.describe_share_group_offsets import v0 as dsgo0
    from kio.schema.describe_share_group_offsets import v1 as dsgo1
    from kio.schema.describe_share_group_offsets.v0 import request as dsgo0_req
    from kio.schema.describe_share_group_offsets.v1 import request as dsgo1_req
    from kio.schema.share_group_describe import v1 as sgd1
    from kio.schema.types import GroupId, TopicName
    from kio.serial import entity_reader, entity_writer
    from kio.serial.errors import SerialError
    from kio.static.primitive import i32
finally:
    if _HIDE_HYPOTHESIS:
        del sys.modules["hypothesis"]

API_VERSIONS_KEY = 18
DESCRIBE_QUORUM_KEY = 55
CONSUMER_GROUP_DESCRIBE_KEY = 69
SHARE_GROUP_DESCRIBE_KEY = 77
DESCRIBE_SHARE_GROUP_OFFSETS_KEY = 90

#: Kafka's ``Errors.UNSUPPORTED_VERSION``: an ApiVersions request newer than the node knows
UNSUPPORTED_VERSION = 35

#: the Raft log every KRaft controller replicates (KIP-595; ``Topic.CLUSTER_METADATA_TOPIC_NAME``)
CLUSTER_METADATA_TOPIC = "__cluster_metadata"

#: KIP-511: ClientSoftwareName must match ``[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?``
CLIENT_SOFTWARE_NAME = "kafka-chaos"
CLIENT_ID = "kafka-chaos-wire"

#: the answers asked for here are a few kB; a larger size prefix means the stream is not Kafka's
MAX_FRAME_BYTES = 4 * 1024 * 1024

ApiVersionsRequest: TypeAlias = (av0.ApiVersionsRequest | av1.ApiVersionsRequest | av2.ApiVersionsRequest
                                 | av3.ApiVersionsRequest | av4.ApiVersionsRequest)
ApiVersionsResponse: TypeAlias = (av0.ApiVersionsResponse | av1.ApiVersionsResponse | av2.ApiVersionsResponse
                                  | av3.ApiVersionsResponse | av4.ApiVersionsResponse)
DescribeQuorumRequest: TypeAlias = dq0.DescribeQuorumRequest | dq1.DescribeQuorumRequest | dq2.DescribeQuorumRequest
DescribeQuorumResponse: TypeAlias = dq0.DescribeQuorumResponse | dq1.DescribeQuorumResponse | dq2.DescribeQuorumResponse
ConsumerGroupDescribeRequest: TypeAlias = cgd0.ConsumerGroupDescribeRequest | cgd1.ConsumerGroupDescribeRequest
ConsumerGroupDescribeResponse: TypeAlias = cgd0.ConsumerGroupDescribeResponse | cgd1.ConsumerGroupDescribeResponse
ShareGroupDescribeResponse: TypeAlias = sgd1.ShareGroupDescribeResponse
DescribeShareGroupOffsetsRequest: TypeAlias = (dsgo0.DescribeShareGroupOffsetsRequest
                                               | dsgo1.DescribeShareGroupOffsetsRequest)
DescribeShareGroupOffsetsResponse: TypeAlias = (dsgo0.DescribeShareGroupOffsetsResponse
                                                | dsgo1.DescribeShareGroupOffsetsResponse)
Request: TypeAlias = (ApiVersionsRequest | DescribeQuorumRequest | ConsumerGroupDescribeRequest
                      | sgd1.ShareGroupDescribeRequest | DescribeShareGroupOffsetsRequest)
Response: TypeAlias = (ApiVersionsResponse | DescribeQuorumResponse | ConsumerGroupDescribeResponse
                       | ShareGroupDescribeResponse | DescribeShareGroupOffsetsResponse)
R = TypeVar("R", ApiVersionsResponse, DescribeQuorumResponse, ConsumerGroupDescribeResponse,
            ShareGroupDescribeResponse, DescribeShareGroupOffsetsResponse)

#: the versions this module reads, per API: the kio classes of each. A kio upgrade that adds a version
#: is picked up by adding a row here (tests/unit/cluster/test_wire.py compares these with kio's index).
API_VERSIONS_TYPES: Mapping[int, type[ApiVersionsResponse]] = MappingProxyType({
    0: av0.ApiVersionsResponse, 1: av1.ApiVersionsResponse, 2: av2.ApiVersionsResponse, 3: av3.ApiVersionsResponse,
    4: av4.ApiVersionsResponse,
})
DESCRIBE_QUORUM_TYPES: Mapping[int, type[DescribeQuorumResponse]] = MappingProxyType({
    0: dq0.DescribeQuorumResponse, 1: dq1.DescribeQuorumResponse, 2: dq2.DescribeQuorumResponse,
})
CONSUMER_GROUP_DESCRIBE_TYPES: Mapping[int, type[ConsumerGroupDescribeResponse]] = MappingProxyType({
    0: cgd0.ConsumerGroupDescribeResponse, 1: cgd1.ConsumerGroupDescribeResponse,
})
#: ShareGroupDescribe v0 was the early-access version (Kafka 4.0); v1 is 4.1+'s (KIP-932)
SHARE_GROUP_DESCRIBE_TYPES: Mapping[int, type[ShareGroupDescribeResponse]] = MappingProxyType({
    1: sgd1.ShareGroupDescribeResponse,
})
DESCRIBE_SHARE_GROUP_OFFSETS_TYPES: Mapping[int, type[DescribeShareGroupOffsetsResponse]] = MappingProxyType({
    0: dsgo0.DescribeShareGroupOffsetsResponse, 1: dsgo1.DescribeShareGroupOffsetsResponse,
})


class WireError(InfrastructureError):
    """A node could not be asked: refused, timed out, closed the connection, or answered undecodably.

    One line, starting with the address. An :class:`InfrastructureError`, so a caller that lets it
    through makes the CLI exit 2 (the run could not be judged); the observer and the nemesis catch it.
    """


@dataclass(frozen=True, slots=True)
class QuorumView:
    """The KRaft quorum of ``__cluster_metadata`` partition 0, as its leader describes it (KIP-595, KIP-853).

    ``voters`` and ``observers`` are ``(replica_id, log_end_offset)``, sorted by replica id;
    ``log_end_offset`` is -1 when the leader does not know it. ``error_code`` is 0 when the node
    answered as leader; otherwise (NOT_LEADER_OR_FOLLOWER 6 from a controller that is not the leader,
    UNKNOWN_TOPIC_OR_PARTITION 3, ...) every other field is -1 or empty: Kafka's error answer
    (``DescribeQuorumResponse.singletonErrorResponse``) carries no leader.
    """

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[tuple[int, int], ...]
    observers: tuple[tuple[int, int], ...]
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class MemberView:
    """One member of a KIP-848 group: its epoch and both assignments as ``(topic, partition)``, sorted.

    ``assignment`` is what the member owns now, ``target_assignment`` what the coordinator's last
    assignment gave it; they differ while the member reconciles (KIP-848, "Member Epoch").
    """

    member_id: str
    instance_id: str | None
    member_epoch: int
    client_id: str
    assignment: tuple[tuple[str, int], ...]
    target_assignment: tuple[tuple[str, int], ...]
    #: ConsumerGroupDescribe v1 (KIP-1099, KAFKA-17750): 0 a classic member of a consumer group (it joined with JoinGroup and
    #: the coordinator translates), 1 a consumer-protocol member, -1 not said (v0)
    member_type: int = -1
    #: the topics the member subscribed to by name (its ConsumerGroupHeartbeat's ``SubscribedTopicNames``), sorted
    subscribed_topics: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupView:
    """A KIP-848 group as its coordinator describes it (ConsumerGroupDescribeResponse ``DescribedGroup``).

    ``state`` is Kafka's string (``Empty``, ``Assigning``, ``Reconciling``, ``Stable``, ``Dead``).
    ``group_epoch`` moves when membership or subscriptions change; ``assignment_epoch`` is the group
    epoch of the current target assignment (equal once the assignor has caught up). ``error_code`` is 0
    when the group was described; otherwise (GROUP_ID_NOT_FOUND 69 -- also a classic group --,
    NOT_COORDINATOR 16, COORDINATOR_LOAD_IN_PROGRESS 14, COORDINATOR_NOT_AVAILABLE 15) ``state`` is
    empty, the epochs -1 and ``members`` empty. Members are sorted by member id.
    """

    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: tuple[MemberView, ...]
    error_code: int = 0


# --------------------------------------------------------------------------------------------- framing


def encode_request(request: Request, correlation_id: int, client_id: str = CLIENT_ID) -> bytes:
    """One request frame: INT32 size, then the request header the message's version names, then the body."""
    header_type = request.__header_schema__
    header = header_type(request_api_key=request.__api_key__, request_api_version=request.__version__,
                         correlation_id=i32(correlation_id), client_id=client_id)
    with io.BytesIO() as buf:
        entity_writer(header_type)(buf, header)
        entity_writer(type(request))(buf, request)
        body = buf.getvalue()
    return struct.pack(">i", len(body)) + body


def _name(response_type: type[Response]) -> str:
    return f"{response_type.__name__.removesuffix('Response')} v{response_type.__version__}"


def peek_error_code(address: str, frame: bytes) -> int:
    """The ``ErrorCode`` of an ApiVersions answer at any version: header v0 (INT32), then the INT16."""
    if len(frame) < 6:
        raise WireError(f"{address}: ApiVersions answer too short ({len(frame)} bytes)")
    return int(struct.unpack_from(">h", frame, 4)[0])


def decode_response(address: str, frame: bytes, response_type: type[R], correlation_id: int) -> R:
    """Decode one response frame (without its size prefix); the whole frame must be consumed.

    A correlation id other than the request's, a frame shorter or longer than the message, or a
    value kio cannot represent (an error code newer than kio's ``ErrorCode``) raises :class:`WireError`.
    """
    what = _name(response_type)
    try:
        header, offset = entity_reader(response_type.__header_schema__)(frame, 0)
        if header.correlation_id != correlation_id:
            raise WireError(f"{address}: {what} answer has correlation id {header.correlation_id}, "
                            f"expected {correlation_id}")
        body, size = entity_reader(response_type)(frame, offset)
    except (SerialError, ValueError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise WireError(f"{address}: undecodable {what} answer ({len(frame)} bytes): {reason}") from None
    if offset + size != len(frame):
        raise WireError(f"{address}: {what} answer has {len(frame) - offset - size} bytes after the message")
    return body


def split_address(address: str) -> tuple[str, int]:
    """``host:port`` (IPv6 in brackets) -> (host, port); anything else is a :class:`UsageError`."""
    host, sep, port = address.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"address {address!r}: give host:port, e.g. 127.0.0.1:9093")
    return host, int(port)


class _Connection:
    """One TCP connection to one node, bounded by an absolute monotonic deadline."""

    def __init__(self, address: str, timeout_s: float) -> None:
        if not timeout_s > 0:
            raise UsageError(f"timeout_s={timeout_s}: give a positive number of seconds")
        self.address = address
        self.timeout_s = timeout_s
        self.deadline = time.monotonic() + timeout_s
        self._ids = itertools.count(1)
        host, port = split_address(address)
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout_s)
        except TimeoutError:
            raise WireError(f"{address}: no connection within {timeout_s:g} s") from None
        except OSError as exc:
            raise WireError(f"{address}: connect failed: {exc.strerror or type(exc).__name__}") from None

    def close(self) -> None:
        self._sock.close()

    def _remaining(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise WireError(f"{self.address}: no answer within {self.timeout_s:g} s")
        return left

    def _read(self, n: int) -> bytes:
        chunks: list[bytes] = []
        got = 0
        while got < n:  # bounded: each pass reads >= 1 byte or raises, and the deadline bounds the waits
            self._sock.settimeout(self._remaining())
            try:
                chunk = self._sock.recv(min(n - got, 65536))
            except TimeoutError:
                raise WireError(f"{self.address}: no answer within {self.timeout_s:g} s") from None
            except OSError as exc:
                raise WireError(f"{self.address}: read failed: {exc.strerror or type(exc).__name__}") from None
            if not chunk:
                raise WireError(f"{self.address}: connection closed by the node after {got} of {n} bytes")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def roundtrip(self, request: Request) -> tuple[int, bytes]:
        """Send one request and return (its correlation id, the response frame without size prefix)."""
        correlation_id = next(self._ids)
        frame = encode_request(request, correlation_id)
        self._sock.settimeout(self._remaining())
        try:
            self._sock.sendall(frame)
        except TimeoutError:
            raise WireError(f"{self.address}: send not done within {self.timeout_s:g} s") from None
        except OSError as exc:
            raise WireError(f"{self.address}: send failed: {exc.strerror or type(exc).__name__}") from None
        (size,) = struct.unpack(">i", self._read(4))
        if not 0 < size <= MAX_FRAME_BYTES:
            raise WireError(f"{self.address}: answer size {size} is not a Kafka frame (limit {MAX_FRAME_BYTES})")
        return correlation_id, self._read(size)

    def call(self, request: Request, response_type: type[R]) -> R:
        correlation_id, frame = self.roundtrip(request)
        return decode_response(self.address, frame, response_type, correlation_id)


# ------------------------------------------------------------------------------------ version choice

#: address -> {api_key: (min_version, max_version)} as the node answered ApiVersions (KIP-511)
_api_ranges: dict[str, Mapping[int, tuple[int, int]]] = {}
_api_ranges_lock = threading.Lock()


def api_versions_request(version: int) -> ApiVersionsRequest:
    """ApiVersionsRequest at ``version``; v3+ name this client (KIP-511)."""
    match version:
        case 4:
            return av4.ApiVersionsRequest(client_software_name=CLIENT_SOFTWARE_NAME, client_software_version=__version__)
        case 3:
            return av3.ApiVersionsRequest(client_software_name=CLIENT_SOFTWARE_NAME, client_software_version=__version__)
        case 2:
            return av2.ApiVersionsRequest()
        case 1:
            return av1.ApiVersionsRequest()
        case 0:
            return av0.ApiVersionsRequest()
    raise ValueError(f"ApiVersions v{version} is not in API_VERSIONS_TYPES")


def _ranges(response: ApiVersionsResponse) -> Mapping[int, tuple[int, int]]:
    return MappingProxyType({int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys})


def negotiate(conn: _Connection) -> Mapping[int, tuple[int, int]]:
    """Ask the node's API ranges: ApiVersions at kio's highest version, once more lower if refused (KIP-511)."""
    version = max(API_VERSIONS_TYPES)
    for _attempt in range(2):
        response_type = API_VERSIONS_TYPES[version]
        correlation_id, frame = conn.roundtrip(api_versions_request(version))
        if version > 0 and peek_error_code(conn.address, frame) == UNSUPPORTED_VERSION:
            # the node answered a v0 body listing the ApiVersions range it knows (Kafka's RequestContext)
            refusal = decode_response(conn.address, frame, av0.ApiVersionsResponse, correlation_id)
            lo, hi = _ranges(refusal).get(API_VERSIONS_KEY, (0, 0))
            chosen = choose_version(conn.address, API_VERSIONS_KEY, "ApiVersions", {API_VERSIONS_KEY: (lo, hi)},
                                    API_VERSIONS_TYPES)
            if chosen >= version:
                break
            version = chosen
            continue
        response = decode_response(conn.address, frame, response_type, correlation_id)
        if response.error_code != 0:
            raise WireError(f"{conn.address}: ApiVersions v{version} refused with error code {int(response.error_code)}")
        return _ranges(response)
    raise WireError(f"{conn.address}: ApiVersions refused at v{version} (UNSUPPORTED_VERSION)")


def choose_version(address: str, api_key: int, api_name: str, ranges: Mapping[int, tuple[int, int]],
                   ours: Mapping[int, object]) -> int:
    """The highest version in both the node's range for ``api_key`` and ``ours``; :class:`WireError` if none."""
    if api_key not in ranges:
        raise WireError(f"{address}: the node does not answer {api_name} (API key {api_key})")
    lo, hi = ranges[api_key]
    common = [v for v in ours if lo <= v <= hi]
    if not common:
        raise WireError(f"{address}: {api_name} versions {lo}-{hi} on the node, {min(ours)}-{max(ours)} here: "
                        "none in common")
    return max(common)


def forget(address: str | None = None) -> None:
    """Drop the cached ApiVersions answer of ``address`` (of every address if None)."""
    with _api_ranges_lock:
        if address is None:
            _api_ranges.clear()
        else:
            _api_ranges.pop(address, None)


class _Session:
    """One connection for one public call; the node's API ranges from the cache or one ApiVersions exchange.

    A :class:`WireError` (connecting included) drops the address's cached ranges: the node may be
    restarting, perhaps as another Kafka version, which the next call then negotiates afresh.
    """

    def __init__(self, address: str, timeout_s: float) -> None:
        self.address = address
        try:
            self.conn = _Connection(address, timeout_s)
        except WireError:
            forget(address)
            raise

    def __enter__(self) -> _Session:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        self.conn.close()
        if isinstance(exc, WireError):
            forget(self.address)

    def version_for(self, api_key: int, api_name: str, ours: Mapping[int, object]) -> int:
        with _api_ranges_lock:
            ranges = _api_ranges.get(self.address)
        if ranges is None:
            ranges = negotiate(self.conn)
            with _api_ranges_lock:
                _api_ranges[self.address] = ranges
        return choose_version(self.address, api_key, api_name, ranges, ours)


# ---------------------------------------------------------------------------------- DescribeQuorum

#: the request modules per version (the nested TopicData/PartitionData differ in class, not in fields)
_DESCRIBE_QUORUM_REQUESTS = MappingProxyType({0: dq0_req, 1: dq1_req, 2: dq2_req})


def describe_quorum_request(version: int) -> DescribeQuorumRequest:
    """DescribeQuorumRequest for ``__cluster_metadata`` partition 0 (the only Raft partition, KIP-595)."""
    m = _DESCRIBE_QUORUM_REQUESTS[version]
    request: DescribeQuorumRequest = m.DescribeQuorumRequest(topics=(m.TopicData(
        topic_name=TopicName(CLUSTER_METADATA_TOPIC), partitions=(m.PartitionData(partition_index=i32(0)),)),))
    return request


def _quorum_error(code: int) -> QuorumView:
    return QuorumView(leader_id=-1, leader_epoch=-1, high_watermark=-1, voters=(), observers=(), error_code=code)


def quorum_view(address: str, response: DescribeQuorumResponse) -> QuorumView:
    """Reduce a DescribeQuorumResponse to the view of ``__cluster_metadata`` partition 0."""
    if response.error_code != 0:
        return _quorum_error(int(response.error_code))
    for topic in response.topics:
        if topic.topic_name != CLUSTER_METADATA_TOPIC:
            continue
        for p in topic.partitions:
            if p.partition_index != 0:
                continue
            if p.error_code != 0:
                return _quorum_error(int(p.error_code))
            return QuorumView(
                leader_id=int(p.leader_id), leader_epoch=int(p.leader_epoch), high_watermark=int(p.high_watermark),
                voters=tuple(sorted((int(r.replica_id), int(r.log_end_offset)) for r in p.current_voters)),
                observers=tuple(sorted((int(r.replica_id), int(r.log_end_offset)) for r in p.observers)))
    raise WireError(f"{address}: DescribeQuorum answer has no {CLUSTER_METADATA_TOPIC} partition 0")


def describe_quorum(address: str, timeout_s: float = 2.0) -> QuorumView:
    """Ask one KRaft node who leads the metadata quorum (DescribeQuorum, API key 55; KIP-595).

    Meant for a controller's own listener (``controller.listener.names``): since KIP-919 clients may
    talk to controllers directly, and a controller answers from its Raft client
    (``KafkaRaftClient.handleDescribeQuorumRequest``): the leader with the quorum's state, any other
    controller with NOT_LEADER_OR_FOLLOWER (``error_code`` 6, no leader). A broker's listener also
    answers: the broker forwards the request to the active controller. Raises :class:`WireError`
    when the node cannot be asked within ``timeout_s`` (connect, ApiVersions and the request together).
    """
    with _Session(address, timeout_s) as session:
        version = session.version_for(DESCRIBE_QUORUM_KEY, "DescribeQuorum", DESCRIBE_QUORUM_TYPES)
        response = session.conn.call(describe_quorum_request(version), DESCRIBE_QUORUM_TYPES[version])
        return quorum_view(address, response)


# --------------------------------------------------------------------------- ConsumerGroupDescribe

_CONSUMER_GROUP_DESCRIBE_REQUESTS = MappingProxyType({0: cgd0_req, 1: cgd1_req})


def consumer_group_describe_request(version: int, group: str) -> ConsumerGroupDescribeRequest:
    """ConsumerGroupDescribeRequest for one group, without authorized operations."""
    m = _CONSUMER_GROUP_DESCRIBE_REQUESTS[version]
    request: ConsumerGroupDescribeRequest = m.ConsumerGroupDescribeRequest(
        group_ids=(GroupId(group),), include_authorized_operations=False)
    return request


def _partitions(assignment: cgd0.response.Assignment | cgd1.response.Assignment) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((str(tp.topic_name), int(p)) for tp in assignment.topic_partitions for p in tp.partitions))


def group_view(address: str, group: str, response: ConsumerGroupDescribeResponse) -> ConsumerGroupView:
    """Reduce a ConsumerGroupDescribeResponse to the view of ``group`` (KIP-848)."""
    for g in response.groups:
        if g.group_id != group:
            continue
        if g.error_code != 0:
            return ConsumerGroupView(group_id=group, state="", group_epoch=-1, assignment_epoch=-1, assignor="",
                                     members=(), error_code=int(g.error_code))
        members = tuple(sorted((MemberView(
            member_id=m.member_id, instance_id=m.instance_id, member_epoch=int(m.member_epoch), client_id=m.client_id,
            assignment=_partitions(m.assignment), target_assignment=_partitions(m.target_assignment),
            member_type=int(getattr(m, "member_type", -1)),
            subscribed_topics=tuple(sorted(str(t) for t in m.subscribed_topic_names)))
            for m in g.members), key=lambda m: m.member_id))
        return ConsumerGroupView(group_id=g.group_id, state=g.group_state, group_epoch=int(g.group_epoch),
                                 assignment_epoch=int(g.assignment_epoch), assignor=g.assignor_name, members=members)
    raise WireError(f"{address}: ConsumerGroupDescribe answer does not mention group {group!r}")


def describe_consumer_group(address: str, group: str, timeout_s: float = 2.0) -> ConsumerGroupView:
    """Ask a group's coordinator for its KIP-848 state (ConsumerGroupDescribe, API key 69).

    Send it to the coordinator broker (FindCoordinator first); another broker answers NOT_COORDINATOR
    (16). A group of the classic protocol, or none, answers GROUP_ID_NOT_FOUND (69). Both come back as
    ``error_code``; :class:`WireError` when the node cannot be asked within ``timeout_s``.
    """
    if not group:
        raise UsageError("group: give a non-empty consumer group id")
    with _Session(address, timeout_s) as session:
        version = session.version_for(CONSUMER_GROUP_DESCRIBE_KEY, "ConsumerGroupDescribe",
                                      CONSUMER_GROUP_DESCRIBE_TYPES)
        response = session.conn.call(consumer_group_describe_request(version, group),
                                     CONSUMER_GROUP_DESCRIBE_TYPES[version])
        return group_view(address, group, response)


# --------------------------------------------------------------------------- share groups (KIP-932)

@dataclass(frozen=True, slots=True)
class ShareGroupView:
    """A share group as its coordinator describes it (ShareGroupDescribeResponse ``DescribedGroup``).

    ``state`` is Kafka's string (``Empty``, ``Stable``, ``Dead``); ``members`` (member id, client id, member epoch,
    assignment as sorted ``(topic, partition)``) sorted by member id. ``error_code`` as for
    :class:`ConsumerGroupView` (GROUP_ID_NOT_FOUND 69 also for a group of another type).
    """

    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    members: tuple[tuple[str, str, int, tuple[tuple[str, int], ...]], ...]
    error_code: int = 0


def share_group_view(address: str, group: str, response: ShareGroupDescribeResponse) -> ShareGroupView:
    """Reduce a ShareGroupDescribeResponse to the view of ``group``."""
    for g in response.groups:
        if g.group_id != group:
            continue
        if g.error_code != 0:
            return ShareGroupView(group_id=group, state="", group_epoch=-1, assignment_epoch=-1, members=(),
                                  error_code=int(g.error_code))
        members = tuple(sorted((m.member_id, m.client_id, int(m.member_epoch),
                                tuple(sorted((str(tp.topic_name), int(p)) for tp in m.assignment.topic_partitions
                                             for p in tp.partitions)))
                               for m in g.members))
        return ShareGroupView(group_id=g.group_id, state=g.group_state, group_epoch=int(g.group_epoch),
                              assignment_epoch=int(g.assignment_epoch), members=members)
    raise WireError(f"{address}: ShareGroupDescribe answer does not mention group {group!r}")


def describe_share_group(address: str, group: str, timeout_s: float = 2.0) -> ShareGroupView:
    """Ask a share group's coordinator for its state (ShareGroupDescribe, API key 77; KIP-932). Sent to the group's
    coordinator (FindCoordinator, key type GROUP); another broker answers NOT_COORDINATOR (16)."""
    if not group:
        raise UsageError("group: give a non-empty share group id")
    with _Session(address, timeout_s) as session:
        version = session.version_for(SHARE_GROUP_DESCRIBE_KEY, "ShareGroupDescribe", SHARE_GROUP_DESCRIBE_TYPES)
        request = sgd1.ShareGroupDescribeRequest(group_ids=(GroupId(group),), include_authorized_operations=False)
        response = session.conn.call(request, SHARE_GROUP_DESCRIBE_TYPES[version])
        return share_group_view(address, group, response)


_DESCRIBE_SHARE_GROUP_OFFSETS_REQUESTS = MappingProxyType({0: dsgo0_req, 1: dsgo1_req})


def describe_share_group_offsets_request(version: int, group: str, topic: str,
                                         partitions: tuple[int, ...]) -> DescribeShareGroupOffsetsRequest:
    m = _DESCRIBE_SHARE_GROUP_OFFSETS_REQUESTS[version]
    request: DescribeShareGroupOffsetsRequest = m.DescribeShareGroupOffsetsRequest(groups=(
        m.DescribeShareGroupOffsetsRequestGroup(group_id=GroupId(group), topics=(
            m.DescribeShareGroupOffsetsRequestTopic(topic_name=TopicName(topic),
                                                    partitions=tuple(i32(p) for p in partitions)),)),))
    return request


@dataclass(frozen=True, slots=True)
class ShareOffsets:
    """A share group's offsets on one topic (DescribeShareGroupOffsets): per partition, the share-partition start
    offset (SPSO) and the lag (v1, KIP-1226: records not yet acknowledged or archived, the high watermark less the
    SPSO less the terminal records above it; -1 when not told). ``error_code`` is the group's (0: answered).

    The SPSO is read from the share coordinator's state, which the share-partition leader writes *before* it moves
    its SPSO past the records an acknowledgement completed (``SharePartition.writeShareGroupState``, then
    ``maybeUpdateCachedStateAndOffsets``): at rest, with every record accepted, it can stay below the high
    watermark (one record below, measured on 4.4.0), while the lag is 0."""

    start_offsets: Mapping[tuple[str, int], int]
    lag: Mapping[tuple[str, int], int]
    error_code: int = 0


def share_start_offsets(address: str, group: str, response: DescribeShareGroupOffsetsResponse) -> ShareOffsets:
    """The answer for ``group``; a partition answered with an error, or with start offset -1 (no share state yet),
    is left out."""
    for g in response.groups:
        if g.group_id != group:
            continue
        if g.error_code != 0:
            return ShareOffsets({}, {}, int(g.error_code))
        parts = [(str(t.topic_name), int(p.partition_index), p) for t in g.topics for p in t.partitions
                 if p.error_code == 0 and p.start_offset >= 0]
        return ShareOffsets({(t, i): int(p.start_offset) for t, i, p in parts},
                            {(t, i): int(getattr(p, "lag", -1)) for t, i, p in parts})
    raise WireError(f"{address}: DescribeShareGroupOffsets answer does not mention group {group!r}")


def describe_share_group_offsets(address: str, group: str, topic: str, partitions: tuple[int, ...],
                                 timeout_s: float = 2.0) -> ShareOffsets:
    """The share-partition start offsets (SPSO) and lags of ``group`` on ``topic``'s ``partitions``
    (DescribeShareGroupOffsets, API key 90; KIP-932), asked of the group's coordinator, which reads them from the
    share coordinator's state (``ReadShareGroupStateSummary``)."""
    with _Session(address, timeout_s) as session:
        version = session.version_for(DESCRIBE_SHARE_GROUP_OFFSETS_KEY, "DescribeShareGroupOffsets",
                                      DESCRIBE_SHARE_GROUP_OFFSETS_TYPES)
        response = session.conn.call(describe_share_group_offsets_request(version, group, topic, partitions),
                                     DESCRIBE_SHARE_GROUP_OFFSETS_TYPES[version])
        return share_start_offsets(address, group, response)
