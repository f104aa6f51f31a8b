"""Targeted semantics that the fixtures do not pin down: client differences the checkers must tolerate."""

from __future__ import annotations

from chaos.checkers.registry import run_checkers
from chaos.checkers.result import CheckerName, Validity
from chaos.history import Header, History, from_dict

HEADER = Header(1, "t", 0, {}, {}, {})


def history(*events: dict) -> History:
    out = []
    for i, e in enumerate(events, 1):
        out.append(from_dict({"seq": i, "ts": float(i), "mono_ns": i * 10_000_000, **e}))
    return History(HEADER, tuple(out))


def own(kind: str, src: str, parts: list[int], gen: int | None, mid: str, incremental: bool = False) -> dict:
    return {"source": src, "kind": kind, "group": "g", "partitions": [["t", p] for p in parts], "generation": gen,
            "member_id": mid, "incremental": incremental}


def test_eager_revoke_tagged_with_the_new_generation_is_not_ownership_in_it():
    # Some clients report the generation of the join that follows an eager revocation.
    h = history(
        own("assigned", "consumer-0", [0], 1, "m0"),
        own("revoked", "consumer-0", [0], 2, "m0"),
        own("assigned", "consumer-1", [0], 2, "m1"),
        own("assigned", "consumer-0", [], 2, "m0"),
    )
    v = run_checkers(h, [CheckerName.OWNERSHIP_GENERATION, CheckerName.OWNERSHIP_TIME])
    assert v.valid is Validity.TRUE, [r.summary for r in v.results]


def test_cooperative_revoke_in_new_generation_still_owns_until_revoked():
    h = history(
        own("assigned", "consumer-0", [0], 1, "m0", incremental=True),
        own("revoked", "consumer-0", [0], 2, "m0", incremental=True),
        own("assigned", "consumer-1", [0], 2, "m1", incremental=True),
    )
    # Revoked before B got it: legal even within generation 2 in time, but it is the same
    # generation, which KIP-429 forbids (the move takes a second rebalance).
    r = run_checkers(h, [CheckerName.OWNERSHIP_GENERATION]).result(CheckerName.OWNERSHIP_GENERATION)
    assert r.valid is Validity.FALSE


def test_commit_with_newer_generation_than_observed_timeline_is_not_stale():
    h = history(
        {"source": "observer", "kind": "broker_log", "broker": 1, "group": "g", "event": "stabilized",
         "generation": 3, "member_id": None, "line": "Stabilized group g generation 3"},
        {"source": "consumer-0", "kind": "commit", "group": "g", "offsets": [["t", 0, 1]], "generation": 4,
         "member_id": "m0", "outcome": "ok", "error_code": None, "error_name": None, "auto": False},
    )
    assert run_checkers(h, [CheckerName.FENCING]).valid is Validity.TRUE


def test_fencing_unknown_without_timeline():
    h = history({"source": "consumer-0", "kind": "commit", "group": "g", "offsets": [["t", 0, 1]], "generation": 4,
                 "member_id": "m0", "outcome": "ok", "error_code": None, "error_name": None, "auto": False})
    assert run_checkers(h, [CheckerName.FENCING]).valid is Validity.UNKNOWN


def test_empty_history_is_vacuously_valid_or_unknown_never_a_crash():
    v = run_checkers(History(HEADER, ()))
    assert all(r.valid is not Validity.FALSE for r in v.results)
    assert not any("crashed" in r.summary for r in v.results), [r.summary for r in v.results]
