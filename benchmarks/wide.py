"""Wide tables (issue 21, target 3): Parquet columns against one vector column.

For each D, a 20k-row table of 8-state integer columns is written once as Parquet
columns and once as one ML vector column (VectorAssembler). ``run_selection`` (vmi_naive,
K = 10, ``execution="resident"`` so that both go through the executors) runs on each;
its ``prepare_seconds``, phases and mean step time are recorded, with the driver's peak
RSS over the whole process (``driver_rss_mb``; the tables are made in a child process)
and the peak RSS of the Python driver and of the driver JVM during the run alone
(``run_peak_rss_mb``: VmHWM reset before the run). Ratios (to columns) are within one run;
the load average is recorded. ``--kinds`` adds the same columns as a DataFrame without
``source`` (``frame``) and the vector column read by Spark (``vector_spark``).

    PYSPARK_PYTHON=$PWD/.venv/bin/python .venv/bin/python benchmarks/wide.py \\
        --dims 2000 10000 --out benchmarks/results/s9_wide.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


WRITE = """
import sys
sys.path.insert(0, sys.argv[1])
from data import make_table, write_coded_parquet, write_jittered_parquet
rows, d = int(sys.argv[2]), int(sys.argv[3])
codes, y = make_table(rows, d, seed=d)
if sys.argv[5] == "doubles":
    write_jittered_parquet(sys.argv[4], codes, y, row_group=4096, seed=d)
else:
    write_coded_parquet(sys.argv[4], codes, y, row_group=4096)
"""


def _jvm_pids() -> list[int]:
    """The java processes started by this process (the local-mode driver JVM)."""
    me, out = os.getpid(), []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as fh:
                    parts = fh.read().rsplit(")", 1)[1].split()
                with open(f"/proc/{d}/comm") as fh:
                    name = fh.read().strip()
            except OSError:
                continue
            if int(parts[1]) == me and name == "java":
                out.append(int(d))
    return out


def reset_peaks(pids) -> None:
    """Start the peak RSS (VmHWM) of ``pids`` afresh (Linux: clear_refs 5)."""
    for pid in pids:
        try:
            with open(f"/proc/{pid}/clear_refs", "w") as fh:
                fh.write("5")
        except OSError:
            pass


def peak_mb(pid) -> int | None:
    """VmHWM of ``pid`` in MB (None where /proc does not tell)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024)
    except OSError:
        return None
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--dims", type=int, nargs="+", default=[2000, 10000])
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--kinds", nargs="+", default=["columns", "vector"],
                    choices=["columns", "vector", "frame", "vector_spark"],
                    help="columns: the Parquet files given as source=; frame: the same "
                         "DataFrame without source (run_selection finds the files itself); "
                         "vector: the vector column of a Parquet scan (read by pyarrow); "
                         "vector_spark: the same read by Spark (reader='spark')")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run the kinds this many times per D (in turn, for the spread)")
    ap.add_argument("--data", default=None,
                    help="keep the tables in this directory and use them if already there "
                         "(an A/B of two checkouts reads the same files; default: a "
                         "temporary directory, removed)")
    ap.add_argument("--values", choices=["integers", "doubles"], default="integers",
                    help="integers: the 8-state codes as int32 columns; doubles: each code "
                         "plus uniform [0, 1) noise as float64 (continuous, binned by "
                         "quantiles; the vector's elements are not small integers)")
    ap.add_argument("--tables-only", action="store_true",
                    help="write the tables into --data and stop")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if args.tables_only and not args.data:
        ap.error("--tables-only needs --data")
    from pyspark.ml.feature import VectorAssembler
    from pyspark.sql import SparkSession

    from run import save
    from vmi_spark.spark.sources.arrow_source import parquet_source
    from vmi_spark.spark.select import run_selection

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.driver.memory", "4g").getOrCreate())
    tmp = args.data or tempfile.mkdtemp(prefix="wide-")
    os.makedirs(tmp, exist_ok=True)
    res = {"rows": args.rows, "values": args.values, "load_start": round(os.getloadavg()[0], 2), "runs": []}
    try:
        for d in args.dims:
            tag = "d" if args.values == "doubles" else ""
            cols = os.path.join(tmp, f"cols{args.rows}x{d}{tag}.parquet")
            # in a child process: the driver's RSS is then the job's, not the table's
            if not os.path.exists(cols):
                subprocess.run([sys.executable, "-c", WRITE, HERE, str(args.rows), str(d),
                                cols, args.values], check=True)
            df = spark.read.parquet(cols)
            feats = [c for c in df.columns if c != "label"]
            vec = os.path.join(tmp, f"vec{args.rows}x{d}{tag}.parquet")
            if any(k.startswith("vector") for k in args.kinds) and not os.path.exists(
                    os.path.join(vec, "_SUCCESS")):
                VectorAssembler(inputCols=feats, outputCol="features").transform(df).select(
                    "label", "features").write.mode("overwrite").parquet(vec)
            if args.tables_only:
                continue
            for kind in [k for _ in range(args.repeat) for k in args.kinds]:
                procs = [os.getpid(), *_jvm_pids()]
                reset_peaks(procs)
                t = time.perf_counter()
                if kind == "columns":
                    frame = spark.read.parquet(cols)
                    run = run_selection(frame, "label", num_features=args.k,
                                        source=parquet_source(frame, frame.columns),
                                        execution="resident")
                elif kind == "frame":
                    frame = spark.read.parquet(cols)
                    run = run_selection(frame, "label", num_features=args.k,
                                        features=[c for c in frame.columns if c != "label"],
                                        execution="resident")
                else:
                    frame = spark.read.parquet(vec)
                    run = run_selection(frame, "label", features_col="features",
                                        num_features=args.k, execution="resident",
                                        reader="spark" if kind == "vector_spark" else "auto")
                wall = time.perf_counter() - t
                steps = run.selection.step_seconds
                row = {"d": d, "kind": kind, "reader": run.report()["reader"],
                       "wall": round(wall, 2),
                       "prepare": round(run.prepare_seconds, 2),
                       "phases": {k: round(v, 2) for k, v in run.phases.items()},
                       "step_mean": round(sum(steps) / len(steps), 4),
                       "selected": run.report()["selected_indices"],
                       "driver_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF)
                                              .ru_maxrss / 1024),
                       "run_peak_rss_mb": {"python": peak_mb(procs[0]),
                                           "jvm": [peak_mb(p) for p in procs[1:]]},
                       "load": round(os.getloadavg()[0], 2)}
                res["runs"].append(row)
                print(json.dumps(row), flush=True)
            # a kind may run more than once (--kinds frame vector columns vector): the first
            # run after the table is written is slower; compare the fastest of each kind
            best: dict = {}
            for r in res["runs"]:
                if r["d"] == d and (r["kind"] not in best or r["prepare"] < best[r["kind"]]["prepare"]):
                    best[r["kind"]] = r
            base = min((r for k, r in best.items() if k in ("columns", "frame")),
                       key=lambda r: r["prepare"], default=None)
            for kind, b in best.items():
                if base is not None:
                    print(f"D={d}: {kind} / Parquet columns (fastest) prepare "
                          f"{b['prepare'] / base['prepare']:.2f}, same selection "
                          f"{base['selected'] == b['selected']}", flush=True)
    finally:
        if args.data is None:
            shutil.rmtree(tmp, ignore_errors=True)
        spark.stop()
    res["load_end"] = round(os.getloadavg()[0], 2)
    if not args.tables_only:
        save(res, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
