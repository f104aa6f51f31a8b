"""The SparkSession the report runs on: local by default, any master URL when asked.

Defaults suit a 2-core developer machine and small archives: ``local[2]``, few
shuffle partitions, no UI, quiet logs. Under ``spark-submit`` the session that
spark-submit configured is reused (its master and settings win).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from chaos.errors import UsageError

DEFAULT_MASTER = "local[2]"
_JAVA17 = Path("/usr/lib/jvm/java-17-openjdk-amd64")


def _ensure_java() -> None:
    if os.environ.get("JAVA_HOME") or shutil.which("java"):
        return
    if _JAVA17.is_dir():
        os.environ["JAVA_HOME"] = str(_JAVA17)
        return
    raise UsageError("Spark needs a JDK (11 or 17): install openjdk-17-jre-headless or set JAVA_HOME")


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
        builder = builder.master(master or DEFAULT_MASTER)
    builder = (builder
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               .config("spark.default.parallelism", "2")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .config("spark.driver.memory", os.environ.get("CHAOS_REPORT_DRIVER_MEMORY", "2g"))
               .config("spark.sql.sources.partitionOverwriteMode", "static")
               # keep date=YYYY-MM-DD partitions as strings ("unknown" is a valid night too)
               .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false"))
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # noqa: BLE001 - the JVM failed to start: say what to fix
        raise UsageError(f"could not start Spark ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); "
                         "check JAVA_HOME points at a JDK 11/17 and the --spark-master URL") from None
    spark.sparkContext.setLogLevel("ERROR")
    return spark
