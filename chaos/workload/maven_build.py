"""The project's own JVM code (``java/<project>/``), built with Maven into the cache on first use.

Two Maven projects live in ``java/``: the ConsumerInterceptor of black-box JVM members
(:mod:`chaos.workload.interceptor`) and the share-group member over Kafka's ``KafkaShareConsumer``
(:mod:`chaos.workload.clients.java_share`). Each jar is keyed by a digest of its project's sources, so an edited
source builds a new jar and an unchanged one is found at once; ``make setup`` builds both
(``python -m chaos.workload.maven_build``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from chaos.cluster.runtime import Progress, cache_root, run_logged, sources_digest
from chaos.errors import UsageError


def quiet(_: str) -> None:
    """A progress callback that says nothing."""


def project_dir(project: str) -> Path:
    """``java/<project>/`` of this checkout (the package's sources sit beside it)."""
    return Path(__file__).resolve().parents[2] / "java" / project


def _source_files(src: Path) -> list[Path]:
    return sorted([src / "pom.xml", *(p for p in (src / "src").rglob("*") if p.is_file())])


def source_hash(src: Path) -> str:
    """A digest of the Maven project (pom and every file under src/): the jar's cache key."""
    return sources_digest(src, _source_files(src), 16)


def ensure_jar(project: str, jar_name: str, what: str, progress: Progress = quiet, src: Path | None = None) -> Path:
    """The jar of ``java/<project>`` (``what`` names it in messages), built on first use into
    ``<cache>/<project>/<source hash>/`` (no-op after).

    Maven builds a copy of the project in a temporary directory beside the cache entry (the source tree stays
    clean), against the project's own local repository (``<cache>/m2``, shared with ``chaos setup``): offline
    first (``mvn -o``: kafka-clients and the plugins are cached after the first build), online from Maven Central
    when that fails. The jar is moved into place last, so its presence is the marker and concurrent first uses
    are harmless.
    """
    src = src or project_dir(project)
    if not (src / "pom.xml").is_file():
        raise UsageError(f"{what} sources not found at {src}: use kafka-chaos from a clone of its repository")
    out = cache_root() / project / source_hash(src)
    jar = out / jar_name
    if jar.is_file():
        progress(f"{project}: cached at {jar}")
        return jar
    mvn = shutil.which("mvn")
    if mvn is None:
        raise UsageError(f"mvn not found on PATH: install Maven 3.6+ (apt-get install maven) to build the {what}")
    if shutil.which("javac") is None and not (Path(os.environ.get("JAVA_HOME", "/nonexistent")) / "bin" / "javac").exists():
        raise UsageError(f"javac not found: install a JDK 11+ (apt-get install openjdk-17-jdk-headless) to build the "
                         f"{what}")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".build-") as tmp:
        build = Path(tmp) / project
        shutil.copytree(src, build, ignore=shutil.ignore_patterns("target"))
        base = [mvn, "-B", "-q", "-f", str(build / "pom.xml"), f"-Dmaven.repo.local={cache_root() / 'm2'}",
                "-DskipTests", "package"]
        log = cache_root() / "logs" / f"mvn-{project}.log"
        try:
            run_logged([*base, "-o"], dict(os.environ), log, "offline build failed")
        except UsageError:
            progress(f"{project}: building java/{project} with Maven (kafka-clients and plugins from Maven Central) ...")
            run_logged(base, dict(os.environ), log,
                       f"Maven could not build the {what}: check that Maven Central is reachable")
        built = build / "target" / jar_name
        out.mkdir(exist_ok=True)
        staged = out / f".{jar_name}.{os.getpid()}"
        shutil.copyfile(built, staged)
        os.replace(staged, jar)
    progress(f"{project}: built {jar}")
    return jar


if __name__ == "__main__":  # python -m chaos.workload.maven_build: build (or find) every jar (make setup)
    import sys

    from chaos.workload.clients.java_share import ensure_share_member
    from chaos.workload.interceptor import ensure_interceptor

    try:
        for build in (ensure_interceptor, ensure_share_member):
            print(build(lambda line: print(line, file=sys.stderr)))
    except UsageError as exc:
        sys.exit(f"error: {exc}")
