"""The reliability report: a PySpark job over many recorded runs (docs/architecture.md, "Reports over many runs").

``chaos report RESULTS --out REPORT`` (:mod:`chaos.report.command`) or
``spark-submit reports/build_report.py RESULTS --out REPORT`` runs
:func:`chaos.report.job.build_report`: histories and ``checks.json`` become
Parquet tables (:mod:`~chaos.report.tables`), aggregates per night and
experiment are computed with Spark SQL (:mod:`~chaos.report.metrics`), three
core invariants are re-checked over the whole archive and compared with the
per-run checkers (:mod:`~chaos.report.recheck`), and a static HTML report is
rendered (:mod:`~chaos.report.render`). PySpark, pandas, pyarrow and matplotlib
are imported only when the report runs.
"""
