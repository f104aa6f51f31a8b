"""Network faults below Toxiproxy: broker↔broker traffic cut pair-wise (``partition``).

The local backend drops, with iptables rules of the cluster's own chain, A's
packets to B's inter-broker listener and B's to A's (each broker runs with a
group id of its own, matched by ``--gid-owner``); the docker backend adds
the rules inside the broker's own container. Clients and ZooKeeper are not
affected. Heal: the rules removed.
"""

from __future__ import annotations

from chaos.model.faults.network import Partition
from chaos.model.target import Role
from chaos.nemesis.evidence import Active
from chaos.nemesis.kinds import Injection, register


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


def _inject(inj: Injection[Partition]) -> list[Active]:
    node = inj.nodes[0]
    everyone_else = [b.node for b in inj.topology.brokers if b.node != node]
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


register(Partition, _inject)
