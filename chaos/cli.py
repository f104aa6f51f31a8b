"""The ``chaos`` command line.

click is the CLI framework (well kept, composable groups); every command turns
:class:`chaos.errors.UsageError` into one line on stderr and exit code 2.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

from chaos.errors import UsageError


class _Group(click.Group):
    """A click group that maps UsageError to a one-line message and exit 2."""

    def invoke(self, ctx: click.Context):  # noqa: D401 - click hook
        try:
            return super().invoke(ctx)
        except UsageError as exc:
            click.echo(f"chaos: error: {exc}", err=True)
            sys.exit(2)
        except KeyboardInterrupt:
            click.echo("chaos: interrupted; everything started was stopped", err=True)
            sys.exit(130)


@click.group(cls=_Group)
@click.version_option(package_name="kafka-chaos")
def main() -> None:
    """Chaos and fault-injection testing for Kafka consumer groups."""


@main.command()
@click.option("--kafka-version", default=None, help="Kafka release to fetch (2.8.x-3.9.x; default 3.9.1).")
def setup(kafka_version: str | None) -> None:
    """Fetch Kafka jars (Maven Central) and build Toxiproxy (Go module proxy) into the cache."""
    from rich.console import Console

    from chaos.cluster import runtime

    console = Console(stderr=True)
    version = kafka_version or runtime.DEFAULT_KAFKA_VERSION
    runtime.validate_kafka_version(version)
    with console.status("setting up the runtime ...") as status:
        def progress(msg: str) -> None:
            status.update(msg)
            console.log(msg)

        runtime.java_binary()
        kafka = runtime.ensure_kafka(version, progress)
        tox = runtime.ensure_toxiproxy(progress)
    click.echo(f"ready: kafka {kafka.version} at {kafka.lib_dir}; toxiproxy {tox.version} at {tox.binary}")


@main.group(cls=_Group)
def cluster() -> None:
    """Start, inspect and stop a long-lived local cluster."""


@cluster.command("up")
@click.option("--brokers", default=3, show_default=True, type=int)
@click.option("--zookeepers", default=1, show_default=True, type=int, help="1 or 3 (ensemble)")
@click.option("--kafka-version", default=None)
@click.option("--lanes", default=2, show_default=True, type=int, help="client lanes (each with its own proxies)")
@click.option("--replication-factor", default=None, type=int, help="RF of internal topics (default min(3, brokers))")
@click.option("--base-port", default=None, type=int, help="use fixed ports from here instead of free ones")
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE", help="broker setting override (repeatable)")
@click.option("--json", "as_json", is_flag=True, help="print the status as JSON")
def cluster_up(brokers, zookeepers, kafka_version, lanes, replication_factor, base_port, overrides, as_json) -> None:
    """Start a cluster that keeps running after this command exits (stop it with `chaos cluster down`)."""
    from chaos.cluster.local import LocalCluster
    from chaos.cluster.runtime import DEFAULT_KAFKA_VERSION
    from chaos.cluster.topology import ClusterSpec

    parsed = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--override {item!r}: write KEY=VALUE, e.g. --override log.retention.ms=60000")
        parsed[key] = value
    spec = ClusterSpec.build(brokers=brokers, zookeepers=zookeepers, kafka_version=kafka_version or DEFAULT_KAFKA_VERSION,
                             lanes=lanes, replication_factor=replication_factor, base_port=base_port,
                             broker_overrides=parsed)
    c = LocalCluster(spec, detached=True)
    c.start()
    status = c.status()
    if as_json:
        click.echo(json.dumps(status, indent=2, default=str))
    else:
        click.echo(f"cluster {status['session']} up in {status['startup_seconds']:.1f} s")
        for lane, servers in status["bootstrap"].items():
            click.echo(f"  bootstrap {lane:5s} {servers}")
        click.echo(f"  toxiproxy {status['toxiproxy']['api']}   workdir {status['workdir']}")
        click.echo("stop it with: chaos cluster down")


@cluster.command("status")
@click.option("--json", "as_json", is_flag=True)
def cluster_status(as_json) -> None:
    """Show running clusters started with `chaos cluster up`, with every effective setting (--json)."""
    from chaos.process import ProcessRecord, detached_sessions

    out = []
    for d in detached_sessions():
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
        click.echo(f"cluster {status['session']}  kafka {status['kafka_version']}  bootstrap(ctl) {status['bootstrap']['ctl']}")
        for name, node in status["nodes"].items():
            click.echo(f"  {name:10s} pid {node['pid']:<8} {'running' if node['running'] else 'DOWN'}  log {node['log']}")


@cluster.command("down")
def cluster_down() -> None:
    """Stop every cluster started with `chaos cluster up` and delete its files."""
    from chaos.process import detached_sessions, stop_session_dir

    sessions = detached_sessions()
    for d in sessions:
        killed = stop_session_dir(d)
        click.echo(f"stopped {d.name}: {len(killed)} processes")
    if not sessions:
        click.echo("no cluster running")


@main.command()
@click.option("--out", default="out/demo", show_default=True, type=click.Path(path_type=Path))
@click.option("--records", default=3000, show_default=True, type=int)
def demo(out: Path, records: int) -> None:
    """Break and heal a real cluster, then run the headline experiment and show its verdict."""
    from chaos.demo import run_demo, run_headline

    run_demo(out, say=click.echo, records=records)
    sys.exit(run_headline(out, say=click.echo))


@main.command("list")
@click.option("--dir", "directory", default="experiments", show_default=True, type=click.Path(path_type=Path))
def list_experiments(directory: Path) -> None:
    """Show the experiment catalogue."""
    from chaos.experiment import catalogue

    entries = catalogue(directory)
    if not entries:
        raise UsageError(f"no experiments in {directory}/ (each is a .yaml file)")
    for path, exp in entries:
        if isinstance(exp, UsageError):
            click.echo(f"{path.stem:48s} INVALID: {exp}")
        else:
            kinds = ",".join(sorted({f.type.value for f in exp.faults})) or "none"
            click.echo(f"{exp.name:48s} faults: {kinds:28s} {exp.description.splitlines()[0] if exp.description else ''}")


@main.command()
@click.option("--out", default=None, type=click.Path(path_type=Path), help="write to a file instead of stdout")
def schema(out: Path | None) -> None:
    """Print the JSON Schema of experiment files (for editors)."""
    from chaos.experiment import json_schema

    text = json.dumps(json_schema(), indent=2)
    if out:
        out.write_text(text + "\n")
    else:
        click.echo(text)


@main.command()
@click.argument("experiment")
@click.option("--seed", default=1, show_default=True, type=int)
def plan(experiment: str, seed: int) -> None:
    """Print the fault schedule a seed gives (no cluster needed)."""
    from chaos.experiment import load_experiment
    from chaos.nemesis.schedule import plan as make_plan, timeline

    click.echo(json.dumps(timeline(make_plan(load_experiment(experiment), seed)), indent=1))


@main.command()
@click.argument("experiments", nargs=-1)
@click.option("--runs", default=None, type=click.IntRange(1, 10000), help="runs per experiment (default: its `runs`)")
@click.option("--seed", default=None, type=int, help="seed of the first run (run k uses seed+k); default random")
@click.option("--out", default=None, type=click.Path(path_type=Path),
              help="where run directories go (default runs/, or results/ with --nightly)")
@click.option("--kafka-version", default=None, help="override the experiments' Kafka version")
@click.option("--backend", default=None, type=click.Choice(["local", "docker"]),
              help="override the experiments' cluster backend (docker: containers on kafka-chaos's own engine)")
@click.option("--nightly", is_flag=True, help="run the whole catalogue (or EXPERIMENTS) in rounds with fresh seeds "
                                              "until --budget is spent; archive under OUT/<date>/")
@click.option("--budget", default="60m", show_default=True, help="time budget of --nightly (e.g. 60m, 2h)")
@click.option("--json", "as_json", is_flag=True, help="print outcomes as JSON")
def run(experiments, runs, seed, out, kafka_version, backend, nightly, budget, as_json) -> None:
    """Run experiments against real clusters; exit 0 valid, 1 invariant failed, 2 bad input/infrastructure, 3 unknown."""
    from rich.console import Console

    from chaos.experiment import catalogue, load_experiment
    from chaos.runner import exit_code, parse_budget, run_experiments, run_nightly

    if not experiments and not nightly:
        raise UsageError("name at least one experiment (see `chaos list`), or use --nightly for the whole catalogue")
    if experiments:
        exps = [load_experiment(e) for e in experiments]
    else:
        entries = catalogue("experiments")
        bad = [f"{p}: {e}" for p, e in entries if isinstance(e, UsageError)]
        if bad:
            raise UsageError(f"invalid catalogue entry: {bad[0]}")
        exps = [e for _, e in entries]
        if not exps:
            raise UsageError("no experiments in experiments/: run from the project directory or name the files")
    if kafka_version:
        exps = [e.with_overrides(**{"cluster.kafka_version": kafka_version}) for e in exps]
    if backend:
        exps = [e.with_overrides(backend=backend) for e in exps]
    budget_s = parse_budget(budget) if nightly else 0.0
    total = "?" if nightly else sum(runs or e.runs for e in exps)
    console = Console(stderr=True)
    done = {"n": 0}
    t_start = time.monotonic()

    def started(exp, k, s):
        left = f", {max(0, budget_s - (time.monotonic() - t_start)) / 60:.0f} min of budget left" if nightly else ""
        console.log(f"[{done['n'] + 1}/{total}] {exp.name} run {k} seed {s}{left} ...")

    def finished(oc):
        done["n"] += 1
        mark = "ok" if oc.exit_code == 0 else ("ERROR" if oc.valid == "error" else "FAIL")
        extra = oc.error or (", ".join(oc.failed_checkers) if oc.failed_checkers else "")
        if not as_json:
            click.echo(f"{mark:5s} {oc.experiment} run {oc.index} seed {oc.seed} verdict {oc.valid} "
                       f"{oc.wall_s:.1f}s {extra}  -> {oc.run_dir}")

    if nightly:
        outcomes = run_nightly(exps, out or Path("results"), budget_s, seed=seed, on_run=finished, on_start=started)
        console.log(f"nightly: {len(outcomes)} runs, {sum(o.expected for o in outcomes)} as expected; "
                    f"archived under {out or Path('results')}")
    else:
        outcomes = run_experiments(exps, out or Path("runs"), runs=runs, seed=seed, on_run=finished, on_start=started)
    if as_json:
        from dataclasses import asdict
        click.echo(json.dumps([asdict(o) for o in outcomes], indent=1))
    sys.exit(exit_code(outcomes))


def _register_lazy_commands() -> None:
    from chaos.checkers.command import check
    from chaos.report.command import report

    main.add_command(check)
    main.add_command(report)


_register_lazy_commands()

if __name__ == "__main__":  # pragma: no cover
    main()
