"""Spark data layer: plan the encoding, encode into cached blocks, run passes."""

from .._deps import require_pyspark

require_pyspark("vmi_spark.spark")
