"""What happened to the run (chaos.checkers.incidents), on hand-made histories."""

from __future__ import annotations

from pathlib import Path

from chaos.checkers.bounds import CheckerBounds
from chaos.checkers.incidents import IncidentKind, collect, traceback_files
from chaos.checkers.judge import verdict_dict
from chaos.checkers.registry import run_checkers
from chaos.history import Header, History, from_dict

HEADER = Header(1, "t", 0, {}, {}, {})
S = 1_000_000_000


def history(*events: tuple[float, dict], header: Header = HEADER) -> History:
    """Events at the given second marks."""
    out = [from_dict({"seq": i, "ts": float(t), "mono_ns": int(t * S), **e}) for i, (t, e) in enumerate(events, 1)]
    return History(header, tuple(out))


def start(src: str, session_ms: int = 6000, poll_ms: int = 30000) -> dict:
    return {"source": src, "kind": "member_start", "group": "g", "client": "confluent-kafka",
            "client_version": "2", "instance_id": None, "assignor": "range", "protocol": "eager",
            "commit_mode": "sync", "session_timeout_ms": session_ms, "max_poll_interval_ms": poll_ms,
            "auto_commit_interval_ms": None, "wrong_mode": None}


def assigned(src: str, parts: list[int]) -> dict:
    return {"source": src, "kind": "assigned", "group": "g", "partitions": [["t", p] for p in parts],
            "generation": 1, "member_id": f"{src}-m", "incremental": False}


def stop(src: str, clean: bool, signal: str | None = None) -> dict:
    return {"source": src, "kind": "member_stop", "group": "g", "clean": clean, "signal": signal}


def error(src: str, message: str, fatal: bool, name: str | None = None) -> dict:
    return {"source": src, "kind": "error", "message": message, "error_code": None, "error_name": name,
            "fatal": fatal}


def phase(name: str) -> dict:
    return {"source": "runner", "kind": "phase", "name": name}


def fault(kind: str, fid: str, node: str = "consumer-1", **extra) -> dict:
    base = {"source": "nemesis", "kind": kind, "fault_id": fid}
    if kind == "fault_start":
        base.update(fault_type="kill", target_role="member", node=node, params={}, trigger="at_s=1")
    elif kind == "fault_end":
        base.update(fault_type="kill", node=node)
    base.update(extra)
    return base


def verified(fid: str, stage: str, ok: bool, evidence: str = "seen") -> dict:
    return {"source": "nemesis", "kind": "fault_verified", "fault_id": fid, "stage": stage, "ok": ok,
            "evidence": evidence}


def send(src: str, kind: str, error_name: str = "_MSG_TIMED_OUT") -> dict:
    if kind == "send_ok":
        return {"source": src, "kind": kind, "topic": "t", "partition": 0, "offset": 0, "key": None, "value": "v"}
    extra = {"error_code": -192} if kind == "send_fail" else {}
    return {"source": src, "kind": kind, "topic": "t", "key": None, "value": "v", "error_name": error_name, **extra}


def test_a_member_whose_handler_raised_is_listed_first_with_the_exception_and_its_traceback():
    h = history(
        (0.0, phase("setup")),
        (0.1, start("consumer-0")),
        (0.5, assigned("consumer-0", [0])),
        (3.0, error("consumer-0", "handler raised on t-0@17: RuntimeError: downstream service unavailable",
                    True, "RuntimeError")),
        (3.0, stop("consumer-0", clean=False)),
        (9.0, phase("teardown")),
    )
    [inc] = collect(h, {"consumer-0": "workers/consumer-0.traceback.txt"})
    assert inc.kind is IncidentKind.MEMBER_DIED and inc.source == "consumer-0"
    assert "RuntimeError: downstream service unavailable" in inc.description
    assert inc.traceback == "workers/consumer-0.traceback.txt"
    assert inc.evidence == (4, 5) and abs(inc.at_s - 3.0) < 1e-9
    assert "(traceback: workers/consumer-0.traceback.txt)" in inc.line()


def test_a_kill_fault_on_the_member_is_the_plan_not_an_incident_but_a_crash_elsewhere_is():
    h = history(
        (0.0, start("consumer-0")),
        (0.0, start("consumer-1")),
        (0.5, assigned("consumer-0", [0])),
        (0.5, assigned("consumer-1", [1])),
        (1.0, fault("fault_start", "f1", node="consumer-1")),
        (1.0, verified("f1", "effect", True)),
        (1.1, stop("consumer-1", clean=False, signal="SIGKILL")),
        (2.0, fault("fault_end", "f1", node="consumer-1")),
        (2.0, verified("f1", "healed", True)),
        (4.0, stop("consumer-0", clean=False, signal="SIGKILL")),
    )
    [inc] = collect(h)
    assert inc.kind is IncidentKind.MEMBER_DIED and inc.source == "consumer-0"
    assert "SIGKILL" in inc.description and "no fault on it" in inc.description


def test_teardown_stops_and_clean_stops_are_not_incidents():
    h = history(
        (0.0, start("consumer-0")),
        (0.5, assigned("consumer-0", [0])),
        (1.0, stop("consumer-0", clean=True)),
        (1.5, start("consumer-0")),
        (1.6, assigned("consumer-0", [0])),
        (5.0, phase("teardown")),
        (6.0, stop("consumer-0", clean=False, signal="SIGKILL")),  # did not stop within the grace: not the run's
    )
    assert collect(h) == ()


def test_a_fatal_error_without_a_stop_is_listed_as_such_and_non_fatal_errors_are_not():
    h = history(
        (0.0, start("consumer-0")),
        (0.5, assigned("consumer-0", [0])),
        (1.0, error("consumer-0", "broker down", False, "_TRANSPORT")),
        (2.0, error("consumer-0", "Fatal: fenced", True, "_FENCED")),
    )
    [inc] = collect(h)
    assert inc.kind is IncidentKind.FATAL_CLIENT_ERROR and "Fatal: fenced [_FENCED]" in inc.description


def test_faults_that_did_not_fire_take_effect_or_heal_are_listed_in_time_order():
    h = history(
        (0.0, fault("fault_start", "f1")),                         # no effect evidence
        (0.1, fault("fault_start", "f2")),
        (0.2, verified("f2", "effect", False, "pid 7 running")),   # did not take effect
        (1.0, fault("fault_end", "f1")),                           # no heal evidence
        (1.0, fault("fault_end", "f2")),
        (1.1, verified("f2", "healed", False, "proxy still disabled")),
        (2.0, verified("f3", "fired", False, "trigger not seen in 10s")),
        (2.5, fault("fault_start", "f4")),
        (2.5, verified("f4", "effect", True)),
        (3.0, phase("teardown")),                                   # f4 never healed
    )
    got = [(i.kind, i.description) for i in collect(h)]
    kinds = [k for k, _ in got]
    assert kinds == [IncidentKind.FAULT_NOT_IN_EFFECT, IncidentKind.FAULT_NOT_IN_EFFECT,
                     IncidentKind.FAULT_NOT_HEALED, IncidentKind.FAULT_NOT_HEALED, IncidentKind.FAULT_NOT_FIRED,
                     IncidentKind.FAULT_NOT_HEALED]
    text = " | ".join(d for _, d in got)
    assert "f1 (kill on consumer-1): no evidence that it took effect" in text
    assert "pid 7 running" in text and "proxy still disabled" in text and "f3 never fired" in text
    assert "f4 (kill on consumer-1) was never healed" in text


def test_a_member_never_assigned_is_listed_after_its_patience_or_when_it_crashed():
    h = history(
        (0.0, start("consumer-0", session_ms=1000, poll_ms=2000)),
        (0.0, start("consumer-1", session_ms=1000, poll_ms=2000)),
        (0.0, start("consumer-2", session_ms=1000, poll_ms=2000)),
        (0.5, assigned("consumer-0", [0])),
        (0.7, stop("consumer-2", clean=False)),       # crashed before joining
        (2.0, start("consumer-3", session_ms=1000, poll_ms=2000)),  # started late: not long enough to tell
        (4.0, phase("teardown")),
    )
    got = {(i.kind, i.source) for i in collect(h)}
    assert (IncidentKind.NEVER_JOINED, "consumer-1") in got          # ran 4 s > 1 s + 2 s
    assert (IncidentKind.NEVER_JOINED, "consumer-2") in got          # crashed without joining
    assert (IncidentKind.MEMBER_DIED, "consumer-2") in got
    assert not any(s in ("consumer-0", "consumer-3") for _, s in got)


def test_an_empty_assignment_counts_as_joined():
    h = history((0.0, start("consumer-0", 1000, 2000)), (0.5, assigned("consumer-0", [])), (9.0, phase("teardown")))
    assert collect(h) == ()


def test_producers_that_could_not_produce():
    h = history(
        (0.0, send("producer-0", "send_ok")),
        (0.1, send("producer-0", "send_fail", "_MSG_TIMED_OUT")),
        (0.2, send("producer-1", "send_unknown", "_NOT_FLUSHED")),
        (0.3, send("producer-1", "send_fail", "_MSG_TIMED_OUT")),
    )
    got = {i.source: i.description for i in collect(h)}
    assert "had sends fail: 1 send(s) failed or unknown, 1 acknowledged (first: _MSG_TIMED_OUT" in got["producer-0"]
    assert "could not produce: 2 send(s) failed or unknown, 0 acknowledged (first: _NOT_FLUSHED" in got["producer-1"]


def test_a_workload_with_producers_and_no_send_at_all():
    header = Header(1, "t", 0, {"workload": {"producers": [{"rate": 10}]}}, {}, {})
    h = history((0.0, phase("setup")), (1.0, phase("teardown")), header=header)
    [inc] = collect(h)
    assert inc.kind is IncidentKind.PRODUCER_FAILED and "no send was recorded" in inc.description


def test_traceback_files_lists_what_workers_wrote(tmp_path: Path):
    (tmp_path / "workers").mkdir()
    (tmp_path / "workers" / "consumer-1.traceback.txt").write_text("Traceback ...")
    (tmp_path / "workers" / "consumer-1.out").write_text("")
    assert traceback_files(tmp_path) == {"consumer-1": "workers/consumer-1.traceback.txt"}
    assert traceback_files(tmp_path / "missing") == {}


def test_checks_json_lists_incidents_before_results():
    h = history((0.0, start("consumer-0")), (0.5, assigned("consumer-0", [0])),
                (1.0, error("consumer-0", "RuntimeError: boom", True)), (1.0, stop("consumer-0", False)))
    d = verdict_dict(h, run_checkers(h), CheckerBounds())
    keys = list(d)
    assert keys.index("incidents") < keys.index("results")
    assert d["incidents"][0]["kind"] == "member_died" and "RuntimeError: boom" in d["incidents"][0]["description"]


def test_a_fault_on_every_member_is_the_plan_for_each_of_them():
    """``kill all_members`` / ``crash_replace all_members`` record every member hit in one fault_start
    (``node`` comma-separated): each one's death is the plan, a member outside the list still an incident
    (found by ``chaos explore``: crash_replace on all_members was reported as members dying of no fault)."""
    h = history(
        (0.0, start("consumer-0")),
        (0.0, start("consumer-1")),
        (0.0, start("consumer-2")),
        (0.5, assigned("consumer-0", [0])),
        (0.5, assigned("consumer-1", [1])),
        (0.5, assigned("consumer-2", [2])),
        (1.0, fault("fault_start", "f1", node="consumer-0,consumer-0-r1,consumer-1,consumer-1-r1")),
        (1.0, verified("f1", "effect", True)),
        (1.1, stop("consumer-0", clean=False, signal="SIGKILL")),
        (1.2, stop("consumer-1", clean=False, signal="SIGKILL")),
        (2.0, fault("fault_end", "f1", node="consumer-0,consumer-0-r1,consumer-1,consumer-1-r1")),
        (2.0, verified("f1", "healed", True)),
        (2.5, stop("consumer-2", clean=False, signal="SIGKILL")),
    )
    [inc] = collect(h)
    assert inc.kind is IncidentKind.MEMBER_DIED and inc.source == "consumer-2"
    assert "no fault on it" in inc.description
