"""The real components a cluster runs, fetched from registries and cached.

* Kafka broker + ZooKeeper + Kafka's own ``VerifiableConsumer``: Maven Central,
  resolved by ``mvn dependency:copy-dependencies`` from ``runtime-pom.xml``
  (``org.apache.kafka:kafka_2.13`` and ``kafka-tools``, plus reload4j so the
  broker actually writes logs — without an slf4j binding it logs nothing).
* Toxiproxy server: the project's own build (``chaos/toxiproxy``: Toxiproxy 2.12.0's server with the
  ``kafka`` toxic), from the Go module proxy, keyed by a digest of its sources.

Everything lands under one cache directory (``$KAFKA_CHAOS_CACHE`` or
``~/.cache/kafka-chaos``) keyed by version, with a ``.complete`` marker written
last, so a second :func:`ensure` is a no-op and an interrupted fetch is redone.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from chaos.errors import UsageError
from chaos.model.cluster import DEFAULT_KAFKA_VERSION, validate_kafka_version

TOXIPROXY_VERSION = "2.12.0"
#: kafka-tools releases to try, in order, when the one of the broker's version is not served (it carries
#: only the VerifiableConsumer here; its client speaks to any broker of the same major version)
TOOLS_FALLBACK: dict[str, tuple[str, ...]] = {"4.4.0": ("4.3.1",)}


Progress = Callable[[str], None]


def cache_root() -> Path:
    """The single cache directory for everything fetched."""
    return Path(os.environ.get("KAFKA_CHAOS_CACHE", Path.home() / ".cache" / "kafka-chaos"))


@dataclass(frozen=True, slots=True)
class KafkaRuntime:
    """The jars of one Kafka version, ready for ``java -cp``."""

    version: str
    lib_dir: Path

    @property
    def classpath(self) -> str:
        return str(self.lib_dir / "*")

    @property
    def tools_version(self) -> str:
        """The kafka-tools (VerifiableConsumer) release beside the broker (see TOOLS_FALLBACK)."""
        marker = self.lib_dir.parent / "tools.version"
        return marker.read_text().strip() if marker.exists() else self.version

    @property
    def log4j2(self) -> bool:
        """Does this release log through log4j2 (4.x, KIP-653) rather than reload4j?"""
        return int(self.version.split(".")[0]) >= 4


@dataclass(frozen=True, slots=True)
class ToxiproxyRuntime:
    version: str
    binary: Path


def require_tool(name: str, what: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise UsageError(f"{name} not found on PATH: install {what} (needed to fetch the runtime)")
    return path


def java_binary() -> str:
    """The ``java`` used for brokers and ZooKeeper (``$JAVA_HOME/bin/java`` first)."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    path = shutil.which("java")
    if path is None:
        raise UsageError("java not found: install a JDK 11+ (e.g. apt-get install openjdk-17-jre-headless) or set JAVA_HOME")
    return path


def kafka_dir(version: str) -> Path:
    return cache_root() / "kafka" / version


def kafka_runtime(version: str = DEFAULT_KAFKA_VERSION) -> KafkaRuntime:
    """The cached runtime for ``version``; a one-line error if it is not set up."""
    validate_kafka_version(version)
    d = kafka_dir(version)
    if not (d / ".complete").exists():
        raise UsageError(f"Kafka {version} is not set up: run `chaos setup --kafka-version {version}` (or `make setup`)")
    return KafkaRuntime(version, d / "lib")


def toxiproxy_sources() -> Path:
    """The Go module of the project's Toxiproxy server (``chaos/toxiproxy``: Toxiproxy with the ``kafka`` toxic),
    shipped inside the package so an installed kafka-chaos builds the same server."""
    return Path(__file__).resolve().parents[1] / "toxiproxy"


def _toxiproxy_files(src: Path) -> list[Path]:
    return sorted(p for p in src.rglob("*") if p.is_file() and p.suffix in (".go", ".mod", ".sum"))


def sources_digest(src: Path, files: list[Path], length: int) -> str:
    """A digest of ``files`` (their paths under ``src`` and their bytes): the cache key of what is built from them
    (the Toxiproxy server here, the interceptor jar in :mod:`chaos.workload.interceptor`)."""
    h = hashlib.sha256()
    for path in files:
        h.update(path.relative_to(src).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:length]


@functools.cache
def toxiproxy_key() -> str:
    """``<Toxiproxy version>-<digest of the Go sources>``: the server's cache key (a changed toxic is a new build).
    Computed once a process: every cluster asks for the runtime, and the package's sources do not change under it."""
    src = toxiproxy_sources()
    return f"{TOXIPROXY_VERSION}-{sources_digest(src, _toxiproxy_files(src), 12)}"


def toxiproxy_runtime() -> ToxiproxyRuntime:
    key = toxiproxy_key()
    binary = cache_root() / "toxiproxy" / key / "toxiproxy-server"
    if not binary.exists():
        raise UsageError("Toxiproxy is not set up: run `chaos setup` (or `make setup`)")
    return ToxiproxyRuntime(key, binary)


def run_logged(cmd: list[str], env: dict[str, str], log: Path, failure: str) -> None:
    """Run a fetch command, keeping its output in ``log`` for the error message."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env).returncode
    if rc != 0:
        # Maven colours its output even in batch mode when it thinks it may (escape codes would hide "[ERROR]")
        text = re.sub(r"\x1b\[[0-9;]*m", "", log.read_text(errors="replace"))
        lines = [l.strip() for l in text.splitlines() if l.strip()]
        # Maven's first [ERROR] line with words names the cause; the rest is boilerplate help
        errors = [l for l in lines if l.startswith("[ERROR]") and l.removeprefix("[ERROR]").strip()]
        cause = (errors[0] if errors else " | ".join(lines[-2:]))[:300]
        raise UsageError(f"{failure} (exit {rc}; full log {log}): {cause}")


def ensure_kafka(version: str = DEFAULT_KAFKA_VERSION, progress: Progress = print) -> KafkaRuntime:
    """Resolve Kafka ``version`` from Maven Central into the cache (no-op when cached)."""
    validate_kafka_version(version)
    d = kafka_dir(version)
    if (d / ".complete").exists():
        progress(f"kafka {version}: cached in {d / 'lib'}")
        return KafkaRuntime(version, d / "lib")
    mvn = require_tool("mvn", "Maven (apt-get install maven)")
    require_tool("java", "a JDK 11+")
    if d.exists():
        shutil.rmtree(d)  # a half-finished earlier fetch
    d.mkdir(parents=True)
    pom = resources.files("chaos.cluster") / "runtime-pom.xml"
    four = int(version.split(".")[0]) >= 4
    tools = version
    with resources.as_file(pom) as pom_path:
        progress(f"kafka {version}: resolving org.apache.kafka:kafka_2.13:{version} + kafka-tools from Maven Central ...")
        for attempt, tools in enumerate((version, *TOOLS_FALLBACK.get(version, ()))):
            try:
                run_logged(
                    [mvn, "-B", "-q", "-f", str(pom_path),
                     f"-Dmaven.repo.local={cache_root() / 'm2'}",
                     f"-Dkafka.version={version}", f"-Dtools.version={tools}",
                     *(["-Dlogging=log4j2"] if four else []),
                     "dependency:copy-dependencies", "-DincludeScope=runtime",
                     f"-DoutputDirectory={d / 'lib'}"],
                    dict(os.environ), cache_root() / "logs" / f"mvn-kafka-{version}.log",
                    f"Maven could not resolve Kafka {version}: check that Maven Central is reachable and the version "
                    "exists",
                )
                break
            except UsageError:
                if attempt == len(TOOLS_FALLBACK.get(version, ())):
                    raise
                progress(f"kafka {version}: kafka-tools {tools} is not served; trying "
                         f"{TOOLS_FALLBACK[version][attempt]} for the VerifiableConsumer")
                shutil.rmtree(d / "lib", ignore_errors=True)
    (d / "tools.version").write_text(tools + "\n")
    jars = list((d / "lib").glob("*.jar"))
    (d / ".complete").write_text(f"{len(jars)} jars\n")
    progress(f"kafka {version}: {len(jars)} jars in {d / 'lib'}")
    return KafkaRuntime(version, d / "lib")


def ensure_toxiproxy(progress: Progress = print) -> ToxiproxyRuntime:
    """Build the project's Toxiproxy server (:func:`toxiproxy_sources`) into the cache (no-op when cached).

    ``go build`` runs on a copy of the module beside the cache entry (the package's files stay as they are),
    with the Go module proxy for Toxiproxy and franz-go's ``kmsg`` (checked against ``go.sum``) and without cgo,
    so the same static binary runs in the docker backend's image. The binary is moved into place last: its
    existence is the marker.
    """
    key = toxiproxy_key()
    out = cache_root() / "toxiproxy" / key
    binary = out / "toxiproxy-server"
    if binary.exists():
        progress(f"toxiproxy {key}: cached at {binary}")
        return ToxiproxyRuntime(key, binary)
    go = require_tool("go", "Go 1.26+ (the Go toolchain; kmsg needs 1.26)")
    env = dict(os.environ, GOMODCACHE=str(cache_root() / "go" / "mod"), GOCACHE=str(cache_root() / "go" / "build"),
               GOFLAGS="-modcacherw", CGO_ENABLED="0")
    progress(f"toxiproxy {key}: building Toxiproxy {TOXIPROXY_VERSION} with the kafka toxic (Go module proxy) ...")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".build-") as tmp:
        build = Path(tmp) / "src"
        shutil.copytree(toxiproxy_sources(), build)
        staged = Path(tmp) / "toxiproxy-server"
        # every module of the Go module, not only the server's: the tests (``go test``) and the generator of
        # chaos/model/kafka_api_errors.json (``cmd/kafka-api-errors``, run again by the unit tests) then build offline
        run_logged([go, "-C", str(build), "mod", "download"], env, cache_root() / "logs" / "go-toxiproxy.log",
                    "go could not build Toxiproxy (downloading its modules): check that the Go module proxy is "
                    "reachable")
        run_logged([go, "-C", str(build), "build", "-o", str(staged), "."], env,
                    cache_root() / "logs" / "go-toxiproxy.log",
                    "go could not build Toxiproxy: check that the Go module proxy is reachable")
        out.mkdir(exist_ok=True)
        os.replace(staged, binary)
    progress(f"toxiproxy {key}: built {binary}")
    return ToxiproxyRuntime(key, binary)
