"""Upper bounds of a workload's counts (members, producers, partitions), for consumer and share groups alike."""

from __future__ import annotations

# Upper bounds of the workload's counts, refused at load time with the bound in the message. Members and
# producers become processes: a member is a process of its own (a Python worker: an interpreter with both client
# libraries loaded is ~30 MB resident before any record; a Java member: a JVM with a 128 MB heap), a producer a
# Python process. 64 Java members and 16 producers beside a cluster could still run on a 2-core, 24 GiB machine
# (slowly), while 10,000 members on 12 partitions -- a typo or a generated file gone wrong -- would exhaust it
# before the first fault.
#: members of the group under test
MAX_CONSUMERS = 64
#: producers writing the workload topic
MAX_PRODUCERS = 16
#: partitions of the workload topic (not processes: files on every replica, rows in the checkers' tables)
MAX_PARTITIONS = 1000
