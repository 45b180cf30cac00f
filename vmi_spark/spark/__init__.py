"""Spark data layer: plan the encoding, encode into cached blocks, run the greedy steps.

``select.run_selection`` is the one orchestrator. It reads the rows through a row
source (``plan.RowSource``: ``spark_source.SparkSource`` or
``arrow_source.ParquetReader``, sharing ``rows``), computes the plan of
``vmi_spark.core.encoding`` (``plan.plan_from_schema``), writes blocks in the format of
``blocks`` and runs the steps with an execution (``routes.Execution``:
``backend.SparkBackend``, one Spark job a pass, or ``resident.ResidentBackend``).
``session`` holds the session probes.
"""

from .._deps import require_pyspark

require_pyspark("vmi_spark.spark")
