"""Pluggable feature selectors for the experiments.

A selector is ``select(codes, y, method, k) -> list[int]``: ``codes`` is an
(N, d) uint8 array of discretized features, ``y`` (N,) int class codes 0..L-1,
``method`` one of ``vmi_naive``, ``vmi_pairwise``, ``mim``, ``mrmr``, ``jmi``,
``cmim``, ``cife``, ``spec_cmi``; it returns the indices of the first (at most)
``k`` selected features in selection order. All methods are greedy (SPEC_CMI
ranks), so the first K' <= k of a run with k are the run with K'.

* :func:`core_selector` - ``vmi_spark.core.greedy.select_vmi`` /
  ``vmi_spark.core.criteria.select_classic`` on an ``InMemoryBackend`` (the same
  numpy block kernels the Spark executors run).
* :func:`make_spark_selector` - ``vmi_spark.spark.select.run_selection`` on a
  local SparkSession for the methods the Spark job supports (``vmi_naive``,
  ``vmi_pairwise``); the classic methods are not wired into ``run_selection``
  yet, so they fall back to the core (recorded in ``selector.fallbacks``).
"""

from __future__ import annotations

import os
import sys
from typing import Callable

import numpy as np

from ..core.criteria import CLASSIC_METHODS, select_classic
from ..core.greedy import select_vmi
from ..core.inmemory import InMemoryBackend

VMI_METHODS = ("vmi_naive", "vmi_pairwise")
ALL_METHODS = ("mrmr", "jmi", "mim", "cmim", "cife", "spec_cmi", "vmi_naive", "vmi_pairwise")

Selector = Callable[[np.ndarray, np.ndarray, str, int], list]


def core_selector(codes: np.ndarray, y: np.ndarray, method: str, k: int) -> list[int]:
    """Select with the numpy core on an InMemoryBackend."""
    k = min(k, codes.shape[1])
    backend_method = method if method in VMI_METHODS else "vmi_naive"
    backend = InMemoryBackend(np.ascontiguousarray(codes.T), y, backend_method)
    if method in VMI_METHODS:
        sel = select_vmi(backend, method, k)
    elif method in CLASSIC_METHODS:
        sel = select_classic(backend, method, k)
    else:
        raise ValueError(f"unknown method {method!r}")
    return list(sel.selected)


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
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def codes_frame(spark, codes: np.ndarray, y: np.ndarray, num_partitions: int = 2):
    """A Spark DataFrame with integer columns f0..f{d-1} and ``y``."""
    import pandas as pd

    pdf = pd.DataFrame(codes.astype(np.int32), columns=[f"f{j}" for j in range(codes.shape[1])])
    pdf["y"] = y.astype(np.int32)
    return spark.createDataFrame(pdf).repartition(num_partitions)


def make_spark_selector(spark=None) -> Selector:
    """A selector running ``run_selection`` on Spark for VMI, the core for the classic methods."""
    import warnings

    from ..spark.select import run_selection

    state = {"spark": spark}

    def select(codes: np.ndarray, y: np.ndarray, method: str, k: int) -> list[int]:
        if method not in VMI_METHODS:
            select.fallbacks.add(method)  # type: ignore[attr-defined]
            return core_selector(codes, y, method, k)
        if state["spark"] is None:
            state["spark"] = local_spark()
        df = codes_frame(state["spark"], codes, y)
        features = [f"f{j}" for j in range(codes.shape[1])]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run = run_selection(df, "y", features=features, method=method,
                                num_features=min(k, codes.shape[1]), max_categories=32)
        return list(run.selection.selected)

    select.fallbacks = set()  # type: ignore[attr-defined]
    select.name = "spark (run_selection, local mode; classic methods on the core)"  # type: ignore[attr-defined]
    return select
