"""The docker backend: ZooKeeper, Kafka brokers and Toxiproxy as containers.

:class:`DockerCluster` is the same orchestration as the local backend
(:class:`chaos.cluster.kafka_cluster.KafkaCluster`: the same
:func:`chaos.cluster.topology.plan`, the same generated configuration, the
same readiness checks — ZooKeeper ``srvr``, DescribeCluster,
``__consumer_offsets`` led, an ``acks=all`` produce through the proxies — the
same link faults), composed with container parts:

* :class:`ContainerNodes` — every node is a container of a locally built
  image (:mod:`chaos.cluster.images`), started on our engine
  (:mod:`chaos.cluster.container_engine`, or ``$KAFKA_CHAOS_DOCKER_HOST``);
* :class:`BridgeNetwork` — **networking**, chosen by ``network`` (default ``auto``):

  - ``bridge`` — a user-defined Docker network of the cluster's own
    (``<session>-net``, a /24 in 10.213.0.0/16, fixed addresses: Toxiproxy
    .2, ZooKeeper .11…, brokers .101…). Every node listens on its own
    address; brokers advertise Toxiproxy's address and their proxy ports,
    reach ZooKeeper through Toxiproxy and each other directly. Only in this
    mode do the container-network faults exist: ``docker network
    disconnect``/``connect`` of a node (:meth:`DockerCluster.disconnect`), and
    pair-wise broker partitions by iptables rules inside the broker's own
    container (``NET_ADMIN``; :class:`ContainerFirewall`). Allowed only when
    the engine runs in a network namespace the project created
    (``scripts/docker-engine.sh run --netns NAME``): the bridge and every
    container address then exist only inside it, and the processes that
    talk to them run there too.
  - ``host`` — containers share the engine's network namespace and bind
    127.0.0.1 on the planned ports exactly like the local backend; no
    container-network faults (the engine in the root namespace runs with
    ``--bridge=none --iptables=false``).
  - ``auto`` — ``bridge`` when the engine runs in a namespace of ours and
    this process is inside it, else ``host``.
* each node's directory (config, data, log) is bind-mounted at the *same*
  path, so the generated configuration works unchanged and
  :meth:`DockerCluster.log_path` is a host file the observer tails;
* faults are Docker's own: ``kill`` = ``docker kill`` semantics (any signal to
  the container's main process, delivered directly for millisecond timing —
  see :meth:`chaos.cluster.container.ContainerProcess.signal`), SIGTERM =
  ``docker stop`` (controlled shutdown, SIGKILL after the grace period),
  ``pause``/``resume`` = ``docker pause``/``unpause`` (cgroup freezer: the JVM
  is frozen, not signalled), ``restart``/``start_node`` start the same
  container again on its data; all Toxiproxy faults as in the local backend;
* cleanup: containers carry ``kafka-chaos.session``/``node``/``owner`` labels;
  :meth:`DockerCluster.stop` removes this session's containers (with their
  anonymous volumes) and its network (no named volume is ever created), and
  every start first removes containers and networks whose driver is gone
  (:func:`chaos.cluster.container.reap_containers`).

>>> with DockerCluster(ClusterSpec(brokers=3)) as cluster:   # doctest: +SKIP
...     cluster.pause(cluster.coordinator_of("g"))         # docker pause
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import docker
from docker.errors import APIError, DockerException
from docker.models.containers import Container
from docker.models.networks import Network
from testcontainers.core.config import testcontainers_config
from testcontainers.core.container import DockerContainer

from chaos.cluster import NodeProcess
from chaos.cluster.container import (
    LABEL_NODE,
    LABEL_OWNER,
    LABEL_SESSION,
    ContainerProcess,
    owner_label,
    reap_containers,
    remove_session_containers,
    remove_session_networks,
)
from chaos.cluster.container_engine import DockerEngine, EngineUnavailable, in_netns
from chaos.cluster.images import JAVA, KAFKA_LIBS, TOXIPROXY_BIN, Images, ensure_images
from chaos.cluster.kafka_cluster import KafkaCluster, NetworkDisconnecting, PairPartitioning, Pausing
from chaos.cluster.runtime import KafkaRuntime, ToxiproxyRuntime
from chaos.errors import InfrastructureError, UsageError
from chaos.model.backend import BackendName
from chaos.model.cluster import ClusterSpec


def default_docker_host() -> str:
    """``$KAFKA_CHAOS_DOCKER_HOST`` if set, else the socket of our own engine."""
    return os.environ.get("KAFKA_CHAOS_DOCKER_HOST") or DockerEngine().docker_host


#: the cluster networks' /24s are carved from here (inside the engine's own network namespace)
SUBNET_PREFIX = "10.213"
NETWORK_MODES = ("auto", "bridge", "host")


class EngineConnection:
    """One docker SDK client to the engine at ``docker_host``, opened on first use and shared by the parts."""

    def __init__(self, docker_host: str):
        self.docker_host = docker_host
        self._client: docker.DockerClient | None = None

    @property
    def opened(self) -> bool:
        return self._client is not None

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            try:
                client = docker.DockerClient(base_url=self.docker_host, timeout=120)
                client.ping()
            except DockerException as exc:
                raise EngineUnavailable(f"no Docker engine answers at {self.docker_host} ({type(exc).__name__}): "
                                        "start one with `scripts/docker-engine.sh start`") from None
            self._client = client
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def labels(cluster: KafkaCluster, node: str) -> dict[str, str]:
    """The labels every container and network of ``cluster`` carries (reaping finds them by these)."""
    assert cluster.session is not None
    return {LABEL_SESSION: cluster.session.id, LABEL_NODE: node, LABEL_OWNER: owner_label()}


def container_of(cluster: KafkaCluster, node: str) -> Container:
    proc = cluster.process(node)
    assert isinstance(proc, ContainerProcess)
    return proc.container


class BridgeNetwork:
    """The cluster's own Docker network (bridge mode), or the engine's namespace (host mode); see module doc."""

    def __init__(self, engine: EngineConnection, request: str = "auto"):
        if request not in NETWORK_MODES:
            raise UsageError(f"docker network {request!r}: choose one of {', '.join(NETWORK_MODES)}")
        self.engine = engine
        self.request = request
        #: "bridge" or "host" once resolved by a start (see module doc)
        self.mode = "host" if request == "host" else "unresolved"
        self.network: Network | None = None
        self.disconnected: set[str] = set()

    def resolve(self) -> None:
        """Choose bridge or host networking for the engine this process talks to (before a start)."""
        rec = DockerEngine().record()
        ours = rec is not None and rec.docker_host == self.engine.docker_host
        if rec is not None and ours and rec.netns and not in_netns(rec.netns):
            raise UsageError(f"the docker engine at {self.engine.docker_host} runs in network namespace {rec.netns}: "
                             f"run this inside it (`nsenter --net=/run/netns/{rec.netns} ...` or "
                             f"`scripts/docker-engine.sh run --netns {rec.netns} -- ...`)")
        isolated = bool(rec is not None and ours and rec.netns)
        if self.request == "bridge" and not isolated:
            raise UsageError("docker network bridge needs the engine in a network namespace of kafka-chaos's own, so "
                             "container addresses never leave it: `scripts/docker-engine.sh run --netns NAME -- ...`")
        self.mode = "bridge" if self.request == "bridge" or (self.request == "auto" and isolated) else "host"

    def unavailable_reason(self, cluster: KafkaCluster | None = None) -> str | None:
        if self.mode == "bridge":
            return None
        return ("the docker backend has it only on its own network (network bridge; this cluster runs with "
                f"{self.mode} networking): run inside the engine's namespace, "
                "`scripts/docker-engine.sh run --netns NAME -- ...`")

    def create(self, cluster: KafkaCluster) -> dict[str, str]:
        """Create the cluster's network and give every node a fixed address on it (bridge mode; else none)."""
        if self.mode != "bridge":
            return {}
        assert cluster.session is not None
        name = f"{cluster.session.id}-net"
        start = int(hashlib.sha256(cluster.session.id.encode()).hexdigest(), 16) % 250
        for attempt in range(250):
            third = (start + attempt) % 250 + 1
            ipam = docker.types.IPAMConfig(pool_configs=[
                docker.types.IPAMPool(subnet=f"{SUBNET_PREFIX}.{third}.0/24", gateway=f"{SUBNET_PREFIX}.{third}.1")])
            try:
                self.network = self.engine.client.networks.create(name, driver="bridge", ipam=ipam,
                                                                  labels=labels(cluster, "network"))
                break
            except APIError as exc:
                if "overlap" not in str(exc).lower():  # another cluster's /24: take the next one
                    raise InfrastructureError(f"could not create docker network {name}: {exc}") from None
        else:
            raise InfrastructureError(f"no free /24 left in {SUBNET_PREFIX}.0.0/16 for docker network {name}")
        base = f"{SUBNET_PREFIX}.{third}"
        addresses = {"toxiproxy": f"{base}.2"}
        addresses.update({f"zk-{i}": f"{base}.{10 + i}" for i in range(1, cluster.spec.zookeepers + 1)})
        # isolated KRaft voters (controller-N) are containers of their own; combined voters are brokers
        addresses.update({node: f"{base}.{50 + i}" for i, node in enumerate(cluster.spec.controller_nodes, 1)
                          if not node.startswith("broker-")})
        addresses.update({f"broker-{i}": f"{base}.{100 + i}" for i in range(1, cluster.spec.brokers + 1)})
        return addresses

    def attach(self, cluster: KafkaCluster, node: str) -> dict[str, Any]:
        """The container options that put ``node`` on this network at its planned address."""
        if self.mode != "bridge":
            return {"network": "host"}
        assert self.network is not None and cluster.topology is not None
        return {"network": self.network.name, "cap_add": ["NET_ADMIN"],  # iptables in its own namespace
                "networking_config": {self.network.name: self.engine.client.api.create_endpoint_config(
                    ipv4_address=cluster.topology.address(node))}}

    def disconnect(self, cluster: KafkaCluster, node: str) -> None:
        """``docker network disconnect``: the node loses every connection (clients, ZooKeeper, brokers)."""
        assert self.network is not None
        self.network.disconnect(container_of(cluster, node), force=True)
        self.disconnected.add(node)

    def reconnect(self, cluster: KafkaCluster, node: str) -> None:
        """``docker network connect`` with the node's own address again (its configs name it)."""
        assert self.network is not None and cluster.topology is not None
        container = container_of(cluster, node)
        container.reload()
        if self.network.name not in container.attrs["NetworkSettings"]["Networks"]:
            self.network.connect(container, ipv4_address=cluster.topology.address(node))
        self.disconnected.discard(node)

    def is_connected(self, cluster: KafkaCluster, node: str) -> bool:
        """Does the engine list the node on the cluster network?"""
        if self.network is None:
            return True
        container = container_of(cluster, node)
        container.reload()
        return self.network.name in container.attrs["NetworkSettings"]["Networks"]

    def reconnect_all(self, cluster: KafkaCluster) -> None:
        if self.mode != "bridge" or cluster.topology is None:
            return
        for node in sorted(self.disconnected):
            self.reconnect(cluster, node)

    def status(self) -> dict[str, Any]:
        return {"network": self.mode, "network_name": self.network.name if self.network is not None else None,
                "disconnected": sorted(self.disconnected)}


class ContainerFirewall:
    """Pair-wise partitions by DROP rules inside the broker's own container (bridge mode; ``NET_ADMIN``)."""

    def __init__(self, network: BridgeNetwork):
        self.network = network

    def unavailable_reason(self, cluster: KafkaCluster) -> str | None:
        # on host networking the containers share one namespace: a rule for one broker's address would cut all
        return self.network.unavailable_reason(cluster)

    @staticmethod
    def _iptables(cluster: KafkaCluster, node: str, *args: str) -> str:
        """Run iptables inside ``node``'s container (its own network namespace; NET_ADMIN)."""
        code, out = container_of(cluster, node).exec_run(["iptables", "-w", *args])
        text = out.decode(errors="replace").strip()
        if code != 0:
            raise InfrastructureError(f"iptables {' '.join(args)} in {node}: exit {code}: {text[:300]}")
        return text

    @staticmethod
    def _rules(cluster: KafkaCluster, a: str, b: str) -> list[list[str]]:
        assert cluster.topology is not None
        cluster.topology.broker(a), cluster.topology.broker(b)  # both must be brokers
        peer = cluster.topology.address(b)
        return [["INPUT", "-s", peer, "-j", "DROP"], ["OUTPUT", "-d", peer, "-j", "DROP"]]

    def cut(self, cluster: KafkaCluster, a: str, b: str) -> None:
        """DROP rules in ``a``'s own container for ``b``'s address, both ways.

        Clients and ZooKeeper reach ``a`` through Toxiproxy's address, so they are unaffected.
        """
        for chain, *rule in self._rules(cluster, a, b):
            self._iptables(cluster, a, "-I", chain, *rule)

    def mend(self, cluster: KafkaCluster, a: str, b: str) -> None:
        for chain, *rule in self._rules(cluster, a, b):
            try:
                self._iptables(cluster, a, "-D", chain, *rule)
            except InfrastructureError:
                pass  # already gone (the container restarted with a fresh namespace)

    def rules(self, cluster: KafkaCluster) -> list[str]:
        """DROP rules in every running broker container (``iptables -S``), as ``node: rule``."""
        if cluster.topology is None:
            return []
        out = []
        for b in cluster.topology.brokers:
            if cluster.is_running(b.node) and not cluster.is_paused(b.node):
                for chain in ("INPUT", "OUTPUT"):
                    out += [f"{b.node}: {r}" for r in self._iptables(cluster, b.node, "-S", chain).splitlines()
                            if r.endswith("-j DROP")]
        return out

    def clear(self, cluster: KafkaCluster) -> None:
        if self.unavailable_reason(cluster) or cluster.topology is None:
            return
        for b in cluster.topology.brokers:
            if cluster.is_running(b.node) and not cluster.is_paused(b.node):
                # the container's namespace is its own: flushing touches nothing else
                self._iptables(cluster, b.node, "-F", "INPUT")
                self._iptables(cluster, b.node, "-F", "OUTPUT")


class ContainerNodes:
    """Nodes as containers on our engine, created with testcontainers and driven with the docker SDK."""

    kind = "container"
    toxiproxy_timeout_s = 30.0

    def __init__(self, engine: EngineConnection, network: BridgeNetwork, images: Images | None = None):
        self.engine = engine
        self.network = network
        self.images = images

    def open(self, cluster: KafkaCluster) -> None:
        """Resolve the networking, reap containers of dead drivers, build missing images."""
        self.network.resolve()
        reap_containers(self.engine.client)
        if self.images is None:
            self.images = ensure_images(self.engine.client, cluster.kafka, cluster.toxiproxy_bin)

    def addresses(self, cluster: KafkaCluster) -> dict[str, str]:
        return self.network.create(cluster)

    def _run(self, cluster: KafkaCluster, node: str, image: str, command: list[str],
             mount: Path | None) -> ContainerProcess:
        """Create and start the node's container with testcontainers' ``DockerContainer``.

        testcontainers is given our engine explicitly (its client's environment, not the
        process-wide ``DOCKER_HOST``) and Ryuk is off (its image cannot be pulled here; our labels
        and reaping clean up). After the start, the container is driven through our own client.
        """
        assert cluster.session is not None
        testcontainers_config.ryuk_disabled = True
        tc = DockerContainer(image, docker_client_kw={"environment": {"DOCKER_HOST": self.engine.docker_host}})
        tc.with_command(command).with_name(f"{cluster.session.id}-{node}")
        if mount:
            tc.with_volume_mapping(str(mount), str(mount), "rw")  # same path: generated configs work unchanged
        tc.with_kwargs(labels=labels(cluster, node), working_dir=str(mount) if mount else "/",
                       # the JVM is pid 1: it handles SIGTERM (controlled shutdown); SIGKILL/SIGSTOP always land
                       stop_signal="SIGTERM", **self.network.attach(cluster, node))
        try:
            tc.start()
            container = self.engine.client.containers.get(tc.get_wrapped_container().id)
        finally:
            tc.get_docker_client().client.close()
        log = cluster.workdir / node / f"{node}.log" if mount else cluster.workdir / f"{node}.log"
        return ContainerProcess(node, container, log)

    @staticmethod
    def _container_argv(cluster: KafkaCluster, node: str) -> list[str]:
        """The local backend's command line with the image's java and jars."""
        argv = list(cluster.launch(node).argv)
        argv[0] = JAVA
        argv[argv.index("-cp") + 1] = f"{KAFKA_LIBS}/*"  # java expands the wildcard itself (exec form, no shell)
        return argv

    def spawn(self, cluster: KafkaCluster, node: str, previous: NodeProcess | None) -> NodeProcess:
        if isinstance(previous, ContainerProcess):
            proc = previous
            proc.start()  # same container again: its data and log are bind-mounted
        else:
            assert self.images is not None
            proc = self._run(cluster, node, self.images.kafka, self._container_argv(cluster, node),
                             cluster.launch(node).config_path.parent)
        _ = proc.pid  # learn the main process now, so a timed fault later needs no engine round trip
        return proc

    def spawn_toxiproxy(self, cluster: KafkaCluster, host: str, port: int) -> NodeProcess:
        assert self.images is not None
        return self._run(cluster, "toxiproxy", self.images.toxiproxy, [TOXIPROXY_BIN, "-host", host, "-port", str(port)],
                         None)

    def exit_message(self, cluster: KafkaCluster, node: str, proc: NodeProcess) -> str:
        assert isinstance(proc, ContainerProcess)
        kept = cluster.failed_logs_dir / node
        tail = proc.log_tail()
        hint = " (a port is already in use: retry, or pick another base_port)" if "Address already in use" in tail else ""
        return (f"{node} container exited with code {proc.exit_code()}{hint}; logs kept in {kept}: "
                f"{tail} | stdout: {proc.stdout_tail(2)}")

    def freeze(self, proc: NodeProcess) -> None:
        """``docker pause``: freeze every process of the node (cgroup freezer); no signal is sent."""
        assert isinstance(proc, ContainerProcess)
        proc.container.pause()

    def thaw(self, proc: NodeProcess) -> None:
        """``docker unpause`` (when the engine still has it frozen)."""
        assert isinstance(proc, ContainerProcess)
        if proc.paused():
            proc.container.unpause()

    def is_frozen(self, proc: NodeProcess, tracked: bool) -> bool:
        return isinstance(proc, ContainerProcess) and proc.paused()  # the engine knows, whoever froze it

    def keep_output(self, cluster: KafkaCluster) -> None:
        # the containers' stdout is only in `docker logs`: keep it next to the node logs
        for name, proc in cluster.processes().items():
            if isinstance(proc, ContainerProcess):
                try:
                    out = proc.container.logs().decode(errors="replace")
                except DockerException:
                    continue
                d = cluster.workdir / name if (cluster.workdir / name).is_dir() else cluster.workdir
                (d / f"{name}.stdout.log").write_text(out)

    def describe(self, proc: NodeProcess | None) -> dict[str, Any]:
        return {"container": proc.container.name} if isinstance(proc, ContainerProcess) else {}

    def status(self, cluster: KafkaCluster) -> dict[str, Any]:
        assert self.images is not None
        return {"docker": {"host": self.engine.docker_host, **self.network.status(),
                           "images": {"base": self.images.base, "kafka": self.images.kafka,
                                      "toxiproxy": self.images.toxiproxy}}}

    def close(self, cluster: KafkaCluster) -> None:
        """Remove this session's containers (with their anonymous volumes), then its network; close the client."""
        try:
            if cluster.session is not None and self.engine.opened:
                remove_session_containers(self.engine.client, cluster.session.id)
                remove_session_networks(self.engine.client, cluster.session.id)
        finally:
            self.network.network = None
            self.engine.close()


class DockerCluster(Pausing, PairPartitioning, NetworkDisconnecting):
    """A real cluster of containers; use as a context manager (see module doc)."""

    backend_name = BackendName.DOCKER.value

    def __init__(self, spec: ClusterSpec | None = None, *, docker_host: str | None = None,
                 kafka: KafkaRuntime | None = None, toxiproxy: ToxiproxyRuntime | None = None,
                 images: Images | None = None, detached: bool = False, network: str = "auto"):
        if detached:
            # a detached session has no recorded child processes, so reap_orphans would treat it as dead
            raise UsageError("a detached cluster (`chaos cluster up`) is not supported by the docker backend yet: "
                             "use it from Python, pytest or `chaos run`")
        engine = EngineConnection(docker_host or default_docker_host())
        bridge = BridgeNetwork(engine, network)
        self.containers = ContainerNodes(engine, bridge, images)
        super().__init__(spec, self.containers, cutter=ContainerFirewall(bridge), network=bridge,
                         kafka=kafka, toxiproxy=toxiproxy)
        self.engine = engine
        self.bridge = bridge

    @property
    def docker_host(self) -> str:
        return self.engine.docker_host

    @property
    def client(self) -> docker.DockerClient:
        """The docker SDK client to our engine (opened on first use)."""
        return self.engine.client

    @property
    def images(self) -> Images | None:
        return self.containers.images

    @property
    def network_mode(self) -> str:
        """``bridge`` or ``host`` once started (``unresolved`` before, unless ``host`` was asked for)."""
        return self.bridge.mode

    @property
    def network_request(self) -> str:
        return self.bridge.request

    def _container(self, node: str) -> Container:
        """The node's container (diagnostics: ``exec_run``)."""
        return container_of(self, node)
