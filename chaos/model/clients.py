"""The client libraries a group member runs and which of their releases kafka-chaos can run (docs/client-versions.md).

Pure records, shared by the consumer-group members (:mod:`chaos.model.workload`) and the share-group members
(:mod:`chaos.model.share`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class Client(StrEnum):
    CONFLUENT_KAFKA = "confluent-kafka"
    KAFKA_PYTHON = "kafka-python"
    JAVA = "java"


#: The PyPI package of each Python client (the Java client comes from Maven Central: kafka-tools / kafka-clients)
PYPI_PACKAGES = {Client.CONFLUENT_KAFKA: "confluent-kafka", Client.KAFKA_PYTHON: "kafka-python"}

#: A client library release: three numbers, as PyPI and Maven Central name the releases kafka-chaos runs
_RELEASE = re.compile(r"(\d+)\.(\d+)\.(\d+)")


@dataclass(frozen=True, slots=True)
class ClientReleases:
    """Which releases of a client library a member may name in ``client_version`` (docs/client-versions.md).

    ``oldest``: the oldest release kafka-chaos's worker for that client is written for -- below it the worker
    reads internals or calls APIs the release does not have. ``kip848``: the oldest release with KIP-848's
    consumer protocol generally available (None: the client has none).
    """

    oldest: tuple[int, int, int]
    kip848: tuple[int, int, int] | None
    why_oldest: str


CLIENT_RELEASES = {
    # librdkafka's KIP-848 consumer is GA from 2.12.0 (early access before); 1.9.2, the last 1.x, has no wheel
    # for CPython 3.11, and the worker is written against the 2.x API
    Client.CONFLUENT_KAFKA: ClientReleases((2, 0, 0), (2, 12, 0), "the 2.x line the worker is written for (1.9.2 "
                                                                  "has no CPython 3.11 wheel)"),
    # the worker has two adapters: kafka-python 2.x (poll-driven coordinator) and 3.x (its own IO thread)
    Client.KAFKA_PYTHON: ClientReleases((2, 0, 0), None, "the worker reads the group coordinator's 2.x or 3.x "
                                                         "internals"),
    # the Java member runs the VerifiableConsumer of kafka-tools of that release (in kafka-tools since before 2.8)
    # and reads its JSON lines and log: the oldest is the oldest Kafka release kafka-chaos runs at all;
    # --group-protocol consumer from 3.7, GA in 4.0 (KIP-848)
    Client.JAVA: ClientReleases((2, 8, 0), (4, 0, 0), "the oldest Kafka release kafka-chaos runs"),
}


def release(version: str) -> tuple[int, int, int]:
    """``"2.12.0"`` -> (2, 12, 0); ValueError for anything else."""
    m = _RELEASE.fullmatch(version)
    if m is None:
        raise ValueError(f"client_version {version!r} is not a release number X.Y.Z (e.g. 2.12.0)")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def parse_client_release(text: str) -> tuple[Client, str]:
    """``"confluent-kafka=2.14.0"`` (or pip's ``==``) -> (Client.CONFLUENT_KAFKA, "2.14.0"), checked against
    :data:`CLIENT_RELEASES`' oldest; ValueError saying what to write otherwise. The group protocol is checked
    later, with the member it applies to."""
    name, sep, version = text.replace("==", "=").partition("=")
    clients = ", ".join(c.value for c in Client)
    if not sep or not version:
        raise ValueError(f"{text!r}: write CLIENT=X.Y.Z with CLIENT one of {clients}, e.g. confluent-kafka=2.14.0")
    try:
        client = Client(name.strip())
    except ValueError:
        raise ValueError(f"{text!r}: unknown client {name.strip()!r}; use one of {clients}") from None
    version = version.strip()
    have = release(version)
    rules = CLIENT_RELEASES[client]
    if have < rules.oldest:
        oldest = ".".join(map(str, rules.oldest))
        raise ValueError(f"{client.value} {version} is older than {oldest}, {rules.why_oldest}: use {oldest} or newer")
    return client, version


#: The longest a client waits for the answer to one request before it gives up on it, by default, when the
#: member's spec sets no ``request_timeout_ms``: librdkafka's ``socket.timeout.ms`` (60 s, CONFIGURATION.md), the
#: Java consumer's ``request.timeout.ms`` (30 s since Kafka 2.0, KAFKA-7050), kafka-python's ``request_timeout_ms``
#: (305 s in 2.x, "higher than the default of max_poll_interval_ms"; 30 s from 3.0)
_REQUEST_TIMEOUT_MS = {Client.CONFLUENT_KAFKA: 60_000, Client.JAVA: 30_000, Client.KAFKA_PYTHON: 30_000}
#: a client kafka-chaos cannot name (a ``command`` member's program): the longest default of the libraries above
#: that a current release has
UNKNOWN_CLIENT_REQUEST_TIMEOUT_MS = 60_000


def default_request_timeout_ms(client: str, version: str | None) -> int:
    """The request timeout a member of ``client`` (a :class:`Client` value, or anything else for a client kafka-chaos
    cannot name) at ``version`` (the library's own release, e.g. ``"2.2.15"``; None or unparsable: the current one)
    has when nothing sets it: how long a request lost on the way, or its lost answer, keeps the client waiting."""
    try:
        known = Client(client)
    except ValueError:
        return UNKNOWN_CLIENT_REQUEST_TIMEOUT_MS
    m = _RELEASE.match(version or "")
    if known is Client.KAFKA_PYTHON and m is not None and int(m.group(1)) < 3:
        return 305_000
    return _REQUEST_TIMEOUT_MS[known]
