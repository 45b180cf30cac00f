"""Spark data layer: plan the encoding, encode into cached chunks, run the greedy steps.

``select.run_selection`` is the one orchestrator; ``columns.resolve`` checks the columns once
and ``routes`` makes the two decisions. It
reads the rows through a row source of ``sources`` (``plan.RowSource``:
``spark_source.SparkSource``, ``arrow_source.ParquetReader``, the vector readers),
computes the plan of ``vmi_spark.core.encoding`` (``plan.plan_from_schema``), encodes
chunks of rows (``chunks.codes``) kept by ``chunks.storage`` within ``chunks.memory``'s
budgets, and runs the steps with an execution of ``executions`` (``routes.Execution``:
the driver, resident tasks, or ``passes.SparkBackend``, one Spark job a pass).
``session`` holds the session probes."""

from .._deps import require_pyspark

require_pyspark("vmi_spark.spark")
