"""The partition fault's evidence counts its own rules (chaos.nemesis.kinds.network.partition).

The rule table here stands in for the cluster's iptables chain with its two behaviours the evidence relies on:
``-A`` appends a line even when the same line is there already, ``-D`` deletes one matching line. The real
chain is exercised on a cluster by tests/integration/test_nemesis.py::test_pairwise_partition_shrinks_the_isr_then_heals.
"""

from __future__ import annotations

import threading
import time

from chaos.nemesis.kinds.network import partition


class RuleTable:
    """A chain's lines, in order."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def partition(self, a: str, b: str) -> None:
        self.lines += [f"-A KC -d {b} -m owner {a} -j DROP", f"-A KC -d {a} -m owner {b} -j DROP"]

    def unpartition(self, a: str, b: str) -> None:
        for line in (f"-A KC -d {b} -m owner {a} -j DROP", f"-A KC -d {a} -m owner {b} -j DROP"):
            if line in self.lines:
                self.lines.remove(line)

    def partition_rules(self) -> list[str]:
        return list(self.lines)


def test_two_partitions_of_one_broker_in_force_at_once_each_heal_confirmed():
    # found exploring the python-service example: the controller and the coordinator were both broker-2, two
    # partition faults cut it from the same peers, and the first heal saw the other's 4 rules left
    table = RuleTable()
    first = partition(table, "broker-2", ["broker-1", "broker-3"])
    second = partition(table, "broker-2", ["broker-1", "broker-3"])
    assert first.verify_effect()[0] and second.verify_effect()[0]
    second.heal()
    ok, why = second.verify_healed()
    assert ok, why
    assert why == "0 of its 4 partition rules left (4 of other faults in force)"
    assert first.verify_effect()[0]  # the other cut is still in force
    first.heal()
    assert first.verify_healed() == (True, "0 of its 4 partition rules left (0 of other faults in force)")


def test_a_heal_that_left_its_rules_is_not_confirmed():
    table = RuleTable()
    cut = partition(table, "broker-1", ["broker-2"])
    kept = list(table.lines)
    cut.heal()
    table.lines += kept  # the deletion did not take (another driver re-added them, a failed -D)
    ok, why = cut.verify_healed()
    assert not ok and why == "2 of its 2 partition rules left (0 of other faults in force)"


class SlowRuleTable(RuleTable):
    """iptables takes its time per command: another fault's cut can land between two of this one's."""

    def partition(self, a: str, b: str) -> None:
        time.sleep(0.02)
        super().partition(a, b)


def test_two_partitions_injected_at_once_each_count_their_own_rules():
    # found exploring 3.9.1: two live triggers fired on one group event and injected a partition each; one counted
    # 7 rules and the other 8 ("3 of its 7 partition rules left", "-4 of other faults"), and the run was unknown
    table = SlowRuleTable()
    cuts = {}
    start = threading.Barrier(2)

    def inject(node: str, peers: list[str]) -> None:
        start.wait()
        cuts[node] = partition(table, node, peers)

    threads = [threading.Thread(target=inject, args=("broker-1", ["broker-2", "broker-3"])),
               threading.Thread(target=inject, args=("broker-2", ["broker-1", "broker-3"]))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert cuts["broker-1"].verify_effect() == (True, "4 DROP rules cut broker-1 from broker-2, broker-3")
    assert cuts["broker-2"].verify_effect() == (True, "4 DROP rules cut broker-2 from broker-1, broker-3")
    cuts["broker-2"].heal()
    assert cuts["broker-2"].verify_healed() == (True, "0 of its 4 partition rules left (4 of other faults in force)")
    cuts["broker-1"].heal()
    cuts["broker-1"].heal()  # a second heal changes nothing
    assert cuts["broker-1"].verify_healed() == (True, "0 of its 4 partition rules left (0 of other faults in force)")
