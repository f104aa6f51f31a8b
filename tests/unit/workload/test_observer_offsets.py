"""The observer's ``committed_offsets`` samples are stamped when their OffsetFetch was sent.

The coordinator answers from its state at some moment between the request leaving and the answer being
read; only a commit acknowledged before the request left must show in it. A busy fresh-clone run read an
answer 0.5 s late (kafka-python 3's IO thread held up) and, stamped at its reading, the sample showed
offsets from before a commit acknowledged in between: committed-offsets judged a false move back.
"""

from __future__ import annotations

import time
from pathlib import Path

from chaos.history.event import CommittedOffsets
from chaos.history.reader import parse_line
from chaos.workload.observer import GroupObserver

GROUP, TOPIC = "group-ab12", "chaos-ab12"
LATE_S = 0.3


class _SlowAdmin:
    """An admin whose OffsetFetch answer is read ``LATE_S`` after the request left."""

    def __init__(self) -> None:
        self.sent_ns: list[int] = []

    def coordinator_id(self, group: str, wait: bool = True) -> int | None:
        return 2

    def committed_offsets(self, group: str, wait: bool = True, coordinator: int | None = None):
        self.sent_ns.append(time.monotonic_ns())
        time.sleep(LATE_S)
        return {(TOPIC, 0): 115, (TOPIC, 1): -1}


def test_a_sample_is_stamped_when_its_request_left_not_when_its_answer_was_read(tmp_path: Path):
    admin = _SlowAdmin()
    obs = GroupObserver(admin, GROUP, TOPIC, tmp_path, {})  # type: ignore[arg-type]
    obs._sample_offsets()
    read_ns = time.monotonic_ns()
    obs.events.close()
    (raw,) = (tmp_path / "events" / "observer.jsonl").read_bytes().splitlines()
    ev = parse_line(raw, "observer.jsonl:1")
    assert isinstance(ev, CommittedOffsets)
    assert ev.coordinator == 2 and [list(o) for o in ev.offsets] == [[TOPIC, 0, 115]]
    assert ev.mono_ns <= admin.sent_ns[0] < read_ns - LATE_S * 1e9 * 0.9
