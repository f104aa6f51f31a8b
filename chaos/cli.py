"""The ``chaos`` command line.

click is the CLI framework (well kept, composable groups, shell completion).
Every way a command can be refused — a :class:`chaos.errors.UsageError`, a
click usage error (unknown option, missing argument, misspelt command), a file
the system will not open — ends as ONE line on stderr starting
``chaos: error:`` and exit code 2; never a traceback. Results go to stdout,
progress and errors to stderr, so ``chaos ... --json | jq`` always sees JSON.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from chaos.errors import InfrastructureError, UsageError
from chaos.model.backend import BackendName

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console

    from chaos.model.experiment import Experiment
    from chaos.model.workload import Client

EXIT_CODES = """\b
Exit codes:
  0  every run / verdict valid (or failed exactly as the experiment's expect_violation says)
  1  an invariant was violated (a checker said false)
  2  bad input or infrastructure failure: one line on stderr starting "chaos: error:"
  3  inconclusive: a checker said unknown (not a pass)
  130  interrupted (Ctrl-C); everything started was stopped"""

#: lines of a non-true run's explanation `chaos run` prints under its result line
EXPLAIN_LINES = 12

ENVIRONMENT = """\b
Environment:
  KAFKA_CHAOS_CACHE        Kafka jars and Toxiproxy (default ~/.cache/kafka-chaos)
  KAFKA_CHAOS_STATE        records of started processes and clusters (default /tmp/kafka-chaos)
  KAFKA_CHAOS_DOCKER_HOST  docker backend: use this engine (unix:///path.sock) instead of our own
  KAFKA_CHAOS_DOCKER_DIR   docker backend: our own engine's directory (default /tmp/kafka-chaos-docker)
  KAFKA_CHAOS_DEBIAN_MIRROR  docker backend: Debian mirror for building images
  KAFKA_CHAOS_INSTRUMENT   1: a Python process with chaos/instrument/site on PYTHONPATH records its
                           confluent_kafka.Consumer (chaos.instrument) ...
  KAFKA_CHAOS_EVENTS       ... into this events file,
  KAFKA_CHAOS_MEMBER       ... as this member (default: the file's name),
  KAFKA_CHAOS_GROUP        ... for consumers of this group only
  Given to app/command members (consumers: [{app: ...}] / [{command: [...]}]), besides KAFKA_BOOTSTRAP_SERVERS,
  KAFKA_GROUP_ID, KAFKA_TOPIC, KAFKA_CLIENT_ID and the spec's timeouts, protocol and assignor:
  KAFKA_CHAOS_EVENTS       app: the instrumented consumer's events file; command: where the kafka-chaos
                           ConsumerInterceptor writes its lines
  KAFKA_CHAOS_INTERCEPTOR_JAR  command: that interceptor's jar, for a JVM application's classpath
  KAFKA_CHAOS_OUTPUT_TOPIC  command with reports_processed: where to report each processed record
                           (key $KAFKA_CLIENT_ID, value {"partition": P, "offset": O})"""

COMPLETION = """\b
Shell completion (commands, options, experiment names):
  bash: eval "$(_CHAOS_COMPLETE=bash_source chaos)"   (add to ~/.bashrc)
  zsh:  eval "$(_CHAOS_COMPLETE=zsh_source chaos)"    (add to ~/.zshrc)
  fish: _CHAOS_COMPLETE=fish_source chaos | source"""

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def _fail(message: str) -> None:
    click.echo(f"chaos: error: {message}", err=True)
    sys.exit(2)


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


class _Group(click.Group):
    """A click group whose every refusal is one ``chaos: error:`` line and exit 2; suggests
    commands for misspelt ones ("did you mean")."""

    def invoke(self, ctx: click.Context):  # noqa: D401 - click hook
        from chaos.process import terminate_on_sigterm

        try:
            # SIGTERM (a CI runner's timeout, `kill`) unwinds like Ctrl-C: every `finally` stops what the
            # command started — a broker restarted by a fault thread has no PDEATHSIG (chaos.process)
            with terminate_on_sigterm():
                return super().invoke(ctx)
        except UsageError as exc:
            _fail(_one_line(exc))
        except KeyboardInterrupt:
            click.echo("chaos: interrupted; everything started was stopped", err=True)
            sys.exit(130)
        except OSError as exc:
            # the environment refused a file (permissions, a full disk, a directory where a file
            # was expected): say which file and why — a bug keeps its traceback, this is not one
            if exc.filename is None:
                raise
            _fail(f"{exc.filename}: {exc.strerror or exc}")

    def resolve_command(self, ctx: click.Context, args: list[str]):
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            close = difflib.get_close_matches(name, self.list_commands(ctx), n=2, cutoff=0.6)
            # the list of commands is added by main() as "(see `chaos -h`)"
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            raise click.UsageError(f"no such command {name!r}{hint}", ctx)
        return super().resolve_command(ctx, args)

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):  # noqa: ANN001
        try:
            rv = super().main(args, prog_name or "chaos", complete_var, standalone_mode=False, **extra)
        except click.ClickException as exc:
            ctx = getattr(exc, "ctx", None)
            where = f" (see `{ctx.command_path} -h`)" if ctx is not None else ""
            _fail(_one_line(exc.format_message()) + where)
        except click.Abort:
            click.echo("chaos: interrupted; everything started was stopped", err=True)
            sys.exit(130)
        if standalone_mode:
            sys.exit(rv if isinstance(rv, int) else 0)
        return rv


def _complete_experiments(ctx: click.Context, param: click.Parameter, incomplete: str) -> list:
    """Catalogue names (and .yaml files when a path is being typed) for shell completion."""
    from click.shell_completion import CompletionItem

    if "/" in incomplete or incomplete.startswith("."):
        return [CompletionItem(incomplete, type="file")]
    try:
        from chaos.experiment import experiment_names

        dirs = tuple(Path(d) for d in (ctx.params.get("directories") or ()))
        return [CompletionItem(n) for n in experiment_names(dirs) if n.startswith(incomplete)]
    except Exception:  # noqa: BLE001 - completion must never print a traceback into the shell
        return []


def _check_kafka_version(version: str | None) -> None:
    if version is not None:
        from chaos.model.cluster import validate_kafka_version

        try:
            validate_kafka_version(version)
        except UsageError as exc:
            raise UsageError(f"--kafka-version: {exc}") from None


#: the Kafka releases each metadata mode runs, for help texts (chaos.model.cluster.modes_of)
VERSIONS_HELP = "2.8.x-3.9.x run ZooKeeper, 3.7.x-4.x KRaft; 4.x is KRaft only"


def _parse_releases(items: tuple[str, ...], option: str) -> list[tuple[Client, str]]:
    """``CLIENT=X.Y.Z`` options -> [(client, release)]; a one-line UsageError naming the option otherwise."""
    from chaos.model.workload import parse_client_release

    try:
        return [parse_client_release(item) for item in items]
    except ValueError as exc:
        raise UsageError(f"{option} {exc}") from None


def _client_releases(items: tuple[str, ...], option: str) -> dict[Client, str]:
    """The release each client's members run on (``--client-version``): one per client."""
    out: dict[Client, str] = {}
    for client, version in _parse_releases(items, option):
        if out.setdefault(client, version) != version:
            raise UsageError(f"{option} names {client.value} twice ({out[client]}, {version}): give one release")
    return out


def _prepare_clients(exps: list[Experiment], console: Console) -> None:
    """Every client release the experiments' members name, prepared before any cluster starts: a release that does
    not exist or does not install is bad input (exit 2), not a failed run."""
    from chaos.workload.libraries import ensure_for, releases_of

    wanted = sorted({r for e in exps for r in releases_of(e)})
    if wanted:
        ensure_for(wanted, console.log)


def client_side_assignors(exp: Experiment) -> list[str]:
    """The members of ``exp`` whose client-side assignor ``--group-protocol consumer`` sets aside."""
    from chaos.model.workload import ConsumerSpec

    default = ConsumerSpec.model_fields["assignor"].default
    return [f"consumer-{i} ({c.assignor.value})" for i, c in enumerate(exp.workload.consumers) if c.assignor != default]


def _console():
    """Progress on stderr: time-stamped lines, no developer file:line suffix."""
    from rich.console import Console

    return Console(stderr=True, log_path=False, soft_wrap=True)


@click.group(cls=_Group, context_settings=CONTEXT,
             epilog="\n\n".join([EXIT_CODES, ENVIRONMENT, COMPLETION]))
@click.version_option(package_name="kafka-chaos")
def main() -> None:
    """Chaos and fault-injection testing for Kafka consumer groups.

    An experiment (a YAML file, or the name of one in the catalogue) says what cluster to start,
    what workload to run, which faults to inject when, and which invariants to judge. The catalogue
    ships with the package; ./experiments/ and --dir add to it and override it.

    \b
    Examples:
      chaos setup                          fetch Kafka and build Toxiproxy (once)
      chaos list                           the catalogue
      chaos plan coordinator-kill-completing-eager --seed 7
      chaos run baseline --runs 3          run an experiment against a real cluster
      chaos check runs/baseline/*          re-judge recorded runs
      chaos run --nightly --budget 2h      the whole catalogue, fresh seeds, for two hours

    Every command has its own help: chaos COMMAND -h.
    """


@main.command(short_help="Fetch Kafka (Maven Central) and build Toxiproxy (Go module proxy) into the cache.",
              epilog="\b\nExamples:\n  chaos setup\n  chaos setup --kafka-version 3.7.2\n"
                     "  chaos setup --kafka-version 4.4.0\n  chaos setup --client confluent-kafka==2.12.0 "
                     "--client java==4.1.0\n  KAFKA_CHAOS_CACHE=/data/kc chaos setup")
@click.option("--kafka-version", default=None, metavar="X.Y.Z",
              help=f"Kafka release to fetch: {VERSIONS_HELP} (default 3.9.1).")
@click.option("--client", "client_releases", multiple=True, metavar="CLIENT==X.Y.Z",
              help="a client library release to prepare for members' client_version (confluent-kafka, kafka-python "
                   "from PyPI; java: kafka-clients + VerifiableConsumer from Maven Central); repeatable. Alone, "
                   "only the clients are prepared")
def setup(kafka_version: str | None, client_releases: tuple[str, ...]) -> None:
    """Fetch Kafka jars (Maven Central) and build Toxiproxy (Go module proxy) into the cache
    ($KAFKA_CHAOS_CACHE, default ~/.cache/kafka-chaos). A no-op when they are there already. Without
    --kafka-version: the releases the catalogue runs (3.9.1 with ZooKeeper, 4.4.0 with KRaft). With
    --client: client library releases members can name in client_version (docs/client-versions.md)."""
    from chaos.cluster import runtime
    from chaos.model.cluster import KRAFT_KAFKA_VERSION

    console = _console()
    _check_kafka_version(kafka_version)
    clients = _parse_releases(client_releases, "--client")
    if clients and kafka_version is None:
        from chaos.workload.libraries import ensure_library

        for client, version in clients:
            lib = ensure_library(client, version, console.log)
            click.echo(f"ready: {client.value} {version} at {lib.root} (reports "
                       f"{', '.join(f'{k} {v}' for k, v in lib.reported.items())})")
        return
    versions = [kafka_version] if kafka_version else [runtime.DEFAULT_KAFKA_VERSION, KRAFT_KAFKA_VERSION]
    with console.status("setting up the runtime ...") as status:
        def progress(msg: str) -> None:
            status.update(msg)
            console.log(msg)

        runtime.java_binary()
        kafkas = [runtime.ensure_kafka(v, progress) for v in versions]
        tox = runtime.ensure_toxiproxy(progress)
        from chaos.workload.libraries import ensure_library

        libs = [ensure_library(c, v, progress) for c, v in clients]
    for kafka in kafkas:
        click.echo(f"ready: kafka {kafka.version} at {kafka.lib_dir}")
    click.echo(f"ready: toxiproxy {tox.version} at {tox.binary}")
    for lib in libs:
        click.echo(f"ready: {lib.client.value} {lib.version} at {lib.root}")


@main.group(cls=_Group, context_settings=CONTEXT,
            short_help="Start, inspect and stop a long-lived local cluster (outside experiments).",
            epilog="\b\nExamples:\n  chaos cluster up --brokers 3\n  chaos cluster up --kafka-version 4.4.0\n"
                   "  chaos cluster status --json\n"
                   "  chaos cluster down\n  chaos cluster down cluster-20250101-120000-ab12cd")
def cluster() -> None:
    """Start, inspect and stop a long-lived local cluster, to point your own clients at
    (experiments start their own clusters; this is not needed for `chaos run`)."""


@cluster.command("up", short_help="Start a cluster that keeps running after this command exits.",
                 epilog="\b\nExamples:\n  chaos cluster up\n  chaos cluster up --brokers 1 --lanes 1\n"
                        "  chaos cluster up --zookeepers 3 --override log.retention.ms=60000 --json\n"
                        "  chaos cluster up --kafka-version 4.4.0 --controllers 3\n"
                        "  chaos cluster up --kafka-version 3.9.1 --mode kraft --controller-placement isolated\n"
                        "  chaos cluster up --like coordinator-kill-stable-eager   # then chaos run ... --cluster SESSION")
@click.option("--brokers", default=3, show_default=True, type=int, help="number of Kafka brokers")
@click.option("--kafka-version", default=None, metavar="X.Y.Z",
              help=f"Kafka release: {VERSIONS_HELP} (default 3.9.1; fetched by `chaos setup --kafka-version`)")
@click.option("--mode", default=None, type=click.Choice(["zookeeper", "kraft"]),
              help="where metadata lives (default: the release's own: ZooKeeper up to 3.9.x, KRaft from 4.0; "
                   "3.7.x-3.9.x run either)")
@click.option("--zookeepers", default=1, show_default=True, type=int,
              help="ZooKeeper mode: ZooKeeper nodes, 1 or 3 (an ensemble)")
@click.option("--controllers", default=1, show_default=True, type=int,
              help="KRaft: controller quorum voters, 1 or 3")
@click.option("--controller-placement", default="isolated", show_default=True,
              type=click.Choice(["combined", "isolated"]),
              help="KRaft: controllers inside the first brokers (process.roles=broker,controller) or in JVMs "
                   "of their own (controller-1..N)")
@click.option("--lanes", default=2, show_default=True, type=int,
              help="client lanes: each has its own Toxiproxy proxies to every broker")
@click.option("--replication-factor", default=None, type=int, help="RF of internal topics (default min(3, brokers))")
@click.option("--base-port", default=None, type=int, help="use fixed ports from here instead of free ones")
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE",
              help="a broker setting (server.properties key), repeatable")
@click.option("--like", default=None, metavar="EXPERIMENT",
              help="the cluster an experiment (.yaml or catalogue name) asks for, to run it on with "
                   "`chaos run EXPERIMENT --cluster SESSION`; shape options beside it are refused")
@click.option("--json", "as_json", is_flag=True, help="print the status (addresses, pids, settings) as JSON")
def cluster_up(brokers, kafka_version, mode, zookeepers, controllers, controller_placement, lanes, replication_factor,
               base_port, overrides, like, as_json) -> None:
    """Start a cluster that keeps running after this command exits (stop it with `chaos cluster down`).

    ZooKeeper mode (Kafka 2.8.x-3.9.x) runs ZooKeeper and brokers; KRaft (3.7.x-4.x, KIP-500) runs a
    controller quorum, inside the brokers or apart from them, and no ZooKeeper."""
    from chaos.model.cluster import DEFAULT_KAFKA_VERSION, ClusterSpec

    _check_kafka_version(kafka_version)
    given = click.get_current_context().get_parameter_source
    if like is not None:
        from chaos.experiment import load_experiment

        shape_opts = [n for n in ("brokers", "kafka_version", "mode", "zookeepers", "controllers",
                                  "controller_placement", "lanes", "replication_factor", "overrides")
                      if given(n) is click.core.ParameterSource.COMMANDLINE]
        if shape_opts:
            raise UsageError(f"--like {like} gives the cluster's shape: drop --{shape_opts[0].replace('_', '-')} "
                             "(or --like and give the shape)")
        exp_spec = load_experiment(like).cluster
        if base_port is not None:
            exp_spec = exp_spec.model_copy(update={"base_port": base_port})
        _start_detached(exp_spec, as_json)
        return
    parsed = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--override {item!r}: write KEY=VALUE, e.g. --override log.retention.ms=60000")
        parsed[key] = value
    spec = ClusterSpec.build(brokers=brokers, zookeepers=zookeepers, kafka_version=kafka_version or DEFAULT_KAFKA_VERSION,
                             mode=mode, controllers=controllers, controller_placement=controller_placement,
                             lanes=lanes, replication_factor=replication_factor, base_port=base_port,
                             broker_overrides=parsed)
    # an option of the other mode would be ignored without a word: refuse it instead
    other = ("controllers", "controller_placement") if not spec.kraft else ("zookeepers",)
    for name in other:
        if given(name) is click.core.ParameterSource.COMMANDLINE:
            raise UsageError(f"--{name.replace('_', '-')} applies to {'ZooKeeper' if spec.kraft else 'KRaft'} "
                             f"mode only; this cluster runs {spec.metadata_mode.value} (kafka {spec.kafka_version}): "
                             f"drop it or choose --mode / --kafka-version")
    _start_detached(spec, as_json)


def _start_detached(spec, as_json: bool) -> None:
    """Start ``spec``'s cluster detached (it outlives this command) and print where it is."""
    from chaos.cluster.local import LocalCluster
    from chaos.model.cluster import ControllerPlacement

    c = LocalCluster(spec, detached=True)
    console = _console()
    if spec.kraft:
        where = (f"in JVMs of their own ({', '.join(spec.controller_nodes)})"
                 if spec.controller_placement is ControllerPlacement.ISOLATED else f"in {', '.join(spec.controller_nodes)}")
        nodes = f"{spec.controllers} KRaft controller(s) {where}, {spec.brokers} broker(s)"
    else:
        nodes = f"{spec.zookeepers} ZooKeeper, {spec.brokers} broker(s)"
    console.log(f"starting {nodes} and Toxiproxy (kafka {spec.kafka_version}; usually 5-15 s) ...")
    with console.status("waiting for the cluster to be usable ..."):
        c.start()
    status = c.status()
    if as_json:
        click.echo(json.dumps(status, indent=2, default=str))
    else:
        click.echo(f"cluster {status['session']} up in {status['startup_seconds']:.1f} s")
        for lane, servers in status["bootstrap"].items():
            click.echo(f"  bootstrap {lane:5s} {servers}")
        click.echo(f"  toxiproxy {status['toxiproxy']['api']}   workdir {status['workdir']}")
        click.echo(f"run on it with: chaos run EXPERIMENT --cluster {status['session']}")
        click.echo(f"stop it with: chaos cluster down {status['session']}")


def _my_sessions() -> tuple[list[Path], list[Path]]:
    """Detached sessions (``chaos cluster up``) under the state root: (this user's, other users').

    The state root is shared (/tmp/kafka-chaos by default), so a session belongs to whoever owns
    its directory (the uid that created it).
    """
    from chaos.process import detached_sessions

    mine: list[Path] = []
    theirs: list[Path] = []
    for d in detached_sessions():
        try:
            (mine if d.stat().st_uid == os.getuid() else theirs).append(d)
        except FileNotFoundError:
            continue
    return mine, theirs


@cluster.command("status", short_help="Show the running clusters started with `chaos cluster up`.",
                 epilog="\b\nExamples:\n  chaos cluster status\n  chaos cluster status --json | jq '.[0].bootstrap'")
@click.option("--json", "as_json", is_flag=True,
              help="print every cluster's full status (nodes, pids, logs, effective settings) as a JSON list")
def cluster_status(as_json) -> None:
    """Show the running clusters this user started with `chaos cluster up`, node by node."""
    from chaos.process import ProcessRecord

    out = []
    for d in _my_sessions()[0]:
        try:
            status = json.loads((d / "cluster.json").read_text())
        except (FileNotFoundError, ValueError):
            continue
        for name, node in status["nodes"].items():
            rec_file = d / "procs" / f"{name}.json"
            node["running"] = rec_file.exists() and ProcessRecord(**json.loads(rec_file.read_text())).matches() is not None
        out.append(status)
    if as_json:
        click.echo(json.dumps(out, indent=2, default=str))
        return
    if not out:
        click.echo("no cluster running (start one with: chaos cluster up)")
    for status in out:
        click.echo(f"cluster {status['session']}  kafka {status['kafka_version']}  "
                   f"bootstrap(ctl) {status['bootstrap']['ctl']}")
        for name, node in status["nodes"].items():
            click.echo(f"  {name:10s} pid {node['pid']:<8} {'running' if node['running'] else 'DOWN'}  log {node['log']}")


@cluster.command("down", short_help="Stop the clusters this user started with `chaos cluster up` (or the one named).",
                 epilog="\b\nExamples:\n  chaos cluster down\n  chaos cluster down cluster-20250101-120000-ab12cd")
@click.argument("sessions", nargs=-1, metavar="[SESSION]...")
def cluster_down(sessions: tuple[str, ...]) -> None:
    """Stop clusters started with `chaos cluster up` and delete their files.

    Without SESSION: every cluster this user started. With SESSION (as `chaos cluster status`
    prints it): only those. Clusters of other users are never touched.
    """
    from chaos.process import stop_session_dir

    mine, theirs = _my_sessions()
    if sessions:
        by_name = {d.name: d for d in mine}
        others = {d.name for d in theirs}
        chosen = []
        for s in sessions:
            if s in others:
                raise UsageError(f"cluster {s} was started by another user; only they can stop it")
            if s not in by_name:
                names = ", ".join(sorted(by_name)) or "none running"
                raise UsageError(f"no running cluster {s!r} of this user (yours: {names}; see `chaos cluster status`)")
            chosen.append(by_name[s])
    else:
        chosen = mine
    for d in chosen:
        killed = stop_session_dir(d)
        click.echo(f"stopped {d.name}: {len(killed)} processes")
    if not chosen:
        click.echo("no cluster of this user running" + (f" ({len(theirs)} of other users left alone)" if theirs else ""))


@main.command(short_help="Break and heal a real cluster, then run the headline experiment and show its verdict.",
              epilog="\b\nExamples:\n  chaos demo\n  chaos demo --out /tmp/demo --records 10000")
@click.option("--out", default="out/demo", show_default=True, type=click.Path(path_type=Path),
              help="directory for the demo's summary (demo.json), node logs and the headline run")
@click.option("--records", default=3000, show_default=True, type=click.IntRange(1, 10_000_000),
              help="records produced and consumed before the faults")
def demo(out: Path, records: int) -> None:
    """Start a real cluster, cut a link and kill a partition leader while producing, heal it, then run
    the headline experiment (a coordinator killed mid-rebalance) and show its verdict."""
    from chaos.demo import run_demo, run_headline
    from chaos.replay import refuse_out_in_run

    refuse_out_in_run(out)
    run_demo(out, say=click.echo, records=records)
    sys.exit(run_headline(out, say=click.echo))


_CLUSTER_OPTION = click.option(
    "--cluster", "attach", default=None, metavar="SESSION",
    help="run on this running local cluster instead of starting one (`chaos cluster up --like EXPERIMENT`; names "
         "in `chaos cluster status`): healed before each run, left running after; its shape must be the "
         "experiment's")


def _attach(name: str | None, exps: list, backend: str | None) -> Path | None:
    """``--cluster``'s session directory, once every experiment is known to fit it (else one UsageError)."""
    if name is None:
        return None
    from chaos.cluster.attach import attachable
    from chaos.runner import refuse_unfit

    cluster_dir = attachable(name)
    refuse_unfit(exps, cluster_dir, backend)
    return cluster_dir


_DIR_OPTION = click.option(
    "--dir", "directories", multiple=True, type=click.Path(path_type=Path, file_okay=False),
    help="a directory of experiment .yaml files that adds to and overrides the catalogue (repeatable; "
         "./experiments/ is always included)")


def _print_table(table) -> None:
    """A rich table on stdout, as wide as the terminal at most (80 columns when not a terminal),
    without the padding rich leaves at the end of each line."""
    from rich.console import Console

    console = Console(soft_wrap=False, highlight=False)
    with console.capture() as captured:
        console.print(table)
    click.echo("\n".join(line.rstrip() for line in captured.get().splitlines()))


def _entry_doc(path: Path, exp) -> dict:
    from chaos.experiment import PACKAGED_CATALOGUE

    origin = "packaged" if path.resolve().parent == PACKAGED_CATALOGUE.resolve() else "local"
    if isinstance(exp, UsageError):
        return {"name": path.stem, "path": str(path), "origin": origin, "valid": False, "error": _one_line(exp)}
    return {"name": exp.name, "path": str(path), "origin": origin, "valid": True,
            "faults": sorted({f.type for f in exp.faults}), "runs": exp.runs,
            "expect_violation": [c.value for c in exp.expect_violation], "description": exp.description.strip()}


@main.command("list", short_help="Show the experiment catalogue (packaged, ./experiments/ and --dir).",
              epilog="\b\nExamples:\n  chaos list\n  chaos list --dir my-experiments\n"
                     "  chaos list --json | jq -r '.[].name'")
@_DIR_OPTION
@click.option("--json", "as_json", is_flag=True,
              help="print a JSON list: name, path, origin, valid, faults, runs, description (or error)")
def list_experiments(directories: tuple[Path, ...], as_json: bool) -> None:
    """Show the experiment catalogue: the experiments shipped with kafka-chaos, overridden and extended
    by ./experiments/*.yaml and --dir. An invalid file is listed as INVALID with the reason; the
    others are still listed."""
    from chaos.experiment import catalogue, catalogue_path

    for d in directories:
        if not d.is_dir():
            raise UsageError(f"--dir {d}: no such directory")
    entries = catalogue(extra=directories)
    docs = [_entry_doc(p, e) for p, e in entries]
    if as_json:
        click.echo(json.dumps(docs, indent=1))
        return
    if not entries:
        raise UsageError(f"no experiments (*.yaml) in {', '.join(str(d) for d in catalogue_path(directories))}")
    from rich.table import Table

    # two columns — the name with its faults under it, then the description wrapped in what is left —
    # so no line is wider than the terminal and nothing is cut
    table = Table(box=None, show_header=True, header_style="bold", pad_edge=False, show_lines=True)
    table.add_column("experiment (faults)", no_wrap=True, overflow="fold")
    table.add_column("what it does", overflow="fold", ratio=1)
    for doc in docs:
        if doc["valid"]:
            table.add_row(f"{doc['name']}\n  ({', '.join(doc['faults']) or 'no faults'})",
                          " ".join(doc["description"].split()))
        else:
            table.add_row(f"{doc['name']}\n  (INVALID)", doc["error"])
    _print_table(table)


@main.command(short_help="Print the JSON Schema of experiment files (for editors and CI).",
              epilog="\b\nExamples:\n  chaos schema > experiment.schema.json\n  chaos schema --out experiments/schema.json")
@click.option("--out", default=None, type=click.Path(path_type=Path),
              help="write to this file (replaced whole) instead of stdout; its directory must exist")
def schema(out: Path | None) -> None:
    """Print the JSON Schema of experiment files: every field, type, default and allowed value."""
    from chaos.experiment import dump_schema, json_schema

    if out:
        from chaos.replay import refuse_out_in_run

        refuse_out_in_run(out)
        dump_schema(out)
    else:
        click.echo(json.dumps(json_schema(), indent=2))


def _trigger_doc(trigger) -> dict:
    return json.loads(trigger.model_dump_json(exclude_defaults=True)) or {"at_s": 0.0}


def _trigger_text(trigger) -> str:
    parts = []
    for key, value in _trigger_doc(trigger).items():
        if isinstance(value, dict):
            parts.append(f"{key}(" + ", ".join(f"{k}={v}" for k, v in value.items()) + ")")
        else:
            parts.append(f"{key}={value}")
    return " ".join(parts)


@main.command(short_help="Print the fault schedule an experiment and seed give (no cluster needed).",
              epilog="\b\nExamples:\n  chaos plan baseline\n  chaos plan coordinator-kill-completing-eager --seed 7\n"
                     "  chaos plan experiments/nightly-mixed.yaml --seed 3 --json")
@click.argument("experiment", shell_complete=_complete_experiments)
@click.option("--seed", default=1, show_default=True, type=int,
              help="the run's seed: random triggers and random targets follow it (`chaos run --seed`)")
@_DIR_OPTION
@click.option("--json", "as_json", is_flag=True,
              help="print a JSON list of faults: fault_id, type, target, node, at_s (null: state trigger), "
                   "duration_s, trigger, direction")
def plan(experiment: str, seed: int, directories: tuple[Path, ...], as_json: bool) -> None:
    """Print the fault schedule of EXPERIMENT (a .yaml file or a catalogue name) for a seed: which
    fault fires when, on what, for how long. The same seed gives the same schedule in `chaos run`."""
    from chaos.experiment import load_experiment
    from chaos.model.experiment import check_seed
    from chaos.model.faults.link import LinkFault
    from chaos.nemesis.schedule import plan as make_plan

    check_seed(seed)
    exp = load_experiment(experiment, directories)
    planned = make_plan(exp, seed)
    docs: list[dict[str, Any]] = [
        {"fault_id": f.fault_id, "type": f.spec.type, "target": f.spec.target.value, "node": f.spec.node,
         "at_s": f.at_s, "duration_s": f.spec.duration_s, "trigger": _trigger_doc(f.spec.trigger),
         # which way a link fault acts; none for the kinds that are not link faults
         "direction": f.spec.direction.value if isinstance(f.spec, LinkFault) else None}
        for f in planned]
    if as_json:
        click.echo(json.dumps(docs, indent=1))
        return
    from rich.table import Table

    click.echo(f"{exp.name}, seed {seed}: {len(docs)} fault(s) in a chaos phase of {exp.phases.chaos_s:g} s "
               f"(warmup {exp.phases.warmup_s:g} s before, heal {exp.phases.heal_s:g} s after)")
    if not docs:
        return
    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("fault", "at", "type", "target", "duration", "trigger"):
        table.add_column(col, overflow="fold")
    for d, f in zip(docs, planned, strict=False):
        target = d["target"] + (f" {d['node']}" if d["node"] else "")
        at = f"{d['at_s']:g} s" if d["at_s"] is not None else "on state"
        kind = d["type"] + (f" {d['direction']}" if d["direction"] not in (None, "both") else "")  # one-way
        table.add_row(d["fault_id"], at, kind, target, f"{d['duration_s']:g} s", _trigger_text(f.spec.trigger))
    _print_table(table)


@main.command(short_help="Run experiments against real clusters and judge every run.",
              epilog="\n\n".join([
                  "\b\nExamples:\n  chaos run baseline\n  chaos run coordinator-kill-completing-eager --runs 5 --seed 100\n"
                  "  chaos run my-experiment.yaml --backend docker\n  chaos run --nightly --budget 2h --out results\n"
                  "  chaos run baseline --kafka-version 4.4.0 --group-protocol consumer\n"
                  "  chaos run baseline --json | jq '.[].valid'\n"
                  "  chaos run baseline --cluster cluster-20250101-120000-ab12cd   # on a `chaos cluster up` cluster",
                  EXIT_CODES]))
@click.argument("experiments", nargs=-1, shell_complete=_complete_experiments, metavar="[EXPERIMENT]...")
@click.option("--runs", default=None, type=click.IntRange(min=1), help="runs per experiment (default: its `runs`)")
@click.option("--seed", default=None, type=int, help="seed of the first run (run k uses seed+k); default random")
@click.option("--out", default=None, type=click.Path(path_type=Path),
              help="where run directories go (default runs/, or results/ with --nightly)")
@click.option("--kafka-version", default=None, metavar="X.Y.Z",
              help=f"override the experiments' Kafka release ({VERSIONS_HELP}); the metadata mode follows it")
@click.option("--group-protocol", default=None, type=click.Choice(["classic", "consumer"]),
              help="override every member's group protocol: classic (JoinGroup/SyncGroup) or consumer (KIP-848, "
                   "needs KRaft; the coordinator assigns, so members' client-side assignors are set aside)")
@click.option("--backend", default=None, type=click.Choice([b.value for b in BackendName]),
              help="override the experiments' cluster backend (docker: containers on kafka-chaos's own engine)")
@click.option("--client-version", "client_releases", multiple=True, metavar="CLIENT=X.Y.Z",
              help="run every member of CLIENT (confluent-kafka, kafka-python, java) on that library release, "
                   "prepared into the cache first (repeatable; docs/client-versions.md)")
@click.option("--nightly", is_flag=True, help="run the whole catalogue (or EXPERIMENTS) in rounds with fresh seeds "
                                              "until --budget is spent; archive under OUT/<date>/")
@click.option("--budget", default="60m", show_default=True, help="time budget of --nightly (e.g. 60m, 2h, 900s)")
@click.option("--shard", default=None, metavar="K/N", help="--nightly: run shard K of N of the seeded plan (give "
                                                           "every shard the same --seed; docs/explore.md)")
@click.option("--explore", "explore_workload", default=None, metavar="WORKLOAD",
              help="--nightly: interleave `chaos explore WORKLOAD` with the catalogue (docs/explore.md)")
@click.option("--explore-share", default=0.25, show_default=True, type=float,
              help="--explore: the fraction of the budget the exploration gets")
@_CLUSTER_OPTION
@_DIR_OPTION
@click.option("--json", "as_json", is_flag=True,
              help="print the outcomes as a JSON list (one object per run) instead of one line per run")
def run(experiments, runs, seed, out, kafka_version, group_protocol, backend, client_releases, nightly, budget, shard,
        explore_workload, explore_share, attach, directories, as_json) -> None:
    """Run EXPERIMENTs (.yaml files or catalogue names) against real clusters: warmup, chaos (faults as
    planned), heal, quiesce; then judge each run's history. One line per run on stdout; progress
    (phases, faults as they fire) on stderr. Run directories hold history.jsonl, checks.json,
    faults.json and logs."""
    from chaos.experiment import catalogue, load_experiment
    from chaos.explore.plan import NAME_SUFFIX as EXPLORE_SUFFIX
    from chaos.model.experiment import MAX_RUNS
    from chaos.replay import refuse_out_in_run
    from chaos.run_progress import RunProgress
    from chaos.runner import BatchStopped, exit_code, parse_budget, run_experiments, run_nightly

    if not experiments and not nightly:
        raise UsageError("name at least one experiment (see `chaos list`), or use --nightly for the whole catalogue")
    from chaos.model.shard import Shard

    the_shard = Shard.parse(shard)
    if shard is not None and not nightly:
        raise UsageError("--shard splits the seeded plan of --nightly (or of chaos explore): add --nightly, or drop "
                         "--shard and give each machine its own experiments")
    if the_shard.n > 1 and seed is None:
        raise UsageError(f"--shard {shard}: give every shard the same --seed (else each runs a plan of its own)")
    if explore_workload is not None and not nightly:
        raise UsageError("--explore interleaves exploration with a nightly: add --nightly, or run "
                         f"`chaos explore {explore_workload}`")
    if not 0 < explore_share < 1:
        raise UsageError(f"--explore-share {explore_share:g}: a fraction of the budget above 0 and below 1")
    if runs is not None and runs > MAX_RUNS:
        raise UsageError(f"--runs {runs}: at most {MAX_RUNS} runs per experiment")
    _check_kafka_version(kafka_version)
    clients = _client_releases(client_releases, "--client-version")
    root = out or Path("results" if nightly else "runs")
    refuse_out_in_run(root)
    if experiments:
        exps = [load_experiment(e, directories) for e in experiments]
    else:
        entries = catalogue(extra=directories)
        bad = [e for _, e in entries if isinstance(e, UsageError)]
        if bad:
            raise UsageError(f"invalid catalogue entry: {_one_line(bad[0])}")
        exps = [e for _, e in entries if not isinstance(e, UsageError)]  # none is, checked just above
        if not exps:
            raise UsageError("the catalogue is empty: name experiment files, or add --dir")
    console = _console()
    if group_protocol == "consumer":
        set_aside = [f"{e.name}: {', '.join(m)}" for e in exps if (m := client_side_assignors(e))]
        if set_aside:
            console.log("--group-protocol consumer: the coordinator assigns (KIP-848); client-side assignors set "
                        f"aside in {'; '.join(set_aside)}")
    from chaos.experiment import apply_overrides

    overrides = {"kafka_version": kafka_version, "group_protocol": group_protocol, "client_versions": clients}
    if experiments:  # named: each must run as asked
        exps = [apply_overrides(e, **overrides) for e in exps]
    else:  # the whole catalogue: what cannot run on this cluster / protocol (ZooKeeper faults on KRaft) is left out
        fitting, left_out = [], []
        for e in exps:
            try:
                fitting.append(apply_overrides(e, **overrides))
            except UsageError as exc:
                left_out.append(_one_line(exc))
        if not fitting:
            raise UsageError(f"no catalogue experiment can run so: {left_out[0]}")
        for reason in left_out:
            console.log(f"left out: {reason}")
        exps = fitting
    if backend:
        exps = [e.with_overrides(backend=backend) for e in exps]
    workload = None
    if explore_workload is not None:  # as `chaos explore` loads it
        workload = apply_overrides(load_experiment(explore_workload, directories), **overrides)
        if backend:
            workload = workload.with_overrides(backend=backend)
    if attach is not None and not experiments:  # the catalogue: what this cluster's shape cannot run is left out
        from chaos.cluster.attach import attachable, attached_spec

        have = attached_spec(attachable(attach))
        left = [e for e in exps if e.cluster.differences(have)]
        if len(left) == len(exps):
            raise UsageError(f"--cluster {attach}: no catalogue experiment has its shape; name one, or start a cluster "
                             "with `chaos cluster up --like EXPERIMENT`")
        console.log(f"--cluster {attach}: left out {len(left)} experiment(s) of another cluster shape")
        exps = [e for e in exps if e not in left]
    _prepare_clients(exps + ([workload] if workload else []), console)
    cluster_dir = _attach(attach, exps + ([workload] if workload else []), backend)
    budget_s = parse_budget(budget) if nightly else 0.0
    total = "?" if nightly else sum(runs or e.runs for e in exps)
    done = {"n": 0}
    t_start = time.monotonic()
    following: dict[str, RunProgress] = {}

    def started(exp, k, s):
        left = f", {max(0, budget_s - (time.monotonic() - t_start)) / 60:.0f} min of budget left" if nightly else ""
        console.log(f"[{done['n'] + 1}/{total}] {exp.name} run {k} seed {s}{left}: starting "
                    f"(warmup {exp.phases.warmup_s:g} s, chaos {exp.phases.chaos_s:g} s, heal {exp.phases.heal_s:g} s; "
                    f"a new cluster takes 5-15 s more)")
        explored = "*/" if exp.name.endswith(EXPLORE_SUFFIX) else ""  # under the night's explore-<time>/
        pattern = f"{'*/' + explored if nightly else ''}{exp.name}/run-{k:03d}-seed-{s}"
        following["run"] = RunProgress(root, pattern, lambda line: console.print(line, highlight=False)).__enter__()

    def finished(oc):
        progress = following.pop("run", None)
        if progress is not None:
            progress.stop()
        done["n"] += 1
        if oc.valid == "error":
            return  # the batch stops on it: BatchStopped below says it on stderr
        mark = "ok" if oc.exit_code == 0 else "FAIL"
        extra = ", ".join(oc.failed_checkers) if oc.failed_checkers else ""
        if not as_json:
            click.echo(f"{mark:5s} {oc.experiment} run {oc.index} seed {oc.seed} verdict {oc.valid} "
                       f"{oc.wall_s:.1f}s {extra}  -> {oc.run_dir}")
            if oc.explanation:
                # root cause first: what happened to the run, then the invariants (all of it: `chaos check` again)
                lines = oc.explanation.splitlines()
                more = f"\n      ... (chaos check {oc.run_dir} for the rest)" if len(lines) > EXPLAIN_LINES else ""
                click.echo("\n".join(f"      {line}" for line in lines[:EXPLAIN_LINES]) + more)

    from dataclasses import asdict
    explorers: list = []

    def explorer(archive: Path, base: int, share_s: float):
        from chaos.explore.search import Explorer

        assert workload is not None  # only made with --explore
        explorers.append(Explorer(workload, archive, share_s, base, the_shard, backend=backend,
                                  say=lambda line: console.log(line, highlight=False), on_start=started,
                                  on_run=finished))
        return explorers[-1]

    try:
        if nightly:
            outcomes = run_nightly(exps, root, budget_s, seed=seed, on_run=finished, on_start=started,
                                   attach=cluster_dir, shard=the_shard, explore=explorer if workload else None,
                                   explore_share=explore_share)
            console.log(f"nightly: {len(outcomes)} runs, {sum(o.expected for o in outcomes)} as expected; "
                        f"archived under {root}")
            for e in explorers:
                s = e.summary()
                console.log(f"explored {e.workload.name}: {s['runs']} runs, {len(e.findings)} finding(s) -> {e.out}")
                outcomes = outcomes + e.outcomes
        else:
            outcomes = run_experiments(exps, root, runs=runs, seed=seed, on_run=finished, on_start=started,
                                       attach=cluster_dir)
    except BatchStopped as exc:
        if as_json:  # stdout keeps its one shape: the runs done, the failed one included
            click.echo(json.dumps([asdict(o) for o in exc.outcomes], indent=1))
        raise
    finally:
        for progress in following.values():
            progress.stop()
    if as_json:
        click.echo(json.dumps([asdict(o) for o in outcomes], indent=1))
    sys.exit(exit_code(outcomes))


@main.command(short_help="Rerun a recorded run with its faults as they fired; compare the verdicts.",
              epilog="\b\nExamples:\n  chaos replay runs/nightly-mixed/run-002-seed-1234\n"
                     "  chaos replay results/2026-11-23/wrong-skip-records/run-004-seed-77 --out replays\n\n"
                     "\b\nExit codes:\n  0  the replay's verdict is the recorded one (same checkers false)\n"
                     "  1  the verdict differs\n  2  bad input or infrastructure failure\n  130  interrupted")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--out", default=Path("runs/replay"), show_default=True, type=click.Path(path_type=Path),
              help="where the replay's run directory goes")
@click.option("--backend", default=None, type=click.Choice([b.value for b in BackendName]),
              help="run on this backend instead of the recorded one")
@_CLUSTER_OPTION
def replay(run_dir: Path, out: Path, backend: str | None, attach: str | None) -> None:
    """Rerun RUN_DIR (a directory `chaos run` wrote) with its experiment as resolved, its seed, and its faults as
    they fired: time triggers at the second each fault took effect, random targets pinned to the member or
    broker they hit, live triggers waiting for their state again from about when they fired (roles such as
    the coordinator are asked of the cluster again). Writes a new run directory with replay.json (both verdicts)
    and experiment.yaml (the replayed schedule as an experiment file)."""
    from chaos.replay import as_fired, experiment_yaml, load_recorded, read_verdict, refuse_out_in_run
    from chaos.runner import ClusterPool, pooled_run

    # every refusal before a cluster: the run as recorded (its files, its history's schema), then --out
    rec = load_recorded(run_dir)
    refuse_out_in_run(out)
    exp, notes = as_fired(rec)
    cluster_dir = _attach(attach, [exp], backend)
    console = _console()
    for note in notes:
        console.log(f"replay: {note}")
    new_dir = out / exp.name / f"replay-{time.strftime('%Y%m%d-%H%M%S')}-seed-{rec.seed}"
    console.log(f"replaying {run_dir} (verdict {rec.verdict.describe()}, {len(exp.faults)} faults as fired) "
                f"-> {new_dir}")
    with ClusterPool(backend=backend, attach=cluster_dir) as pool:
        oc = pooled_run(pool, exp, rec.seed, new_dir, 0)
    if oc.valid == "error":
        raise InfrastructureError(f"the replay could not run: {oc.error}{oc.details}")
    again = read_verdict(new_dir)
    # the recorded failure came back (more checkers failing too is still a reproduction, said as such)
    same = again.valid == rec.verdict.valid and again.failed >= rec.verdict.failed
    word = "reproduced" if again == rec.verdict else "reproduced, and more failed" if same else "DIFFERS"
    (new_dir / "experiment.yaml").write_text(experiment_yaml(exp, f"Replay of {run_dir}: its faults as they fired."))
    (new_dir / "replay.json").write_text(json.dumps({
        "recorded_run": str(run_dir), "seed": rec.seed, "recorded": rec.verdict.describe(),
        "replayed": again.describe(), "reproduced": same, "left_out": notes}, indent=1))
    click.echo(f"{word}: recorded {rec.verdict.describe()}, replayed "
               f"{again.describe()} {oc.wall_s:.1f}s  -> {new_dir}")
    if oc.explanation and again.valid != "true":
        click.echo("\n".join(f"      {line}" for line in oc.explanation.splitlines()[:EXPLAIN_LINES]))
    sys.exit(0 if same else 1)


@main.command(short_help="Find the smallest experiment that still fails like a red run (real runs, bounded).",
              epilog="\b\nExamples:\n  chaos shrink results/2026-11-23/nightly-mixed/run-007-seed-99 --budget 30m\n"
                     "  chaos shrink runs/wrong-skip-records/run-000-seed-5 --tries 2 --out shrunk\n"
                     "  chaos run shrunk/minimal.yaml        # the regression test it wrote\n\n"
                     "\b\nExit codes:\n  0  minimal.yaml written (it fails like the recorded run)\n"
                     "  1  the replay of the recorded run did not fail in --tries runs (or in those the budget held)\n"
                     "  2  bad input (not a red run, a budget shorter than one run, --out inside a recorded run)\n"
                     "     or infrastructure failure\n"
                     "  130  interrupted (Ctrl-C): minimal.yaml holds the best so far")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--budget", default="30m", show_default=True,
              help="wall-time bound of the search (e.g. 30m, 2h); at least one run of the recorded experiment")
@click.option("--tries", default=1, show_default=True, type=click.IntRange(1, 20),
              help="runs per candidate before it counts as passing (raise it for a failure that comes and goes)")
@click.option("--confirm", default=3, show_default=True, type=click.IntRange(0, 50),
              help="runs of the minimal experiment at the end, to state its failure rate")
@click.option("--checker", "checkers", multiple=True,
              help="what counts as the failure: one of these checkers false (repeatable; default: the experiment's "
                   "expect_violation, else the checkers that failed in RUN_DIR)")
@click.option("--out", default=None, type=click.Path(path_type=Path),
              help="where minimal.yaml, shrink-log.jsonl and the runs go (default runs/shrink/<experiment>-<time>)")
@click.option("--backend", default=None, type=click.Choice([b.value for b in BackendName]),
              help="run on this backend instead of the recorded one")
@_CLUSTER_OPTION
def shrink(run_dir: Path, budget: str, tries: int, confirm: int, checkers: tuple[str, ...], out: Path | None,
           backend: str | None, attach: str | None) -> None:
    """Search for the smallest experiment that still fails like RUN_DIR: its faults as they fired (the replay),
    then no fault, fewer faults (delta debugging), a shorter chaos phase, shorter faults, fewer members and
    partitions — each candidate run on a real cluster. minimal.yaml (rewritten whenever the search shrinks
    it) is an experiment file to commit as a regression test; shrink-log.jsonl says what was tried."""
    from chaos.model.checker_name import CheckerName
    from chaos.replay import load_recorded, refuse_out_in_run
    from chaos.runner import ClusterPool, parse_budget
    from chaos.shrink import Shrinker, shrink_target

    budget_s = parse_budget(budget)
    known = {c.value for c in CheckerName}
    for c in checkers:
        if c not in known:
            raise UsageError(f"--checker {c}: no such checker; one of {', '.join(sorted(known))}")
    # every refusal before a cluster: the run (its files, its history's schema, a red verdict), the budget, --out
    rec = load_recorded(run_dir)
    shrink_target(rec, frozenset(checkers) or None, budget_s)
    out = out or Path("runs/shrink") / f"{rec.experiment.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    refuse_out_in_run(out)
    cluster_dir = _attach(attach, [rec.experiment], backend)
    console = _console()
    with ClusterPool(backend=backend, attach=cluster_dir) as pool:
        shrinker = Shrinker(rec, out, budget_s=budget_s, tries=tries, confirm=confirm,
                            checkers=frozenset(checkers) or None, pool=pool,
                            say=lambda line: console.log(line, highlight=False))
        console.log(f"shrinking {run_dir} (verdict {rec.verdict.describe()}, {len(rec.faults)} faults recorded), "
                    f"budget {budget_s / 60:.0f} min -> {out}")
        try:
            best = shrinker.shrink()
        except KeyboardInterrupt:
            if shrinker.best is not None:
                console.log(f"interrupted: the smallest failing experiment so far is {out / 'minimal.yaml'}")
            raise
    if best is None:
        runs = shrinker.attempts[0].runs if shrinker.attempts else []
        failed = "; ".join(", ".join(r["failed"]) or "none" for r in runs)
        log = out / "shrink-log.jsonl"
        where = f"  -> {log}" if log.is_file() else ""
        if shrinker.stopped_by == "budget":
            click.echo(f"BUDGET SPENT: the replay of {run_dir} did not fail {', '.join(sorted(shrinker.target))} in "
                       f"the {len(runs)} run(s) the budget held (failed: {failed}); give a larger --budget{where}")
        else:
            click.echo(f"NOT REPRODUCED: the replay of {run_dir} did not fail {', '.join(sorted(shrinker.target))} "
                       f"in {len(runs)} run(s) (failed: {failed}); the failure depends on timing the replay does not "
                       f"fix — try --tries 3{where}")
        sys.exit(1)
    failing, n = shrinker.rate()
    click.echo(f"minimal: {len(best.faults)} of {len(rec.faults)} faults, {len(best.workload.consumers)} members, "
               f"{best.workload.partitions} partitions, chaos {best.phases.chaos_s:g} s; failed "
               f"{', '.join(sorted(shrinker.target))} in {failing} of {n} runs; {len(shrinker.attempts)} candidates"
               f"{' (budget spent)' if shrinker.stopped_by == 'budget' else ''}  -> {out / 'minimal.yaml'}")
    sys.exit(0)


@main.command(short_help="Search for violations no experiment was written for: generated faults, shrunk findings.",
              epilog="\b\nExamples:\n  chaos explore baseline --budget 2h --out results/explore-1\n"
                     "  chaos explore my-service.yaml --budget 30m --families process,rpc --seed 7\n"
                     "  chaos explore baseline --budget 1h --seed 7 --shard 2/4 --out results/shard-2   # CI matrix\n"
                     "\n\b\nExit codes:\n  0  no finding (unknown runs are counted and explained in explore.json)\n"
                     "  1  at least one finding (findings/<signature>/)\n  2  bad input or infrastructure failure\n"
                     "  130  interrupted (everything found so far is kept)")
@click.argument("workload", shell_complete=_complete_experiments)
@click.option("--budget", default="60m", show_default=True, help="time for searching, replaying and shrinking "
                                                                 "(e.g. 30m, 2h, 900s)")
@click.option("--seed", default=None, type=int, help="the plan's seed (default random, recorded in explore.json); "
                                                     "the same seed gives the same plan on every machine")
@click.option("--shard", default=None, metavar="K/N", help="run shard K of N of the plan (runs i with i %% N == K-1): "
                                                           "N machines with the same --seed run one plan together")
@click.option("--families", default=None, metavar="F1,F2", help="fault families to generate from (default all: "
                                                                "process, link, rpc, network, topology, membership, "
                                                                "container where the backend has them)")
@click.option("--runs", "max_runs", default=None, type=click.IntRange(1, 100_000),
              help="explore the plan's first N runs only (with --shard: this shard's share of them), within --budget")
@click.option("--max-findings", default=None, type=click.IntRange(1, 10_000),
              help="stop once this many distinct findings are filed (a CI job that wants the first one)")
@click.option("--shrink-share", default=0.4, show_default=True, type=float,
              help="at most this fraction of the budget goes to replaying and shrinking red runs")
@click.option("--out", default=None, type=click.Path(path_type=Path),
              help="the archive directory (default results/explore/<workload>-seed-<S>[-shard-K-of-N])")
@click.option("--kafka-version", default=None, metavar="X.Y.Z",
              help=f"override the workload's Kafka release ({VERSIONS_HELP})")
@click.option("--group-protocol", default=None, type=click.Choice(["classic", "consumer"]),
              help="override every member's group protocol (consumer: KIP-848, needs Kafka 4.x)")
@click.option("--client-version", "client_releases", multiple=True, metavar="CLIENT=X.Y.Z",
              help="run every member of CLIENT on that library release (repeatable; docs/client-versions.md)")
@click.option("--backend", default=None, type=click.Choice([b.value for b in BackendName]),
              help="override the workload's cluster backend")
@_CLUSTER_OPTION
@_DIR_OPTION
def explore(workload, budget, seed, shard, families, max_runs, max_findings, shrink_share, out, kafka_version,
            group_protocol, client_releases, backend, attach, directories) -> None:
    """Explore WORKLOAD (an experiment file or catalogue name: its cluster and members, its faults ignored):
    generate fault schedules steered toward what has not been tried (kind x target x group state x duration x
    client), judge every run, replay and shrink each new red run, and file each distinct finding with its
    minimal experiment under OUT/findings/. explore.json (rewritten after every run) has the runs, the
    verdicts, every unknown explained, the coverage map and the findings. docs/explore.md"""
    import random as _random

    from chaos.experiment import apply_overrides, load_experiment
    from chaos.explore.plan import MIN_CHAOS_S, parse_families
    from chaos.explore.search import Explorer
    from chaos.model.experiment import check_seed
    from chaos.model.shard import Shard
    from chaos.process import terminate_on_sigterm
    from chaos.runner import estimate_s, parse_budget

    budget_s = parse_budget(budget)
    the_shard = Shard.parse(shard)
    if the_shard.n > 1 and seed is None:
        raise UsageError(f"--shard {shard}: give every shard the same --seed (else each explores a plan of its own)")
    fams = parse_families(families) if families is not None else None
    _check_kafka_version(kafka_version)
    clients = _client_releases(client_releases, "--client-version")
    exp = apply_overrides(load_experiment(workload, directories), kafka_version=kafka_version,
                          group_protocol=group_protocol, client_versions=clients)
    if backend:
        exp = exp.with_overrides(backend=backend)
    base = check_seed(seed) if seed is not None else _random.SystemRandom().randrange(1, 2**31)
    archive = out or Path("results/explore") / f"{exp.name}-seed-{base}{the_shard.suffix}"
    console = _console()
    explorer = Explorer(exp, archive, budget_s, base, the_shard, fams, shrink_share, max_runs, max_findings, backend,
                        say=lambda line: console.log(line, highlight=False))  # refuses a used or recorded --out
    shortest = estimate_s(exp.with_overrides(**{"phases.chaos_s": MIN_CHAOS_S}))
    if budget_s < shortest:
        raise UsageError(f"--budget {budget}: shorter than the shortest generated run of {exp.name} (about "
                         f"{shortest:.0f} s): give at least {math.ceil(shortest)}s")
    _prepare_clients([exp], console)
    explorer.attach = _attach(attach, [exp], backend)
    console.log(f"exploring {exp.name}: seed {base}{', shard ' + str(the_shard) if the_shard.n > 1 else ''}, "
                f"budget {budget_s / 60:.0f} min ({shrink_share:.0%} at most for replays and shrinks) -> {archive}")
    try:
        with terminate_on_sigterm():
            found = explorer.run()
    except KeyboardInterrupt:
        console.log(f"interrupted: {len(explorer.findings)} finding(s) and {len(explorer.outcomes)} run(s) kept "
                    f"in {archive}")
        raise
    s = explorer.summary()
    v = s["verdicts"]
    cov = s["coverage"] or {}
    click.echo(f"{s['runs']} runs ({s['runs_per_hour']:.0f}/h): {v['true']} valid, {v['false']} red, {v['unknown']} "
               f"unknown; {cov.get('tried', 0)} of {cov.get('cells', 0)} cells tried "
               f"({cov.get('unreachable', 0)} unreachable); {len(found)} finding(s)  -> {archive / 'explore.json'}")
    for f in found:
        click.echo(f"  {f.signature} {f.finding_class}: {', '.join(f.checkers)}"
                   f"{' under ' + ', '.join(f.fault_kinds) if f.fault_kinds else ''} ({f.hits} hit(s))  -> "
                   f"{archive / 'findings' / f.signature}")
    sys.exit(1 if found else 0)


def _register_lazy_commands() -> None:
    from chaos.checkers.command import check
    from chaos.report.command import report

    main.add_command(check)
    if not report.epilog:
        report.epilog = ("\b\nExamples:\n  chaos report results --out report\n"
                         "  chaos report results --out report --timelines 10 --json\n"
                         "  chaos report results/shard-1 results/shard-2 --out report   # explore shards, merged\n"
                         "  chaos report hdfs://nn:8020/chaos/night-7 file:///data/run-8 --out report\n"
                         "\n\b\nArchives:\n"
                         "  a path, a file: URI, or any URI Spark's Hadoop reads (hdfs:, s3a: with hadoop-aws on\n"
                         "  Spark's classpath), copied into --out first and removed after. A run in two archives\n"
                         "  is refused; runs below an explore archive's findings/ are not counted, its\n"
                         "  findings/*/finding.json are (findings.csv, one row per signature). docs/report.md")
    report.short_help = report.short_help or "Build the reliability report (HTML, Parquet) over many runs."
    main.add_command(report)


_register_lazy_commands()

if __name__ == "__main__":  # pragma: no cover
    main()
