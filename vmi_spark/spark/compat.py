"""What differs between the PySpark versions the package runs on: 3.5 (Databricks 14.3,
15.4 and 16.4 LTS) and 4.x.

Every other module calls the newer API through these functions, which fall back to what
3.5 has; each fallback gives the same rows and the same selection (the Spark 3.5 tier of
``tests/run_tiers.sh`` compares them bit for bit with Spark 4's). Versions below 3.5 are
refused at import (:func:`vmi_spark._deps.require_pyspark`).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from .._deps import spark_version
from ..core import limits
from ..core.limits import DEFAULT

__all__ = ["ARROW_READER_MIN", "SPARK_VERSION", "arrow_reader_note", "collected_arrow",
           "handle_overwrite", "load_metadata", "save_metadata", "to_arrow"]

#: the (major, minor) of the PySpark in this process
SPARK_VERSION: tuple[int, int] = spark_version() or (4, 0)

#: the oldest pyarrow the pyarrow reader is used with (the default of
#: ``limits.current().arrow_reader_min``, which the code reads; 14.3 LTS and serverless
#: environment 1 ship 8.0.0: Spark's reader)
ARROW_READER_MIN = DEFAULT.arrow_reader_min


def arrow_reader_note() -> str | None:
    """Why the pyarrow reader is off in this process (a pyarrow older than
    :data:`ARROW_READER_MIN`), or None if it may be used. The passes over Spark's
    rows use pyarrow too, through Spark's own Arrow batches, which every pyarrow that
    PySpark accepts reads."""
    found, least = spark_version(pa.__version__), limits.current().arrow_reader_min
    if found is None or found >= least:
        return None
    return (f"pyarrow {pa.__version__} is older than {least[0]}.{least[1]}, "
            "the oldest the pyarrow reader runs with: the Parquet input was read with "
            "Spark's reader instead (the same rows, slower for wide tables)")


def to_arrow(df: Any) -> pa.Table:
    """``df.toArrow()`` (PySpark 4.0+, classic and Connect): the rows of ``df`` collected
    to the driver as one Arrow table.

    PySpark 3.5 has no ``toArrow``: a classic session collects the same Arrow batches
    with ``DataFrame._collect_as_arrow`` (what ``toPandas`` uses), a Connect session with
    its client's ``to_table`` (what the Connect ``toPandas`` uses); both come from Spark's
    Arrow converters, as ``toArrow``'s do.
    """
    if hasattr(type(df), "toArrow"):
        return df.toArrow()
    return collected_arrow(df)


def collected_arrow(df: Any) -> pa.Table:
    """:func:`to_arrow` the PySpark 3.5 way (a classic 4.x session still has
    ``_collect_as_arrow``, so it is tested there too)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    if type(df).__module__.startswith("pyspark.sql.connect"):
        client = df._session.client
        parts = [t for t in client.to_table_as_iterator(df._plan.to_proto(client))
                 if isinstance(t, pa.Table)]
        batches = [b for t in parts for b in t.to_batches()]
    else:
        with warnings.catch_warnings():
            # 3.5 leaves the socket it read the batches from to the garbage collector
            # (a ResourceWarning that the job would report as one of its own warnings)
            warnings.simplefilter("ignore", ResourceWarning)
            batches = df._collect_as_arrow()
    if batches:
        return pa.Table.from_batches(batches)
    return to_arrow_schema(df.schema).empty_table()  # no rows: the columns, typed


def _connect(spark: Any) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


def save_metadata(instance: Any, path: str, spark: Any, extra: dict | None = None,
                  overwrite: bool = False) -> None:
    """``DefaultParamsWriter.saveMetadata(instance, path, spark, extra)`` of PySpark 4: the
    params as one JSON line in ``path/metadata``, written with a DataFrame (so that it works
    under Spark Connect too).

    PySpark 3.5's ``saveMetadata`` takes a SparkContext (none under Connect) and writes with
    an RDD; here it is the same JSON written the same way as 4's. Under a 3.5 Connect
    client ``overwrite`` replaces the metadata with the write's mode (the client cannot
    delete the old path, see :func:`handle_overwrite`).
    """
    from pyspark.ml.util import DefaultParamsWriter

    if SPARK_VERSION >= (4, 0):
        DefaultParamsWriter.saveMetadata(instance, path, spark, extraMetadata=extra)
        return
    # 3.5's _get_metadata_to_save asks its "sc" for the version only: the session has it
    text = DefaultParamsWriter._get_metadata_to_save(instance, spark, extra)  # type: ignore[arg-type]
    writer = spark.createDataFrame([(text,)], schema=["value"]).coalesce(1).write
    writer.mode("overwrite" if overwrite else "error").text(os.path.join(path, "metadata"))


def load_metadata(path: str, spark: Any, expected: str = "") -> dict[str, Any]:
    """``DefaultParamsReader.loadMetadata(path, spark)`` of PySpark 4 (a DataFrame read);
    on 3.5, whose ``loadMetadata`` takes a SparkContext, the same read and parse."""
    from pyspark.ml.util import DefaultParamsReader

    if SPARK_VERSION >= (4, 0):
        return DefaultParamsReader.loadMetadata(path, spark, expected)
    row = spark.read.text(os.path.join(path, "metadata")).first()
    if row is None:
        raise ValueError(f"no metadata in {path}")
    return DefaultParamsReader._parseMetaData(row[0], expected)


def handle_overwrite(spark: Any, path: str, classic: Callable[[str], None]) -> None:
    """Remove ``path`` before an ML writer's ``overwrite().save(path)``: ``classic`` (the
    JVM's FileSystemOverwrite) in a classic session; under Spark Connect 4 the server's ML
    helper (what PySpark does for its own ``Pipeline``). A 3.5 Connect client has neither:
    :func:`save_metadata` then overwrites the metadata with its write mode."""
    if not _connect(spark):
        classic(path)
    elif SPARK_VERSION >= (4, 0):
        from pyspark.ml.connect.readwrite import RemoteMLWriter

        RemoteMLWriter.handleOverwrite(path, True)
