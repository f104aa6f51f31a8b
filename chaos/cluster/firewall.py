"""Pair-wise broker↔broker partitions with iptables (docs/architecture.md, "Links, lanes and the network").

Brokers talk to each other over the unproxied INTERNAL listener, and one
proxy per listener cannot cut A↔B while leaving A↔C, so partitions happen at
the network level. Each broker runs with a group id of its own (root only);
iptables' ``owner`` match (``--gid-owner``) then identifies the *sender* of a
locally generated packet, and the destination port identifies the receiving
broker's INTERNAL listener. Cutting A↔B drops A's packets to B's listener and
B's packets to A's: every TCP flow between them has one direction blocked, so
it stalls (replica fetches, controller requests), while both still reach
ZooKeeper, the other brokers and every client.

Rules live in a chain of the cluster's own (``KC<hash>``), jumped to from
``OUTPUT``; the session records the commands that remove it, so the chain
disappears on close and is reaped after a crash of the driver.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import threading

from chaos.errors import InfrastructureError

#: first group id handed to brokers; each cluster takes a block of 16
GID_BASE = 61000


def unavailable_reason() -> str | None:
    """Why pair-wise partitions cannot work here, or None."""
    if os.geteuid() != 0:
        return "pair-wise partitions need root (iptables and per-broker group ids)"
    if shutil.which("iptables") is None:
        return "iptables not found: apt-get install iptables"
    return None


def broker_gid(session_id: str, broker_id: int) -> int:
    block = int(hashlib.sha1(session_id.encode()).hexdigest(), 16) % 2000
    return GID_BASE + block * 16 + broker_id


class Firewall:
    def __init__(self, session):
        self.session = session
        self.chain = "KC" + hashlib.sha1(session.id.encode()).hexdigest()[:12]
        self._ready = False
        # two partition faults of one run may be injected at once (live triggers fire on one group event):
        # both would find no chain and the second ``-N`` fail (found exploring: "Chain already exists")
        self._lock = threading.Lock()

    def _ipt(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        res = subprocess.run(["iptables", "-w", "5", *args], capture_output=True, text=True, timeout=15)
        if check and res.returncode != 0:
            raise InfrastructureError(f"iptables {' '.join(args)} failed: {res.stderr.strip()[:200]}")
        return res

    def _ensure(self) -> None:
        with self._lock:
            self._create()

    def _create(self) -> None:
        if self._ready:
            return
        reason = unavailable_reason()
        if reason:
            raise InfrastructureError(reason)
        # recorded first, so a crash between the two steps still gets cleaned up
        self.session.on_reap(["iptables", "-w", "5", "-D", "OUTPUT", "-j", self.chain])
        self.session.on_reap(["iptables", "-w", "5", "-F", self.chain])
        self.session.on_reap(["iptables", "-w", "5", "-X", self.chain])
        # a driver that attached the session before (chaos run --cluster) may have made the chain already
        if not self._exists():
            self._ipt("-N", self.chain)
        if self._ipt("-C", "OUTPUT", "-j", self.chain, check=False).returncode != 0:
            self._ipt("-I", "OUTPUT", "-j", self.chain)
        self._ready = True

    def _exists(self) -> bool:
        return self._ipt("-S", self.chain, check=False).returncode == 0

    @staticmethod
    def _rule(gid: int, port: int) -> list[str]:
        return ["-p", "tcp", "-d", "127.0.0.1", "--dport", str(port), "-m", "owner", "--gid-owner", str(gid),
                "-j", "DROP"]

    def cut(self, a_gid: int, a_port: int, b_gid: int, b_port: int) -> None:
        """Drop a's packets to b's INTERNAL port and b's to a's."""
        self._ensure()
        self._ipt("-A", self.chain, *self._rule(a_gid, b_port))
        self._ipt("-A", self.chain, *self._rule(b_gid, a_port))

    def mend(self, a_gid: int, a_port: int, b_gid: int, b_port: int) -> None:
        self._ipt("-D", self.chain, *self._rule(a_gid, b_port), check=False)
        self._ipt("-D", self.chain, *self._rule(b_gid, a_port), check=False)

    def rules(self) -> list[str]:
        if not self._ready:
            return []
        out = self._ipt("-S", self.chain, check=False).stdout
        return [l for l in out.splitlines() if l.startswith("-A ")]

    def clear(self) -> None:
        """Drop every cut, those an earlier driver of an attached session left included."""
        if self._ready or (unavailable_reason() is None and self._exists()):
            self._ipt("-F", self.chain, check=False)
