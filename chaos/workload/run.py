"""A workload run: N members and M producers against a cluster, recorded into one run directory.

The run's phases are driven by :class:`chaos.lifecycle.Run` (each a ``phase``
event from source ``runner``); this class owns the processes and the records::

    setup      topic created, header written, observer started, members then producers started
    warmup     :meth:`WorkloadRun.wait_assigned`: until every member has been assigned (bounded)
    quiesce    :meth:`WorkloadRun.quiesce`: producers stopped; members catch up until the group's
               committed offsets reach every partition's high watermark (bounded)
    final_read :meth:`WorkloadRun.final_read`: a fresh reader reads every partition from the start
    teardown   :meth:`WorkloadRun.close`: members stopped (SIGTERM), observer stopped, events
               merged into history.jsonl

The run directory holds ``header.json``, ``events/<source>.jsonl`` (one file
per process), the merged ``history.jsonl``, ``workers/`` (each worker's
config and stdout), ``logs/`` (each node's log) and ``resolved.json``.
"""

from __future__ import annotations

import json
import shutil
import signal
import sys
import threading
import time
import uuid
from functools import partial
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

import chaos
from chaos.cluster.admin import ClusterAdmin, retry
from chaos.errors import InfrastructureError, UsageError
from chaos.history.event import SCHEMA_VERSION, GroupState, Kind, MemberClient, RunPhase
from chaos.history.merge import merge_run
from chaos.history.writer import EventWriter
from chaos.model.share import ShareMemberSpec
from chaos.model.workload import Client, ConsumerSpec, GroupProtocol, ProducerSpec, WorkloadSpec
from chaos.process import ManagedProcess, Session
from chaos.workload import application, libraries, processed_reports
from chaos.workload.consumer import InflightCommits, inflight_path, subscription_path
from chaos.workload.observer import GroupObserver
from chaos.workload.offsets_log import read_stored
from chaos.workload.spec import WorkerConfig


class WorkloadRun:
    """One recorded run against a started cluster; use as a context manager."""

    def __init__(self, cluster, spec: WorkloadSpec, run_dir: Path, *, seed: int | None = None,
                 run_id: str | None = None, experiment: dict | None = None, handler: str | None = None):
        self.cluster = cluster
        self.spec = spec
        self.run_dir = Path(run_dir)
        self.seed = seed
        self.run_id = run_id or uuid.uuid4().hex[:10]
        self.topic = f"chaos-{self.run_id}"
        self.group = f"group-{self.run_id}"
        self.experiment = experiment or {}
        #: "module:function" every member calls per record (the user's own processing logic)
        self.handler = handler
        if handler is not None and any(c.application for c in spec.consumers):
            raise UsageError("a handler runs inside kafka-chaos's own consumer loop: app and command members run the "
                             "application's loop instead; drop the handler or those members")
        self.session: Session | None = None
        self.members: dict[str, ManagedProcess] = {}
        self._extra_created = False
        self.producers: dict[str, ManagedProcess] = {}
        members: tuple[ConsumerSpec | ShareMemberSpec, ...] = spec.share.members if spec.share else spec.consumers
        self.member_specs: dict[str, ConsumerSpec | ShareMemberSpec] = {f"consumer-{i}": c for i, c in enumerate(members)}
        self.producer_specs: dict[str, ProducerSpec] = {f"producer-{i}": p for i, p in enumerate(spec.producers)}
        self.runner_events: EventWriter | None = None
        self._started_wall = time.time()  # start() sets it again: the run's own start
        self.observer: GroupObserver | None = None
        self.admin: ClusterAdmin | None = None
        self._merged: Path | None = None
        #: pids of members whose member_stop the runner wrote; spawn time of every process
        self._stops_recorded: set[int] = set()
        #: the runner writes a member's events on its behalf from the nemesis's fault threads: two faults on one
        #: member (kill all_members while restart all_members) must not write one file at once (each writer
        #: resumes the file's local seq: both would take the same one), nor record one death twice
        self._on_behalf = threading.Lock()
        self._started_ns: dict[int, int] = {}
        #: every start of each member process (CLOCK_MONOTONIC ns, ascending): where a report's interval begins
        self._member_starts: dict[str, list[int]] = {}
        self.reporting = [n for n, c in self.member_specs.items() if c.reports_processed]

    # ------------------------------------------------------------ context
    def __enter__(self) -> WorkloadRun:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def phase(self, name: RunPhase) -> None:
        assert self.runner_events is not None
        self.runner_events.emit(Kind.PHASE, name=name.value)

    # ------------------------------------------------------------ setup
    def start(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "events").mkdir(exist_ok=True)
        self.session = Session("workload")
        self.runner_events = EventWriter.for_run(self.run_dir, "runner")
        self._started_wall = time.time()
        self.phase(RunPhase.SETUP)
        self._write_header()
        self.admin = ClusterAdmin(self.cluster.bootstrap("ctl"))
        # returns once the metadata lists every partition with a leader (bounded)
        self._create_topic(self.topic, self.spec.partitions)
        if self.reporting:
            # one partition: the reports of all members in one order, read to one high watermark at the end
            self._create_topic(processed_reports.output_topic(self.topic), 1)
        if self.spec.kip848_group_configs:
            # before the first heartbeat: a KIP-848 member's session is the group's (docs/architecture.md)
            self.admin.set_group_config(self.group, self.spec.kip848_group_configs)
        if self.spec.share is not None:
            # before the first member joins: its lock duration, limit and start offset are the group's
            self.admin.set_group_config(self.group, self.spec.share.group_configs(self.cluster.spec.release))
        broker_logs = {b.broker_id: self.cluster.log_path(b.node) for b in self.cluster.topology.brokers}
        # the observer's own admin client with a short timeout: a dead coordinator must not stall sampling
        self.observer = GroupObserver(ClusterAdmin(self.cluster.bootstrap("ctl"), timeout=1.5), self.group, self.topic,
                                      self.run_dir, broker_logs,
                                      interval=self.spec.observer_interval_ms / 1000,
                                      kip848=any(c.group_protocol is GroupProtocol.CONSUMER for c in self.spec.consumers),
                                      broker_address=self.broker_address, share=self.spec.share is not None,
                                      partitions=self.spec.partitions).start()
        for name in self.member_specs:
            self.start_member(name)
        for name in list(self.producer_specs):
            self.start_producer(name)

    def _create_topic(self, topic: str, partitions: int) -> None:
        """Create one of the run's own topics, noted on the cluster first (a pool deletes it before the next run)."""
        assert self.admin is not None  # set when the run started
        self.cluster.note_run_topic(topic)
        self.admin.create_topic(topic, partitions, min(self.spec.replication, self.cluster.spec.brokers))

    def _write_header(self) -> None:
        header = {
            "schema_version": SCHEMA_VERSION, "run_id": self.run_id, "seed": self.seed,
            "experiment": {**self.experiment, "workload": json.loads(self.spec.model_dump_json()),
                           "topic": self.topic, "group": self.group},
            "versions": {"kafka": self.cluster.spec.kafka_version, "kafka-chaos": chaos.__version__,
                         "kafka-chaos-commit": chaos.source_commit(),
                         **libraries.reported_by_imports(Client.CONFLUENT_KAFKA.value),
                         **libraries.reported_by_imports(Client.KAFKA_PYTHON.value),
                         "python": sys.version.split()[0]},
            # per member: the release it starts on (null: the default) and what that library reports of itself
            "member_clients": {name: self._member_versions(spec) for name, spec in self.member_specs.items()},
            "configs": {"cluster": self.cluster.status(),
                        # a share group's own configs, set before its members join (chaos.model.share)
                        **({"group": self.spec.share.group_configs(self.cluster.spec.release)} if self.spec.share is not None
                           else {})},
        }
        (self.run_dir / "header.json").write_text(json.dumps(header, indent=1, default=str))
        (self.run_dir / "resolved.json").write_text(json.dumps(header["experiment"], indent=2, default=str))

    def _member_versions(self, spec: ConsumerSpec | ShareMemberSpec) -> dict[str, Any]:
        """The header's record of one member's client library (issue 34): ``client``, ``client_version`` as asked
        (None: the default), ``library``: what that library reports of itself (:mod:`chaos.workload.libraries`).
        A member upgraded by a fault records each later release in its own ``member_start`` events."""
        if spec.command is not None:
            return {"client": MemberClient.COMMAND.value, "client_version": None, "library": {}}
        return {"client": spec.client.value, "client_version": spec.client_version,
                "library": libraries.reported_for(spec, self.cluster.spec.kafka_version)}

    def _spawn(self, name: str, cfg: WorkerConfig, into: dict[str, ManagedProcess]) -> ManagedProcess:
        assert self.session is not None
        wdir = self.run_dir / "workers"
        wdir.mkdir(exist_ok=True)
        cfg_path = wdir / f"{name}.json"
        cfg_path.write_text(cfg.model_dump_json(indent=1))
        spec = cfg.consumer
        member = cfg.consumer or cfg.share_member
        argv: list[str] = [sys.executable, "-m", "chaos.workload.worker", str(cfg_path)]
        env = cwd = None
        if spec is not None and spec.application:
            jar = None
            if spec.command is not None:
                from chaos.workload.interceptor import ensure_interceptor

                try:
                    jar = ensure_interceptor()  # built by make setup; found in the cache at once
                except UsageError:
                    jar = None  # an installed package without java/, or no Maven: the member is told no jar
                argv = list(spec.command)
            env = application.member_env(spec, name=name, bootstrap=cfg.bootstrap, group=self.group, topic=self.topic,
                                         run_dir=self.run_dir, interceptor_jar=jar)
            if spec.reports_processed:
                env[processed_reports.OUTPUT_TOPIC_ENV] = processed_reports.output_topic(self.topic)
            cwd = Path(spec.cwd) if spec.cwd is not None else None
        lib = libraries.member_library(member) if member is not None and member.client is not Client.JAVA else None
        if lib is not None:  # the release asked for shadows the project's own (the Java worker finds its jars)
            env = libraries.python_env(lib, env)
        try:
            proc = self.session.spawn(name, argv, wdir / f"{name}.out", cwd=cwd, env=env)
        except FileNotFoundError as exc:
            what = f"command {argv[0]!r} was not found" if exc.filename == argv[0] else f"cwd {exc.filename} does not exist"
            raise UsageError(f"member {name}: {what}; fix its command / cwd (PATH is searched for the program)") from None
        except PermissionError:
            raise UsageError(f"member {name}: command {argv[0]!r} is not executable; fix its command") from None
        into[name] = proc
        self._started_ns[proc.pid] = time.monotonic_ns()
        if member is not None:
            self._member_starts.setdefault(name, []).append(self._started_ns[proc.pid])
        if spec is not None and spec.command is not None:
            self._record_declared_start(name, spec)
        return proc

    def _record_declared_start(self, name: str, spec: ConsumerSpec) -> None:
        """Write a ``command:`` member's ``member_start`` on its behalf (it records nothing of its own).

        Client ``command``, version ``declared``: the configuration is what kafka-chaos gave the program in its
        environment (``KAFKA_SESSION_TIMEOUT_MS`` ...), not what it reported — it tells the checkers when the
        member ran, in which group, under which declared timeouts (docs/architecture.md, "Members that are the
        application"). Its commit mode is not known: the spec's default is written and nothing reads it for
        such a member.
        """
        with self._on_behalf:
            self._write_declared_start(name, spec)

    def _write_declared_start(self, name: str, spec: ConsumerSpec) -> None:
        writer = EventWriter(self.run_dir / "events" / f"{name}.runner.jsonl", name)
        writer.emit(Kind.MEMBER_START, group=self.group, client=MemberClient.COMMAND.value, client_version="declared",
                    instance_id=spec.instance_id, assignor=spec.assignor.value, protocol=spec.protocol.value,
                    commit_mode=spec.commit_mode.value, session_timeout_ms=spec.session_timeout_ms,
                    max_poll_interval_ms=spec.max_poll_interval_ms, auto_commit_interval_ms=None, wrong_mode=None)
        writer.close()

    def start_producer(self, name: str, spec: ProducerSpec | None = None) -> ManagedProcess:
        """Start (or add, with ``spec``) a producer worker."""
        if spec is not None:
            self.producer_specs[name] = spec
        spec = self.producer_specs[name]
        return self._spawn(name, WorkerConfig(role="producer", name=name, run_id=self.run_id, run_dir=str(self.run_dir),
                                              bootstrap=self.cluster.bootstrap(spec.lane), topic=self.topic,
                                              group=self.group, producer=spec), self.producers)

    def broker_address(self, broker_id: int) -> str:
        """Where the run's own requests reach broker ``broker_id``: its control-lane proxy (never cut by a lane fault)."""
        topo = self.cluster.topology
        return topo.listen(topo.link(f"ctl.broker-{broker_id}"))

    # ------------------------------------------------------------ members
    def start_member(self, name: str) -> ManagedProcess:
        spec = self.member_specs[name]
        member: dict[str, Any] = {"consumer": spec, "handler": self.handler}
        if isinstance(spec, ShareMemberSpec) and self.spec.share is not None:
            member = {"share_member": spec, "share_lock_ms": self.spec.share.record_lock_duration_ms}
        cfg = WorkerConfig(role="consumer", name=name, run_id=self.run_id, run_dir=str(self.run_dir),
                           bootstrap=self.cluster.bootstrap(spec.lane), topic=self.topic, group=self.group,
                           kafka_version=self.cluster.spec.kafka_version, **member)
        return self._spawn(name, cfg, self.members)

    def kill_member(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Signal a member; for SIGKILL record its ``member_stop`` on its behalf (it cannot)."""
        proc = self.members[name]
        if sig == signal.SIGKILL:
            proc.kill()
            self._record_stop(name, "SIGKILL")
        elif sig == signal.SIGTERM:
            proc.terminate(grace=30)
        else:
            proc.signal(sig)

    @property
    def extra_topic(self) -> str:
        """The second topic a change-subscription fault may add (created on first use, never produced to)."""
        return f"{self.topic}-extra"

    def create_extra_topic(self) -> None:
        """Create :attr:`extra_topic` (idempotent); the nemesis does it before the chaos phase."""
        if not self._extra_created:
            self._create_topic(self.extra_topic, self.spec.partitions)
            self._extra_created = True

    def change_subscription(self, name: str, topics: list[str]) -> None:
        """Ask member ``name`` to subscribe to ``topics`` instead (written to its side file, then SIGUSR1)."""
        if self.extra_topic in topics:
            self.create_extra_topic()
        path = subscription_path(self.run_dir, name)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(sorted(topics)))
        tmp.replace(path)  # the member never reads a half-written file
        self.members[name].signal(signal.SIGUSR1)

    def _record_stop(self, name: str, sig: str | None, clean: bool = False, since_ns: int | None = None) -> None:
        """Write, for a member that died without a word, its in-flight commits (unknown) and its stop
        (``since_ns``: it stopped at some moment after that, not now) — once per process, whichever fault's
        thread saw it first."""
        with self._on_behalf:
            pid = self.members[name].pid
            if pid in self._stops_recorded:
                return
            self._stops_recorded.add(pid)
            self._write_stop(name, sig, clean, since_ns)

    def _write_stop(self, name: str, sig: str | None, clean: bool, since_ns: int | None) -> None:
        writer = EventWriter(self.run_dir / "events" / f"{name}.runner.jsonl", name)
        path = inflight_path(self.run_dir, name)
        for entry in InflightCommits.read(path):
            if entry.get("kind") == Kind.SHARE_ACKNOWLEDGED.value:  # a share member's acknowledgements (share_member)
                for topic, partition, offsets, ack_type in entry["partitions"]:
                    writer.emit(Kind.SHARE_ACKNOWLEDGED, mono_ns=entry["sent_ns"], group=entry["group"], topic=topic,
                                partition=partition, offsets=offsets, ack_type=ack_type, member_id=None,
                                outcome="unknown", error_code=None, error_name=f"_KILLED_{sig}")
                continue
            writer.emit(Kind.COMMIT, group=entry["group"], offsets=entry["offsets"], generation=entry["generation"],
                        member_id=entry["member_id"], outcome="unknown", error_code=None,
                        error_name=f"_KILLED_{sig}", auto=False)
        path.unlink(missing_ok=True)
        if since_ns is None:
            writer.emit(Kind.MEMBER_STOP, group=self.group, clean=clean, signal=sig)
        else:
            now = time.monotonic_ns()
            writer.emit(Kind.MEMBER_STOP, group=self.group, clean=clean, signal=sig, mono_ns=since_ns,
                        ts=time.time() - (now - since_ns) / 1e9, ts_uncertain_ns=now - since_ns)
        writer.close()

    def wait_assigned(self, timeout: float = 30.0) -> None:
        """Warm-up: until every running member has been assigned at least once (at most ``timeout`` s)."""
        deadline = time.monotonic() + timeout
        waiting: set[str] = set()

        def all_assigned():
            self._refuse_ended_applications("during the warm-up")
            # a member that exited (e.g. fenced as a duplicate group.instance.id) is not waited for
            want = {n for n, p in self.members.items() if p.alive()}
            got = {n for n in want if not self.member_specs[n].command and self.spec.share is None
                   and b'"kind":"assigned"' in _read(self.run_dir / "events" / f"{n}.jsonl")}
            got |= self._joined_black_boxes(want) | self._joined_share_members(want)
            waiting.clear()
            waiting.update(want - got)
            return True if got == want else None

        try:
            retry(all_assigned, deadline, "every running member to be assigned", interval=0.1)
        except InfrastructureError:  # the timeout: an application member still waited for never joined
            for name in sorted(waiting):
                proc, spec = self.members[name], self.member_specs[name]
                if isinstance(spec, ConsumerSpec) and spec.application and proc.alive():
                    raise application.refuse_never_joined(name, spec, proc, timeout) from None
            raise

    def _refuse_ended_applications(self, when: str) -> None:
        for name, proc in self.members.items():
            spec = self.member_specs[name]
            if isinstance(spec, ConsumerSpec) and spec.application and not proc.alive():
                raise application.refuse_exit(name, spec, proc, when)

    def consumer_spec(self, name: str) -> ConsumerSpec:
        """Member ``name``'s spec, for what only consumer-group members have (membership faults, which a share
        workload refuses at load: chaos.model.experiment.SHARE_FAULT_FAMILIES)."""
        spec = self.member_specs[name]
        if not isinstance(spec, ConsumerSpec):
            raise UsageError(f"{name} is a share-group member: this fault applies to consumer-group members only")
        return spec

    def _joined_share_members(self, running: set[str]) -> set[str]:
        """Share members the coordinator lists (by client.id, the member's name): a share member records no
        assignment of its own (chaos.workload.share_member)."""
        sample = self.observer.latest if self.observer is not None else None
        if self.spec.share is None or sample is None:
            return set()
        return {m.client_id for m in sample.members} & running

    def _joined_black_boxes(self, running: set[str]) -> set[str]:
        """Command members the coordinator lists: by client.id ($KAFKA_CLIENT_ID) when they use it, else by
        count (the group has as many members as running member processes)."""
        boxes = {n for n in running if self.member_specs[n].command}
        sample = self.observer.latest if self.observer is not None else None
        if not boxes or sample is None:
            return set()
        by_id = {m.client_id for m in sample.members} & boxes
        if by_id == boxes or len(sample.members) >= len(running):
            return boxes
        return by_id

    # ------------------------------------------------------------ phases
    def wait_observed(self, since_ns: int, timeout: float = 30.0) -> bool:
        """Wait (bounded) until the observer has recorded the group after ``since_ns``: convergence
        after a heal can only be judged on samples taken after it."""
        deadline = time.monotonic() + timeout
        while self.observer is not None and self.observer.last_sample_ns <= since_ns:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    def quiesce(self, timeout: float = 60.0) -> bool:
        """Stop producers, then wait (at most ``timeout`` s) until committed offsets reach every high watermark.

        Once they do, the wait goes on (within the same bound) until the observer has sampled the group Stable
        with as many members as member processes are alive, after the commits were seen: members can commit
        everything while their group is still rebalancing after a long outage, and a run that stopped them then
        would leave ``convergence`` without evidence (unknown). The result is still whether everything was
        committed; a group that never settles is what the history then shows.

        The wait also ends (False) once no member process is alive: nothing is left that could commit, so the
        rest of the bound would be waited out for nothing (members that died of their handler, say). Killed
        members were restarted by the heal before this phase; none is started during it."""
        self.phase(RunPhase.QUIESCE)
        deadline = time.monotonic() + timeout
        # producers with a record count finish on their own (bounded); the others are stopped now
        for name, proc in self.producers.items():
            if self.producer_specs[name].count is not None:
                while proc.alive() and time.monotonic() < deadline:
                    time.sleep(0.1)
            proc.terminate(grace=40)
        since_ns = time.monotonic_ns()  # a share group's lag is read from samples asked after the last record
        while time.monotonic() < deadline:
            if self.members and not any(proc.alive() for proc in self.members.values()):
                return False
            try:
                high = self._high_watermarks()
                assert self.admin is not None  # set when the run started
                done = self._done_offsets(high, since_ns)
                if all(done.get((self.topic, p), -1) >= h for p, h in high.items() if h > 0):
                    self._wait_settled(deadline)
                    return True
            except Exception:  # noqa: BLE001 - the cluster may still be healing
                pass
            time.sleep(0.25)
        return False

    def _done_offsets(self, high: dict[int, int], since_ns: int) -> dict[tuple[str, int], int]:
        """Per partition, the offset below which the group is done with every record: its committed offset; for a
        share group, the high watermark ``high`` when the observer's newest offsets, asked after ``since_ns``, give
        the partition a lag of 0 (KIP-1226: no record left that is not acknowledged or archived), else its
        share-partition start offset (which can stay below the high watermark at rest:
        :class:`chaos.cluster.wire.ShareOffsets`)."""
        if self.spec.share is None:
            assert self.admin is not None  # set when the run started
            return self.admin.committed_offsets(self.group)
        got = self.observer.share_offsets if self.observer is not None else None
        if got is None or self.observer is None or self.observer.share_offsets_ns <= since_ns:
            return {}
        return {(t, p): high.get(p, spso) if got.lag.get((t, p)) == 0 else spso
                for (t, p), spso in got.start_offsets.items() if t == self.topic}

    def _wait_settled(self, deadline: float) -> bool:
        """Wait until ``deadline`` for a group sample taken from now on that is Stable and lists as many
        members as member processes are alive (``quiesce``)."""
        since = time.monotonic_ns()
        while self.observer is not None and time.monotonic() < deadline:
            sample = self.observer.latest
            alive = sum(proc.alive() for proc in self.members.values())
            if (self.observer.last_sample_ns > since and sample is not None
                    and sample.state is GroupState.STABLE and len(sample.members) == alive):
                return True
            time.sleep(0.1)
        return False

    def _high_watermarks(self, timeout: float = 30.0) -> dict[int, int]:
        """Each partition's high watermark, asked of its leader (ListOffsets).

        Asked again (bounded) while the answer is an error: right after a fault's heal a restarted broker takes its
        preferred leaderships back, and a query sent on the metadata from before is answered
        NOT_LEADER_FOR_PARTITION (librdkafka's ``get_watermark_offsets`` does not retry it; a fresh-clone run's
        README example failed on it).
        """
        c = Consumer({"bootstrap.servers": self.cluster.bootstrap("ctl"), "group.id": f"wm-{self.run_id}",
                      "enable.auto.commit": False, "log_level": 0})
        deadline = time.monotonic() + timeout

        def high(p: int) -> int:
            return int(c.get_watermark_offsets(TopicPartition(self.topic, p), timeout=5)[1])

        try:
            return {p: retry(partial(high, p), deadline, f"the high watermark of {self.topic}-{p}")
                    for p in self._partition_ids()}
        finally:
            c.close()

    def _partition_ids(self) -> list[int]:
        """The topic's partitions as the cluster's metadata lists them now: the workload's, and those a fault
        added (``add_partitions``; found by exploring 4.4.0: the final read left out an added partition, and its
        acknowledged records read as lost)."""
        assert self.admin is not None  # set when the run started
        return sorted(set(range(self.spec.partitions)) | {int(m["partition"]) for m in self.admin.partitions(self.topic)})

    def final_read(self, timeout: float = 60.0) -> int:
        """A fresh reader (no group) reads every partition from offset 0 to its high watermark."""
        self.phase(RunPhase.FINAL_READ)
        high = self._high_watermarks()
        c = Consumer({"bootstrap.servers": self.cluster.bootstrap("ctl"), "group.id": f"final-{self.run_id}",
                      "enable.auto.commit": False, "auto.offset.reset": "earliest", "log_level": 0})
        c.assign([TopicPartition(self.topic, p, 0) for p in high])
        seen: dict[int, list[int]] = {p: [] for p in high}
        need = {p for p, h in high.items() if h > 0}
        deadline = time.monotonic() + timeout
        try:
            while need and time.monotonic() < deadline:
                for msg in c.consume(1000, 0.5):
                    part, offset = msg.partition(), msg.offset()
                    if msg.error() is None and part is not None and offset is not None:
                        seen[part].append(offset)
                        if offset + 1 >= high[part]:
                            need.discard(part)
        finally:
            c.close()
        writer = EventWriter.for_run(self.run_dir, "final-reader")
        total = 0
        for p, offsets in seen.items():
            if offsets:
                writer.emit(Kind.FINAL_READ, group=None, topic=self.topic, records=[[p, o] for o in offsets])
                total += len(offsets)
        if self.spec.share is None:
            self._read_stored_offsets(writer, timeout)
        writer.close()
        return total

    def _read_stored_offsets(self, writer: EventWriter, timeout: float) -> None:
        """Record the group's offset commits as ``__consumer_offsets`` stores them (``stored_offsets``): the
        committed-offsets checker's evidence of what the store held when an OffsetFetch answer lagged it. Not
        recorded when the read fails (said as an error event): a partial read would pass for a whole one."""
        since_ms = int(self._started_wall * 1000) - 1000  # the brokers' clock is this machine's: a second's margin
        try:
            part, stored = read_stored(self.cluster.bootstrap("ctl"), self.group, since_ms, timeout=timeout)
        except Exception as exc:  # noqa: BLE001 - evidence missing, not a failed run: the checker goes without it
            writer.emit(Kind.ERROR, message=f"__consumer_offsets not read: {exc}"[:1000], error_code=None,
                        error_name=type(exc).__name__, fatal=False)
            return
        writer.emit(Kind.STORED_OFFSETS, group=self.group, log_partition=part, stored=stored)

    def close(self) -> Path | None:
        """Stop every worker (members cleanly), the observer; merge the history; copy node logs."""
        if self._merged is not None or self.session is None:
            return self._merged
        assert self.runner_events is not None
        if not self.runner_events.closed:  # a close that failed past this point is not marked twice
            self.phase(RunPhase.TEARDOWN)
        for name, proc in self.members.items():
            black_box = self.member_specs[name].command is not None
            if proc.alive():
                if self.cluster is not None:
                    proc.signal(signal.SIGCONT)
                code = proc.terminate(grace=20)
                if black_box:
                    # asked to stop: a JVM's shutdown hooks end it with 128 + SIGTERM, Python's default with -SIGTERM
                    self._record_stop(name, None if code == 0 else "SIGTERM",
                                      clean=code in (0, 128 + signal.SIGTERM, -signal.SIGTERM))
                elif code is not None and code < 0:
                    self._record_stop(name, signal.Signals(-code).name)
            elif black_box and proc.pid not in self._stops_recorded:
                # it ended on its own, at a moment nobody saw: somewhere between its start and now
                code = proc.popen.poll()
                self._record_stop(name, signal.Signals(-code).name if code is not None and code < 0 else None,
                                  clean=code == 0, since_ns=self._started_ns.get(proc.pid))
            if black_box:
                application.translate_interceptor_lines(self.run_dir, name)
        for proc in self.producers.values():
            proc.terminate(grace=10)
        if self.reporting and self.cluster is not None:
            self._read_processed_reports()
        self.session.close(remove_dir=True)
        if self.observer is not None:
            self.observer.stop()
        if self.admin is not None:
            self.admin.close()
        assert self.runner_events is not None
        self.runner_events.close()
        logs = self.run_dir / "logs"
        logs.mkdir(exist_ok=True)
        for node in self.cluster.topology.node_names:
            try:
                shutil.copy(self.cluster.log_path(node), logs / f"{node}.log")
            except FileNotFoundError:
                pass
        self._merged = merge_run(self.run_dir)
        return self._merged

    def _read_processed_reports(self) -> None:
        """The members' processed-record reports, read once every member has stopped (chaos.workload.processed_reports)."""
        topic = processed_reports.output_topic(self.topic)
        try:
            reports, complete = processed_reports.read(self.cluster.bootstrap("ctl"), topic, f"reports-{self.run_id}")
        except Exception:  # noqa: BLE001 - a broken cluster at teardown: the notes say the reports are missing, and
            reports, complete = [], False  # the teardown goes on (its processes must still be stopped)
        starts = {n: self._member_starts[n] for n in self.reporting if n in self._member_starts}
        processed_reports.record(self.run_dir, reports, members=starts, group=self.group, topic=self.topic,
                                 read_complete=complete)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""
