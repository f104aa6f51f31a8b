"""A Java member frozen and thawed on a fault-free cluster gives a valid run.

Its worker and JVM are both stopped (the process group), and the events it reads after the thaw keep the
JVM's own timestamps: a commit made before the pause is not recorded as made after it (which once showed
as a false backward move of the committed offset).
"""

from chaos.model.experiment import Experiment
from chaos.runner import judge_once


def test_a_java_member_paused_past_its_session_and_resumed_gives_a_valid_run(kafka_cluster, tmp_path):
    exp = Experiment.model_validate({
        "name": "java-paused",
        "workload": {"partitions": 6,
                     "consumers": [{"client": "java", "lane": "lane0", "session_timeout_ms": 4000,
                                    "heartbeat_interval_ms": 1000},
                                   {"lane": "lane1", "session_timeout_ms": 4000, "heartbeat_interval_ms": 1000}],
                     "producers": [{"rate": 100, "lane": "lane1"}]},
        "faults": [{"type": "pause", "target": "member", "node": "consumer-0", "trigger": {"at_s": 1},
                    "duration_s": 7}],
        "phases": {"warmup_s": 1, "chaos_s": 12, "heal_s": 1, "quiesce_s": 60},
    })
    oc = judge_once(kafka_cluster, exp, 11, tmp_path / "run")
    assert oc.valid == "true", (oc.error, oc.explanation)
    [fault] = oc.faults
    assert fault["effect_ok"] and fault["healed_ok"], fault
