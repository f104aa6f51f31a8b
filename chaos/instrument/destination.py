"""Where an instrumented consumer records: the environment a framework-started member is given.

kafka-chaos starts a white-box member (the application's own process) with:

- ``KAFKA_CHAOS_EVENTS`` — the path of this member's events file (``RUN/events/<member>.jsonl``,
  docs/architecture.md, "The history": one writer per file);
- ``KAFKA_CHAOS_MEMBER`` — the member's name, the events' ``source`` (default: the file's stem, which
  is how the runner names the file);
- ``KAFKA_CHAOS_GROUP`` — the group under test: a consumer of another group in the same process (a
  side consumer of the application) is not recorded, so the file holds exactly the member under test;
- ``KAFKA_CHAOS_INSTRUMENT=1`` — read by ``chaos/instrument/site/sitecustomize.py`` only: install the
  hook (:mod:`chaos.instrument.hook`) before the application imports its client library.

With no ``KAFKA_CHAOS_EVENTS`` the instrumented classes record nothing and behave as the library's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from chaos.errors import UsageError

EVENTS_VAR = "KAFKA_CHAOS_EVENTS"
MEMBER_VAR = "KAFKA_CHAOS_MEMBER"
GROUP_VAR = "KAFKA_CHAOS_GROUP"
INSTRUMENT_VAR = "KAFKA_CHAOS_INSTRUMENT"


@dataclass(frozen=True, slots=True)
class Destination:
    """One member's events file, its source name, and the group it records (None: any group)."""

    events: Path
    member: str
    group: str | None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Destination | None:
        """The destination the environment names, or None when ``KAFKA_CHAOS_EVENTS`` is unset/empty.

        Raises :class:`UsageError` for a member name that cannot be a source (empty after defaulting,
        or containing ``/``) — checked here, when the consumer is built, not at the first event.
        """
        env = os.environ if environ is None else environ
        raw = env.get(EVENTS_VAR, "").strip()
        if not raw:
            return None
        events = Path(raw)
        member = env.get(MEMBER_VAR, "").strip() or events.name.removesuffix(".jsonl")
        if not member or "/" in member:
            raise UsageError(f"{MEMBER_VAR}={member!r}: set it to a plain member name such as consumer-2")
        group = env.get(GROUP_VAR, "").strip() or None
        return cls(events=events, member=member, group=group)

    def records(self, group: str | None) -> bool:
        """Whether a consumer of ``group`` is the member under test."""
        return group is not None and (self.group is None or self.group == group)
