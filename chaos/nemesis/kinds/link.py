"""Link faults on Toxiproxy proxies: link down, black hole, reset, latency, bandwidth, slicer, limit data.

A member's links are its lane's proxies (every broker, through that lane); a
broker's links are chosen by ``links`` (its client lanes, its ZooKeeper
session, its links to the KRaft voters, or all); a ZooKeeper node's are every
broker's session to it; an isolated controller's are every link to and from it. A
toxic applies to open connections too; ``link_down`` closes them and refuses
new ones.

One-way faults (``direction``, :class:`chaos.model.faults.link.Direction`, issue 16): on a client link
the proxy's ``upstream`` stream carries the client's requests and ``downstream`` the broker's
responses, so ``to_broker`` puts the toxic on ``upstream`` only and ``to_client`` on ``downstream``
only (Toxiproxy README, "Toxics": every toxic has a ``stream``). A ``to_client`` black hole lets a
request reach the broker and be applied (an OffsetCommit stored) while its response is held: the
client's outcome is unknown. Refused at load time (:class:`chaos.model.faults.link.LinkFault`) where one
direction means nothing:

* ``link_down`` disables the whole proxy (Toxiproxy has no one-way disable): a one-way cut is
  ``black_hole`` with a direction — chosen over turning ``link_down`` into a timeout toxic so that a
  fault type keeps one mechanism and one kind of evidence (port refused vs. toxic listed);
* ``reset_peer`` resets the TCP connection, which ends both ways at once;
* links that are not client links (a broker's ZooKeeper session or quorum links, a ZooKeeper
  node's, ``links: all``): "to the broker" names no end of ``broker-2.zk-1``; target a member, or a
  broker with ``links: clients``.
"""

from __future__ import annotations

from chaos.model.faults.link import (
    Bandwidth,
    BlackHole,
    Direction,
    Latency,
    LimitData,
    LinkDown,
    LinkFault,
    ResetPeer,
    Slicer,
)
from chaos.model.faults.rpc import Rpc
from chaos.model.target import LinkScope
from chaos.nemesis.evidence import Active, port_open
from chaos.nemesis.kinds import Injection, register


def links_of(inj: Injection[LinkFault] | Injection[Rpc], node: str) -> list[str]:
    """The proxies a link fault (or an ``rpc`` fault, on the same proxies) on ``node`` covers."""
    c = inj.cluster
    if inj.run is not None and node in inj.run.member_specs:
        return c.links_of(inj.run.member_specs[node].lane)
    if node.startswith("zk-"):
        return c.links_of(node)
    own = c.links_of(node)
    if inj.spec.links is LinkScope.ZOOKEEPER:
        return [l for l in own if l.startswith(f"{node}.zk-")]
    if inj.spec.links is LinkScope.QUORUM:
        topo = inj.topology
        voters = {v.node for v in topo.controllers}
        return quorum_links(node, own, voters, voters | {b.node for b in topo.brokers})
    if inj.spec.links is LinkScope.CLIENTS:
        return [l for l in own if l.startswith("lane")]
    return own


def quorum_links(node: str, own: list[str], voters: set[str], nodes: set[str]) -> list[str]:
    """KRaft's quorum links of ``node`` among ``own`` (its links, each ``<from>.<to>``; ``nodes``: the cluster's
    brokers and controllers): a broker's links to the voters (its registration, heartbeats and metadata Fetch); a
    voter's links that carry the quorum to and from it — every link into its controller listener from another
    node (its brokers' and the other voters' requests; not its client lanes, when it is a combined voter) and its
    links to the voters. A voter's links to voters alone were its self-link only on a one-controller cluster,
    which carries nothing (found by exploring 4.4.0: a Fetch fault on the controller acted on 0 requests)."""
    ends = [(l, *l.split(".", 1)) for l in own]
    if node in voters:
        return [l for l, src, dst in ends if (dst == node and src in nodes) or (src == node and dst in voters)]
    return [l for l, src, dst in ends if src == node and dst in voters]


#: Toxiproxy stream names per direction
STREAMS: dict[Direction, tuple[str, ...]] = {Direction.BOTH: ("upstream", "downstream"),
                                             Direction.TO_BROKER: ("upstream",), Direction.TO_CLIENT: ("downstream",)}


def _client_link(name: str) -> bool:
    """A lane's proxy to a broker (``lane1.broker-2``, ``ctl.broker-1``): requests upstream, responses down."""
    return name.split(".", 1)[0].startswith(("lane", "ctl"))


def toxics_for(spec: LinkFault, fault_id: str) -> list:
    """The Toxiproxy toxics of a link fault, on the streams its ``direction`` names (``reset_peer``: upstream).

    ``both``: one toxic per stream; ``to_broker``: ``upstream`` only (requests); ``to_client``:
    ``downstream`` only (responses). Names are ``<fault_id>-<stream>``.
    """
    from chaos.cluster.toxiproxy import Stream, Toxic, ToxicType

    tox = spec.params.toxicity
    streams = [Stream(s) for s in STREAMS[spec.direction]]

    def both(kind: ToxicType, attrs: dict) -> list[Toxic]:
        return [Toxic(f"{fault_id}-{s.value}", kind, s, tox, attrs) for s in streams]

    if isinstance(spec, BlackHole):
        return both(ToxicType.TIMEOUT, {"timeout": 0})
    if isinstance(spec, ResetPeer):
        return [Toxic(f"{fault_id}-upstream", ToxicType.RESET_PEER, Stream.UPSTREAM, tox, {"timeout": 0})]
    if isinstance(spec, Latency):
        return both(ToxicType.LATENCY, {"latency": int(spec.params.latency_ms), "jitter": int(spec.params.jitter_ms)})
    if isinstance(spec, Bandwidth):
        return both(ToxicType.BANDWIDTH, {"rate": int(spec.params.rate_kb)})
    if isinstance(spec, Slicer):
        return both(ToxicType.SLICER, {"average_size": spec.params.avg_size,
                                       "size_variation": spec.params.size_variation, "delay": spec.params.delay_us})
    if isinstance(spec, LimitData):
        return both(ToxicType.LIMIT_DATA, {"bytes": spec.params.bytes})
    raise ValueError(f"{spec.type} has no toxic")


def down(inj: Injection[LinkFault], links: list[str]) -> Active:
    """Proxies disabled: connections closed, new ones refused; heal: enabled again."""
    c = inj.cluster
    ports = {l: inj.topology.link(l).listen_port for l in links}
    host = inj.topology.address("toxiproxy")
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


def toxic(inj: Injection[LinkFault], links: list[str]) -> Active:
    """The fault's toxics on every link; heal: removed. Evidence: what Toxiproxy itself lists.

    The effect holds when every link lists each of the fault's toxics on the stream it was added to
    (read back from Toxiproxy's API, not from what was asked): for a one-way fault that is the proof
    that the other stream carries none of them — ``to_client``: the timeout toxic on ``downstream``
    only, requests flow. Both texts name the direction.
    """
    c = inj.cluster
    direction = inj.spec.direction.value
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
        return {t["name"]: str(t.get("stream")) for t in c.toxics(l) if t["name"] in want}

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


def _inject(inj: Injection[LinkFault]) -> list[Active]:
    links = sorted({l for n in inj.nodes for l in links_of(inj, n)})
    return [down(inj, links) if isinstance(inj.spec, LinkDown) else toxic(inj, links)]


for _kind in (LinkDown, BlackHole, ResetPeer, Latency, Bandwidth, Slicer, LimitData):
    register(_kind, _inject)
