"""A recorded run, and the experiment that replays it: its faults as they actually fired.

A seed reproduces the *planned* schedule (``chaos plan``), but a rerun of the
same seed is not the same run: random targets are drawn among the members alive
at the moment, live triggers fire when the group reaches their state, and a
fault that was skipped (its trigger timed out, its target was gone) may fire the
next time. The replay experiment fixes what the recorded run did
(``faults.json``, written by the nemesis as faults fired):

* every fault that **fired** becomes one fault of its own (a ``random`` spec
  with ``count: 3`` that fired three times becomes three); one that did not
  fire is dropped and named in the replay's notes;
* a time trigger (``at_s``, ``random``) becomes ``at_s`` = the second of the
  chaos phase at which the fault took effect in the recorded run;
* a live trigger (``state``, ``on_revoked``, ``after_generation``,
  ``after_epoch``) still waits for its state — that is what the fault meant
  (a coordinator killed *while* the group completes a rebalance) — but not
  before :data:`LIVE_LEAD_S` ahead of the second it fired at, so it waits for
  the same rebalance, not an earlier one (that second also stands for an
  ``after_fault``, which is dropped: the replay's faults are listed in the order
  they fired, so its ``fN`` would name another fault);
* a ``random_member`` / ``random_broker`` target becomes the member / node it
  resolved to (``consumer-1``, ``broker-2``); a role (coordinator, partition
  leader, active controller, …) stays a role and is asked of the cluster again
  when the fault fires — the coordinator of the replay may be another broker,
  and the role is what the fault was about.

Everything else — cluster, workload, phases, checkers, and the seed (producers'
keys, the members' own randomness) — is the recorded run's own
(``resolved.json``, ``header.json``). ``chaos replay`` runs it;
:mod:`chaos.shrink` starts from it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from chaos.checkers.judge import CHECKS_FILE
from chaos.errors import UsageError
from chaos.experiment import parse_experiment
from chaos.history.merge import HEADER_FILE, HISTORY_FILE
from chaos.history.reader import parse_header_line
from chaos.model.experiment import Experiment
from chaos.model.target import Role

#: a replayed live trigger waits from this many seconds before the second it fired at in the recorded run
#: (a rebalance of the replay starts a little earlier or later than the recorded one: a few hundred ms on
#: loopback, measured over the soak's reruns; a second keeps it on the same rebalance)
LIVE_LEAD_S = 1.0

#: a random target becomes the fixed one it resolved to
_PINNED = {Role.RANDOM_MEMBER: Role.MEMBER, Role.RANDOM_BROKER: Role.NODE}


@dataclass(frozen=True)
class Verdict:
    """A run's verdict as ``checks.json`` has it: ``valid`` and the checkers that answered false."""

    valid: str
    failed: frozenset[str]

    def describe(self) -> str:
        return self.valid + (f" ({', '.join(sorted(self.failed))})" if self.failed else "")


@dataclass(frozen=True)
class RecordedRun:
    """What a run directory says about its run: the experiment as resolved, the seed, the faults as they
    fired, and the verdict."""

    run_dir: Path
    experiment: Experiment
    seed: int
    faults: tuple[dict[str, Any], ...]
    verdict: Verdict


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"{path.parent}: no {path.name} — give a run directory that `chaos run` wrote "
                         f"({what})") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: not valid JSON ({_first_line(exc)}); the run directory is damaged") from None


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def read_verdict(run_dir: Path) -> Verdict:
    """The verdict in ``run_dir/checks.json``."""
    checks = _read_json(Path(run_dir) / "checks.json", "it holds the verdict; an unjudged run has none")
    try:
        return Verdict(str(checks["valid"]),
                       frozenset(str(r["checker"]) for r in checks["results"] if r.get("valid") == "false"))
    except (KeyError, TypeError):
        raise UsageError(f"{run_dir}/checks.json: no `valid` and `results`; judge the run again with "
                         f"`chaos check {run_dir}`") from None


def check_history_header(run_dir: Path) -> None:
    """Refuse a run whose history this version cannot read — an unknown ``schema_version`` above all — as
    ``chaos check`` refuses it (:func:`chaos.history.reader.parse_header_line`, the error reading
    ``RUN: history.jsonl:1: ...``). Only the first line is read: a replay needs the run's experiment, faults
    and verdict, not its events."""
    path = run_dir / HISTORY_FILE
    try:
        with path.open("rb") as f:
            head = f.readline()
    except FileNotFoundError:
        raise UsageError(f"{run_dir}: no {HISTORY_FILE} — give a run directory that `chaos run` wrote and judged "
                         f"(its history says which event schema the run recorded)") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a directory, expected a {HISTORY_FILE} file; the run directory is damaged") from None
    parse_header_line(head, f"{run_dir}: {HISTORY_FILE}:1")


def load_recorded(run_dir: str | Path) -> RecordedRun:
    """Read a run directory; a missing or damaged file, or a history of another schema version, is a one-line
    UsageError naming it."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UsageError(f"{run_dir}: no such run directory (give one that `chaos run` wrote, "
                         f"e.g. runs/<experiment>/run-000-seed-N)")
    check_history_header(run_dir)
    resolved = _read_json(run_dir / "resolved.json", "the experiment as it ran")
    header = _read_json(run_dir / "header.json", "the run's seed")
    faults = _read_json(run_dir / "faults.json", "the faults as they fired")
    if not isinstance(faults, list) or not all(isinstance(f, dict) and "fault_id" in f for f in faults):
        raise UsageError(f"{run_dir}/faults.json: not a list of fault records; the run directory is damaged")
    seed = header.get("seed") if isinstance(header, dict) else None
    if not isinstance(seed, int):
        raise UsageError(f"{run_dir}/header.json: no integer `seed`; the run directory is damaged")
    if isinstance(resolved, dict):  # the run's own names, added to the experiment when it ran (a replay takes new ones)
        resolved = {k: v for k, v in resolved.items() if k not in ("topic", "group")}
    exp = parse_experiment(resolved, f"{run_dir}/resolved.json")
    return RecordedRun(run_dir, exp, seed, tuple(faults), read_verdict(run_dir))


#: files of a run directory, written as the run starts (header.json, by chaos.workload.run) or ends
#: (outcome.json, by chaos.runner, even when the run failed): a directory holding one is a recorded run
RUN_FILES = (HEADER_FILE, "resolved.json", "schedule.json", "faults.json", HISTORY_FILE, CHECKS_FILE, "outcome.json")


def recorded_run_around(path: str | Path) -> Path | None:
    """The recorded run directory that ``path`` is or lies inside (symlinks resolved; ``path`` need not exist),
    or None."""
    p = Path(path).resolve()
    for d in (p, *p.parents):
        if any((d / name).is_file() for name in RUN_FILES):
            return d
    return None


def refuse_out_in_run(out: str | Path, option: str = "--out") -> None:
    """A recorded run is evidence: no command writes into one (``chaos check``'s ``checks.rejudged.json`` is the
    one exception, and it takes no ``--out``). A one-line UsageError when ``out`` is, or lies inside, one."""
    run = recorded_run_around(out)
    if run is None:
        return
    try:
        shown: Path = run.relative_to(Path.cwd().resolve())
    except ValueError:
        shown = run
    shown = run if str(shown) == "." else shown
    where = "is" if run == Path(out).resolve() else "is inside"
    raise UsageError(f"{option} {out}: {where} the recorded run {shown}, and a recorded run is never written "
                     f"into (it is evidence): give a directory outside it")


def _spec_index(fault_id: str, count: int, run_dir: Path) -> int:
    """``f3`` / ``f3.1`` → 3, the position of the fault's spec in the experiment (:func:`chaos.nemesis.schedule.plan`)."""
    head = fault_id.split(".", 1)[0]
    if head.startswith("f") and head[1:].isdigit() and int(head[1:]) < count:
        return int(head[1:])
    raise UsageError(f"{run_dir}/faults.json: fault id {fault_id!r} names no fault of the experiment "
                     f"(it has {count}); the run directory does not match its resolved.json")


def as_fired(rec: RecordedRun) -> tuple[Experiment, list[str]]:
    """The replay experiment of ``rec`` (module docstring) and one note per fault dropped or kept as a role."""
    exp = rec.experiment
    faults: list[tuple[float, dict[str, Any]]] = []
    notes: list[str] = []
    for f in rec.faults:
        spec = exp.faults[_spec_index(str(f["fault_id"]), len(exp.faults), rec.run_dir)]
        if not f.get("fired") or f.get("start_s") is None:
            notes.append(f"{f['fault_id']} ({spec.type} {spec.target.value}) did not fire in the recorded "
                         f"run ({f.get('skipped_reason') or 'no reason recorded'}): left out")
            continue
        start = round(float(f["start_s"]), 3)
        data = spec.model_dump(mode="json", exclude_defaults=True)
        trig = spec.trigger
        if trig.at_s is not None or trig.random is not None:
            data["trigger"] = {"at_s": start}
        else:
            data["trigger"] = trig.model_dump(mode="json", exclude_defaults=True, exclude={"after_fault"}) | {
                "not_before_s": max(trig.not_before_s, round(start - LIVE_LEAD_S, 3))}
        nodes = f.get("nodes") or []
        if spec.target in _PINNED and len(nodes) == 1:
            data |= {"target": _PINNED[spec.target].value, "node": nodes[0]}
        faults.append((start, data))
    data = exp.model_dump(mode="json", exclude_defaults=True)
    data["faults"] = [d for _, d in sorted(faults, key=lambda p: p[0])]
    data["runs"] = 1
    data["description"] = (f"Replay of {rec.run_dir} (seed {rec.seed}, verdict {rec.verdict.describe()}): the "
                           f"faults as they fired.\n" + (exp.description or ""))
    return parse_experiment(data, f"replay of {rec.run_dir}"), notes


class _Dumper(yaml.SafeDumper):
    """PyYAML's safe dumper, writing a multi-line string as a ``|`` block (a description reads as written)."""


def _str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    style = "|" if "\n" in text and not any(line != line.rstrip() for line in text.splitlines()) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _str)


def experiment_yaml(exp: Experiment, comment: str = "") -> str:
    """``exp`` as an experiment file (fields at their defaults left out), with ``comment`` as a ``#`` header.

    The text is read back and compared before it is returned: a file that would load as another
    experiment is a bug, not something to hand a user.
    """
    data = exp.model_dump(mode="json", exclude_defaults=True)
    # the release it ran on, even when it is today's default: a committed file must not move with it
    data.setdefault("cluster", {})["kafka_version"] = exp.cluster.kafka_version
    text = "".join(f"# {line}".rstrip() + "\n" for line in comment.splitlines())
    text += yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=None, width=110)
    from chaos.spec_file import parse_text

    again = parse_experiment(parse_text(text, exp.name), exp.name)
    if again != exp:
        raise AssertionError(f"{exp.name}: the written experiment file does not load as the same experiment")
    return text
