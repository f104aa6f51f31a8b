"""The run history: event schema, per-process writer, merge and readers (docs/architecture.md, "The history")."""

from chaos.history.event import (
    EVENT_CLASS,
    SCHEMA_VERSION,
    Assigned,
    BrokerLog,
    BrokerLogEvent,
    Commit,
    CommittedOffsets,
    Consumed,
    ErrorEvent,
    Event,
    FaultEnd,
    FaultStart,
    FaultVerified,
    FinalRead,
    GroupMember,
    GroupState,
    GroupStateSample,
    Header,
    Kind,
    Lost,
    MemberStart,
    MemberStop,
    OwnershipChange,
    PhaseEvent,
    Revoked,
    RunPhase,
    SchemaError,
    SendFail,
    SendOk,
    SendUnknown,
    VerificationStage,
    from_dict,
    header_from_dict,
    header_to_json,
    to_dict,
    to_json,
)
from chaos.history.merge import EVENTS_DIR, HEADER_FILE, HISTORY_FILE, merge_run
from chaos.history.reader import EventsDirTail, EventTail, History, parse_line, read_history, write_history
from chaos.history.writer import EventWriter

__all__ = [
    "EVENT_CLASS", "SCHEMA_VERSION", "Assigned", "BrokerLog", "BrokerLogEvent", "Commit",
    "CommittedOffsets", "Consumed", "ErrorEvent", "Event", "FaultEnd", "FaultStart",
    "FaultVerified", "FinalRead", "GroupMember", "GroupState", "GroupStateSample", "Header", "Kind", "Lost",
    "MemberStart", "MemberStop", "OwnershipChange", "PhaseEvent", "Revoked", "RunPhase",
    "SchemaError", "SendFail", "SendOk", "SendUnknown", "VerificationStage", "from_dict",
    "header_from_dict", "header_to_json", "to_dict", "to_json", "EVENTS_DIR", "HEADER_FILE", "HISTORY_FILE",
    "merge_run", "EventsDirTail", "EventTail", "History", "parse_line", "read_history", "write_history",
    "EventWriter",
]
