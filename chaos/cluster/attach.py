"""Which running cluster ``--cluster NAME`` (``chaos run``, ``replay``, ``shrink``; the plugin's ``--chaos-cluster``)
names, and its shape: read from the state a started cluster writes, without importing a Kafka client (the pytest
plugin checks its option here before any test).

The attaching itself is :meth:`chaos.cluster.kafka_cluster.KafkaCluster.adopt`; what it means for processes,
faults and cleanup is docs/architecture.md, "Running on a cluster that is already up".
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from chaos.cluster.topology import Topology
from chaos.errors import UsageError
from chaos.model.backend import BackendName
from chaos.model.cluster import ClusterSpec
from chaos.process import Session, session_running, state_root

#: the file in a cluster's session directory that attaching reads (the topology, every node's launch)
ATTACH_STATE = "attach.json"


def read_state(session_dir: Path) -> dict[str, Any]:
    """The state :meth:`KafkaCluster.start` wrote for attaching. Raises :class:`UsageError`."""
    try:
        state = json.loads((session_dir / ATTACH_STATE).read_text())
        if not isinstance(state, dict) or "topology" not in state or "launches" not in state:
            raise ValueError("incomplete")
        return state
    except (OSError, ValueError) as exc:
        raise UsageError(f"cluster {session_dir.name} cannot be attached (it was started by an older kafka-chaos, or "
                         f"is still starting): {type(exc).__name__}; start one with `chaos cluster up`") from None


def topology_of(state: dict[str, Any]) -> Topology:
    return TypeAdapter(Topology).validate_python(state["topology"])


def attached_spec(session_dir: Path) -> ClusterSpec:
    """The spec the running cluster in ``session_dir`` was started with."""
    return topology_of(read_state(session_dir)).spec


def attachable(name: str) -> Path:
    """The session directory of this user's running local cluster ``name`` (``chaos cluster status`` prints it;
    a test session's shared cluster has one too), not attached by another command now. Raises a
    :class:`UsageError` naming what runs."""
    root = state_root()
    mine = sorted(d.name for d in (root.iterdir() if root.is_dir() else ())
                  if (d / ATTACH_STATE).is_file() and d.stat().st_uid == os.getuid() and session_running(d))
    d = root / name
    if name in mine:
        backend = read_state(d).get("backend", BackendName.LOCAL.value)
        if backend != BackendName.LOCAL:  # its containers are driven by the engine that made them
            raise UsageError(f"--cluster {name}: that cluster runs on the {backend} backend; --cluster attaches local "
                             "clusters (`chaos cluster up`)")
        holder = Session.attached_by(d)
        if holder is not None:
            raise UsageError(f"--cluster {name}: that cluster is in use by another chaos command (pid {holder}): wait "
                             "for it to end, or start another with `chaos cluster up`")
        return d
    if d.is_dir() and (d / ATTACH_STATE).is_file() and d.stat().st_uid != os.getuid():
        raise UsageError(f"--cluster {name}: that cluster was started by another user; start one of your own with "
                         "`chaos cluster up`")
    running = ", ".join(mine) or "none running"
    raise UsageError(f"--cluster {name!r}: no running local cluster of this user by that name (yours: {running}); "
                     "start one with `chaos cluster up --like EXPERIMENT`")
