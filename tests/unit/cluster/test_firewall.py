"""The partition firewall's chain, made by two faults at once (real iptables; root only)."""

import subprocess
import threading

import pytest

from chaos.cluster.firewall import Firewall, unavailable_reason
from chaos.process import Session

pytestmark = pytest.mark.skipif(unavailable_reason() is not None, reason=unavailable_reason() or "")


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_CHAOS_STATE", str(tmp_path / "state"))


def _chain_exists(chain: str) -> bool:
    return subprocess.run(["iptables", "-w", "5", "-S", chain], capture_output=True).returncode == 0


def test_two_cuts_at_once_make_one_chain_and_close_removes_it():
    # found exploring: two partition faults whose live triggers fired on one group event both created the
    # chain, and the second failed with "Chain already exists" (the run was unknown)
    session = Session("fw")
    fw = Firewall(session)
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def cut(i: int) -> None:
        start.wait()
        try:  # ports nothing listens on, group ids no process has: the rules match no packet
            fw.cut(64900 + i, 1 + i, 64910 + i, 11 + i)
        except BaseException as e:  # noqa: BLE001 — the thread's failure is the test's
            errors.append(e)

    threads = [threading.Thread(target=cut, args=(i,)) for i in range(4)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert errors == []
        assert len(fw.rules()) == 8  # two rules per cut, none lost
        assert _chain_exists(fw.chain)
    finally:
        session.close()
    assert not _chain_exists(fw.chain)
