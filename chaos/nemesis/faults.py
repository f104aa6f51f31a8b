"""Fault primitives: each knows how to inject itself, heal itself, and show evidence of both.

A primitive acts on one resolved target — a cluster node (``broker-2``,
``zk-1``), a group member (``consumer-1``, a worker process of the run), a set
of Toxiproxy links, or the workload topic. Evidence is gathered by looking at
the world, not at the nemesis's own bookkeeping: is the process still there
(and in which state, per the kernel), does the proxy's port accept a TCP
connection, does Toxiproxy list the toxic, does the broker appear in the
cluster metadata again.
"""

from __future__ import annotations

import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import psutil

from chaos.cluster.topology import LOOPBACK
from chaos.cluster.toxiproxy import Stream, Toxic, ToxicType
from chaos.errors import InfrastructureError
from chaos.experiment import FaultSpec, FaultType

Evidence = tuple[bool, str]


@dataclass
class Active:
    """An injected fault: how to heal it and how to prove effect and heal."""

    nodes: list[str]
    heal: Callable[[], None]
    verify_effect: Callable[[], Evidence]
    verify_healed: Callable[[], Evidence]
    links: list[str] = field(default_factory=list)


def _proc_state(pid: int) -> str:
    try:
        return psutil.Process(pid).status()
    except psutil.NoSuchProcess:
        return "gone"


def _settled_state(pid: int, want: str, timeout: float = 2.0) -> str:
    """The process state once it reads ``want`` (signals are delivered asynchronously), or the last seen."""
    deadline = time.monotonic() + timeout
    st = _proc_state(pid)
    while st != want and st != "gone" and time.monotonic() < deadline:
        time.sleep(0.01)
        st = _proc_state(pid)
    return st


def _tree_states(pids: list[int], want: str, timeout: float = 2.0) -> dict[int, str]:
    """Each pid's kernel state once all read ``want`` (or are gone), or the last seen at ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        states = {pid: _proc_state(pid) for pid in pids}
        if all(st in (want, "gone") for st in states.values()) or time.monotonic() >= deadline:
            return states
        time.sleep(0.01)


def _states_text(states: dict[int, str]) -> str:
    return ", ".join(f"pid {pid} {st}" for pid, st in states.items())


def _port_open(port: int, host: str = LOOPBACK) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


class Primitives:
    """Faults against one cluster and one workload run."""

    def __init__(self, cluster, run):
        self.cluster = cluster
        self.run = run
        # per injecting thread: when its fault took effect (a signal sent), if the primitive can tell
        self._local = threading.local()

    @property
    def effect_ns(self) -> int | None:
        return getattr(self._local, "effect_ns", None)

    @effect_ns.setter
    def effect_ns(self, value: int | None) -> None:
        self._local.effect_ns = value

    # ------------------------------------------------------------------ processes
    def _is_member(self, node: str) -> bool:
        return node in self.run.member_specs

    def _pid(self, node: str) -> int:
        return (self.run.members[node] if self._is_member(node) else self.cluster.process(node)).pid

    def _tree(self, node: str) -> list[int]:
        """Every process of ``node``: a member's worker and the client it runs (a Java member's JVM)."""
        if self._is_member(node):
            return self.run.members[node].tree()
        proc = self.cluster.process(node)
        return proc.tree() if hasattr(proc, "tree") else [proc.pid]

    def _alive(self, node: str) -> bool:
        if self._is_member(node):
            return node in self.run.members and self.run.members[node].alive()
        return self.cluster.is_running(node)

    def _start(self, node: str) -> None:
        if self._is_member(node):
            if not self._alive(node):
                self.run.start_member(node)
        else:
            self.cluster.start_node(node)

    def _registered(self, node: str) -> Evidence:
        if not node.startswith("broker-"):
            return self._alive(node), f"{node} running={self._alive(node)}"
        try:
            self.cluster.wait_broker_registered(node, timeout=60)
            return True, f"{node} running and registered in cluster metadata"
        except InfrastructureError as exc:
            return False, str(exc)

    def process(self, spec: FaultSpec, node: str) -> Active:
        t = spec.type
        if t in (FaultType.KILL, FaultType.TERMINATE, FaultType.RESTART, FaultType.BOUNCE):
            sig = signal.SIGKILL if t in (FaultType.KILL, FaultType.RESTART) else signal.SIGTERM
            pid = self._pid(node)
            tree = self._tree(node)
            if self._is_member(node):
                self.run.kill_member(node, sig)
            elif sig == signal.SIGKILL:
                # time the effect at the signal, then reap (a JVM takes ms to disappear)
                self.cluster.kill(node, sig, wait=False)
                self.effect_ns = time.monotonic_ns()
                self.cluster.process(node).kill()
            else:
                self.cluster.kill(node, sig)
            # every process of the target, the leader's descendants included, must have ended
            states = _tree_states(tree, "gone")
            ended = all(st in ("gone", psutil.STATUS_ZOMBIE) for st in states.values())
            effect = (ended, f"{node} after {sig.name}: {_states_text(states)}")
            if t is FaultType.RESTART:
                self._start(node)
                return Active([node], lambda: None, lambda: effect, lambda: self._registered(node))
            return Active([node], lambda: self._start(node), lambda: effect, lambda: self._registered(node))
        if t is FaultType.PAUSE:
            pid = self._pid(node)
            tree = self._tree(node)
            if self._is_member(node):
                self.run.kill_member(node, signal.SIGSTOP)
            else:
                self.cluster.pause(node)

            def resume() -> None:
                if self._is_member(node):
                    self.run.kill_member(node, signal.SIGCONT)
                else:
                    self.cluster.resume(node)

            def paused() -> Evidence:
                if not self._is_member(node) and self.cluster.backend_name == "docker":
                    # docker pause = cgroup freezer: frozen tasks show D, not T; the engine's State.Paused is the evidence
                    st = _settled_state(pid, psutil.STATUS_STOPPED)
                    frozen = self.cluster.is_paused(node)
                    return frozen and st != "gone", f"{node} pid {pid} docker paused={frozen} kernel state {st}"
                # every process of the target stopped (T), not only the one signalled first
                states = _tree_states(tree, psutil.STATUS_STOPPED)
                ok = all(st == psutil.STATUS_STOPPED for st in states.values())
                return ok, f"{node} kernel state: {_states_text(states)}"

            def thawed() -> Evidence:
                states = {p: _proc_state(p) for p in tree}
                ok = all(st not in (psutil.STATUS_STOPPED, "gone") for st in states.values())
                return ok, f"{node} kernel state: {_states_text(states)}"

            return Active([node], resume, paused, thawed)
        raise ValueError(f"{t} is not a process fault")

    # ------------------------------------------------------------------ links
    def toxics_for(self, spec: FaultSpec, fault_id: str) -> list[Toxic]:
        p = spec.params
        tox = p.get("toxicity", 1.0)

        def both(kind: ToxicType, attrs: dict) -> list[Toxic]:
            return [Toxic(f"{fault_id}-{s.value}", kind, s, tox, attrs) for s in (Stream.UPSTREAM, Stream.DOWNSTREAM)]

        t = spec.type
        if t is FaultType.BLACK_HOLE:
            return both(ToxicType.TIMEOUT, {"timeout": 0})
        if t is FaultType.RESET_PEER:
            return [Toxic(f"{fault_id}-upstream", ToxicType.RESET_PEER, Stream.UPSTREAM, tox, {"timeout": 0})]
        if t is FaultType.LATENCY:
            return both(ToxicType.LATENCY, {"latency": int(p["latency_ms"]), "jitter": int(p.get("jitter_ms", 0))})
        if t is FaultType.BANDWIDTH:
            return both(ToxicType.BANDWIDTH, {"rate": int(p["rate_kb"])})
        if t is FaultType.SLICER:
            return both(ToxicType.SLICER, {"average_size": int(p.get("avg_size", 64)),
                                           "size_variation": int(p.get("size_variation", 32)),
                                           "delay": int(p.get("delay_us", 100))})
        if t is FaultType.LIMIT_DATA:
            return both(ToxicType.LIMIT_DATA, {"bytes": int(p["bytes"])})
        raise ValueError(f"{t} has no toxic")

    def links(self, spec: FaultSpec, fault_id: str, links: list[str]) -> Active:
        c = self.cluster
        ports = {l: c.topology.link(l).listen_port for l in links}
        proxy_host = c.topology.address("toxiproxy")
        if spec.type is FaultType.LINK_DOWN:
            for l in links:
                c.link_down(l)

            def heal() -> None:
                for l in links:
                    c.link_up(l)

            def down() -> Evidence:
                refused = [l for l, p in ports.items() if not _port_open(p, proxy_host)]
                return len(refused) == len(links), f"{len(refused)}/{len(links)} proxy ports refuse connections"

            def up() -> Evidence:
                ok = [l for l, p in ports.items() if _port_open(p, proxy_host)]
                return len(ok) == len(links), f"{len(ok)}/{len(links)} proxy ports accept connections"

            return Active([], heal, down, up, links)
        toxics = self.toxics_for(spec, fault_id)
        for l in links:
            for tx in toxics:
                c.add_toxic(l, tx)
        names = {tx.name for tx in toxics}

        def listed(l: str) -> set[str]:
            return {t["name"] for t in c.proxy_api.toxics(l)} & names

        def heal_toxics() -> None:
            for l in links:
                for name in listed(l):
                    c.remove_toxic(l, name)

        def present() -> Evidence:
            n = sum(len(listed(l)) == len(names) for l in links)
            return n == len(links), f"Toxiproxy lists {sorted(names)} on {n}/{len(links)} links"

        def gone() -> Evidence:
            n = sum(not listed(l) for l in links)
            return n == len(links), f"toxics removed from {n}/{len(links)} links"

        return Active([], heal_toxics, present, gone, links)

    # ------------------------------------------------------------------ broker<->broker
    def partition(self, node: str, peers: list[str]) -> Active:
        c = self.cluster
        for p in peers:
            c.partition(node, p)

        def mend() -> None:
            for p in peers:
                c.unpartition(node, p)

        def listed() -> Evidence:
            rules = c.partition_rules()
            return len(rules) >= 2 * len(peers), f"{len(rules)} DROP rules cut {node} from {', '.join(peers)}"

        def gone() -> Evidence:
            rules = c.partition_rules()
            return not rules, f"{len(rules)} partition rules left"

        return Active([node], mend, listed, gone)

    # ------------------------------------------------------------------ container network
    def disconnect(self, node: str) -> Active:
        """``docker network disconnect`` of a cluster node; heal: connect it again with its own address."""
        c = self.cluster
        topo = c.topology
        port = topo.broker(node).internal if node.startswith("broker-") else next(
            z.client for z in topo.zookeepers if z.node == node)
        addr = topo.address(node)
        c.disconnect(node)
        self.effect_ns = time.monotonic_ns()

        def off() -> Evidence:
            attached, reachable = c.is_connected(node), _port_open(port, addr)
            return not attached and not reachable, (f"{node}: on the network per the engine={attached}, "
                                                    f"{addr}:{port} reachable={reachable}")

        def back() -> Evidence:
            attached = c.is_connected(node)
            reachable = _port_open(port, addr) if c.is_running(node) else None
            return attached and reachable is not False, (f"{node}: on the network per the engine={attached}, "
                                                         f"{addr}:{port} reachable={reachable}")

        return Active([node], lambda: c.reconnect(node), off, back)

    # ------------------------------------------------------------------ topology
    def add_partitions(self, total: int) -> Active:
        admin = self.run.admin
        before = len(admin.partitions(self.run.topic))
        admin.create_partitions(self.run.topic, total)

        def grown() -> Evidence:
            # CreatePartitions is answered by the controller; brokers' metadata follows shortly after
            deadline = time.monotonic() + 15
            while True:
                try:
                    n = len(admin.partitions(self.run.topic, wait=False))
                except Exception:  # noqa: BLE001 - metadata not there yet
                    n = -1
                if n == total or time.monotonic() >= deadline:
                    return n == total, f"{self.run.topic}: {before} -> {n} partitions"
                time.sleep(0.2)

        return Active([self.run.topic], lambda: None, grown, grown)

    def _subscription_at_coordinator(self, member: str, topics: list[str], timeout: float) -> Evidence:
        """Wait (bounded) until the coordinator's DescribeGroups lists ``member`` subscribed to ``topics``.

        The subscription travels in the member's JoinGroup metadata, so the
        coordinator holds it only after the member rejoined; the member is
        recognised by its client id (the worker name).
        """
        deadline = time.monotonic() + timeout
        seen: list[list[str]] = []
        while True:
            try:
                info = self.run.admin.describe_group(self.run.group)
                seen = [sorted(getattr(getattr(m, "member_metadata", None), "subscription", None) or [])
                        for m in info.members if m.client_id == member]
            except Exception:  # noqa: BLE001 - coordinator moving: ask again
                seen = []
            if sorted(topics) in seen:
                return True, f"coordinator lists {member} subscribed to {sorted(topics)}"
            if time.monotonic() >= deadline:
                return False, f"coordinator lists {member} subscribed to {seen or 'nothing'}, not {sorted(topics)}"
            time.sleep(0.2)

    def change_subscription(self, member: str, tokens: tuple[str, ...]) -> Active:
        """Member ``member`` subscribes to ``tokens`` (topic/extra) instead of the workload topic; heal restores it."""
        if not self._alive(member):
            raise InfrastructureError(f"{member} is not running: its subscription cannot change")
        names = {"topic": self.run.topic, "extra": self.run.extra_topic}
        topics = [names[t] for t in tokens]
        self.run.change_subscription(member, topics)
        self.effect_ns = time.monotonic_ns()
        # a rejoin takes one rebalance: bounded by the member's session timeout plus a margin
        bound = self.run.member_specs[member].session_timeout_ms / 1000 + 15

        def heal() -> None:
            if self._alive(member):
                self.run.change_subscription(member, [self.run.topic])

        def healed() -> Evidence:
            if not self._alive(member):
                return True, f"{member} not running: it restarts with the workload topic only"
            return self._subscription_at_coordinator(member, [self.run.topic], bound)

        return Active([member], heal, lambda: self._subscription_at_coordinator(member, topics, bound), healed)

    def rolling_restart(self, nodes: list[str], gap_s: float, cancelled) -> Active:
        done = []
        for node in nodes:
            if cancelled.is_set():
                break
            if self._is_member(node):
                self.run.kill_member(node, signal.SIGTERM)
                self.run.start_member(node)
            else:
                self.cluster.kill(node, signal.SIGTERM)
                self.cluster.start_node(node)
                self.cluster.wait_broker_registered(node, timeout=60)
            done.append(node)
            cancelled.wait(gap_s)

        def all_back() -> Evidence:
            back = [n for n in nodes if self._alive(n)]
            return len(back) == len(nodes), f"restarted in turn: {done}; running: {back}"

        return Active(done, lambda: [self._start(n) for n in nodes], all_back, all_back)
