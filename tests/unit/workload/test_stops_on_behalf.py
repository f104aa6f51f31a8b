"""The runner writes a dead member's ``member_stop`` on its behalf from the nemesis's fault threads. Two faults
on one member at once (``kill all_members`` while ``restart all_members``, found by ``chaos explore``) wrote
one file from two writers that had each resumed the same local ``seq``, and the merge refused the run
("local seq 1 does not increase"). Now: one writer at a time, one stop per process."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import orjson

from chaos.workload.run import WorkloadRun


def _run(tmp_path, pids: dict[str, int]) -> WorkloadRun:
    run = WorkloadRun.__new__(WorkloadRun)  # only what _record_stop reads: no cluster, no processes
    run.run_dir = tmp_path
    run.group = "g"
    run.members = {name: SimpleNamespace(pid=pid) for name, pid in pids.items()}
    run._stops_recorded = set()
    run._on_behalf = threading.Lock()
    (tmp_path / "events").mkdir()
    (tmp_path / "workers").mkdir()
    return run


def _lines(path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_one_death_seen_by_two_fault_threads_is_recorded_once(tmp_path):
    run = _run(tmp_path, {"consumer-0": 101})
    go = threading.Barrier(8)

    def stop() -> None:
        go.wait()
        run._record_stop("consumer-0", "SIGKILL")

    threads = [threading.Thread(target=stop) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    [line] = _lines(tmp_path / "events" / "consumer-0.runner.jsonl")
    assert line["kind"] == "member_stop" and line["seq"] == 1 and line["signal"] == "SIGKILL"


def test_deaths_of_successive_processes_of_one_member_get_increasing_seq(tmp_path):
    run = _run(tmp_path, {"consumer-0": 101})
    done = []

    def stop(pid: int) -> None:
        run.members["consumer-0"] = SimpleNamespace(pid=pid)  # the member restarted: a new process
        run._record_stop("consumer-0", "SIGKILL")
        done.append(pid)

    threads = [threading.Thread(target=stop, args=(200 + i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seqs = [line["seq"] for line in _lines(tmp_path / "events" / "consumer-0.runner.jsonl")]
    assert seqs == sorted(set(seqs)) and seqs[0] == 1  # strictly increasing: the merge accepts the file


def test_a_killed_share_members_acknowledgements_in_flight_are_recorded_unknown(tmp_path):
    # what chaos.workload.share_member mirrors before commit_sync: found on a real run, a member killed while its
    # acknowledgement was on the wire left records the broker had accepted and the history did not name
    from chaos.workload.consumer import InflightCommits, inflight_path

    run = _run(tmp_path, {"consumer-1": 101})
    InflightCommits(inflight_path(tmp_path, "consumer-1")).add(
        {"kind": "share_acknowledged", "group": "g", "sent_ns": 5_000,
         "partitions": [["t", 0, [3, 4], "accept"], ["t", 2, [9], "release"]]})
    run._record_stop("consumer-1", "SIGKILL")
    acks, stop = _lines(tmp_path / "events" / "consumer-1.runner.jsonl")[:2], _lines(
        tmp_path / "events" / "consumer-1.runner.jsonl")[2]
    assert [(a["kind"], a["partition"], a["offsets"], a["outcome"], a["ack_type"], a["mono_ns"]) for a in acks] == [
        ("share_acknowledged", 0, [3, 4], "unknown", "accept", 5_000),
        ("share_acknowledged", 2, [9], "unknown", "release", 5_000)]
    assert stop["kind"] == "member_stop" and not inflight_path(tmp_path, "consumer-1").exists()
