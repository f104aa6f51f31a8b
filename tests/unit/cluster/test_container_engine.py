"""The engine directory's removal after dockerd is gone, with real mounts (root only; no dockerd needed)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from chaos.cluster.container_engine import DockerEngine, _mounts_below

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting needs root")


@pytest.fixture
def engine_dir(tmp_path: Path) -> Iterator[Path]:
    d = tmp_path / "engine"
    (d / "exec" / "netns").mkdir(parents=True)
    yield d
    for target, _ in _mounts_below(str(d.resolve())):  # whatever a failed test left mounted
        subprocess.run(["umount", "-l", target], check=False, capture_output=True)


def _mount(args: list[str]) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True)


def test_a_namespace_handle_left_by_dockerd_is_unmounted_and_the_directory_removed(engine_dir: Path, capsys) -> None:
    handle = engine_dir / "exec" / "netns" / "default"
    handle.touch()
    _mount(["--bind", "/proc/self/ns/net", str(handle)])
    assert _mounts_below(str(engine_dir.resolve())) == [(str(handle.resolve()), "nsfs")]
    DockerEngine(engine_dir)._remove_dir()
    assert not engine_dir.exists()
    assert _mounts_below(str(engine_dir.resolve())) == []
    assert capsys.readouterr().err == ""


def test_a_file_system_still_mounted_below_keeps_the_directory_and_says_which(engine_dir: Path, capsys) -> None:
    rootfs = engine_dir / "exec" / "rootfs"
    rootfs.mkdir()
    _mount(["-t", "tmpfs", "-o", "size=1m", "tmpfs", str(rootfs)])
    (rootfs / "kept").write_text("a container's file")
    DockerEngine(engine_dir)._remove_dir()
    assert (rootfs / "kept").read_text() == "a container's file"
    assert f"kafka-chaos: kept {engine_dir}: {rootfs.resolve()} is still mounted" in capsys.readouterr().err
