"""Where a cold run's phases go, stage by stage (issue 46 item 2): Spark's own event log.

In one run of this script, in turn:

* ``empty``: a cold ``spark-submit --master local[2]`` of a script that runs an empty
  ``mapInArrow`` stage of 8 tasks twice: the first pays for starting the Python workers
  (and the JVM's Arrow path), the second finds them started;
* ``job``: a cold ``spark-submit --master local[2] jobs/select_features.py --input FILE
  --label label --num-features K`` on the job's defaults, with Spark's event log
  (uncompressed) in a directory of its own.

For the job: wall time, its ``phase_seconds`` and, per stage of the event log, when it
started (seconds after the first), how long it took, its tasks, and their summed run time,
JVM CPU time (a Python worker's CPU is not in it) and shuffle bytes; the first and the
other tasks' run times apart (the first task of a worker pays for its start). The
1-minute load before and after each run.

    PYSPARK_PYTHON=$PWD/.venv/bin/python .venv/bin/python benchmarks/stage_times.py \\
        /tmp/vmi_tables/mixed_1m_1000.parquet --k 3 --out benchmarks/results/s27_stage_times.json
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from run import save  # noqa: E402
from time_to_answer import spark_submit  # noqa: E402

EMPTY = """
import json, time
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
def empty(batches):
    import pyarrow as pa
    for _ in batches:
        pass
    yield pa.RecordBatch.from_pydict({"x": pa.array([0], pa.int32())})
took = []
for _ in range(2):
    t = time.perf_counter()
    spark.range(0, 8, 1, 8).mapInArrow(empty, "x int").collect()
    took.append(round(time.perf_counter() - t, 2))
print("EMPTY", json.dumps(took))
spark.stop()
"""


def stages(log_dir: str) -> list[dict]:
    """Each completed stage of the (uncompressed, perhaps rolling) event log in ``log_dir``."""
    done: dict[int, dict] = {}
    tasks: dict[int, list[dict]] = {}
    for path in glob.glob(os.path.join(log_dir, "**", "events*"), recursive=True):
        with open(path) as fh:
            for line in fh:
                e = json.loads(line)
                if e["Event"] == "SparkListenerStageCompleted":
                    done[e["Stage Info"]["Stage ID"]] = e["Stage Info"]
                elif e["Event"] == "SparkListenerTaskEnd":
                    tasks.setdefault(e["Stage ID"], []).append(e)
    if not done:
        return []
    t0 = min(s["Submission Time"] for s in done.values())
    out = []
    for sid, s in sorted(done.items()):
        ts = sorted(tasks.get(sid, []), key=lambda t: t["Task Info"]["Launch Time"])
        m = [t.get("Task Metrics") or {} for t in ts]
        run = [x.get("Executor Run Time", 0) / 1000 for x in m]
        out.append({
            "stage": sid, "name": s["Stage Name"].split(" at ")[0],
            "start": round((s["Submission Time"] - t0) / 1000, 2),
            "seconds": round((s["Completion Time"] - s["Submission Time"]) / 1000, 2),
            "tasks": len(ts), "task_run": round(sum(run), 2),
            "first_tasks_run": [round(r, 2) for r in run[:2]],
            "other_tasks_run": [round(r, 2) for r in run[2:]],
            "jvm_cpu": round(sum(x.get("Executor CPU Time", 0) for x in m) / 1e9, 2),
            "shuffle_write_mb": round(sum((x.get("Shuffle Write Metrics") or {}).get(
                "Shuffle Bytes Written", 0) for x in m) / 1e6, 1)})
    return out


def timed(cmd: list[str], env: dict) -> tuple[float, float, float, str]:
    load = os.getloadavg()[0]
    t = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - t
    if done.returncode:
        raise SystemExit(f"{cmd[-1]}: exit {done.returncode}\n{done.stdout[-3000:]}")
    return round(wall, 2), load, os.getloadavg()[0], done.stdout


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("input")
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    base = [spark_submit(), "--master", "local[2]", "--conf", "spark.ui.enabled=false"]
    res: dict = {"what": __doc__.splitlines()[0], "input": os.path.basename(args.input),
                 "k": args.k, "started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())}
    with tempfile.TemporaryDirectory(prefix="stages-") as work:
        script = os.path.join(work, "empty.py")
        with open(script, "w") as fh:
            fh.write(EMPTY)
        wall, before, after, out = timed(base + [script], env)
        line = [s for s in out.splitlines() if s.startswith("EMPTY ")][-1]
        res["empty"] = {"wall": wall, "load_before": before, "load_after": after,
                        "first_stage": json.loads(line[6:])[0],
                        "second_stage": json.loads(line[6:])[1]}
        logs, dest = os.path.join(work, "events"), os.path.join(work, "out")
        os.makedirs(logs)
        cmd = base + ["--conf", "spark.eventLog.enabled=true", "--conf",
                      "spark.eventLog.compress=false", "--conf", f"spark.eventLog.dir={logs}",
                      os.path.join(ROOT, "jobs", "select_features.py"), "--input", args.input,
                      "--label", "label", "--num-features", str(args.k), "--output", dest,
                      "--quiet"]
        wall, before, after, _ = timed(cmd, env)
        with open(os.path.join(dest, "selection.json")) as fh:
            report = json.load(fh)
        res["job"] = {"wall": wall, "load_before": before, "load_after": after,
                      "execution": report.get("execution"), "selected": report.get("selected"),
                      "phases": {a: round(b, 2) for a, b in report["phase_seconds"].items()},
                      "stages": stages(logs)}
    save(res, args.out)
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
