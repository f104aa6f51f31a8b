"""A driver SIGKILLed at a random moment of a run leaves nothing once the next start has reaped.

Each case runs `chaos run brokers-partitioned` (a cluster, members, a producer, an observer, and an
iptables chain for the pair-wise partition) in a child process, SIGKILLs it at a seeded random moment
between cluster start and the end of the run, then starts a new session (every start reaps) and checks:
no process the driver started survives (snapshots of its descendants, taken while it ran), no state
directory, no iptables chain of ours, no network namespace of ours.

One seed runs in every `make test` (`tests/integration/test_cleanup.py` SIGKILLs a driver at fixed moments too);
`make test-all` (`--run-slow`) runs 22 more.
"""

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from chaos.cluster import firewall
from chaos.process import Session

ROOT = Path(__file__).resolve().parents[2]
CI_SEEDS = [11]
SLOW_SEEDS = [12, 13, *range(100, 120)]


def _descendants(pid: int) -> set[int]:
    try:
        return {c.pid for c in psutil.Process(pid).children(recursive=True)}
    except psutil.NoSuchProcess:
        return set()


def _alive(pids: set[int]) -> set[int]:
    out = set()
    for p in pids:
        try:
            if psutil.Process(p).status() != psutil.STATUS_ZOMBIE:
                out.add(p)
        except psutil.NoSuchProcess:
            pass
    return out


def _our_chains() -> list[str]:
    if firewall.unavailable_reason() is not None:
        return []
    out = subprocess.run(["iptables", "-S"], capture_output=True, text=True, timeout=30).stdout
    return sorted({line.split()[1] for line in out.splitlines() if line.startswith("-N KC")})


def _netns() -> list[str]:
    try:
        out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30).stdout
    except FileNotFoundError:
        return []
    return sorted(line.split()[0] for line in out.splitlines() if line.strip().startswith("kafka-chaos"))


def _kill_mid_run(tmp_path: Path, seed: int) -> None:
    state = tmp_path / "state"
    env = dict(os.environ, KAFKA_CHAOS_STATE=str(state))
    chains_before, netns_before = _our_chains(), _netns()
    kill_at = random.Random(seed).uniform(2.0, 30.0)  # start ~7 s, chaos from ~10 s, run ends ~40 s
    driver = subprocess.Popen([sys.executable, "-m", "chaos.cli", "run", "brokers-partitioned", "--runs", "1",
                               "--seed", str(seed), "--out", str(tmp_path / "runs")],
                              cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    seen: set[int] = set()
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < kill_at and driver.poll() is None:
            seen |= _descendants(driver.pid)
            time.sleep(0.05)
        seen |= _descendants(driver.pid)
    finally:
        driver.kill()  # SIGKILL: no atexit, no finally in the driver
        driver.wait(30)
    os.environ["KAFKA_CHAOS_STATE"] = str(state)
    try:
        Session("next").close()  # the next start reaps what the killed driver left
    finally:
        os.environ.pop("KAFKA_CHAOS_STATE")
    deadline = time.monotonic() + 20
    while _alive(seen) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = _alive(seen)
    assert not left, f"killed at {kill_at:.1f} s: left running " + \
        ", ".join(f"{p} {' '.join(psutil.Process(p).cmdline()[:3])}" for p in left)
    assert not state.exists() or list(state.iterdir()) == [], f"killed at {kill_at:.1f} s: {list(state.iterdir())}"
    assert _our_chains() == chains_before, f"killed at {kill_at:.1f} s: iptables chains left"
    assert _netns() == netns_before


@pytest.mark.parametrize("seed", CI_SEEDS)
def test_sigkilled_driver_leaves_nothing(tmp_path, seed):
    _kill_mid_run(tmp_path, seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", SLOW_SEEDS)
def test_sigkilled_driver_leaves_nothing_soak(tmp_path, seed):
    _kill_mid_run(tmp_path, seed)
