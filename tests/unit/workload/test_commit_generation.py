"""The generation a commit event carries is the one its OffsetCommit went out with, or none.

The client library builds the request on its own thread after ``commit()`` is called (librdkafka's main
thread serves the commit op), so a JoinGroup answer handled in between raises the generation the request
carries above the one the member read before the call. The member reads the library's view before the call
and once it is answered; a commit whose two views differ carries no generation (the fencing checker counts it
unjudged). The client here is a stand-in (no broker): what is under test is the member's bookkeeping.
"""

from __future__ import annotations

import orjson

from chaos.history.writer import EventWriter
from chaos.model.workload import ConsumerSpec
from chaos.outcome import Outcome
from chaos.workload.consumer import CommitResult, Member, _sent_with
from chaos.workload.spec import WorkerConfig


class RisingClient:
    """A library whose generation goes from 4 to 5 while the commit numbered ``rise_on`` is in flight."""

    name = "confluent-kafka"
    version = "test"

    def __init__(self, rise_on: int):
        self.generation = 4
        self.commits = 0
        self.rise_on = rise_on

    def group_view(self):
        return self.generation, "m0"

    def commit_sync(self, offsets):
        self.commits += 1
        if self.commits == self.rise_on:
            self.generation = 5  # the main thread handled JoinGroup (generation 5) before building the request
        return CommitResult(Outcome.OK)

    def commit_async(self, offsets, done):
        done(self.commit_sync(offsets))


def commits_of(tmp_path, rise_on: int) -> list[dict]:
    cfg = WorkerConfig(role="consumer", name="consumer-0", run_id="r", run_dir=str(tmp_path), bootstrap="unused:1",
                       topic="t", group="g", consumer=ConsumerSpec())
    (tmp_path / "workers").mkdir()
    writer = EventWriter.for_run(tmp_path, "consumer-0")
    member = Member(cfg, RisingClient(rise_on), writer)
    for offset in (3, 7, 9):
        member._commit({("t", 0): offset}, sync=True)
    writer.close()
    lines = (tmp_path / "events" / "consumer-0.jsonl").read_bytes().splitlines()
    return [e for e in map(orjson.loads, lines) if e["kind"] == "commit"]


def test_a_commit_during_which_the_generation_rose_carries_none(tmp_path):
    got = [(c["offsets"][0][2], c["generation"], c["member_id"]) for c in commits_of(tmp_path, rise_on=2)]
    assert got == [(3, 4, "m0"), (7, None, "m0"), (9, 5, "m0")]


def test_commits_with_a_steady_view_keep_their_generation(tmp_path):
    got = [c["generation"] for c in commits_of(tmp_path, rise_on=99)]
    assert got == [4, 4, 4]


def test_a_member_id_that_changed_is_dropped_too():
    before = {"generation": 4, "member_id": "m0"}
    assert _sent_with(before, {"generation": 4, "member_id": "m0"}) == before
    assert _sent_with(before, {"generation": None, "member_id": None}) == {"generation": None, "member_id": None}
    assert _sent_with(before, {"generation": 6, "member_id": "m0"}) == {"generation": None, "member_id": "m0"}
