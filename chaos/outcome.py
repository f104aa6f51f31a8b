"""The one outcome table: did a produce or an offset commit happen?

Every client error a worker sees is classified here, and only here, into
:class:`Outcome` ``ok`` (definitely happened), ``fail`` (definitely did not
happen) or ``unknown`` (may or may not have happened). Workers record the
result in their events; checkers trust only definite outcomes. Nothing else in
the project guesses, and an error this table does not know is ``unknown``:
assuming a failed commit did not happen is how checkers end up blaming Kafka
for a tester's guess.

Names are accepted in the spellings the three clients use:

- Kafka protocol names (``ILLEGAL_GENERATION``) and codes (22), as librdkafka /
  confluent-kafka report them (``KafkaError.name()`` / ``.code()``);
- librdkafka local errors, which start with an underscore (``_MSG_TIMED_OUT``,
  negative codes, see ``rdkafka.h``);
- kafka-python exception classes (``IllegalGenerationError``,
  ``CommitFailedError``, ``KafkaTimeoutError``), with or without module path;
- Java exception classes (``org.apache.kafka.common.errors.TimeoutException``,
  ``CommitFailedException``).

CamelCase class names are folded onto protocol names by rule
(``NotEnoughReplicasException`` -> ``NOT_ENOUGH_REPLICAS``); the irregular ones
are listed in ``_ALIASES``.

Caveat (documented, not hidden): a ``fail`` for a produce means the *reported*
attempt was rejected before it was appended. With ``retries > 0`` and without
idempotence an earlier attempt of the same record may have timed out after
being written; a worker that knows a retry happened after an ambiguous attempt
must record ``send_unknown`` regardless of the final error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class Outcome(StrEnum):
    """Jepsen's ok / fail / info: happened, did not happen, not known."""

    OK = "ok"
    FAIL = "fail"
    UNKNOWN = "unknown"


class Operation(StrEnum):
    """The client operations whose outcome matters to a checker."""

    PRODUCE = "produce"
    COMMIT = "commit"
    #: a share-group member's acknowledgement (KIP-932; ShareAcknowledge, or acknowledgements on ShareFetch)
    SHARE_ACKNOWLEDGE = "share_acknowledge"


_OK, _FAIL, _UNK = Outcome.OK, Outcome.FAIL, Outcome.UNKNOWN


@dataclass(frozen=True, slots=True)
class ErrorOutcome:
    """How one error classifies a produce and a commit, and why."""

    name: str
    code: int | None
    produce: Outcome
    commit: Outcome
    why: str


# (name, code, produce, commit, why). Codes: Kafka protocol
# (org.apache.kafka.common.protocol.Errors) and librdkafka rdkafka.h.
_TABLE: tuple[ErrorOutcome, ...] = tuple(ErrorOutcome(*row) for row in (
    ("NONE", 0, _OK, _OK, "no error"),
    # --- broker rejected the request before writing anything -----------------
    ("UNKNOWN_TOPIC_OR_PARTITION", 3, _FAIL, _FAIL, "partition not hosted: request rejected before append"),
    ("LEADER_NOT_AVAILABLE", 5, _FAIL, _UNK, "no leader: produce not appended"),
    ("NOT_LEADER_OR_FOLLOWER", 6, _FAIL, _UNK, "produce sent to a non-leader is rejected before append (KIP-320)"),
    ("MESSAGE_TOO_LARGE", 10, _FAIL, _FAIL, "record rejected by size check"),
    ("OFFSET_METADATA_TOO_LARGE", 12, _UNK, _FAIL, "commit metadata rejected"),
    ("INVALID_TOPIC_EXCEPTION", 17, _FAIL, _FAIL, "invalid topic"),
    ("RECORD_LIST_TOO_LARGE", 18, _FAIL, _UNK, "batch rejected by size check"),
    ("NOT_ENOUGH_REPLICAS", 19, _FAIL, _UNK,
     "ISR below min.insync.replicas is checked before append (Partition.appendRecordsToLeader)"),
    ("INVALID_REQUIRED_ACKS", 21, _FAIL, _UNK, "request rejected"),
    ("INVALID_COMMIT_OFFSET_SIZE", 28, _UNK, _FAIL, "commit rejected"),
    ("TOPIC_AUTHORIZATION_FAILED", 29, _FAIL, _FAIL, "not authorised"),
    ("GROUP_AUTHORIZATION_FAILED", 30, _UNK, _FAIL, "not authorised"),
    ("INVALID_GROUP_ID", 24, _UNK, _FAIL, "group id rejected"),
    # --- group coordinator rejected the commit before storing it ------------
    # (GroupCoordinator.handleCommitOffsets; docs/architecture.md, "Outcomes")
    ("COORDINATOR_LOAD_IN_PROGRESS", 14, _UNK, _FAIL, "coordinator still loading: commit rejected"),
    ("COORDINATOR_NOT_AVAILABLE", 15, _UNK, _FAIL, "commit rejected, nothing written to __consumer_offsets"),
    ("NOT_COORDINATOR", 16, _UNK, _FAIL, "commit sent to a broker that is not the coordinator"),
    ("ILLEGAL_GENERATION", 22, _UNK, _FAIL, "stale generation: fenced by the coordinator"),
    ("UNKNOWN_MEMBER_ID", 25, _UNK, _FAIL, "member was removed from the group: fenced"),
    # KIP-848: OffsetCommit carries the member epoch (ConsumerGroup.validateOffsetCommit)
    ("STALE_MEMBER_EPOCH", 113, _UNK, _FAIL, "KIP-848: the commit's member epoch is not the member's current one"),
    ("FENCED_MEMBER_EPOCH", 110, _UNK, _FAIL, "KIP-848: the member was fenced (epoch reset); it must rejoin"),
    ("REBALANCE_IN_PROGRESS", 27, _UNK, _FAIL, "commit during CompletingRebalance is rejected"),
    ("FENCED_INSTANCE_ID", 82, _UNK, _FAIL, "static instance now mapped to another member (KIP-345)"),
    ("UNSTABLE_OFFSET_COMMIT", 88, _UNK, _FAIL, "pending transactional offsets (KIP-447)"),
    ("COMMIT_FAILED", None, _UNK, _FAIL,
     "CommitFailedError/Exception: raised for ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID / REBALANCE_IN_PROGRESS"),
    # --- answer lost: the request may have been applied ----------------------
    ("REQUEST_TIMED_OUT", 7, _UNK, _UNK, "acks not reached in time: the leader may have appended"),
    ("NETWORK_EXCEPTION", 13, _UNK, _UNK, "connection lost with the request in flight"),
    ("NOT_ENOUGH_REPLICAS_AFTER_APPEND", 20, _UNK, _UNK, "appended to the leader, replication not confirmed"),
    ("KAFKA_STORAGE_ERROR", 56, _UNK, _UNK, "log directory failed during the write"),
    ("UNKNOWN_SERVER_ERROR", -1, _UNK, _UNK, "unexpected broker error"),
    ("DISCONNECT", None, _UNK, _UNK, "Java DisconnectException: connection lost in flight"),
    ("RETRIABLE_COMMIT_FAILED", None, _UNK, _UNK,
     "Java RetriableCommitFailedException wraps coordinator errors *and* disconnects"),
    ("INTERRUPT", None, _UNK, _UNK, "thread interrupted while waiting"),
    ("WAKEUP", None, _UNK, _UNK, "wakeup() while waiting"),
    # --- librdkafka local errors (rdkafka.h) ---------------------------------
    ("_MSG_TIMED_OUT", -192, _UNK, _UNK, "message.timeout.ms expired; it may have been written (possibly persisted)"),
    ("_TIMED_OUT", -185, _UNK, _UNK, "operation timed out locally"),
    ("_TIMED_OUT_QUEUE", -166, _FAIL, _UNK, "timed out while still in the local queue: never sent"),
    ("_TRANSPORT", -195, _UNK, _UNK, "broker transport failure with request in flight"),
    ("_ALL_BROKERS_DOWN", -187, _UNK, _UNK, "informational: every broker connection is down"),
    ("_DESTROY", -197, _UNK, _UNK, "client destroyed with the request in flight"),
    ("_FAIL", -196, _UNK, _UNK, "generic local failure"),
    ("_QUEUE_FULL", -184, _FAIL, _UNK, "produce() refused: the local queue is full"),
    ("_MSG_SIZE_TOO_LARGE", None, _FAIL, _UNK, "refused locally"),
    ("_INVALID_ARG", -186, _FAIL, _FAIL, "refused locally"),
    ("_UNKNOWN_PARTITION", -190, _FAIL, _FAIL, "refused locally"),
    ("_UNKNOWN_TOPIC", -188, _FAIL, _FAIL, "refused locally"),
    ("_NO_OFFSET", -168, _UNK, _FAIL, "nothing to commit: no request was sent"),
    ("_WAIT_COORD", -180, _UNK, _FAIL, "no coordinator known: commit not sent"),
    ("_STATE", -172, _UNK, _FAIL, "wrong client state: commit not sent"),
    ("_ASSIGNMENT_LOST", -142, _UNK, _FAIL, "assignment lost: commit refused locally"),
    ("_MAX_POLL_EXCEEDED", -147, _UNK, _FAIL, "left the group after max.poll.interval.ms (KIP-62): commit refused"),
    ("_FENCED", -144, _UNK, _FAIL, "fenced locally (static member)"),
    ("_PURGE_QUEUE", -152, _FAIL, _UNK, "purged before it was sent"),
    ("_PURGE_INFLIGHT", -151, _UNK, _UNK, "purged while in flight"),
    ("_FATAL", -150, _UNK, _UNK, "fatal client error"),
    # --- client-side exceptions without a protocol code ----------------------
    ("KAFKA_TIMEOUT", None, _UNK, _UNK, "kafka-python KafkaTimeoutError: local timeout with request possibly sent"),
    ("TIMEOUT", None, _UNK, _UNK, "Java TimeoutException: local timeout with request possibly sent"),
    ("NO_BROKERS_AVAILABLE", None, _FAIL, _FAIL, "kafka-python NoBrokersAvailable: nothing was sent"),
    ("KAFKA_CONNECTION", None, _UNK, _UNK, "kafka-python KafkaConnectionError: connection lost in flight"),
))

_BY_NAME: dict[str, ErrorOutcome] = {row.name: row for row in _TABLE}
_BY_CODE: dict[int, ErrorOutcome] = {row.code: row for row in _TABLE if row.code is not None}

# Irregular client spellings, folded to protocol names (after suffix stripping
# and CamelCase -> UPPER_SNAKE).
_ALIASES: dict[str, str] = {
    "NOT_COORDINATOR_FOR_GROUP": "NOT_COORDINATOR",
    "GROUP_COORDINATOR_NOT_AVAILABLE": "COORDINATOR_NOT_AVAILABLE",
    "GROUP_LOAD_IN_PROGRESS": "COORDINATOR_LOAD_IN_PROGRESS",
    "NOT_LEADER_FOR_PARTITION": "NOT_LEADER_OR_FOLLOWER",
    "NOT_LEADER": "NOT_LEADER_OR_FOLLOWER",
    "MESSAGE_SIZE_TOO_LARGE": "MESSAGE_TOO_LARGE",
    "RECORD_TOO_LARGE": "MESSAGE_TOO_LARGE",
    "MSG_SIZE_TOO_LARGE": "MESSAGE_TOO_LARGE",
    "REQUEST_TIMED_OUT_ERROR": "REQUEST_TIMED_OUT",
    "INVALID_TOPIC": "INVALID_TOPIC_EXCEPTION",
    "KAFKA_TIMEOUT_ERROR": "KAFKA_TIMEOUT",
    "NO_BROKERS_AVAILABLE": "NO_BROKERS_AVAILABLE",
    "REBALANCE_IN_PROGRESS": "REBALANCE_IN_PROGRESS",
    "CORRUPT_RECORD": "UNKNOWN_SERVER_ERROR",
}

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SUFFIXES = ("_EXCEPTION", "_ERROR")


def normalise_error_name(name: str) -> str:
    """Fold a client's spelling of an error onto this table's key.

    ``org.apache.kafka.common.errors.IllegalGenerationException``,
    ``IllegalGenerationError``, ``KafkaError.ILLEGAL_GENERATION`` and
    ``ILLEGAL_GENERATION`` all become ``ILLEGAL_GENERATION``; librdkafka's
    local names keep their leading underscore.
    """
    text = name.strip()
    if "." in text:
        text = text.rsplit(".", 1)[1]
    if text.startswith("_"):
        return text.upper()
    if not text.isupper():
        text = _CAMEL.sub("_", text).upper()
    if text in _BY_NAME:
        return text
    if text in _ALIASES:
        return _ALIASES[text]
    for suffix in _SUFFIXES:
        if text.endswith(suffix) and text != suffix:
            stem = text[: -len(suffix)]
            if stem in _BY_NAME:
                return stem
            if stem in _ALIASES:
                return _ALIASES[stem]
            text = stem
            break
    return text


def lookup(error_code: int | None, error_name: str | None) -> ErrorOutcome | None:
    """The table row for an error, by name first (more specific), then code."""
    if error_name:
        row = _BY_NAME.get(normalise_error_name(error_name))
        if row is not None:
            return row
    if error_code is not None:
        return _BY_CODE.get(error_code)
    return None


#: the answers that say a share acknowledgement was *not* applied: the share-partition leader checks each
#: acknowledged offset is Acquired by this member and refuses the batch otherwise (``SharePartition.acknowledge``).
#: Every other error of an acknowledgement (a timeout, a lost connection, a leader change) is ``unknown``: the
#: leader may have applied it before the answer went astray.
SHARE_ACK_REFUSALS: dict[str, int] = {"INVALID_RECORD_STATE": 121}


def classify(operation: Operation | str, error_code: int | None, error_name: str | None) -> Outcome:
    """Whether ``operation`` happened, given the error the client reported.

    No error at all (both ``None``, or code 0 / name ``NONE``) is ``ok``. An
    error this table does not know is ``unknown``: never assume. A share
    acknowledgement is ``fail`` only for :data:`SHARE_ACK_REFUSALS`.
    """
    op = Operation(operation)
    if error_name is None and error_code in (None, 0):
        return Outcome.OK
    if op is Operation.SHARE_ACKNOWLEDGE:
        refused = (error_name is not None and normalise_error_name(error_name) in SHARE_ACK_REFUSALS) or (
            error_name is None and error_code in SHARE_ACK_REFUSALS.values())
        return Outcome.FAIL if refused else Outcome.UNKNOWN
    row = lookup(error_code, error_name)
    if row is None:
        return Outcome.UNKNOWN
    return row.produce if op is Operation.PRODUCE else row.commit


def is_fenced_instance(error_code: int | None, error_name: str | None) -> bool:
    """True for FENCED_INSTANCE_ID in any client's spelling (KIP-345)."""
    if error_code == 82:
        return True
    if not error_name:
        return False
    key = normalise_error_name(error_name)
    return key in ("FENCED_INSTANCE_ID", "_FENCED")


def known_errors() -> tuple[ErrorOutcome, ...]:
    """Every row of the table, for documentation and reports."""
    return _TABLE
