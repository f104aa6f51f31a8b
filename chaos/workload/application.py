"""Members that are the application (issue 14): ``app:`` (white box) and ``command:`` (black box).

kafka-chaos's own members run its loop (:mod:`chaos.workload.consumer`). An application member runs the
team's code instead, configured by the environment (:data:`chaos.model.workload.MEMBER_ENV`):

* ``app: "package.module:function"`` — the member process is a kafka-chaos worker that installs the
  import hook of :mod:`chaos.instrument` (so the application's ``confluent_kafka.Consumer`` is the
  instrumented one), then calls the function. SIGTERM (the run's teardown) raises ``SystemExit`` in the
  application's main thread, so its ``finally`` / ``with`` blocks close the consumer, which records
  ``member_stop``. An exception that escapes the function is recorded as a fatal ``error`` event with its
  text, its traceback in ``workers/<member>.traceback.txt``, and an unclean ``member_stop``.
* ``command: [...]`` — the member process *is* the program (its own session, so pause and kill reach every
  process it starts). kafka-chaos knows only what the coordinator says about it (the observer's samples,
  committed offsets, coordinator log lines) and, if it writes them, the lines of the kafka-chaos
  ``ConsumerInterceptor`` (:mod:`chaos.workload.interceptor`) to ``$KAFKA_CHAOS_EVENTS``, translated into
  the member's events when the run ends. The runner records its stop: how it ended and when.

Bad input — a command that is not found, an application member that exits or never joins the group during
the warm-up, an ``app`` that cannot be imported — is a :class:`chaos.errors.UsageError` naming the member,
what happened and the tail of its output (the CLI exits 2; the run's processes are stopped by its teardown).
"""

from __future__ import annotations

import importlib
import os
import shutil
import signal
import sys
from pathlib import Path
from types import FrameType

from chaos.errors import UsageError
from chaos.history.event import Kind
from chaos.history.writer import EventWriter
from chaos.instrument.interruption import interrupt
from chaos.model.workload import ConsumerSpec
from chaos.process import ManagedProcess
from chaos.workload.spec import WorkerConfig

#: exit code of an app member whose function could not be imported (the warm-up reports the output's tail)
APP_NOT_IMPORTABLE = 3


def interceptor_lines_path(run_dir: str | Path, name: str) -> Path:
    """Where a command member's ConsumerInterceptor lines go (``$KAFKA_CHAOS_EVENTS``)."""
    return Path(run_dir) / "workers" / f"{name}.interceptor.jsonl"


def member_env(spec: ConsumerSpec, *, name: str, bootstrap: str, group: str, topic: str, run_dir: str | Path,
               interceptor_jar: Path | None = None) -> dict[str, str]:
    """The environment of application member ``name``: the driver's, then :data:`MEMBER_ENV`, then ``spec.env``."""
    env = dict(os.environ)
    env.update({
        "KAFKA_BOOTSTRAP_SERVERS": bootstrap, "KAFKA_GROUP_ID": group, "KAFKA_TOPIC": topic, "KAFKA_CLIENT_ID": name,
        "KAFKA_SESSION_TIMEOUT_MS": str(spec.session_timeout_ms),
        "KAFKA_HEARTBEAT_INTERVAL_MS": str(spec.heartbeat_interval_ms),
        "KAFKA_MAX_POLL_INTERVAL_MS": str(spec.max_poll_interval_ms),
        "KAFKA_GROUP_PROTOCOL": spec.group_protocol.value,
        "KAFKA_PARTITION_ASSIGNMENT_STRATEGY": spec.assignor.value,
    })
    if spec.instance_id is not None:
        env["KAFKA_GROUP_INSTANCE_ID"] = spec.instance_id
    if spec.app is not None:
        # chaos.instrument.destination: this member's events file, its source name, the group under test
        env.update({"KAFKA_CHAOS_EVENTS": str(Path(run_dir) / "events" / f"{name}.jsonl"),
                    "KAFKA_CHAOS_MEMBER": name, "KAFKA_CHAOS_GROUP": group})
    else:
        env["KAFKA_CHAOS_EVENTS"] = str(interceptor_lines_path(run_dir, name))
        if interceptor_jar is not None:
            env["KAFKA_CHAOS_INTERCEPTOR_JAR"] = str(interceptor_jar)
    env.update(spec.env)
    return env


def unstartable(name: str, spec: ConsumerSpec) -> str | None:
    """Why command member ``name``'s program cannot be started, found as its spawn would find it (a name on the
    member's PATH, a path with a slash from its cwd), or None. Asked before any cluster starts, so the refusal
    costs nothing; the spawn still says so itself (a program removed in between)."""
    if spec.command is None:
        return None
    cwd = Path(spec.cwd) if spec.cwd is not None else Path.cwd()
    if not cwd.is_dir():
        return f"member {name}: cwd {spec.cwd} does not exist; fix its cwd"
    program = spec.command[0]
    if "/" in program:
        path = cwd / program
        found = str(path) if path.is_file() else None
    else:
        found = shutil.which(program, mode=os.F_OK, path=spec.env.get("PATH", os.environ.get("PATH", os.defpath)))
    if found is None:
        return f"member {name}: command {program!r} was not found; fix its command / cwd (PATH is searched for the program)"
    if not os.access(found, os.X_OK):
        return f"member {name}: command {program!r} is not executable; fix its command"
    return None


def refuse_exit(name: str, spec: ConsumerSpec, proc: ManagedProcess, when: str) -> UsageError:
    """The one-line error for an application member that ended ``when`` (e.g. "during the warm-up")."""
    code = proc.popen.poll()
    how = f"was killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"exited with code {code}"
    if spec.app is not None and code == APP_NOT_IMPORTABLE:
        how = "could not import its app"
    what = f"app {spec.app}" if spec.app is not None else f"command {spec.command[0] if spec.command else '?'}"
    return UsageError(f"member {name} ({what}) {how} {when}; its output ends: {_tail(proc)}")


def refuse_never_joined(name: str, spec: ConsumerSpec, proc: ManagedProcess, timeout: float) -> UsageError:
    what = f"app {spec.app}" if spec.app is not None else f"command {spec.command[0] if spec.command else '?'}"
    hint = ("it must consume $KAFKA_TOPIC in group $KAFKA_GROUP_ID from $KAFKA_BOOTSTRAP_SERVERS, with client.id "
            "$KAFKA_CLIENT_ID")
    return UsageError(f"member {name} ({what}) did not join the group within the {timeout:.0f} s warm-up ({hint}); "
                      f"its output ends: {_tail(proc)}")


def _tail(proc: ManagedProcess) -> str:
    return " | ".join(line.strip() for line in proc.log_tail(3).splitlines() if line.strip()) or "(nothing)"


def translate_interceptor_lines(run_dir: str | Path, name: str) -> None:
    """Turn a command member's interceptor lines (if it wrote any) into its events (source ``name``)."""
    from chaos.workload.interceptor import translate_file

    lines = interceptor_lines_path(run_dir, name)
    if not lines.is_file() or not lines.stat().st_size:
        return
    writer = EventWriter(Path(run_dir) / "events" / f"{name}.interceptor.jsonl", name)
    try:
        translator = translate_file(lines, writer)
    finally:
        writer.close()
    if translator.notes:
        (Path(run_dir) / "workers" / f"{name}.interceptor-notes.txt").write_text("\n".join(translator.notes) + "\n")


# ---------------------------------------------------------------------------------------- in the member process

def _stop_on_sigterm(signum: int, frame: FrameType | None) -> None:
    # between client calls, never inside one: a SystemExit raised in a rebalance callback would leave a
    # revocation the library carried out unrecorded (chaos.instrument.interruption)
    interrupt(SystemExit(0), frame)


def run_app(cfg: WorkerConfig) -> int:
    """Entry of an ``app`` member's process: instrument, import the function, call it (module docstring)."""
    from chaos.instrument import hook
    from chaos.workload.consumer import write_traceback

    spec = cfg.consumer
    assert spec is not None and spec.app is not None  # the worker dispatches here only for app members
    hook.install()
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    module_name, func_name = spec.app.split(":")
    if spec.cwd is not None and spec.cwd not in sys.path:
        sys.path.insert(0, spec.cwd)
    try:
        func = getattr(importlib.import_module(module_name), func_name)
    except (ImportError, AttributeError) as exc:
        print(f"app {spec.app}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return APP_NOT_IMPORTABLE
    try:
        result = func()
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 0
    except BaseException as exc:  # noqa: BLE001 - the application's failure is evidence, recorded then ended
        writer = EventWriter(Path(cfg.run_dir) / "events" / f"{cfg.name}.app.jsonl", cfg.name)
        writer.emit(Kind.ERROR, message=f"app {spec.app} raised {type(exc).__name__}: {exc}", error_code=None,
                    error_name=type(exc).__name__, fatal=True)
        writer.emit(Kind.MEMBER_STOP, group=cfg.group, clean=False, signal=None)
        writer.close()
        write_traceback(cfg.run_dir, cfg.name, f"app {spec.app} raised", exc)
        return 1
    return result if isinstance(result, int) else 0
