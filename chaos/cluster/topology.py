"""What cluster to build (:class:`ClusterSpec`) and where everything listens (:class:`Topology`).

Naming, used everywhere (events, faults, CLI):

* nodes: ``zk-1..zk-Z``, ``broker-1..broker-B`` (``broker.id`` = the number);
* client lanes: ``ctl`` (the framework's own admin and observer traffic) and
  ``lane0..laneL-1`` for workers. Each lane is one Kafka listener per broker
  with its own proxy; a broker answers metadata with the endpoints of the
  listener the request came in on, so a client on ``lane1`` only ever talks
  to ``lane1`` proxies and can be cut off alone (docs/architecture.md, "Links, lanes and the network");
* links (one Toxiproxy proxy each): ``<lane>.broker-<b>`` for client traffic,
  ``broker-<b>.zk-<z>`` for a broker's ZooKeeper session; under KRaft instead
  ``<node>.<voter>`` from every broker and controller to every controller's
  listener (``broker-2.controller-1``; with combined controllers the voter is a
  broker: ``broker-2.broker-1`` is broker-2's link to broker-1's *controller*
  listener — broker↔broker replication is never proxied), so a broker can lose
  the quorum alone and a controller can be isolated from its peers.
* KRaft node ids: brokers ``b``; isolated controllers ``controller-<c>`` get
  ``CONTROLLER_ID_BASE + c`` (a combined voter keeps its broker id).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass, field

from chaos.errors import UsageError
from chaos.model.cluster import ClusterSpec

CONTROL_LANE = "ctl"
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True, slots=True)
class Link:
    """One proxied connection path: ``name`` listens on ``listen`` and forwards to ``upstream``."""

    name: str
    source: str   # lane name or broker node
    target: str   # broker or zk node
    listen_port: int
    upstream_port: int


@dataclass(frozen=True, slots=True)
class BrokerPorts:
    node: str
    broker_id: int
    internal: int                 # inter-broker listener (not proxied)
    lanes: dict[str, int]         # lane -> the broker's own listener port


@dataclass(frozen=True, slots=True)
class ZkPorts:
    node: str
    myid: int
    client: int
    peer: int
    election: int


#: node.id of isolated controller ``controller-<c>`` is this + c (brokers are 1..9)
CONTROLLER_ID_BASE = 100


@dataclass(frozen=True, slots=True)
class ControllerPorts:
    """A KRaft voter's controller listener (an isolated controller's, or a combined broker's second role)."""

    node: str
    node_id: int
    port: int


@dataclass(frozen=True, slots=True)
class Topology:
    """Every port and link of one cluster, fixed before anything starts."""

    spec: ClusterSpec
    toxiproxy_api: int
    zookeepers: tuple[ZkPorts, ...]
    brokers: tuple[BrokerPorts, ...]
    links: tuple[Link, ...]
    #: KRaft voters (empty under ZooKeeper)
    controllers: tuple[ControllerPorts, ...] = ()
    #: node (and ``toxiproxy``) -> the address it listens on; absent = loopback. Only a backend
    #: whose nodes have network namespaces of their own (docker on a bridge network) sets it.
    addresses: dict[str, str] = field(default_factory=dict)

    def address(self, node: str) -> str:
        return self.addresses.get(node, LOOPBACK)

    def listen(self, link: Link) -> str:
        """host:port where Toxiproxy accepts ``link``'s connections."""
        return f"{self.address('toxiproxy')}:{link.listen_port}"

    def upstream(self, link: Link) -> str:
        """host:port ``link`` forwards to."""
        return f"{self.address(link.target)}:{link.upstream_port}"

    @property
    def lane_names(self) -> tuple[str, ...]:
        return (CONTROL_LANE, *(f"lane{i}" for i in range(self.spec.lanes)))

    def link(self, name: str) -> Link:
        for link in self.links:
            if link.name == name:
                return link
        raise UsageError(f"unknown link {name!r}: known links are {', '.join(l.name for l in self.links)}")

    def links_of(self, node: str) -> list[Link]:
        """Every link that starts or ends at ``node`` (a broker, zk node or lane)."""
        return [l for l in self.links if node in (l.source, l.target)]

    def broker(self, node: str) -> BrokerPorts:
        for b in self.brokers:
            if b.node == node:
                return b
        raise UsageError(f"unknown broker {node!r}: brokers are {', '.join(b.node for b in self.brokers)}")

    def bootstrap(self, lane: str = CONTROL_LANE) -> str:
        """Bootstrap servers for a client on ``lane`` (the lane's proxies, never the brokers)."""
        if lane not in self.lane_names:
            raise UsageError(f"unknown lane {lane!r}: lanes are {', '.join(self.lane_names)}")
        return ",".join(self.listen(l) for l in self.links if l.source == lane)

    @property
    def node_names(self) -> tuple[str, ...]:
        """Every node process: ZooKeeper nodes or isolated controllers first, then brokers."""
        isolated = tuple(c.node for c in self.controllers if not c.node.startswith("broker-"))
        return (*(z.node for z in self.zookeepers), *isolated, *(b.node for b in self.brokers))

    def controller(self, node: str) -> ControllerPorts | None:
        """``node``'s controller listener, None when it is no voter."""
        return next((c for c in self.controllers if c.node == node), None)

    def node_of_id(self, node_id: int) -> str | None:
        """The node with Kafka ``node.id`` (broker.id) ``node_id``."""
        for b in self.brokers:
            if b.broker_id == node_id:
                return b.node
        return next((c.node for c in self.controllers if c.node_id == node_id), None)

    def voters(self, source: str) -> str:
        """``controller.quorum.voters`` as ``source`` must reach them: every voter through its own proxy."""
        return ",".join(f"{c.node_id}@{self.listen(self.link(f'{source}.{c.node}'))}" for c in self.controllers)


class _PortSource:
    """Free loopback ports (held open until all are chosen, so none repeats) or a fixed range."""

    def __init__(self, base: int | None):
        self.base = base
        self._held: list[socket.socket] = []

    def __iter__(self) -> Iterator[int]:
        return self

    def __next__(self) -> int:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if self.base is None:
            s.bind((LOOPBACK, 0))
        else:
            port = self.base
            self.base += 1
            try:
                s.bind((LOOPBACK, port))
            except OSError:
                s.close()
                raise UsageError(f"port {LOOPBACK}:{port} is already in use: choose another base_port "
                                 "or omit it to use free ports") from None
        self._held.append(s)
        return s.getsockname()[1]

    def release(self) -> None:
        for s in self._held:
            s.close()


def plan(spec: ClusterSpec, addresses: dict[str, str] | None = None) -> Topology:
    """Assign every port and link for ``spec`` (nodes listen on ``addresses``, default loopback)."""
    ports = _PortSource(spec.base_port)
    try:
        api = next(ports)
        zks = () if spec.kraft else tuple(
            ZkPorts(f"zk-{i}", i, next(ports), next(ports), next(ports)) for i in range(1, spec.zookeepers + 1))
        lanes = (CONTROL_LANE, *(f"lane{i}" for i in range(spec.lanes)))
        brokers = tuple(
            BrokerPorts(f"broker-{i}", i, next(ports), {lane: next(ports) for lane in lanes})
            for i in range(1, spec.brokers + 1)
        )
        links: list[Link] = []
        for lane in lanes:
            for b in brokers:
                links.append(Link(f"{lane}.{b.node}", lane, b.node, next(ports), b.lanes[lane]))
        for b in brokers:
            for z in zks:
                links.append(Link(f"{b.node}.{z.node}", b.node, z.node, next(ports), z.client))
        controllers = tuple(
            ControllerPorts(node, int(node.rsplit("-", 1)[1]) + (0 if node.startswith("broker-") else CONTROLLER_ID_BASE),
                            next(ports))
            for node in spec.controller_nodes)
        # every process that talks to the quorum: brokers (registration, metadata) and voters (Raft)
        sources = (*(c.node for c in controllers if not c.node.startswith("broker-")), *(b.node for b in brokers))
        for src in sources:
            for c in controllers:
                links.append(Link(f"{src}.{c.node}", src, c.node, next(ports), c.port))
    finally:
        ports.release()
    return Topology(spec, api, zks, brokers, tuple(links), controllers=controllers, addresses=dict(addresses or {}))
