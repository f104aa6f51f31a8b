"""`--cluster NAME`: a command runs on a running cluster another driver started (real clusters).

What is proven:
- a run on the session's cluster (`chaos run --cluster`) kills the coordinator and restarts it into that
  cluster's session; the owner takes the new process as the node (its next heal adopts it);
- a driver that attached a cluster and was SIGKILLed with a broker restarted, paused and a link down leaves a
  cluster the next attach heals, and whatever it started is ended with the cluster — by `chaos cluster down`
  for a `chaos cluster up` cluster, by the owner's stop for a driver's own;
- every refusal (a cluster of another shape, one in use, a name that runs nothing, the docker backend) is one
  line, exit 2, before anything is written.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from chaos.cluster.local import LocalCluster
from chaos.model.cluster import ClusterSpec
from chaos.process import Session
from tests.waiting import process_gone

ROOT = Path(__file__).resolve().parents[2]


def chaos(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "chaos.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout, env=env or dict(os.environ))


#: the session cluster's shape; the coordinator killed for 3 s (the catalogue's coordinator kills run 14 s)
ATTACHED_KILL = """\
name: attached-coordinator-kill
cluster: {brokers: 3, zookeepers: 1, lanes: 3}
workload:
  partitions: 6
  consumers: [{lane: lane0}, {lane: lane1}]
  producers: [{rate: 200, lane: lane0}]
faults: [{type: kill, target: coordinator, trigger: {at_s: 1}, duration_s: 3}]
phases: {warmup_s: 1, chaos_s: 5}
"""


def test_a_run_on_the_shared_cluster_restarts_the_coordinator_it_killed_and_the_owner_adopts_it(shared_cluster,
                                                                                                 tmp_path):
    cluster = shared_cluster.cluster
    before = {n: p.pid for n, p in cluster.processes().items()}
    exp = tmp_path / "attached-coordinator-kill.yaml"
    exp.write_text(ATTACHED_KILL)
    with shared_cluster.lent() as attach:
        res = chaos("run", str(exp), "--seed", "5", "--out", str(tmp_path / "runs"), "--json", *attach)
    assert res.returncode == 0, res.stderr[-3000:]
    (outcome,) = json.loads(res.stdout)
    assert outcome["valid"] == "true", outcome
    (kill,) = [f for f in outcome["faults"] if f["type"] == "kill"]
    assert kill["fired"] and kill["effect_ok"] and kill["healed_ok"], kill
    (killed,) = kill["nodes"]
    # the coordinator runs again as a new process of the cluster's own session, which the owner now holds
    new = cluster.process(killed)
    assert new.pid != before[killed] and new.alive()
    assert psutil.Process(new.pid).ppid() != os.getpid()  # the command started it, and is gone
    record = json.loads((cluster.workdir / "procs" / f"{killed}.json").read_text())
    assert record["pid"] == new.pid
    status = json.loads((cluster.workdir / "cluster.json").read_text())  # rewritten when the command let go
    assert status["nodes"][killed]["pid"] == new.pid
    assert {n: p.pid for n, p in cluster.processes().items() if n != killed} == \
        {n: pid for n, pid in before.items() if n != killed}
    assert cluster.produce_probe("chaos.ready") is not None


def test_refusals_are_one_line_before_anything_is_written(shared_cluster, tmp_path):
    out = tmp_path / "runs"
    name = shared_cluster.name

    def refused(*args: str) -> str:
        res = chaos(*args, "--out", str(out))
        errors = res.stderr.strip().splitlines()
        assert res.returncode == 2 and len(errors) == 1 and errors[0].startswith("chaos: error: "), res.stderr
        assert not out.exists()
        return errors[0]

    said = refused("run", "zookeeper-quorum-lost", "--cluster", name)
    assert "zookeepers=3 (has 1)" in said and "chaos cluster up --like zookeeper-quorum-lost" in said
    said = refused("run", "baseline", "--cluster", "cluster-that-runs-nothing")
    assert f"yours: {name}" in said and "chaos cluster up --like" in said
    said = refused("run", "baseline", "--cluster", name, "--backend", "docker")
    assert "--cluster attaches a local cluster" in said
    held = Session.attach(shared_cluster.cluster.workdir)  # another command has it now
    try:
        said = refused("run", "baseline", "--cluster", name)
        assert f"in use by another chaos command (pid {os.getpid()})" in said
    finally:
        held.close()


#: a driver that attaches, restarts broker-1, pauses it, takes a link down, and dies by SIGKILL
_KILLED_MID_FAULT = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from chaos.cluster.local import LocalCluster
    c = LocalCluster.attach(Path(sys.argv[1]))
    c.restart("broker-1")
    c.pause("broker-1")
    c.link_down(c.link_names()[0])
    print(c.process("broker-1").pid, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
""")


@pytest.mark.parametrize("owner", ["chaos cluster up", "a live driver"])
def test_an_attaching_driver_killed_mid_fault_leaves_a_cluster_the_next_attach_heals(owner, tmp_path, monkeypatch):
    state = tmp_path / "state"
    monkeypatch.setenv("KAFKA_CHAOS_STATE", str(state))  # this process's sessions and the commands'
    env = dict(os.environ)
    own: LocalCluster | None = None
    try:
        if owner == "chaos cluster up":
            up = chaos("cluster", "up", "--brokers", "1", "--lanes", "1", "--json", env=env, timeout=120)
            assert up.returncode == 0, up.stderr
            session_dir = Path(json.loads(up.stdout)["workdir"])
        else:
            own = LocalCluster(ClusterSpec(brokers=1, lanes=1)).start()
            session_dir = own.workdir
        first = json.loads((session_dir / "cluster.json").read_text())["nodes"]["broker-1"]["pid"]
        killed = subprocess.run([sys.executable, "-c", _KILLED_MID_FAULT, str(session_dir)], capture_output=True,
                                text=True, env=env, timeout=120)
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
        restarted = int(killed.stdout.split()[0])
        assert restarted != first and process_gone(first, 15.0)
        assert psutil.Process(restarted).status() == psutil.STATUS_STOPPED  # it died with the broker paused

        if own is None:  # the next attach (the kernel let go of the dead driver's lock) heals what it left
            again = LocalCluster.attach(session_dir)
            try:
                assert again.process("broker-1").pid == restarted
                assert psutil.Process(restarted).status() != psutil.STATUS_STOPPED
                assert again.produce_probe("chaos.ready") is not None  # through the link it had taken down
            finally:
                again.stop()
            assert psutil.Process(restarted).status() != psutil.STATUS_ZOMBIE  # letting go ends nothing
            down = chaos("cluster", "down", env=env, timeout=60)
            assert down.returncode == 0, down.stderr
        else:  # the owner's heal adopts it and thaws it; the owner's stop ends it
            own.heal()
            assert own.process("broker-1").pid == restarted
            assert own.produce_probe("chaos.ready") is not None
            own.stop()
            own = None
        assert process_gone(restarted, 15.0)
        assert not state.exists()
    finally:
        if own is not None:
            own.stop()
