"""Protocol-level faults (issue 33): the ``rpc`` model's validation at load time, the toxics it becomes, and the
evidence text. The toxic itself is tested in Go (``chaos/toxiproxy/kafkatoxic``) and on a real cluster
(``tests/integration/test_rpc_faults.py``)."""

import pytest

from chaos.cluster.toxiproxy import Stream, ToxicType
from chaos.errors import UsageError
from chaos.experiment import parse_experiment
from chaos.model.faults.rpc import Rpc, RpcAction
from chaos.model.kafka_api import API_KEYS, error_code
from chaos.nemesis.kinds.rpc import stats_text, toxics_for

KRAFT = {"kafka_version": "4.4.0"}


def experiment(fault: dict, cluster: dict | None = None, protocol: str = "classic"):
    return parse_experiment({"name": "x", "cluster": cluster or {}, "faults": [fault],
                             "workload": {"consumers": [{"group_protocol": protocol}] * 2}})


def fault(**kw) -> Rpc:
    f = experiment({"type": "rpc", **kw}).faults[0]
    assert isinstance(f, Rpc)
    return f


def test_the_issues_example_loads_and_names_the_api_as_kafka_spells_it():
    f = fault(target="member", node="consumer-1", api="syncgroup", action="drop_response", count=1,
              trigger={"state": "CompletingRebalance"}, duration_s=6)
    assert (f.api, f.action, f.count, f.probability) == ("SyncGroup", RpcAction.DROP_RESPONSE, 1, None)
    assert API_KEYS["SyncGroup"] == 14 and API_KEYS["ConsumerGroupHeartbeat"] == 68


@pytest.mark.parametrize(("kw", "cluster", "protocol", "fragment"), [
    ({"api": "SyncGrup", "action": "drop_response"}, None, "classic", "api 'SyncGrup' is not a Kafka API"),
    ({"api": "SyncGrup", "action": "drop_response"}, None, "classic", "e.g. SyncGroup"),
    ({"api": "Heartbeat", "action": "error"}, None, "classic", "action error needs `error`"),
    ({"api": "Heartbeat", "action": "error", "error": "NOT_COORDINATR"}, None, "classic",
     "error 'NOT_COORDINATR' is not a Kafka error name (Errors.java): e.g. NOT_COORDINATOR"),
    ({"api": "Heartbeat", "action": "error", "error": "NONE"}, None, "classic", "error NONE is no error"),
    ({"api": "Heartbeat", "action": "error", "error": "OFFSET_OUT_OF_RANGE"}, None, "classic",
     "Heartbeat answers never carry OFFSET_OUT_OF_RANGE (the errors kmsg's docs and Kafka's message specs document "
     "for it): use one of COORDINATOR_NOT_AVAILABLE, FENCED_INSTANCE_ID, "),
    ({"api": "FindCoordinator", "action": "error", "error": "NOT_COORDINATOR"}, None, "classic",
     "FindCoordinator answers never carry NOT_COORDINATOR"),
    ({"api": "Heartbeat", "action": "delay"}, None, "classic", "action delay needs `delay_ms`"),
    ({"api": "Heartbeat", "action": "drop_request", "delay_ms": 5}, None, "classic",
     "`delay_ms` applies to action delay only, not drop_request"),
    ({"api": "Heartbeat", "action": "drop_request", "count": 1, "probability": 0.5}, None, "classic",
     "`count` (the first N matching requests) or `probability`"),
    ({"api": "Heartbeat", "action": "drop_request", "probability": 0}, None, "classic",
     "greater than 0"),
    ({"api": "ConsumerGroupHeartbeat", "action": "drop_request"}, None, "classic", "needs a KRaft cluster"),
    ({"api": "ConsumerGroupHeartbeat", "action": "drop_request"}, KRAFT, "classic",
     "no member speaks ConsumerGroupHeartbeat (KIP-848)"),
    ({"api": "BrokerHeartbeat", "action": "drop_request", "target": "coordinator"}, KRAFT, "classic",
     "BrokerHeartbeat goes from a broker to a controller: add `links: quorum`"),
    ({"api": "SyncGroup", "action": "drop_request", "target": "coordinator", "links": "quorum"}, KRAFT, "classic",
     "SyncGroup does not go from a broker to a controller"),
    ({"api": "BrokerHeartbeat", "action": "drop_request", "target": "coordinator", "links": "quorum"}, None,
     "classic", "needs a KRaft cluster"),
    ({"api": "SyncGroup", "action": "drop_request", "target": "coordinator", "links": "zookeeper"}, None, "classic",
     "not zookeeper"),
    ({"api": "SyncGroup", "action": "drop_request", "target": "topic"}, None, "classic",
     "rpc faults act on one member's requests"),
    ({"api": "SyncGroup", "action": "drop_request", "links": "quorum"}, KRAFT, "classic",
     "a member's requests go over its lane"),
])
def test_what_cannot_run_is_refused_at_load_in_one_line(kw, cluster, protocol, fragment):
    spec = {"type": "rpc", "target": "member", "node": "consumer-1", **kw}
    with pytest.raises(UsageError) as e:
        experiment(spec, cluster, protocol)
    msg = str(e.value)
    assert fragment in msg and "\n" not in msg, msg


def test_kraft_apis_load_where_they_can_run():
    f = experiment({"type": "rpc", "target": "coordinator", "api": "ConsumerGroupHeartbeat", "action": "delay",
                    "delay_ms": 3000}, KRAFT, "consumer").faults[0]
    assert f.api == "ConsumerGroupHeartbeat" and f.links.value == "clients"
    q = experiment({"type": "rpc", "target": "node", "node": "broker-2", "links": "quorum", "api": "BrokerHeartbeat",
                    "action": "drop_request"}, KRAFT).faults[0]
    assert q.links.value == "quorum"


def test_a_fault_is_two_kafka_toxics_answers_first_with_one_fault_name():
    f = fault(target="member", node="consumer-1", api="OffsetCommit", action="error",
              error="COORDINATOR_LOAD_IN_PROGRESS", count=2)
    resp, req = toxics_for(f, "f3", seed=7, instance="f3-a1")
    assert (resp.name, resp.stream, resp.type) == ("f3-responses", Stream.DOWNSTREAM, ToxicType.KAFKA)
    assert (req.name, req.stream, req.type) == ("f3-requests", Stream.UPSTREAM, ToxicType.KAFKA)
    assert resp.attributes["side"] == "responses" and req.attributes["side"] == "requests"
    common = {k: v for k, v in req.attributes.items() if k != "side"}
    assert common == {k: v for k, v in resp.attributes.items() if k != "side"}
    assert common == {"fault": "f3-a1", "api_key": 8, "action": "error", "error_code": 14, "delay_ms": 0, "count": 2,
                      "probability": 1.0, "seed": common["seed"]}
    assert error_code("COORDINATOR_LOAD_IN_PROGRESS") == 14
    # the seed is the run's: another run draws another schedule, the same run the same
    assert toxics_for(f, "f3", seed=8, instance="f3-a2")[1].attributes["seed"] != common["seed"]
    assert toxics_for(f, "f3", seed=7, instance="f3-a3")[1].attributes["seed"] == common["seed"]


def test_the_evidence_text_says_what_it_acted_on_or_that_it_acted_on_nothing():
    none = stats_text({"seen": 0, "acted": 0, "by_version": {}}, "SyncGroup", RpcAction.DROP_RESPONSE)
    assert none == "acted on 0 RPC(s); 0 SyncGroup request(s) seen while it was on"
    gone = stats_text({"seen": 1, "acted": 0, "unanswered": 1, "by_version": {}}, "OffsetCommit", RpcAction.ERROR)
    assert gone == ("acted on 0 RPC(s); 1 OffsetCommit request(s) seen while it was on; 1 selected one(s) "
                    "unanswered: their connection closed first")
    some = stats_text({"seen": 3, "acted": 1, "by_version": {"SyncGroup v5": 1}, "first": "a", "last": "b",
                       "errors": 1, "last_error": "decoding"}, "SyncGroup", RpcAction.ERROR)
    assert some.startswith("acted on 1 RPC(s) (SyncGroup v5: 1) from a to b; 3 SyncGroup request(s) seen")
    assert "1 answer(s) it could not decode" in some and "copies" not in some
    dup = stats_text({"seen": 1, "acted": 1, "duplicates_answered": 1, "by_version": {"JoinGroup v9": 1}},
                     "JoinGroup", RpcAction.DUPLICATE_REQUEST)
    assert dup.endswith("; the broker answered 1 of the copies")


@pytest.mark.parametrize(("api", "error"), [
    ("Heartbeat", "REBALANCE_IN_PROGRESS"),  # kmsg's docs
    ("Heartbeat", "FENCED_INSTANCE_ID"),  # KIP-345, in neither source
    ("OffsetCommit", "STALE_MEMBER_EPOCH"),  # Kafka's spec only (version 9's note)
    ("SyncGroup", "UNKNOWN_SERVER_ERROR"),  # any API
    ("Fetch", "NOT_LEADER_OR_FOLLOWER"),  # Errors.java's name of code 6; kerr's is NOT_LEADER_FOR_PARTITION
    ("ConsumerGroupHeartbeat", "INVALID_REGULAR_EXPRESSION"),  # newer than kafka-python's table
    ("DescribeTopicPartitions", "OFFSET_OUT_OF_RANGE"),  # an API neither source documents errors of: unchecked
])
def test_an_error_the_api_is_documented_to_carry_is_accepted(api, error):
    f = experiment({"type": "rpc", "target": "coordinator", "api": api, "action": "error", "error": error},
                   KRAFT, "consumer" if api == "ConsumerGroupHeartbeat" else "classic").faults[0]
    assert isinstance(f, Rpc) and f.error == error
    assert toxics_for(f, "f1", seed=1, instance="f1-x")[0].attributes["error_code"] == error_code(error) != 0
