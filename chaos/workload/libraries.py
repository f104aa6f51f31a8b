"""Client library releases a member runs on (``client_version``, issue 34), prepared into the cache.

A member without ``client_version`` runs the default library: the confluent-kafka and kafka-python pinned in
kafka-chaos's own environment, or, for a Java member, the kafka-clients (and VerifiableConsumer) of the broker's
own Kafka release. A member with one runs that release, prepared once into
``<cache>/clients/<client>/<version>/`` and used from there by its worker process only:

* confluent-kafka and kafka-python come from PyPI as wheels, installed by pip with ``--target`` and
  ``--no-deps`` (neither needs another package) into ``site/``: the project's own environment is never
  touched. The worker is started with ``site/`` first on ``PYTHONPATH``, so ``import confluent_kafka`` there
  finds the release asked for and everything else (kafka-chaos itself, pydantic, orjson) the project's.
* The Java client comes from Maven Central: ``kafka-tools`` of that release (Kafka's VerifiableConsumer, which
  the Java member runs) with the ``kafka-clients`` it was built with and a logging backend, resolved by
  ``runtime-pom.xml`` with ``-DclientOnly`` into ``lib/``, the member's whole classpath.

What a release says of itself is read once when it is prepared and kept in ``reported.json``: the
``__version__`` of the Python package, librdkafka's ``libversion()``, and for the Java client the
``kafka/kafka-version.properties`` resource of kafka-clients, which ``AppInfoParser`` reads to log and
register "Kafka version". The run header records it per member. A release whose package reports another
version than the one asked for is refused (a wheel that installed something else is not that release).

Preparing is atomic: everything is built in a temporary directory beside the entry and renamed into place,
``.complete`` last, so a second run is a no-op and an interrupted one is redone. A release that does not
exist, or has no wheel for this Python, is refused in one line (:class:`chaos.errors.UsageError`) before any
cluster starts.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from chaos.cluster.runtime import cache_root, kafka_runtime, require_tool, run_logged
from chaos.errors import UsageError
from chaos.model.share import ShareMemberSpec
from chaos.model.workload import PYPI_PACKAGES, Client, ConsumerSpec

if TYPE_CHECKING:  # pragma: no cover
    from chaos.model.experiment import Experiment

Progress = Callable[[str], None]

#: the resource of kafka-clients that ``org.apache.kafka.common.utils.AppInfoParser`` reads its version from
JAVA_VERSION_RESOURCE = "kafka/kafka-version.properties"
_READY = ".complete"
_REPORTED = "reported.json"


@dataclass(frozen=True, slots=True)
class ClientLibrary:
    """One prepared release of a client library."""

    client: Client
    version: str
    #: ``<cache>/clients/<client>/<version>``
    root: Path
    #: what the library reports of itself, e.g. {"confluent-kafka": "2.12.0", "librdkafka": "2.12.0"}
    reported: Mapping[str, str]

    @property
    def python_path(self) -> Path:
        """The directory a Python member puts first on ``PYTHONPATH``."""
        return self.root / "site"

    @property
    def lib_dir(self) -> Path:
        """The jars of a Java member's classpath."""
        return self.root / "lib"


def library_dir(client: Client, version: str) -> Path:
    return cache_root() / "clients" / client.value / version


def prepared(client: Client, version: str) -> ClientLibrary | None:
    """The release when it is in the cache, else None."""
    root = library_dir(client, version)
    if not (root / _READY).exists():
        return None
    reported = json.loads((root / _REPORTED).read_text())
    return ClientLibrary(client, version, root, reported)


def library(client: Client, version: str) -> ClientLibrary:
    """The prepared release (what a worker asks for); a one-line error when it is not in the cache."""
    found = prepared(client, version)
    if found is None:
        raise UsageError(f"{client.value} {version} is not prepared: run `chaos setup --client "
                         f"{client.value}=={version}`")
    return found


def ensure_library(client: Client, version: str, progress: Progress = print) -> ClientLibrary:
    """Prepare ``client`` ``version`` into the cache (no-op when it is there); UsageError when it cannot be."""
    found = prepared(client, version)
    if found is not None:
        progress(f"{client.value} {version}: cached in {found.root}")
        return found
    root = library_dir(client, version)
    root.parent.mkdir(parents=True, exist_ok=True)
    progress(f"{client.value} {version}: preparing from {'Maven Central' if client is Client.JAVA else 'PyPI'} ...")
    with tempfile.TemporaryDirectory(dir=root.parent, prefix=f".{version}-") as tmp:
        staged = Path(tmp) / "entry"
        staged.mkdir()
        if client is Client.JAVA:
            reported = _prepare_java(version, staged)
        else:
            reported = _prepare_python(client, version, staged)
        (staged / _REPORTED).write_text(json.dumps(reported, indent=1) + "\n")
        (staged / _READY).write_text(f"{client.value} {version}\n")
        try:
            os.replace(staged, root)
        except OSError:  # another process prepared it meanwhile (the directory exists and is not empty)
            if prepared(client, version) is None:
                raise
    progress(f"{client.value} {version}: prepared in {root}")
    return library(client, version)


def releases_of(experiment: Experiment) -> set[tuple[Client, str]]:
    """Every (client, release) a run of ``experiment`` starts a member on: its members' ``client_version`` and
    the releases its ``client_upgrade`` faults move members to."""
    from chaos.model.faults.membership import ClientUpgrade

    share = experiment.workload.share
    members: list[ConsumerSpec | ShareMemberSpec] = [*experiment.workload.consumers, *(share.members if share else ())]
    wanted = {(m.client, m.client_version) for m in members if m.client_version is not None}
    for fault in experiment.faults:
        if isinstance(fault, ClientUpgrade) and fault.client_version is not None:
            wanted |= {(m.client, fault.client_version) for m in fault.candidates(experiment) if m.command is None}
    return wanted


def ensure_for(releases: Iterable[tuple[Client, str]], progress: Progress = print) -> None:
    """Every release of ``releases`` prepared (what ``chaos run`` does before a cluster starts)."""
    for client, version in sorted(releases):
        ensure_library(client, version, progress)


def reported_for(spec: ConsumerSpec | ShareMemberSpec, kafka_version: str) -> dict[str, str]:
    """What the library a member of ``spec`` runs reports of itself: its ``client_version``'s as prepared, else the
    default's -- the project's own Python client (the driver imports the same one), or the kafka-clients of the
    broker's release ``kafka_version``."""
    lib = member_library(spec)
    if lib is not None:
        return dict(lib.reported)
    if spec.client is Client.JAVA:
        return java_reported(kafka_runtime(kafka_version).lib_dir)
    return reported_by_imports(spec.client.value)


def expected_release(spec: ConsumerSpec, kafka_version: str) -> str:
    """The release of its library a member of ``spec`` reports at its start (``member_start.client_version``
    begins with it): its ``client_version``, or the default library's own version."""
    if spec.client_version is not None:
        return spec.client_version
    key = "kafka-clients" if spec.client is Client.JAVA else PYPI_PACKAGES[spec.client]
    return reported_for(spec, kafka_version).get(key, kafka_version)


def _prepare_python(client: Client, version: str, staged: Path) -> dict[str, str]:
    package = PYPI_PACKAGES[client]
    log = cache_root() / "logs" / f"pip-{package}-{version}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--only-binary=:all:", "--no-compile",
           "--disable-pip-version-check", "--no-input", "--target", str(staged / "site"), f"{package}=={version}"]
    with log.open("w") as out:
        rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        raise UsageError(_pip_refusal(package, version, log))
    probe = subprocess.run(
        [sys.executable, "-c", "import json, sys; from chaos.workload.libraries import reported_by_imports; "
                               f"print(json.dumps(reported_by_imports({client.value!r})))"],
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(staged / "site"), *_pythonpath()])},
        capture_output=True, text=True)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["?"])[-1]
        raise UsageError(f"{package} {version} installed but does not import on Python "
                         f"{sys.version.split()[0]} ({last[:200]}): choose another release")
    reported: dict[str, str] = json.loads(probe.stdout)
    if reported.get(package) != version:
        raise UsageError(f"{package}=={version} installed a package that reports version {reported.get(package)}: "
                         "choose another release")
    return reported


def _pythonpath() -> list[str]:
    return [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]


def _pip_refusal(package: str, version: str, log: Path) -> str:
    """Why pip could not install ``package==version``: no such release, or no wheel of it for this Python."""
    index = subprocess.run([sys.executable, "-m", "pip", "index", "versions", package, "--disable-pip-version-check"],
                           capture_output=True, text=True)
    listed = re.search(r"Available versions: (.*)", index.stdout)
    python = f"CPython {sys.version_info.major}.{sys.version_info.minor}"
    if listed is None:
        return f"pip could not install {package}=={version} (full log {log}): check that PyPI is reachable"
    available = [v.strip() for v in listed.group(1).split(",")]
    if version in available:
        return f"{package} {version} has no wheel for {python} on this platform: choose a newer release"
    return f"{package} {version} does not exist on PyPI: choose one of {', '.join(available[:8])}, ..."


def _prepare_java(version: str, staged: Path) -> dict[str, str]:
    mvn = require_tool("mvn", "Maven (apt-get install maven)")
    four = int(version.split(".")[0]) >= 4
    pom = resources.files("chaos.cluster") / "runtime-pom.xml"
    with resources.as_file(pom) as pom_path:
        run_logged([mvn, "-B", "-q", "-f", str(pom_path), f"-Dmaven.repo.local={cache_root() / 'm2'}",
                    f"-Dkafka.version={version}", f"-Dtools.version={version}", "-DclientOnly",
                    *(["-Dlogging=log4j2"] if four else []),
                    "dependency:copy-dependencies", "-DincludeScope=runtime", f"-DoutputDirectory={staged / 'lib'}"],
                   dict(os.environ), cache_root() / "logs" / f"mvn-kafka-clients-{version}.log",
                   f"Maven could not resolve kafka-tools {version} (Kafka's VerifiableConsumer and its kafka-clients): "
                   "check that the release exists and Maven Central is reachable")
    reported = java_reported(staged / "lib")
    if reported.get("kafka-clients") != version:
        raise UsageError(f"kafka-tools {version} brought kafka-clients {reported.get('kafka-clients')}: choose "
                         "another release")
    return reported


def java_reported(lib_dir: Path) -> dict[str, str]:
    """The version kafka-clients in ``lib_dir`` reports: ``version=`` of :data:`JAVA_VERSION_RESOURCE`."""
    for jar in sorted(lib_dir.glob("kafka-clients-*.jar")):
        with zipfile.ZipFile(jar) as z:
            text = z.read(JAVA_VERSION_RESOURCE).decode()
        for line in text.splitlines():
            if line.startswith("version="):
                return {"kafka-clients": line.removeprefix("version=").strip()}
    return {}


def reported_by_imports(client: str) -> dict[str, str]:
    """What the Python library importable here reports of itself (run in the worker's environment)."""
    if client == Client.CONFLUENT_KAFKA.value:
        import confluent_kafka

        from chaos.workload.clients.confluent import librdkafka_version

        return {"confluent-kafka": str(confluent_kafka.__version__), "librdkafka": librdkafka_version()}
    import kafka

    return {"kafka-python": kafka.__version__}


def member_library(spec: ConsumerSpec | ShareMemberSpec) -> ClientLibrary | None:
    """The prepared release of ``spec``'s ``client_version``; None for the default library."""
    if spec.client_version is None:
        return None
    return library(spec.client, spec.client_version)


def python_env(lib: ClientLibrary, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with ``lib``'s packages first on ``PYTHONPATH``."""
    env = dict(os.environ if base is None else base)
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([str(lib.python_path), *rest])
    return env



def check_imported(spec: ConsumerSpec | ShareMemberSpec) -> None:
    """In a Python member's worker: refuse to run when the library imported is not the release ``spec`` names
    (its ``PYTHONPATH`` did not take), so a member never records one release while running another."""
    if spec.client_version is None or spec.client is Client.JAVA:
        return
    got = reported_by_imports(spec.client.value)[PYPI_PACKAGES[spec.client]]
    if got != spec.client_version:
        raise RuntimeError(f"{PYPI_PACKAGES[spec.client]} {got} imported where {spec.client_version} was asked for: "
                           f"the worker's PYTHONPATH does not start with its prepared release")
