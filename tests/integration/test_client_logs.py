"""Each member's own client log is kept in the run directory (issue 18, item 3).

A short fault-free run with one member of each client (confluent-kafka, kafka-python, the Java
VerifiableConsumer): its run directory holds ``workers/<member>.client.log`` for every member, each
showing the member's JoinGroup and SyncGroup (librdkafka ``cgrp`` debug, kafka-python's
``kafka.coordinator`` DEBUG, the Java consumer's coordinator INFO lines), and any ``error`` event's
``log_ref`` names a line that exists in one of them.
"""

from __future__ import annotations

import re

from chaos.history import ErrorEvent, read_history
from chaos.model.experiment import Experiment
from chaos.runner import judge_once
from chaos.workload.clients.client_log import client_log_path

#: how each client says it joined and synced (librdkafka and kafka-python name the requests; the Java
#: consumer's INFO lines say "Successfully joined group" / "Successfully synced group")
JOINED = re.compile(r"JoinGroup|joined group")
SYNCED = re.compile(r"SyncGroup|synced group")


def test_every_member_keeps_its_client_log_with_its_join_and_sync(kafka_cluster, tmp_path):
    exp = Experiment.model_validate({
        "name": "client-logs",
        "workload": {"partitions": 6,
                     "consumers": [{"client": "confluent-kafka", "lane": "lane0"},
                                   {"client": "kafka-python", "lane": "lane1"},
                                   {"client": "java", "lane": "lane0"}],
                     "producers": [{"rate": 50, "lane": "lane1"}]},
        "phases": {"warmup_s": 1, "chaos_s": 3, "heal_s": 1, "quiesce_s": 30},
    })
    run_dir = tmp_path / "run"
    oc = judge_once(kafka_cluster, exp, 5, run_dir)
    assert oc.valid == "true", (oc.error, oc.explanation)
    for name in ("consumer-0", "consumer-1", "consumer-2"):
        path = client_log_path(run_dir, name)
        assert path.exists(), f"{name}: no client log"
        text = path.read_text(errors="replace")
        assert JOINED.search(text), f"{name}: no JoinGroup line in {path}"
        assert SYNCED.search(text), f"{name}: no SyncGroup line in {path}"
    for e in read_history(run_dir / "history.jsonl").events:
        if type(e) is ErrorEvent and e.log_ref is not None:
            file, _, line = e.log_ref.rpartition(":")
            assert (run_dir / file).exists() and int(line) <= len((run_dir / file).read_text().splitlines())
