"""Network faults below Toxiproxy: broker↔broker traffic cut pair-wise (``partition``).

The local backend drops, with iptables rules of the cluster's own chain, A's
packets to B's inter-broker listener and B's to A's (each broker runs with a
group id of its own, matched by ``--gid-owner``); the docker backend adds
the rules inside the broker's own container. Clients and ZooKeeper are not
affected. Heal: the rules removed.
"""

from __future__ import annotations

from chaos.model.target import Role
from chaos.nemesis.evidence import Active
from chaos.nemesis.kinds import FaultKind, Injection, register

_BROKER_ROLES = frozenset({Role.COORDINATOR, Role.CONTROLLER, Role.LEADER, Role.RANDOM_BROKER, Role.NODE})
_PEER_ROLES = {"coordinator", "controller", "leader", "random_broker"}


def partition(cluster, node: str, peers: list[str]) -> Active:
    """Cut ``node`` from each of ``peers``; evidence: the DROP rules listed, and gone after the heal."""
    for p in peers:
        cluster.partition(node, p)

    def mend() -> None:
        for p in peers:
            cluster.unpartition(node, p)

    def listed():
        rules = cluster.partition_rules()
        return len(rules) >= 2 * len(peers), f"{len(rules)} DROP rules cut {node} from {', '.join(peers)}"

    def gone():
        rules = cluster.partition_rules()
        return not rules, f"{len(rules)} partition rules left"

    return Active([node], mend, listed, gone)


def _inject(inj: Injection) -> list[Active]:
    node = inj.nodes[0]
    everyone_else = [b.node for b in inj.cluster.topology.brokers if b.node != node]
    peer = inj.spec.peer
    if peer is None:
        peers = everyone_else
    elif peer.startswith("broker-"):
        peers = [peer]
    else:
        peers = inj.resolve(Role(peer))
    # the peer role resolved to the target itself: cut it from every other broker
    peers = [p for p in peers if p != node] or everyone_else
    return [partition(inj.cluster, node, peers)]


def _check(spec) -> None:
    if spec.target is Role.NODE and not str(spec.node).startswith("broker-"):
        raise ValueError("partition cuts brokers from brokers: target coordinator, controller, leader, "
                         "random_broker or a node broker-N")
    if spec.peer is not None and not (spec.peer.startswith("broker-") or spec.peer in _PEER_ROLES):
        raise ValueError(f"peer {spec.peer!r}: a broker (broker-N) or coordinator, controller, leader, random_broker")


def _check_in(spec, experiment, i: int) -> None:
    # On KRaft a broker reaches the controllers on their own listener, through the quorum proxies, never on the
    # inter-broker listener these rules cut: "cut from the controller" would cut nothing that matters (or, with
    # isolated controllers, name a node that is no broker)
    controller_roles = {Role.CONTROLLER, Role.ACTIVE_CONTROLLER}
    if experiment.cluster.kraft and (spec.target in controller_roles or spec.peer in {r.value for r in controller_roles}):
        raise ValueError(f"faults.{i}: on KRaft a broker reaches the controllers through its quorum links, not the "
                         "inter-broker listener a partition cuts: use type link_down with links: quorum on the broker "
                         "(see broker-isolated-from-quorum), or a broker peer")


register(FaultKind(
    "partition", "network", "broker<->broker traffic cut pair-wise at the network level (rules removed)",
    _inject, targets=_BROKER_ROLES, fields=frozenset({"peer"}), check=_check, check_in=_check_in,
    capability="pair_partition",
    target_error="partition cuts brokers from brokers: target coordinator, controller, leader, random_broker "
                 "or a node broker-N"))
