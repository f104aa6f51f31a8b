"""OS processes the project starts, recorded so that only they are ever ended.

Every process kafka-chaos starts (JVMs, Toxiproxy, workers) belongs to a
*session*: a directory under the state root (``$KAFKA_CHAOS_STATE`` or
``/tmp/kafka-chaos``) holding ``owner.json`` (the driver's pid and start time)
and one record per child (pid, start time, name). Identity is the pair
(pid, create_time), so a recycled pid is never mistaken for ours.

Cleanup layers, from the common case to the worst:

1. the session's context manager stops its children in ``__exit__`` (normal
   exit, exception, Ctrl-C; SIGTERM is turned into ``SystemExit`` by
   :func:`terminate_on_sigterm`);
2. an ``atexit`` hook stops whatever a session still has alive;
3. children started from the main thread get ``PR_SET_PDEATHSIG=SIGKILL``,
   so the kernel ends them when the driver dies, even by SIGKILL;
4. :func:`reap_orphans` — called by every new session — ends the recorded
   children of sessions whose owner is gone and deletes their directories.

The state root itself is removed when its last session directory goes, so an
ended run or test session leaves no directory of ours behind.

A running session can be *attached* (:meth:`Session.attach`) by another driver
of the same user (``chaos run --cluster``): it adopts the recorded children by
(pid, start time), may replace them (a restarted broker is recorded in the same
directory, without PDEATHSIG, so it outlives the attaching command), and leaves
them running when it lets go. One driver attaches at a time (an ``flock`` on the
session's ``attach.lock``, released by the kernel even on SIGKILL). The owner's
:meth:`Session.close` and :func:`stop_session_dir` end every recorded child,
those an attaching driver started included.

psutil is used for process identity (create_time) rather than parsing /proc.
"""

from __future__ import annotations

import atexit
import ctypes
import fcntl
import json
import os
import shutil
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

_PR_SET_PDEATHSIG = 1


def state_root() -> Path:
    return Path(os.environ.get("KAFKA_CHAOS_STATE", "/tmp/kafka-chaos"))


@dataclass(frozen=True, slots=True)
class ProcessRecord:
    """What identifies a process we started: pid plus its kernel start time."""

    name: str
    pid: int
    create_time: float
    argv0: str

    def matches(self) -> psutil.Process | None:
        """The live process if it is still the one we started, else None."""
        try:
            proc = psutil.Process(self.pid)
            if abs(proc.create_time() - self.create_time) < 0.01 and proc.status() != psutil.STATUS_ZOMBIE:
                return proc
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
        return None


def _identity(pid: int) -> float:
    return psutil.Process(pid).create_time()


def _pdeathsig() -> None:  # runs in the child between fork and exec
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


class ManagedProcess:
    """One child process with its log file; stop/kill/pause act on its recorded pid only."""

    def __init__(self, name: str, popen: subprocess.Popen, record: ProcessRecord, log_path: Path):
        self.name = name
        self.popen = popen
        self.record = record
        self.log_path = log_path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the whole process: its process group.

        Every process is spawned leading a session of its own (``start_new_session``), so its
        group holds it and every descendant it started — a Java member's VerifiableConsumer JVM
        under its Python worker, for instance. SIGSTOP sent to the worker alone would leave the JVM
        heartbeating: the fault would be recorded as in effect while the member kept its place.
        """
        if self.alive():
            try:
                os.killpg(self.pid, sig)  # our recorded child leads the group: pgid == pid
            except (ProcessLookupError, PermissionError):
                self.popen.send_signal(sig)

    def tree(self) -> list[int]:
        """Pids of the process and its live descendants, leader first (for evidence of a signal)."""
        try:
            root = psutil.Process(self.pid)
            return [self.pid] + [c.pid for c in root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return [self.pid]

    def kill(self, timeout: float = 10.0) -> None:
        """SIGKILL the process group and reap (SIGCONT first is unnecessary: SIGKILL ends stopped processes)."""
        if self.alive():
            self.signal(signal.SIGKILL)
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:  # pragma: no cover - the kernel always delivers SIGKILL
            pass

    def terminate(self, grace: float) -> int | None:
        """SIGTERM, wait ``grace`` seconds, then SIGKILL. Returns the exit code."""
        if self.alive():
            self.signal(signal.SIGCONT)  # a paused process (or a paused child) cannot handle SIGTERM
            self.popen.terminate()  # the leader only: it shuts its own children down in order
            try:
                self.popen.wait(grace)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.popen.poll()

    def log_tail(self, lines: int = 3) -> str:
        return log_excerpt(self.log_path, lines)


def log_excerpt(path: Path, lines: int = 3) -> str:
    """The lines of a log that say why a process failed, on one line.

    The first ERROR/FATAL/exception line (the cause) followed by the last
    lines, with Java stack frames left out.
    """
    try:
        text = [l.strip() for l in path.read_text(errors="replace").splitlines() if l.strip()]
    except FileNotFoundError:
        return "(no log)"
    text = [l for l in text if not l.startswith(("at ", "... "))]
    causes = [l for l in text if " ERROR " in l or " FATAL " in l or "Exception" in l]
    picked = ([causes[0]] if causes else []) + [l for l in text[-lines:] if not causes or l != causes[0]]
    return " | ".join(picked)[-600:] or "(empty log)"


def is_stopped(pid: int) -> bool:
    """Is the process SIGSTOPped (e.g. by a driver that paused it and died before resuming it)?"""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_STOPPED
    except psutil.Error:
        return False


class AdoptedProcess:
    """A recorded process another driver started (an attached session's child): acted on by its
    recorded (pid, start time) only, as :class:`ManagedProcess` is, without a ``Popen`` to wait on.

    Its exit code is not ours to read (its parent reaps it), so :attr:`returncode` is None.
    """

    def __init__(self, record: ProcessRecord, log_path: Path):
        self.name = record.name
        self.record = record
        self.log_path = log_path

    @property
    def pid(self) -> int:
        return self.record.pid

    @property
    def returncode(self) -> int | None:
        return None

    def alive(self) -> bool:
        return self.record.matches() is not None

    def signal(self, sig: int) -> None:
        """``sig`` to its process group (it leads one, see :meth:`ManagedProcess.signal`)."""
        if self.alive():
            try:
                os.killpg(self.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def tree(self) -> list[int]:
        try:
            return [self.pid] + [c.pid for c in psutil.Process(self.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            return [self.pid]

    def kill(self, timeout: float = 10.0) -> None:
        self.signal(signal.SIGKILL)
        _wait_dead(self.record, timeout)

    def terminate(self, grace: float) -> int | None:
        if self.alive():
            self.signal(signal.SIGCONT)
            try:
                os.kill(self.pid, signal.SIGTERM)  # the leader only, as ManagedProcess.terminate
            except ProcessLookupError:
                return None
            _wait_dead(self.record, grace)
            if self.alive():
                self.kill()
        return None

    def log_tail(self, lines: int = 3) -> str:
        return log_excerpt(self.log_path, lines)


class SessionInUse(Exception):
    """Another driver has the session attached (:meth:`Session.attach`)."""


class Session:
    """A directory of recorded children owned by this driver process (or attached by it, see module doc)."""

    def __init__(self, kind: str, detached: bool = False):
        reap_orphans()
        self.id = f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
        self.dir = state_root() / self.id
        for attempt in range(3):
            try:
                (self.dir / "procs").mkdir(parents=True)
                break
            except FileNotFoundError:
                # another driver's last session removed the (then empty) root between our two mkdirs
                if attempt == 2:
                    raise
        self._children: dict[str, ManagedProcess] = {}
        self._lock = threading.Lock()
        self._closed = False
        self.attached = False
        self._attach_fd: int | None = None
        self.set_detached(detached)
        _live_sessions.add(self)

    @staticmethod
    def attached_by(session_dir: Path) -> str | None:
        """The pid of the driver that has the session attached now, or None (a probe: it may change after)."""
        try:
            fd = os.open(session_dir / "attach.lock", os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return None
        except BlockingIOError:
            return os.read(fd, 64).decode(errors="replace").strip() or "?"
        finally:
            os.close(fd)  # releases the probe's shared lock, if it got one

    @classmethod
    def attach(cls, session_dir: Path) -> Session:
        """Attach the running session in ``session_dir``: its children are adopted (:class:`AdoptedProcess`,
        see :meth:`adopted`), what this driver spawns is recorded there and outlives it, and
        :meth:`close` lets go without ending anything. Raises :class:`SessionInUse` when another driver
        has it attached."""
        self = cls.__new__(cls)
        self.id, self.dir = session_dir.name, session_dir
        lock_path = session_dir / "attach.lock"
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip()
            os.close(fd)
            raise SessionInUse(holder or "?") from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._attach_fd = fd
        self._children = {}
        self._lock = threading.Lock()
        self._closed = False
        self.detached = True  # what this driver spawns gets no PDEATHSIG: the session outlives it
        self.attached = True
        return self

    def adopted(self, log_paths: dict[str, Path], known: dict[str, int] | None = None) -> dict[str, AdoptedProcess]:
        """The session's recorded children that still run, by name (log paths as the caller knows them), but
        those whose pid is already ``known`` (name -> pid): what another driver started in their place."""
        known = known or {}
        live = [r for r in _read_records(self.dir) if known.get(r.name) != r.pid and r.matches() is not None]
        return {r.name: AdoptedProcess(r, log_paths.get(r.name, self.dir / f"{r.name}.log")) for r in live}

    def set_detached(self, detached: bool) -> None:
        """A detached session (``chaos cluster up``) outlives its driver on purpose."""
        me = os.getpid()
        owner = {"pid": me, "create_time": _identity(me), "detached": detached}
        (self.dir / "owner.json").write_text(json.dumps(owner))
        self.detached = detached

    def spawn(self, name: str, argv: Sequence[str], log_path: Path, cwd: Path | None = None,
              env: dict[str, str] | None = None, gid: int | None = None) -> ManagedProcess:
        """Start ``argv`` with stdout+stderr to ``log_path`` and record it before returning.

        ``gid`` runs the process with that group id (root only): iptables' owner
        match then tells its packets apart (pair-wise partitions).
        """
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log = log_path.open("ab")
        in_main = threading.current_thread() is threading.main_thread()
        try:
            popen = subprocess.Popen(
                list(argv), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=cwd, env=env,
                # own process group: a terminal Ctrl-C reaches only the driver,
                # which then tears down in order.
                start_new_session=True,
                # PDEATHSIG follows the *thread* that forked; only safe from the
                # main thread, whose end is the driver's end.
                preexec_fn=_pdeathsig if (in_main and not self.detached) else None,
                group=gid,
            )
        finally:
            log.close()
        record = ProcessRecord(name, popen.pid, _identity(popen.pid), str(argv[0]))
        (self.dir / "procs" / f"{name}.json").write_text(json.dumps(asdict(record)))
        proc = ManagedProcess(name, popen, record, log_path)
        with self._lock:
            self._children[name] = proc
        return proc

    def on_reap(self, argv: Sequence[str]) -> None:
        """Record a command that undoes a side effect of this session (e.g. an iptables chain);
        it runs when the session is closed or reaped."""
        path = self.dir / "cleanup.json"
        with self._lock:  # faults injected from several threads record their undo commands at once
            cmds = json.loads(path.read_text()) if path.exists() else []
            if list(argv) not in cmds:
                cmds.append(list(argv))
                path.write_text(json.dumps(cmds))

    def forget(self, name: str) -> None:
        with self._lock:
            self._children.pop(name, None)
        (self.dir / "procs" / f"{name}.json").unlink(missing_ok=True)

    def children(self) -> list[ManagedProcess]:
        with self._lock:
            return list(self._children.values())

    def close(self, remove_dir: bool = True) -> None:
        """Kill every child and delete the session directory (idempotent).

        Every recorded child is ended, those a driver that attached the session started included
        (they are in the directory, not in this object). An attached session only lets go: its
        lock is released and nothing is ended."""
        if self._closed:
            return
        if self.attached:
            if self._attach_fd is not None:
                os.close(self._attach_fd)  # releases the flock
                self._attach_fd = None
            self._closed = True
            return
        for proc in self.children():
            proc.kill()
        for rec in _read_records(self.dir):
            if rec.matches() is not None:
                AdoptedProcess(rec, self.dir).kill()
        _run_cleanup(self.dir)
        if remove_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            _drop_empty_root()
        self._closed = True
        _live_sessions.discard(self)


_live_sessions: set[Session] = set()


@atexit.register
def _close_live_sessions() -> None:
    for session in list(_live_sessions):
        if not session.detached:
            session.close()


def _read_records(session_dir: Path) -> list[ProcessRecord]:
    records = []
    for f in (session_dir / "procs").glob("*.json"):
        try:
            records.append(ProcessRecord(**json.loads(f.read_text())))
        except (ValueError, TypeError):
            continue
    return records


def _owner_alive(session_dir: Path) -> tuple[bool, bool]:
    """(owner alive, detached) for a session directory."""
    try:
        owner = json.loads((session_dir / "owner.json").read_text())
    except (FileNotFoundError, ValueError):
        return False, False
    try:
        alive = abs(_identity(owner["pid"]) - owner["create_time"]) < 0.01
    except (psutil.NoSuchProcess, KeyError):
        alive = False
    return alive, bool(owner.get("detached"))


def stop_session_dir(session_dir: Path) -> list[ProcessRecord]:
    """End the recorded children of a session directory and remove it."""
    killed = []
    for rec in _read_records(session_dir):
        proc = rec.matches()
        if proc is not None:
            try:
                proc.kill()
            except psutil.Error:
                pass
            killed.append(rec)
    for rec in killed:
        _wait_dead(rec, 10.0)
    _run_cleanup(session_dir)
    shutil.rmtree(session_dir, ignore_errors=True)
    _drop_empty_root()
    return killed


def _drop_empty_root() -> None:
    """Remove the state root once its last session is gone, so no directory of ours outlives the drivers;
    a root that still holds anything stays (rmdir refuses a non-empty directory)."""
    try:
        state_root().rmdir()
    except OSError:
        pass


def _run_cleanup(session_dir: Path) -> None:
    """Run the session's recorded undo commands (bounded; failures ignored: they may be undone already)."""
    path = session_dir / "cleanup.json"
    try:
        cmds = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return
    for argv in cmds:
        try:
            subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
    path.unlink(missing_ok=True)


def _wait_dead(rec: ProcessRecord, timeout: float) -> None:
    """Wait until a killed process is gone or a zombie (an orphan's reaping is init's job)."""
    deadline = time.monotonic() + timeout
    while rec.matches() is not None and time.monotonic() < deadline:
        time.sleep(0.02)


def reap_orphans() -> list[ProcessRecord]:
    """End what crashed drivers left behind; touches only recorded (pid, start time) pairs.

    A detached session (a cluster started by ``chaos cluster up``) is kept while
    any of its children is alive.
    """
    root = state_root()
    if not root.exists():
        return []
    reaped: list[ProcessRecord] = []
    for d in root.iterdir():
        if not d.is_dir():
            continue
        alive, detached = _owner_alive(d)
        if alive:
            continue
        if detached and any(r.matches() for r in _read_records(d)):
            continue
        reaped.extend(stop_session_dir(d))
    return reaped


def session_running(session_dir: Path) -> bool:
    """Is the session in ``session_dir`` live: its owner running, or detached with a recorded child alive?"""
    alive, detached = _owner_alive(session_dir)
    return alive or (detached and any(r.matches() for r in _read_records(session_dir)))


def detached_sessions() -> list[Path]:
    root = state_root()
    if not root.exists():
        return []
    return sorted(d for d in root.iterdir() if d.is_dir() and _owner_alive(d)[1])


@contextmanager
def terminate_on_sigterm() -> Iterator[None]:
    """Turn SIGTERM into SystemExit (main thread only) so ``finally`` blocks heal and clean up."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum, frame):  # noqa: ARG001
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
