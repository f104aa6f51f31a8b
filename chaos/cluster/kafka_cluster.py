"""The orchestration every backend shares, composed with the parts that differ.

:class:`KafkaCluster` plans the topology (:func:`chaos.cluster.topology.plan`),
writes every node's configuration, starts Toxiproxy, ZooKeeper and the
brokers, waits until the cluster is usable, answers role lookups, drives link
faults, heals and reports status. What differs between backends is delegated
to parts:

* a :class:`NodeRunner` — how nodes run: local processes in a
  :class:`chaos.process.Session` (:class:`chaos.cluster.local.ProcessNodes`) or
  containers on our engine (:class:`chaos.cluster.container_cluster.ContainerNodes`);
  it also freezes and thaws them (SIGSTOP/SIGCONT, or the cgroup freezer);
* a :class:`NetworkCutter` (optional) — how broker↔broker traffic is cut
  pair-wise: host iptables matching each broker's group id
  (:class:`chaos.cluster.local.OwnerMatchCutter`), or iptables inside the
  broker's own container (:class:`chaos.cluster.container_cluster.ContainerFirewall`);
* a :class:`NodeNetwork` (optional) — a network the nodes can be taken off
  (:class:`chaos.cluster.container_cluster.BridgeNetwork`).

The optional capabilities are small mixins (:class:`Pausing`,
:class:`PairPartitioning`, :class:`NetworkDisconnecting`) that a backend class
lists when it has the part, so ``isinstance(cluster, Pausable)`` and friends
(:mod:`chaos.cluster`) answer what a backend can do at all, and
:attr:`KafkaCluster.capabilities` adds whether its parts work here and now.

Readiness is judged by real checks, not by ports opening: ZooKeeper answers
``srvr`` with a mode; every broker appears in DescribeCluster with a
controller elected and every broker's metadata lists every broker;
``__consumer_offsets`` exists with a leader for every partition; and a record
is produced with ``acks=all`` through the proxies.
"""

from __future__ import annotations

import base64
import json
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, Self

from confluent_kafka import Producer
from pydantic import TypeAdapter

from chaos.cluster import NetworkDisconnectable, NodeProcess, PairPartitionable, Pausable
from chaos.cluster.admin import SETTLE_S, ClusterAdmin, retry
from chaos.cluster.attach import ATTACH_STATE, read_state, topology_of
from chaos.cluster.runtime import KafkaRuntime, ToxiproxyRuntime, cache_root, java_binary, kafka_runtime, toxiproxy_runtime
from chaos.cluster.settings import (
    BROKER_ZK_SESSION_MS,
    broker_properties,
    controller_properties,
    jvm_args,
    log4j2_properties,
    log4j_properties,
    render_properties,
    zk_config,
)
from chaos.cluster.topology import CONTROL_LANE, LOOPBACK, Topology, plan
from chaos.cluster.toxiproxy import ProxySpec, Toxic, ToxiproxyClient
from chaos.errors import InfrastructureError, UsageError
from chaos.model.backend import Capability
from chaos.model.cluster import ClusterSpec
from chaos.process import Session, SessionInUse, is_stopped, terminate_on_sigterm

READY_TOPIC = "chaos.ready"


@dataclass(frozen=True, slots=True)
class NodeLaunch:
    """How to (re)start one node: its command line, log and working directory."""

    name: str
    argv: tuple[str, ...]
    log_path: Path
    config_path: Path
    config: dict[str, str]


class NodeRunner(Protocol):
    """How nodes run. Every method gets the cluster it serves (its session, topology and launches)."""

    #: "process" or "container" (names the node in error messages)
    kind: str
    #: how long Toxiproxy may take to answer its API after it was started
    toxiproxy_timeout_s: float

    def open(self, cluster: KafkaCluster) -> None:
        """Before anything is planned: check the environment, reap leftovers, build what is missing."""

    def addresses(self, cluster: KafkaCluster) -> dict[str, str]:
        """Where each node listens (after the session exists); empty = everyone on loopback."""

    def spawn(self, cluster: KafkaCluster, node: str, previous: NodeProcess | None) -> NodeProcess:
        """Start ``node`` from ``cluster.launch(node)``; ``previous`` is its last incarnation, if any."""

    def spawn_toxiproxy(self, cluster: KafkaCluster, host: str, port: int) -> NodeProcess:
        """Start Toxiproxy with its API on ``host:port``."""

    def exit_message(self, cluster: KafkaCluster, node: str, proc: NodeProcess) -> str:
        """One line saying that ``node`` exited, with what its logs say and where they are kept."""

    def freeze(self, proc: NodeProcess) -> None: ...
    def thaw(self, proc: NodeProcess) -> None: ...

    def is_frozen(self, proc: NodeProcess, tracked: bool) -> bool:
        """Is the node frozen? ``tracked`` is what the cluster recorded (pause without resume since)."""

    def keep_output(self, cluster: KafkaCluster) -> None:
        """Save what only the runner holds (containers' stdout) into the session dir before logs are kept."""

    def describe(self, proc: NodeProcess | None) -> dict[str, Any]:
        """Status fields of one node beyond the shared ones."""

    def status(self, cluster: KafkaCluster) -> dict[str, Any]:
        """Top-level status fields of the runner (e.g. the ``docker`` section)."""

    def close(self, cluster: KafkaCluster) -> None:
        """Remove what the runner created outside the session (containers, networks, clients)."""


class NetworkCutter(Protocol):
    """How broker↔broker traffic is cut pair-wise, both directions, clients and ZooKeeper unaffected."""

    def unavailable_reason(self, cluster: KafkaCluster) -> str | None: ...
    def cut(self, cluster: KafkaCluster, a: str, b: str) -> None: ...
    def mend(self, cluster: KafkaCluster, a: str, b: str) -> None: ...
    def rules(self, cluster: KafkaCluster) -> list[str]: ...
    def clear(self, cluster: KafkaCluster) -> None: ...


class NodeNetwork(Protocol):
    """A network the nodes can be taken off one at a time (``docker network disconnect``)."""

    def unavailable_reason(self, cluster: KafkaCluster) -> str | None: ...
    def disconnect(self, cluster: KafkaCluster, node: str) -> None: ...
    def reconnect(self, cluster: KafkaCluster, node: str) -> None: ...
    def is_connected(self, cluster: KafkaCluster, node: str) -> bool: ...
    def reconnect_all(self, cluster: KafkaCluster) -> None: ...


def new_cluster_id(draw: Callable[[], uuid.UUID] = uuid.uuid4) -> str:
    """A random KRaft cluster id: a UUID in URL-safe base64 without padding, never starting with ``-``.

    ``kafka-storage format -t <id>`` parses arguments with argparse4j, which takes an id such as ``-Xb2…`` for an
    option and fails ("argument --cluster-id/-t: expected one argument") — one start in 64 (seen in CI). Kafka's own
    ``org.apache.kafka.common.Uuid.randomUuid()`` draws again in that case for the same reason.
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(draw().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


#: Capability -> the protocol a backend implements for it and the part (an attribute of the cluster) that does the
#: work on this host, None when the backend's own methods do. The one table: a capability not in it is one every
#: cluster has (process, link and log faults: every node runs behind Toxiproxy). A new capability is a member of
#: :class:`chaos.model.cluster.Capability`, a protocol in :mod:`chaos.cluster`, and a row here.
PROVIDED_BY: dict[Capability, tuple[type, str | None]] = {
    Capability.PAUSE: (Pausable, None),
    Capability.PAIR_PARTITION: (PairPartitionable, "cutter"),
    Capability.NETWORK_DISCONNECT: (NetworkDisconnectable, "network"),
}


class KafkaCluster:
    """A real cluster run by ``nodes``; use as a context manager. Backends are subclasses that only compose parts.

    >>> with LocalCluster(ClusterSpec(brokers=3)) as cluster:   # doctest: +SKIP
    ...     cluster.kill(cluster.coordinator_of("g"))
    """

    backend_name: ClassVar[str]
    #: why a capability the backend has no part for is missing (the runner's message for such a fault)
    missing: ClassVar[dict[Capability, str]] = {}

    def __init__(self, spec: ClusterSpec | None, nodes: NodeRunner, *, cutter: NetworkCutter | None = None,
                 network: NodeNetwork | None = None, detached: bool = False,
                 kafka: KafkaRuntime | None = None, toxiproxy: ToxiproxyRuntime | None = None):
        self.spec = spec or ClusterSpec()
        self.kafka = kafka or kafka_runtime(self.spec.kafka_version)
        self.toxiproxy_bin = toxiproxy or toxiproxy_runtime()
        self.java = java_binary()
        self.detached = detached
        self.nodes = nodes
        self.cutter = cutter
        self.network = network
        self.topology: Topology | None = None
        self.session: Session | None = None
        self._launch: dict[str, NodeLaunch] = {}
        self._procs: dict[str, NodeProcess] = {}
        self._paused: set[str] = set()
        self._admin: ClusterAdmin | None = None
        #: the topics runs created here (:meth:`note_run_topic`), deleted when a pool hands the cluster out again
        self._run_topics: set[str] = set()
        self.proxy_api: ToxiproxyClient | None = None
        self.startup_seconds: float | None = None
        #: KRaft: the id every node's storage was formatted with
        self.cluster_id: str | None = None

    # ------------------------------------------------------------ capabilities
    def unavailable_reason(self, capability: Capability) -> str | None:
        """Why this cluster cannot do ``capability`` here, or None when it can (:data:`PROVIDED_BY`)."""
        capability = Capability(capability)
        if capability not in PROVIDED_BY:
            return None  # process, link and log faults: every cluster runs nodes behind Toxiproxy
        protocol, attribute = PROVIDED_BY[capability]
        part: NetworkCutter | NodeNetwork | None = getattr(self, attribute) if attribute else None
        if not isinstance(self, protocol) or (attribute and part is None):
            return self.missing.get(capability, f"the {self.backend_name} backend has no {capability.value}")
        return part.unavailable_reason(self) if part is not None else None

    @property
    def capabilities(self) -> frozenset[Capability]:
        return frozenset(c for c in Capability if self.unavailable_reason(c) is None)

    # ------------------------------------------------------------ lifecycle
    def __enter__(self) -> Self:
        self._sigterm = terminate_on_sigterm()
        self._sigterm.__enter__()
        try:
            return self.start()
        except BaseException:
            self._sigterm.__exit__(None, None, None)
            raise

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
        finally:
            self._sigterm.__exit__(None, None, None)

    def start(self) -> Self:
        """Start every node and return once the cluster is usable (see module doc)."""
        self.nodes.open(self)  # not in startup_seconds: reaping leftovers, building images once per machine
        t0 = time.monotonic()
        self.session = Session("cluster", detached=self.detached)
        try:
            self.topology = plan(self.spec, self.nodes.addresses(self))
            self._prepare_launches()
            self._start_toxiproxy()
            for zk in self.topology.zookeepers:
                self._spawn(zk.node)
            deadline = time.monotonic() + self.spec.start_timeout_s
            for zk in self.topology.zookeepers:
                self._wait_zk(zk.node, zk.client, deadline)
            for node in self.topology.node_names:  # isolated controllers first, then brokers
                if node not in self._procs:
                    self._spawn(node)
            self._wait_usable(deadline)
            self._write_state()
        except BaseException:
            self._preserve_logs()
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - t0
        return self

    def adopt(self, session_dir: Path) -> Self:
        """Drive the running cluster another driver started (``chaos cluster up``, a test's session cluster),
        for ``chaos run --cluster``: its processes adopted by their recorded (pid, start time), its
        topology and launches read from the state :meth:`start` wrote, healed before it is handed out
        (a driver that attached it before may have died with a node paused or a link cut). ``self``
        must be built on the cluster's spec (:func:`attach_state`).

        What a fault does to it is done as on a cluster of our own: a killed broker is restarted from
        its recorded command line into the same session directory, and outlives this driver;
        :meth:`stop` only lets go (:meth:`chaos.process.Session.attach`). One driver at a time.
        Raises :class:`UsageError` naming what to change."""
        name = session_dir.name
        topology, launches, state = attach_state(session_dir)
        try:
            self.session = Session.attach(session_dir)
        except SessionInUse as exc:
            raise UsageError(f"cluster {name} is in use by another chaos command (pid {exc}): wait for it to end, "
                             "or start another cluster with `chaos cluster up`") from None
        try:
            self.topology, self._launch = topology, launches
            self.cluster_id, self.startup_seconds = state.get("cluster_id"), state.get("startup_seconds")
            self._adopt_replaced()
            host = topology.address("toxiproxy")
            self.proxy_api = ToxiproxyClient(host, topology.toxiproxy_api)
            if "toxiproxy" not in self._procs or not self.proxy_api.ping():
                raise UsageError(f"cluster {name}'s Toxiproxy is not running, so its links cannot be faulted: stop it "
                                 f"with `chaos cluster down {name}` and start another")
            self.heal()
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def attached(self) -> bool:
        """Started by another driver and attached (:meth:`adopt`): :meth:`stop` lets go instead of ending it."""
        return self.session is not None and self.session.attached

    def _adopt_replaced(self) -> None:
        """Take as the node the process recorded for it in the session directory when it is not the one we hold:
        a driver that attached this cluster (``chaos run --cluster``) restarted it, or we are that driver. A
        node such a driver left SIGSTOPped (it died mid-fault) is known paused, so :meth:`heal` thaws it."""
        if self.session is None or self.nodes.kind != "process":
            return  # containers are driven by the engine that made them: nothing is attached
        logs = {n: launch.log_path for n, launch in self._launch.items()} | {"toxiproxy": self.workdir / "toxiproxy.log"}
        known = {n: proc.pid for n, proc in self._procs.items() if proc.pid is not None}
        self._procs.update(self.session.adopted(logs, known))
        self._paused.update(n for n, proc in self._procs.items() if proc.pid is not None and is_stopped(proc.pid))

    @property
    def failed_logs_dir(self) -> Path:
        """Where node logs of a cluster that failed to start are kept (the workdir is deleted)."""
        assert self.session is not None
        return cache_root() / "failed-starts" / self.session.id

    def _preserve_logs(self) -> None:
        if self.session is None or not self.session.dir.exists():
            return
        self.nodes.keep_output(self)
        dest = self.failed_logs_dir
        logs = list(self.session.dir.glob("*/*.log"))
        if not logs:
            return
        for log in logs:
            (dest / log.parent.name).mkdir(parents=True, exist_ok=True)
            shutil.copy(log, dest / log.parent.name / log.name)
        # keep the last few failures only
        runs = sorted(dest.parent.iterdir(), key=lambda p: p.stat().st_mtime)
        for old in runs[:-5]:
            shutil.rmtree(old, ignore_errors=True)

    def stop(self) -> None:
        """End every node and proxy (and what the runner made outside the session), delete the cluster's directory."""
        # the admin first: kafka-python 3's IO thread would otherwise log every refused reconnect to the nodes
        # stopping under it
        if self._admin is not None:
            self._admin.close()
            self._admin = None
        if self.attached:  # not ours to end: say what runs now (a restarted node's pid) and let go
            try:
                if self.session is not None and self.session.dir.exists():
                    self._write_state()
            finally:
                if self.session is not None:
                    self.session.close()
            return
        try:
            self.nodes.close(self)
        finally:
            if self.session is not None:
                self.session.close()
            self._procs.clear()

    # ------------------------------------------------------------ setup helpers
    @property
    def workdir(self) -> Path:
        assert self.session is not None, "cluster not started"
        return self.session.dir

    def launch(self, node: str) -> NodeLaunch:
        """How ``node`` is started (command line, log, configuration)."""
        return self._launch[node]

    def _prepare_launches(self) -> None:
        topo = self.topology
        assert topo is not None
        for zk in topo.zookeepers:
            d = self.workdir / zk.node
            (d / "data").mkdir(parents=True)
            (d / "data" / "myid").write_text(f"{zk.myid}\n")
            cfg = zk_config(topo, zk, d / "data")
            self._write_node(zk.node, d, cfg, "org.apache.zookeeper.server.quorum.QuorumPeerMain", self.spec.zk_heap_mb,
                             "zoo.cfg")
        for c in topo.controllers:
            if c.node.startswith("broker-"):
                continue  # combined: the broker's own configuration carries the controller role
            d = self.workdir / c.node
            (d / "data").mkdir(parents=True)
            props = controller_properties(topo, c, d / "data")
            self._write_node(c.node, d, props, "kafka.Kafka", self.spec.zk_heap_mb * 2, "server.properties")
        for b in topo.brokers:
            d = self.workdir / b.node
            (d / "data").mkdir(parents=True)
            props = broker_properties(topo, b, d / "data")
            self._write_node(b.node, d, props, "kafka.Kafka", self.spec.broker_heap_mb, "server.properties")
        if self.spec.kraft:
            self._format_storage()

    def _format_storage(self) -> None:
        """Format every KRaft node's log directory with this cluster's own id (``kafka-storage format``).

        Static voters (``controller.quorum.voters``, KIP-595) need no ``--standalone`` / ``--initial-controllers``
        (KIP-853). The JVMs run side by side: each takes a second or two to start.
        """
        self.cluster_id = new_cluster_id()
        fmt = [self.java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
               "-cp", self.kafka.classpath, "kafka.tools.StorageTool", "format", "-t", self.cluster_id, "-c"]
        procs = {name: subprocess.Popen([*fmt, str(launch.config_path)], stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True)
                 for name, launch in self._launch.items()}
        failed = []
        for name, proc in procs.items():
            try:
                out, _ = proc.communicate(timeout=max(30.0, self.spec.start_timeout_s / 2))
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _ = proc.communicate()
            if proc.returncode != 0:
                failed.append(f"{name}: {' | '.join(out.strip().splitlines()[-2:])[:300]}")
        if failed:
            raise InfrastructureError(f"kafka-storage format failed for {'; '.join(failed)}")

    def _write_node(self, name: str, d: Path, cfg: dict[str, str], main: str, heap: int, cfg_name: str) -> None:
        cfg_path = d / cfg_name
        cfg_path.write_text(render_properties(cfg))
        log = d / f"{name}.log"
        if self.kafka.log4j2 and main == "kafka.Kafka":
            (d / "log4j2.properties").write_text(log4j2_properties(log))
            logging = f"-Dlog4j2.configurationFile=file:{d / 'log4j2.properties'}"
        else:
            (d / "log4j.properties").write_text(log4j_properties(log))
            logging = f"-Dlog4j.configuration=file:{d / 'log4j.properties'}"
        argv = (self.java, *jvm_args(heap, self.spec.jvm_profile), logging,
                f"-Dkafka.logs.dir={d}", "-cp", self.kafka.classpath, main, str(cfg_path))
        self._launch[name] = NodeLaunch(name, argv, d / "stdout.log", cfg_path, cfg)

    def _spawn(self, node: str) -> NodeProcess:
        proc = self.nodes.spawn(self, node, self._procs.get(node))
        self._procs[node] = proc
        self._paused.discard(node)
        return proc

    def _start_toxiproxy(self) -> None:
        topo = self.topology
        assert topo is not None
        host = topo.address("toxiproxy")
        proc = self.nodes.spawn_toxiproxy(self, host, topo.toxiproxy_api)
        self._procs["toxiproxy"] = proc
        self.proxy_api = ToxiproxyClient(host, topo.toxiproxy_api)
        deadline = time.monotonic() + self.nodes.toxiproxy_timeout_s
        while not self.proxy_api.ping():
            self._check_alive("toxiproxy")
            if time.monotonic() > deadline:
                raise InfrastructureError(f"toxiproxy {self.nodes.kind} did not answer on {host}:{topo.toxiproxy_api}: "
                                          f"{proc.log_tail()}")
            time.sleep(0.05)
        self.proxy_api.populate([ProxySpec(link.name, topo.listen(link), topo.upstream(link)) for link in topo.links])

    def _check_alive(self, node: str) -> None:
        proc = self._procs[node]
        if not proc.alive():
            raise InfrastructureError(self.nodes.exit_message(self, node, proc))

    def _wait_zk(self, node: str, port: int, deadline: float) -> None:
        assert self.topology is not None
        while True:
            self._check_alive(node)
            mode = zk_mode(port, host=self.topology.address(node))
            if mode in ("standalone", "leader", "follower"):
                return
            if time.monotonic() > deadline:
                raise InfrastructureError(f"{node} did not become ready (srvr answered {mode!r}): "
                                          f"{self._procs[node].log_tail()}")
            time.sleep(0.1)

    def _wait_usable(self, deadline: float) -> None:
        topo = self.topology
        assert topo is not None
        want = [b.broker_id for b in topo.brokers]

        def brokers_and_controller() -> bool | None:
            for b in topo.brokers:
                self._check_alive(b.node)
            # one connection attempt per round: a broker that exits while starting (a bad override) is named
            # by the next round's liveness check after one bootstrap timeout, not three
            controller, _ = self.admin.cluster(attempts=1)
            return True if controller is not None and self.brokers_see_each_other() else None

        retry(brokers_and_controller, deadline, f"brokers {want} to register, see each other and elect a controller")
        # single attempts inside retry(): this loop's own deadline bounds the cluster's start
        retry(lambda: self.admin.coordinator_id("chaos-ready", wait=False), deadline,
              "__consumer_offsets to be created")

        def offsets_led() -> bool | None:
            parts = self.admin.partitions("__consumer_offsets", wait=False)
            return True if parts and all(p["leader"] >= 0 for p in parts) else None

        retry(offsets_led, deadline, "every __consumer_offsets partition to have a leader")
        def ready_topic() -> bool:
            self.admin.create_topic(READY_TOPIC, 1, self.spec.effective_rf, wait=False)
            return True

        retry(ready_topic, deadline, f"topic {READY_TOPIC} to be created")
        retry(lambda: self.produce_probe(READY_TOPIC), deadline, "an acks=all produce through the proxies")

    def produce_probe(self, topic: str, lane: str = CONTROL_LANE, timeout: float = 5.0,
                      partition: int | None = None) -> int | None:
        """Produce one record with ``acks=all`` via ``lane`` (to ``partition`` if given); its offset, or None if
        not acked."""
        result: dict[str, Any] = {}

        def on_delivery(err: Any, msg: Any) -> None:
            result["err"], result["offset"] = err, (msg.offset() if err is None else None)

        p = Producer({"bootstrap.servers": self.bootstrap(lane), "acks": "all", "message.timeout.ms": int(timeout * 1000),
                      "log_level": 0})
        if partition is None:
            p.produce(topic, b"probe", on_delivery=on_delivery)
        else:
            p.produce(topic, b"probe", partition=partition, on_delivery=on_delivery)
        p.flush(timeout + 1)
        return result.get("offset")

    def _write_state(self) -> None:
        (self.workdir / "cluster.json").write_text(json.dumps(self.status(), indent=2, default=str))
        # what adopt() needs to drive the cluster from another process (topology, command lines)
        state = {"backend": self.backend_name,
                 "topology": TypeAdapter(Topology).dump_python(self._topology(), mode="json"),
                 "launches": TypeAdapter(dict[str, NodeLaunch]).dump_python(self._launch, mode="json"),
                 "cluster_id": self.cluster_id, "startup_seconds": self.startup_seconds}
        (self.workdir / ATTACH_STATE).write_text(json.dumps(state))

    # ------------------------------------------------------------ accessors
    @property
    def admin(self) -> ClusterAdmin:
        if self._admin is None:
            # the bootstrap is asked on the first request: reading the attribute never fails (a protocol check reads it)
            self._admin = ClusterAdmin(lambda: self.bootstrap(CONTROL_LANE))
        return self._admin

    def note_run_topic(self, topic: str) -> None:
        """Remember that a run creates ``topic`` here (noted before it asks Kafka): :meth:`drop_run_topics`."""
        self._run_topics.add(topic)

    def drop_run_topics(self) -> None:
        """Delete the topics earlier runs created here; the caller has healed the cluster (a ZooKeeper-mode
        deletion waits for every replica's broker).

        Why: a broker started again after SIGKILL recovers every log it holds before it serves, and a pooled
        cluster kept every run's topic. In an hour of exploration on 3.9.1 the confirmed heal of a broker kill
        grew from 3-5 s (runs 3-34) to 10-22 s (runs 99-128). :class:`chaos.runner.ClusterPool` calls this
        before it hands a cluster out again, so a run's topic is kept until the next run on that cluster
        starts (a test may read it after its run). The brokers remove the logs a second later
        (``log.segment.delete.delay.ms``, :mod:`chaos.cluster.settings`). Best effort: a topic the controller
        did not delete stays noted and is asked for again next time; the next run does not need it gone."""
        self._run_topics = self.admin.delete_topics(self._run_topics)

    def bootstrap(self, lane: str = CONTROL_LANE) -> str:
        assert self.topology is not None, "cluster not started"
        return self.topology.bootstrap(lane)

    def _node(self, node: str) -> NodeLaunch:
        if node not in self._launch:
            raise UsageError(f"unknown node {node!r}: nodes are {', '.join(self._launch)}")
        return self._launch[node]

    def _topology(self) -> Topology:
        assert self.topology is not None, "cluster not started"
        return self.topology

    def log_path(self, node: str) -> Path:
        """The node's own log (Kafka's server log, or ZooKeeper's)."""
        self._node(node)
        return self.workdir / node / f"{node}.log"

    def process(self, node: str) -> NodeProcess:
        self._node(node)
        return self._procs[node]

    def processes(self) -> dict[str, NodeProcess]:
        """Every node's (and Toxiproxy's) current process, by name."""
        return dict(self._procs)

    def is_running(self, node: str) -> bool:
        return node in self._procs and self._procs[node].alive()

    def is_paused(self, node: str) -> bool:
        proc = self._procs.get(node)
        return proc is not None and self.nodes.is_frozen(proc, node in self._paused)

    @staticmethod
    def broker_name(broker_id: int | None) -> str | None:
        return None if broker_id is None else f"broker-{broker_id}"

    # ------------------------------------------------------------ roles
    # Each waits, bounded (ClusterAdmin.settled), through transient answers — a topic just created,
    # a partition between leaders, an election, a coordinator loading — and then either names the
    # node or raises one InfrastructureError line saying what it waited for and what it saw last.
    def controller(self) -> str | None:
        """The controller (an election in progress is waited through): under ZooKeeper the controller broker
        (DescribeCluster), under KRaft the active controller (:meth:`active_controller`) — a KRaft broker answers
        DescribeCluster with a random live broker as "controller" (KIP-590), never the quorum leader."""
        if self.spec.kraft:
            return self.active_controller()
        return self.broker_name(self.admin.controller_id(wait=True))

    def active_controller(self, wait_s: float = SETTLE_S) -> str:
        """The KRaft quorum leader, asked of the voters themselves (DescribeQuorum on their controller listeners,
        KIP-595 / KIP-919 — not through Toxiproxy, so a cut link does not hide the answer).

        The newest leader epoch any live voter reports wins; an election in progress, or a leader that is
        dead or frozen (survivors name it until their election timeout), is waited through, bounded.
        """
        from chaos.cluster import wire

        topo = self._topology()

        def ask() -> str | None:
            best = None
            for c in topo.controllers:
                if not self.is_running(c.node) or self.is_paused(c.node):
                    continue
                try:
                    q = wire.describe_quorum(f"{topo.address(c.node)}:{c.port}", timeout_s=1.0)
                except wire.WireError:
                    continue
                if q.leader_id >= 0 and (best is None or q.leader_epoch > best.leader_epoch):
                    best = q
            node = topo.node_of_id(best.leader_id) if best is not None else None
            return node if node is not None and self.is_running(node) and not self.is_paused(node) else None

        return retry(ask, time.monotonic() + wait_s, "the KRaft quorum to name a live leader (DescribeQuorum)")

    def leader_of(self, topic: str, partition: int) -> str | None:
        """The leader of ``topic``-``partition`` (a partition between leaders is waited through)."""
        return self.broker_name(self.admin.leader_id(topic, partition, wait=True))

    def coordinator_of(self, group: str) -> str | None:
        """The group's coordinator (FindCoordinator; COORDINATOR_NOT_AVAILABLE is waited through)."""
        return self.broker_name(self.admin.coordinator_id(group, wait=True))

    # ------------------------------------------------------------ process faults
    def kill(self, node: str, sig: int = signal.SIGKILL, wait: bool = True) -> None:
        """Send ``sig`` to the node; SIGKILL/SIGTERM also wait for it to exit (bounded) unless ``wait=False``.

        SIGTERM is a clean stop (Kafka's controlled shutdown) with SIGKILL after 30 s.
        """
        proc = self.process(node)
        if sig == signal.SIGKILL and not wait:
            proc.signal(signal.SIGKILL)  # the caller reaps it (e.g. after timing the effect)
        elif sig == signal.SIGKILL:
            proc.kill()
        elif sig == signal.SIGTERM:
            proc.terminate(grace=30.0)
        else:
            proc.signal(sig)
        self._paused.discard(node)

    def restart(self, node: str) -> None:
        """Kill the node if it runs, then start it again on its data."""
        self._node(node)
        if self.is_running(node):
            self.kill(node)
        self.start_node(node)

    def start_node(self, node: str) -> None:
        """Start a stopped node on its data.

        A broker that died uncleanly leaves its ephemeral ``/brokers/ids/<id>``
        znode until its ZooKeeper session expires; a new process registering
        before that exits with ``NodeExistsException`` (KafkaZkClient.registerBroker).
        So wait, bounded, until the cluster no longer lists the broker.
        """
        if self.is_running(node):
            return
        if node.startswith("broker-") and not self.spec.kraft:
            bid = self._topology().broker(node).broker_id
            deadline = time.monotonic() + 3 * BROKER_ZK_SESSION_MS / 1000
            while time.monotonic() < deadline and self.zk_has_ephemeral(f"/brokers/ids/{bid}"):
                time.sleep(0.1)
        self._spawn(node)

    def zk_has_ephemeral(self, path: str) -> bool:
        """Does any ZooKeeper node list ``path`` among its sessions' ephemeral nodes (4lw ``dump``)?"""
        topo = self._topology()
        for zk in topo.zookeepers:
            if not self.is_running(zk.node):
                continue
            text = zk_command(zk.client, b"dump", host=topo.address(zk.node)) or ""
            if "Sessions with Ephemerals" in text:  # only the leader (or a standalone server) knows
                return any(line.strip() == path for line in text.splitlines())
        return False

    def wait_broker_registered(self, node: str, timeout: float = 60.0) -> None:
        topo = self._topology()
        bid = topo.broker(node).broker_id
        # every running broker's view: the controller's decides CreateTopics, the others' route clients
        running = [b.broker_id for b in topo.brokers if self.is_running(b.node) and not self.is_paused(b.node)]
        retry(lambda: True if all(bid in self.admin.brokers_seen_by(b) for b in running) else None,
              time.monotonic() + timeout, f"{node} to register and be seen by every running broker")

    # ------------------------------------------------------------ link faults
    def _proxy(self) -> ToxiproxyClient:
        assert self.proxy_api is not None, "cluster not started"
        return self.proxy_api

    def link_names(self) -> list[str]:
        return [link.name for link in self._topology().links]

    def links_of(self, node_or_lane: str) -> list[str]:
        return [link.name for link in self._topology().links_of(node_or_lane)]

    def link_down(self, link: str) -> None:
        self._topology().link(link)
        self._proxy().set_enabled(link, False)

    def link_up(self, link: str) -> None:
        self._topology().link(link)
        self._proxy().set_enabled(link, True)

    def add_toxic(self, link: str, toxic: Toxic) -> None:
        self._topology().link(link)
        self._proxy().add_toxic(link, toxic)

    def toxics(self, link: str) -> list[dict[str, Any]]:
        """The toxics on ``link`` as Toxiproxy's API lists them (``GET /proxies/<link>/toxics``)."""
        return self._proxy().toxics(link)

    def remove_toxic(self, link: str, name: str) -> None:
        self._proxy().remove_toxic(link, name)

    def reset_links(self) -> None:
        """Heal every link: enable all proxies, remove all toxics."""
        self._proxy().reset()

    # ------------------------------------------------------------ healing and status
    def brokers_see_each_other(self) -> bool:
        """Does every broker's own metadata cache list every broker? (see ClusterAdmin.brokers_seen_by)"""
        want = [b.broker_id for b in self._topology().brokers]
        try:
            return all(self.admin.brokers_seen_by(bid) == want for bid in want)
        except Exception:  # noqa: BLE001 - a broker not reachable yet is "not whole", not an error
            return False

    def _heal_network(self) -> None:
        """Put disconnected nodes back first (their rules live in their own namespaces), then drop every cut."""
        if self.network is not None:
            self.network.reconnect_all(self)
        if self.cutter is not None:
            self.cutter.clear(self)

    def heal(self, timeout: float = 90.0) -> None:
        """Undo every fault: thaw paused nodes, restart dead ones, heal links, wait until whole and usable.

        "Whole" is checked even when nothing was dead: a thawed broker, or one
        restarted by a fault's own heal, can be running yet not (again) in the
        controller's view for seconds, and the next test would see a
        cluster one broker short. A node that dies while we wait (for
        instance a broker that lost the race with its old ZooKeeper session)
        is started again, a bounded number of times.
        """
        self._adopt_replaced()
        for node in list(self._paused):
            self.nodes.thaw(self.process(node))
            self._paused.discard(node)
        self.reset_links()
        self._heal_network()
        topo = self._topology()
        deadline = time.monotonic() + timeout
        for attempt in range(3):
            dead = [n for n in self._launch if not self.is_running(n)]
            for node in dead:
                self.start_node(node)
            if not dead and self.brokers_see_each_other():
                return
            try:
                for zk in topo.zookeepers:
                    self._wait_zk(zk.node, zk.client, deadline)
                self._wait_usable(deadline)
                return
            except InfrastructureError:
                if attempt == 2 or time.monotonic() >= deadline or all(self.is_running(n) for n in self._launch):
                    raise

    def status(self) -> dict[str, Any]:
        """Everything a user needs to see: ports, links, pids and every effective setting."""
        topo = self._topology()
        nodes = {}
        for name, launch in self._launch.items():
            proc = self._procs.get(name)
            nodes[name] = {
                "pid": proc.pid if proc else None,
                "running": bool(proc and proc.alive()),
                "paused": self.is_paused(name),
                "log": str(self.workdir / name / f"{name}.log"),
                "config_file": str(launch.config_path),
                "effective_config": launch.config,
                "jvm": list(launch.argv[1:launch.argv.index("-cp")]),
                **self.nodes.describe(proc),
            }
        toxiproxy = self._procs.get("toxiproxy")
        return {
            "backend": self.backend_name,
            "session": self.session.id if self.session else None,
            "workdir": str(self.workdir),
            "kafka_version": self.spec.kafka_version,
            "mode": self.spec.metadata_mode.value,
            "cluster_id": self.cluster_id,
            "kafka_tools_version": self.kafka.tools_version,
            "toxiproxy_version": self.toxiproxy_bin.version,
            "spec": self.spec.model_dump(),
            "toxiproxy": {"api": f"http://{topo.address('toxiproxy')}:{topo.toxiproxy_api}",
                          "pid": toxiproxy.pid if toxiproxy is not None else None,
                          **self.nodes.describe(toxiproxy)},
            "bootstrap": {lane: topo.bootstrap(lane) for lane in topo.lane_names},
            "links": [{"name": link.name, "listen": topo.listen(link), "upstream": topo.upstream(link)}
                      for link in topo.links],
            "nodes": nodes,
            "startup_seconds": self.startup_seconds,
            "capabilities": sorted(self.capabilities),
            **self.nodes.status(self),
        }


# ---------------------------------------------------------------- optional capabilities
# Small classes a backend lists when it has the part; each only adds the protocol's methods and
# delegates to the part (see module doc). They extend the shared orchestration, never a backend.

class Pausing(KafkaCluster):
    """:class:`chaos.cluster.Pausable` through the node runner's freezer."""

    def pause(self, node: str) -> None:
        """Freeze every process of the node (SIGSTOP, or ``docker pause``'s cgroup freezer)."""
        self.nodes.freeze(self.process(node))
        self._paused.add(node)

    def resume(self, node: str) -> None:
        """Thaw the node (SIGCONT, or ``docker unpause``)."""
        self.nodes.thaw(self.process(node))
        self._paused.discard(node)


class PairPartitioning(KafkaCluster):
    """:class:`chaos.cluster.PairPartitionable` through the network cutter."""

    def _cutter(self, what: str) -> NetworkCutter:
        reason = "no network cutter" if self.cutter is None else self.cutter.unavailable_reason(self)
        if reason:
            raise UsageError(f"{what}: {reason}")
        assert self.cutter is not None
        return self.cutter

    def partition(self, a: str, b: str) -> None:
        """Cut broker ``a`` from broker ``b`` (both directions; clients and ZooKeeper unaffected)."""
        self._cutter(f"cannot partition {a} from {b}").cut(self, a, b)

    def unpartition(self, a: str, b: str) -> None:
        self._cutter(f"cannot heal the partition of {a} from {b}").mend(self, a, b)

    def partition_rules(self) -> list[str]:
        """The cutter's rules in force, one line each (empty when none, or when it cannot work here)."""
        if self.cutter is None or self.cutter.unavailable_reason(self) is not None:
            return []
        return self.cutter.rules(self)


class NetworkDisconnecting(KafkaCluster):
    """:class:`chaos.cluster.NetworkDisconnectable` through the node network."""

    def _network(self, what: str) -> NodeNetwork:
        reason = "no node network" if self.network is None else self.network.unavailable_reason(self)
        if reason:
            raise UsageError(f"{what}: {reason}")
        assert self.network is not None
        return self.network

    def disconnect(self, node: str) -> None:
        """Take ``node`` off the network: it loses every connection (clients, ZooKeeper, brokers)."""
        self._network(f"cannot disconnect {node}").disconnect(self, node)

    def reconnect(self, node: str) -> None:
        """Put ``node`` back with its own address (its configs name it)."""
        if self.network is not None:
            self.network.reconnect(self, node)

    def is_connected(self, node: str) -> bool:
        """Is the node on the network? (always, for a network that cannot be left)"""
        return self.network is None or self.network.is_connected(self, node)


def attach_state(session_dir: Path) -> tuple[Topology, dict[str, NodeLaunch], dict[str, Any]]:
    """What :meth:`KafkaCluster.adopt` needs of a running cluster: its topology (spec included), every node's
    launch, and the rest of the state :meth:`KafkaCluster.start` wrote. Raises :class:`UsageError`."""
    state = read_state(session_dir)
    try:
        return topology_of(state), TypeAdapter(dict[str, NodeLaunch]).validate_python(state["launches"]), state
    except ValueError as exc:
        raise UsageError(f"cluster {session_dir.name} cannot be attached: its {ATTACH_STATE} does not read "
                         f"({type(exc).__name__}); start one with `chaos cluster up`") from None


def zk_command(port: int, word: bytes, timeout: float = 1.0, host: str = LOOPBACK) -> str | None:
    """A ZooKeeper four-letter word's answer, None if the node is unreachable."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(word)
            data = b""
            while chunk := s.recv(4096):
                data += chunk
    except OSError:
        return None
    return data.decode(errors="replace")


def zk_mode(port: int, timeout: float = 1.0, host: str = LOOPBACK) -> str | None:
    """ZooKeeper's ``srvr`` answer's Mode line (standalone/leader/follower), None if unreachable."""
    text = zk_command(port, b"srvr", timeout, host)
    if text is None:
        return None
    for line in text.splitlines():
        if line.startswith("Mode:"):
            return line.split(":", 1)[1].strip()
    return text.strip()[:80] or None
