"""Where a cold empty ``mapInArrow`` stage's seconds go (issue 46 item 2): Python's start in Spark.

Each round runs, in turn, one cold ``spark-submit --master local[2]`` of a script per
variant (``default``; ``preload``: ``spark.python.daemon.module`` names a module that
imports pyarrow and ``pyspark.worker`` and then runs ``pyspark.daemon``, so the forked
workers find them imported; ``arrow_first``: ``default`` with the ``mapInArrow`` stages run
first, as in a job whose first stage runs Python). The script, timing everything on ``CLOCK_BOOTTIME``
(the clock of ``/proc/PID/stat``'s start times), runs:

* ``jvm``: a JVM-only stage of 8 tasks (``range``, ``filter``, ``collect``), then again;
* ``to_arrow`` (Spark 4): ``DataFrame.toArrow`` of a small range: the JVM's Arrow writer
  without a Python worker, then again;
* ``arrow``: an empty ``mapInArrow`` stage of 8 tasks, then again. Each task returns its
  worker's pid, its daemon's pid, both processes' start times, when the function was
  entered and whether pandas was imported by then.

From these: the JVM's start to the driver's Python, the session's start, and for the
first ``mapInArrow`` stage its submission to the daemon's start (the JVM's side before
it starts Python), the daemon's start to the first worker's fork (the daemon's Python
start and imports), the fork to the function's first call (the worker's imports, reading
the function, the first Arrow batch), and the last call to the stage's end. Also each
import's time in a fresh interpreter. The 1-minute load before and after each run.

With ``--job FILE``: instead, cold ``spark-submit --master local[2]
jobs/select_features.py --input FILE --label label --num-features K`` runs on the
defaults, ``default`` and ``preload`` in turn (the daemon also imports this package's
worker-side modules), each run's wall time, ``phase_seconds`` and selection (the two
variants' selections and scores must be equal).

    PYSPARK_PYTHON=$PWD/.venv/bin/python .venv/bin/python benchmarks/python_start.py \\
        --rounds 3 --out benchmarks/results/s28_python_start.json
    PYSPARK_PYTHON=$PWD/.venv/bin/python .venv/bin/python benchmarks/python_start.py \
        --job /tmp/vmi_tables/coded_200k_200.parquet --k 20 --rounds 3 \
        --out benchmarks/results/s28_python_start_job_200k.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from run import save  # noqa: E402
from time_to_answer import spark_submit  # noqa: E402

#: the daemon module of the ``preload`` variant
PRELOAD = """
import os
import pyarrow, pyspark.worker  # noqa: F401 - imported before the fork
if os.environ.get("PRELOAD_JOB") == "1":
    import vmi_spark.core.kernels, vmi_spark.spark.executions.passes  # noqa: F401
    import vmi_spark.spark.sources.arrow_source, vmi_spark.spark.sources.sparkhash  # noqa
os.environ["PRELOADED"] = "1"
from pyspark.daemon import manager
if __name__ == "__main__":
    manager()
"""

SCRIPT = r"""
import json, os, sys, time
boot = lambda: time.clock_gettime(time.CLOCK_BOOTTIME)
t_script = boot()

def started(pid):
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return int(fields[19]) / os.sysconf("SC_CLK_TCK")

from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
out = {"jvm_start": started(os.getppid()), "driver_start": started(os.getpid()),
       "script": t_script, "session": boot()}

def stage(name, fn):
    took = []
    for _ in range(2):
        t = boot()
        r = fn()
        took.append({"submit": t, "end": boot(), "rows": r})
    out[name] = took

def jvm():
    stage("jvm", lambda: len(spark.range(0, 8, 1, 8).filter("id < 0").collect()))
    if hasattr(spark.range(1), "toArrow"):
        stage("to_arrow", lambda: spark.range(0, 8, 1, 8).toArrow().num_rows)

if sys.argv[1:] != ["arrow_first"]:
    jvm()

def empty(batches):
    import pyarrow as pa
    entered = time.clock_gettime(time.CLOCK_BOOTTIME)
    for _ in batches:
        pass
    ppid = os.getppid()
    yield pa.RecordBatch.from_pydict({
        "pid": [os.getpid()], "daemon": [ppid], "worker_start": [started(os.getpid())],
        "daemon_start": [started(ppid)], "entered": [entered],
        "pandas": ["pandas" in sys.modules],
        "preloaded": [os.environ.get("PRELOADED") == "1"]})

schema = ("pid long, daemon long, worker_start double, daemon_start double, "
          "entered double, pandas boolean, preloaded boolean")
stage("arrow", lambda: [r.asDict() for r in spark.range(0, 8, 1, 8).mapInArrow(
    empty, schema).collect()])
if sys.argv[1:] == ["arrow_first"]:
    jvm()
print("TIMES " + json.dumps(out))
spark.stop()
"""


def phases(t: dict) -> dict:
    """The seconds of each part of one run's :data:`SCRIPT` times ``t``."""
    def took(s):
        return round(s["end"] - s["submit"], 2)

    first = t["arrow"][0]
    tasks = first["rows"]
    fork = min(r["worker_start"] for r in tasks)
    daemon = min(r["daemon_start"] for r in tasks)
    out = {"jvm_to_driver_python": t["driver_start"] - t["jvm_start"],
           "session_start": t["session"] - t["script"],
           "jvm_stage": [took(s) for s in t["jvm"]],
           "to_arrow": [took(s) for s in t.get("to_arrow", [])],
           "arrow_stage": [took(s) for s in t["arrow"]],
           "arrow_submit_to_daemon_start": daemon - first["submit"],
           "daemon_start_to_first_fork": fork - daemon,
           "first_fork_to_first_call": min(r["entered"] - r["worker_start"] for r in tasks
                                           if r["worker_start"] == fork),
           "first_call_to_stage_end": first["end"] - min(r["entered"] for r in tasks),
           "last_call_to_stage_end": first["end"] - max(r["entered"] for r in tasks),
           "workers": len({r["pid"] for r in tasks}),
           "daemons": len({r["daemon"] for r in tasks}),
           "pandas_imported": all(r["pandas"] for r in tasks),
           "preloaded": all(r["preloaded"] for r in tasks)}
    return {k: round(v, 2) if isinstance(v, float) else v for k, v in out.items()}


def import_times(python: str, rounds: int) -> dict:
    """Seconds (median of ``rounds``) of a fresh interpreter importing each module set."""
    sets = {"nothing": "pass", "pyspark.daemon": "import pyspark.daemon",
            "pyspark.worker": "import pyspark.worker", "pyarrow": "import pyarrow",
            "pandas": "import pandas",
            "worker+pyarrow+pandas": "import pyspark.worker, pyarrow, pandas"}
    out = {}
    for name, code in sets.items():
        took = []
        for _ in range(rounds):
            t = time.perf_counter()
            subprocess.run([python, "-c", code], check=True)
            took.append(time.perf_counter() - t)
        out[name] = round(statistics.median(took), 3)
    return out


def submit(variant: str, args: list[str], work: str, **extra: str) -> tuple[dict, str]:
    """One cold spark-submit of ``args`` as ``variant`` (``extra``: more environment): its
    wall time and load; its output."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               **extra)
    cmd = [spark_submit(), "--master", "local[2]", "--conf", "spark.ui.enabled=false"]
    if variant == "preload":
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [work, env.get("PYTHONPATH")]))
        cmd += ["--conf", "spark.python.daemon.module=preload_daemon"]
    before = os.getloadavg()[0]
    t = time.perf_counter()
    done = subprocess.run(cmd + args, env=env, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t
    if done.returncode:
        raise SystemExit(f"{variant}: exit {done.returncode}\n{done.stderr[-3000:]}")
    return ({"variant": variant, "wall": round(wall, 2), "load_before": before,
             "load_after": os.getloadavg()[0]}, done.stdout)


def run(variant: str, script: str, work: str) -> dict:
    res, out = submit(variant, [script, variant], work)
    line = [s for s in out.splitlines() if s.startswith("TIMES ")][-1]
    return {**res, **phases(json.loads(line[6:]))}


def run_job(variant: str, table: str, k: int, work: str) -> dict:
    dest = os.path.join(work, "out-" + variant)
    shutil.rmtree(dest, ignore_errors=True)
    res, _ = submit(variant, [os.path.join(ROOT, "jobs", "select_features.py"), "--input",
                              table, "--label", "label", "--num-features", str(k),
                              "--output", dest, "--quiet"], work, PRELOAD_JOB="1")
    with open(os.path.join(dest, "selection.json")) as fh:
        report = json.load(fh)
    return {**res, "phases": {a: round(b, 2) for a, b in report["phase_seconds"].items()},
            "selected": report["selected"], "scores": report.get("scores"),
            "gains": report.get("gains")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--job", help="a Parquet table: time the job on it instead")
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    res: dict = {"what": __doc__.splitlines()[0],
                 "started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
                 "imports": import_times(sys.executable, 3), "runs": []}
    with tempfile.TemporaryDirectory(prefix="pystart-") as work:
        script = os.path.join(work, "empty.py")
        with open(script, "w") as fh:
            fh.write(SCRIPT)
        with open(os.path.join(work, "preload_daemon.py"), "w") as fh:
            fh.write(PRELOAD)
        for _ in range(args.rounds):
            for variant in ("default", "preload") if args.job else (
                    "default", "preload", "arrow_first"):
                res["runs"].append(run_job(variant, args.job, args.k, work) if args.job
                                   else run(variant, script, work))
                print(json.dumps(res["runs"][-1])[:600], flush=True)
    if args.job:
        res["job"], res["k"] = os.path.basename(args.job), args.k
        res["same_selection"] = len({json.dumps([r["selected"], r["scores"], r["gains"]])
                                     for r in res["runs"]}) == 1
    save(res, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
