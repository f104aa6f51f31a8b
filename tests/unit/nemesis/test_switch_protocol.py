"""The spec a member switches to under ``switch_protocol`` (KIP-848 online migration) and back."""

from chaos.model.workload import Assignor, ConsumerSpec, GroupProtocol, RemoteAssignor
from chaos.nemesis.kinds.membership import switched


def test_a_classic_member_switches_to_the_consumer_protocol_without_its_client_side_assignor():
    classic = ConsumerSpec(assignor=Assignor.COOPERATIVE_STICKY, lane="lane1", session_timeout_ms=4000,
                           heartbeat_interval_ms=1000)
    consumer = switched(classic, GroupProtocol.CONSUMER)
    assert consumer.group_protocol is GroupProtocol.CONSUMER
    assert consumer.assignor is Assignor.RANGE  # the coordinator assigns; the field is the inert default
    assert (consumer.lane, consumer.session_timeout_ms, consumer.client) == ("lane1", 4000, classic.client)


def test_a_consumer_member_switches_to_classic_without_its_remote_assignor():
    consumer = ConsumerSpec(group_protocol=GroupProtocol.CONSUMER, remote_assignor=RemoteAssignor.RANGE)
    classic = switched(consumer, GroupProtocol.CLASSIC)
    assert classic.group_protocol is GroupProtocol.CLASSIC and classic.remote_assignor is None
