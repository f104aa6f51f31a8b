"""One node's container behind the small process interface the nemesis uses, and label-based reaping.

:class:`ContainerProcess` offers what :class:`chaos.process.ManagedProcess`
offers (``pid``, ``alive``, ``signal``, ``kill``, ``terminate``,
``log_tail``, ``log_path``), implemented with Docker's own operations:
``docker kill`` semantics (any signal to the container's main process; see
:meth:`ContainerProcess.signal` for why it is delivered directly),
``docker stop`` (SIGTERM, then SIGKILL after the grace period) and, in
:class:`chaos.cluster.container_cluster.DockerCluster`,
``docker pause``/``unpause`` (the cgroup freezer).

Every container the backend creates carries the labels below. A driver that
dies without cleaning up (SIGKILL, OOM) leaves containers running — Docker's
reaper container (Ryuk) cannot be pulled here — so every new docker cluster
first calls :func:`reap_containers`, which removes the containers whose owner
(pid + kernel start time, as in :mod:`chaos.process`) is gone.
"""

from __future__ import annotations

import signal
from pathlib import Path

import psutil
from docker.errors import APIError, NotFound
from docker.models.containers import Container

from chaos.process import log_excerpt

LABEL_SESSION = "kafka-chaos.session"
LABEL_NODE = "kafka-chaos.node"
LABEL_OWNER = "kafka-chaos.owner"   # "<pid>:<create_time>" of the driver


def owner_label() -> str:
    me = psutil.Process()
    return f"{me.pid}:{me.create_time()}"


def owner_alive(label: str) -> bool:
    try:
        pid, created = label.split(":", 1)
        proc = psutil.Process(int(pid))
        return abs(proc.create_time() - float(created)) < 0.01 and proc.status() != psutil.STATUS_ZOMBIE
    except (ValueError, psutil.NoSuchProcess, psutil.AccessDenied):
        return False


class ContainerProcess:
    """A node running as a container; every call asks the engine (no cached state)."""

    def __init__(self, name: str, container: Container, log_path: Path):
        self.name = name
        self.container = container
        #: the node's own log on the host (bind-mounted); the container's stdout is in ``docker logs``
        self.log_path = log_path
        self._main: tuple[int, float] | None = None  # (host pid, kernel start time) of the container's pid 1

    def _main_process(self) -> psutil.Process | None:
        """The container's main process (host view), identity-checked; asks the engine only when unknown."""
        if self._main is None:
            pid = self._state().get("Pid") or 0
            if not pid:
                return None
            try:
                self._main = (pid, psutil.Process(pid).create_time())
            except psutil.NoSuchProcess:
                return None
        pid, created = self._main
        try:
            proc = psutil.Process(pid)
            if abs(proc.create_time() - created) < 0.01 and proc.status() != psutil.STATUS_ZOMBIE:
                return proc
        except psutil.NoSuchProcess:
            pass
        return None

    def _state(self) -> dict:
        try:
            self.container.reload()
        except NotFound:
            return {}
        return self.container.attrs.get("State", {})

    @property
    def pid(self) -> int | None:
        """The host pid of the node's main process (the JVM), None when it is not running."""
        proc = self._main_process()
        return proc.pid if proc else None

    @property
    def id(self) -> str:
        return self.container.id

    def alive(self) -> bool:
        """Running, paused included (a frozen JVM is alive, as a SIGSTOPped one is)."""
        return bool(self._state().get("Running"))

    def paused(self) -> bool:
        return bool(self._state().get("Paused"))

    def exit_code(self) -> int | None:
        st = self._state()
        return None if st.get("Running") or not st else st.get("ExitCode")

    def signal(self, sig: int) -> None:
        """Deliver ``sig`` to the container's main process, as ``docker kill --signal`` does.

        Sent straight to its host pid (identity-checked) — what runc does for
        ``docker kill`` — because a round trip through the engine costs about
        half a second on a loaded 2-core machine, too slow for state-triggered
        faults (docs/architecture.md, "Faults: schedule, triggers, evidence"); the engine
        then records the exit (137 for SIGKILL).
        Falls back to ``docker kill`` when the process is not known.
        """
        proc = self._main_process()
        if proc is not None:
            try:
                proc.send_signal(sig)
                return
            except psutil.NoSuchProcess:
                return
        if self.alive():
            try:
                self.container.kill(signal=int(sig))
            except APIError as exc:
                if "is not running" not in str(exc):
                    raise

    def kill(self, timeout: float = 10.0) -> None:
        """SIGKILL and wait until the container has exited; a frozen container is thawed after the signal."""
        if self.alive():
            was_paused = self.paused()
            self.signal(signal.SIGKILL)
            if was_paused and self.paused():
                self.container.unpause()  # SIGKILL is queued on a frozen task; thawing lets it die
        self.wait(timeout)

    def terminate(self, grace: float) -> int | None:
        """``docker stop``: SIGTERM (Kafka's controlled shutdown), SIGKILL after ``grace`` seconds. The exit code."""
        if self.alive():
            if self.paused():
                self.container.unpause()  # a frozen JVM cannot handle SIGTERM
            self.container.stop(timeout=int(grace))
        self.wait(10.0)
        return self.exit_code()

    def wait(self, timeout: float) -> None:
        try:
            self.container.wait(timeout=timeout, condition="not-running")
        except Exception:  # noqa: BLE001 - requests' ReadTimeout: the caller checks alive()
            pass

    def start(self) -> None:
        """Start the (stopped) container again: same command, same bind-mounted data and log."""
        self._main = None
        self.container.start()

    def stdout_tail(self, lines: int = 3) -> str:
        try:
            text = self.container.logs(tail=lines).decode(errors="replace")
        except (APIError, NotFound):
            return "(container gone)"
        return " | ".join(l.strip() for l in text.splitlines() if l.strip())[-600:] or "(no output)"

    def log_tail(self, lines: int = 3) -> str:
        if self.log_path.exists() and self.log_path.stat().st_size:
            return log_excerpt(self.log_path, lines)
        return self.stdout_tail(lines)


def reap_containers(client, *, keep_session: str | None = None) -> list[str]:
    """Remove containers (then networks) of ours whose driver is gone.

    Returns the names removed. Containers of live drivers are never touched.
    """
    removed = []
    for c in client.containers.list(all=True, filters={"label": LABEL_SESSION}):
        labels = c.labels
        if labels.get(LABEL_SESSION) == keep_session or owner_alive(labels.get(LABEL_OWNER, "")):
            continue
        try:
            c.remove(force=True, v=True)
            removed.append(c.name)
        except NotFound:
            pass
    return removed + _reap_networks(client, keep_session=keep_session)


def _reap_networks(client, *, keep_session: str | None = None) -> list[str]:
    """Remove networks of ours whose driver is gone (after their containers: a network in use stays)."""
    removed = []
    for n in client.networks.list(filters={"label": LABEL_SESSION}):
        labels = n.attrs.get("Labels") or {}
        if labels.get(LABEL_SESSION) == keep_session or owner_alive(labels.get(LABEL_OWNER, "")):
            continue
        try:
            n.remove()
            removed.append(n.name)
        except (NotFound, APIError):
            pass
    return removed


def remove_session_networks(client, session: str) -> list[str]:
    """Remove the networks of ``session`` (call after its containers are gone)."""
    removed = []
    for n in client.networks.list(filters={"label": f"{LABEL_SESSION}={session}"}):
        try:
            n.remove()
            removed.append(n.name)
        except (NotFound, APIError):
            pass  # still in use (a container that would not go): the next start's reaping retries
    return removed


def remove_session_containers(client, session: str) -> list[str]:
    """Remove every container of ``session`` (force: running or not), with its anonymous volumes."""
    removed = []
    for c in client.containers.list(all=True, filters={"label": f"{LABEL_SESSION}={session}"}):
        try:
            c.remove(force=True, v=True)
            removed.append(c.name)
        except NotFound:
            pass
    return removed
