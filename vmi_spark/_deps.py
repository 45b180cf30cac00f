"""Optional dependencies: one clear line when a part of the package needs one that is absent.

``pip install vmi_spark`` installs the Spark-free parts (the numpy core, the
scikit-learn selector, the report); PySpark comes with the ``spark`` extra, or from
the platform (a Databricks runtime provides it without pip knowing).
"""

from __future__ import annotations

__all__ = ["PYSPARK_HINT", "missing_pyspark", "require_pyspark"]

#: how to get PySpark, in every message about its absence
PYSPARK_HINT = "pip install 'vmi_spark[spark]'"


def missing_pyspark(part: str) -> ImportError:
    """The ImportError raised when ``part`` (e.g. ``vmi_spark.ml``) is used without PySpark."""
    err = ImportError(f"{part} needs PySpark (>=4.0), which is not installed: {PYSPARK_HINT} "
                      "(Databricks runtimes already provide it)")
    err.name = "pyspark"
    return err


def require_pyspark(part: str) -> None:
    """Raise :func:`missing_pyspark` unless ``pyspark`` can be imported."""
    try:
        import pyspark  # noqa: F401
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in ("pyspark", "py4j"):
            raise
        raise missing_pyspark(part) from None
