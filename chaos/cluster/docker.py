"""The docker backend: ZooKeeper, Kafka brokers and Toxiproxy as containers.

Same cluster, same interface as :class:`chaos.cluster.local.LocalCluster`
(which it extends): the same :func:`chaos.cluster.topology.plan`, the same
generated configuration, the same readiness checks (ZooKeeper ``srvr``,
DescribeCluster, ``__consumer_offsets`` led, an ``acks=all`` produce through
the proxies), the same link faults. What changes is how a node runs:

* every node is a container of a locally built image
  (:mod:`chaos.cluster.images`), started with the docker SDK on our engine
  (:mod:`chaos.cluster.container_engine`, or ``$KAFKA_CHAOS_DOCKER_HOST``);
* **networking**, chosen by ``network`` (default ``auto``):

  - ``bridge`` — a user-defined Docker network of the cluster's own
    (``<session>-net``, a /24 in 10.213.0.0/16, fixed addresses: Toxiproxy
    .2, ZooKeeper .11…, brokers .101…). Every node listens on its own
    address; brokers advertise Toxiproxy's address and their proxy ports,
    reach ZooKeeper through Toxiproxy and each other directly. Only in this
    mode do the container-network faults exist: ``docker network
    disconnect``/``connect`` of a node (:meth:`disconnect`), and pair-wise
    broker partitions by iptables rules inside the broker's own container
    (``NET_ADMIN``; :meth:`partition`). Allowed only when the engine runs in
    a network namespace the project created (``scripts/docker-engine.sh run
    --netns NAME``): the bridge and every container address then exist only
    inside it, and the processes that talk to them run there too.
  - ``host`` — containers share the engine's network namespace and bind
    127.0.0.1 on the planned ports exactly like the local backend; no
    container-network faults (the engine in the root namespace runs with
    ``--bridge=none --iptables=false``).
  - ``auto`` — ``bridge`` when the engine runs in a namespace of ours and
    this process is inside it, else ``host``.
* each node's directory (config, data, log) is bind-mounted at the *same*
  path, so the generated configuration works unchanged and
  :meth:`log_path` is a host file the observer tails;
* faults are Docker's own: ``kill`` = ``docker kill`` semantics (any signal to
  the container's main process, delivered directly for millisecond timing —
  see :meth:`chaos.cluster.container.ContainerProcess.signal`), SIGTERM = ``docker stop`` (controlled shutdown, SIGKILL after the
  grace period), ``pause``/``resume`` = ``docker pause``/``unpause`` (cgroup
  freezer: the JVM is frozen, not signalled), ``restart``/``start_node``
  start the same container again on its data; all Toxiproxy faults as in the
  local backend;
* cleanup: containers carry ``kafka-chaos.session``/``node``/``owner`` labels;
  :meth:`stop` removes this session's containers (with their anonymous
  volumes) and its network (no named volume is ever created), and every
  :meth:`start` first removes containers and networks whose driver is gone
  (:func:`chaos.cluster.container.reap_containers`).

>>> with DockerCluster(ClusterSpec(brokers=3)) as cluster:   # doctest: +SKIP
...     cluster.pause(cluster.coordinator_of("g"))         # docker pause
"""

from __future__ import annotations

import hashlib
import os
import signal
import time
from pathlib import Path
from typing import Any

import docker
from docker.errors import APIError, DockerException
from docker.models.containers import Container
from testcontainers.core.config import testcontainers_config
from testcontainers.core.container import DockerContainer

from chaos.cluster.backend import Capability
from chaos.cluster.container import (
    LABEL_NODE, LABEL_OWNER, LABEL_SESSION, ContainerProcess, owner_label, reap_containers, remove_session_containers,
    remove_session_networks,
)
from chaos.cluster.container_engine import DockerEngine, EngineUnavailable, in_netns
from chaos.cluster.images import JAVA, KAFKA_LIBS, TOXIPROXY_BIN, Images, ensure_images
from chaos.cluster.local import LocalCluster
from chaos.cluster.runtime import KafkaRuntime, ToxiproxyRuntime
from chaos.cluster.topology import ClusterSpec
from chaos.cluster.toxiproxy import ProxySpec, ToxiproxyClient
from chaos.errors import InfrastructureError, UsageError


def default_docker_host() -> str:
    """``$KAFKA_CHAOS_DOCKER_HOST`` if set, else the socket of our own engine."""
    return os.environ.get("KAFKA_CHAOS_DOCKER_HOST") or DockerEngine().docker_host


#: the cluster networks' /24s are carved from here (inside the engine's own network namespace)
SUBNET_PREFIX = "10.213"
NETWORK_MODES = ("auto", "bridge", "host")


class DockerCluster(LocalCluster):
    """A real cluster of containers; use as a context manager (see module doc)."""

    backend_name = "docker"

    @property
    def capabilities(self) -> frozenset[Capability]:
        if self.network_mode == "bridge":
            return frozenset(Capability)
        # on host networking there is no container network to leave, and the local backend's
        # pair-wise rules match a process group id that containers do not run with
        return frozenset(Capability) - {Capability.PAIR_PARTITION, Capability.NETWORK_DISCONNECT}

    def __init__(self, spec: ClusterSpec | None = None, *, docker_host: str | None = None,
                 kafka: KafkaRuntime | None = None, toxiproxy: ToxiproxyRuntime | None = None,
                 images: Images | None = None, detached: bool = False, network: str = "auto"):
        if detached:
            # a detached session has no recorded child processes, so reap_orphans would treat it as dead
            raise UsageError("a detached cluster (`chaos cluster up`) is not supported by the docker backend yet: "
                             "use it from Python, pytest or `chaos run`")
        super().__init__(spec, kafka=kafka, toxiproxy=toxiproxy)
        if network not in NETWORK_MODES:
            raise UsageError(f"docker network {network!r}: choose one of {', '.join(NETWORK_MODES)}")
        self.docker_host = docker_host or default_docker_host()
        self.images = images
        self._client: docker.DockerClient | None = None
        self.network_request = network
        #: "bridge" or "host" once started (see module doc)
        self.network_mode = "host" if network == "host" else "unresolved"
        self._network = None
        self._disconnected: set[str] = set()

    # ------------------------------------------------------------ lifecycle
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

    def start(self) -> "DockerCluster":
        """Reap containers of dead drivers, build missing images, then start as the local backend does."""
        rec = DockerEngine().record()
        ours = rec is not None and rec.docker_host == self.docker_host
        if ours and rec.netns and not in_netns(rec.netns):
            raise UsageError(f"the docker engine at {self.docker_host} runs in network namespace {rec.netns}: "
                             f"run this inside it (`nsenter --net=/run/netns/{rec.netns} ...` or "
                             f"`scripts/docker-engine.sh run --netns {rec.netns} -- ...`)")
        isolated = bool(ours and rec.netns)
        if self.network_request == "bridge" and not isolated:
            raise UsageError("docker network bridge needs the engine in a network namespace of kafka-chaos's own, so "
                             "container addresses never leave it: `scripts/docker-engine.sh run --netns NAME -- ...`")
        self.network_mode = "bridge" if self.network_request == "bridge" or (
            self.network_request == "auto" and isolated) else "host"
        reap_containers(self.client)
        if self.images is None:
            self.images = ensure_images(self.client, self.kafka, self.toxiproxy_bin)
        super().start()
        return self

    def stop(self) -> None:
        """Remove this session's containers, then delete the cluster's directory."""
        try:
            if self.session is not None and self._client is not None:
                remove_session_containers(self._client, self.session.id)
                remove_session_networks(self._client, self.session.id)
        finally:
            self._network = None
            super().stop()
            if self._client is not None:
                self._client.close()
                self._client = None

    def _preserve_logs(self) -> None:
        # the containers' stdout is only in `docker logs`: keep it next to the node logs
        for name, proc in list(self._procs.items()):
            if isinstance(proc, ContainerProcess):
                try:
                    out = proc.container.logs().decode(errors="replace")
                except DockerException:
                    continue
                d = self.workdir / name if (self.workdir / name).is_dir() else self.workdir
                (d / f"{name}.stdout.log").write_text(out)
        super()._preserve_logs()

    # ------------------------------------------------------------ containers
    def _labels(self, node: str) -> dict[str, str]:
        assert self.session is not None
        return {LABEL_SESSION: self.session.id, LABEL_NODE: node, LABEL_OWNER: owner_label()}

    # ------------------------------------------------------------ the cluster network (bridge mode)
    def _node_addresses(self) -> dict[str, str]:
        """Create the cluster's network and give every node a fixed address on it (bridge mode)."""
        if self.network_mode != "bridge":
            return {}
        assert self.session is not None
        name = f"{self.session.id}-net"
        start = int(hashlib.sha256(self.session.id.encode()).hexdigest(), 16) % 250
        for attempt in range(250):
            third = (start + attempt) % 250 + 1
            ipam = docker.types.IPAMConfig(pool_configs=[
                docker.types.IPAMPool(subnet=f"{SUBNET_PREFIX}.{third}.0/24", gateway=f"{SUBNET_PREFIX}.{third}.1")])
            try:
                self._network = self.client.networks.create(name, driver="bridge", ipam=ipam,
                                                            labels=self._labels("network"))
                break
            except APIError as exc:
                if "overlap" not in str(exc).lower():  # another cluster's /24: take the next one
                    raise InfrastructureError(f"could not create docker network {name}: {exc}") from None
        else:
            raise InfrastructureError(f"no free /24 left in {SUBNET_PREFIX}.0.0/16 for docker network {name}")
        base = f"{SUBNET_PREFIX}.{third}"
        addresses = {"toxiproxy": f"{base}.2"}
        addresses.update({f"zk-{i}": f"{base}.{10 + i}" for i in range(1, self.spec.zookeepers + 1)})
        addresses.update({f"broker-{i}": f"{base}.{100 + i}" for i in range(1, self.spec.brokers + 1)})
        return addresses

    def _container(self, node: str) -> Container:
        proc = self.process(node)
        assert isinstance(proc, ContainerProcess)
        return proc.container

    def _bridge_only(self, what: str) -> None:
        if self.network_mode != "bridge":
            raise UsageError(f"{what} needs the docker backend on its own network (network bridge; this cluster "
                             f"runs with {self.network_mode} networking): run inside the engine's namespace, "
                             "`scripts/docker-engine.sh run --netns NAME -- ...`")

    def disconnect(self, node: str) -> None:
        """``docker network disconnect``: the node loses every connection (clients, ZooKeeper, brokers)."""
        self._bridge_only(f"disconnecting {node}")
        assert self._network is not None
        self._network.disconnect(self._container(node), force=True)
        self._disconnected.add(node)

    def reconnect(self, node: str) -> None:
        """``docker network connect`` with the node's own address again (its configs name it)."""
        assert self._network is not None and self.topology is not None
        container = self._container(node)
        container.reload()
        if self._network.name not in container.attrs["NetworkSettings"]["Networks"]:
            self._network.connect(container, ipv4_address=self.topology.address(node))
        self._disconnected.discard(node)

    def is_connected(self, node: str) -> bool:
        """Does the engine list the node on the cluster network?"""
        if self._network is None:
            return True
        container = self._container(node)
        container.reload()
        return self._network.name in container.attrs["NetworkSettings"]["Networks"]

    def _iptables(self, node: str, *args: str) -> str:
        """Run iptables inside ``node``'s container (its own network namespace; NET_ADMIN)."""
        code, out = self._container(node).exec_run(["iptables", "-w", *args])
        text = out.decode(errors="replace").strip()
        if code != 0:
            raise InfrastructureError(f"iptables {' '.join(args)} in {node}: exit {code}: {text[:300]}")
        return text

    def _partition_rules(self, a: str, b: str) -> list[list[str]]:
        assert self.topology is not None
        self.topology.broker(a), self.topology.broker(b)  # both must be brokers
        peer = self.topology.address(b)
        return [["INPUT", "-s", peer, "-j", "DROP"], ["OUTPUT", "-d", peer, "-j", "DROP"]]

    def partition(self, a: str, b: str) -> None:
        """Cut broker ``a`` from broker ``b`` both ways: DROP rules in ``a``'s own container for ``b``'s address.

        Clients and ZooKeeper reach ``a`` through Toxiproxy's address, so they are unaffected.
        """
        self._bridge_only(f"partitioning {a} from {b}")
        for chain, *rule in self._partition_rules(a, b):
            self._iptables(a, "-I", chain, *rule)

    def unpartition(self, a: str, b: str) -> None:
        self._bridge_only(f"healing the partition of {a} from {b}")
        for chain, *rule in self._partition_rules(a, b):
            try:
                self._iptables(a, "-D", chain, *rule)
            except InfrastructureError:
                pass  # already gone (the container restarted with a fresh namespace)

    def partition_rules(self) -> list[str]:
        """DROP rules in every running broker container (``iptables -S``), as ``node: rule``."""
        if self.network_mode != "bridge" or self.topology is None:
            return []
        out = []
        for b in self.topology.brokers:
            if self.is_running(b.node) and not self.is_paused(b.node):
                for chain in ("INPUT", "OUTPUT"):
                    out += [f"{b.node}: {r}" for r in self._iptables(b.node, "-S", chain).splitlines()
                            if r.endswith("-j DROP")]
        return out

    def _clear_partitions(self) -> None:
        if self.network_mode != "bridge" or self.topology is None:
            return
        for node in sorted(self._disconnected):
            self.reconnect(node)
        for b in self.topology.brokers:
            if self.is_running(b.node) and not self.is_paused(b.node):
                # the container's namespace is its own: flushing touches nothing else
                self._iptables(b.node, "-F", "INPUT")
                self._iptables(b.node, "-F", "OUTPUT")

    # ------------------------------------------------------------ containers
    def _run(self, node: str, image: str, command: list[str], mount: Path | None) -> ContainerProcess:
        """Create and start the node's container with testcontainers' ``DockerContainer``.

        testcontainers is given our engine explicitly (its client's environment, not the
        process-wide ``DOCKER_HOST``) and Ryuk is off (its image cannot be pulled here; our labels
        and reaping clean up). After the start, the container is driven through our own client.
        """
        assert self.session is not None and self.topology is not None
        if self.network_mode == "bridge":
            assert self._network is not None
            net: dict[str, Any] = {
                "network": self._network.name, "cap_add": ["NET_ADMIN"],  # iptables in its own namespace
                "networking_config": {self._network.name: self.client.api.create_endpoint_config(
                    ipv4_address=self.topology.address(node))}}
        else:
            net = {"network": "host"}
        testcontainers_config.ryuk_disabled = True
        tc = DockerContainer(image, docker_client_kw={"environment": {"DOCKER_HOST": self.docker_host}})
        tc.with_command(command).with_name(f"{self.session.id}-{node}")
        if mount:
            tc.with_volume_mapping(str(mount), str(mount), "rw")  # same path: generated configs work unchanged
        tc.with_kwargs(labels=self._labels(node), working_dir=str(mount) if mount else "/",
                       # the JVM is pid 1: it handles SIGTERM (controlled shutdown); SIGKILL/SIGSTOP always land
                       stop_signal="SIGTERM", **net)
        try:
            tc.start()
            container = self.client.containers.get(tc.get_wrapped_container().id)
        finally:
            tc.get_docker_client().client.close()
        log = self.workdir / node / f"{node}.log" if mount else self.workdir / f"{node}.log"
        return ContainerProcess(node, container, log)

    def _container_argv(self, node: str) -> list[str]:
        """The local backend's command line with the image's java and jars."""
        argv = list(self._launch[node].argv)
        argv[0] = JAVA
        argv[argv.index("-cp") + 1] = f"{KAFKA_LIBS}/*"  # java expands the wildcard itself (exec form, no shell)
        return argv

    def _spawn(self, node: str) -> ContainerProcess:  # type: ignore[override]
        proc = self._procs.get(node)
        if isinstance(proc, ContainerProcess):
            proc.start()  # same container again: its data and log are bind-mounted
        else:
            assert self.images is not None
            launch = self._launch[node]
            proc = self._run(node, self.images.kafka, self._container_argv(node), launch.config_path.parent)
            self._procs[node] = proc  # type: ignore[assignment]
        proc.pid  # learn the main process now, so a timed fault later needs no engine round trip
        self._paused.discard(node)
        return proc

    def _start_toxiproxy(self) -> None:
        topo = self.topology
        assert topo is not None and self.images is not None
        host = topo.address("toxiproxy")
        proc = self._run("toxiproxy", self.images.toxiproxy, [TOXIPROXY_BIN, "-host", host, "-port",
                                                             str(topo.toxiproxy_api)], None)
        self._procs["toxiproxy"] = proc  # type: ignore[assignment]
        self.proxy_api = ToxiproxyClient(host, topo.toxiproxy_api)
        deadline = time.monotonic() + 30
        while not self.proxy_api.ping():
            self._check_alive("toxiproxy")
            if time.monotonic() > deadline:
                raise InfrastructureError(f"toxiproxy container did not answer on {host}:{topo.toxiproxy_api}: "
                                          f"{proc.stdout_tail()}")
            time.sleep(0.05)
        self.proxy_api.populate([ProxySpec(l.name, topo.listen(l), topo.upstream(l)) for l in topo.links])

    def _check_alive(self, node: str) -> None:
        proc = self._procs[node]
        if proc.alive():
            return
        assert isinstance(proc, ContainerProcess)
        kept = self.failed_logs_dir / node
        tail = proc.log_tail()
        hint = " (a port is already in use: retry, or pick another base_port)" if "Address already in use" in tail else ""
        raise InfrastructureError(f"{node} container exited with code {proc.exit_code()}{hint}; logs kept in {kept}: "
                                  f"{tail} | stdout: {proc.stdout_tail(2)}")

    # ------------------------------------------------------------ container-native faults
    def kill(self, node: str, sig: int = signal.SIGKILL, wait: bool = True) -> None:
        """``docker kill --signal sig``; SIGKILL waits for the exit unless ``wait=False``; SIGTERM is ``docker stop``."""
        proc = self.process(node)
        assert isinstance(proc, ContainerProcess)
        if sig == signal.SIGKILL and not wait:
            proc.signal(signal.SIGKILL)
        elif sig == signal.SIGKILL:
            proc.kill()
        elif sig == signal.SIGTERM:
            proc.terminate(grace=30.0)
        else:
            proc.signal(sig)
        self._paused.discard(node)

    def pause(self, node: str) -> None:
        """``docker pause``: freeze every process of the node (cgroup freezer); no signal is sent."""
        proc = self.process(node)
        assert isinstance(proc, ContainerProcess)
        proc.container.pause()
        self._paused.add(node)

    def resume(self, node: str) -> None:
        """``docker unpause``."""
        proc = self.process(node)
        assert isinstance(proc, ContainerProcess)
        if proc.paused():
            proc.container.unpause()
        self._paused.discard(node)

    def is_paused(self, node: str) -> bool:
        proc = self.process(node)
        return isinstance(proc, ContainerProcess) and proc.paused()

    # ------------------------------------------------------------ status
    def status(self) -> dict[str, Any]:
        st = super().status()
        for name, node in st["nodes"].items():
            proc = self._procs.get(name)
            if isinstance(proc, ContainerProcess):
                node["container"] = proc.container.name
                node["paused"] = proc.paused()
        toxi = self._procs.get("toxiproxy")
        if isinstance(toxi, ContainerProcess):
            st["toxiproxy"]["container"] = toxi.container.name
        assert self.images is not None
        st["docker"] = {"host": self.docker_host, "network": self.network_mode,
                        "network_name": self._network.name if self._network is not None else None,
                        "disconnected": sorted(self._disconnected),
                        "images": {"base": self.images.base, "kafka": self.images.kafka,
                                   "toxiproxy": self.images.toxiproxy}}
        return st
