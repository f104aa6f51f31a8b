"""Effective configuration of every node, generated from a :class:`Topology`.

The defaults are chaos-friendly (docs/architecture.md, "Links, lanes and the network"): internal topics replicated 3
ways with ``min.insync.replicas=2`` so one broker may die without losing
commits, no unclean leader election, no initial rebalance delay
(KIP-134's ``group.initial.rebalance.delay.ms``) so rebalances start at once,
and a low ``group.min.session.timeout.ms`` so experiments can use second-scale
session timeouts. Everything here is recorded verbatim in ``status --json``
and in each run's header.
"""

from __future__ import annotations

from pathlib import Path

from chaos.cluster.topology import CONTROL_LANE, BrokerPorts, ControllerPorts, Topology, ZkPorts

#: ZooKeeper tick; the server allows sessions of 2..20 ticks.
ZK_TICK_MS = 500
#: a broker's ZooKeeper session: SIGSTOP it longer than this and it is deregistered.
BROKER_ZK_SESSION_MS = 4000
#: KRaft's counterpart: a broker whose heartbeats do not reach the active controller for this long is
#: fenced (``broker.session.timeout.ms``, default 9 s; KIP-631)
BROKER_KRAFT_SESSION_MS = 4000
#: KIP-848 group defaults here (the broker's are 45 s / 5 s, with minimums of the same size): second-scale
#: experiments need them low; a group may set its own within [min, max] (``consumer.session.timeout.ms``)
KIP848_GROUP_SETTINGS = {
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.session.timeout.ms": "500",
    "group.consumer.heartbeat.interval.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "100",
    # KIP-848 online migration both ways (switch_protocol faults). Bidirectional is 4.x's default, but KAFKA-16294
    # plans to narrow it to upgrade-only once the consumer protocol is the default: stated, not inherited
    "group.consumer.migration.policy": "bidirectional",
}
#: share groups (KIP-932, Kafka 4.2+): the brokers' bounds on a group's own settings (``ShareGroupConfig``:
#: lock duration at least 15 s, session timeout at least 45 s, heartbeat at least 5 s) lowered so second-scale
#: experiments can set theirs (chaos.model.share.ShareGroupSpec), and second-scale defaults for groups that set none
SHARE_GROUP_SETTINGS = {
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.record.lock.duration.ms": "10000",
    "group.share.min.session.timeout.ms": "500",
    "group.share.session.timeout.ms": "6000",
    "group.share.min.heartbeat.interval.ms": "100",
    "group.share.heartbeat.interval.ms": "1000",
}
CONTROLLER_LISTENER = "CONTROLLER"


def _listener_name(lane: str) -> str:
    return "CTL" if lane == CONTROL_LANE else lane.upper()


def broker_properties(topo: Topology, broker: BrokerPorts, data_dir: Path) -> dict[str, str]:
    spec = topo.spec
    rf = spec.effective_rf
    min_isr = min(2, rf)
    proxy_of = {l.source: l.listen_port for l in topo.links if l.target == broker.node and l.source in topo.lane_names}
    own, proxy = topo.address(broker.node), topo.address("toxiproxy")
    listeners = [f"INTERNAL://{own}:{broker.internal}"]
    advertised = [f"INTERNAL://{own}:{broker.internal}"]
    for lane, port in broker.lanes.items():
        listeners.append(f"{_listener_name(lane)}://{own}:{port}")
        # advertise the broker's own proxy, so clients never bypass Toxiproxy
        advertised.append(f"{_listener_name(lane)}://{proxy}:{proxy_of[lane]}")
    names = ["INTERNAL", *(_listener_name(l) for l in broker.lanes)]
    voter = topo.controller(broker.node)
    if voter is not None:  # a combined node: its controller listener is bound, never advertised to clients
        listeners.append(f"{CONTROLLER_LISTENER}://{own}:{voter.port}")
    if topo.spec.kraft:
        names.append(CONTROLLER_LISTENER)
        meta = {
            "process.roles": "broker,controller" if voter is not None else "broker",
            "node.id": str(broker.broker_id),
            **_quorum(topo, broker.node),
            "broker.session.timeout.ms": str(BROKER_KRAFT_SESSION_MS),
            "broker.heartbeat.interval.ms": str(BROKER_KRAFT_SESSION_MS // 8),
            **(KIP848_GROUP_SETTINGS if topo.spec.kip848 else {}),
            **(SHARE_GROUP_SETTINGS if topo.spec.share_groups else {}),
            # the share coordinator's state topic (__share_group_state), replicated as the offsets topic is
            **({"share.coordinator.state.topic.replication.factor": str(rf),
                "share.coordinator.state.topic.min.isr": str(min_isr)} if topo.spec.share_groups else {}),
        }
    else:
        meta = {
            "broker.id": str(broker.broker_id),
            "zookeeper.connect": ",".join(topo.listen(l) for l in topo.links if l.source == broker.node),
            "zookeeper.session.timeout.ms": str(BROKER_ZK_SESSION_MS),
            "zookeeper.connection.timeout.ms": "10000",
            "controller.socket.timeout.ms": "5000",
            "controlled.shutdown.max.retries": "1",
        }
    props = {
        **meta,
        "listeners": ",".join(listeners),
        "advertised.listeners": ",".join(advertised),
        "listener.security.protocol.map": ",".join(f"{n}:PLAINTEXT" for n in names),
        "inter.broker.listener.name": "INTERNAL",
        "log.dirs": str(data_dir),
        "num.partitions": "3",
        "default.replication.factor": str(rf),
        "offsets.topic.replication.factor": str(rf),
        "offsets.topic.num.partitions": str(spec.offsets_partitions),
        "transaction.state.log.replication.factor": str(rf),
        "transaction.state.log.min.isr": str(min_isr),
        "transaction.state.log.num.partitions": "3",
        "min.insync.replicas": str(min_isr),
        "unclean.leader.election.enable": "false",
        "auto.create.topics.enable": "false",
        "delete.topic.enable": "true",
        # a deleted topic's logs go from disk a second later, not a minute (Kafka's default; the topic-level
        # name is file.delete.delay.ms): a broker started before they are gone loads them again, and a pool
        # deletes earlier runs' topics before each run (KafkaCluster.drop_run_topics; bench/broker_restart.py)
        "log.segment.delete.delay.ms": "1000",
        "group.initial.rebalance.delay.ms": "0",
        "group.min.session.timeout.ms": "500",
        "group.max.session.timeout.ms": "300000",
        "replica.lag.time.max.ms": "5000",
        "replica.socket.timeout.ms": "5000",
        "num.network.threads": "2",
        "num.io.threads": "4",
        "num.replica.fetchers": "1",
        "background.threads": "2",
        "log.segment.bytes": str(16 * 1024 * 1024),
        "log.index.size.max.bytes": str(1024 * 1024),
        "log.cleaner.dedupe.buffer.size": str(4 * 1024 * 1024),
        "log.cleaner.threads": "1",
        "controlled.shutdown.enable": "true",
        "leader.imbalance.check.interval.seconds": "30",
    }
    props.update(spec.broker_overrides)
    return props


def _quorum(topo: Topology, node: str) -> dict[str, str]:
    """How ``node`` finds the KRaft quorum: a static voter set (KIP-595), each voter through this node's own
    proxy, and election/fetch timeouts a second-scale experiment can wait out."""
    return {
        "controller.listener.names": CONTROLLER_LISTENER,
        "controller.quorum.voters": topo.voters(node),
        "controller.quorum.election.timeout.ms": "1000",
        "controller.quorum.fetch.timeout.ms": "2000",
    }


def controller_properties(topo: Topology, controller: ControllerPorts, data_dir: Path) -> dict[str, str]:
    """An isolated KRaft controller (``process.roles=controller``): the quorum and nothing else."""
    props = {
        "process.roles": "controller",
        "node.id": str(controller.node_id),
        "listeners": f"{CONTROLLER_LISTENER}://{topo.address(controller.node)}:{controller.port}",
        "listener.security.protocol.map": f"{CONTROLLER_LISTENER}:PLAINTEXT",
        **_quorum(topo, controller.node),
        "log.dirs": str(data_dir),
        # topic defaults are the controller's under KRaft (a broker-side value is ignored from 5.0)
        "num.partitions": "3",
        "default.replication.factor": str(topo.spec.effective_rf),
        "broker.session.timeout.ms": str(BROKER_KRAFT_SESSION_MS),
        "num.io.threads": "2",
        "num.network.threads": "1",
        "background.threads": "2",
        # group configs (IncrementalAlterConfigs on GROUP) are validated by the controller against its own
        # group.consumer.min/max.* and group.share.min/max.* settings, so it must know the lowered bounds too
        **(KIP848_GROUP_SETTINGS if topo.spec.kip848 else {}),
        **(SHARE_GROUP_SETTINGS if topo.spec.share_groups else {}),
    }
    props.update(topo.spec.broker_overrides)
    return props


def zk_config(topo: Topology, zk: ZkPorts, data_dir: Path) -> dict[str, str]:
    cfg = {
        "tickTime": str(ZK_TICK_MS),
        "initLimit": "20",
        "syncLimit": "10",
        "dataDir": str(data_dir),
        "clientPort": str(zk.client),
        "clientPortAddress": topo.address(zk.node),
        "maxClientCnxns": "0",
        "admin.enableServer": "false",
        "4lw.commands.whitelist": "srvr,stat,mntr,dump",
    }
    if len(topo.zookeepers) > 1:
        for peer in topo.zookeepers:
            cfg[f"server.{peer.myid}"] = f"{topo.address(peer.node)}:{peer.peer}:{peer.election}"
    return cfg


def log4j_properties(log_file: Path) -> str:
    """One file per node, Kafka's own line format (the observer parses it)."""
    return "\n".join([
        "log4j.rootLogger=INFO, file",
        "log4j.appender.file=org.apache.log4j.FileAppender",
        f"log4j.appender.file.File={log_file}",
        "log4j.appender.file.ImmediateFlush=true",
        "log4j.appender.file.layout=org.apache.log4j.PatternLayout",
        "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n",
        # the request log and the state-change log are noise at INFO
        "log4j.logger.kafka.request.logger=WARN",
        "log4j.logger.state.change.logger=WARN",
        "log4j.logger.kafka.log.LogCleaner=WARN",
        "log4j.logger.org.apache.zookeeper=WARN",
        "log4j.logger.org.apache.zookeeper.server.quorum=INFO",
        "log4j.logger.kafka.coordinator.group=INFO",
        "log4j.logger.kafka.controller=INFO",
        "",
    ])


def log4j2_properties(log_file: Path) -> str:
    """:func:`log4j_properties` for Kafka 4.x, which logs through log4j2 (KIP-653): same file, same line format."""
    quiet = {"kafka.request.logger": "WARN", "state.change.logger": "WARN", "kafka.log.LogCleaner": "WARN",
             "org.apache.kafka.coordinator.group": "INFO", "org.apache.kafka.raft": "INFO"}
    lines = [
        "status = error",
        "appender.file.type = File",
        "appender.file.name = FILE",
        f"appender.file.fileName = {log_file}",
        "appender.file.immediateFlush = true",
        "appender.file.layout.type = PatternLayout",
        "appender.file.layout.pattern = [%d] %p %m (%c)%n",
        "rootLogger.level = INFO",
        "rootLogger.appenderRef.file.ref = FILE",
    ]
    for i, (name, level) in enumerate(quiet.items()):
        lines += [f"logger.l{i}.name = {name}", f"logger.l{i}.level = {level}"]
    return "\n".join([*lines, ""])


#: the JVM flags of Kafka's own kafka-server-start.sh / kafka-run-class.sh
KAFKA_DEFAULT_JVM = ["-Xmx1G", "-Xms1G", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                     "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                     "-Djava.awt.headless=true"]


def jvm_args(heap_mb: int, profile: str = "fast-start") -> list[str]:
    """Small heap, SerialGC and C1-only JIT: JVMs start fast and share 2 cores well.

    ``kafka-default`` gives Kafka's own flags instead (for comparison).
    """
    if profile == "kafka-default":
        return [*KAFKA_DEFAULT_JVM, "-Dzookeeper.admin.enableServer=false"]
    return [
        f"-Xms{min(heap_mb, 128)}m", f"-Xmx{heap_mb}m",
        "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k",
        "-XX:-UsePerfData", "-Djava.awt.headless=true",
        "-Dzookeeper.admin.enableServer=false",
    ]


def render_properties(props: dict[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in props.items())
