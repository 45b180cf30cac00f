"""Peers (issue 21, target 6): the same table, the same run, every selector a user could pick.

One table of ``--rows`` x ``--features`` discrete features (8 states, 2 classes,
:func:`data.make_table`) is written once in each peer's input format, then each selector
picks ``--k`` features in its own process (stopped after ``--limit`` seconds; its time is
then a lower bound and ``finished`` is false), ``--reps`` times, alternating:

* ``vmi_cpp``: the paper authors' C++ VMI_naive (``VMI_naive.cpp`` of
  https://github.com/BiuBiuBiLL/InfoFeatureSelection), built here with ``g++ -O3 -std=c++11`` after
  its size constants (``Nsamples``, ``Nfeatures``, ``Nclasses``, ``selected_features``)
  and ``file_name`` are set for the table (the code sizes its arrays at compile time; the
  build is timed apart). Input: its own tab-separated text. One thread.
* ``mrmrs`` (Rust and Polars; ANOVA F relevance, FCQ), ``mrmr_selection`` (pandas,
  ``mrmr_classif``: F-statistic relevance and correlation redundancy, not mutual
  information), ``pymrmr`` (Peng's C++ mRMR, MIQ), ``skfeature_jmi`` and
  ``skfeature_mrmr`` (scikit-feature, Python): CSV input, run in ``--peer-python`` (a
  separate venv: they are benchmark-only dependencies, ``benchmarks/requirements-peers.txt``).
* ``ours_inmemory_vmi_naive`` and ``ours_inmemory_mrmr``: ``vmi_spark.VMIFeatureSelector``
  (the Spark-free core, numba kernels, its steps on the process's cores) on the same CSV,
  in this venv; ``ours_inmemory_vmi_naive_parquet`` reads the Parquet file with pyarrow
  instead (issue 38's in-memory target: process start to exit).
* ``ours_inmemory_vmi_naive_parquet_baseline`` (with ``--baseline DIR``): the same with the
  code of another checkout, for an A/B in one run; ``ours_core_parquet``: the same
  selection from the core's functions, without scikit-learn or pandas (issue 46: what
  ``import sklearn`` costs). Both Parquet scripts report their phases (imports, read,
  fit); ``median_wall`` and ``over_mrmrs`` (median wall over mrmrs') close the summary.
  ``bare_read_parquet``: a cold process that only reads the Parquet file (the floor).
* ``ours_job``: ``spark-submit jobs/select_features.py`` on the Parquet file (local[2],
  default memory, ``--execution auto``, the job's defaults: chance-corrected gains).
* ``ours_job_authors`` and ``ours_inmemory_vmi_naive_authors``: the same with the
  authors' settings (:data:`AUTHORS_SETTINGS`: ``--restart-tolerance 0.01
  --bias-correction none``), which reproduce the C++ code's selection.

For each run: ``wall`` (process start to exit, input read included), ``select`` (the
selection call alone, timed inside the process; the whole run for the C++ code and the
job, whose reading cannot be timed apart from outside), the selected features, and **ns
per cell per core** = ``select`` x cores / (rows x features x k), with cores = 1 for the
single-threaded peers, the process's cores for our in-memory selector and for
``mrmrs`` (Polars' thread pool) and 2 for the job (local[2]; the driver execution runs
blocks on two threads). Agreement with our
``vmi_naive`` (in memory) and with the C++ code: the length of the common prefix and the
size of the common set.
The 1-minute load is recorded with every run.

    python3 -m venv /tmp/peers-venv && /tmp/peers-venv/bin/pip install -r benchmarks/requirements-peers.txt
    /tmp/peers-venv/bin/pip install --no-build-isolation pymrmr   # needs Cython, numpy, wheel first
    git clone https://github.com/BiuBiuBiLL/InfoFeatureSelection /tmp/vmi-authors
    PYSPARK_PYTHON=$PWD/.venv/bin/python .venv/bin/python benchmarks/peers.py \\
        --rows 20000 --features 200 --peer-python /tmp/peers-venv/bin/python \\
        --vmi-cpp-src /tmp/vmi-authors/VMI_naive.cpp --out benchmarks/results/s12_peers_20k.json
    # issue 46: the in-memory answer against mrmrs, cold processes, an A/B with a checkout
    # of the previous code, 9 rounds in turn after one untimed round (mrmrs and polars only
    # in the peers' venv: pip install polars==2.1.0 mrmrs==0.1.3)
    .venv/bin/python benchmarks/peers.py --rows 200000 --features 200 --k 20 --reps 9 \
        --warmup --peer-python /tmp/peers-venv/bin/python --baseline /tmp/vmi-before \
        --only mrmrs ours_inmemory_vmi_naive_parquet ours_inmemory_vmi_naive_parquet_baseline \
        ours_core_parquet bare_read_parquet --out benchmarks/results/s46_inmemory_3.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
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
from time_to_answer import spark_submit  # noqa: E402

#: the settings of the authors' program: restart below a gain of 0.01 nats, plain
#: (uncorrected) gains -- with them our vmi_naive picks what their C++ picks
AUTHORS_SETTINGS = {"restart_tolerance": 0.01, "bias_correction": "none"}
AUTHORS_FLAGS = ["--restart-tolerance", "0.01", "--bias-correction", "none"]

#: each peer: a script run as ``python -c SCRIPT CSV K`` printing one JSON line
#: {"select": seconds, "selected": [feature indices]}; the CSV has f0..f{D-1} and label
PEER_SCRIPTS = {
    "mrmrs": """
import sys, time, json, polars as pl, mrmrs
df = pl.read_csv(sys.argv[1]); k = int(sys.argv[2])
X, y = df.drop("label"), df["label"]
t = time.perf_counter(); out = mrmrs.mrmr(X, y, k, "classification")
print(json.dumps({"select": time.perf_counter() - t, "selected": [int(f.name[1:]) for f in out]}))
""",
    "mrmr_selection": """
import sys, time, json, pandas as pd
from mrmr import mrmr_classif
df = pd.read_csv(sys.argv[1]); k = int(sys.argv[2])
X, y = df.drop(columns="label"), df["label"]
t = time.perf_counter(); out = mrmr_classif(X=X, y=y, K=k, show_progress=False)
print(json.dumps({"select": time.perf_counter() - t, "selected": [int(c[1:]) for c in out]}))
""",
    "pymrmr": """
import sys, time, json, pandas as pd, pymrmr
df = pd.read_csv(sys.argv[1]); k = int(sys.argv[2])
df = df[["label"] + [c for c in df.columns if c != "label"]]
t = time.perf_counter(); out = pymrmr.mRMR(df, "MIQ", k)
print(json.dumps({"select": time.perf_counter() - t, "selected": [int(c[1:]) for c in out]}))
""",
    "skfeature_jmi": """
import sys, time, json, pandas as pd
from skfeature.function.information_theoretical_based import JMI
df = pd.read_csv(sys.argv[1]); k = int(sys.argv[2])
X, y = df.drop(columns="label").to_numpy(), df["label"].to_numpy()
t = time.perf_counter(); out = JMI.jmi(X, y, mode="index", n_selected_features=k)
print(json.dumps({"select": time.perf_counter() - t, "selected": [int(i) for i in out]}))
""",
    "skfeature_mrmr": """
import sys, time, json, pandas as pd
from skfeature.function.information_theoretical_based import MRMR
df = pd.read_csv(sys.argv[1]); k = int(sys.argv[2])
X, y = df.drop(columns="label").to_numpy(), df["label"].to_numpy()
t = time.perf_counter(); out = MRMR.mrmr(X, y, mode="index", n_selected_features=k)
print(json.dumps({"select": time.perf_counter() - t, "selected": [int(i) for i in out]}))
""",
}

OURS_INMEMORY = """
import sys, time, json, pandas as pd
from vmi_spark.sklearn import VMIFeatureSelector
df = pd.read_csv(sys.argv[1]); k = int(sys.argv[2]); method = sys.argv[3]
extra = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
X, y = df.drop(columns="label").to_numpy(), df["label"].to_numpy()
t = time.perf_counter()
sel = VMIFeatureSelector(n_features_to_select=k, method=method, **extra).fit(X, y)
print(json.dumps({"select": time.perf_counter() - t,
                  "selected": [int(i) for i in sel.selected_features_]}))
"""

#: the in-memory selector as the issue's target has it: the Parquet file read by pyarrow
#: (label ``label``, features ``f0..``), vmi_naive with the defaults; the whole process timed
OURS_INMEMORY_PARQUET = """
import time
t0 = time.perf_counter()
import sys, json
import numpy as np, pyarrow.parquet as pq
t1 = time.perf_counter()
from vmi_spark.sklearn import VMIFeatureSelector
t2 = time.perf_counter()
t = pq.read_table(sys.argv[1]); k = int(sys.argv[2])
X = np.column_stack([t.column(c).to_numpy() for c in t.column_names if c != "label"])
y = t.column("label").to_numpy()
s = time.perf_counter()
sel = VMIFeatureSelector(n_features_to_select=k).fit(X, y)
e = time.perf_counter()
print(json.dumps({"select": e - s, "phases": {"import_numpy_pyarrow": t1 - t0,
                  "import_vmi_spark_sklearn": t2 - t1, "read_and_stack": s - t2, "fit": e - s},
                  "selected": [int(i) for i in sel.selected_features_]}))
"""

#: the same selection without scikit-learn (not an entry point of the package: what the
#: in-memory answer costs without ``import sklearn``, 1-1.4 s of every run above, nor
#: pandas, which ``pq.read_table`` imports through ``pyarrow.dataset``): the Parquet
#: file's Arrow columns planned and coded as they are read (no numpy table), then the
#: core's greedy loop on the process's cores, the steps of ``VMIFeatureSelector.fit``;
#: the same features and scores
OURS_CORE_PARQUET = """
import time
t0 = time.perf_counter()
import sys, json
import pyarrow as pa, pyarrow.parquet as pq
from vmi_spark.core import kernels
from vmi_spark.core.greedy import select
from vmi_spark.core.inmemory import ThreadedBackend
from vmi_spark.core.planning import INTEGER, TableRows, build_plan
from vmi_spark.core.suspects import screen_all
from vmi_spark.params import Settings, corrections, plan_size
t1 = time.perf_counter()
kernels.warm()
t = pq.ParquetFile(sys.argv[1]).read(); k = int(sys.argv[2])  # (read_table imports pandas)
names = [c for c in t.column_names if c != "label"]
label = t.column("label").combine_chunks().cast(pa.float64())
batch = pa.RecordBatch.from_arrays([label, *(t.column(c).combine_chunks() for c in names)],
                                   names=[f"_c{i}" for i in range(len(names) + 1)])
s = time.perf_counter()
settings = Settings.of({"num_features": k}, "sklearn")
rows = TableRows(lambda: iter([batch]), names, batch.num_rows, sample_all=True)
planned = build_plan("y", INTEGER, names, {n: INTEGER for n in names}, settings, rows, None)
codes, y, w = rows.codes(planned.plan, planned.skip_cols)
k, min_gain, _ = plan_size(settings, len(names))
backend = ThreadedBackend(codes, y, arity=planned.plan.arity,
                          num_classes=len(planned.plan.classes))
suspects, dropped, copies, _ = screen_all(backend, planned, settings)
sel = select(backend, settings.method, k, restart_tolerance=settings.restart_tolerance,
             min_gain=min_gain, exclude=dropped, copies=copies, **corrections(settings))
backend.close()
e = time.perf_counter()
print(json.dumps({"select": e - s, "phases": {"import": t1 - t0, "read": s - t1,
                  "fit": e - s}, "selected": [int(i) for i in sel.selected],
                  "scores": [float(x).hex() for x in sel.scores]}))
"""


#: a cold process that reads the Parquet file with pyarrow and nothing else
BARE_READ_PARQUET = """
import sys, time, json
import pyarrow.parquet as pq
s = time.perf_counter(); t = pq.read_table(sys.argv[1])
print(json.dumps({"select": time.perf_counter() - s, "selected": [], "rows": t.num_rows}))
"""


def write_inputs(tmp: str, rows: int, features: int) -> dict[str, str]:
    """The table as Parquet (ours), CSV (the Python peers) and the C++ code's text files."""
    import numpy as np
    import pandas as pd
    from data import make_table, write_coded_parquet

    codes, y = make_table(rows, features)
    paths = {"parquet": os.path.join(tmp, "t.parquet"), "csv": os.path.join(tmp, "t.csv"),
             "txt": os.path.join(tmp, "t")}
    write_coded_parquet(paths["parquet"], codes, y)
    frame = pd.DataFrame(codes.T.astype(np.int64), columns=[f"f{j}" for j in range(features)])
    frame["label"] = y.astype(np.int64)
    frame.to_csv(paths["csv"], index=False)
    np.savetxt(paths["txt"] + ".txt", codes.T, fmt="%d", delimiter="\t")
    np.savetxt(paths["txt"] + "_labels.txt", y, fmt="%d")
    return paths


def build_cpp(src: str, tmp: str, rows: int, features: int, classes: int, k: int,
              stem: str) -> tuple[str, float]:
    """``VMI_naive.cpp`` with its size constants and input file set, built with -O3."""
    text = open(src).read()
    for name, value in (("Nsamples", rows), ("Nfeatures", features), ("Nclasses", classes),
                        ("selected_features", k)):
        text, n = re.subn(rf"(int const {name}\s*=\s*)\d+", rf"\g<1>{value}", text)
        if n != 1:
            raise RuntimeError(f"cannot set {name} in {src}")
    text, n = re.subn(r'(string const file_name\s*=\s*)"[^"]*"', rf'\g<1>"{stem}"', text)
    if n != 1:
        raise RuntimeError(f"cannot set file_name in {src}")
    cpp = os.path.join(tmp, "VMI_naive.cpp")
    with open(cpp, "w") as fh:
        fh.write(text)
    exe = os.path.join(tmp, "vmi_naive")
    t = time.perf_counter()
    # C++11: the code's global `data` is ambiguous with C++17's std::data (`using namespace std`)
    subprocess.run(["g++", "-O3", "-std=c++11", "-o", exe, cpp], check=True)
    return exe, time.perf_counter() - t


def timed(cmd: list[str], limit: float, env: dict | None = None, cwd: str | None = None):
    """(wall seconds, finished, stdout) of ``cmd``, killed after ``limit`` seconds."""
    t = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limit, env=env,
                              cwd=cwd)
    except subprocess.TimeoutExpired:
        return time.perf_counter() - t, False, ""
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[:3]} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return wall, True, proc.stdout


def cpp_selected(stdout: str) -> list[int]:
    """The feature indices the C++ code prints on its last line."""
    return [int(t) for t in stdout.strip().splitlines()[-1].split()]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--features", type=int, default=200)
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--limit", type=float, default=300.0, help="seconds per run")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--peer-python", default=None, help="the peers' venv python")
    ap.add_argument("--vmi-cpp-src", default=None, help="VMI_naive.cpp of the authors")
    ap.add_argument("--skip", nargs="*", default=[], help="peers to leave out")
    ap.add_argument("--only", nargs="*", default=None, help="run only these peers")
    ap.add_argument("--baseline", default=None,
                    help="another checkout's code (e.g. `git worktree add DIR <commit>`): "
                         "its in-memory selector on Parquet runs too, as "
                         "ours_inmemory_vmi_naive_parquet_baseline, for an A/B in one run")
    ap.add_argument("--warmup", action="store_true",
                    help="one untimed run of each peer first (numba's cache filled, files "
                         "in the page cache)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    n, d, k = args.rows, args.features, args.k
    cells = n * d * k
    tmp = tempfile.mkdtemp(prefix="peers-")
    res: dict = {"rows": n, "features": d, "k": k, "limit": args.limit,
                 "load_start": load(), "runs": []}
    try:
        paths = write_inputs(tmp, n, d)
        runners = {}
        if args.vmi_cpp_src:
            exe, build = build_cpp(args.vmi_cpp_src, tmp, n, d, 2, k, paths["txt"])
            res["vmi_cpp_build_seconds"] = round(build, 2)
            runners["vmi_cpp"] = ([exe], 1, "cpp")
        if args.peer_python:
            for name, script in PEER_SCRIPTS.items():
                # mrmrs computes in Polars' thread pool (every core); the others in one thread
                cores = (os.cpu_count() or 1) if name == "mrmrs" else 1
                runners[name] = ([args.peer_python, "-c", script, paths["csv"], str(k)], cores,
                                 "json")
        cores = len(os.sched_getaffinity(0))  # the in-memory selector's steps: every core it has
        for method in ("vmi_naive", "mrmr"):
            runners[f"ours_inmemory_{method}"] = (
                [sys.executable, "-c", OURS_INMEMORY, paths["csv"], str(k), method], cores,
                "json")
        runners["ours_inmemory_vmi_naive_parquet"] = (
            [sys.executable, "-c", OURS_INMEMORY_PARQUET, paths["parquet"], str(k)], cores,
            "json")
        if args.baseline:
            runners["ours_inmemory_vmi_naive_parquet_baseline"] = (
                [sys.executable, "-c", OURS_INMEMORY_PARQUET, paths["parquet"], str(k)], cores,
                "json")
        runners["ours_core_parquet"] = (
            [sys.executable, "-c", OURS_CORE_PARQUET, paths["parquet"], str(k)], cores, "json")
        # the floor of the in-memory runs: a cold process that reads the Parquet file
        runners["bare_read_parquet"] = (
            [sys.executable, "-c", BARE_READ_PARQUET, paths["parquet"]], 1, "json")
        # the authors' settings: their restart tolerance, the paper's uncorrected gains
        runners["ours_inmemory_vmi_naive_authors"] = (
            [sys.executable, "-c", OURS_INMEMORY, paths["csv"], str(k), "vmi_naive",
             json.dumps(AUTHORS_SETTINGS)], cores, "json")
        out_dir = os.path.join(tmp, "out")
        job = [spark_submit(), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
               os.path.join(ROOT, "jobs", "select_features.py"), "--input",
               paths["parquet"], "--label", "label", "--output", out_dir,
               "--num-features", str(k), "--quiet"]
        runners["ours_job"] = (job, 2, "job")
        runners["ours_job_authors"] = (job + AUTHORS_FLAGS, 2, "job")
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
                   PYTHONPATH=ROOT)
        runners = {name: r for name, r in runners.items() if name not in args.skip
                   and (args.only is None or name in args.only)}

        def env_of(name: str) -> dict:
            return dict(env, PYTHONPATH=args.baseline) if name.endswith("_baseline") else env

        if args.warmup:
            for name, (cmd, _, _) in runners.items():
                shutil.rmtree(out_dir, ignore_errors=True)
                timed(cmd, args.limit, env=env_of(name))
        for rep in range(args.reps):
            for name, (cmd, cores, kind) in runners.items():
                shutil.rmtree(out_dir, ignore_errors=True)
                before = load()
                wall, done, stdout = timed(cmd, args.limit, env=env_of(name))
                row = {"peer": name, "rep": rep, "wall": round(wall, 2), "finished": done,
                       "cores": cores, "load": before}
                if done:
                    if kind == "json":
                        got = json.loads(stdout.strip().splitlines()[-1])
                        row.update(select=round(got["select"], 3), selected=got["selected"])
                        if "phases" in got:
                            row["phases"] = {p: round(v, 3) for p, v in got["phases"].items()}
                    elif kind == "cpp":
                        row.update(select=round(wall, 3), selected=cpp_selected(stdout))
                    else:
                        rep_json = json.load(open(os.path.join(out_dir, "selection.json")))
                        row.update(select=round(wall, 3),
                                   selected=[int(s[1:]) for s in rep_json["selected"]],
                                   execution=rep_json["execution"],
                                   prepare=round(rep_json["prepare_seconds"], 3))
                    row["ns_per_cell_core"] = round(row["select"] * cores / cells * 1e9, 2)
                res["runs"].append(row)
                print(json.dumps({k_: v for k_, v in row.items() if k_ != "selected"}), flush=True)
        for ref_name in ("ours_inmemory_vmi_naive", "vmi_cpp"):
            ref = next((r["selected"] for r in res["runs"]
                        if r["peer"] == ref_name and r.get("selected")), None)
            if ref is None:
                continue
            for r in res["runs"]:
                sel = r.get("selected")
                if sel:
                    prefix = next((i for i, (a, b) in enumerate(zip(sel, ref)) if a != b),
                                  min(len(sel), len(ref)))
                    key = ("agree_with_ours_vmi_naive" if ref_name != "vmi_cpp"
                           else "agree_with_vmi_cpp")
                    r[key] = {"prefix": prefix, "common": len(set(sel) & set(ref))}
        res["load_end"] = load()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    summary = {}
    for r in res["runs"]:
        s = summary.setdefault(r["peer"], {"wall": [], "select": [], "ns_per_cell_core": [],
                                           "finished": True})
        s["wall"].append(r["wall"])
        s["finished"] &= r["finished"]
        if r["finished"]:
            s["select"].append(r["select"])
            s["ns_per_cell_core"].append(r["ns_per_cell_core"])
        s["agree"] = r.get("agree_with_ours_vmi_naive")
        s["agree_with_vmi_cpp"] = r.get("agree_with_vmi_cpp")
        s.setdefault("selections", set()).add(tuple(r.get("selected") or ()))
    for s in summary.values():
        s["median_wall"] = round(statistics.median(s["wall"]), 2)
        s["same_selection_every_run"] = len(s.pop("selections")) == 1
    if "mrmrs" in summary:  # issue 46: the in-memory answer against the fastest peer
        for s in summary.values():
            s["over_mrmrs"] = round(s["median_wall"] / summary["mrmrs"]["median_wall"], 2)
    res["summary"] = summary
    print(json.dumps(summary), flush=True)
    save(res, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
