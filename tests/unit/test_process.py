"""Process sessions: only recorded (pid, start time) pairs are ever ended; orphans are reaped."""

import json
import signal
import subprocess
import sys
import textwrap

import psutil
import pytest

from chaos.process import ProcessRecord, Session, reap_orphans
from tests.waiting import process_gone


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_CHAOS_STATE", str(tmp_path / "state"))
    return tmp_path / "state"


def test_close_kills_children_and_removes_directory(tmp_path):
    s = Session("t")
    p = s.spawn("sleeper", ["sleep", "60"], tmp_path / "sleep.log")
    assert p.alive()
    s.close()
    assert not p.alive()
    assert not s.dir.exists()


def _driver_script(state: str, in_thread: bool) -> str:
    return textwrap.dedent(f"""
        import os, sys, threading, time
        os.environ["KAFKA_CHAOS_STATE"] = {state!r}
        from pathlib import Path
        from chaos.process import Session
        s = Session("crash")
        def start():
            p = s.spawn("sleeper", ["sleep", "120"], Path(s.dir) / "sleep.log")
            print(p.pid, flush=True)
        if {in_thread}:
            t = threading.Thread(target=start); t.start(); t.join()
        else:
            start()
        time.sleep(120)
    """)


def _crash_driver(state_dir, in_thread: bool) -> int:
    driver = subprocess.Popen([sys.executable, "-c", _driver_script(str(state_dir), in_thread)],
                              stdout=subprocess.PIPE, text=True)
    child_pid = int(driver.stdout.readline())
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    return child_pid


def test_sigkilled_driver_children_die_with_it_and_next_start_removes_the_directory(state_dir):
    child = _crash_driver(state_dir, in_thread=False)
    assert process_gone(child), "PR_SET_PDEATHSIG should end a child of a SIGKILLed driver"
    assert len(list(state_dir.iterdir())) == 1  # the crashed session's directory is still there
    reap_orphans()
    assert not state_dir.exists()  # its directory, then the emptied root


def test_children_that_survive_a_sigkilled_driver_are_reaped_by_the_next_start(state_dir, tmp_path):
    # spawned from a thread: no PDEATHSIG, so only the reaper can end it
    child = _crash_driver(state_dir, in_thread=True)
    assert psutil.pid_exists(child) and not process_gone(child, 0.3)
    s = Session("next")  # a new session reaps first
    try:
        assert process_gone(child)
        assert [d.name for d in state_dir.iterdir()] == [s.dir.name]
    finally:
        s.close()


def test_reaper_never_touches_a_process_it_did_not_start(state_dir, tmp_path):
    stranger = subprocess.Popen(["sleep", "60"])
    try:
        # a crashed session whose record names the stranger's pid with another start time
        d = state_dir / "crash-fake"
        (d / "procs").mkdir(parents=True)
        (d / "owner.json").write_text(json.dumps({"pid": 999999, "create_time": 1.0, "detached": False}))
        rec = ProcessRecord("x", stranger.pid, psutil.Process(stranger.pid).create_time() - 100, "sleep")
        (d / "procs" / "x.json").write_text(json.dumps(
            {"name": rec.name, "pid": rec.pid, "create_time": rec.create_time, "argv0": rec.argv0}))
        reaped = reap_orphans()
        assert reaped == []
        assert stranger.poll() is None
        assert not d.exists()
    finally:
        stranger.kill()
        stranger.wait()


def test_live_owner_sessions_are_left_alone(state_dir, tmp_path):
    s = Session("mine")
    p = s.spawn("sleeper", ["sleep", "60"], tmp_path / "s.log")
    try:
        reap_orphans()
        assert p.alive() and s.dir.exists()
    finally:
        s.close()
