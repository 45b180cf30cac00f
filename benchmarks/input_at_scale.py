"""Input at scale (issue 21, target 2): 1M x 1,000 mixed Parquet, vmi_naive, K features.

Writes the table of :func:`data.write_mixed_parquet` once (half float32 continuous, half
int8 with 8 states), then in one local[2] session (6g driver) runs ``run_selection`` with
the pyarrow reader, alternating, ``REPS`` times each:

* ``one_pass``: the default, the statistics pass also samples the rows for the bin edges
  (``ParquetReader.presample``);
* ``two_passes``: the bin edges from a pass of their own (``presample`` off).

Every run records its wall time, ``phase_seconds``, median step and the 1-minute load;
the summary gives the medians, the ratio of the two and whether every run selected the
same features. A K = 1 run first warms the session up (Python workers, numba, the JIT) and
is not recorded; the order alternates (A B B A ...).

    PYSPARK_PYTHON=$PWD/.venv/bin/python .venv/bin/python benchmarks/input_at_scale.py \\
        --path /tmp/s10/mixed_1m_1000.parquet --reps 1 --out benchmarks/results/s10_input_at_scale.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from data import write_mixed_parquet  # noqa: E402
from run import load, machine, save  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--path", required=True)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--cols", type=int, default=1000)
    ap.add_argument("--k", type=int, default=50)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    if not os.path.exists(args.path):
        t = time.perf_counter()
        write_mixed_parquet(args.path, args.rows, args.cols)
        print("write", round(time.perf_counter() - t, 1), flush=True)

    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "6g").getOrCreate())
    from vmi_spark.spark import routes, select
    from vmi_spark.spark.sources.arrow_source import ParquetReader, parquet_source

    class TwoPasses(ParquetReader):
        def __init__(self, *a, **k):
            k["presample"] = None
            super().__init__(*a, **k)

    res = {"machine": machine(), "rows": args.rows, "cols": args.cols, "k": args.k,
           "load_start": load(), "runs": []}
    df = spark.read.parquet(args.path)  # warm-up (Python workers, numba, JIT), not recorded
    select.run_selection(df, "label", method="vmi_naive", num_features=1,
                         source=parquet_source(df, df.columns))
    for rep in range(args.reps):
        order = ("one_pass", "two_passes") if rep % 2 == 0 else ("two_passes", "one_pass")
        for kind in order:
            routes.ParquetReader = ParquetReader if kind == "one_pass" else TwoPasses
            df = spark.read.parquet(args.path)
            t = time.perf_counter()
            run = select.run_selection(df, "label", method="vmi_naive", num_features=args.k,
                                       source=parquet_source(df, df.columns))
            wall = time.perf_counter() - t
            steps = sorted(run.selection.step_seconds)
            row = {"kind": kind, "rep": rep, "wall": round(wall, 1),
                   "prepare": round(run.prepare_seconds, 1), "execution": run.execution,
                   "phases": {k: round(v, 1) for k, v in run.phases.items()},
                   "median_step": round(steps[len(steps) // 2], 2),
                   "selected": run.selection.selected, "load": load()}
            res["runs"].append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "selected"}), flush=True)
    routes.ParquetReader = ParquetReader
    med = {kind: {key: statistics.median(r[key] for r in res["runs"] if r["kind"] == kind)
                  for key in ("wall", "prepare")} for kind in ("one_pass", "two_passes")}
    res["summary"] = {
        "median": med,
        "prepare_one_over_two": round(med["one_pass"]["prepare"] / med["two_passes"]["prepare"], 2),
        "same_selection_every_run": len({tuple(r["selected"]) for r in res["runs"]}) == 1}
    res["load_end"] = load()
    print(json.dumps(res["summary"]), flush=True)
    save(res, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
