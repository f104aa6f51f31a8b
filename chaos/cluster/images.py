"""Container images for the docker backend, built locally without a registry.

Three images, each tagged with a hash of everything that goes into it, so a
tag that exists is up to date and nothing is rebuilt until an input changes:

* ``kafka-chaos/base:<h>`` — a Debian bookworm root file system from
  ``debootstrap --variant=minbase --include=<BASE_PACKAGES>`` imported with
  ``docker import``; ``<h>`` hashes the suite, variant, package list and
  mirror. Built once per machine (about a minute, see bench/cluster_start_docker.py).
* ``kafka-chaos/kafka:<version>-<h>`` — the base plus the *same* jars the local
  backend runs (``chaos.cluster.runtime.kafka_runtime(version).lib_dir``) in
  ``/opt/kafka/libs``; runs both ``kafka.Kafka`` and ZooKeeper.
* ``kafka-chaos/toxiproxy:<version>-<h>`` — the base plus the same
  ``toxiproxy-server`` binary.

The jars and the binary are copied into the images (``docker build``) rather
than bind-mounted at run time: an image is then a self-contained, versioned
artifact (it can be saved, shipped to an air-gapped machine, or inspected with
``docker run``), nodes do not depend on host cache paths staying put while a
cluster runs, and the build costs a few seconds once per version.

Node configuration, data and logs are *not* in the images: each node's
directory is bind-mounted at the same path (see :mod:`chaos.cluster.container_cluster`).

All images carry the label ``kafka-chaos.image``; they are a cache and are
never removed by cluster cleanup.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import docker
from docker.errors import BuildError, ImageNotFound

from chaos.cluster.runtime import KafkaRuntime, ToxiproxyRuntime, cache_root
from chaos.errors import InfrastructureError, UsageError

BASE_SUITE = "bookworm"
BASE_VARIANT = "minbase"
# iptables: pair-wise partitions are DROP rules inside a broker's own container (bridge networking)
BASE_PACKAGES = ("openjdk-17-jre-headless", "procps", "iproute2", "iptables")
DEBIAN_MIRROR = os.environ.get("KAFKA_CHAOS_DEBIAN_MIRROR", "http://deb.debian.org/debian")

#: inside the kafka image
KAFKA_LIBS = "/opt/kafka/libs"
JAVA = "/usr/bin/java"
TOXIPROXY_BIN = "/usr/local/bin/toxiproxy-server"

IMAGE_LABEL = "kafka-chaos.image"

Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class Images:
    """The tags a docker cluster runs, and how long each took to build (0.0 = cached)."""

    base: str
    kafka: str
    toxiproxy: str
    build_seconds: dict[str, float] = field(default_factory=dict, compare=False)


def _digest(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()[:12]


def _exists(client: docker.DockerClient, tag: str) -> bool:
    try:
        client.images.get(tag)
        return True
    except ImageNotFound:
        return False


def base_tag() -> str:
    return f"kafka-chaos/base:{_digest(BASE_SUITE, BASE_VARIANT, ','.join(BASE_PACKAGES), DEBIAN_MIRROR)}"


def ensure_base(client: docker.DockerClient, progress: Progress = print) -> tuple[str, float]:
    """The base image tag, building it with debootstrap + docker import when missing; (tag, seconds)."""
    tag = base_tag()
    if _exists(client, tag):
        return tag, 0.0
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise UsageError("debootstrap is not installed: run `scripts/docker-engine.sh install` "
                         "(apt-get install debootstrap) to build the base image")
    t0 = time.monotonic()
    work = cache_root() / "docker-build"
    work.mkdir(parents=True, exist_ok=True)
    rootfs = Path(tempfile.mkdtemp(prefix="rootfs-", dir=work))
    log = cache_root() / "logs" / "debootstrap.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        progress(f"base image: debootstrap {BASE_SUITE} ({','.join(BASE_PACKAGES)}) from {DEBIAN_MIRROR} ...")
        with log.open("w") as out:
            rc = subprocess.run([debootstrap, f"--variant={BASE_VARIANT}", f"--include={','.join(BASE_PACKAGES)}",
                                 BASE_SUITE, str(rootfs), DEBIAN_MIRROR], stdout=out, stderr=subprocess.STDOUT).returncode
        if rc != 0:
            lines = [l for l in log.read_text(errors="replace").splitlines() if l.strip()]
            raise InfrastructureError(f"debootstrap failed (exit {rc}; full log {log}): "
                                      f"{(lines[-1] if lines else '')[:300]}")
        # a minbase root keeps apt's downloaded .debs; they are a third of its size
        shutil.rmtree(rootfs / "var" / "cache" / "apt" / "archives", ignore_errors=True)
        progress(f"base image: docker import as {tag} ...")
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        tar_out = tar.stdout
        assert tar_out is not None  # stdout=PIPE
        try:
            client.api.import_image(src=iter(lambda: tar_out.read(1 << 20), b""), repository=tag.split(":")[0],
                                    tag=tag.split(":")[1], stream_src=True,
                                    changes=[f"LABEL {IMAGE_LABEL}=base", "ENV LANG=C.UTF-8"])
        finally:
            tar_out.close()
            tar.wait()
    finally:
        shutil.rmtree(rootfs, ignore_errors=True)
    if not _exists(client, tag):
        raise InfrastructureError(f"docker import did not produce {tag}")
    return tag, time.monotonic() - t0


def _build(client: docker.DockerClient, tag: str, context: Path, kind: str) -> None:
    try:
        client.images.build(path=str(context), tag=tag, rm=True, forcerm=True, labels={IMAGE_LABEL: kind})
    except BuildError as exc:
        last = [str(l.get("stream") or l.get("error") or "").strip() for l in exc.build_log][-3:]
        raise InfrastructureError(f"docker build of {tag} failed: {exc.msg} | {' | '.join(x for x in last if x)}") from None


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def ensure_kafka(client: docker.DockerClient, base: str, kafka: KafkaRuntime,
                 progress: Progress = print) -> tuple[str, float]:
    """The Kafka/ZooKeeper image for ``kafka``'s jars; built when the version or the jars change."""
    jars = sorted(kafka.lib_dir.glob("*.jar"))
    dockerfile = f"FROM {base}\nCOPY libs/ {KAFKA_LIBS}/\nLABEL kafka-chaos.kafka-version={kafka.version}\n"
    tag = f"kafka-chaos/kafka:{kafka.version}-{_digest(dockerfile, *(f'{j.name}:{j.stat().st_size}' for j in jars))}"
    if _exists(client, tag):
        return tag, 0.0
    t0 = time.monotonic()
    progress(f"kafka image: docker build {tag} ({len(jars)} jars) ...")
    with tempfile.TemporaryDirectory(dir=cache_root()) as ctx:
        (Path(ctx) / "libs").mkdir()
        for jar in jars:
            _link_or_copy(jar, Path(ctx) / "libs" / jar.name)
        (Path(ctx) / "Dockerfile").write_text(dockerfile)
        _build(client, tag, Path(ctx), "kafka")
    return tag, time.monotonic() - t0


def ensure_toxiproxy(client: docker.DockerClient, base: str, toxiproxy: ToxiproxyRuntime,
                     progress: Progress = print) -> tuple[str, float]:
    """The Toxiproxy image for the cached binary; built when the version or the binary changes."""
    dockerfile = (f"FROM {base}\nCOPY toxiproxy-server {TOXIPROXY_BIN}\n"
                  f"LABEL kafka-chaos.toxiproxy-version={toxiproxy.version}\n")
    binary_hash = hashlib.sha256(toxiproxy.binary.read_bytes()).hexdigest()
    tag = f"kafka-chaos/toxiproxy:{toxiproxy.version}-{_digest(dockerfile, binary_hash)}"
    if _exists(client, tag):
        return tag, 0.0
    t0 = time.monotonic()
    progress(f"toxiproxy image: docker build {tag} ...")
    with tempfile.TemporaryDirectory(dir=cache_root()) as ctx:
        _link_or_copy(toxiproxy.binary, Path(ctx) / "toxiproxy-server")
        (Path(ctx) / "Dockerfile").write_text(dockerfile)
        _build(client, tag, Path(ctx), "toxiproxy")
    return tag, time.monotonic() - t0


def ensure_images(client: docker.DockerClient, kafka: KafkaRuntime, toxiproxy: ToxiproxyRuntime,
                  progress: Progress = print) -> Images:
    """Every image a docker cluster needs, building only what is missing (a no-op when cached)."""
    base, t_base = ensure_base(client, progress)
    kafka_tag, t_kafka = ensure_kafka(client, base, kafka, progress)
    toxi_tag, t_toxi = ensure_toxiproxy(client, base, toxiproxy, progress)
    return Images(base, kafka_tag, toxi_tag, {"base": t_base, "kafka": t_kafka, "toxiproxy": t_toxi})


def main() -> None:
    """``python -m chaos.cluster.images [KAFKA_VERSION]``: build (or confirm) the images, print the timings."""
    import json
    import sys

    from chaos.cluster.container_engine import DockerEngine
    from chaos.cluster.runtime import kafka_runtime, toxiproxy_runtime
    from chaos.model.cluster import DEFAULT_KAFKA_VERSION

    version = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_KAFKA_VERSION
    engine = DockerEngine().start()
    try:
        client = docker.DockerClient(base_url=engine.docker_host, timeout=600)
        t0 = time.monotonic()
        images = ensure_images(client, kafka_runtime(version), toxiproxy_runtime())
        print(json.dumps({"base": images.base, "kafka": images.kafka, "toxiproxy": images.toxiproxy,
                          "build_seconds": images.build_seconds, "total_seconds": round(time.monotonic() - t0, 2)}))
    finally:
        engine.stop()


if __name__ == "__main__":
    main()
