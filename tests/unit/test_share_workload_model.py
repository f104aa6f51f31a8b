"""A share-group workload (``workload.share``, KIP-932) at load time: what it needs of the cluster, which faults
and triggers it refuses, and that a workload is one group -- a consumer group or a share group."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from chaos.cluster.settings import SHARE_GROUP_SETTINGS
from chaos.model.experiment import Experiment
from chaos.model.workload import WorkloadSpec

KRAFT = {"kafka_version": "4.4.0", "brokers": 3, "lanes": 3}


def experiment(faults: list[dict] | None = None, cluster: dict | None = None, **share) -> Experiment:
    return Experiment.model_validate({"name": "x", "cluster": cluster or KRAFT, "workload": {"share": share},
                                      "faults": faults or []})


def test_a_share_workload_has_its_members_and_no_consumers():
    exp = experiment(members=[{"lane": "lane1"}, {}])
    assert exp.workload.consumers == () and exp.workload.member_count == 2
    assert WorkloadSpec().member_count == 3 and WorkloadSpec().share is None


@pytest.mark.parametrize("workload, says", [
    ({"share": {}, "consumers": [{}]}, "a consumer group (consumers) or a share group (share), not both"),
    ({"consumers": []}, "consumers is empty: give at least one member, or a share group"),
])
def test_a_workload_is_one_group(workload, says):
    with pytest.raises(ValidationError, match=rf"{says.replace('(', '.').replace(')', '.')}"):
        WorkloadSpec.model_validate(workload)


@pytest.mark.parametrize("cluster, says", [
    ({"kafka_version": "3.9.1"}, "need a KRaft cluster of Kafka 4.2 or newer, this is 3.9.1 .zookeeper."),
    ({"kafka_version": "4.1.1"}, "need a KRaft cluster of Kafka 4.2 or newer, this is 4.1.1 .kraft."),
])
def test_share_groups_need_kafka_4_2_on_kraft(cluster, says):
    with pytest.raises(ValidationError, match=says):
        experiment(cluster=cluster)


@pytest.mark.parametrize("fault, says", [
    ({"type": "crash_replace", "target": "member", "node": "consumer-1", "trigger": {"at_s": 1}, "duration_s": 2},
     "membership faults are not wired for share groups"),
    ({"type": "kill", "target": "group_leader", "trigger": {"at_s": 1}, "duration_s": 2},
     "a share group has no group leader"),
    ({"type": "kill", "target": "coordinator", "trigger": {"state": "Stable"}, "duration_s": 2},
     "group-state, revocation and generation triggers follow a consumer group"),
    ({"type": "pause", "target": "member", "node": "consumer-3", "trigger": {"at_s": 1}, "duration_s": 2},
     "'consumer-3' is not a member"),
    ({"type": "rpc", "target": "member", "node": "consumer-1", "api": "OffsetCommit", "action": "drop_response",
      "trigger": {"at_s": 1}, "duration_s": 2},
     "a share group's members never send OffsetCommit .a consumer group's API.: use one of ShareAcknowledge, "
     "ShareFetch, ShareGroupHeartbeat"),
    ({"type": "rpc", "target": "member", "node": "consumer-1", "api": "JoinGroup", "action": "delay", "delay_ms": 10,
      "trigger": {"at_s": 1}, "duration_s": 2}, "never send JoinGroup"),
])
def test_what_a_share_group_cannot_be_put_under_is_refused(fault, says):
    with pytest.raises(ValidationError, match=says):
        experiment([fault])


def test_a_delivery_limit_of_its_own_needs_kafka_4_3():
    with pytest.raises(ValidationError, match="Kafka 4.2.2 has no group config share.delivery.count.limit"):
        experiment(cluster={**KRAFT, "kafka_version": "4.2.2"}, delivery_count_limit=3)
    assert experiment(cluster={**KRAFT, "kafka_version": "4.2.2"}).workload.share.delivery_count_limit == 5
    assert experiment(delivery_count_limit=3).workload.share.delivery_count_limit == 3


def test_faults_on_share_members_and_brokers_load():
    exp = experiment([{"type": "kill", "target": "member", "node": "consumer-2", "trigger": {"at_s": 1}, "duration_s": 2},
                      {"type": "kill", "target": "coordinator", "trigger": {"at_s": 3}, "duration_s": 2}])
    assert len(exp.faults) == 2
    # the protocol-level faults on a share member's own APIs (KIP-932)
    rpc = experiment([{"type": "rpc", "target": "member", "node": "consumer-1", "api": "ShareAcknowledge",
                       "action": "drop_response", "count": 1, "trigger": {"at_s": 1}, "duration_s": 2}])
    assert rpc.faults[0].api == "ShareAcknowledge"


def test_a_share_api_on_a_consumer_group_is_refused():
    with pytest.raises(ValidationError, match=r"no member speaks ShareFetch \(KIP-932 share groups\)"):
        Experiment.model_validate({"name": "x", "cluster": KRAFT, "workload": {"consumers": [{}]}, "faults": [
            {"type": "rpc", "target": "member", "node": "consumer-0", "api": "ShareFetch", "action": "drop_request",
             "trigger": {"at_s": 1}, "duration_s": 2}]})


def test_the_brokers_let_a_share_group_use_second_scale_settings():
    # the group configs a ShareGroupSpec may set must lie within the brokers' bounds (ShareGroupConfig)
    assert int(SHARE_GROUP_SETTINGS["group.share.min.record.lock.duration.ms"]) <= 1000
    assert int(SHARE_GROUP_SETTINGS["group.share.min.session.timeout.ms"]) <= 500
    assert int(SHARE_GROUP_SETTINGS["group.share.min.heartbeat.interval.ms"]) <= 100
