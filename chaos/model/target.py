"""Who a fault hits: the target roles and link scopes of a fault spec (resolved by :mod:`chaos.nemesis.target`)."""

from __future__ import annotations

from enum import StrEnum


class Role(StrEnum):
    """Who a fault hits, resolved at the moment of injection."""

    COORDINATOR = "coordinator"       # the group's coordinator broker (FindCoordinator)
    CONTROLLER = "controller"         # the controller broker
    LEADER = "leader"                 # the leader of partition `partition` of the workload topic
    GROUP_LEADER = "group_leader"     # the member the coordinator chose as group leader
    RANDOM_MEMBER = "random_member"   # a live member, chosen with the run's seed
    RANDOM_BROKER = "random_broker"   # a running broker, chosen with the run's seed
    MEMBER = "member"                 # the member named in `node` (consumer-K)
    NODE = "node"                     # the node named in `node` (broker-B, zk-Z)
    ALL_BROKERS = "all_brokers"       # rolling restarts
    ALL_MEMBERS = "all_members"       # rolling restarts
    ZOOKEEPER_QUORUM = "zookeeper_quorum"  # a majority of the ZooKeeper ensemble
    ACTIVE_CONTROLLER = "active_controller"  # KRaft: the quorum leader (DescribeQuorum), asked at the fault
    CONTROLLER_QUORUM = "controller_quorum"  # KRaft: a majority of the controller voters
    TOPIC = "topic"                   # the workload topic (add_partitions)


#: roles that resolve to group members
MEMBER_ROLES = frozenset({Role.GROUP_LEADER, Role.RANDOM_MEMBER, Role.MEMBER, Role.ALL_MEMBERS})
#: roles that resolve to one broker (or, for ``node``, one cluster node)
BROKER_ROLES = frozenset({Role.COORDINATOR, Role.CONTROLLER, Role.LEADER, Role.RANDOM_BROKER, Role.NODE,
                          Role.ACTIVE_CONTROLLER})
#: roles that resolve to exactly one node or member
SINGLE_ROLES = frozenset(Role) - {Role.ALL_BROKERS, Role.ALL_MEMBERS, Role.ZOOKEEPER_QUORUM, Role.TOPIC}


class LinkScope(StrEnum):
    """Which of a broker's links a link fault covers (a member's: always its lane)."""

    CLIENTS = "clients"        # every worker lane of the broker
    ZOOKEEPER = "zookeeper"    # the broker's ZooKeeper session
    QUORUM = "quorum"          # KRaft: the broker's links to every controller voter (registration, metadata)
    ALL = "all"                # worker lanes, the control lane and ZooKeeper / the quorum
