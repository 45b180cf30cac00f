"""Sizing from the memory the session has (issue 38): chunks, cached batches and the Arrow
batches of chunks, the job's serializer setting, and the one line a heap failure gives.

The 1M x 1,000 table that needed them is in ``benchmarks/cold_submit.py`` (minutes, not a
test); here the rules, and that the settings are set for the steps and restored after.
"""

from __future__ import annotations

import numpy as np
import pytest

from vmi_spark import hints
from vmi_spark.spark.chunks import memory
from vmi_spark.spark.chunks.storage import CACHE_BATCH_BYTES, cache_batch_rows


@pytest.mark.parametrize("d", [5, 100, 1000, 30_000])
@pytest.mark.parametrize("most", [None, 540_000, 4 << 20, 1 << 30])
def test_chunks_stay_within_the_object_bound(d, most):
    """With ``most_bytes`` a chunk holds no more than that (unless 256 rows already do),
    and never more than without it."""
    plain = memory.chunk_rows_for(1_000_000, 2, d, "vmi_naive", 2)
    rows = memory.chunk_rows_for(1_000_000, 2, d, "vmi_naive", 2, most)
    assert 256 <= rows <= plain
    if most is not None and rows > 256:
        assert rows * (d + 2) <= most


def test_cached_batches_stay_within_the_object_bound():
    assert cache_batch_rows(1 << 20) == CACHE_BATCH_BYTES >> 20
    assert cache_batch_rows(1 << 20, 4 << 20) == 4
    assert cache_batch_rows(8 << 20, 1 << 20) == 1  # at least one chunk
    assert cache_batch_rows(1 << 20, 1 << 40) == CACHE_BATCH_BYTES >> 20  # never more


@pytest.mark.parametrize("text", [
    "java.lang.OutOfMemoryError: Java heap space",
    "Job aborted: java.lang.OutOfMemoryError: GC overhead limit exceeded"])
def test_a_heap_failure_names_driver_memory(text):
    line = hints.explain(RuntimeError(text))
    assert line is not None and "--driver-memory" in line and "\n" not in line
    assert line.startswith("Spark's JVM ran out of memory")


@pytest.mark.parametrize("text", [
    'Cannot invoke "org.apache.spark.rpc.RpcEndpointRef.askSync(Object, scala.reflect.ClassTag)"'
    ' because the return value of "org.apache.spark.executor.Executor.heartbeatReceiverRef()"'
    " is null",
    "Job 6 cancelled because SparkContext was shut down"])
def test_a_stopped_context_is_not_called_a_heap_failure_but_names_driver_memory(text):
    # a heap that ran out prints these, but so do a kill and a stop: the hint says both
    line = hints.explain(RuntimeError(text))
    assert line is not None and "--driver-memory" in line and "\n" not in line
    assert line.startswith("Spark stopped during the run") and "killed" in line


def test_the_steps_run_with_small_arrow_batches_and_the_setting_is_restored(spark):
    """While the steps run, an Arrow batch holds a few chunks (at most ARROW_BATCH_BYTES,
    at most a quarter of the cache memory over the JVM's slots); after, the session's own
    value is back."""
    key = memory.ARROW_BATCH_CONF
    before = spark.conf.get(key)
    chunk = 8 << 20
    n = memory.arrow_batch_chunks(spark, chunk)
    assert 1 <= n <= memory.ARROW_BATCH_BYTES // chunk
    assert memory.arrow_batch_chunks(spark, 1 << 40) == 1
    with memory.chunk_batches(spark, chunk):
        assert spark.conf.get(key) == str(n)
    assert spark.conf.get(key) == before


def test_small_arrow_batches_give_the_same_selection(spark, set_limits):
    """Batches of one chunk through the steps select what the default batches select."""
    from vmi_spark.spark.select import run_selection

    rng = np.random.default_rng(3)
    n, d = 3000, 12
    y = rng.integers(0, 2, n)
    x = rng.integers(0, 4, (n, d))
    x[:, 0] = (x[:, 0] + y) % 4
    x[:, 5] = np.where(rng.random(n) < 0.5, y, x[:, 5])
    rows = [(int(y[i]), *map(int, x[i])) for i in range(n)]
    df = spark.createDataFrame(rows, ["label", *[f"f{j}" for j in range(d)]]).repartition(3)
    plain = run_selection(df, "label", num_features=5, execution="passes")
    set_limits(arrow_batch_bytes=1)  # one chunk per batch
    small = run_selection(df, "label", num_features=5, execution="passes")
    assert small.selection.selected == plain.selection.selected
    assert small.selection.scores == plain.selection.scores
