"""Endurance (issue 6, item 7): 200 greedy steps, driver memory and step time must not grow.

    PYSPARK_PYTHON=$PWD/.venv/bin/python .venv/bin/python benchmarks/endurance.py \
        --rows 50000 --features 240 --steps 200 --out benchmarks/results/endurance.json

Runs ``run_selection`` (vmi_naive, restartTolerance 0 so blocks restart as in Algorithm 1)
on a synthetic table and records, after every step, the wall time of the step and the RSS
of the driver: the Python process and its JVM (local mode: the JVM is the Python process's
child). Targets: RSS after the last step at most 1.10 x the RSS after the warm-up (step 20),
and the median step time of steps 181-200 at most 1.3 x that of steps 11-30.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def children(pid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as fh:
                    if int(fh.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    return out


def table(rows: int, features: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, rows)
    data = {}
    for i in range(features):
        p = 0.05 + 0.25 * (i % 10 == 0)
        data[f"x{i}"] = ((rng.integers(0, 8, rows) + (rng.random(rows) < p) * y) % 8).astype(np.int32)
    data["y"] = y.astype(np.int32)
    return pd.DataFrame(data)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--features", type=int, default=240)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from vmi_spark.spark.select import run_selection

    spark = (SparkSession.builder.master("local[2]").appName("vmi-endurance")
             .config("spark.ui.enabled", "false").config("spark.driver.memory", "2g")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    df = spark.createDataFrame(table(a.rows, a.features)).repartition(4)
    me = os.getpid()
    jvms = children(me)
    rec: list[dict] = []
    t0 = time.perf_counter()

    def on_step(sel):
        rec.append({"step": len(sel.selected), "seconds": sel.step_seconds[-1],
                    "python_rss_kb": rss_kb(me), "jvm_rss_kb": sum(rss_kb(p) for p in jvms),
                    "block": sel.blocks[-1]})
        if len(sel.selected) % 20 == 0:
            r = rec[-1]
            print(f"step {r['step']}: {r['seconds']:.2f}s, python {r['python_rss_kb'] / 1024:.0f} MB, "
                  f"jvm {r['jvm_rss_kb'] / 1024:.0f} MB, load {os.getloadavg()[0]:.1f}", flush=True)

    run = run_selection(df, "y", method="vmi_naive", num_features=a.steps, on_step=on_step)
    total = time.perf_counter() - t0
    steps = [r["seconds"] for r in rec]
    warm = rec[19] if len(rec) >= 20 else rec[-1]
    last = rec[-1]
    early = statistics.median(steps[10:30])
    late = statistics.median(steps[-20:])
    res = {
        "rows": a.rows, "features": a.features, "steps": len(rec), "restarts": run.selection.restarts,
        "total_seconds": total, "median_step_11_30": early, "median_step_last_20": late,
        "late_over_early": late / early,
        "python_rss_growth": last["python_rss_kb"] / warm["python_rss_kb"],
        "jvm_rss_growth": (last["jvm_rss_kb"] / warm["jvm_rss_kb"]) if warm["jvm_rss_kb"] else None,
        "driver_rss_growth": (last["python_rss_kb"] + last["jvm_rss_kb"])
        / (warm["python_rss_kb"] + warm["jvm_rss_kb"]),
        "load_average_end": os.getloadavg(), "per_step": rec,
    }
    print(json.dumps({k: v for k, v in res.items() if k != "per_step"}, indent=1))
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(res, indent=1))
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
