"""A Docker engine of our own for the docker backend: install, start, reap, stop.

No init system runs on the project's machines and no registry is reachable
(docs/architecture.md, "Environment"), so the backend brings its own ``dockerd``:

* its own socket (``unix://<dir>/docker.sock``), exec root and pid file, so it
  never meets a system Docker; ``<dir>`` is ``$KAFKA_CHAOS_DOCKER_DIR`` or
  ``/tmp/kafka-chaos-docker`` (kept short: unix socket paths are limited);
* its own data root under the cache (``~/.cache/kafka-chaos/docker``), kept
  across runs so locally built images are built once per machine, and its log
  beside it (``dockerd.log``; the previous engine's ``dockerd.log.1``): ``<dir>``
  holds only runtime state and is removed when the engine stops;
* ``--bridge=none --iptables=false --ip6tables=false``: it creates no bridge
  and adds no firewall rule; containers use host networking, so the
  127.0.0.1 port plan of the local backend applies unchanged;
* optionally (``--netns NAME``) inside a network namespace it creates
  (``ip netns add``, loopback up; dockerd started through
  ``nsenter --net=/run/netns/NAME`` because ``ip netns exec`` remounts /sys
  and breaks it). "Host" networking then means *that namespace*: every
  container, and every process that talks to them (``run`` wraps CMD in the
  same ``nsenter``), sees a private 127.0.0.1 that nothing else on the
  machine shares. The namespace is deleted when the engine stops (or when a
  leftover engine is reaped).

Identity: ``engine.json`` records the dockerd pid with its kernel start time
and the driver that started it (pid + start time), exactly like
:mod:`chaos.process`. Only that pair is ever signalled. A dockerd whose driver
died (SIGKILL, OOM) is *reaped* by the next :meth:`DockerEngine.start`:
SIGTERM, so dockerd stops its containers itself (live-restore is off), then
SIGKILL after a grace period. dockerd is deliberately not given a parent-death
signal: a SIGKILLed dockerd would leave its containers running under their
shims, while a terminated one stops them.

When the engine cannot start, :class:`EngineUnavailable` says why in one line
(tests turn it into a skip with that reason).

Command line (``scripts/docker-engine.sh`` wraps it)::

    python -m chaos.cluster.container_engine install        # apt-get install docker.io debootstrap if missing
    python -m chaos.cluster.container_engine start|stop|status
    python -m chaos.cluster.container_engine run -- CMD...  # engine up, CMD with DOCKER_HOST set, engine down
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from chaos.cluster.runtime import cache_root
from chaos.errors import InfrastructureError

APT_PACKAGES = ("docker.io", "debootstrap")


def _mounts_below(root: str) -> list[tuple[str, str]]:
    """(mount point, file system type) of every mount at or below ``root``, deepest first, from
    /proc/self/mountinfo (fields up to `` - `` then the type, proc(5)); none when it cannot be read."""
    try:
        with open("/proc/self/mountinfo") as f:
            rows = [line.split() for line in f]
    except OSError:
        return []
    found = [(r[4], r[r.index("-") + 1]) for r in rows if "-" in r and (r[4] == root or r[4].startswith(root + "/"))]
    return sorted(found, key=lambda m: m[0].count("/"), reverse=True)


class EngineUnavailable(InfrastructureError):
    """The Docker engine cannot be started here; the message is the one-line reason."""


def engine_dir() -> Path:
    return Path(os.environ.get("KAFKA_CHAOS_DOCKER_DIR", "/tmp/kafka-chaos-docker"))


def data_root() -> Path:
    return cache_root() / "docker"


@dataclass(frozen=True, slots=True)
class EngineRecord:
    """Who runs our dockerd: its pid and start time, and the driver that started it."""

    pid: int
    create_time: float
    owner_pid: int
    owner_create_time: float
    detached: bool
    docker_host: str
    #: the network namespace dockerd runs in (created by us, deleted with it), None = the root namespace
    netns: str | None = None

    def dockerd(self) -> psutil.Process | None:
        return _same_process(self.pid, self.create_time)

    def owner_alive(self) -> bool:
        return _same_process(self.owner_pid, self.owner_create_time) is not None


def _same_process(pid: int, create_time: float) -> psutil.Process | None:
    try:
        proc = psutil.Process(pid)
        if abs(proc.create_time() - create_time) < 0.01 and proc.status() != psutil.STATUS_ZOMBIE:
            return proc
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        pass
    return None


NETNS_DIR = Path("/run/netns")


def in_netns(name: str) -> bool:
    """Is this process in network namespace ``name`` (``ip netns add``)?"""
    try:
        return os.stat(NETNS_DIR / name).st_ino == os.stat("/proc/self/ns/net").st_ino
    except FileNotFoundError:
        return False


def _del_netns(name: str) -> None:
    if (NETNS_DIR / name).exists():
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


def install(progress=print) -> None:
    """``apt-get install docker.io debootstrap`` when ``dockerd`` or ``debootstrap`` is missing."""
    if shutil.which("dockerd") and shutil.which("debootstrap"):
        progress("docker.io and debootstrap: installed")
        return
    if os.geteuid() != 0:
        raise EngineUnavailable("dockerd is not installed and installing it needs root: "
                                "run `sudo apt-get install -y docker.io debootstrap`")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    progress(f"apt-get install {' '.join(APT_PACKAGES)} ...")
    for cmd in (["apt-get", "update", "-qq"],
                ["apt-get", "install", "-y", "-q", "--no-install-recommends", *APT_PACKAGES]):
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            last = (r.stderr.strip() or r.stdout.strip()).splitlines()[-1:] or ["no output"]
            raise EngineUnavailable(f"`{' '.join(cmd)}` failed (exit {r.returncode}): {last[0]}")


class DockerEngine:
    """Our dockerd; :meth:`start` returns once it answers ``/_ping``.

    >>> with DockerEngine() as engine:          # doctest: +SKIP
    ...     print(engine.docker_host)           # unix:///tmp/kafka-chaos-docker/docker.sock
    """

    def __init__(self, directory: Path | None = None, *, netns: str | None = None, detached: bool = False,
                 start_timeout_s: float = 60.0):
        self.dir = directory or engine_dir()
        #: run dockerd (and so every host-network container) in this network namespace, created on start
        self.netns = netns
        self.detached = detached
        self.start_timeout_s = start_timeout_s
        #: True when this object started dockerd (and so stops it); False when it reused a running one
        self.started_here = False
        self._popen: subprocess.Popen | None = None

    # ------------------------------------------------------------ paths
    @property
    def socket(self) -> Path:
        return self.dir / "docker.sock"

    @property
    def docker_host(self) -> str:
        return f"unix://{self.socket}"

    @property
    def log_path(self) -> Path:
        """dockerd's log: beside the data root, not in the engine directory, which is removed when the engine
        stops; the previous engine's log is kept as ``dockerd.log.1``."""
        return data_root().parent / "dockerd.log"

    @property
    def record_path(self) -> Path:
        return self.dir / "engine.json"

    def record(self) -> EngineRecord | None:
        try:
            return EngineRecord(**json.loads(self.record_path.read_text()))
        except (FileNotFoundError, ValueError, TypeError):
            return None

    # ------------------------------------------------------------ lifecycle
    def __enter__(self) -> DockerEngine:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def running(self) -> EngineRecord | None:
        """The record of our dockerd if it is alive and answers, else None."""
        rec = self.record()
        if rec is None or rec.dockerd() is None:
            return None
        return rec if self.ping() else None

    def start(self) -> DockerEngine:
        """Start dockerd, or reuse ours if a live driver (or a detached start) owns it.

        A dockerd of ours whose driver is dead is stopped first (see module doc).
        """
        if os.geteuid() != 0:
            raise EngineUnavailable("starting dockerd needs root (run the docker tests as root or under sudo)")
        dockerd = shutil.which("dockerd")
        if dockerd is None:
            raise EngineUnavailable("dockerd is not installed: run `scripts/docker-engine.sh install` "
                                    "(apt-get install docker.io debootstrap)")
        rec = self.record()
        if rec is not None and rec.dockerd() is not None:
            if (rec.detached or rec.owner_alive()) and self.ping():
                self.netns = rec.netns
                return self  # someone else's session or `docker-engine.sh start`: reuse, do not stop
        if rec is not None:
            self._stop_record(rec)  # a leftover of a dead driver (or a dead dockerd): stop it, drop its namespace
        self._clean_stale()
        self.dir.mkdir(parents=True, exist_ok=True)
        data_root().mkdir(parents=True, exist_ok=True)
        if self.log_path.exists():
            self.log_path.replace(self.log_path.with_name("dockerd.log.1"))
        (self.dir / "daemon.json").write_text("{}\n")  # never read /etc/docker/daemon.json
        prefix: list[str] = []
        if self.netns:
            self._add_netns(self.netns)
            # nsenter execs dockerd (no fork), so the recorded pid is dockerd's; `ip netns exec` would remount /sys
            prefix = ["nsenter", f"--net={NETNS_DIR / self.netns}"]
        argv = [
            *prefix,
            dockerd,
            "--config-file", str(self.dir / "daemon.json"),
            "--data-root", str(data_root()),
            "--exec-root", str(self.dir / "exec"),
            "--pidfile", str(self.dir / "dockerd.pid"),
            "-H", self.docker_host,
            "--bridge=none", "--iptables=false", "--ip6tables=false", "--ip-forward=false", "--ip-masq=false",
            "--storage-driver=overlay2", "--log-level=warn",
        ]
        with self.log_path.open("wb") as log:
            popen = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        me = psutil.Process()
        rec = EngineRecord(popen.pid, psutil.Process(popen.pid).create_time(), me.pid, me.create_time(),
                           self.detached, self.docker_host, self.netns)
        self.record_path.write_text(json.dumps(asdict(rec)))
        self.started_here = True
        self._popen = popen
        deadline = time.monotonic() + self.start_timeout_s
        while not self.ping():
            if popen.poll() is not None:
                self.record_path.unlink(missing_ok=True)
                raise EngineUnavailable(f"dockerd exited with code {popen.returncode}: {self._log_reason()} "
                                        f"(full log {self.log_path})")
            if time.monotonic() > deadline:
                self.stop()
                raise EngineUnavailable(f"dockerd did not answer on {self.docker_host} within "
                                        f"{self.start_timeout_s:.0f}s: {self._log_reason()}")
            time.sleep(0.1)
        return self

    def stop(self, force: bool = False) -> None:
        """Stop dockerd if this object started it (or ``force``: the command line's ``stop``)."""
        if not (self.started_here or force):
            return
        rec = self.record()
        if rec is not None:
            self._stop_record(rec)
        self._clean_stale()
        self.started_here = False
        if self.record() is None:
            self._remove_dir()

    def _remove_dir(self) -> None:
        """Remove the engine directory once dockerd is gone: it then holds only runtime state (config, exec
        root), and nothing of the engine may outlive it. A network-namespace handle dockerd bind-mounted under
        its exec root (``exec/netns/default``, libnetwork's sandbox of the namespace it runs in) and left
        behind is unmounted first: an nsfs mount holds a namespace, no files, so nothing is reached through
        it (seen after a dockerd started outside a namespace of ours). Left in place, with a line saying why,
        while anything else is still mounted below it (a container's root file system under the exec root
        after a SIGKILLed dockerd): removing files through a mount would reach into what it mounts."""
        root = str(self.dir.resolve())
        for target in [m for m, fstype in _mounts_below(root) if fstype == "nsfs"]:
            subprocess.run(["umount", target], capture_output=True, timeout=10, check=False)
        busy = [m for m, _ in _mounts_below(root)]
        if busy:
            print(f"kafka-chaos: kept {self.dir}: {busy[0]} is still mounted", file=sys.stderr)
            return
        shutil.rmtree(self.dir, ignore_errors=True)

    def _stop_record(self, rec: EngineRecord, grace: float = 30.0) -> None:
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
            # SIGTERM: dockerd stops its containers, then its containerd, then exits
            proc = rec.dockerd()
            if proc is None:
                break
            try:
                proc.send_signal(sig)
            except psutil.NoSuchProcess:
                break
            deadline = time.monotonic() + wait
            # an orphan (its driver died) becomes a zombie until init reaps it: dockerd() treats that as gone
            while rec.dockerd() is not None and time.monotonic() < deadline:
                time.sleep(0.05)
        if self._popen is not None and self._popen.pid == rec.pid:
            self._popen.wait(10)  # our own child: collect its exit status
            self._popen = None
        if rec.netns:
            _del_netns(rec.netns)
        self.record_path.unlink(missing_ok=True)

    @staticmethod
    def _add_netns(name: str) -> None:
        if not (NETNS_DIR / name).exists():
            r = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
            if r.returncode != 0:
                raise EngineUnavailable(f"`ip netns add {name}` failed: {r.stderr.strip() or r.returncode}")
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)

    def wrap(self, cmd: list[str]) -> list[str]:
        """``cmd`` run inside the engine's network namespace (unchanged for the root namespace)."""
        return ["nsenter", f"--net={NETNS_DIR / self.netns}", *cmd] if self.netns else list(cmd)

    def _clean_stale(self) -> None:
        for name in ("docker.sock", "dockerd.pid"):
            (self.dir / name).unlink(missing_ok=True)

    # ------------------------------------------------------------ probes
    def ping(self, timeout: float = 2.0) -> bool:
        """Does our socket answer ``GET /_ping`` with ``OK``?"""
        import socket as _socket

        if not self.socket.exists():
            return False
        try:
            with _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM) as s:
                s.settimeout(timeout)
                s.connect(str(self.socket))
                s.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
                data = b""
                while chunk := s.recv(4096):
                    data += chunk
        except OSError:
            return False
        return data.startswith(b"HTTP/1.") and b" 200 " in data.split(b"\r\n", 1)[0]

    def _log_reason(self) -> str:
        try:
            lines = [l.strip() for l in self.log_path.read_text(errors="replace").splitlines() if l.strip()]
        except FileNotFoundError:
            return "(no log)"
        errors = [l for l in lines if "level=fatal" in l or "level=error" in l or "failed to start" in l]
        return (errors[-1] if errors else (lines[-1] if lines else "(empty log)"))[-300:]

    def status(self) -> dict:
        rec = self.record()
        alive = rec is not None and rec.dockerd() is not None
        return {"docker_host": self.docker_host, "data_root": str(data_root()), "log": str(self.log_path),
                "running": alive and self.ping(), "record": asdict(rec) if rec else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="docker-engine", description="kafka-chaos's own Docker engine")
    ap.add_argument("command", choices=["install", "start", "stop", "status", "run"])
    ap.add_argument("--netns", default=os.environ.get("KAFKA_CHAOS_DOCKER_NETNS") or None, metavar="NAME",
                    help="start dockerd in network namespace NAME (created, and deleted on stop); "
                         "`run` then runs CMD inside it [env KAFKA_CHAOS_DOCKER_NETNS]")
    argv = sys.argv[1:] if argv is None else argv
    cmd = argv[argv.index("--") + 1:] if "--" in argv else []
    args = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    try:
        if args.command == "install":
            install()
            return 0
        if args.command == "status":
            print(json.dumps(DockerEngine().status(), indent=2))
            return 0
        if args.command == "stop":
            DockerEngine().stop(force=True)
            print("docker engine: stopped")
            return 0
        if args.command == "start":
            engine = DockerEngine(netns=args.netns, detached=True).start()
            where = f"network namespace {engine.netns}" if engine.netns else "the root network namespace"
            print(f"docker engine: up at {engine.docker_host} in {where} (stop with `scripts/docker-engine.sh stop`)")
            return 0
        if not cmd:
            ap.error("run needs a command: run -- CMD ...")
        engine = DockerEngine(netns=args.netns)
        try:
            engine.start()
        except EngineUnavailable as exc:
            # CMD still runs: the docker tests see the reason and skip with it instead of failing or vanishing
            print(f"docker engine unavailable: {exc}", file=sys.stderr)
            env = dict(os.environ, KAFKA_CHAOS_DOCKER_UNAVAILABLE=str(exc))
            return subprocess.run(cmd, env=env).returncode
        try:
            env = dict(os.environ, KAFKA_CHAOS_DOCKER_HOST=engine.docker_host)
            return subprocess.run(engine.wrap(cmd), env=env).returncode
        finally:
            engine.stop()
    except EngineUnavailable as exc:
        print(f"docker engine unavailable: {exc}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
