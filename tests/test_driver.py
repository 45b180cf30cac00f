"""The driver execution (issue 21): a small table is selected in the driver with the same
functions as on the executors, so every field of the result is the one the distributed
executions give, bit for bit (both row sources, every method, missing values, strings,
decimals, booleans, continuous labels, handleInvalid skip)."""

from __future__ import annotations

import decimal

import numpy as np
import pandas as pd
import pytest

from vmi_spark.errors import InputError
from vmi_spark.params import METHOD_NAMES

pytestmark = pytest.mark.driver_auto

_FIELDS = ("selected", "selected_indices", "scores", "gains", "blocks", "num_rows",
           "rows_dropped", "rows_skipped", "classes", "columns", "mutual_information")


def _mixed(seed: int = 0, n: int = 900) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    amount = np.where(rng.random(n) < 0.5, 0.0, y * 10 + rng.normal(size=n))
    amount[rng.random(n) < 0.05] = np.nan
    return pd.DataFrame({
        "amount": amount,
        "grade": np.array(["a", "b", "c", None], dtype=object)[(y + rng.integers(0, 2, n)) % 4],
        "flag": (y == 1) ^ (rng.random(n) < 0.2),
        "count": (y * 3 + rng.integers(0, 5, n)).astype(np.int64),
        "noise": rng.normal(size=n),
        "price": [decimal.Decimal(f"{v:.2f}") for v in rng.uniform(0, 100, n)],
        "y": y,
    })


def _same(a: dict, b: dict) -> None:
    for key in _FIELDS:
        assert a.get(key) == b.get(key), key


@pytest.fixture(scope="module")
def mixed_parquet(spark, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("driver") / "mixed.parquet")
    _decimal_frame(spark).drop("price").repartition(3).write.parquet(path)
    return path


def _decimal_frame(spark):
    schema = ("amount double, grade string, flag boolean, count long, noise double, "
              "price decimal(10,2), y long")
    return spark.createDataFrame(_mixed(), schema=schema)


@pytest.mark.parametrize("method", METHOD_NAMES)
def test_driver_selects_as_the_executors_do(spark, mixed_parquet, method):
    from vmi_spark.spark.select import run_selection
    from vmi_spark.spark.sources.arrow_source import parquet_source

    parquet = spark.read.parquet(mixed_parquet)
    feats = [c for c in parquet.columns if c != "y"]
    src = parquet_source(parquet, ["y", *feats])
    assert src is not None
    # pyarrow in the driver; the limit probe through Spark (with a decimal column)
    frames = [(parquet, src)]
    if method in ("vmi_naive", "vmi_pairwise", "cmim"):
        frames += [(parquet, None), (_decimal_frame(spark), None)]
    for df, source in frames:
        ref = run_selection(df, "y", method=method, num_features=4, execution="passes",
                            reader="spark").report()
        assert ref["execution"] == "passes"
        run = run_selection(df, "y", method=method, num_features=4, source=source,
                            reader="spark")
        rep = run.report()
        assert rep["execution"] == "driver" and rep["storage"] == "driver"
        _same(rep, ref)


def test_driver_with_skip_and_a_continuous_label(spark, mixed_parquet):
    from vmi_spark.spark.select import run_selection

    df = spark.read.parquet(mixed_parquet)
    for kwargs in ({"handle_invalid": "skip"}, {"label": "noise"},
                   {"label": "noise", "binning": "mdlp"}):
        label = kwargs.pop("label", "y")
        args = dict(method="vmi_pairwise", num_features=3, reader="spark", **kwargs)
        ref = run_selection(df, label, execution="passes", **args).report()
        rep = run_selection(df, label, execution="driver", **args).report()
        _same(rep, ref)
        assert rep.get("label_binning") == ref.get("label_binning")


def test_auto_leaves_a_large_table_to_the_executors(spark, set_limits):
    from vmi_spark.spark import select

    df = spark.createDataFrame(_mixed(n=400).drop(columns=["price"]))
    set_limits(probe_cells=100)  # 400 rows x 6 columns is "large" now
    run = select.run_selection(df, "y", num_features=2)
    assert run.execution != "driver"
    with pytest.raises(InputError, match="execution 'driver' takes tables of at most"):
        select.run_selection(df, "y", num_features=2, execution="driver")


def test_a_vector_is_sized_for_the_driver_by_all_its_elements(spark, set_limits):
    """The whole vectors come to the driver, so excluded elements count in their size."""
    from pyspark.ml.feature import VectorAssembler

    from vmi_spark.spark import select

    rng = np.random.default_rng(5)
    frame = pd.DataFrame(rng.integers(0, 3, (50, 10)).astype(float),
                         columns=[f"v{j}" for j in range(10)])
    frame["y"] = (frame["v0"] + frame["v1"] > 2).astype(int)
    vec = VectorAssembler(inputCols=[f"v{j}" for j in range(10)], outputCol="features") \
        .transform(spark.createDataFrame(frame)).select("y", "features")
    kw = dict(features_col="features", exclude=[f"v{j}" for j in range(2, 10)],
              num_features=2)
    set_limits(probe_cells=300)  # 50 rows x (2 kept + 1) fit; x (10 elements + 1) do not
    run = select.run_selection(vec, "y", **kw)
    assert run.execution != "driver"
    with pytest.raises(InputError, match="execution 'driver' takes tables of at most"):
        select.run_selection(vec, "y", execution="driver", **kw)
    set_limits(probe_cells=50 * 11)  # the whole vectors fit
    in_driver = select.run_selection(vec, "y", **kw)
    assert in_driver.execution == "driver"
    _same(in_driver.report(), run.report())


def test_a_pairwise_state_too_large_for_the_driver_goes_to_the_executors(spark, set_limits):
    from vmi_spark.spark import select

    df = spark.createDataFrame(_mixed(n=500).drop(columns=["price"]))
    ref = select.run_selection(df, "y", method="vmi_pairwise", num_features=3).report()
    assert ref["execution"] == "driver"
    set_limits(driver_pair_bytes=1)
    run = select.run_selection(df, "y", method="vmi_pairwise", num_features=3)
    assert run.execution in ("resident", "passes")
    _same(run.report(), ref)
    with pytest.raises(InputError, match="pairwise state"):
        select.run_selection(df, "y", method="vmi_pairwise", num_features=3, execution="driver")


def test_driver_threads_do_not_change_the_sums():
    """The driver's chunks on threads: the same integer partials as one chunk at a time."""
    from vmi_spark.core.greedy import select_vmi
    from vmi_spark.core.inmemory import InMemoryBackend
    from vmi_spark.spark.executions.driver import DriverBackend

    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 30_000)
    codes = rng.integers(0, 5, (12, 30_000)).astype(np.uint8)
    codes[0] = (y + rng.integers(0, 2, 30_000)) % 5
    for method in ("vmi_naive", "vmi_pairwise"):
        one = select_vmi(InMemoryBackend(codes, y, arity=5, num_classes=2), method, 6)
        threaded = DriverBackend(codes, y, 5, 2, threads=4)
        assert len(threaded.chunks) > 1
        many = select_vmi(threaded, method, 6)
        threaded.close()
        assert many.selected == one.selected and many.scores == one.scores
