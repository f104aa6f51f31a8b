"""Kafka's APIs by name and its error codes by name: what an ``rpc`` fault may name.

The API names and keys are those of franz-go's ``kmsg`` (v1.15.1), generated from Kafka's message specs
(``clients/src/main/resources/common/message/*Request.json``), which is also what the ``kafka`` toxic decodes
with; ``tests/integration/test_rpc_faults.py`` compares this table with the toxic's own list
(``toxiproxy-server -kafka-apis``). Names match ignoring case (``LeaderAndIsr``, ``LeaderAndISR``).

Error names and codes are Kafka's ``Errors.java``, as kafka-python (a dependency already) carries them.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from types import MappingProxyType

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


def api_name(name: str) -> str | None:
    """The table's spelling of ``name`` (any case), or None when it is not a Kafka API."""
    return _BY_LOWER.get(name.lower())


def error_codes() -> Mapping[str, int]:
    """Kafka's error names (``NOT_COORDINATOR``) and their codes, ``NONE`` (0) and ``UNKNOWN_SERVER_ERROR`` (-1)
    included (kafka-python's copy of ``Errors.java``)."""
    from kafka.errors import kafka_errors

    return {cls.message: code for code, cls in kafka_errors.items() if code is not None}


def error_code(name: str) -> int:
    """The code of the error ``name``; ValueError naming the nearest names when there is none."""
    codes = error_codes()
    if name in codes and codes[name] != 0:
        return codes[name]
    if name == "NONE":
        raise ValueError("error NONE is no error: name the error the answer should carry (e.g. NOT_COORDINATOR)")
    near = difflib.get_close_matches(name.upper(), list(codes), n=3) or ["NOT_COORDINATOR", "REBALANCE_IN_PROGRESS"]
    raise ValueError(f"error {name!r} is not a Kafka error name (Errors.java): e.g. {', '.join(near)}")


def nearest_apis(name: str) -> list[str]:
    """Up to three API names close to ``name`` (for an error message)."""
    return [_BY_LOWER[n] for n in difflib.get_close_matches(name.lower(), list(_BY_LOWER), n=3)]
