"""The observer on KIP-848 groups: ConsumerGroupDescribe answers as ``group_state`` samples, and the
new group coordinator's log lines (Kafka 4.x) as ``broker_log`` events.

Log lines are built from the format strings of Kafka's
``group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupMetadataManager.java``
(4.4; the 4.0 spellings where they differ), with the shard's log context and the project's log4j
layout (``[%d] %p %m (%c)%n``, ``chaos.cluster.settings``), so a change of wording in Kafka fails here.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import orjson
import pytest
from kafka.errors import CoordinatorLoadInProgressError
from kafka.protocol.admin import DescribeGroupsResponse
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from chaos.cluster.admin import GroupDescription, group_description
from chaos.cluster.wire import ConsumerGroupView, MemberView
from chaos.errors import UsageError
from chaos.history.event import BrokerLogEvent, GroupMember, GroupState, GroupStateSample, GroupType, from_dict
from chaos.history.reader import parse_line
from chaos.workload import observer as observer_module
from chaos.workload.observer import (
    UNKNOWN_SAMPLE,
    GroupObserver,
    GroupSample,
    LineParser,
    classic_sample,
    consumer_sample,
)

GROUP = "group-ab12"
TOPIC = "chaos-ab12"
M1 = "Nh0Q2f3bS6mV1yW5lq3uGg"
M2 = "c9Zx-0aBQ_uT7rYl2mKpWw"

# Kafka error codes ConsumerGroupDescribe answers inside a decoded response
NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, GROUP_ID_NOT_FOUND = 16, 14, 15, 69


def slf4j(fmt: str, *args: object) -> str:
    """SLF4J's ``{}`` substitution, in order."""
    parts = fmt.split("{}")
    assert len(parts) == len(args) + 1, fmt
    return "".join(p + a for p, a in zip(parts, [*map(str, args), ""], strict=True))


def line(fmt: str, *args: object, broker: int = 2) -> str:
    """A GroupMetadataManager INFO line as the broker's log file holds it (CoordinatorRuntime's log context)."""
    return (f"[2026-05-04 12:00:00,123] INFO [GroupCoordinator id={broker} topic=__consumer_offsets partition=17] "
            f"{slf4j(fmt, *args)} (org.apache.kafka.coordinator.group.GroupMetadataManager)")


def view(state: str = "Reconciling", group_epoch: int = 7, assignment_epoch: int = 7,
         members: tuple[MemberView, ...] | None = None, error_code: int = 0) -> ConsumerGroupView:
    if members is None:
        members = (
            MemberView(member_id=M2, instance_id=None, member_epoch=6, client_id="consumer-1",
                       assignment=((TOPIC, 2), (TOPIC, 0), (TOPIC, 1)), target_assignment=((TOPIC, 1), (TOPIC, 0)),
                       subscribed_topics=(TOPIC,)),
            MemberView(member_id=M1, instance_id="static-0", member_epoch=7, client_id="consumer-0",
                       assignment=(), target_assignment=((TOPIC, 2),)),
        )
    return ConsumerGroupView(group_id=GROUP, state=state, group_epoch=group_epoch, assignment_epoch=assignment_epoch,
                             assignor="uniform", members=members, error_code=error_code)


# ----------------------------------------------------------------------------- ConsumerGroupView -> sample

def test_a_consumer_group_view_becomes_a_sample_with_epochs_and_both_assignments():
    s = consumer_sample(view(), coordinator=3)
    assert (s.state, s.coordinator, s.protocol, s.generation) == (GroupState.RECONCILING, 3, "uniform", 7)
    assert (s.group_epoch, s.assignment_epoch, s.group_type) == (7, 7, GroupType.CONSUMER)
    assert [m.member_id for m in s.members] == [M1, M2]  # sorted by member id
    m1, m2 = s.members
    assert m1 == GroupMember(M1, "static-0", "consumer-0", "", (), member_epoch=7, target_assignment=((TOPIC, 2),))
    assert m2.member_epoch == 6
    assert m2.assignment == ((TOPIC, 0), (TOPIC, 1), (TOPIC, 2))
    assert m2.target_assignment == ((TOPIC, 0), (TOPIC, 1))
    assert m2.subscription == (TOPIC,) and m1.subscription == ()  # the heartbeat's topic names, for convergence


def test_the_sample_is_a_valid_group_state_event_and_reads_back_equal():
    s = consumer_sample(view(state="Assigning", group_epoch=9, assignment_epoch=8), coordinator=1)
    raw = {"seq": 1, "ts": 1.0, "mono_ns": 5, "source": "observer", "kind": "group_state", **s.fields(GROUP)}
    ev = from_dict(orjson.loads(orjson.dumps(raw)))
    assert isinstance(ev, GroupStateSample)
    assert (ev.state, ev.generation, ev.group_epoch, ev.assignment_epoch, ev.group_type) == (
        GroupState.ASSIGNING, 9, 9, 8, GroupType.CONSUMER)
    assert ev.members == s.members


def test_member_fields_at_their_defaults_are_left_out_of_the_line():
    empty_target = MemberView(M1, None, 0, "consumer-0", (), ())
    (m,) = consumer_sample(view(members=(empty_target,)), 1).fields(GROUP)["members"]
    assert m == {"member_id": M1, "instance_id": None, "client_id": "consumer-0", "host": "", "assignment": [],
                 "member_epoch": 0}  # epoch 0 (joining) is a value, not a default


@pytest.mark.parametrize("state", ["Empty", "Assigning", "Reconciling", "Stable", "Dead"])
def test_every_kip848_state_maps_to_its_own_value(state):
    assert consumer_sample(view(state=state), 1).state.value == state


@pytest.mark.parametrize("state", ["NotReady", "PreparingRebalance", "", "Bogus"])
def test_a_state_kip848_does_not_name_is_unknown(state):
    s = consumer_sample(view(state=state), 1)
    assert s.state is GroupState.UNKNOWN and s.group_epoch == 7  # the rest of the answer is kept


@pytest.mark.parametrize("code", [NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
                                  GROUP_ID_NOT_FOUND])
def test_an_error_answer_is_an_unknown_sample(code):
    err = ConsumerGroupView(group_id=GROUP, state="", group_epoch=-1, assignment_epoch=-1, assignor="", members=(),
                            error_code=code)
    assert consumer_sample(err, 2) == UNKNOWN_SAMPLE
    assert UNKNOWN_SAMPLE.state is GroupState.UNKNOWN and UNKNOWN_SAMPLE.fields(GROUP) == {
        "group": GROUP, "state": "Unknown", "coordinator": None, "protocol": None, "generation": None, "members": []}


def _described(members: list, error_code: int = 0, state: str = "Stable") -> DescribeGroupsResponse.DescribedGroup:
    """A DescribeGroups answer as kafka-python decodes it off the wire (the bytes as a Java member sends them)."""
    return DescribeGroupsResponse.DescribedGroup(error_code=error_code, error_message=None, group_id=GROUP,
                                                 group_state=state, protocol_type="consumer", protocol_data="range",
                                                 members=members)


def _member(metadata: bytes, assignment: bytes) -> DescribeGroupsResponse.DescribedGroup.DescribedGroupMember:
    return DescribeGroupsResponse.DescribedGroup.DescribedGroupMember(
        member_id="consumer-1-x", group_instance_id=None, client_id="consumer-1", client_host="/127.0.0.1",
        member_metadata=metadata, member_assignment=assignment)


SUBSCRIBED = ConsumerProtocolSubscription(topics=[TOPIC], user_data=None, version=0).encode()
ASSIGNED = ConsumerProtocolAssignment(assigned_partitions=[ConsumerProtocolAssignment.TopicPartition(
    topic=TOPIC, partitions=[1, 0])], user_data=None, version=0).encode()


def test_a_classic_answer_keeps_its_fields_and_says_classic():
    s = classic_sample(group_description(_described([_member(SUBSCRIBED, ASSIGNED)])), 2, 5)
    assert s.fields(GROUP) == {
        "group": GROUP, "state": "Stable", "coordinator": 2, "protocol": "range", "generation": 5,
        "members": [{"member_id": "consumer-1-x", "instance_id": None, "client_id": "consumer-1",
                     "host": "/127.0.0.1", "assignment": [[TOPIC, 0], [TOPIC, 1]], "subscription": [TOPIC]}],
        "group_type": "classic"}


def test_a_member_without_or_with_undecodable_protocol_bytes_owns_and_asks_for_nothing():
    # a member between JoinGroup and SyncGroup has no assignment yet; bytes of another protocol do not decode
    for metadata, assignment in [(b"", b""), (b"\x00", b"xyzxyzxyz")]:
        (m,) = group_description(_described([_member(metadata, assignment)], state="CompletingRebalance")).members
        assert (m.member_id, m.assignment, m.subscription) == ("consumer-1-x", (), ())


def test_an_error_in_a_describe_groups_answer_is_raised_as_its_kafka_error():
    # the admin's settled() waits through a retriable one (the coordinator loading its offsets partition)
    with pytest.raises(CoordinatorLoadInProgressError):
        group_description(_described([], error_code=COORDINATOR_LOAD_IN_PROGRESS, state=""))


# ----------------------------------------------------------------------------- the observer's ticks

class _Admin:
    """The observer's admin calls, answered from fixed values (no cluster in a unit test)."""

    def __init__(self, coordinator: int | None = 2, info: object = None):
        self.coordinator = coordinator
        self.info = info

    def coordinator_id(self, group: str, wait: bool = True) -> int | None:
        assert not wait, "the observer makes one attempt per tick"
        return self.coordinator

    def describe_group(self, group: str, coordinator: int | None = None, wait: bool = True) -> object:
        assert not wait
        return self.info


def _samples(run_dir: Path) -> list[GroupStateSample]:
    out = []
    for i, raw in enumerate((run_dir / "events" / "observer.jsonl").read_bytes().splitlines(), 1):
        ev = parse_line(raw, f"observer.jsonl:{i}")
        if isinstance(ev, GroupStateSample):
            out.append(ev)
    return out


def _observer(tmp_path: Path, admin: _Admin, *, kip848: bool = True, address: str = "127.0.0.1:9") -> GroupObserver:
    return GroupObserver(admin, GROUP, TOPIC, tmp_path, {}, kip848=kip848,  # type: ignore[arg-type]
                         broker_address=lambda bid: address, describe_timeout_s=1.0)


def test_equal_answers_are_one_sample_and_any_epoch_change_is_a_new_one(tmp_path, monkeypatch):
    answers = [view(), view(), view(group_epoch=8), view(group_epoch=8),
               view(group_epoch=8, assignment_epoch=8), view(group_epoch=8, assignment_epoch=8, state="Stable")]
    asked: list[tuple[str, str]] = []

    def describe(address: str, group: str, timeout_s: float) -> ConsumerGroupView:
        asked.append((address, group))
        return answers[len(asked) - 1]

    monkeypatch.setattr(observer_module, "describe_consumer_group", describe)
    obs = _observer(tmp_path, _Admin(coordinator=2), address="127.0.0.1:4242")
    for _ in answers:
        obs._sample_group()
    # a member epoch moving is a change too
    m = view().members
    answers.append(view(group_epoch=8, assignment_epoch=8, state="Stable",
                        members=(m[0], MemberView(M1, "static-0", 8, "consumer-0", (), ((TOPIC, 2),)))))
    obs._sample_group()
    obs.events.close()
    got = _samples(tmp_path)
    assert asked[0] == ("127.0.0.1:4242", GROUP) and len(asked) == 7
    assert [(e.state.value, e.group_epoch, e.assignment_epoch) for e in got] == [
        ("Reconciling", 7, 7), ("Reconciling", 8, 7), ("Reconciling", 8, 8), ("Stable", 8, 8), ("Stable", 8, 8)]
    assert [mm.member_epoch for mm in got[-1].members] == [8, 6]
    assert all(e.coordinator == 2 and e.group_type is GroupType.CONSUMER and e.generation == e.group_epoch
               for e in got)


def test_an_unchanged_sample_is_written_again_after_a_second(tmp_path, monkeypatch):
    monkeypatch.setattr(observer_module, "describe_consumer_group", lambda a, g, t: view())
    obs = _observer(tmp_path, _Admin())
    obs._sample_group()
    obs._sample_group()
    obs._last_emit -= 1.0  # as if a second had passed
    obs._sample_group()
    obs.events.close()
    assert len(_samples(tmp_path)) == 2 and obs.samples == 3


def test_a_broker_that_refuses_the_connection_is_an_unknown_sample_at_once(tmp_path):
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    obs = _observer(tmp_path, _Admin(coordinator=1), address=f"127.0.0.1:{port}")
    t0 = time.monotonic()
    obs._sample_group()
    assert time.monotonic() - t0 < 1.0  # one attempt, no wait
    obs.events.close()
    (e,) = _samples(tmp_path)
    assert (e.state, e.coordinator, e.generation, e.members, e.group_type) == (GroupState.UNKNOWN, None, None, (), None)


@pytest.mark.parametrize("code", [NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, GROUP_ID_NOT_FOUND])
def test_an_error_code_from_the_coordinator_is_an_unknown_sample(tmp_path, monkeypatch, code):
    monkeypatch.setattr(observer_module, "describe_consumer_group",
                        lambda a, g, t: view(error_code=code, state="", members=()))
    obs = _observer(tmp_path, _Admin())
    obs._sample_group()
    obs.events.close()
    assert [e.state for e in _samples(tmp_path)] == [GroupState.UNKNOWN]


def test_no_coordinator_or_no_address_map_is_an_unknown_sample(tmp_path, monkeypatch):
    def unknown_link(bid: int) -> str:
        raise UsageError(f"unknown link 'ctl.broker-{bid}'")  # what Topology.link raises

    monkeypatch.setattr(observer_module, "describe_consumer_group", lambda a, g, t: pytest.fail("must not ask"))
    for admin, address_map in ((_Admin(coordinator=None), lambda bid: "127.0.0.1:9"), (_Admin(), None)):
        obs = GroupObserver(admin, GROUP, TOPIC, tmp_path, {}, kip848=True,  # type: ignore[arg-type]
                            broker_address=address_map)
        obs._sample_group()
        obs.events.close()
    monkeypatch.setattr(observer_module, "describe_consumer_group", lambda a, g, t: view())
    obs = GroupObserver(_Admin(), GROUP, TOPIC, tmp_path, {}, kip848=True,  # type: ignore[arg-type]
                        broker_address=unknown_link)
    obs._sample_group()
    obs.events.close()
    assert [e.state for e in _samples(tmp_path)] == [GroupState.UNKNOWN] * 3


_DEAD = GroupDescription(GROUP, "Dead", "", ())  # Kafka 4.x's DescribeGroups v0-v5 for a non-classic group


def test_a_dead_memberless_classic_answer_is_asked_again_as_kip848(tmp_path, monkeypatch):
    monkeypatch.setattr(observer_module, "describe_consumer_group", lambda a, g, t: view(state="Stable"))
    obs = _observer(tmp_path, _Admin(info=_DEAD), kip848=False)
    obs._sample_group()
    obs.events.close()
    (e,) = _samples(tmp_path)
    assert (e.state, e.group_type, e.group_epoch) == (GroupState.STABLE, GroupType.CONSUMER, 7)


def test_a_dead_group_that_is_not_kip848_either_stays_a_classic_dead_sample(tmp_path, monkeypatch):
    monkeypatch.setattr(observer_module, "describe_consumer_group",
                        lambda a, g, t: view(error_code=GROUP_ID_NOT_FOUND, state="", members=()))
    obs = _observer(tmp_path, _Admin(info=_DEAD), kip848=False)
    obs._sample_group()
    obs.events.close()
    (e,) = _samples(tmp_path)
    assert (e.state, e.group_type, e.coordinator, e.group_epoch) == (GroupState.DEAD, GroupType.CLASSIC, 2, None)


def test_a_live_classic_group_is_never_asked_as_kip848(tmp_path, monkeypatch):
    monkeypatch.setattr(observer_module, "describe_consumer_group", lambda a, g, t: pytest.fail("must not ask"))
    info = GroupDescription(GROUP, "PreparingRebalance", "", ())
    obs = _observer(tmp_path, _Admin(info=info), kip848=False)
    obs._sample_group()
    obs.events.close()
    assert [e.state for e in _samples(tmp_path)] == [GroupState.PREPARING_REBALANCE]


# ----------------------------------------------------------------------------- the new coordinator's lines

P = LineParser(GROUP)

#: (format string from GroupMetadataManager, its arguments) -> (event, generation, member id)
KIP848_LINES = [
    (("[GroupId {}] Member {} joins the consumer group using the {} protocol.", GROUP, M1, "consumer"),
     (BrokerLogEvent.MEMBER_JOINED, None, M1)),
    (("[GroupId {}] Member {} joins the consumer group using the {} protocol.", GROUP, M2, "classic"),
     (BrokerLogEvent.MEMBER_JOINED, None, M2)),
    (("[GroupId {}] Static member {} with instance id {} joins the consumer group using the {} protocol.",
      GROUP, M1, "static-0", "consumer"), (BrokerLogEvent.MEMBER_JOINED, None, M1)),
    (("[GroupId {}] Static member with instance id {} re-joins the consumer group using the {} protocol. "
      "Created a new member {} to replace the existing member {}.", GROUP, "static-0", "consumer", M2, M1),
     (BrokerLogEvent.MEMBER_JOINED, None, M2)),
    # 4.4 (KIP-1101 metadata hash) and 4.0
    (("[GroupId {}] Bumped group epoch to {} with metadata hash {}.", GROUP, 12, -4417219113592435),
     (BrokerLogEvent.EPOCH_BUMPED, 12, None)),
    (("[GroupId {}] Bumped group epoch to {}.", GROUP, 3), (BrokerLogEvent.EPOCH_BUMPED, 3, None)),
    (("[GroupId {}] Computed a new target assignment for epoch {} with '{}' assignor in {}ms.", GROUP, 12,
      "uniform", 0), (BrokerLogEvent.TARGET_ASSIGNMENT, 12, None)),
    (("[GroupId {}] Member {} fenced from the group because {}.", GROUP, M1, "the member session expired"),
     (BrokerLogEvent.MEMBER_FAILED, None, M1)),
    (("[GroupId {}] Member {} fenced from the group because it failed to transition from epoch {} within {}ms.",
      GROUP, M2, 11, 300000), (BrokerLogEvent.MEMBER_FENCED, 11, M2)),
    (("[GroupId {}] Member {} fenced from the group because {}.", GROUP, M2, "the member failed to sync within timeout"),
     (BrokerLogEvent.MEMBER_FENCED, None, M2)),
    (("[GroupId {}] Member {} left the consumer group.", GROUP, M1), (BrokerLogEvent.MEMBER_LEFT, None, M1)),
    (("[GroupId {}] Static member {} with instance id {} left the consumer group.", GROUP, M1, "static-0"),
     (BrokerLogEvent.MEMBER_LEFT, None, M1)),
    (("[GroupId {}] Static Member {} with instance id {} left the consumer group.", GROUP, M1, "static-0"),
     (BrokerLogEvent.MEMBER_LEFT, None, M1)),
    (("Loaded consumer group {} with {} members.", GROUP, 2), (BrokerLogEvent.LOADING, None, None)),
    (("[GroupId={}] Unloaded group metadata for group epoch {}.", GROUP, 12), (BrokerLogEvent.UNLOADING, 12, None)),
    # online migration (4.4.0's words, from a real run)
    (("[GroupId {}] Converted the classic group to a consumer group.", GROUP), (BrokerLogEvent.GROUP_CONVERTED, None, None)),
    (("[GroupId {}] Converted the consumer group to a classic group.", GROUP), (BrokerLogEvent.GROUP_CONVERTED, None, None)),
    (("[GroupId {}] Converted the empty classic group to a consumer group.", GROUP),
     (BrokerLogEvent.GROUP_RECREATED, None, None)),
    (("[GroupId {}] Converted the empty consumer group to a classic group.", GROUP),
     (BrokerLogEvent.GROUP_RECREATED, None, None)),
    (("Cannot upgrade classic group {} to consumer group: {}.", GROUP, "userData from a custom assignor would be lost"),
     (BrokerLogEvent.UPGRADE_REFUSED, None, None)),
]

#: classic groups on Kafka 4.x's new coordinator: the words the CoordinatorLog regexes were written for
CLASSIC_4X_LINES = [
    (("Preparing to rebalance group {} in state {} with old generation {} (reason: {}).", GROUP,
      "PreparingRebalance", 4, "Adding new member consumer-1-x with group instance id null; client reason: "
      "need to re-join with the given member-id"), (BrokerLogEvent.PREPARING_REBALANCE, 4, None)),
    (("Stabilized group {} generation {} with {} members.", GROUP, 5, 2), (BrokerLogEvent.STABILIZED, 5, None)),
    (("Member {} in group {} has failed, removing it from the group.", "consumer-1-x", GROUP),
     (BrokerLogEvent.MEMBER_FAILED, None, "consumer-1-x")),
    (("Group {} with generation {} is now empty.", GROUP, 6), (BrokerLogEvent.OTHER, 6, None)),
    (("Assignment received from leader {} for group {} for generation {}. The group has {} members, {} of which "
      "are static.", "consumer-0-y", GROUP, 5, 2, 0), (BrokerLogEvent.OTHER, 5, "consumer-0-y")),
    (("Loaded classic group {} with {} members.", GROUP, 2), (BrokerLogEvent.LOADING, None, None)),
    (("[GroupId={}] Unloading group metadata for generation {}.", GROUP, 5), (BrokerLogEvent.UNLOADING, 5, None)),
]


@pytest.mark.parametrize(("fmt_args", "want"), KIP848_LINES + CLASSIC_4X_LINES,
                         ids=[a[0][:60] for a, _ in KIP848_LINES + CLASSIC_4X_LINES])
def test_new_coordinator_lines_parse(fmt_args, want):
    parsed = P.parse(line(*fmt_args))
    assert parsed is not None
    assert (parsed.event, parsed.generation, parsed.member_id) == want
    assert parsed.group == GROUP


@pytest.mark.parametrize(("fmt_args", "want"), KIP848_LINES + CLASSIC_4X_LINES,
                         ids=[a[0][:60] for a, _ in KIP848_LINES + CLASSIC_4X_LINES])
def test_another_group_whose_id_extends_ours_is_not_parsed(fmt_args, want):
    fmt, *args = fmt_args
    other = [f"{GROUP}-2" if a == GROUP else a for a in args]
    assert P.parse(line(fmt, *other)) is None


def test_a_static_member_that_left_temporarily_has_not_left():
    # epoch -2: the member keeps its assignment for its session timeout (KIP-848 static membership)
    parsed = P.parse(line("[GroupId {}] Static member {} with instance id {} temporarily left the consumer group.",
                          GROUP, M1, "static-0"))
    assert parsed is None or parsed.event is not BrokerLogEvent.MEMBER_LEFT


def test_a_generationless_load_drops_the_brokers_stale_generation(tmp_path):
    log = tmp_path / "broker-2.log"
    log.write_text(line("Stabilized group {} generation {} with {} members.", GROUP, 5, 2) + "\n")
    obs = GroupObserver(_Admin(), GROUP, TOPIC, tmp_path, {2: log})  # type: ignore[arg-type]
    obs._read_logs()
    assert obs._stabilized == {2: 5}
    with log.open("a") as f:  # broker 2 became coordinator again, on Kafka 4.x
        f.write(line("Loaded classic group {} with {} members.", GROUP, 2) + "\n")
    obs._read_logs()
    obs.events.close()
    assert obs._stabilized == {}


def test_group_sample_dedup_key_includes_the_epochs():
    a = consumer_sample(view(), 1)
    assert a == consumer_sample(view(), 1)
    assert a != consumer_sample(view(assignment_epoch=6), 1)
    assert GroupSample(**{**{f: getattr(a, f) for f in a.__slots__}, "group_epoch": 8}) != a
