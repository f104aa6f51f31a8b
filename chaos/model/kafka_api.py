"""Kafka's APIs by name and its error codes by name: what an ``rpc`` fault may name.

The API names and keys are those of franz-go's ``kmsg`` (v1.15.1), generated from Kafka's message specs
(``clients/src/main/resources/common/message/*Request.json``), which is also what the ``kafka`` toxic decodes
with; ``tests/integration/test_rpc_faults.py`` compares this table with the toxic's own list
(``toxiproxy-server -kafka-apis``). Names match ignoring case (``LeaderAndIsr``, ``LeaderAndISR``).

Error names and codes are Kafka's ``Errors.java`` as franz-go's ``kerr`` carries them, and the errors each API's
answer is documented to carry are those of kmsg's docs and Kafka's message specs: both generated into
``kafka_api_errors.json`` by ``chaos/toxiproxy/cmd/kafka-api-errors`` (``test_kafka_toxic_build`` runs it again and
compares).
"""

from __future__ import annotations

import difflib
import functools
import json
from collections.abc import Mapping
from importlib import resources
from types import MappingProxyType
from typing import Any

#: every API the toxic decodes, by its name in the message specs: its key
API_KEYS: Mapping[str, int] = MappingProxyType({
    "Produce": 0,
    "Fetch": 1,
    "ListOffsets": 2,
    "Metadata": 3,
    "LeaderAndISR": 4,
    "StopReplica": 5,
    "UpdateMetadata": 6,
    "ControlledShutdown": 7,
    "OffsetCommit": 8,
    "OffsetFetch": 9,
    "FindCoordinator": 10,
    "JoinGroup": 11,
    "Heartbeat": 12,
    "LeaveGroup": 13,
    "SyncGroup": 14,
    "DescribeGroups": 15,
    "ListGroups": 16,
    "SASLHandshake": 17,
    "ApiVersions": 18,
    "CreateTopics": 19,
    "DeleteTopics": 20,
    "DeleteRecords": 21,
    "InitProducerID": 22,
    "OffsetForLeaderEpoch": 23,
    "AddPartitionsToTxn": 24,
    "AddOffsetsToTxn": 25,
    "EndTxn": 26,
    "WriteTxnMarkers": 27,
    "TxnOffsetCommit": 28,
    "DescribeACLs": 29,
    "CreateACLs": 30,
    "DeleteACLs": 31,
    "DescribeConfigs": 32,
    "AlterConfigs": 33,
    "AlterReplicaLogDirs": 34,
    "DescribeLogDirs": 35,
    "SASLAuthenticate": 36,
    "CreatePartitions": 37,
    "CreateDelegationToken": 38,
    "RenewDelegationToken": 39,
    "ExpireDelegationToken": 40,
    "DescribeDelegationToken": 41,
    "DeleteGroups": 42,
    "ElectLeaders": 43,
    "IncrementalAlterConfigs": 44,
    "AlterPartitionAssignments": 45,
    "ListPartitionReassignments": 46,
    "OffsetDelete": 47,
    "DescribeClientQuotas": 48,
    "AlterClientQuotas": 49,
    "DescribeUserSCRAMCredentials": 50,
    "AlterUserSCRAMCredentials": 51,
    "Vote": 52,
    "BeginQuorumEpoch": 53,
    "EndQuorumEpoch": 54,
    "DescribeQuorum": 55,
    "AlterPartition": 56,
    "UpdateFeatures": 57,
    "Envelope": 58,
    "FetchSnapshot": 59,
    "DescribeCluster": 60,
    "DescribeProducers": 61,
    "BrokerRegistration": 62,
    "BrokerHeartbeat": 63,
    "UnregisterBroker": 64,
    "DescribeTransactions": 65,
    "ListTransactions": 66,
    "AllocateProducerIDs": 67,
    "ConsumerGroupHeartbeat": 68,
    "ConsumerGroupDescribe": 69,
    "ControllerRegistration": 70,
    "GetTelemetrySubscriptions": 71,
    "PushTelemetry": 72,
    "AssignReplicasToDirs": 73,
    "ListConfigResources": 74,
    "DescribeTopicPartitions": 75,
    "ShareGroupHeartbeat": 76,
    "ShareGroupDescribe": 77,
    "ShareFetch": 78,
    "ShareAcknowledge": 79,
    "AddRaftVoter": 80,
    "RemoveRaftVoter": 81,
    "UpdateRaftVoter": 82,
    "InitializeShareGroupState": 83,
    "ReadShareGroupState": 84,
    "WriteShareGroupState": 85,
    "DeleteShareGroupState": 86,
    "ReadShareGroupStateSummary": 87,
    "StreamsGroupHeartbeat": 88,
    "StreamsGroupDescribe": 89,
    "DescribeShareGroupOffsets": 90,
    "AlterShareGroupOffsets": 91,
    "DeleteShareGroupOffsets": 92,
    "StreamsGroupTopologyDescriptionUpdate": 93,
    "UnregisterController": 94,
})

_BY_LOWER = {name.lower(): name for name in API_KEYS}

#: APIs that exist on KRaft clusters only (the quorum's, KIP-595/KIP-631; KIP-848's group heartbeat and
#: describe; share groups, KIP-932; streams groups, KIP-1071)
KRAFT_ONLY_APIS = frozenset({
    "Vote", "BeginQuorumEpoch", "EndQuorumEpoch", "DescribeQuorum", "FetchSnapshot", "BrokerRegistration",
    "BrokerHeartbeat", "UnregisterBroker", "ControllerRegistration", "AssignReplicasToDirs", "AddRaftVoter",
    "RemoveRaftVoter", "UpdateRaftVoter", "UnregisterController", "ConsumerGroupHeartbeat", "ConsumerGroupDescribe",
    "ShareGroupHeartbeat", "ShareGroupDescribe", "ShareFetch", "ShareAcknowledge", "InitializeShareGroupState",
    "ReadShareGroupState", "WriteShareGroupState", "DeleteShareGroupState", "ReadShareGroupStateSummary",
    "DescribeShareGroupOffsets", "AlterShareGroupOffsets", "DeleteShareGroupOffsets", "StreamsGroupHeartbeat",
    "StreamsGroupDescribe",
})

#: what a broker sends a KRaft controller (its quorum links): registration and heartbeats, the metadata log
#: (Fetch, FetchSnapshot), partition and feature changes forwarded to the controller
QUORUM_APIS = frozenset({
    "ApiVersions", "BrokerRegistration", "BrokerHeartbeat", "Fetch", "FetchSnapshot", "AlterPartition",
    "AllocateProducerIDs", "AssignReplicasToDirs", "Envelope", "UpdateFeatures",
})

#: the group membership APIs of each group protocol
GROUP_APIS: Mapping[str, frozenset[str]] = MappingProxyType({
    "classic": frozenset({"JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup"}),
    "consumer": frozenset({"ConsumerGroupHeartbeat", "ConsumerGroupDescribe"}),
})


#: what a share group's members send that a consumer group's never do (KIP-932): the group heartbeat, fetching
#: acquired records and acknowledging them
SHARE_MEMBER_APIS = frozenset({"ShareGroupHeartbeat", "ShareFetch", "ShareAcknowledge"})
#: what only a consumer group's members send: a share member neither joins a classic group nor commits offsets
CONSUMER_MEMBER_APIS = frozenset({*GROUP_APIS["classic"], *GROUP_APIS["consumer"], "OffsetCommit", "OffsetFetch"})


def api_name(name: str) -> str | None:
    """The table's spelling of ``name`` (any case), or None when it is not a Kafka API."""
    return _BY_LOWER.get(name.lower())


#: Kafka's current names for codes kerr (and kmsg's docs) still call by an older name or misspell: accepted as
#: input, resolved to the code
ERROR_ALIASES: Mapping[str, str] = MappingProxyType({
    "NOT_LEADER_OR_FOLLOWER": "NOT_LEADER_FOR_PARTITION",  # Errors.java's name of code 6 since KIP-392 (2.4)
    "KAFKA_STORAGE_EXCEPTION": "KAFKA_STORAGE_ERROR",  # kmsg's docs of Fetch and ListOffsets
    "OUT_OF_ORDER_SEQUENCE_NUMER": "OUT_OF_ORDER_SEQUENCE_NUMBER",  # kmsg's docs of Produce
})

#: what any API's answer can carry: a request the broker cannot read (INVALID_REQUEST), a version it does not
#: support (UNSUPPORTED_VERSION), an unexpected exception in its handler (UNKNOWN_SERVER_ERROR, Kafka's
#: ``KafkaApis.handleError`` through ``Errors.forException``)
ANY_API_ERRORS = frozenset({"INVALID_REQUEST", "UNSUPPORTED_VERSION", "UNKNOWN_SERVER_ERROR"})

_KIP345 = frozenset({"FENCED_INSTANCE_ID"})
#: errors a KIP documents for an API where neither source of ``kafka_api_errors.json`` names them
DOCUMENTED_ELSEWHERE: Mapping[str, frozenset[str]] = MappingProxyType({
    # KIP-345: a static member's request answered FENCED_INSTANCE_ID once another instance took its
    # group.instance.id (JoinGroup, SyncGroup, Heartbeat, OffsetCommit; LeaveGroup per member, v3+)
    **dict.fromkeys(("JoinGroup", "SyncGroup", "Heartbeat", "OffsetCommit", "LeaveGroup"), _KIP345),
})

#: the upper-case words of the two sources that are not error names (streams heartbeat status codes, an ACL
#: operation, a constant of Produce's spec); ``test_kafka_toxic_build`` keeps this list exact
NOT_ERROR_NAMES = frozenset({
    "ASSIGNMENT_DELAYED", "CLUSTER_ACTION", "INCORRECTLY_PARTITIONED_TOPICS", "MISSING_CLIENT_TAGS",
    "MISSING_INTERNAL_TOPICS", "MISSING_SOURCE_TOPICS", "NOT_REQUESTED", "NOT_STORED",
    "PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION", "SHUTDOWN_APPLICATION", "STALE_TOPOLOGY",
})


@functools.cache
def _table() -> dict[str, Any]:
    """``kafka_api_errors.json``: generated by ``chaos/toxiproxy/cmd/kafka-api-errors`` (see its doc) from
    franz-go's kerr (codes) and kmsg (documented errors) and Kafka's message specs."""
    table: dict[str, Any] = json.loads(resources.files("chaos.model").joinpath("kafka_api_errors.json").read_text())
    return table


@functools.cache
def error_codes() -> Mapping[str, int]:
    """Kafka's error names (``NOT_COORDINATOR``) and their codes, ``NONE`` (0) and ``UNKNOWN_SERVER_ERROR`` (-1)
    included (franz-go's kerr, current with ``Errors.java``), with :data:`ERROR_ALIASES`; built once a process."""
    codes = dict(_table()["codes"])
    return MappingProxyType({**codes, **{alias: codes[name] for alias, name in ERROR_ALIASES.items()}})


def error_code(name: str) -> int:
    """The code of the error ``name``; ValueError naming the nearest names when there is none."""
    codes = error_codes()
    if name in codes and codes[name] != 0:
        return codes[name]
    if name == "NONE":
        raise ValueError("error NONE is no error: name the error the answer should carry (e.g. NOT_COORDINATOR)")
    near = difflib.get_close_matches(name.upper(), list(codes), n=3) or ["NOT_COORDINATOR", "REBALANCE_IN_PROGRESS"]
    raise ValueError(f"error {name!r} is not a Kafka error name (Errors.java): e.g. {', '.join(near)}")


def api_errors(api: str) -> frozenset[int] | None:
    """The error codes ``api``'s answer is documented to carry, in some version: kmsg's docs and Kafka's message
    specs, :data:`DOCUMENTED_ELSEWHERE` and :data:`ANY_API_ERRORS`. None when neither source documents any error
    of the API (its answers are then not checked)."""
    documented = _table()["errors"].get(api)
    if documented is None:
        return None
    codes = error_codes()
    names = set(documented) | DOCUMENTED_ELSEWHERE.get(api, frozenset()) | ANY_API_ERRORS
    return frozenset(codes[n] for n in names if n in codes)


def error_names(codes: frozenset[int]) -> list[str]:
    """The names of ``codes``, sorted (each code once, by kerr's name)."""
    table = _table()["codes"]
    return sorted(n for n, c in table.items() if c in codes)


def nearest_apis(name: str) -> list[str]:
    """Up to three API names close to ``name`` (for an error message)."""
    return [_BY_LOWER[n] for n in difflib.get_close_matches(name.lower(), list(_BY_LOWER), n=3)]
