"""The docker backend: ZooKeeper, Kafka brokers and Toxiproxy as containers.

Same cluster, same interface as :class:`chaos.cluster.local.LocalCluster`
(which it extends): the same :func:`chaos.cluster.topology.plan`, the same
generated configuration, the same readiness checks (ZooKeeper ``srvr``,
DescribeCluster, ``__consumer_offsets`` led, an ``acks=all`` produce through
the proxies), the same link faults. What changes is how a node runs:

* every node is a container of a locally built image
  (:mod:`chaos.cluster.images`), started with the docker SDK on our engine
  (:mod:`chaos.cluster.container_engine`, or ``$KAFKA_CHAOS_DOCKER_HOST``);
* **networking: host**. The engine runs with ``--bridge=none
  --iptables=false``, so containers share the driver's network namespace and
  everything still binds 127.0.0.1 on the planned ports: brokers advertise
  their own proxies exactly as in the local backend, and workers, the
  observer and the admin client connect unchanged. (A user-defined network
  would give each node its own address and allow ``docker network
  disconnect``; see the README section of the docker backend for what that
  needs.)
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
  volumes; no network or named volume is ever created), and every
  :meth:`start` first removes containers whose driver is gone
  (:func:`chaos.cluster.container.reap_containers`).

>>> with DockerCluster(ClusterSpec(brokers=3)) as cluster:   # doctest: +SKIP
...     cluster.pause(cluster.coordinator_of("g"))         # docker pause
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import docker
from docker.errors import DockerException

from chaos.cluster.backend import Capability
from chaos.cluster.container import (
    LABEL_NODE, LABEL_OWNER, LABEL_SESSION, ContainerProcess, owner_label, reap_containers, remove_session_containers,
)
from chaos.cluster.container_engine import DockerEngine, EngineUnavailable, in_netns
from chaos.cluster.images import JAVA, KAFKA_LIBS, TOXIPROXY_BIN, Images, ensure_images
from chaos.cluster.local import LocalCluster
from chaos.cluster.runtime import KafkaRuntime, ToxiproxyRuntime
from chaos.cluster.topology import LOOPBACK, ClusterSpec
from chaos.cluster.toxiproxy import ProxySpec, ToxiproxyClient
from chaos.errors import InfrastructureError, UsageError


def default_docker_host() -> str:
    """``$KAFKA_CHAOS_DOCKER_HOST`` if set, else the socket of our own engine."""
    return os.environ.get("KAFKA_CHAOS_DOCKER_HOST") or DockerEngine().docker_host


class DockerCluster(LocalCluster):
    """A real cluster of containers on host networking; use as a context manager (see module doc)."""

    # broker<->broker partitions match the sender by the group id the local backend gives each
    # broker process; containers run with the image's ids, so that rule would not match
    capabilities = frozenset(Capability) - {Capability.PAIR_PARTITION}

    def partition(self, a: str, b: str) -> None:
        raise UsageError(f"cannot partition {a} from {b}: pair-wise partitions need the local backend")
    backend_name = "docker"

    def __init__(self, spec: ClusterSpec | None = None, *, docker_host: str | None = None,
                 kafka: KafkaRuntime | None = None, toxiproxy: ToxiproxyRuntime | None = None,
                 images: Images | None = None, detached: bool = False):
        if detached:
            # a detached session has no recorded child processes, so reap_orphans would treat it as dead
            raise UsageError("a detached cluster (`chaos cluster up`) is not supported by the docker backend yet: "
                             "use it from Python, pytest or `chaos run`")
        super().__init__(spec, kafka=kafka, toxiproxy=toxiproxy)
        self.docker_host = docker_host or default_docker_host()
        self.images = images
        self._client: docker.DockerClient | None = None

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
        if rec is not None and rec.docker_host == self.docker_host and rec.netns and not in_netns(rec.netns):
            raise UsageError(f"the docker engine at {self.docker_host} runs in network namespace {rec.netns}: "
                             f"run this inside it (`nsenter --net=/run/netns/{rec.netns} ...` or "
                             f"`scripts/docker-engine.sh run --netns {rec.netns} -- ...`)")
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
        finally:
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

    def _run(self, node: str, image: str, command: list[str], mount: Path | None) -> ContainerProcess:
        assert self.session is not None
        volumes = {str(mount): {"bind": str(mount), "mode": "rw"}} if mount else {}
        container = self.client.containers.create(
            image, command=command, name=f"{self.session.id}-{node}", labels=self._labels(node),
            network_mode="host", volumes=volumes, working_dir=str(mount) if mount else "/",
            # the JVM is pid 1: it handles SIGTERM (controlled shutdown); SIGKILL/SIGSTOP from the host always land
            stop_signal="SIGTERM", detach=True,
        )
        container.start()
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
        proc = self._run("toxiproxy", self.images.toxiproxy,
                         [TOXIPROXY_BIN, "-host", LOOPBACK, "-port", str(topo.toxiproxy_api)], None)
        self._procs["toxiproxy"] = proc  # type: ignore[assignment]
        self.proxy_api = ToxiproxyClient(LOOPBACK, topo.toxiproxy_api)
        deadline = time.monotonic() + 30
        while not self.proxy_api.ping():
            self._check_alive("toxiproxy")
            if time.monotonic() > deadline:
                raise InfrastructureError(f"toxiproxy container did not answer on {LOOPBACK}:{topo.toxiproxy_api}: "
                                          f"{proc.stdout_tail()}")
            time.sleep(0.05)
        self.proxy_api.populate([
            ProxySpec(l.name, f"{LOOPBACK}:{l.listen_port}", f"{LOOPBACK}:{l.upstream_port}") for l in topo.links
        ])

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
        st["docker"] = {"host": self.docker_host, "network": "host",
                        "images": {"base": self.images.base, "kafka": self.images.kafka,
                                   "toxiproxy": self.images.toxiproxy}}
        return st
