"""The report's Spark schema of history lines is derived from the event records (no Spark session).

Fails when a field of an event record (or of a nested member) has no column, and when a column
that reports already hold changes its type.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import fields

import pytest

pytest.importorskip("pyspark")

from chaos.history import EVENT_CLASS, GroupMember  # noqa: E402
from chaos.report.tables import event_schema  # noqa: E402

# The hand-kept DDL the report used before the schema was derived (as Spark's simpleString):
# a column may be added, but none of these may change type (Parquet tables of earlier reports).
BEFORE = {
    "header": "boolean", "seq": "bigint", "ts": "double", "mono_ns": "bigint", "source": "string",
    "kind": "string", "topic": "string", "partition": "int", "offset": "bigint", "key": "string",
    "value": "string", "error_code": "int", "error_name": "string", "group": "string", "client": "string",
    "client_version": "string", "instance_id": "string", "assignor": "string", "protocol": "string",
    "commit_mode": "string", "session_timeout_ms": "bigint", "max_poll_interval_ms": "bigint",
    "wrong_mode": "string", "partitions": "array<array<string>>", "generation": "bigint",
    "member_id": "string", "incremental": "boolean", "offsets": "array<string>", "outcome": "string",
    "auto": "boolean", "message": "string", "fatal": "boolean", "clean": "boolean", "signal": "string",
    "state": "string", "coordinator": "int", "broker": "int", "event": "string", "line": "string",
    "fault_id": "string", "fault_type": "string", "target_role": "string", "node": "string",
    "params": "string", "trigger": "string", "stage": "string", "ok": "boolean", "evidence": "string",
    "name": "string", "records": "array<array<bigint>>",
}
MEMBERS_BEFORE = ("struct<member_id:string,instance_id:string,client_id:string,host:string,"
                  "assignment:array<array<string>>")


def test_every_field_of_every_event_record_has_a_column():
    union = {f.name for cls in EVENT_CLASS.values() for f in fields(cls)}
    assert set(event_schema().fieldNames()) == union | {"header", "kind"}


def test_member_records_have_every_field():
    members = event_schema()["members"].dataType
    assert members.elementType.fieldNames() == [f.name for f in fields(GroupMember)]


def test_columns_of_earlier_reports_keep_their_types():
    got = {f.name: f.dataType.simpleString() for f in event_schema().fields}
    assert {name: got[name] for name in BEFORE} == BEFORE
    assert got["members"].startswith("array<" + MEMBERS_BEFORE)
    # what the hand-kept DDL lacked
    assert got["answered_ns"] == "bigint" and got["auto_commit_interval_ms"] == "bigint"
    assert got["members"].endswith(",subscription:array<string>,member_epoch:bigint,"
                                   "target_assignment:array<array<string>>>>")
    # KIP-848 samples (group_state from ConsumerGroupDescribe)
    assert (got["group_epoch"], got["assignment_epoch"], got["group_type"]) == ("bigint", "bigint", "string")


def test_loading_the_tables_module_does_not_import_spark():
    code = "import sys, chaos.report.tables; sys.exit('pyspark' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False, timeout=60).returncode == 0
