"""Even runs of Parquet row groups against the range shuffle, in one Spark session.

``run_selection`` on a 20k-row table of D 8-state columns in 4,096-row groups (5 groups
over 2 task slots: the groups do not split evenly), ``execution="resident"``, alternating
the even runs (``RowGroups.evened``, the default) and the path before them (the blocks
encoded, cached, then spread by a range repartition: ``evened`` patched to None). Records
prepare, phases and step times; the selections must be equal.

    PYSPARK_PYTHON=$PWD/.venv/bin/python .venv/bin/python benchmarks/evened_ab.py \\
        --dims 30000 --k 20 --out benchmarks/results/s15_evened_ab.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics as st
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from wide import WRITE  # noqa: E402  (the table writer, run in a child process)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--dims", type=int, nargs="+", default=[30000])
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    from pyspark.sql import SparkSession

    from vmi_spark.spark.sources import arrow_source as A
    from vmi_spark.spark.select import run_selection

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.driver.memory", "4g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    evened = A.RowGroups.evened
    tmp = tempfile.mkdtemp(prefix="evened-")
    res: dict = {"rows": args.rows, "k": args.k, "runs": []}
    try:
        for d in args.dims:
            path = os.path.join(tmp, f"t{d}.parquet")
            subprocess.run([sys.executable, "-c", WRITE, HERE, str(args.rows), str(d), path],
                           check=True)
            for _ in range(args.repeat):
                for mode in ("evened", "shuffle"):
                    A.RowGroups.evened = evened if mode == "evened" else (lambda self, parts: None)
                    frame = spark.read.parquet(path)
                    run = run_selection(frame, "label", num_features=args.k,
                                        source=A.parquet_source(frame, frame.columns),
                                        execution="resident")
                    s = run.selection.step_seconds
                    row = {"d": d, "mode": mode, "prepare": round(run.prepare_seconds, 2),
                           "phases": {a: round(b, 2) for a, b in run.phases.items()},
                           "step_median": round(st.median(s[1:]), 4),
                           "step_mean": round(sum(s) / len(s), 4),
                           "load": round(os.getloadavg()[0], 2),
                           "selected": run.selection.selected}
                    res["runs"].append(row)
                    print(json.dumps(row), flush=True)
            A.RowGroups.evened = evened
            assert len({tuple(r["selected"]) for r in res["runs"] if r["d"] == d}) == 1
    finally:
        A.RowGroups.evened = evened
        subprocess.run(["rm", "-rf", tmp], check=False)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(res, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
