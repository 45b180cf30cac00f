"""Optional dependencies: one clear line when a part of the package needs one that is absent.

``pip install vmi_spark`` installs the Spark-free parts (the numpy core, the
scikit-learn selector, the report); PySpark comes with the ``spark`` extra, or from
the platform (a Databricks runtime provides it without pip knowing).
"""

from __future__ import annotations

import re

__all__ = ["PYSPARK_HINT", "MIN_SPARK", "missing_pyspark", "require_pyspark", "spark_version"]

#: how to get PySpark, in every message about its absence
PYSPARK_HINT = "pip install 'vmi_spark[spark]'"
#: the oldest PySpark the Spark parts run on (Databricks Runtime 14.3 LTS has 3.5.0)
MIN_SPARK = (3, 5)


def missing_pyspark(part: str) -> ImportError:
    """The ImportError raised when ``part`` (e.g. ``vmi_spark.ml``) is used without PySpark."""
    err = ImportError(f"{part} needs PySpark (>=3.5), which is not installed: {PYSPARK_HINT} "
                      "(Databricks runtimes already provide it)")
    err.name = "pyspark"
    return err


def spark_version(version: str | None = None) -> tuple[int, int] | None:
    """``(major, minor)`` of ``version`` (default: the installed ``pyspark.__version__``);
    None if it cannot be read (a vendor's build with another scheme: not refused)."""
    if version is None:
        try:
            import pyspark
        except ImportError:
            return None
        version = str(getattr(pyspark, "__version__", ""))
    m = re.match(r"\s*(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if m else None


def require_pyspark(part: str) -> None:
    """Raise :func:`missing_pyspark` unless ``pyspark`` can be imported, and a one-line
    ImportError naming the version if it is older than :data:`MIN_SPARK`."""
    try:
        import pyspark
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in ("pyspark", "py4j"):
            raise
        raise missing_pyspark(part) from None
    found = spark_version()
    if found is not None and found < MIN_SPARK:
        raise ImportError(f"{part} needs PySpark >= {MIN_SPARK[0]}.{MIN_SPARK[1]}, found "
                          f"PySpark {pyspark.__version__} (Databricks Runtime 14.3 LTS or "
                          f"later; elsewhere {PYSPARK_HINT})")
