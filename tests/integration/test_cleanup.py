"""Nothing outlives a run: normal exit, exception, Ctrl-C, SIGTERM, SIGKILL of the driver."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from chaos.cluster.local import LocalCluster
from chaos.model.cluster import ClusterSpec
from chaos.process import Session


def _all_gone(pids, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
        if not alive:
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_CHAOS_STATE", str(tmp_path / "state"))
    return tmp_path / "state"


def test_exception_inside_the_context_stops_everything(state):
    with pytest.raises(RuntimeError):
        with LocalCluster(ClusterSpec.build(brokers=1, zookeepers=3)) as c:
            pids = [p["pid"] for p in c.status()["nodes"].values()] + [c.status()["toxiproxy"]["pid"]]
            workdir = c.workdir
            assert len(pids) == 5 and all(psutil.pid_exists(p) for p in pids)
            raise RuntimeError("boom")
    assert _all_gone(pids)
    assert not workdir.exists()
    assert not state.exists()  # the last session removes the emptied state root


DRIVER = textwrap.dedent("""
    import json, os, signal, sys, threading, time
    # Ctrl-C as a terminal delivers it: a job started in the background by a non-interactive shell (nohup,
    # `cmd &`) inherits SIGINT ignored, and Python then never raises KeyboardInterrupt
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from chaos.cluster.local import LocalCluster
    from chaos.cluster.topology import ClusterSpec
    c = LocalCluster(ClusterSpec.build(brokers=1))
    def up():
        c.start()
        st = c.status()
        print(json.dumps({"pids": [n["pid"] for n in st["nodes"].values()] + [st["toxiproxy"]["pid"]],
                          "workdir": st["workdir"]}), flush=True)
    if sys.argv[1] == "thread":
        t = threading.Thread(target=up); t.start(); t.join()
        time.sleep(300)
    else:
        with c:
            st = c.status()
            print(json.dumps({"pids": [n["pid"] for n in st["nodes"].values()] + [st["toxiproxy"]["pid"]],
                              "workdir": st["workdir"]}), flush=True)
            time.sleep(300)
""")


def _driver(state, mode):
    env = dict(os.environ, KAFKA_CHAOS_STATE=str(state))
    # stderr to a file, not an unread pipe (a driver that wrote more than a pipe holds would block on it),
    # kept next to the test's state for the failure message
    with (state.parent / f"driver-{mode}.stderr").open("w") as err:
        proc = subprocess.Popen([sys.executable, "-c", DRIVER, mode], stdout=subprocess.PIPE, stderr=err,
                                text=True, env=env)
    info = json.loads(proc.stdout.readline())
    return proc, info["pids"], info["workdir"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_and_sigterm_of_the_driver_stop_everything(state, sig):
    proc, pids, workdir = _driver(state, "main")
    proc.send_signal(sig)
    proc.wait(60)
    assert _all_gone(pids)
    assert not os.path.exists(workdir)


def test_sigkilled_driver_leftovers_are_reaped_by_the_next_start(state):
    # started from a thread, so the kernel's parent-death signal does not help:
    # only the reaper can end these JVMs
    proc, pids, workdir = _driver(state, "thread")
    proc.kill()
    proc.wait()
    time.sleep(0.5)
    assert all(psutil.pid_exists(p) for p in pids), "JVMs should survive their driver here"
    Session("next").close()  # every new session reaps first
    assert _all_gone(pids)
    assert not os.path.exists(workdir)


def test_cli_cluster_up_status_down(state):
    env = dict(os.environ, KAFKA_CHAOS_STATE=str(state))
    up = subprocess.run([sys.executable, "-m", "chaos.cli", "cluster", "up", "--brokers", "1", "--json"],
                        capture_output=True, text=True, env=env, timeout=120)
    assert up.returncode == 0, up.stderr
    st = json.loads(up.stdout)
    pids = [n["pid"] for n in st["nodes"].values()]
    assert all(psutil.pid_exists(p) for p in pids)  # outlives the command on purpose
    status = subprocess.run([sys.executable, "-m", "chaos.cli", "cluster", "status", "--json"],
                            capture_output=True, text=True, env=env, timeout=60)
    listed = json.loads(status.stdout)
    assert [s["session"] for s in listed] == [st["session"]]
    assert all(n["running"] for n in listed[0]["nodes"].values())
    assert listed[0]["nodes"]["broker-1"]["effective_config"]["group.initial.rebalance.delay.ms"] == "0"
    down = subprocess.run([sys.executable, "-m", "chaos.cli", "cluster", "down"], capture_output=True, text=True,
                          env=env, timeout=60)
    assert down.returncode == 0 and "stopped" in down.stdout
    assert _all_gone(pids)
    assert not state.exists()
