"""One-way link faults (issue 16 item 3): the model's ``direction``, its refusals, the toxics and their evidence."""

import threading

import pytest

from chaos.cluster.toxiproxy import Stream, ToxicType
from chaos.errors import UsageError
from chaos.experiment import parse_experiment
from chaos.model.faults.link import BlackHole, Direction
from chaos.model.faults.process import Kill
from chaos.nemesis.kinds import Injection
from chaos.nemesis.kinds.link import toxic, toxics_for


def fault(**kw):
    return parse_experiment({"name": "x", "faults": [kw]}).faults[0]


def test_direction_defaults_to_both_and_every_link_fault_keeps_its_two_toxics():
    f = fault(type="black_hole", target="member", node="consumer-0")
    assert f.direction is Direction.BOTH
    assert [(t.name, t.stream, t.type) for t in toxics_for(f, "f0")] == [
        ("f0-upstream", Stream.UPSTREAM, ToxicType.TIMEOUT), ("f0-downstream", Stream.DOWNSTREAM, ToxicType.TIMEOUT)]
    # reset_peer stays on upstream, as before directions existed
    reset = fault(type="reset_peer", target="member", node="consumer-0")
    assert [(t.stream, t.type) for t in toxics_for(reset, "f1")] == [(Stream.UPSTREAM, ToxicType.RESET_PEER)]


@pytest.mark.parametrize(("direction", "stream"), [("to_client", Stream.DOWNSTREAM), ("to_broker", Stream.UPSTREAM)])
@pytest.mark.parametrize(("type_", "params", "toxic_type", "attrs"), [
    ("black_hole", {}, ToxicType.TIMEOUT, {"timeout": 0}),
    ("latency", {"latency_ms": 200, "jitter_ms": 5}, ToxicType.LATENCY, {"latency": 200, "jitter": 5}),
    ("bandwidth", {"rate_kb": 8}, ToxicType.BANDWIDTH, {"rate": 8}),
    ("slicer", {}, ToxicType.SLICER, {"average_size": 64, "size_variation": 32, "delay": 100}),
    ("limit_data", {"bytes": 1000}, ToxicType.LIMIT_DATA, {"bytes": 1000}),
])
def test_a_one_way_fault_is_one_toxic_on_the_stream_of_its_direction(direction, stream, type_, params, toxic_type,
                                                                      attrs):
    f = fault(type=type_, target="member", node="consumer-1", params=params, direction=direction)
    (t,) = toxics_for(f, "f3")
    assert (t.name, t.stream, t.type, t.attributes) == (f"f3-{stream.value}", stream, toxic_type, attrs)
    assert t.to_json()["stream"] == stream.value  # what Toxiproxy is sent


def test_broker_targets_take_a_direction_on_their_client_lanes_only():
    f = fault(type="latency", target="coordinator", links="clients", params={"latency_ms": 50}, direction="to_broker")
    assert f.direction is Direction.TO_BROKER
    assert fault(type="black_hole", target="node", node="broker-2", links="clients",
                 direction="to_client").direction is Direction.TO_CLIENT
    for bad in (dict(target="coordinator"),                                  # links: all (ZooKeeper session too)
                dict(target="coordinator", links="zookeeper"),
                dict(target="node", node="zk-1", links="clients")):          # a ZooKeeper node's links are sessions
        with pytest.raises(UsageError, match=r"faults\.0: direction to_client is defined on client links only.*"
                                             r"target a member, or a broker with links: clients"):
            fault(type="black_hole", direction="to_client", **bad)


@pytest.mark.parametrize(("kw", "message"), [
    (dict(type="link_down"), "link_down disables the proxy both ways: for a one-way cut use type black_hole "
                             "with direction to_client"),
    (dict(type="reset_peer"), "reset_peer resets the TCP connection, both ways at once: remove direction"),
    (dict(type="kill"), r"direction applies to link faults only \(bandwidth, black_hole, latency, limit_data, "
                        r"link_down, reset_peer, slicer\), not kill"),
    (dict(type="pause"), "not pause"),
])
def test_a_direction_that_means_nothing_is_refused_at_load_time_in_one_line(kw, message):
    with pytest.raises(UsageError, match=message) as err:
        fault(target="member", node="consumer-0", direction="to_client", **kw)
    assert "\n" not in str(err.value)


def test_direction_both_is_accepted_by_every_link_kind_and_unknown_values_are_refused():
    for kind in ("link_down", "black_hole", "reset_peer", "slicer"):
        assert fault(type=kind, target="coordinator", direction="both").direction is Direction.BOTH
    with pytest.raises(UsageError, match="direction applies to link faults only"):  # a kill owns no direction
        fault(type="kill", target="coordinator", direction="both")
    with pytest.raises(UsageError, match=r"faults\.0\.direction: Input should be 'both', 'to_broker' or 'to_client'"):
        fault(type="black_hole", target="member", node="consumer-0", direction="in")
    assert BlackHole.model_json_schema()["properties"]["direction"]["default"] == "both"
    assert "direction" not in Kill.model_json_schema()["properties"]


class Cluster:
    """The cluster methods the link kind calls, over a toxic listing as Toxiproxy's API answers it
    (``GET /proxies/<name>/toxics``) — a stand-in for the HTTP server in unit tests."""

    def __init__(self, flip: bool = False):
        self.listing: dict[str, list[dict]] = {}
        self.flip = flip  # a server that put the toxic on the other stream: the evidence must say so
        self.proxy_api = self  # ``proxy_api.toxics(link)``

    def add_toxic(self, link, tx):
        doc = tx.to_json()
        if self.flip:
            doc["stream"] = "upstream" if doc["stream"] == "downstream" else "downstream"
        self.listing.setdefault(link, []).append(doc)

    def remove_toxic(self, link, name):
        self.listing[link] = [t for t in self.listing[link] if t["name"] != name]

    def toxics(self, link):
        return list(self.listing.get(link, []))


def inject(cluster, spec, links):
    inj = Injection(cluster, None, "f0", spec, ["consumer-0"], threading.Event(), resolve=lambda role: [])
    return toxic(inj, links)


def test_the_effect_evidence_reads_the_stream_back_and_says_the_direction():
    c = Cluster()
    links = ["lane0.broker-1", "lane0.broker-2"]
    a = inject(c, fault(type="black_hole", target="member", node="consumer-0", direction="to_client"), links)
    assert [t["stream"] for l in links for t in c.listing[l]] == ["downstream", "downstream"]
    ok, text = a.verify_effect()
    assert ok and text == "direction to_client: Toxiproxy lists timeout on downstream on 2/2 links, on upstream none"
    a.heal()
    assert a.verify_healed() == (True, "direction to_client: toxics removed from 2/2 links")


def test_a_toxic_listed_on_the_wrong_stream_is_no_evidence_of_a_one_way_fault():
    c = Cluster(flip=True)
    a = inject(c, fault(type="black_hole", target="member", node="consumer-0", direction="to_broker"),
               ["lane1.broker-1"])
    ok, text = a.verify_effect()
    assert not ok and "on 0/1 links; on another stream: ['f0-upstream@downstream']" in text


def test_both_ways_evidence_names_both_streams():
    c = Cluster()
    a = inject(c, fault(type="latency", target="member", node="consumer-0", params={"latency_ms": 10}),
               ["lane0.broker-1"])
    assert a.verify_effect() == (True, "direction both: Toxiproxy lists latency on downstream+upstream on 1/1 links")


def test_the_injection_refuses_a_direction_on_links_that_are_not_client_links():
    spec = fault(type="black_hole", target="member", node="consumer-0", direction="to_client")
    with pytest.raises(ValueError, match="non-client links"):
        inject(Cluster(), spec, ["broker-1.zk-1"])
