"""The pool hands a cluster out again without the topics earlier runs created on it, and only those."""

import json
import time
import uuid

from chaos.cluster.admin import retry
from chaos.model.experiment import Experiment
from chaos.runner import run_once


def test_a_cluster_handed_out_again_has_lost_the_topics_of_earlier_runs_and_no_other(
        _chaos_pool, kafka_cluster_spec, kafka_cluster, tmp_path):
    exp = Experiment.model_validate({
        "name": "pool-topics",
        "workload": {"partitions": 2, "consumers": [{"lane": "lane0"}], "producers": [{"rate": 50, "lane": "lane0"}]},
        "phases": {"warmup_s": 0.5, "chaos_s": 1, "heal_s": 0},
    })
    admin = kafka_cluster.admin
    other = f"not-a-run-{uuid.uuid4().hex[:8]}"  # created by someone else on the cluster: never the pool's to delete
    admin.create_topic(other, 1, 1)
    try:
        run_once(kafka_cluster, exp, 3, tmp_path / "run")
        topic = json.loads((tmp_path / "run" / "resolved.json").read_text())["topic"]
        assert topic in admin.topics(), "a run's topic is kept after the run (a test may read it)"

        assert _chaos_pool.get(kafka_cluster_spec) is kafka_cluster
        # the controller has decided the deletion when get returns; the metadata a broker serves follows it
        retry(lambda: True if topic not in admin.topics() else None, time.monotonic() + 30,
              f"run topic {topic} to be deleted")
        assert other in admin.topics()
    finally:
        assert not admin.delete_topics([other])
