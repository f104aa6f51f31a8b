"""Link faults on Toxiproxy proxies: link down, black hole, reset, latency, bandwidth, slicer, limit data.

A member's links are its lane's proxies (every broker, through that lane); a
broker's links are chosen by ``links`` (its client lanes, its ZooKeeper
session, its links to the KRaft voters, or all); a ZooKeeper node's are every
broker's session to it; an isolated controller's are every link to and from it. A
toxic applies to open connections too; ``link_down`` closes them and refuses
new ones.
"""

from __future__ import annotations

from chaos.model.target import SINGLE_ROLES, LinkScope
from chaos.nemesis.evidence import Active, port_open
from chaos.nemesis.kinds import FaultKind, Injection, register


def links_of(inj: Injection, node: str) -> list[str]:
    """The proxies a link fault on ``node`` covers."""
    c = inj.cluster
    if inj.run is not None and node in inj.run.member_specs:
        return c.links_of(inj.run.member_specs[node].lane)
    if node.startswith("zk-"):
        return c.links_of(node)
    own = c.links_of(node)
    if inj.spec.links is LinkScope.ZOOKEEPER:
        return [l for l in own if l.startswith(f"{node}.zk-")]
    if inj.spec.links is LinkScope.QUORUM:  # KRaft: every link from the broker to a voter (docs/architecture.md)
        voters = {c.node for c in c.topology.controllers}
        return [l for l in own if l.split(".", 1)[0] == node and l.split(".", 1)[1] in voters]
    if inj.spec.links is LinkScope.CLIENTS:
        return [l for l in own if l.startswith("lane")]
    return own


def toxics_for(spec, fault_id: str) -> list:
    """The Toxiproxy toxics of a link fault (both directions unless the toxic is one-way)."""
    from chaos.cluster.toxiproxy import Stream, Toxic, ToxicType

    p = spec.params
    tox = p.get("toxicity", 1.0)

    def both(kind: ToxicType, attrs: dict) -> list[Toxic]:
        return [Toxic(f"{fault_id}-{s.value}", kind, s, tox, attrs) for s in (Stream.UPSTREAM, Stream.DOWNSTREAM)]

    t = spec.type.value
    if t == "black_hole":
        return both(ToxicType.TIMEOUT, {"timeout": 0})
    if t == "reset_peer":
        return [Toxic(f"{fault_id}-upstream", ToxicType.RESET_PEER, Stream.UPSTREAM, tox, {"timeout": 0})]
    if t == "latency":
        return both(ToxicType.LATENCY, {"latency": int(p["latency_ms"]), "jitter": int(p.get("jitter_ms", 0))})
    if t == "bandwidth":
        return both(ToxicType.BANDWIDTH, {"rate": int(p["rate_kb"])})
    if t == "slicer":
        return both(ToxicType.SLICER, {"average_size": int(p.get("avg_size", 64)),
                                       "size_variation": int(p.get("size_variation", 32)),
                                       "delay": int(p.get("delay_us", 100))})
    if t == "limit_data":
        return both(ToxicType.LIMIT_DATA, {"bytes": int(p["bytes"])})
    raise ValueError(f"{t} has no toxic")


def down(inj: Injection, links: list[str]) -> Active:
    """Proxies disabled: connections closed, new ones refused; heal: enabled again."""
    c = inj.cluster
    ports = {l: c.topology.link(l).listen_port for l in links}
    host = c.topology.address("toxiproxy")
    for l in links:
        c.link_down(l)

    def heal() -> None:
        for l in links:
            c.link_up(l)

    def refused():
        n = [l for l, p in ports.items() if not port_open(p, host)]
        return len(n) == len(links), f"{len(n)}/{len(links)} proxy ports refuse connections"

    def accepted():
        n = [l for l, p in ports.items() if port_open(p, host)]
        return len(n) == len(links), f"{len(n)}/{len(links)} proxy ports accept connections"

    return Active([], heal, refused, accepted, links)


def toxic(inj: Injection, links: list[str]) -> Active:
    """The fault's toxics on every link; heal: removed. Evidence: what Toxiproxy itself lists."""
    c = inj.cluster
    toxics = toxics_for(inj.spec, inj.fault_id)
    for l in links:
        for tx in toxics:
            c.add_toxic(l, tx)
    names = {tx.name for tx in toxics}

    def listed(l: str) -> set[str]:
        return {t["name"] for t in c.proxy_api.toxics(l)} & names

    def heal() -> None:
        for l in links:
            for name in listed(l):
                c.remove_toxic(l, name)

    def present():
        n = sum(len(listed(l)) == len(names) for l in links)
        return n == len(links), f"Toxiproxy lists {sorted(names)} on {n}/{len(links)} links"

    def gone():
        n = sum(not listed(l) for l in links)
        return n == len(links), f"toxics removed from {n}/{len(links)} links"

    return Active([], heal, present, gone, links)


def _inject(inj: Injection) -> list[Active]:
    links = sorted({l for n in inj.nodes for l in links_of(inj, n)})
    return [down(inj, links) if inj.spec.type.value == "link_down" else toxic(inj, links)]


def _link(name: str, summary: str, params: frozenset[str] = frozenset()) -> FaultKind:
    return FaultKind(name, "link", summary, _inject, targets=SINGLE_ROLES,
                     params=params, target_error="link faults need one node or member as target, not {target}")


register(
    _link("link_down", "proxies disabled: connections closed, new ones refused (enabled again)"),
    _link("black_hole", "timeout toxic 0: data held, connections open (toxic removed)"),
    _link("reset_peer", "connections reset (toxic removed)"),
    _link("latency", "latency_ms + jitter_ms (toxic removed)", frozenset({"latency_ms"})),
    _link("bandwidth", "rate_kb (toxic removed)", frozenset({"rate_kb"})),
    _link("slicer", "packets sliced (toxic removed)"),
    _link("limit_data", "connection closed after bytes (toxic removed)", frozenset({"bytes"})),
)
