"""Test helpers (not used by the job itself)."""

from .cluster import SparkCluster, find_spark_class

__all__ = ["SparkCluster", "find_spark_class"]
