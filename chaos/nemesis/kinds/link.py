"""Link faults on Toxiproxy proxies: link down, black hole, reset, latency, bandwidth, slicer, limit data.

A member's links are its lane's proxies (every broker, through that lane); a
broker's links are chosen by ``links`` (its client lanes, its ZooKeeper
session, its links to the KRaft voters, or all); a ZooKeeper node's are every
broker's session to it; an isolated controller's are every link to and from it. A
toxic applies to open connections too; ``link_down`` closes them and refuses
new ones.

One-way faults (``direction``, :class:`chaos.model.experiment.Direction`, issue 16): on a client link
the proxy's ``upstream`` stream carries the client's requests and ``downstream`` the broker's
responses, so ``to_broker`` puts the toxic on ``upstream`` only and ``to_client`` on ``downstream``
only (Toxiproxy README, "Toxics": every toxic has a ``stream``). A ``to_client`` black hole lets a
request reach the broker and be applied (an OffsetCommit stored) while its response is held: the
client's outcome is unknown. Refused at load time where one direction means nothing:

* ``link_down`` disables the whole proxy (Toxiproxy has no one-way disable): a one-way cut is
  ``black_hole`` with a direction — chosen over turning ``link_down`` into a timeout toxic so that a
  fault type keeps one mechanism and one kind of evidence (port refused vs. toxic listed);
* ``reset_peer`` resets the TCP connection, which ends both ways at once;
* links that are not client links (a broker's ZooKeeper session or quorum links, a ZooKeeper
  node's, ``links: all``): "to the broker" names no end of ``broker-2.zk-1``; target a member, or a
  broker with ``links: clients``.
"""

from __future__ import annotations

from typing import Any

from chaos.model.target import BROKER_ROLES, MEMBER_ROLES, SINGLE_ROLES, LinkScope
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


#: Toxiproxy stream names per direction value (the model's ``Direction``, compared as strings: this
#: module is imported while the model builds its fault types, before ``Direction`` exists)
STREAMS: dict[str, tuple[str, ...]] = {"both": ("upstream", "downstream"), "to_broker": ("upstream",),
                                       "to_client": ("downstream",)}


def _client_link(name: str) -> bool:
    """A lane's proxy to a broker (``lane1.broker-2``, ``ctl.broker-1``): requests upstream, responses down."""
    return name.split(".", 1)[0].startswith(("lane", "ctl"))


def check_direction(spec: Any) -> None:
    """Refuse a ``direction`` that means nothing for this fault (module docstring says why)."""
    d = str(spec.direction)
    if d == "both":
        return
    t = spec.type.value
    if t == "link_down":
        raise ValueError(f"link_down disables the proxy both ways: for a one-way cut use type black_hole "
                         f"with direction {d}")
    if t == "reset_peer":
        raise ValueError("reset_peer resets the TCP connection, both ways at once: remove direction")
    node = spec.node or ""
    if spec.target in MEMBER_ROLES or (spec.target in BROKER_ROLES and spec.links is LinkScope.CLIENTS
                                       and not node.startswith(("zk-", "controller-"))):
        return
    raise ValueError(f"direction {d} is defined on client links only (requests to_broker, responses to_client): "
                     f"target a member, or a broker with links: clients")


def toxics_for(spec, fault_id: str) -> list:
    """The Toxiproxy toxics of a link fault, on the streams its ``direction`` names (``reset_peer``: upstream).

    ``both``: one toxic per stream; ``to_broker``: ``upstream`` only (requests); ``to_client``:
    ``downstream`` only (responses). Names are ``<fault_id>-<stream>``.
    """
    from chaos.cluster.toxiproxy import Stream, Toxic, ToxicType

    p = spec.params
    tox = p.get("toxicity", 1.0)
    streams = [Stream(s) for s in STREAMS[str(getattr(spec, "direction", "both"))]]

    def both(kind: ToxicType, attrs: dict) -> list[Toxic]:
        return [Toxic(f"{fault_id}-{s.value}", kind, s, tox, attrs) for s in streams]

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
    """The fault's toxics on every link; heal: removed. Evidence: what Toxiproxy itself lists.

    The effect holds when every link lists each of the fault's toxics on the stream it was added to
    (read back from Toxiproxy's API, not from what was asked): for a one-way fault that is the proof
    that the other stream carries none of them — ``to_client``: the timeout toxic on ``downstream``
    only, requests flow. Both texts name the direction.
    """
    c = inj.cluster
    direction = str(getattr(inj.spec, "direction", "both"))
    if direction != "both" and not all(_client_link(l) for l in links):  # the model refuses it: a guard
        raise ValueError(f"direction {direction} on non-client links {[l for l in links if not _client_link(l)]}")
    toxics = toxics_for(inj.spec, inj.fault_id)
    for l in links:
        for tx in toxics:
            c.add_toxic(l, tx)
    want = {tx.name: str(tx.stream) for tx in toxics}
    kinds = "+".join(sorted({str(tx.type) for tx in toxics}))
    streams = sorted(set(want.values()))
    way = f"direction {direction}"

    def listed(l: str) -> dict[str, str]:
        """This fault's toxics on ``l`` as Toxiproxy lists them: name -> stream."""
        return {t["name"]: str(t.get("stream")) for t in c.proxy_api.toxics(l) if t["name"] in want}

    def heal() -> None:
        for l in links:
            for name in listed(l):
                c.remove_toxic(l, name)

    def present():
        seen = [listed(l) for l in links]
        n = sum(s == want for s in seen)
        text = f"{way}: Toxiproxy lists {kinds} on {'+'.join(streams)} on {n}/{len(links)} links"
        wrong = sorted({f"{name}@{stream}" for s in seen for name, stream in s.items() if want[name] != stream})
        if wrong:
            text += f"; on another stream: {wrong}"
        elif direction != "both":
            text += f", on {'downstream' if streams == ['upstream'] else 'upstream'} none"
        return n == len(links), text

    def gone():
        n = sum(not listed(l) for l in links)
        return n == len(links), f"{way}: toxics removed from {n}/{len(links)} links"

    return Active([], heal, present, gone, links)


def _inject(inj: Injection) -> list[Active]:
    links = sorted({l for n in inj.nodes for l in links_of(inj, n)})
    return [down(inj, links) if inj.spec.type.value == "link_down" else toxic(inj, links)]


def _link(name: str, summary: str, params: frozenset[str] = frozenset(), one_way: bool = True) -> FaultKind:
    return FaultKind(name, "link", summary, _inject, targets=SINGLE_ROLES,
                     fields=frozenset({"direction"}) if one_way else frozenset(), check=check_direction,
                     params=params, target_error="link faults need one node or member as target, not {target}")


register(
    _link("link_down", "proxies disabled: connections closed, new ones refused (enabled again)", one_way=False),
    _link("black_hole", "timeout toxic 0: data held, connections open (toxic removed)"),
    _link("reset_peer", "connections reset (toxic removed)", one_way=False),
    _link("latency", "latency_ms + jitter_ms (toxic removed)", frozenset({"latency_ms"})),
    _link("bandwidth", "rate_kb (toxic removed)", frozenset({"rate_kb"})),
    _link("slicer", "packets sliced (toxic removed)"),
    _link("limit_data", "connection closed after bytes (toxic removed)", frozenset({"bytes"})),
)
