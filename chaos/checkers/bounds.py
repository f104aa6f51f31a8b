"""Time bounds the checkers use, with defaults derived from the recorded configs.

Values the user leaves as ``None`` are derived from the history: the largest
``session.timeout.ms`` and ``max.poll.interval.ms`` among ``member_start``
events (the rebalance timeout of the Java client and librdkafka is
``max.poll.interval.ms``, KIP-62), falling back to the header's ``configs``
and then to Kafka's defaults (45 s since KIP-735, 300 s). The request timeout
is the largest among the members: the ``request_timeout_ms`` their specs in
the header set, else their client's default for its release
(:func:`chaos.model.clients.default_request_timeout_ms`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chaos.checkers.evidence import declared_request_timeouts_ms
from chaos.errors import UsageError
from chaos.history import History, MemberStart
from chaos.model.clients import UNKNOWN_CLIENT_REQUEST_TIMEOUT_MS, default_request_timeout_ms

KAFKA_DEFAULT_SESSION_TIMEOUT_MS = 45_000  # KIP-735 (Kafka 3.0)
KAFKA_DEFAULT_MAX_POLL_INTERVAL_MS = 300_000  # KIP-62


@dataclass(frozen=True, slots=True)
class CheckerBounds:
    """User-settable bounds; ``None`` means derive from the history.

    - ``convergence_s``: time allowed after the last fault heals for the group
      to be Stable with one live owner per partition (default: session timeout
      + rebalance timeout + ``observer_margin_s``).
    - ``clock_slack_s``: how far apart an action and the event recording it may
      be where the history has no better evidence: the observer's samples lag
      what they sample, and a commit without a send stamp (auto commits, the
      Java client, older histories) is stamped when reported, up to this long
      after it was sent. Comparisons across sources tolerate this much. The
      fencing checker does *not* apply it to commits stamped when sent and
      answered (``answered_ns``): those are judged on their own interval
      (:mod:`chaos.checkers.fencing`).
    - ``fence_s``: time within which the older of two members sharing a
      ``group.instance.id`` must be fenced (default: its session timeout + slack).
    - ``observer_margin_s``: extra time for the observer's polling interval.
    - ``max_findings``: findings kept per checker (counts stay exact).
    """

    convergence_s: float | None = None
    clock_slack_s: float = 0.5
    fence_s: float | None = None
    observer_margin_s: float = 5.0
    max_findings: int = 50

    def __post_init__(self) -> None:
        for name in ("convergence_s", "clock_slack_s", "fence_s", "observer_margin_s"):
            v = getattr(self, name)
            if v is not None and v < 0:
                raise UsageError(f"checker bound {name}={v}: must be zero or positive")
        if self.max_findings < 1:
            raise UsageError(f"checker bound max_findings={self.max_findings}: must be at least 1")


@dataclass(frozen=True, slots=True)
class ResolvedBounds:
    """Concrete bounds for one history (nanoseconds where compared with ``mono_ns``)."""

    session_timeout_ns: int
    rebalance_timeout_ns: int
    convergence_ns: int
    slack_ns: int
    fence_ns: int
    max_findings: int
    #: the longest any member waits for the answer to one request (its request timeout)
    request_timeout_ns: int


def _config_ms(configs: Mapping[str, Any], key: str) -> int | None:
    """Largest value of ``key`` anywhere in the header's free-form configs."""
    found: list[int] = []

    def walk(obj: Any) -> None:
        if isinstance(obj, Mapping):
            for k, v in obj.items():
                if k == key:
                    try:
                        found.append(int(v))
                    except (TypeError, ValueError):
                        pass
                else:
                    walk(v)
        elif isinstance(obj, list):
            for v in obj:
                walk(v)

    walk(configs)
    return max(found) if found else None


def config_max(configs: Mapping[str, Any], key: str) -> int | None:
    """The largest integer value of ``key`` anywhere in a header's free-form ``configs`` (None: not there)."""
    return _config_ms(configs, key)


def resolve(bounds: CheckerBounds, history: History, starts: list[MemberStart]) -> ResolvedBounds:
    session = max((s.session_timeout_ms for s in starts), default=None)
    rebalance = max((s.max_poll_interval_ms for s in starts), default=None)
    if session is None:
        session = _config_ms(history.header.configs, "session.timeout.ms") or KAFKA_DEFAULT_SESSION_TIMEOUT_MS
    if rebalance is None:
        rebalance = _config_ms(history.header.configs, "max.poll.interval.ms") or KAFKA_DEFAULT_MAX_POLL_INTERVAL_MS
    s = 1_000_000_000
    slack = int(bounds.clock_slack_s * s)
    margin = int(bounds.observer_margin_s * s)
    convergence = (int(bounds.convergence_s * s) if bounds.convergence_s is not None
                   else (session + rebalance) * 1_000_000 + margin)
    fence = int(bounds.fence_s * s) if bounds.fence_s is not None else session * 1_000_000 + slack + margin
    declared = declared_request_timeouts_ms(history)
    request = max((declared.get(s.source) or default_request_timeout_ms(s.client, s.client_version) for s in starts),
                  default=UNKNOWN_CLIENT_REQUEST_TIMEOUT_MS)
    return ResolvedBounds(session * 1_000_000, rebalance * 1_000_000, convergence, slack, fence, bounds.max_findings,
                          request * 1_000_000)
