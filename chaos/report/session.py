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


def _launch_driver_jvm(options: dict[str, str]) -> None:
    """Start the driver JVM (once per process) with its own output in a file of its own, not inherited.

    PySpark's JVM otherwise writes to whatever this process's stderr is when it starts: the JDK's and
    log4j's start-up lines on every ``chaos report``, and in the test suite, whose session starts it in a
    thread, wherever pytest's capture happened to point fd 2 at that moment (the terminal, in one run).
    ``launch_gateway``'s ``popen_kwargs`` is PySpark's own hook for this. The file is unlinked at once
    (``TemporaryFile``): the JVM writes into it until it exits, and nothing is left behind; its tail is
    the error's text when the JVM does not start. The options a JVM needs at launch (driver memory) go to
    ``spark-submit`` as there."""
    import tempfile

    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return
    with tempfile.TemporaryFile() as log:
        try:
            gateway = launch_gateway(SparkConf(loadDefaults=False).setAll(list(options.items())),
                                     popen_kwargs={"stdout": log, "stderr": log})
        except Exception as exc:  # noqa: BLE001 - the JVM did not start: its own words say why
            log.seek(0)
            said = [line.strip() for line in log.read().decode(errors="replace").splitlines() if line.strip()]
            why = said[-1] if said else (str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            raise UsageError(f"could not start Spark ({why[:300]}); check JAVA_HOME points at a JDK 11/17") from None
        SparkContext._ensure_initialized(gateway=gateway)


#: loggers that log a failed task with its stack trace (ERROR) before the driver re-raises the failure as the
#: job's exception, which the report turns into its one line (a corrupt history line, chaos.report.tables)
_TASK_FAILURE_LOGGERS = ("org.apache.spark.executor.Executor", "org.apache.spark.scheduler.TaskSetManager")


def _silence_task_failures(spark) -> None:
    """Turn off the driver JVM's logs of failed tasks: a bad history line would otherwise put Java stack
    traces on stderr ahead of the report's one-line error (with ``local[N]`` the executor is in the driver's
    JVM too). Nothing is lost: the failure reaches Python as the job's exception, cause included."""
    jvm = spark.sparkContext._jvm
    off = jvm.org.apache.logging.log4j.Level.OFF
    for name in _TASK_FAILURE_LOGGERS:
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, off)


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
    options = {
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.default.parallelism": "2",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.driver.memory": os.environ.get("CHAOS_REPORT_DRIVER_MEMORY", "2g"),
        "spark.sql.sources.partitionOverwriteMode": "static",
        # one file per history: list them in the driver, not with a Spark job per read
        "spark.sql.sources.parallelPartitionDiscovery.threshold": "100000",
        # keep date=YYYY-MM-DD partitions as strings ("unknown" is a valid night too)
        "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    }
    # Under spark-submit the JVM is already up (it hands the gateway port over): its master wins.
    if master or "PYSPARK_GATEWAY_PORT" not in os.environ:
        master = master or DEFAULT_MASTER
        _check_master(master)
        options["spark.master"] = master
        if _loopback_driver(master):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            # nothing of the driver (RPC, block manager) listens beyond this machine
            options.update({"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"})
        _launch_driver_jvm(options)
    builder = SparkSession.builder.appName("kafka-chaos-report")
    for key, value in options.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # noqa: BLE001 - the JVM failed to start: say what to fix
        raise UsageError(f"could not start Spark ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); "
                         "check JAVA_HOME points at a JDK 11/17 and the --spark-master URL") from None
    spark.sparkContext.setLogLevel("ERROR")
    _silence_task_failures(spark)
    if spark.sparkContext._jsc.sc().isStopped():
        raise UsageError(f"Spark stopped while connecting to {spark.sparkContext.master}: check the master's log "
                         "and that its workers can reach this machine")
    return spark
