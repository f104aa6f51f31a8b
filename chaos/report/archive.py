"""Finding run directories in results archives, and their small per-run files.

``chaos report`` reads one or more *archives* (:class:`Archive`): a local directory, a ``file:`` URI (read as
that local path), or any other URI Spark's Hadoop reads (``hdfs:``, ``s3a:``, ...), which is first copied into
a local staging directory (:func:`stage`; only the files the report reads). Their runs are merged into one
report: run keys do not depend on the archive's root or on where it was staged, and two archives holding one
run are refused like two copies of a run in one archive (:func:`_keyed`).

Two layouts are understood (and may be mixed in one archive):

- ``RESULTS/<experiment>/run-<k>-seed-<s>/`` (``chaos run``, ``chaos explore``): the night is the
  UTC date of the run's first event;
- ``RESULTS/<YYYY-MM-DD>/<experiment>/run-<k>-seed-<s>/`` (nightly mode): the
  night is the date directory.

Between the experiment and the run directory a version directory may stand (a version matrix,
``chaos run`` over several Kafka versions): ``RESULTS/<experiment>/4.1.1/run-<k>-seed-<s>/``. A path
component that equals the run's Kafka version (header ``versions.kafka``) or looks like a version
(``4.1.1``, ``3.9.1-rc1``, ``kafka-4.1.1``) is never taken for the experiment.

A run directory is any directory holding ``history.jsonl``, except those below an explore archive's
``findings/`` directory (:func:`_findings_dir`: the archive's own ``findings/``, or one beside an
``explore.json`` deeper down, as in a directory of shard archives): those are the hard-linked copy of a red run
counted already, its replay and the shrink's candidate runs, not runs of the exploration. What is read there is
each ``findings/<signature>/finding.json`` (:class:`FindingFile`), and every ``explore.json``
(:class:`Exploration`). A run's header line, ``checks.json`` (the per-run checkers' verdict), ``outcome.json``
and ``faults.json`` are small and read here with Python; the events themselves are parsed by Spark
(:mod:`chaos.report.tables`).
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import tempfile
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import orjson

from chaos.checkers.judge import CHECKS_FILE
from chaos.errors import UsageError
from chaos.history import HISTORY_FILE
from chaos.history.reader import parse_header_line

OUTCOME_FILE = "outcome.json"
FAULTS_FILE = "faults.json"
#: an explore archive's summary, its findings directory and each finding's file (the names chaos.explore.search
#: writes; not imported from there: the report needs none of the explorer's dependencies)
EXPLORE_FILE = "explore.json"
FINDINGS_DIR = "findings"
FINDING_FILE = "finding.json"
#: the files of a run directory the report reads: all a staged copy of a run holds (:func:`stage`)
RUN_FILES = (HISTORY_FILE, CHECKS_FILE, OUTCOME_FILE, FAULTS_FILE)
#: ``scheme:/...``: a URI, not a local path (two letters at least: ``C:/`` is a drive)
_URI = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+):/")
#: the URI schemes read as local paths, not through Hadoop (a test empties it to force the Hadoop path)
_LOCAL_SCHEMES = frozenset({"file"})
#: the Hadoop connector that provides a scheme's FileSystem, for the schemes whose connector is Hadoop's own
#: (released with Hadoop, so the version is the Spark session's Hadoop version)
_CONNECTORS = {"s3a": "hadoop-aws", "abfs": "hadoop-azure", "abfss": "hadoop-azure", "wasb": "hadoop-azure",
               "wasbs": "hadoop-azure"}
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
    #: the ARCHIVE argument the run was found below, as given (None: discovered on its own, :func:`discover`)
    archive: str | None = None
    #: the run directory as its archive's URI names it, when ``path`` is a staged copy (removed after the
    #: report); None when ``path`` is the run directory itself
    origin: str | None = None

    @property
    def location(self) -> str:
        """Where the run directory is, as the user would name it: ``path``, or the URI it was copied from."""
        return self.origin if self.origin is not None else str(self.path)

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


@dataclass(frozen=True, slots=True)
class Archive:
    """One ARCHIVE of ``chaos report``: as given, and the local directory its files are read from."""

    #: as given on the command line (a path or a URI)
    given: str
    #: the local directory read: the archive itself, or its staged copy (:func:`stage`)
    root: Path
    #: the URI ``root`` is a staged copy of; None when ``root`` is the archive itself
    uri: str | None = None

    def location(self, rel: Sequence[str]) -> str:
        """``rel`` (a path below the archive) where it is: below ``root``, or below the URI it was copied from."""
        if self.uri is None:
            return str(self.root.joinpath(*rel))
        return "/".join([self.uri.rstrip("/"), *rel])

    def named(self, rel: Sequence[str]) -> str:
        """``rel`` below the archive as given (a ``file:`` archive's stays a ``file:`` URI)."""
        if _URI.match(self.given):
            return "/".join([self.given.rstrip("/"), *rel])
        return str(Path(self.given, *rel))


def _findings_dir(parent: tuple[str, ...], beside_explore: bool) -> bool:
    """Whether the directory ``findings`` in ``parent`` (a path below the archive) is an explore archive's
    findings directory, whose runs are not counted: the archive's own, or one beside an ``explore.json``."""
    return not parent or beside_explore


def _scan(root: Path) -> tuple[list[Path], list[Path], list[Path]]:
    """The ``history.jsonl``, ``explore.json`` and ``findings/<signature>/finding.json`` files below ``root``
    (each list sorted).

    A findings directory (:func:`_findings_dir`) is not descended into: only its ``*/finding.json`` are listed.
    A ``history.jsonl`` in a directory named ``events`` is a member's event file, not a run's history.
    """
    histories: list[Path] = []
    explores: list[Path] = []
    findings: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if FINDINGS_DIR in dirnames and _findings_dir(here.relative_to(root).parts, EXPLORE_FILE in filenames):
            dirnames.remove(FINDINGS_DIR)
            found = here / FINDINGS_DIR
            findings += [found / sig / FINDING_FILE for sig in os.listdir(found)
                         if (found / sig / FINDING_FILE).is_file()]
        if HISTORY_FILE in filenames and here.name != "events" and (here / HISTORY_FILE).is_file():
            histories.append(here / HISTORY_FILE)
        if EXPLORE_FILE in filenames and (here / EXPLORE_FILE).is_file():
            explores.append(here / EXPLORE_FILE)
    return sorted(histories), sorted(explores), sorted(findings)


def _wanted(files: Collection[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """Of an archive's files (paths below it, as a listing gives them), those the report reads, sorted: each run
    directory's :data:`RUN_FILES`, every ``explore.json``, each ``findings/<signature>/finding.json`` of a
    findings directory (:func:`_findings_dir`), as :func:`_scan` finds them in a local directory."""
    explore_dirs = {f[:-1] for f in files if f[-1] == EXPLORE_FILE}

    def findings_at(d: tuple[str, ...]) -> int | None:
        """The index of the findings directory in ``d`` (a directory below the archive), None when outside one."""
        return next((i for i, part in enumerate(d) if part == FINDINGS_DIR and _findings_dir(d[:i], d[:i] in explore_dirs)),
                    None)

    runs = {f[:-1] for f in files
            if f[-1] == HISTORY_FILE and f[-2:-1] != ("events",) and findings_at(f[:-1]) is None}
    out = []
    for f in files:
        d, name = f[:-1], f[-1]
        at = findings_at(d)
        if at is None and ((d in runs and name in RUN_FILES) or name == EXPLORE_FILE):
            out.append(f)
        elif at is not None and name == FINDING_FILE and len(d) == at + 2:
            out.append(f)
    return sorted(out)


def archive_roots(givens: Sequence[str]) -> list[Path | None]:
    """The local directory of each ARCHIVE (a path, or a ``file:`` URI read as its path), None for a URI read
    through Hadoop (:func:`stage`). A local one that is missing or not a directory, an archive given twice and
    one inside another (their runs would count twice) are refused."""
    roots: list[Path | None] = []
    for given in givens:
        m = _URI.match(given)
        if m is None:
            root: Path | None = Path(given)
        elif m.group(1).lower() not in _LOCAL_SCHEMES:
            root = None
        else:
            parts = urlsplit(given)
            if parts.netloc not in ("", "localhost"):
                raise UsageError(f"{given}: a file: URI names a path on this machine (file:///PATH); read another "
                                 "host's archive through a filesystem both share")
            root = Path(unquote(parts.path))
        if root is not None:
            check_archive_dir(root, given)
        roots.append(root)
    for i, (given, root) in enumerate(zip(givens, roots, strict=True)):
        for other, other_root in zip(givens[:i], roots[:i], strict=True):
            if root is None or other_root is None:
                if root is None and other_root is None and given.rstrip("/") == other.rstrip("/"):
                    raise UsageError(f"{given}: given twice; give each archive once")
                continue
            a, b = root.resolve(), other_root.resolve()
            if a == b:
                raise UsageError(f"{given} and {other}: the same archive given twice; give each archive once")
            if a.is_relative_to(b) or b.is_relative_to(a):
                inner, outer = (given, other) if a.is_relative_to(b) else (other, given)
                raise UsageError(f"{inner} is inside {outer}: its runs would be read twice; give only {outer}, or "
                                 f"only the archives inside it")
    return roots


def check_archive_dir(root: Path, given: str) -> None:
    """A local archive must be an existing directory."""
    if not root.exists():
        raise UsageError(f"{given}: no such results directory")
    if not root.is_dir():
        raise UsageError(f"{given}: not a directory; give the directory that holds the run directories")


# --------------------------------------------------------------------------- archives read through Hadoop

def _java_error(exc: BaseException) -> tuple[str, str] | None:
    """(class name, first line of the message) of the Java exception behind a py4j call's error, or None."""
    java = getattr(exc, "java_exception", None)
    if java is None:
        return None
    message = str(java.getMessage() or "").strip()
    return str(java.getClass().getName()), (message.splitlines() or [""])[0][:200]


def _no_filesystem(uri: str, scheme: str, hadoop: str, missing_class: str | None) -> str:
    """The one line for a scheme the Spark session's Hadoop has no usable FileSystem for."""
    connector = _CONNECTORS.get(scheme.lower())
    why = (f"its FileSystem class {missing_class} is not on the classpath" if missing_class
           else f"Hadoop {hadoop} has no FileSystem registered for it")
    package = f"org.apache.hadoop:{connector}:{hadoop}" if connector else "GROUP:ARTIFACT:VERSION"
    what = "its Hadoop connector" if connector else "the Hadoop connector that provides it"
    return (f"{uri}: Spark has no filesystem for scheme {scheme} ({why}); add {what} to the Spark session "
            f"(spark-submit --packages {package} reports/build_report.py ..., or for chaos report "
            f"PYSPARK_SUBMIT_ARGS='--packages {package} pyspark-shell'), or copy the archive to a local path")


def hadoop_filesystem(spark: Any, uri: str) -> tuple[Any, Any]:
    """(Hadoop FileSystem, Hadoop Path) of ``uri`` in the Spark session's Hadoop configuration (a py4j view of
    ``Path(uri).getFileSystem(hadoopConfiguration)``). A scheme it has no FileSystem for, or whose FileSystem
    class is not on the JVM's classpath (``s3a`` without ``hadoop-aws``), raises ``UsageError``."""
    jvm = spark._jvm
    m = _URI.match(uri)
    scheme = m.group(1) if m else urlsplit(uri).scheme
    try:
        path = jvm.org.apache.hadoop.fs.Path(uri)
        return path.getFileSystem(spark._jsc.hadoopConfiguration()), path
    except Exception as exc:  # noqa: BLE001 - py4j wraps the Java exception; anything else is a bug, re-raised
        java = _java_error(exc)
        if java is None:
            raise
        cls, message = java
        missing = re.search(r"ClassNotFoundException: Class (\S+) not found", message)
        if cls == "org.apache.hadoop.fs.UnsupportedFileSystemException" or missing:
            hadoop = str(jvm.org.apache.hadoop.util.VersionInfo.getVersion())
            raise UsageError(_no_filesystem(uri, scheme, hadoop, missing.group(1) if missing else None)) from None
        raise UsageError(f"{uri}: Spark cannot open its filesystem ({cls}: {message})") from None


@contextmanager
def _hadoop_errors(uri: str) -> Iterator[None]:
    """A Java exception of a Hadoop call on ``uri`` as a one-line ``UsageError``."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - py4j wraps the Java exception; anything else is a bug, re-raised
        java = _java_error(exc)
        if java is None:
            raise
        if java[0] == "java.io.FileNotFoundException":
            raise UsageError(f"{uri}: no such results directory") from None
        raise UsageError(f"{uri}: cannot be read through Hadoop ({java[0]}: {java[1]})") from None


def stage(spark: Any, uri: str, into: Path) -> Archive:
    """Copy the archive at ``uri`` into the local directory ``into`` through the Spark session's Hadoop
    FileSystem (:func:`hadoop_filesystem`); the archive read from the copy.

    Only what the report reads is copied (:func:`_wanted`: each run's :data:`RUN_FILES`, ``explore.json``,
    ``finding.json``), not node logs nor the runs below ``findings/``. The copy is ``into/<the URI's last path
    component>``, so a run's key (which falls back to the archive's name only for a run directory given as the
    archive) is the same as the archive's read in place. The caller removes ``into``.
    """
    fs, path = hadoop_filesystem(spark, uri)
    jvm = spark._jvm
    with _hadoop_errors(uri):
        root = fs.makeQualified(path)
        if not fs.getFileStatus(root).isDirectory():
            raise UsageError(f"{uri}: not a directory; give the directory that holds the run directories")
        prefix = str(root.toString()).rstrip("/") + "/"
        listed: dict[tuple[str, ...], Any] = {}
        files = fs.listFiles(root, True)
        while files.hasNext():
            file_path = files.next().getPath()
            name = str(file_path.toString())
            if name.startswith(prefix):
                listed[tuple(name[len(prefix):].split("/"))] = file_path
        dest = into / (str(root.getName()) or "archive")
        dest.mkdir(parents=True)
        for rel in _wanted(listed):
            local = dest.joinpath(*rel)
            local.parent.mkdir(parents=True, exist_ok=True)
            # raw local filesystem: no .crc files beside the copies
            fs.copyToLocalFile(False, listed[rel], jvm.org.apache.hadoop.fs.Path(jvm.java.net.URI(local.as_uri())), True)
    return Archive(uri, dest, uri)


@contextmanager
def staging_dir(out: Path) -> Iterator[Path]:
    """A directory for staged archives inside ``out`` (created), removed when the block ends however it ends
    (an error, Ctrl-C).

    Inside the report directory rather than ``/tmp``: the executors of a cluster master read the histories
    where the driver put them, and ``REPORT`` is on the filesystem they share (docs/report.md).
    """
    out.mkdir(parents=True, exist_ok=True)
    where = Path(tempfile.mkdtemp(prefix=".staged-archives-", dir=out))
    try:
        yield where
    finally:
        shutil.rmtree(where, ignore_errors=True)


def _read_head(history: Path, where: str | None = None) -> tuple[Mapping[str, Any], float | None, int | None]:
    """The header object and the first event's ``ts`` and ``mono_ns`` (None for a history without events);
    ``where`` names the file in a message (default its path)."""
    with history.open("rb") as f:
        first = f.readline()
        second = f.readline()
    parse_header_line(first, f"{where or history}:1")
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


def _load_json(path: Path, where: str | None = None) -> Any:
    """A run's small JSON file, None when it has none; ``where`` names it in a message (default its path)."""
    try:
        return orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except orjson.JSONDecodeError as exc:
        where = where or str(path)
        raise UsageError(f"{where}: not valid JSON ({exc.msg}); re-run `chaos check {where.rsplit('/', 1)[0]}` "
                         "or delete the file") from None


@dataclass(frozen=True, slots=True)
class FindingFile:
    """One ``findings/<signature>/finding.json`` of an archive, its fields checked (:data:`FINDING_FIELDS`)."""

    archive: Archive
    #: the finding's directory below the archive: ``(..., "findings", "<signature>")``
    rel: tuple[str, ...]
    finding: Mapping[str, Any]

    @property
    def explore_dir(self) -> tuple[str, ...]:
        """The explore archive's directory below the archive (``()``: the archive itself)."""
        return self.rel[:-2]


@dataclass(frozen=True, slots=True)
class Exploration:
    """One ``explore.json``: the summary of one ``chaos explore`` invocation (a JSON object)."""

    archive: Archive
    #: its directory below the archive (``()``: the archive itself)
    rel: tuple[str, ...]
    summary: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Contents:
    """What the report reads of its archives: the runs (keyed across all archives), the findings, the explorations."""

    runs: list[RunFiles]
    findings: list[FindingFile] = field(default_factory=list)
    explorations: list[Exploration] = field(default_factory=list)


def _is_count(v: Any, least: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= least


#: the fields of finding.json the report reads: (test, what it must be)
FINDING_FIELDS: dict[str, tuple[Any, str]] = {
    "signature": (lambda v: isinstance(v, str) and v.strip() != "", "a non-empty string"),
    "checkers": (lambda v: isinstance(v, list) and all(isinstance(c, str) for c in v), "a list of checker names"),
    "fault_kinds": (lambda v: isinstance(v, list) and all(isinstance(c, str) for c in v), "a list of fault kinds"),
    "finding_class": (lambda v: isinstance(v, str) and v != "", "a non-empty string"),
    "workload": (lambda v: isinstance(v, str), "a string"),
    "first_run": (lambda v: isinstance(v, str), "a path below the archive"),
    "shard": (lambda v: v is None or isinstance(v, str), "null or K/N"),
    "minimal": (lambda v: v is None or isinstance(v, str), "null or a file name"),
    "minimal_failed_runs": (lambda v: _is_count(v, 0), "a whole number >= 0"),
    "minimal_runs": (lambda v: _is_count(v, 0), "a whole number >= 0"),
    "found_after_s": (lambda v: isinstance(v, int | float) and not isinstance(v, bool) and v >= 0,
                      "seconds >= 0"),
    "hits": (lambda v: _is_count(v, 1), "a whole number >= 1"),
    "explanation": (lambda v: isinstance(v, str), "a string"),
}


def _finding(path: Path, where: str) -> Mapping[str, Any]:
    """A finding.json, checked; anything else raises a ``UsageError`` naming the file (``where``)."""
    fix = "restore it from the archive chaos explore wrote, or move its finding directory out of the archive"
    try:
        data = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"{where}: not valid JSON ({exc.msg}); {fix}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{where}: not a finding of chaos explore (a JSON object); {fix}")
    for name, (ok, expected) in FINDING_FIELDS.items():
        if name not in data:
            raise UsageError(f"{where}: not a finding of chaos explore (no {name!r}); {fix}")
        if not ok(data[name]):
            raise UsageError(f"{where}: not a finding of chaos explore ({name!r} is {str(data[name])[:60]!r}, "
                             f"expected {expected}); {fix}")
    return data


def _exploration(path: Path, where: str) -> Mapping[str, Any]:
    """An explore.json, a JSON object whose ``verdicts`` (when present) is an object."""
    try:
        data = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"{where}: not valid JSON ({exc.msg}); restore the summary chaos explore wrote, or "
                         "delete it") from None
    if not isinstance(data, dict) or not isinstance(data.get("verdicts", {}), dict):
        raise UsageError(f"{where}: not a summary of chaos explore (an object with verdicts); restore the one "
                         "chaos explore wrote, or delete it")
    return data


def _run_files(archive: Archive, path: Path) -> RunFiles:
    """The run directory ``path`` of ``archive`` with its small files."""
    rel = path.relative_to(archive.root).parts
    where = archive.location(rel)
    header, first_ts, first_ns = _read_head(path / HISTORY_FILE, f"{where}/{HISTORY_FILE}")
    date = next((p for p in rel[:-1] if _DATE.fullmatch(p)), None)
    from_layout = date is not None
    if date is None:
        date = _night(first_ts)
    # the archive's own name only when the archive is the run directory: a staged copy keeps that name (stage)
    experiment = (_experiment_from_layout(rel, header)
                  or _experiment_name(header, archive.root.name if not rel else "unnamed"))
    name = rel[-1] if rel else path.name
    run_dir = RunDir(path, date, experiment, name, from_layout, archive=archive.given,
                     origin=where if archive.uri is not None else None)
    checks = _load_json(path / CHECKS_FILE, f"{where}/{CHECKS_FILE}")
    outcome = _load_json(path / OUTCOME_FILE, f"{where}/{OUTCOME_FILE}")
    faults = _load_json(path / FAULTS_FILE, f"{where}/{FAULTS_FILE}") or []
    if not isinstance(faults, list):
        raise UsageError(f"{where}/{FAULTS_FILE}: expected a list of fault records")
    return RunFiles(run_dir, header, first_ts, checks, outcome, tuple(faults), first_ns,
                    _torn_tail(path / HISTORY_FILE))


def read_archives(archives: Sequence[Archive]) -> Contents:
    """Every run, finding and exploration of ``archives`` (local directories: a URI's is its staged copy), the runs
    keyed across all of them (:func:`_keyed`: a run in two archives is refused); bad input raises ``UsageError``.

    An archive with no run is refused unless it is an explore archive (an exploration may have run none); the
    archives together must hold a run.
    """
    runs: list[RunFiles] = []
    findings: list[FindingFile] = []
    explorations: list[Exploration] = []
    for archive in archives:
        check_archive_dir(archive.root, archive.given)
        histories, explores, found = _scan(archive.root)
        for path in explores:
            rel = path.parent.relative_to(archive.root).parts
            explorations.append(Exploration(archive, rel, _exploration(path, archive.location((*rel, EXPLORE_FILE)))))
        for path in found:
            rel = path.parent.relative_to(archive.root).parts
            findings.append(FindingFile(archive, rel, _finding(path, archive.location((*rel, FINDING_FILE)))))
        if not histories and not explores:
            raise UsageError(f"{archive.given}: no runs found (no */history.jsonl below it); point at a results "
                             "directory written by `chaos run` or `chaos explore`, or run `chaos check RUN_DIR` on "
                             "runs that only have events/")
        runs += [_run_files(archive, path.parent) for path in histories]
    if not runs:
        raise UsageError(f"{', '.join(a.given for a in archives)}: no runs found (the explorations ran none); "
                         "report on an archive that holds runs")
    return Contents(_keyed(runs, archives[0].given if len(archives) == 1 else None), findings, explorations)


def discover(results: Path) -> list[RunFiles]:
    """Every run directory under ``results`` (one local archive) with its small files; bad input raises
    ``UsageError``."""
    return read_archives([Archive(str(results), Path(results))]).runs


def _keyed(runs: list[RunFiles], results: Path | str | None = None) -> list[RunFiles]:
    """The runs with their run keys told apart (:attr:`RunDir.run`); two copies of one run raise ``UsageError``.

    Runs sharing ``<date>/<experiment>/<run dir name>`` get the header dimensions that differ between them
    appended (:func:`_qualifiers`); runs whose headers agree on all of them (run id, seed, every version, the
    members' client versions) are the same run twice, whether in one archive or in two.
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
            a, b = prev.run_dir.archive, rf.run_dir.archive
            fix = (f"the archives {a} and {b} both hold it: leave one of them out, or move the copy out of one"
                   if a is not None and b is not None and a != b else
                   f"move the copy out of {a or results}, or give each run its own directory name")
            raise UsageError(
                f"{prev.run_dir.location} and {rf.run_dir.location} hold the same run (header run_id "
                f"{h.get('run_id')!s}, seed {h.get('seed')!s}, Kafka {_kafka_version(h) or 'unknown'}, the same "
                f"versions): both map to the run key {rf.run_dir.run}; {fix}")
    return out


# --------------------------------------------------------------------------- findings over several archives

#: the columns of ``findings.csv`` (and of each entry of ``summary.json``'s ``findings``), in order
FINDINGS_COLUMNS = ["signature", "finding_class", "checkers", "fault_kinds", "workload", "hits", "archives", "shards",
                    "found_after_s", "finding_dir", "first_run", "minimal", "minimal_failed_runs", "minimal_runs",
                    "explanation"]


def _shard_order(shard: str) -> tuple[int, int, str]:
    k, _, n = shard.partition("/")
    return (int(k), int(n), shard) if k.isdigit() and n.isdigit() else (1 << 30, 0, shard)


def group_findings(findings: Sequence[FindingFile]) -> list[dict[str, Any]]:
    """One row per finding signature over every archive (:data:`FINDINGS_COLUMNS`), earliest found first.

    The same finding in several shards (its signature is equal in all: a hash of checkers, fault kinds and
    class) is one row: ``hits`` is summed over them; ``archives`` are the explore archives that found it (as
    given, with the explore archive's directory when it lies deeper) and ``shards`` their distinct shards (none
    for an unsharded one); ``workload`` the distinct workloads, space-separated. The rest is the *first*
    finding's, the one found earliest (``found_after_s``; a tie goes to the archive given first): its class,
    checkers and fault kinds, its directory (``finding_dir``), its original red run (``first_run``), its
    minimal experiment (``minimal``, null when not shrunk) and that experiment's failure rate
    (``minimal_failed_runs`` of ``minimal_runs``), its explanation.
    """
    groups: dict[str, list[FindingFile]] = {}
    for f in findings:
        groups.setdefault(f.finding["signature"], []).append(f)
    rows = []
    for sig, group in groups.items():
        first = min(group, key=lambda f: f.finding["found_after_s"])  # min keeps the first of equals
        d = first.finding
        rows.append({
            "signature": sig, "finding_class": d["finding_class"], "checkers": list(d["checkers"]),
            "fault_kinds": list(d["fault_kinds"]),
            "workload": " ".join(dict.fromkeys(f.finding["workload"] for f in group)),
            "hits": sum(f.finding["hits"] for f in group),
            "archives": list(dict.fromkeys(f.archive.named(f.explore_dir) for f in group)),
            "shards": sorted({f.finding["shard"] for f in group if f.finding["shard"]}, key=_shard_order),
            "found_after_s": d["found_after_s"],
            "finding_dir": first.archive.named(first.rel),
            "first_run": first.archive.named((*first.explore_dir, *d["first_run"].split("/"))),
            "minimal": first.archive.named((*first.rel, d["minimal"])) if d["minimal"] else None,
            "minimal_failed_runs": d["minimal_failed_runs"], "minimal_runs": d["minimal_runs"],
            "explanation": d["explanation"],
        })
    return sorted(rows, key=lambda r: (r["found_after_s"], r["signature"]))


#: the columns of each entry of ``summary.json``'s ``explorations`` (and of the report's table of them)
EXPLORATIONS_COLUMNS = ["archive", "workload", "seed", "shard", "runs", "passed", "failed", "unknown", "error",
                        "findings"]


def exploration_rows(explorations: Sequence[Exploration]) -> list[dict[str, Any]]:
    """One row per ``explore.json`` (:data:`EXPLORATIONS_COLUMNS`): where it is (as given), its workload, seed,
    shard, runs, verdict counts (``passed``: verdict true, ``failed``: false) and number of findings, as the
    invocation recorded them (null when absent)."""
    rows = []
    for e in explorations:
        s, verdicts = e.summary, e.summary.get("verdicts") or {}
        found = s.get("findings")
        rows.append({"archive": e.archive.named(e.rel), "workload": s.get("workload"), "seed": s.get("seed"),
                     "shard": s.get("shard"), "runs": s.get("runs"), "passed": verdicts.get("true"),
                     "failed": verdicts.get("false"), "unknown": verdicts.get("unknown"),
                     "error": verdicts.get("error"), "findings": len(found) if isinstance(found, list) else None})
    return rows
