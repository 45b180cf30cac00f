"""The Spark side of the encoding plan: column types, row sources, and the planner's passes.

The rules are those of :mod:`vmi_spark.core.planning` (one planner for Spark and for
memory); this module says how Spark's column types are read (:func:`value_type`,
:func:`value_sql`; :mod:`.columns` says which columns are features), and runs
:func:`~vmi_spark.core.planning.build_plan` over a :class:`RowSource` (the Spark reader,
:class:`.spark_source.SparkSource`, or the pyarrow reader,
:class:`.arrow_source.ParquetReader`). The plan is a pure function of the data, not of
its partitioning nor of the reader.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Protocol

from pyspark.sql import DataFrame
from pyspark.sql import types as T

from ..core import planning
from ..core.encoding import EncodingPlan, LabelRule, TopValues
from ..core.limits import DEFAULT
from ..core.planning import BOOLEAN, FLOATING, INTEGER, STRING, Planned, ValueType
from ..core.planning import suggest_name as suggest

#: columns fetched to the driver at once when placing bin edges (the default of
#: ``limits.current().split_chunk``, which the code reads)
SPLIT_CHUNK = DEFAULT.split_chunk

_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_FLOATING = (T.FloatType, T.DoubleType, T.DecimalType)
_NUMERIC = _INTEGRAL + _FLOATING
#: the temporal types read as numbers, and the unit of each
_UNITS: tuple[tuple[str, str], ...] = (("DateType", "date"), ("TimestampType", "timestamp"),
                                       ("TimestampNTZType", "timestamp_ntz"),
                                       ("DayTimeIntervalType", "interval"),
                                       ("YearMonthIntervalType", "months"))


class RowSource(planning.PlanSource, Protocol):
    """Where the passes over the rows read them: the planner's passes
    (:class:`vmi_spark.core.planning.PlanSource`), the encoding pass, and what the run
    needs to know of the source (:mod:`vmi_spark.spark.routes` asks it, never its class).
    """

    #: ``"pyarrow"`` or ``"spark"``: what reads the rows (the report's ``reader``)
    read_by: str

    def encode_chunks(self, plan: EncodingPlan, chunk_rows: int,
                      skip_cols: list[str]) -> DataFrame:
        """The kept rows as chunk rows of codes (:mod:`vmi_spark.spark.chunks.codes`)."""
        ...

    def reading(self) -> AbstractContextManager[None]:
        """The session settings the jobs that read the rows run under."""
        ...

    def evened(self, parts: int) -> Any:
        """The same rows cut into ``parts`` even runs, encoded straight into
        ``parts`` partitions (``encode_chunks(..., partitions=parts)``), or None where
        the source cannot (the chunks are then spread by a range shuffle)."""
        ...


class SparkRows:
    """What a row source read by Spark has (the defaults of :class:`RowSource`): no
    session settings of its own, no even cut."""

    read_by = "spark"

    def reading(self) -> AbstractContextManager[None]:
        return nullcontext()

    def evened(self, parts: int) -> Any:
        return None


def is_numeric(dt: T.DataType) -> bool:
    """Whether a Spark type is a number (coded as a double)."""
    return isinstance(dt, _NUMERIC)


def is_vector_type(dt: T.DataType) -> bool:
    """Whether a Spark type is Spark ML's vector (``VectorUDT``; by name, so that asking
    does not import ``pyspark.ml``)."""
    return type(dt).__name__ == "VectorUDT"


def value_type(dt: T.DataType) -> ValueType | None:
    """How the values of a column of Spark type ``dt`` are read, or None if they cannot
    be (binary, arrays, maps, structs, vectors, ...)."""
    if isinstance(dt, _INTEGRAL):
        return INTEGER
    if isinstance(dt, _FLOATING):
        return FLOATING
    if isinstance(dt, T.BooleanType):
        return BOOLEAN
    if isinstance(dt, (T.StringType, T.CharType, T.VarcharType)):
        return STRING
    unit = dict(_UNITS).get(type(dt).__name__)
    return ValueType("double", unit=unit) if unit is not None else None


#: a TIMESTAMP_NTZ as microseconds of its wall clock since 1970-01-01 00:00, whatever the
#: session time zone (Spark's timestampdiff moves across a daylight-saving gap)
_NTZ_MICROS = ("CAST(unix_date(CAST({c} AS DATE)) AS BIGINT) * 86400000000"
               " + CAST(hour({c}) AS BIGINT) * 3600000000"
               " + CAST(minute({c}) AS BIGINT) * 60000000"
               " + CAST(date_part('SECOND', {c}) * 1000000 AS BIGINT)")
_SQL = {"date": "unix_date({c})", "timestamp": "unix_micros({c})",
        "timestamp_ntz": _NTZ_MICROS,
        "interval": "unix_micros(TIMESTAMP'1970-01-01 00:00:00 UTC' + {c})",
        "months": "CAST({c} AS INT)"}


def value_sql(name: str, dt: T.DataType) -> str:
    """The SQL expression of column ``name`` (type ``dt``) whose values the Python
    workers type (:func:`vmi_spark.core.rows.typed_array`): decimals as doubles (Spark's
    rounding), dates as days and timestamps and day-time intervals as microseconds
    (:mod:`vmi_spark.core.units`), year-month intervals as months, anything else as is."""
    q = quote(name)
    if isinstance(dt, T.DecimalType):
        return f"CAST({q} AS DOUBLE)"
    vt = value_type(dt)
    if vt is not None and vt.unit is not None:
        return _SQL[vt.unit].format(c=q)
    return q


def quote(name: str) -> str:
    """Backtick-quote a column name so dots and odd characters are taken literally."""
    return "`" + name.replace("`", "``") + "`"


def plan_from_schema(df: DataFrame | T.StructType, label: str, features: list[str],
               params: Mapping[str, Any], source: planning.PlanSource,
               weight_col: str | None = None) -> Planned:
    """The encoding plan of ``df``'s ``features`` (:func:`vmi_spark.core.planning.
    build_plan`) with the passes of ``source``; ``df`` (or its schema) gives the types.
    ``weight_col``: the rows' weights, which ``source`` reads last."""
    schema = df if isinstance(df, T.StructType) else df.schema
    types = {f.name: f.dataType for f in schema.fields}
    vtypes = {c: value_type(types[c]) or FLOATING for c in features}
    return planning.build_plan(label, value_type(types[label]) or STRING, features, vtypes,
                               params, source, weight_col)


__all__ = ["RowSource", "SparkRows", "SPLIT_CHUNK", "TopValues", "LabelRule", "plan_from_schema",
           "is_numeric", "quote", "suggest", "value_sql", "value_type"]
