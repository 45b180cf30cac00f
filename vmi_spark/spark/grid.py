"""Equal-width grids for the KDE estimator: continuous columns coded on fine cells.

Under ``estimator="kde"`` every column the plan would bin by quantiles (``bins``)
is instead coded on :data:`~vmi_spark.core.kde.KDE_GRID` equal-width cells between
its finite minimum and maximum (one aggregation pass), kind ``grid``. Infinite
values fall into the edge cells; missing values keep their own state.
"""

from __future__ import annotations

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..core.encoding import EncodingPlan
from ..core.kde import KDE_GRID
from .plan import quote
from .sources.spark_source import SparkSource, prepare_frame


def grid_plan(df: DataFrame, plan: EncodingPlan, cells: int = KDE_GRID,
              skip_cols: list[str] | None = None,
              weight_col: str | None = None) -> EncodingPlan:
    """``plan`` with its quantile-binned columns recoded on an equal-width grid over the
    rows the plan keeps (a label, no missing value in ``skip_cols``, a positive weight)."""
    df = SparkSource(df, weight_col).kept(plan.label, skip_cols or [])
    cols = [c for c in plan.columns if c.kind == "bins"]
    if not cols:
        return plan
    df = prepare_frame(df, plan.label, [c.name for c in cols])  # typed as the plan saw them
    aggs = []
    for c in cols:
        v = F.col(quote(c.name))
        finite = F.when(~F.isnan(v) & (F.abs(v) != F.lit(float("inf"))), v)
        aggs += [F.min(finite), F.max(finite)]
    row = df.agg(*aggs).first()
    if row is None:
        return plan
    for j, c in enumerate(cols):
        lo, hi = row[2 * j], row[2 * j + 1]
        if lo is None or not hi > lo:
            continue  # no finite spread: keep the quantile bins
        edges = np.linspace(float(lo), float(hi), cells + 1)[1:-1]
        c.kind = "grid"
        c.splits = [float(e) for e in edges]
    return plan
