"""Network faults below Toxiproxy: broker↔broker traffic cut pair-wise (``partition``).

The local backend drops, with iptables rules of the cluster's own chain, A's
packets to B's inter-broker listener and B's to A's (each broker runs with a
group id of its own, matched by ``--gid-owner``); the docker backend adds
the rules inside the broker's own container. Clients and ZooKeeper are not
affected. Heal: the rules removed.
"""

from __future__ import annotations

from collections import Counter

from chaos.model.faults.network import Partition
from chaos.model.target import Role
from chaos.nemesis.evidence import Active
from chaos.nemesis.kinds import Injection, register


def partition(cluster, node: str, peers: list[str]) -> Active:
    """Cut ``node`` from each of ``peers``; evidence: this fault's DROP rules listed, and gone after the heal.

    The evidence counts this fault's own rules, not the chain's: two partition faults in force at once (the
    controller's and the coordinator's, on one broker) add the same lines twice, and the first heal removes
    one copy of each (``iptables -D`` deletes one match), leaving the other fault's in force. Found exploring
    the python-service example: the first of two such heals was recorded not confirmed, "4 partition rules
    left", the other fault's, and the run was unknown.
    """
    before = Counter(cluster.partition_rules())
    for p in peers:
        cluster.partition(node, p)
    mine = Counter(cluster.partition_rules()) - before  # an identical line of another fault counted apart
    at_mend: Counter[str] = Counter()

    def mend() -> None:
        at_mend.update(cluster.partition_rules())
        for p in peers:
            cluster.unpartition(node, p)

    def listed():
        rules = Counter(cluster.partition_rules())
        added = sum(mine.values())
        return (added >= 2 * len(peers) and not mine - rules,
                f"{added} DROP rules cut {node} from {', '.join(peers)}")

    def gone():
        rules = Counter(cluster.partition_rules())
        # each of this fault's lines: as many copies fewer than just before its heal as it had added
        left = sum(max(0, n - (at_mend[line] - rules[line])) for line, n in mine.items())
        others = sum(rules.values()) - left
        return not left, f"{left} of its {sum(mine.values())} partition rules left ({others} of other faults in force)"

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
