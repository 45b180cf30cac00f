"""Time to answer (issue 21, target 1): the job against a bare spark-submit read of the same file.

For each table, alternating in one run, ``REPS`` times each:

* ``bare``: ``spark-submit`` of a script that reads the Parquet file and counts it;
* ``job``: ``spark-submit jobs/select_features.py`` (vmi_naive, K = 20, ``--execution auto``);
* ``job_resident``: the same job with ``--execution resident`` (the distributed path that
  ``auto`` used before the driver execution);
* ``job_baseline``, ``job_resident_baseline`` (with ``--baseline DIR``): ``job`` and
  ``job_resident`` with the code of another checkout (e.g. ``git worktree add DIR
  <commit>``), for an A/B of a change in one run.

Wall time is measured around the subprocess; the job's ``phase_seconds`` come from its
``selection.json``. The 1-minute load average is recorded with every run. Tables:
``200k x 200`` (8 states, 2 classes, :func:`data.make_table`) and ``569 x 30``
(scikit-learn's breast_cancer, continuous features, 2 classes).

    PYSPARK_PYTHON=$PWD/.venv/bin/python .venv/bin/python benchmarks/time_to_answer.py \\
        --reps 3 --out benchmarks/results/s9_time_to_answer.json
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

from run import load, save  # noqa: E402

BARE = """
import sys, time
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
print("rows", spark.read.parquet(sys.argv[1]).count())
spark.stop()
"""


def spark_submit() -> str:
    exe = os.path.join(os.path.dirname(sys.executable), "spark-submit")
    return exe if os.path.exists(exe) else "spark-submit"


def tables(tmp: str) -> dict[str, str]:
    import pandas as pd
    from sklearn.datasets import load_breast_cancer

    from data import make_table, write_coded_parquet

    out = {}
    codes, y = make_table(200_000, 200)
    out["200k x 200"] = os.path.join(tmp, "d200k.parquet")
    write_coded_parquet(out["200k x 200"], codes, y)
    bc = load_breast_cancer()
    frame = pd.DataFrame(bc.data, columns=[f"f{i}" for i in range(bc.data.shape[1])])
    frame["label"] = bc.target
    out["569 x 30"] = os.path.join(tmp, "breast_cancer.parquet")
    frame.to_parquet(out["569 x 30"], index=False)
    return out


def run(cmd: list[str], env: dict) -> float:
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[:4]} failed ({proc.returncode}):\n{proc.stdout[-3000:]}")
    return wall


#: each kind of run that starts the job: (runs another checkout's code, --execution)
JOB_KINDS = {"job": (False, "auto"), "job_resident": (False, "resident"),
             "job_baseline": (True, "auto"), "job_resident_baseline": (True, "resident")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=None)
    ap.add_argument("--kinds", nargs="+", default=["bare", "job", "job_resident"],
                    choices=["bare", *JOB_KINDS])
    ap.add_argument("--baseline", default=None,
                    help="a checkout whose code job_baseline runs (added to --kinds)")
    args = ap.parse_args(argv)
    kinds = list(args.kinds)
    baseline_kinds = [k for k in kinds if k != "bare" and JOB_KINDS[k][0]]
    if args.baseline and not baseline_kinds:
        kinds.append("job_baseline")
    if baseline_kinds and not args.baseline:
        ap.error("the *_baseline kinds need --baseline DIR")
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               PYTHONPATH=ROOT)
    tmp = tempfile.mkdtemp(prefix="tta-")
    res: dict = {"load_start": load(), "runs": []}
    try:
        bare = os.path.join(tmp, "bare.py")
        with open(bare, "w") as fh:
            fh.write(BARE)
        base = [spark_submit(), "--master", "local[2]", "--conf", "spark.ui.enabled=false"]
        for name, path in tables(tmp).items():
            for rep in range(args.reps):
                for kind in kinds:
                    out = os.path.join(tmp, f"out-{kind}")
                    shutil.rmtree(out, ignore_errors=True)
                    if kind == "bare":
                        cmd = [*base, bare, path]
                    else:
                        other, execution = JOB_KINDS[kind]
                        code = args.baseline if other else ROOT
                        cmd = [*base, os.path.join(code, "jobs", "select_features.py"),
                               "--input", path, "--label", "label", "--output", out,
                               "--num-features", "20", "--quiet", "--execution", execution]
                    before = load()
                    wall = run(cmd, dict(env, PYTHONPATH=code) if kind != "bare" else env)
                    row = {"table": name, "rep": rep, "kind": kind, "wall": round(wall, 2),
                           "load": before}
                    if kind != "bare":
                        rep_json = json.load(open(os.path.join(out, "selection.json")))
                        row.update(execution=rep_json["execution"],
                                   selected=rep_json["selected"],
                                   prepare=round(rep_json["prepare_seconds"], 3),
                                   total=round(rep_json["total_seconds"], 3),
                                   phases={k: round(v, 3)
                                           for k, v in rep_json["phase_seconds"].items()})
                    res["runs"].append(row)
                    print(json.dumps(row), flush=True)
        summary = {}
        for name in {r["table"] for r in res["runs"]}:
            med = {k: statistics.median(r["wall"] for r in res["runs"]
                                        if r["table"] == name and r["kind"] == k)
                   for k in kinds}
            preps = [r["prepare"] for r in res["runs"]
                     if r["table"] == name and r["kind"] == "job"]
            prep = statistics.median(preps) if preps else None
            same = len({tuple(r["selected"]) for r in res["runs"]
                         if r["table"] == name and r["kind"] != "bare"}) == 1
            summary[name] = {"median_wall": med, "job_prepare_median": prep,
                             "same_selection_every_run": same}
            if "bare" in med:
                summary[name].update({f"{k}_over_bare": round(med[k] / med["bare"], 2)
                                      for k in kinds if k != "bare"})
            print(name, json.dumps(summary[name]), flush=True)
        res["summary"] = summary
        res["load_end"] = load()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    save(res, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
