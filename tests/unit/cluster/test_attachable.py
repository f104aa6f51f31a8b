"""Which session `--cluster NAME` may attach (chaos.cluster.attach.attachable), on session directories as a
started cluster leaves them (owner.json, attach.json); no cluster is needed to refuse."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import psutil
import pytest

from chaos.cluster.attach import ATTACH_STATE, attachable
from chaos.errors import UsageError
from chaos.process import Session


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_CHAOS_STATE", str(tmp_path / "state"))
    return tmp_path / "state"


def _session(state, name: str, *, backend: str = "local"):
    """A session directory as a running cluster of this process leaves it."""
    d = state / name
    (d / "procs").mkdir(parents=True)
    pid = os.getpid()
    (d / "owner.json").write_text(json.dumps({"pid": pid, "create_time": psutil.Process(pid).create_time(),
                                              "detached": False}))
    (d / ATTACH_STATE).write_text(json.dumps({"backend": backend, "topology": {}, "launches": {}}))
    return d


def test_a_running_local_cluster_of_this_user_is_attachable(state):
    d = _session(state, "cluster-a")
    assert attachable("cluster-a") == d


def test_refusals_name_what_runs(state):
    _session(state, "cluster-a")
    with pytest.raises(UsageError, match=r"no running local cluster of this user by that name \(yours: cluster-a\)"):
        attachable("cluster-b")
    _session(state, "cluster-d", backend="docker")
    with pytest.raises(UsageError, match="runs on the docker backend; --cluster attaches local clusters"):
        attachable("cluster-d")
    other = _session(state, "cluster-o")
    os.chown(other, 4242, 4242)  # another user's (the suite runs as root)
    with pytest.raises(UsageError, match="started by another user"):
        attachable("cluster-o")
    held = Session.attach(state / "cluster-a")  # another command has it
    try:
        with pytest.raises(UsageError, match=f"in use by another chaos command \\(pid {os.getpid()}\\)"):
            attachable("cluster-a")
    finally:
        held.close()
    assert attachable("cluster-a") == state / "cluster-a"  # let go: attachable again


def test_a_session_whose_owner_is_gone_is_not_running(state):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(gone.stdout)
    d = state / "cluster-dead"
    (d / "procs").mkdir(parents=True)
    (d / "owner.json").write_text(json.dumps({"pid": pid, "create_time": 0.0, "detached": False}))
    (d / ATTACH_STATE).write_text(json.dumps({"backend": "local", "topology": {}, "launches": {}}))
    with pytest.raises(UsageError, match=r"yours: none running"):
        attachable("cluster-dead")
