"""Pluggable feature selectors for the experiments.

A selector is ``select(codes, y, method, k) -> list[int]``: ``codes`` is an
(N, d) uint8 array of discretized features, ``y`` (N,) int class codes 0..L-1,
``method`` one of ``vmi_naive``, ``vmi_pairwise``, ``mim``, ``mrmr``, ``jmi``,
``cmim``, ``cife``, ``spec_cmi``; it returns the indices of the first (at most)
``k`` selected features in selection order. All methods are greedy (SPEC_CMI
ranks), so the first K' <= k of a run with k are the run with K'.

* :func:`core_selector` - ``vmi_spark.core.greedy.select`` on an ``InMemoryBackend``
  (the same numpy chunk kernels the Spark executors run).
* :func:`make_spark_selector` - ``vmi_spark.spark.select.run_selection`` on one
  local SparkSession (reused across calls) for all eight methods; the integer
  codes are passed with ``max_categories`` large enough that Spark uses them as
  categories, i.e. Spark selects on exactly the experiments' discretisation.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

import numpy as np

from ..core.greedy import select
from ..core.inmemory import InMemoryBackend
from ..params import VMI_METHODS as REGISTRY_VMI_METHODS
from ..params import cap_num_features
from .paper import METHODS as PAPER_METHODS

VMI_METHODS = REGISTRY_VMI_METHODS
#: the registry's methods in the paper's table order
ALL_METHODS = tuple(PAPER_METHODS)

Selector = Callable[[np.ndarray, np.ndarray, str, int], list]


def core_selector(codes: np.ndarray, y: np.ndarray, method: str, k: int) -> list[int]:
    """Select with the numpy core on an InMemoryBackend."""
    k = cap_num_features(k, codes.shape[1])[0]
    backend = InMemoryBackend(np.ascontiguousarray(codes.T), y)
    return list(select(backend, method, k).selected)


core_selector.name = "core (InMemoryBackend)"  # type: ignore[attr-defined]


def local_spark(cores: int = 2):
    """A quiet local SparkSession (created on first use)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(f"local[{cores}]").appName("vmi_spark-experiments")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", str(2 * cores))
             .config("spark.default.parallelism", str(2 * cores))
             .config("spark.driver.memory", "2g")
             .config("spark.sql.execution.arrow.pyspark.enabled", "true")
             .getOrCreate())
    from ..spark.session import set_log_level

    set_log_level(spark, "ERROR")
    return spark


def codes_frame(spark, codes: np.ndarray, y: np.ndarray, num_partitions: int = 2):
    """A Spark DataFrame with integer columns f0..f{d-1} and ``y``."""
    import pandas as pd

    pdf = pd.DataFrame(codes.astype(np.int32), columns=[f"f{j}" for j in range(codes.shape[1])])
    pdf["y"] = y.astype(np.int32)
    return spark.createDataFrame(pdf).repartition(num_partitions)


def spark_max_categories(codes: np.ndarray) -> int:
    """``max_categories`` for ``run_selection`` so that every code column is used as categories.

    The experiments discretise first (:func:`vmi_spark.experiments.datasets.discretize`,
    codes 0..4) and hand the integer codes to Spark. ``run_selection`` keeps an integer
    column with at most ``max_categories`` distinct values as categories (one state per
    value) and would re-bin any other column, so this returns at least the largest
    number of distinct codes (and the job's default 32)."""
    return max(32, int(codes.max(initial=0)) + 1)


def make_spark_selector(spark=None) -> Selector:
    """A selector running every method through ``run_selection`` on one local SparkSession.

    The codes are passed as int columns with ``max_categories`` from
    :func:`spark_max_categories`, so the plan keeps them as categories: Spark selects on
    exactly the discretisation the classifier sees. The session is created on first use
    (or ``spark`` is used) and reused for every call; ``select.plan_kinds`` collects the
    column kinds of every plan (only ``category``/``constant`` are expected).
    """
    import warnings

    from ..spark.select import run_selection

    state = {"spark": spark}

    def select(codes: np.ndarray, y: np.ndarray, method: str, k: int) -> list[int]:
        if method not in ALL_METHODS:
            raise ValueError(f"unknown method {method!r}")
        if state["spark"] is None:
            state["spark"] = local_spark()
        df = codes_frame(state["spark"], codes, y)
        features = [f"f{j}" for j in range(codes.shape[1])]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run = run_selection(df, "y", features=features, method=method,
                                num_features=cap_num_features(k, codes.shape[1])[0],
                                max_categories=spark_max_categories(codes),
                                bias_correction="none")  # the paper's plug-in gains
        select.plan_kinds.update(c.kind for c in run.plan.columns)  # type: ignore[attr-defined]
        select.calls += 1  # type: ignore[attr-defined]
        return list(run.selection.selected)

    select.plan_kinds = set()  # type: ignore[attr-defined]
    select.calls = 0  # type: ignore[attr-defined]
    select.spark = lambda: state["spark"]  # type: ignore[attr-defined]
    select.name = ("spark (run_selection on one local[2] SparkSession, all methods; "
                   "integer codes as categories)")  # type: ignore[attr-defined]
    return select
