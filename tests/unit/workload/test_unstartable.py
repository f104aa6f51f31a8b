"""A command member's program is found as its spawn would find it, before any cluster starts
(chaos.workload.application.unstartable)."""

import stat

from chaos.model.workload import ConsumerSpec
from chaos.workload.application import unstartable


def _program(path, mode=0o755):
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(mode)
    return path


def test_a_program_on_path_or_by_path_is_startable(tmp_path):
    assert unstartable("consumer-0", ConsumerSpec(command=["sh", "-c", "true"])) is None
    _program(tmp_path / "svc")
    assert unstartable("consumer-0", ConsumerSpec(command=[str(tmp_path / "svc")])) is None
    # a path with a slash is taken from the member's cwd; a bare name from the PATH of the member's env
    assert unstartable("consumer-0", ConsumerSpec(command=["./svc"], cwd=str(tmp_path))) is None
    assert unstartable("consumer-0", ConsumerSpec(command=["svc"], env={"PATH": str(tmp_path)})) is None


def test_what_cannot_start_is_one_line_naming_the_member(tmp_path):
    said = unstartable("consumer-1", ConsumerSpec(command=["kafka-chaos-no-such-program"]))
    assert said == ("member consumer-1: command 'kafka-chaos-no-such-program' was not found; fix its command / cwd "
                    "(PATH is searched for the program)")
    _program(tmp_path / "svc")
    assert "was not found" in unstartable("consumer-0", ConsumerSpec(command=["svc"]))  # not on the driver's PATH
    assert "was not found" in unstartable("consumer-0", ConsumerSpec(command=["./svc"]))  # not in this cwd
    _program(tmp_path / "plain", mode=stat.S_IRUSR | stat.S_IWUSR)
    # no x bit: not executable, for root too (execve needs one; access(X_OK) says so)
    assert "is not executable" in unstartable("consumer-0", ConsumerSpec(command=[str(tmp_path / "plain")]))
    assert unstartable("consumer-0", ConsumerSpec(command=["sh"], cwd=str(tmp_path / "nope"))) == (
        f"member consumer-0: cwd {tmp_path / 'nope'} does not exist; fix its cwd")
    assert unstartable("consumer-0", ConsumerSpec()) is None  # not a command member
