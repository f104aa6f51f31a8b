"""crash_replace (a fault kind added as one module): the member dies for good, a new one joins in its place,
and the group keeps every promise."""

from chaos.history.event import Kind
from chaos.history.reader import read_history
from chaos.model.experiment import Experiment
from chaos.runner import judge_once


def test_a_crashed_member_is_replaced_by_a_new_process_and_the_run_is_valid(kafka_cluster, tmp_path):
    exp = Experiment.model_validate({
        "name": "crash-replace",
        "workload": {"partitions": 6, "consumers": [{"lane": "lane0", "session_timeout_ms": 4000},
                                                    {"lane": "lane1", "session_timeout_ms": 4000}],
                     "producers": [{"rate": 100, "lane": "lane0"}]},
        "faults": [{"type": "crash_replace", "target": "member", "node": "consumer-1", "trigger": {"at_s": 1}}],
        "phases": {"warmup_s": 0.5, "chaos_s": 6},
    })
    oc = judge_once(kafka_cluster, exp, 3, tmp_path / "run")
    assert oc.valid == "true", (oc.error, oc.explanation)
    [fault] = oc.faults
    assert fault["effect_ok"] and fault["healed_ok"], fault
    h = read_history(tmp_path / "run" / "history.jsonl")
    stops = [e for e in h.events if e.kind is Kind.MEMBER_STOP and e.source == "consumer-1"]
    assert stops and stops[0].signal == "SIGKILL"
    starts = [e for e in h.events if e.kind is Kind.MEMBER_START and e.source == "consumer-1-r1"]
    assert len(starts) == 1 and starts[0].mono_ns > stops[0].mono_ns
    # the newcomer owns partitions under a member id of its own, never the crashed member's
    new_ids = {e.member_id for e in h.events if e.kind is Kind.ASSIGNED and e.source == "consumer-1-r1"}
    old_ids = {e.member_id for e in h.events if e.kind is Kind.ASSIGNED and e.source == "consumer-1"}
    assert new_ids and not (new_ids & old_ids)
    assert not [e for e in h.events if e.kind is Kind.MEMBER_START and e.source == "consumer-1"][1:]
