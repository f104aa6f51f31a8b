"""The embedded default backend: ZooKeeper, Kafka brokers and Toxiproxy as local processes.

:class:`LocalCluster` is the shared orchestration
(:class:`chaos.cluster.kafka_cluster.KafkaCluster`) composed with two parts:

* :class:`ProcessNodes` — every node is a child process of the driver,
  recorded in a :class:`chaos.process.Session`, so it is ended on every exit
  path and reaped by the next start if the driver was SIGKILLed; all bind
  127.0.0.1 on ports chosen by :func:`chaos.cluster.topology.plan`; pause is
  SIGSTOP/SIGCONT to the node's process group;
* :class:`OwnerMatchCutter` — pair-wise broker partitions by host iptables
  rules matching each broker's own group id (:mod:`chaos.cluster.firewall`;
  root only).

Local processes share one network, so there is no container network to leave
(no :class:`chaos.cluster.NetworkDisconnectable`).
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from chaos.cluster import NodeProcess, firewall
from chaos.cluster.kafka_cluster import (
    READY_TOPIC,
    KafkaCluster,
    NodeLaunch,
    PairPartitioning,
    Pausing,
    attach_state,
    zk_command,
    zk_mode,
)
from chaos.cluster.runtime import KafkaRuntime, ToxiproxyRuntime
from chaos.model.backend import BackendName, Capability
from chaos.model.cluster import ClusterSpec
from chaos.process import log_excerpt


class OwnerMatchCutter:
    """Pair-wise partitions with host iptables: ``--gid-owner`` names the sending broker
    (see :mod:`chaos.cluster.firewall`)."""

    def __init__(self) -> None:
        self._firewall: firewall.Firewall | None = None

    def unavailable_reason(self, cluster: KafkaCluster) -> str | None:
        return firewall.unavailable_reason()

    def group_of(self, cluster: KafkaCluster, node: str) -> int | None:
        """The group id ``node`` must run with for its packets to be matched (brokers only, when usable)."""
        if not node.startswith("broker-") or firewall.unavailable_reason() is not None:
            return None
        assert cluster.session is not None and cluster.topology is not None
        return firewall.broker_gid(cluster.session.id, cluster.topology.broker(node).broker_id)

    def _fw(self, cluster: KafkaCluster) -> firewall.Firewall:
        assert cluster.session is not None, "cluster not started"
        if self._firewall is None or self._firewall.session is not cluster.session:
            self._firewall = firewall.Firewall(cluster.session)  # its chain is named after (and reaped with) the session
        return self._firewall

    def _args(self, cluster: KafkaCluster, a: str, b: str) -> tuple[int, int, int, int]:
        assert cluster.topology is not None and cluster.session is not None
        ta, tb = cluster.topology.broker(a), cluster.topology.broker(b)
        return (firewall.broker_gid(cluster.session.id, ta.broker_id), ta.internal,
                firewall.broker_gid(cluster.session.id, tb.broker_id), tb.internal)

    def cut(self, cluster: KafkaCluster, a: str, b: str) -> None:
        self._fw(cluster).cut(*self._args(cluster, a, b))

    def mend(self, cluster: KafkaCluster, a: str, b: str) -> None:
        self._fw(cluster).mend(*self._args(cluster, a, b))

    def rules(self, cluster: KafkaCluster) -> list[str]:
        return self._fw(cluster).rules()

    def clear(self, cluster: KafkaCluster) -> None:
        self._fw(cluster).clear()


class ProcessNodes:
    """Nodes as child processes of the driver in the cluster's :class:`chaos.process.Session`."""

    kind = "process"
    toxiproxy_timeout_s = 15.0

    def __init__(self, cutter: OwnerMatchCutter | None = None):
        #: gives each broker the group id its partition rules match
        self.cutter = cutter

    def open(self, cluster: KafkaCluster) -> None:
        pass  # nothing outside the session to check or reap (Session reaps orphaned processes itself)

    def addresses(self, cluster: KafkaCluster) -> dict[str, str]:
        return {}  # every process listens on loopback (see Topology.addresses)

    def spawn(self, cluster: KafkaCluster, node: str, previous: NodeProcess | None) -> NodeProcess:
        launch = cluster.launch(node)
        assert cluster.session is not None
        gid = self.cutter.group_of(cluster, node) if self.cutter is not None else None
        return cluster.session.spawn(node, launch.argv, launch.log_path, cwd=launch.config_path.parent, gid=gid)

    def spawn_toxiproxy(self, cluster: KafkaCluster, host: str, port: int) -> NodeProcess:
        assert cluster.session is not None
        argv = (str(cluster.toxiproxy_bin.binary), "-host", host, "-port", str(port))
        return cluster.session.spawn("toxiproxy", argv, cluster.workdir / "toxiproxy.log")

    def exit_message(self, cluster: KafkaCluster, node: str, proc: NodeProcess) -> str:
        tail = proc.log_tail()
        node_log = cluster.workdir / node / f"{node}.log"
        if node_log.exists() and node_log.stat().st_size:
            tail = log_excerpt(node_log, 1)
        else:
            node_log = proc.log_path
        kept = cluster.failed_logs_dir / node / node_log.name
        hint = " (a port is already in use: retry, or pick another base_port)" if "Address already in use" in tail else ""
        code = getattr(proc, "returncode", None)
        return f"{node} exited{'' if code is None else f' with code {code}'}{hint}; log kept at {kept}: {tail}"

    def freeze(self, proc: NodeProcess) -> None:
        proc.signal(signal.SIGSTOP)

    def thaw(self, proc: NodeProcess) -> None:
        proc.signal(signal.SIGCONT)

    def is_frozen(self, proc: NodeProcess, tracked: bool) -> bool:
        return tracked  # a SIGSTOPped process is only known frozen by who stopped it

    def keep_output(self, cluster: KafkaCluster) -> None:
        pass  # stdout is already a file in the node's directory

    def describe(self, proc: NodeProcess | None) -> dict[str, Any]:
        return {}

    def status(self, cluster: KafkaCluster) -> dict[str, Any]:
        return {}

    def close(self, cluster: KafkaCluster) -> None:
        pass  # the session ends the processes


class LocalCluster(Pausing, PairPartitioning):
    """A real cluster of local processes; use as a context manager.

    >>> with LocalCluster(ClusterSpec(brokers=3)) as cluster:   # doctest: +SKIP
    ...     cluster.kill(cluster.coordinator_of("g"))
    """

    backend_name = BackendName.LOCAL.value
    missing = {Capability.NETWORK_DISCONNECT: "local processes share one network: use --backend docker"}

    def __init__(self, spec: ClusterSpec | None = None, *, detached: bool = False,
                 kafka: KafkaRuntime | None = None, toxiproxy: ToxiproxyRuntime | None = None):
        cutter = OwnerMatchCutter()
        super().__init__(spec, ProcessNodes(cutter), cutter=cutter, detached=detached, kafka=kafka,
                         toxiproxy=toxiproxy)

    @classmethod
    def attach(cls, session_dir: Path) -> LocalCluster:
        """The running local cluster recorded in ``session_dir``, adopted (:meth:`KafkaCluster.adopt`)."""
        return cls(attach_state(session_dir)[0].spec).adopt(session_dir)


__all__ = ["READY_TOPIC", "LocalCluster", "NodeLaunch", "OwnerMatchCutter",
           "ProcessNodes", "zk_command", "zk_mode"]
