"""Optional dependencies: one clear line when a part of the package needs one that is absent.

``pip install vmi_spark`` installs the Spark-free parts (the numpy core, the
scikit-learn selector, the report); PySpark comes with the ``spark`` extra, or from
the platform (a Databricks runtime provides it without pip knowing).
"""

from __future__ import annotations

import re

__all__ = ["PYSPARK_HINT", "MIN_SPARK", "missing_pyspark", "prefer_installed_pyspark",
           "require_pyspark", "spark_version"]

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


def prefer_installed_pyspark(path: list[str] | None = None,
                             spark_home: str | None = None) -> list[str]:
    """Move spark-submit's zipped copies of PySpark and Py4J behind the installed packages
    they were taken from; returns the entries moved (``sys.path`` is changed in place).

    spark-submit puts ``$SPARK_HOME/python/lib/pyspark.zip`` and ``py4j-*-src.zip`` first
    on the driver's path. Python compiles modules imported from a zip on every start
    (it caches no bytecode for them): about a second of the job's start-up on PySpark 4.
    When ``SPARK_HOME`` is a pip-installed ``pyspark`` package, the zip is that package's
    own copy of the same sources, so importing the package instead (its cached bytecode)
    runs the same code. Py4J's zip moves only when the installed Py4J has the zip's
    version. Anything else (a Spark distribution, a runtime's own Spark) is left as it is.
    """
    import os
    import sys

    path = sys.path if path is None else path
    home = spark_home if spark_home is not None else os.environ.get("SPARK_HOME", "")
    if not home or not os.path.isfile(os.path.join(home, "__init__.py")):
        return []
    lib = os.path.realpath(os.path.join(home, "python", "lib"))
    moved = [p for p in path if p.endswith(".zip") and os.path.dirname(os.path.realpath(p)) == lib
             and _same_as_installed(os.path.basename(p))]
    rest = [p for p in path if p not in moved]
    if not moved or _package_dir("pyspark", rest) != os.path.realpath(home):
        return []  # the pyspark the path would find instead is another copy: keep the zip
    for p in moved:
        path.remove(p)
        path.append(p)
    return moved


def _package_dir(name: str, path: list[str]) -> str | None:
    """The real directory of package ``name`` as ``path`` would import it (None: absent)."""
    import os
    from importlib.machinery import PathFinder

    spec = PathFinder.find_spec(name, path)
    if spec is None or not spec.origin:
        return None
    return os.path.realpath(os.path.dirname(spec.origin))


def _same_as_installed(zip_name: str) -> bool:
    """True for ``pyspark.zip``, and for ``py4j-<v>-src.zip`` when Py4J ``<v>`` is installed."""
    if zip_name == "pyspark.zip":
        return True
    m = re.fullmatch(r"py4j-(.+)-src\.zip", zip_name)
    if not m:
        return False
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("py4j") == m.group(1)
    except PackageNotFoundError:
        return False
