"""Cold spark-submit runs as a user runs the job (issue 38): no memory settings at all.

For each table (``--tables``, written once into ``--dir`` if missing), in one run of this
script and in turn:

* ``count``: a bare ``spark-submit --master local[2]`` of a script that reads the same
  Parquet file with Spark and counts its rows (JVM start, session, a read of every row
  group's footer and row count: the floor every Spark job on that file pays);
* ``job``: ``spark-submit --master local[2] jobs/select_features.py --input <file>
  --label label --num-features K`` with the job's defaults (vmi_naive, chance-corrected
  gains) and no ``--driver-memory`` or any ``--conf`` but ``spark.ui.enabled=false`` and a
  ``spark.local.dir`` of its own (so its disk use is measured).

Each run records its exit status, wall time (process start to exit), the 1-minute load
before and after, the peak RSS of every process of its tree (``VmHWM`` from /proc, polled
every 0.2 s, by pid: the driver JVM, the Python driver, the Python workers), the sum of
those peaks and the peak of the tree's summed RSS, the peak size of ``spark.local.dir``,
and for the job its ``phase_seconds``, execution and selected features. A failing run
keeps the last 3,000 characters of its output.

Tables (``name``: rows x columns, how it is written):

* ``mixed_1m_1000``: :func:`data.write_mixed_parquet`, 1M x 1,000 (half float32, half int8
  with 8 states), 3.2 GB;
* ``coded_5m_100``, ``coded_10m_200``: :func:`data.make_table` codes (8 states) as int32
  columns, written in slices of 1M rows (never the whole table in memory);
* ``wide_20k_30000``: :func:`data.make_table`, 20k x 30,000 int32 columns;
* ``coded_200k_200``: the peers' table (200k x 200, K = 20).

    PYSPARK_PYTHON=$PWD/.venv/bin/python .venv/bin/python benchmarks/cold_submit.py \\
        --dir /tmp/vmi_tables --tables mixed_1m_1000 coded_5m_100 --reps 1 \\
        --out benchmarks/results/s38_cold_submit.json
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

from procs import dir_bytes, proc_tree, status_mb  # noqa: E402
from run import load, save  # noqa: E402
from time_to_answer import spark_submit  # noqa: E402

#: name -> (rows, columns, kind, K)
TABLES = {
    "mixed_1m_1000": (1_000_000, 1000, "mixed", 50),
    "coded_5m_100": (5_000_000, 100, "coded", 50),
    "coded_10m_200": (10_000_000, 200, "coded", 50),
    "wide_20k_30000": (20_000, 30_000, "coded", 50),
    "coded_200k_200": (200_000, 200, "coded", 20),
}

COUNT_SCRIPT = """\
import sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.appName("count").getOrCreate()
spark.sparkContext.setLogLevel("WARN")
print("rows", spark.read.parquet(sys.argv[1]).count())
spark.stop()
"""


def write_table(path: str, rows: int, cols: int, kind: str) -> None:
    """The table ``name`` of :data:`TABLES` as one Parquet file (slices of 1M rows)."""
    import pyarrow.parquet as pq
    from data import arrow_table, make_table, write_mixed_parquet

    if kind == "mixed":
        write_mixed_parquet(path, rows, cols)
        return
    step = 1_000_000
    tmp = path + ".tmp"
    with pq.ParquetWriter(tmp, arrow_table(*make_table(min(rows, 8), cols)).schema) as w:
        for g, start in enumerate(range(0, rows, step)):
            codes, y = make_table(min(step, rows - start), cols, seed=g)
            w.write_table(arrow_table(codes, y), row_group_size=65536)
            del codes, y
    os.replace(tmp, path)


def _role(pid: int, name: str) -> str:
    """``name``, with what a Python process is: the driver, a Spark worker (forked by
    ``pyspark.daemon``), or another (its command line)."""
    if not name.startswith("python"):
        return name
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return name
    if not cmd.strip():  # exiting (a zombie has no command line): keep what it was
        return ""
    if "pyspark.daemon" in cmd or "pyspark.worker" in cmd:
        return "python worker"
    if "select_features.py" in cmd or "count.py" in cmd:
        return "python driver"
    return "python: " + cmd[:80]


class Peaks(threading.Thread):
    """Polls the process tree of ``pid`` every 0.2 s: each process's peak RSS (by pid,
    with its command name), the peak of the tree's summed RSS, and the peak size of
    ``local_dir``."""

    def __init__(self, pid: int, local_dir: str):
        super().__init__(daemon=True)
        self.pid, self.local_dir = pid, local_dir
        self.procs: dict[int, dict] = {}
        self.tree_peak, self.disk_peak = 0.0, 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            total = 0.0
            for p, name in proc_tree(self.pid).items():
                hwm, rss = status_mb(p, "VmHWM"), status_mb(p)
                total += rss
                row = self.procs.setdefault(p, {"name": name, "peak_mb": 0.0})
                # spark-submit is a shell script that execs the JVM: the latest name counts
                row["name"] = _role(p, name) or row["name"]
                row["peak_mb"] = max(row["peak_mb"], hwm, rss)
            self.tree_peak = max(self.tree_peak, total)
            self.disk_peak = max(self.disk_peak, dir_bytes(self.local_dir))
            time.sleep(0.2)

    def summary(self) -> dict:
        procs = sorted((r for r in self.procs.values() if r["peak_mb"] >= 20),
                       key=lambda r: -r["peak_mb"])
        return {"processes": [{"name": r["name"], "peak_mb": round(r["peak_mb"])}
                              for r in procs],
                "sum_of_peaks_mb": round(sum(r["peak_mb"] for r in procs)),
                "tree_peak_mb": round(self.tree_peak),
                "local_dir_peak_mb": round(self.disk_peak / 2**20)}


def cold(cmd: list[str], env: dict, local_dir: str, timeout: float) -> dict:
    """Run ``cmd`` once, cold, watching its process tree."""
    shutil.rmtree(local_dir, ignore_errors=True)
    os.makedirs(local_dir)
    before = load()
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    watch = Peaks(proc.pid, local_dir)
    watch.start()
    try:
        log, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        log, _ = proc.communicate()
    wall = time.perf_counter() - t
    watch.done.set()
    watch.join()
    row = {"rc": proc.returncode, "wall": round(wall, 2), "load_before": before,
           "load_after": load(), **watch.summary()}
    if proc.returncode != 0:
        row["log_tail"] = log[-3000:]
    shutil.rmtree(local_dir, ignore_errors=True)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True, help="where the tables are (written if missing)")
    ap.add_argument("--tables", nargs="+", default=list(TABLES), choices=list(TABLES))
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--job-args", default="", help="more arguments for the job, split on spaces")
    ap.add_argument("--also", action="append", default=[],
                    help="arguments of a second job variant run in turn after each job "
                         "(repeatable; e.g. '--chunk-storage cache')")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    import platform

    import pyspark

    os.makedirs(args.dir, exist_ok=True)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    work = tempfile.mkdtemp(prefix="cold-")
    count_py = os.path.join(work, "count.py")
    with open(count_py, "w") as fh:
        fh.write(COUNT_SCRIPT)
    res: dict = {"what": "cold spark-submit --master local[2], no memory settings",
                 "started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
                 "machine": {"nproc": os.cpu_count(), "python": platform.python_version(),
                             "pyspark": pyspark.__version__},
                 "job_args": args.job_args, "also": args.also, "runs": []}
    base = [spark_submit(), "--master", "local[2]", "--conf", "spark.ui.enabled=false"]
    try:
        for name in args.tables:
            rows, cols, kind, k = TABLES[name]
            path = os.path.join(args.dir, f"{name}.parquet")
            if not os.path.exists(path):
                t = time.perf_counter()
                write_table(path, rows, cols, kind)
                print(f"wrote {path} in {time.perf_counter() - t:.0f}s", flush=True)
            size = os.path.getsize(path)
            for rep in range(args.reps):
                variants = [("count", ""), ("job", args.job_args),
                            *(("job", f"{args.job_args} {a}".strip()) for a in args.also)]
                for what, job_args in variants:
                    local = os.path.join(work, "local")
                    conf = ["--conf", f"spark.local.dir={local}"]
                    if what == "count":
                        cmd = base + conf + [count_py, path]
                    else:
                        out = os.path.join(work, "out")
                        shutil.rmtree(out, ignore_errors=True)
                        cmd = base + conf + [
                            os.path.join(ROOT, "jobs", "select_features.py"), "--input", path,
                            "--label", "label", "--num-features", str(k), "--output", out,
                            "--quiet", *job_args.split()]
                    row = {"table": name, "rows": rows, "cols": cols, "file_bytes": size,
                           "k": k, "what": what, "rep": rep, "job_args": job_args,
                           **cold(cmd, env, local, args.timeout)}
                    if what == "job" and row["rc"] == 0:
                        with open(os.path.join(out, "selection.json")) as fh:
                            rep_ = json.load(fh)
                        row.update(execution=rep_.get("execution"),
                                   prepare=round(rep_.get("prepare_seconds", 0), 2),
                                   phases={a: round(b, 2)
                                           for a, b in (rep_.get("phase_seconds") or {}).items()},
                                   selected=rep_.get("selected"),
                                   warnings=rep_.get("warnings", []))
                    res["runs"].append(row)
                    print(json.dumps({a: b for a, b in row.items()
                                      if a not in ("selected", "log_tail")}), flush=True)
                    save(res, args.out)
        summary = {}
        for name in args.tables:
            count = [r["wall"] for r in res["runs"] if r["table"] == name and r["what"] == "count"]
            for variant in dict.fromkeys(r["job_args"] for r in res["runs"]
                                         if r["what"] == "job"):
                job = [r["wall"] for r in res["runs"] if r["table"] == name and r["what"] == "job"
                       and r["rc"] == 0 and r["job_args"] == variant]
                if count and job:
                    summary[f"{name} {variant}".strip()] = {
                        "count_wall": min(count), "job_wall": min(job),
                        "job_over_count": round(min(job) / min(count), 2)}
        res["summary"] = summary
        res["finished_utc"] = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    save(res, args.out)
    print(json.dumps(res.get("summary")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
