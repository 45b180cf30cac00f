"""Where the end-to-end time goes (issue 5, target 3): the phases of ``run_selection``.

Writes (once) the benchmark's mixed Parquet table of ROWS x COLS, then times the column
statistics pass, the quantile split points, and a full ``run_selection`` (vmi_naive, K
features), reporting its planning, encoding + count tables, and step seconds.

    PYSPARK_PYTHON=$PWD/.venv/bin/python .venv/bin/python benchmarks/e2e_phases.py \\
        100000 1000 50 /tmp/mixed_100k_1000.parquet
"""

from __future__ import annotations

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import run as R  # noqa: E402
from data import write_mixed_parquet  # noqa: E402


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    rows, cols, k, path = int(float(argv[0])), int(argv[1]), int(argv[2]), argv[3]
    if not os.path.exists(path):
        t = time.perf_counter()
        write_mixed_parquet(path, rows, cols)
        print("write", round(time.perf_counter() - t, 1), flush=True)
    s = R.spark()
    from vmi_spark.core.encoding import SplitRequest
    from vmi_spark.spark import select as S
    from vmi_spark.spark.sources.spark_source import SparkSource
    df = s.read.parquet(path)
    label = "label"
    feats = [c for c in df.columns if c != label]
    source = SparkSource(df)
    t = time.perf_counter()
    st = source.column_stats(label, feats, 32, 1000, False)
    print("stats", round(time.perf_counter() - t, 1), flush=True)
    to_bin = [c for c, v in zip(feats, st["values"]) if v is None]
    t = time.perf_counter()
    source.quantile_splits(SplitRequest(label, tuple(to_bin), 10, st["rows"]))
    print("splits", len(to_bin), round(time.perf_counter() - t, 1), flush=True)
    t = time.perf_counter()
    run = S.run_selection(df, label, method="vmi_naive", num_features=k)
    tot = time.perf_counter() - t
    steps = sum(run.selection.step_seconds)
    print("run_selection", round(tot, 1), "prepare", round(run.prepare_seconds, 1), "steps",
          round(steps, 1), "encode+counts", round(tot - run.prepare_seconds - steps, 1))
    print("step_seconds", [round(x, 2) for x in run.selection.step_seconds])
    print("peak RSS MB: driver python", R._hwm_kb() / 1024, "driver JVM", R._hwm_kb(R._jvm_pid()) / 1024)


if __name__ == "__main__":
    main()
