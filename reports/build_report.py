"""Entry script for ``spark-submit``: the same job as ``chaos report``.

    spark-submit --master local[2] reports/build_report.py RESULTS_DIR --out REPORT_DIR

The master comes from spark-submit (``--master``); ``--spark-master`` here is
only for running the script with plain ``python``. The kafka-chaos package
must be importable by the driver (installed in the Python that spark-submit
uses: set ``PYSPARK_PYTHON``/``PYSPARK_DRIVER_PYTHON`` to the project's venv).
"""

from __future__ import annotations

import sys
from pathlib import Path

# Running from a checkout without the package installed: make `chaos` importable.
_ROOT = Path(__file__).resolve().parents[1]
if (_ROOT / "chaos").is_dir() and str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from chaos.report.command import report  # noqa: E402

if __name__ == "__main__":
    report.main(args=sys.argv[1:], prog_name="build_report.py")
