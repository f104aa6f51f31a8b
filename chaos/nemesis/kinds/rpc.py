"""Protocol-level faults (:class:`chaos.model.faults.rpc.Rpc`): the ``kafka`` toxic on the target's links.

One fault is two toxics on every link it covers, with one ``fault`` name the toxic's registry shares across links
and streams (``toxiproxy/kafkatoxic``): ``<id>-requests`` on ``upstream`` (client to broker) decides which
requests it acts on; ``<id>-responses`` on ``downstream`` carries out what is left for the answer. The answers'
toxic goes on first and comes off last, after every request sent on with an id of the toxic's has been answered
(bounded), so no client is left with an answer it cannot match.

Evidence comes from Toxiproxy itself: the toxics listed on each link (effect), and at the heal the toxic's own
count of the RPCs it acted on, by API and version, with the first and last time (``acted``): a fault that matched
no RPC did not test anything, and the ``faults`` checker says so.
"""

from __future__ import annotations

import secrets
import time
import zlib
from typing import Any

from chaos.model.faults.rpc import Rpc, RpcAction
from chaos.model.kafka_api import API_KEYS, error_code
from chaos.nemesis.evidence import Active
from chaos.nemesis.kinds import Injection, register
from chaos.nemesis.kinds.link import links_of

#: how long the heal waits for the answers to requests the toxic renamed, beyond a delay's own length
DRAIN_S = 10.0


def toxics_for(spec: Rpc, fault_id: str, seed: int, instance: str) -> list:
    """The answers' toxic first, then the requests' (the order they are added in). ``instance`` names this
    occurrence in the toxic's registry: a cluster's Toxiproxy outlives runs (the pool keeps clusters), and fault
    ids repeat from run to run, so counts (and ``count``'s budget) must not carry over from an earlier run."""
    from chaos.cluster.toxiproxy import Stream, Toxic, ToxicType

    attrs: dict[str, Any] = {
        "fault": instance, "api_key": API_KEYS[spec.api], "action": spec.action.value,
        "error_code": error_code(spec.error) if spec.error else 0, "delay_ms": spec.delay_ms or 0,
        "count": spec.count or 0, "probability": spec.probability or 1.0,
        "seed": zlib.crc32(f"{seed}:{fault_id}:rpc".encode()),
    }
    return [Toxic(f"{fault_id}-responses", ToxicType.KAFKA, Stream.DOWNSTREAM, 1.0, {**attrs, "side": "responses"}),
            Toxic(f"{fault_id}-requests", ToxicType.KAFKA, Stream.UPSTREAM, 1.0, {**attrs, "side": "requests"})]


def stats_text(stats: dict[str, Any], api: str, action: RpcAction) -> str:
    """``acted on 2 RPCs (SyncGroup v5: 2) from … to …, 3 SyncGroup requests seen``."""
    by = ", ".join(f"{k}: {v}" for k, v in sorted(stats.get("by_version", {}).items()))
    text = f"acted on {stats.get('acted', 0)} RPC(s)"
    if by:
        text += f" ({by}) from {stats.get('first')} to {stats.get('last')}"
    text += f"; {stats.get('seen', 0)} {api} request(s) seen while it was on"
    if stats.get("unanswered"):
        text += f"; {stats['unanswered']} selected one(s) unanswered: their connection closed first"
    if action is RpcAction.DUPLICATE_REQUEST:
        text += f"; the broker answered {stats.get('duplicates_answered', 0)} of the copies"
    if stats.get("errors"):
        text += f"; {stats['errors']} answer(s) it could not decode, passed on unchanged ({stats.get('last_error')})"
    return text


def _inject(inj: Injection[Rpc]) -> list[Active]:
    c, spec = inj.cluster, inj.spec
    links = sorted({l for n in inj.nodes for l in links_of(inj, n)})
    toxics = toxics_for(spec, inj.fault_id, inj.seed, instance=f"{inj.fault_id}-{secrets.token_hex(8)}")
    for l in links:
        for tx in toxics:
            c.add_toxic(l, tx)
    want = {tx.name: str(tx.stream) for tx in toxics}
    last: dict[str, Any] = {}

    def listed(l: str) -> dict[str, dict[str, Any]]:
        return {t["name"]: t for t in c.toxics(l) if t["name"] in want}

    def stats() -> dict[str, Any]:
        """The fault's counts as the toxic reports them (shared by every link and stream: read one)."""
        for l in links:
            for t in listed(l).values():
                return dict(t.get("attributes", {}).get("stats", {}))
        return dict(last)

    def heal() -> None:
        requests, responses = toxics[1].name, toxics[0].name
        for l in links:
            if requests in listed(l):
                c.remove_toxic(l, requests)
        # answers to requests already sent on with an id of the toxic's still need it to be restored
        deadline = time.monotonic() + DRAIN_S + (spec.delay_ms or 0) / 1000
        while time.monotonic() < deadline and stats().get("pending", 0) > 0:
            time.sleep(0.05)
        last.update(stats())
        for l in links:
            if responses in listed(l):
                c.remove_toxic(l, responses)

    def present():
        seen = [{n: str(t.get("stream")) for n, t in listed(l).items()} for l in links]
        n = sum(s == want for s in seen)
        return n == len(links), (f"Toxiproxy lists the kafka toxic ({spec.api} {spec.action.value}) on upstream and "
                                 f"downstream on {n}/{len(links)} links")

    def gone():
        n = sum(not listed(l) for l in links)
        return n == len(links), f"kafka toxics removed from {n}/{len(links)} links"

    def acted():
        s = last or stats()
        return int(s.get("acted", 0)) > 0, stats_text(s, spec.api, spec.action)

    return [Active([], heal, present, gone, links, verify_acted=acted)]


register(Rpc, _inject)
