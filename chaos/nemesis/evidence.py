"""An injected fault and the evidence that it took effect and healed.

Evidence is gathered by looking at the world, not at the nemesis's own
bookkeeping: is the process still there, and in which state per the kernel;
does the proxy's port accept a TCP connection; does Toxiproxy list the toxic;
does the broker appear in the cluster metadata again.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field

#: (it holds, what was seen)
Evidence = tuple[bool, str]

GONE = "gone"


@dataclass
class Active:
    """An injected fault: how to heal it and how to prove effect and heal."""

    nodes: list[str]
    heal: Callable[[], None]
    verify_effect: Callable[[], Evidence]
    verify_healed: Callable[[], Evidence]
    links: list[str] = field(default_factory=list)
    #: for a fault that acts on what passes (an ``rpc`` fault): whether it acted on anything, read at the heal
    verify_acted: Callable[[], Evidence] | None = None


def proc_state(pid: int) -> str:
    """The kernel's state of ``pid`` (psutil's names: running, sleeping, stopped, zombie …) or ``gone``."""
    import psutil

    try:
        return psutil.Process(pid).status()
    except psutil.NoSuchProcess:
        return GONE


def settled_state(pid: int, want: str, timeout: float = 2.0) -> str:
    """The process state once it reads ``want`` (signals are delivered asynchronously), or the last seen."""
    deadline = time.monotonic() + timeout
    st = proc_state(pid)
    while st != want and st != GONE and time.monotonic() < deadline:
        time.sleep(0.01)
        st = proc_state(pid)
    return st


def tree_states(pids: list[int], want: str, timeout: float = 2.0) -> dict[int, str]:
    """Each pid's kernel state once all read ``want`` (or are gone), or the last seen at ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        states = {pid: proc_state(pid) for pid in pids}
        if all(st in (want, GONE) for st in states.values()) or time.monotonic() >= deadline:
            return states
        time.sleep(0.01)


def states_text(states: dict[int, str]) -> str:
    return ", ".join(f"pid {pid} {st}" for pid, st in states.items())


def port_open(port: int, host: str) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False
