"""Finding run directories in a results archive, and their small per-run files.

Two layouts are understood (and may be mixed in one archive):

- ``RESULTS/<experiment>/run-<k>-seed-<s>/`` (``chaos run``): the night is the
  UTC date of the run's first event;
- ``RESULTS/<YYYY-MM-DD>/<experiment>/run-<k>-seed-<s>/`` (nightly mode): the
  night is the date directory.

Between the experiment and the run directory a version directory may stand (a version matrix,
``chaos run`` over several Kafka versions): ``RESULTS/<experiment>/4.1.1/run-<k>-seed-<s>/``. A path
component that equals the run's Kafka version (header ``versions.kafka``) or looks like a version
(``4.1.1``, ``3.9.1-rc1``, ``kafka-4.1.1``) is never taken for the experiment.

A run directory is any directory holding ``history.jsonl``. Its header line,
``checks.json`` (the per-run checkers' verdict), ``outcome.json`` and
``faults.json`` are small and read here with Python; the events themselves are
parsed by Spark (:mod:`chaos.report.tables`).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import orjson

from chaos.checkers.judge import CHECKS_FILE
from chaos.errors import UsageError
from chaos.history import HISTORY_FILE
from chaos.history.reader import parse_header_line

OUTCOME_FILE = "outcome.json"
FAULTS_FILE = "faults.json"
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
#: a directory named after a version (a version matrix's level): ``4.1.1``, ``v3.9``, ``4.2.0-rc1``, ``kafka-4.1.1``
_VERSION_DIR = re.compile(r"(?:kafka[-_]?)?v?\d+(?:\.\d+)+(?:[-+.~][0-9A-Za-z.]+)?", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class RunDir:
    """One run directory: where it is and what the layout says about it.

    ``run`` is the key every table joins on (header run ids alone are not unique across an archive:
    simulated and hand-made runs reuse them). It is ``<date>/<experiment>/<run dir name>`` when no other
    run of the archive has the same three; when several have (a version matrix: one experiment and seed on
    two Kafka versions), each gets ``[dimension=value,...]`` appended: the header dimensions that tell it
    apart from the others (:data:`KEY_DIMENSIONS`, :func:`_qualifiers`), e.g.
    ``2026-11-20/baseline/run-000-seed-5[kafka=4.1.1]``. Two directories whose headers agree on all of them
    (run id, seed, every version) are one run twice: :func:`discover` refuses them.
    """

    path: Path
    date: str
    experiment: str
    name: str
    date_from_layout: bool
    #: ``dimension=value,...`` that sets this run apart from others of the same name (empty when none has it)
    qualifier: str = ""

    @property
    def run(self) -> str:
        base = f"{self.date}/{self.experiment}/{self.name}"
        return f"{base}[{self.qualifier}]" if self.qualifier else base

    @property
    def history(self) -> Path:
        return self.path / HISTORY_FILE


@dataclass(frozen=True, slots=True)
class RunFiles:
    """The small files of one run, parsed."""

    run_dir: RunDir
    header: Mapping[str, Any]
    first_ts: float | None
    checks: Mapping[str, Any] | None
    outcome: Mapping[str, Any] | None
    faults: tuple[Mapping[str, Any], ...]
    #: ``mono_ns`` of the first event (the run's smallest: a history is in ``mono_ns`` order), None if unreadable
    first_ns: int | None = None
    #: the start of a torn last line (see :func:`_torn_tail`), which the report drops as the reader does
    torn_tail: str | None = None


def _history_dirs(results: Path) -> Iterator[Path]:
    for path in sorted(results.rglob(HISTORY_FILE)):
        if path.is_file() and path.parent.name != "events":
            yield path.parent


def _read_head(history: Path) -> tuple[Mapping[str, Any], float | None, int | None]:
    """The header object and the first event's ``ts`` and ``mono_ns`` (None for a history without events)."""
    with history.open("rb") as f:
        first = f.readline()
        second = f.readline()
    parse_header_line(first, f"{history}:1")
    header = orjson.loads(first)
    ts, ns = None, None
    if second.strip():
        try:
            first = orjson.loads(second)
            ts, ns = float(first["ts"]), int(first["mono_ns"])
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            ts, ns = None, None  # judged later by Spark, which names the line
    return header, ts, ns


#: the prefix of a torn line that the report matches it by (ASCII: Spark and Python decode it alike)
TORN_PREFIX_CHARS = 64


def _torn_tail(history: Path) -> str | None:
    """The start of the file's torn last line, or None.

    The rule of :func:`chaos.history.read_history`: a last line without a newline that is not
    valid JSON is the in-flight event of a killed writer, dropped with a note. Only the last
    64 KiB are read (an event line is far shorter).
    """
    size = history.stat().st_size
    with history.open("rb") as f:
        f.seek(max(size - (64 << 10), 0))
        tail = f.read()
    if not tail or tail.endswith(b"\n"):
        return None
    last = tail.rsplit(b"\n", 1)[-1]
    try:
        orjson.loads(last)
        return None
    except orjson.JSONDecodeError:
        pass
    text = last.decode("utf-8", errors="replace")[:TORN_PREFIX_CHARS]
    ascii_end = next((i for i, c in enumerate(text) if not c.isascii()), len(text))
    return text[:ascii_end]


def _night(ts: float | None) -> str:
    if ts is None:
        return "unknown"
    return dt.datetime.fromtimestamp(ts, dt.UTC).date().isoformat()


def _kafka_version(header: Mapping[str, Any]) -> str | None:
    versions = header.get("versions")
    v = versions.get("kafka") if isinstance(versions, dict) else None
    return str(v) if v is not None else None


def _is_version_dir(part: str, header: Mapping[str, Any]) -> bool:
    """A path component that names a version (a version matrix's level), not an experiment."""
    return part == _kafka_version(header) or _VERSION_DIR.fullmatch(part) is not None


def _experiment_from_layout(rel: tuple[str, ...], header: Mapping[str, Any]) -> str | None:
    """The experiment the directories above the run name: the nearest that is no version; None below a date."""
    for part in reversed(rel[:-1]):
        if _is_version_dir(part, header):
            continue
        return None if _DATE.fullmatch(part) else part
    return None


def _client_label(client: Any, version: Any) -> str:
    """``"<client> <version>"`` as the runs table's ``client_versions`` spells it (the version without the
    ``" (librdkafka ...)"`` remark); the client alone when no version is known."""
    v = str(version).split(" (", 1)[0].strip() if version is not None else ""
    return f"{client} {v}" if v else str(client)


def header_client_versions(header: Mapping[str, Any]) -> str | None:
    """The client versions the header says the members were started on (``header["member_clients"]``), or None.

    ``{"consumer-1": {"client": "confluent-kafka", "client_version": "2.12.0" | null, "library": {...}}}``:
    a null ``client_version`` is the default pinned library, whose version ``library`` gives (its entry named
    after the client, or its only entry: Java's ``kafka-clients``), ``default`` when it gives none.
    Spelled as the runs table's ``client_versions`` (sorted distinct ``"<client> <version>"`` joined by
    ``+``). Runs older than the field have none.
    """
    members = header.get("member_clients")
    if not isinstance(members, dict):
        return None
    labels = set()
    for m in members.values():
        if not isinstance(m, dict) or not m.get("client"):
            continue
        version = m.get("client_version")
        library = m.get("library")
        library = library if isinstance(library, dict) else {}
        if version is None:
            version = library.get(m["client"]) or (next(iter(library.values())) if len(library) == 1 else None)
        labels.add(_client_label(m["client"], version if version is not None else "default"))
    return "+".join(sorted(labels)) or None


#: the header dimensions that tell apart runs of the same ``<date>/<experiment>/<run dir name>``, in the order
#: they are tried (see :func:`discover`): Kafka version, the members' client versions (``header["member_clients"]``),
#: each other entry of ``versions`` (client libraries, Python, kafka-chaos and its commit), the seed, the run id
KEY_DIMENSIONS = ("kafka", "clients", "versions", "seed", "run_id")


def _dimensions(header: Mapping[str, Any]) -> list[tuple[str, str | None]]:
    """(name, value) of every identity dimension of a run header, in :data:`KEY_DIMENSIONS` order."""
    versions = header.get("versions")
    versions = versions if isinstance(versions, dict) else {}
    out: list[tuple[str, str | None]] = [("kafka", _kafka_version(header)),
                                         ("clients", header_client_versions(header))]
    out += [(k, None if versions[k] is None else str(versions[k])) for k in sorted(versions) if k != "kafka"]
    seed = header.get("seed")
    out += [("seed", None if seed is None else str(seed)), ("run_id", str(header.get("run_id")))]
    return out


def _qualifiers(group: list[RunFiles]) -> list[str]:
    """For runs sharing one ``<date>/<experiment>/<name>``: the ``dim=value,...`` of each (same order).

    The dimensions are tried in :data:`KEY_DIMENSIONS` order; one that differs within a set of runs not yet
    told apart is added to those runs' qualifiers, until every run is told apart. So a run carries only what
    it takes: ``[kafka=4.1.1]`` beside ``[kafka=4.1.2,run_id=...]`` when two runs were on 4.1.2. Runs whose
    headers agree on every dimension are the same run: their qualifiers are equal (the caller refuses them).
    """
    dims = [dict(_dimensions(rf.header)) for rf in group]
    names: list[str] = []
    for d in dims:
        names += [n for n in d if n not in names]
    quals: list[list[tuple[str, str | None]]] = [[] for _ in dims]
    for name in names:
        buckets: dict[tuple[tuple[str, str | None], ...], list[int]] = {}
        for i, q in enumerate(quals):
            buckets.setdefault(tuple(q), []).append(i)
        ambiguous = [b for b in buckets.values() if len(b) > 1]
        if not ambiguous:
            break
        for b in ambiguous:
            if len({dims[i].get(name) for i in b}) > 1:
                for i in b:
                    quals[i].append((name, dims[i].get(name)))
    return [",".join(f"{n}={'unknown' if v is None else v}" for n, v in q) for q in quals]


def _experiment_name(header: Mapping[str, Any], fallback: str) -> str:
    exp = header.get("experiment") or {}
    for key in ("name", "fixture"):
        v = exp.get(key) if isinstance(exp, dict) else None
        if isinstance(v, str) and v:
            return v
    return fallback


def _load_json(path: Path) -> Any:
    try:
        return orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"{path}: not valid JSON ({exc.msg}); re-run `chaos check {path.parent}` "
                         "or delete the file") from None


def discover(results: Path) -> list[RunFiles]:
    """Every run directory under ``results`` with its small files; bad input raises ``UsageError``."""
    if not results.exists():
        raise UsageError(f"{results}: no such results directory")
    if not results.is_dir():
        raise UsageError(f"{results}: not a directory; give the directory that holds the run directories")
    out: list[RunFiles] = []
    for path in _history_dirs(results):
        rel = path.relative_to(results).parts
        header, first_ts, first_ns = _read_head(path / HISTORY_FILE)
        date = next((p for p in rel[:-1] if _DATE.fullmatch(p)), None)
        from_layout = date is not None
        if date is None:
            date = _night(first_ts)
        experiment = (_experiment_from_layout(rel, header)
                      or _experiment_name(header, results.name if not rel else "unnamed"))
        name = rel[-1] if rel else path.name
        run_dir = RunDir(path, date, experiment, name, from_layout)
        checks = _load_json(path / CHECKS_FILE)
        outcome = _load_json(path / OUTCOME_FILE)
        faults = _load_json(path / FAULTS_FILE) or []
        if not isinstance(faults, list):
            raise UsageError(f"{path / FAULTS_FILE}: expected a list of fault records")
        out.append(RunFiles(run_dir, header, first_ts, checks, outcome, tuple(faults), first_ns,
                            _torn_tail(path / HISTORY_FILE)))
    if not out:
        raise UsageError(f"{results}: no runs found (no */history.jsonl below it); point at a results directory "
                         "written by `chaos run`, or run `chaos check RUN_DIR` on runs that only have events/")
    return _keyed(out, results)


def _keyed(runs: list[RunFiles], results: Path) -> list[RunFiles]:
    """The runs with their run keys told apart (:attr:`RunDir.run`); two copies of one run raise ``UsageError``.

    Runs sharing ``<date>/<experiment>/<run dir name>`` get the header dimensions that differ between them
    appended (:func:`_qualifiers`); runs whose headers agree on all of them (run id, seed, every version, the
    members' client versions) are the same run twice.
    """
    groups: dict[str, list[int]] = {}
    for i, rf in enumerate(runs):
        groups.setdefault(rf.run_dir.run, []).append(i)
    out = list(runs)
    for indices in groups.values():
        if len(indices) < 2:
            continue
        group = [runs[i] for i in indices]
        for i, qualifier in zip(indices, _qualifiers(group), strict=True):
            out[i] = replace(runs[i], run_dir=replace(runs[i].run_dir, qualifier=qualifier))
    keys: dict[str, RunFiles] = {}
    for rf in out:
        prev = keys.setdefault(rf.run_dir.run, rf)
        if prev is not rf:
            h = rf.header
            raise UsageError(
                f"{prev.run_dir.path} and {rf.run_dir.path} hold the same run (header run_id {h.get('run_id')!s}, "
                f"seed {h.get('seed')!s}, Kafka {_kafka_version(h) or 'unknown'}, the same versions): both map to the "
                f"run key {rf.run_dir.run}; move the copy out of {results}, or give each run its own directory name")
    return out
