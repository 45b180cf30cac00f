"""Wide sparse vectors (issue 47): a synthetic HashingTF-like table selected from its
non-zeros in a cold spark-submit, against Spark's ``UnivariateFeatureSelector`` on the same
vector in the same run, with the peak resident memory of every process.

The table (written once with pyarrow as Spark's VectorUDT struct, with Spark's schema in
the footer, so ``spark.read.parquet`` gives a vector column): ``--rows`` rows of a
``--width``-element sparse vector, ``--nnz`` draws a row from power-law (Zipf, exponent
1.1) element frequencies over a random permutation of the elements (hashed: frequent
elements anywhere), duplicates merged, counts 1 (2 with probability 0.1); ``--planted``
elements (spread over the frequency ranks 20 .. width/8) carry the binary label: each is
present in a row of class 1 with probability 0.5 and of class 0 with 0.05.

The run: ``spark-submit --master local[2]`` (spark-submit's default memory: a 1 GiB
driver) of this file with ``--child``, which reads the Parquet, fits
``VMISelector(method=--method, numTopFeatures=--k)`` (the non-zeros path) and then
``UnivariateFeatureSelector`` (chi-square, categorical features and label, top --k) on the
same DataFrame, marking when each starts and ends. This process samples /proc every 0.25 s
meanwhile: the resident memory of the driver JVM, the driver's Python and the Python
workers (each, and their sum), the peak of each within each fit. Writes one JSON object
to ``--out``: the load (``uptime`` before and after), the table, the plan's estimates,
seconds of each phase and step, UnivariateFeatureSelector's fit, the planted elements
each found among its top k, the peaks.

    .venv/bin/python benchmarks/sparse_wide.py --rows 100000 --width 262144 \\
        --data /tmp/sparse_wide --out benchmarks/results/sparse_wide_1e5_2e18.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def make_table(path: Path, rows: int, width: int, nnz: int, planted: int, seed: int,
               files: int = 4, chunk: int = 50_000) -> list[int]:
    """Write the table to ``path`` (a directory of ``files`` Parquet files, as a Spark job
    of that many tasks writes it); the planted elements."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.ml.linalg import VectorUDT
    from pyspark.sql.types import IntegerType, StructField, StructType

    rng = np.random.default_rng(seed)
    ranks = 1.0 / np.arange(1, width + 1) ** 1.1
    cdf = np.cumsum(ranks / ranks.sum())
    perm = rng.permutation(width).astype(np.int32)
    plant = perm[np.linspace(20, width // 8, planted).astype(int)]
    schema_json = StructType([StructField("label", IntegerType(), True),
                              StructField("features", VectorUDT(), True)]).json()
    vec = pa.struct([pa.field("type", pa.int8(), False), pa.field("size", pa.int32()),
                     pa.field("indices", pa.list_(pa.field("element", pa.int32(), False))),
                     pa.field("values", pa.list_(pa.field("element", pa.float64(), False)))])
    schema = pa.schema([pa.field("label", pa.int32()), pa.field("features", vec)],
                       metadata={"org.apache.spark.sql.parquet.row.metadata": schema_json})
    path.mkdir(parents=True, exist_ok=True)
    per_file = -(-rows // files)
    writer = None
    start = 0
    while start < rows:
        n = min(chunk, rows - start, per_file - start % per_file)
        if start % per_file == 0:
            if writer is not None:
                writer.close()
            writer = pq.ParquetWriter(str(path / f"part-{start // per_file:05d}.parquet"),
                                      schema)
        y = rng.integers(0, 2, n).astype(np.int32)
        draws = perm[np.minimum(np.searchsorted(cdf, rng.random((n, nnz))), width - 1)]
        draws[np.isin(draws, plant)] = -1  # the planted elements carry only the label
        present = rng.random((n, planted)) < np.where(y[:, None] == 1, 0.5, 0.05)
        extra = np.where(present, plant[None, :], -1)
        idx = np.sort(np.concatenate([draws, extra], axis=1), axis=1)
        keep = idx >= 0
        keep[:, 1:] &= idx[:, 1:] != idx[:, :-1]
        counts = keep.sum(axis=1)
        flat = idx[keep].astype(np.int32)
        vals = np.where(rng.random(len(flat)) < 0.1, 2.0, 1.0)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
        ind = pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat))
        val = pa.ListArray.from_arrays(pa.array(offsets), pa.array(vals))
        feats = pa.StructArray.from_arrays(
            [pa.array(np.zeros(n, np.int8)), pa.array(np.full(n, width, np.int32)),
             ind.cast(vec.field("indices").type), val.cast(vec.field("values").type)],
            fields=list(vec))
        writer.write_table(pa.table({"label": pa.array(y), "features": feats}, schema=schema),
                           row_group_size=chunk)
        start += n
    assert writer is not None
    writer.close()
    plant_list = sorted(int(e) for e in plant)
    (path.parent / (path.name + ".planted.json")).write_text(json.dumps(plant_list))
    return plant_list


def _mark(marks: Path, name: str) -> None:
    with open(marks, "a") as fh:
        fh.write(json.dumps({"mark": name, "t": time.time()}) + "\n")


def child(a: argparse.Namespace) -> None:
    """Under spark-submit: fit ours, then UnivariateFeatureSelector, marking the phases."""
    from pyspark.ml.feature import UnivariateFeatureSelector
    from pyspark.sql import SparkSession

    from vmi_spark import VMISelector

    marks = Path(a.marks)
    spark = SparkSession.builder.appName("sparse_wide").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    import logging
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    df = spark.read.parquet(a.data)
    _mark(marks, "vmi_start")
    t = time.perf_counter()
    model = VMISelector(labelCol="label", method=a.method, numTopFeatures=a.k).fit(df)
    ours = time.perf_counter() - t
    _mark(marks, "vmi_end")
    _mark(marks, "ufs_start")
    t = time.perf_counter()
    uni = UnivariateFeatureSelector(featuresCol="features", labelCol="label",
                                    selectionMode="numTopFeatures").setFeatureType(
        "categorical").setLabelType("categorical").setSelectionThreshold(a.k).fit(df)
    theirs = time.perf_counter() - t
    _mark(marks, "ufs_end")
    rep = model.report
    Path(a.result).write_text(json.dumps({
        "execution": rep["execution"], "fit_seconds": ours, "sparse": rep["sparse"],
        "step_seconds": rep["step_seconds"], "selected": model.selectedFeatures,
        "univariate_fit_seconds": theirs, "univariate_selected": list(uni.selectedFeatures),
        "spark_version": spark.version,
        "driver_memory": spark.sparkContext.getConf().get("spark.driver.memory", "default (1g)"),
    }))
    spark.stop()


def _procs() -> dict[int, tuple[int, str, int]]:
    """pid -> (parent pid, command line, resident bytes) of every process we can read."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{d}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
            rss = 0
            with open(f"/proc/{d}/status") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        rss = int(line.split()[1]) * 1024
        except (OSError, IndexError, ValueError):
            continue
        out[int(d)] = (ppid, cmd, rss)
    return out


def _classify(root: int, procs: dict[int, tuple[int, str, int]]) -> dict[str, int]:
    """Resident bytes of root's descendants by kind: the driver JVM, the driver's Python,
    the Python workers (the largest and the sum)."""
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in procs.items():
        kids.setdefault(ppid, []).append(pid)
    out = {"driver_jvm": 0, "driver_python": 0, "worker_python_max": 0, "worker_python_sum": 0,
           "workers": 0}
    todo = [root]
    while todo:
        pid = todo.pop()
        todo += kids.get(pid, [])
        if pid not in procs:
            continue
        _, cmd, rss = procs[pid]
        if "java" in cmd.split(" ")[0]:
            out["driver_jvm"] = max(out["driver_jvm"], rss)
        elif "--child" in cmd:
            out["driver_python"] = max(out["driver_python"], rss)
        elif "pyspark.daemon" in cmd or "pyspark.worker" in cmd or "python" in cmd:
            out["worker_python_max"] = max(out["worker_python_max"], rss)
            out["worker_python_sum"] += rss
            out["workers"] += 1
    return out


def run(a: argparse.Namespace) -> None:
    data = Path(a.data)
    planted_file = data.parent / (data.name + ".planted.json")
    t = time.perf_counter()
    if not planted_file.exists():
        plant = make_table(data, a.rows, a.width, a.nnz, a.planted, a.seed)
    else:
        plant = json.loads(planted_file.read_text())
    make_seconds = time.perf_counter() - t
    marks, result = Path(a.out + ".marks"), Path(a.out + ".child.json")
    for p in (marks, result):
        if p.exists():
            p.unlink()
    up_before = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    submit = str(Path(sys.executable).parent / "spark-submit")
    cmd = [submit, "--master", "local[2]", "--conf", "spark.ui.showConsoleProgress=false",
           os.path.abspath(__file__), "--child", "--data", str(data), "--k", str(a.k),
           "--method", a.method, "--marks", str(marks), "--result", str(result)]
    t0 = time.time()
    log = open(a.out + ".log", "w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    samples = []
    while proc.poll() is None:
        samples.append((time.time(), _classify(proc.pid, _procs())))
        time.sleep(0.25)
    wall = time.time() - t0
    log.close()
    up_after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    if proc.returncode != 0:
        sys.exit(f"the spark-submit failed ({proc.returncode}): see {a.out}.log")
    m = {d["mark"]: d["t"] for d in map(json.loads, marks.read_text().splitlines())}
    r = json.loads(result.read_text())

    def peaks(lo: float, hi: float) -> dict[str, float]:
        keys = ("driver_jvm", "driver_python", "worker_python_max", "worker_python_sum")
        inside = [s for t, s in samples if lo <= t <= hi]
        return {f"{k}_mb": round(max((s[k] for s in inside), default=0) / 2**20, 1)
                for k in keys}

    steps = r["step_seconds"]
    phases = r["sparse"]["seconds"]
    out = {
        "uptime_before": up_before, "uptime_after": up_after,
        "rows": a.rows, "width": a.width, "nnz_draws_per_row": a.nnz, "method": a.method,
        "k": a.k, "non_zeros": r["sparse"]["non_zero_values"], "states": r["sparse"]["states"],
        "execution": r["execution"], "spark_version": r["spark_version"],
        "driver_memory": r["driver_memory"], "make_table_seconds": round(make_seconds, 1),
        "spark_submit_wall_seconds": round(wall, 1),
        "fit_seconds": round(r["fit_seconds"], 2),
        "phase_seconds": {k: round(v, 2) for k, v in phases.items()},
        "step_seconds": [round(s, 2) for s in steps],
        "univariate_fit_seconds": round(r["univariate_fit_seconds"], 2),
        "steps_over_univariate": round(sum(steps) / r["univariate_fit_seconds"], 3),
        "max_step_over_univariate": round(max(steps) / r["univariate_fit_seconds"], 3),
        "fit_over_univariate": round(r["fit_seconds"] / r["univariate_fit_seconds"], 3),
        "planted": plant,
        "selected": r["selected"],
        "planted_found": sorted(set(plant) & set(r["selected"])),
        "univariate_selected": sorted(r["univariate_selected"]),
        "planted_found_univariate": sorted(set(plant) & set(r["univariate_selected"])),
        "estimate": r["sparse"]["estimate"],
        "peak_rss_vmi": peaks(m["vmi_start"], m["vmi_end"]),
        "peak_rss_univariate": peaks(m["ufs_start"], m["ufs_end"]),
        "peak_rss_whole_run": peaks(t0, time.time()),
        "rss_samples": len(samples),
    }
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    marks.unlink()
    result.unlink()
    print(json.dumps({k: v for k, v in out.items() if k not in ("estimate", "selected")},
                     indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--width", type=int, default=2**18)
    ap.add_argument("--nnz", type=int, default=40)
    ap.add_argument("--planted", type=int, default=5)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--method", default="mrmr")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", default="/tmp/sparse_wide")
    ap.add_argument("--out", default="benchmarks/results/sparse_wide.json")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--marks", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    a = ap.parse_args()
    child(a) if a.child else run(a)


if __name__ == "__main__":
    main()
