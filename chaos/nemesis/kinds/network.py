"""Network faults below Toxiproxy: broker↔broker traffic cut pair-wise (``partition``).

The local backend drops, with iptables rules of the cluster's own chain, A's
packets to B's inter-broker listener and B's to A's (each broker runs with a
group id of its own, matched by ``--gid-owner``); the docker backend adds
the rules inside the broker's own container. Clients and ZooKeeper are not
affected. Heal: the rules removed.
"""

from __future__ import annotations

import threading
import weakref
from collections import Counter

from chaos.model.faults.network import Partition
from chaos.model.target import Role
from chaos.nemesis.evidence import Active
from chaos.nemesis.kinds import Injection, register

#: the cutter's lines each cluster's partition faults hold in force now (a line twice: two faults added it)
_IN_FORCE: weakref.WeakKeyDictionary[object, Counter[str]] = weakref.WeakKeyDictionary()
#: cuts, heals and their evidence one at a time: two live triggers may fire on one group event and inject at once,
#: and a fault's own lines are what its cuts added to the chain (found exploring 3.9.1: two partitions injected
#: together counted each other's lines, "3 of its 7 partition rules left", and the run was unknown)
_LOCK = threading.Lock()


def partition(cluster, node: str, peers: list[str]) -> Active:
    """Cut ``node`` from each of ``peers``; evidence: this fault's DROP rules listed, and gone after the heal.

    The evidence counts this fault's own rules, not the chain's: two partition faults in force at once (the
    controller's and the coordinator's, on one broker) add the same lines twice, and the first heal removes
    one copy of each (``iptables -D`` deletes one match), leaving the other fault's in force. Found exploring
    the python-service example: the first of two such heals was recorded not confirmed, "4 partition rules
    left", the other fault's, and the run was unknown. A heal is confirmed when no more copies of the fault's
    lines are left than other faults of the cluster still hold in force.
    """
    with _LOCK:
        before = Counter(cluster.partition_rules())
        for p in peers:
            cluster.partition(node, p)
        mine = Counter(cluster.partition_rules()) - before  # an identical line of another fault counted apart
        _IN_FORCE.setdefault(cluster, Counter()).update(mine)

    healed = False

    def mend() -> None:
        nonlocal healed
        with _LOCK:
            if not healed:  # its lines leave the cluster's count once
                _IN_FORCE[cluster].subtract(mine)
                healed = True
            for p in peers:
                cluster.unpartition(node, p)

    def listed():
        with _LOCK:
            rules = Counter(cluster.partition_rules())
        added = sum(mine.values())
        return (added >= 2 * len(peers) and not mine - rules,
                f"{added} DROP rules cut {node} from {', '.join(peers)}")

    def gone():
        with _LOCK:
            rules = Counter(cluster.partition_rules())
            others = +_IN_FORCE[cluster]  # the lines of the cluster's faults not healed yet
        left = sum(min(n, max(0, rules[line] - others[line])) for line, n in mine.items())
        return not left, (f"{left} of its {sum(mine.values())} partition rules left "
                          f"({sum(others.values())} of other faults in force)")

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
