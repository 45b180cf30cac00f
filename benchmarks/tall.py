"""Tall tables (issue 21, target 4): N rows x 100 features through spark-submit's defaults.

For each N (default 1.25M, 2.5M and 5M rows; 100 features of 8 states, 2 classes,
:func:`data.make_table`, one Parquet file), ``spark-submit --master local[2]
jobs/select_features.py`` runs vmi_naive with K = 10 and **no memory settings** (the
default 1g driver). Recorded per run: exit status, wall time, the job's
``phase_seconds`` and step times from ``selection.json``, the peak RSS of every process
of the job (the driver JVM and the Python driver, polled from /proc every 0.2 s), and the
1-minute load, and the peak size of the job's ``spark.local.dir`` (where the encoded rows
are cached when they go to disk; divided by N x D it is the cached bytes per cell). The
summary gives the log-log slopes in N of the prepare and step time.

    PYSPARK_PYTHON=$PWD/.venv/bin/python .venv/bin/python benchmarks/tall.py \\
        --out benchmarks/results/s11_tall.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
from procs import dir_bytes, proc_tree, status_mb  # noqa: E402
from run import load, save  # noqa: E402
from time_to_answer import spark_submit  # noqa: E402


class PeakRss(threading.Thread):
    """Polls the process tree of ``pid``: the peak RSS per command name (MB), and the
    peak size of ``local_dir`` (Spark's block manager files: cached blocks on disk and
    shuffle files)."""

    def __init__(self, pid: int, local_dir: str | None = None):
        super().__init__(daemon=True)
        self.pid, self.peaks, self.done = pid, {}, threading.Event()
        self.local_dir, self.disk_peak = local_dir, 0

    def run(self):
        while not self.done.is_set():
            for p, name in proc_tree(self.pid).items():
                self.peaks[name] = max(self.peaks.get(name, 0.0), status_mb(p))
            if self.local_dir:
                self.disk_peak = max(self.disk_peak, dir_bytes(self.local_dir))
            time.sleep(0.2)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=float, nargs="+", default=[1.25e6, 2.5e6, 5e6])
    ap.add_argument("--features", type=int, default=100)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    from data import make_table, write_coded_parquet

    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               PYTHONPATH=ROOT)
    tmp = tempfile.mkdtemp(prefix="tall-")
    res: dict = {"features": args.features, "k": args.k, "load_start": load(), "runs": []}
    try:
        for n in (int(r) for r in args.rows):
            path = os.path.join(tmp, f"t{n}.parquet")
            codes, y = make_table(n, args.features)
            write_coded_parquet(path, codes, y)
            del codes, y
            out = os.path.join(tmp, "out")
            shutil.rmtree(out, ignore_errors=True)
            local_dir = os.path.join(tmp, "local")
            shutil.rmtree(local_dir, ignore_errors=True)
            os.makedirs(local_dir)
            cmd = [spark_submit(), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
                   "--conf", f"spark.local.dir={local_dir}",
                   os.path.join(ROOT, "jobs", "select_features.py"), "--input", path,
                   "--label", "label", "--output", out, "--num-features", str(args.k),
                   "--quiet"]
            before = load()
            t = time.perf_counter()
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)
            watch = PeakRss(proc.pid, local_dir)
            watch.start()
            log, _ = proc.communicate(timeout=1800)
            wall = time.perf_counter() - t
            watch.done.set()
            watch.join()
            row = {"rows": n, "rc": proc.returncode, "wall": round(wall, 2), "load": before,
                   "peak_rss_mb": {k: round(v) for k, v in watch.peaks.items() if v > 50},
                   "local_dir_peak_bytes": watch.disk_peak,
                   "local_dir_bytes_per_cell": round(watch.disk_peak / (n * args.features), 3)}
            if proc.returncode == 0:
                rep = json.load(open(os.path.join(out, "selection.json")))
                steps = rep.get("step_seconds") or []
                row.update(execution=rep["execution"], prepare=round(rep["prepare_seconds"], 2),
                           phases={k: round(v, 2) for k, v in rep["phase_seconds"].items()},
                           step_mean=round(float(np.mean(steps)), 3) if steps else None,
                           selected=rep["selected"], warnings=rep.get("warnings", []))
            else:
                row["log_tail"] = log[-2000:]
            res["runs"].append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "log_tail"}), flush=True)
        ok = [r for r in res["runs"] if r["rc"] == 0]
        if len(ok) >= 2:
            ns = np.log([r["rows"] for r in ok])
            res["slopes"] = {
                key: round(float(np.polyfit(ns, np.log([r[key] for r in ok]), 1)[0]), 2)
                for key in ("wall", "prepare", "step_mean")}
            print("slopes in N", json.dumps(res["slopes"]), flush=True)
        res["load_end"] = load()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    save(res, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
