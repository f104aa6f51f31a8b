"""The SparkSession the report runs on: local by default, any master URL when asked.

Defaults suit a 2-core developer machine and small archives: ``local[2]``, few
shuffle partitions, no UI, quiet logs. Under ``spark-submit`` the session that
spark-submit configured is reused (its master and settings win).
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
from pathlib import Path
from urllib.parse import urlsplit

from chaos.errors import UsageError

DEFAULT_MASTER = "local[2]"
_JAVA17 = Path("/usr/lib/jvm/java-17-openjdk-amd64")
#: how long a ``spark://`` master gets to accept a connection before the report gives up (bad input)
MASTER_CONNECT_TIMEOUT_S = 5.0
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def _ensure_java() -> None:
    if os.environ.get("JAVA_HOME") or shutil.which("java"):
        return
    if _JAVA17.is_dir():
        os.environ["JAVA_HOME"] = str(_JAVA17)
        return
    raise UsageError("Spark needs a JDK (11 or 17): install openjdk-17-jre-headless or set JAVA_HOME")


def _check_master(master: str) -> None:
    """A ``spark://host:port[,host:port]`` master must accept a TCP connection within a few seconds.

    Without this check a master that does not answer costs Spark's own registration retries (3 x 20 s,
    ``StandaloneAppClient``) and ends in a stopped SparkContext rather than a message.
    """
    if not master.startswith("spark://"):
        return
    for hostport in master[len("spark://"):].split(","):
        parts = urlsplit(f"//{hostport}")
        try:
            host, port = parts.hostname, parts.port
        except ValueError:
            host, port = None, None
        if not host or not port:
            raise UsageError(f"--spark-master {master}: expected spark://HOST:PORT (the master's port, 7077 by default)")
        try:
            with socket.create_connection((host, port), timeout=MASTER_CONNECT_TIMEOUT_S):
                return
        except OSError as exc:
            last = f"{hostport}: {exc.strerror or exc}"
    raise UsageError(f"Spark master {master} does not answer ({last}); start it "
                     "(spark-class org.apache.spark.deploy.master.Master) or fix --spark-master")


def _loopback_driver(master: str) -> bool:
    """Whether the driver should listen on 127.0.0.1 only: local mode, or a master on this machine's loopback."""
    if master.startswith("local"):
        return True
    hosts = {urlsplit(f"//{hp}").hostname for hp in master.split("://", 1)[-1].split(",")}
    return bool(hosts) and hosts <= _LOOPBACK


def spark_session(master: str | None = None, shuffle_partitions: int = 4):
    """A SparkSession for the report (``getOrCreate``: an active session is reused)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise UsageError("the report needs PySpark: pip install 'kafka-chaos[report]'") from None
    _ensure_java()
    # Python workers must be this interpreter (it has pandas and pyarrow), not whatever python3 is first.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("kafka-chaos-report")
    # Under spark-submit the JVM is already up (it hands the gateway port over): its master wins.
    if master or "PYSPARK_GATEWAY_PORT" not in os.environ:
        master = master or DEFAULT_MASTER
        _check_master(master)
        builder = builder.master(master)
        if _loopback_driver(master):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            # nothing of the driver (RPC, block manager) listens beyond this machine
            builder = (builder.config("spark.driver.host", "127.0.0.1")
                       .config("spark.driver.bindAddress", "127.0.0.1"))
    builder = (builder
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               .config("spark.default.parallelism", "2")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .config("spark.driver.memory", os.environ.get("CHAOS_REPORT_DRIVER_MEMORY", "2g"))
               .config("spark.sql.sources.partitionOverwriteMode", "static")
               # one file per history: list them in the driver, not with a Spark job per read
               .config("spark.sql.sources.parallelPartitionDiscovery.threshold", "100000")
               # keep date=YYYY-MM-DD partitions as strings ("unknown" is a valid night too)
               .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false"))
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # noqa: BLE001 - the JVM failed to start: say what to fix
        raise UsageError(f"could not start Spark ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); "
                         "check JAVA_HOME points at a JDK 11/17 and the --spark-master URL") from None
    spark.sparkContext.setLogLevel("ERROR")
    if spark.sparkContext._jsc.sc().isStopped():
        raise UsageError(f"Spark stopped while connecting to {spark.sparkContext.master}: check the master's log "
                         "and that its workers can reach this machine")
    return spark
