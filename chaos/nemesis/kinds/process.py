"""Process faults: kill, terminate, restart, bounce, pause — on a broker, a ZooKeeper node or a member.

Signals reach the whole process (its process group: a Java member's worker
and JVM alike), and the evidence reads the kernel state of every process of
the target, not only the one signalled first.
"""

from __future__ import annotations

import signal
import time

from chaos.cluster import Pausable
from chaos.errors import InfrastructureError
from chaos.model.backend import BackendName
from chaos.model.faults.process import Bounce, Kill, Pause, Restart, Terminate
from chaos.nemesis.evidence import Active, states_text, tree_states
from chaos.nemesis.kinds import Injection, register
from chaos.nemesis.nodes import Nodes


def _stop(inj: Injection, node: str, restart_at_once: bool, sig: signal.Signals) -> Active:
    import psutil

    n = Nodes(inj.cluster, inj.run)
    tree = n.tree(node)
    if n.is_member(node):
        inj.run.kill_member(node, sig)
    elif sig == signal.SIGKILL:
        # time the effect at the signal, then reap (a JVM takes ms to disappear)
        inj.cluster.kill(node, sig, wait=False)
        inj.effect_ns = time.monotonic_ns()
        inj.cluster.process(node).kill()
    else:
        inj.cluster.kill(node, sig)
    # every process of the target, the leader's descendants included, must have ended
    states = tree_states(tree, "gone")
    ended = all(st in ("gone", psutil.STATUS_ZOMBIE) for st in states.values())
    effect = (ended, f"{node} after {sig.name}: {states_text(states)}")
    if restart_at_once:
        n.start(node)
        return Active([node], lambda: None, lambda: effect, lambda: n.registered(node))
    return Active([node], lambda: n.start(node), lambda: effect, lambda: n.registered(node))


def _pause(inj: Injection, node: str) -> Active:
    import psutil

    from chaos.nemesis.evidence import proc_state, settled_state

    n = Nodes(inj.cluster, inj.run)
    pid, tree = n.pid(node), n.tree(node)
    cluster = inj.cluster
    if n.is_member(node):
        inj.run.kill_member(node, signal.SIGSTOP)
    elif isinstance(cluster, Pausable):
        cluster.pause(node)
    else:  # the runner refuses the fault first (Capability.PAUSE): a guard
        raise InfrastructureError(f"{node}: the {cluster.backend_name} backend cannot pause a node")

    def resume() -> None:
        if n.is_member(node):
            inj.run.kill_member(node, signal.SIGCONT)
        elif isinstance(cluster, Pausable):
            cluster.resume(node)

    def paused():
        if not n.is_member(node) and inj.cluster.backend_name == BackendName.DOCKER:
            # docker pause = cgroup freezer: frozen tasks show D, not T; the engine's State.Paused is the evidence
            st = settled_state(pid, psutil.STATUS_STOPPED)
            frozen = inj.cluster.is_paused(node)
            return frozen and st != "gone", f"{node} pid {pid} docker paused={frozen} kernel state {st}"
        # every process of the target stopped (T), not only the one signalled first
        states = tree_states(tree, psutil.STATUS_STOPPED)
        return all(st == psutil.STATUS_STOPPED for st in states.values()), f"{node} kernel state: {states_text(states)}"

    def thawed():
        states = {p: proc_state(p) for p in tree}
        ok = all(st not in (psutil.STATUS_STOPPED, "gone") for st in states.values())
        return ok, f"{node} kernel state: {states_text(states)}"

    return Active([node], resume, paused, thawed)


def _each(fn):
    return lambda inj: [fn(inj, node) for node in inj.nodes]


register(Kill, _each(lambda inj, node: _stop(inj, node, False, signal.SIGKILL)))
register(Terminate, _each(lambda inj, node: _stop(inj, node, False, signal.SIGTERM)))
register(Pause, _each(_pause))
register(Restart, _each(lambda inj, node: _stop(inj, node, True, signal.SIGKILL)))
register(Bounce, _each(lambda inj, node: _stop(inj, node, False, signal.SIGTERM)))
