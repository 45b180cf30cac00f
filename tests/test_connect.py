"""Spark Connect: the estimator, its persistence, Pipelines and the job under
``SparkSession.builder.remote("local[2]")`` give the same results as classic local mode.

A Connect session with an in-process server cannot share a Python process with a
classic session (pyspark refuses: SESSION_ALREADY_EXIST, and it switches the whole
process to Connect mode), and the ``spark`` fixture may already exist here. So the
Connect side runs once, in a fresh interpreter (``_CONNECT_SIDE`` below), and writes
its results to JSON; the tests compare them with the same calls on the classic
``spark`` fixture. ``SPARK_TESTING=1`` makes pyspark give the in-process Connect
server an ephemeral port, so concurrent runs do not collide on 15002.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from vmi_spark.spark.session import (
    describe_jobs,
    is_connect,
    is_local_remote,
    remote_address,
    set_log_level,
)


def _connect_available() -> bool:
    try:
        from pyspark.sql.connect.utils import check_dependencies

        check_dependencies()  # pandas, pyarrow, grpcio, protobuf, ... (raises if missing)
        return True
    except Exception:
        return False


needs_connect = pytest.mark.skipif(not _connect_available(),
                                   reason="needs the Spark Connect client: pip install 'pyspark[connect]'")

ROWS = 2000
K_JOB = 4
JOB_ARGS = ["--label", "y", "--method", "vmi_naive", "--num-features", str(K_JOB), "--quiet"]
SEL_ARGS = dict(labelCol="y", numTopFeatures=3, method="vmi_pairwise")  # + inputCols
VEC_ARGS = dict(labelCol="y", numTopFeatures=3, method="cmim", outputCol="sel")
NUMERIC = [f"x{i}" for i in range(1, 10)]
#: row weights and stability runs (issue 36): a computed weight column, so Spark's reader
WEIGHT_SQL = "CAST(pmod(CAST(x2 * 7 + x5 * 3 AS BIGINT), 4) AS BIGINT)"
STAB_ARGS = dict(labelCol="y", numTopFeatures=3, method="vmi_pairwise", stabilityRuns=3,
                 stabilitySeed=5)

# The Connect side. argv: data path, output dir, JSON-encoded constants.
_CONNECT_SIDE = textwrap.dedent('''
    import json, os, sys

    data, out, const = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    from vmi_spark.job import main

    res = {}
    # the job creates the Connect session (and its in-process server) itself
    res["job_rc"] = main(["--remote", "local[2]", "--input", data,
                          "--output", os.path.join(out, "job"),
                          "--write-selected", os.path.join(out, "pruned"), *const["job_args"]])
    res["job_bad_rc"] = main(["--remote", "local[2]", "--input", os.path.join(out, "missing"),
                              "--label", "y", "--output", os.path.join(out, "bad"), "--quiet"])

    # the same job as a separate client of this process's Connect server (sc://host:port)
    import subprocess
    from pyspark import SparkContext

    jvm = SparkContext._active_spark_context._jvm
    service = getattr(jvm, "org.apache.spark.sql.connect.service.SparkConnectService$")
    port = getattr(service, "MODULE$").localPort()
    env = {k: v for k, v in os.environ.items()
           if k not in ("SPARK_LOCAL_REMOTE", "SPARK_CONNECT_MODE_ENABLED")}  # keeps the token
    proc = subprocess.run([sys.executable, "-c", "import sys; from vmi_spark.job import main; "
                           "sys.exit(main())", "--remote", f"sc://localhost:{port}", "--input", data,
                           "--output", os.path.join(out, "job_sc"), *const["job_args"]],
                          env=env, capture_output=True, text=True, timeout=600)
    res["job_sc_rc"] = proc.returncode
    res["job_sc_stderr"] = proc.stderr[-3000:]

    from pyspark.ml import Pipeline, PipelineModel
    from pyspark.ml.feature import VectorAssembler
    from pyspark.sql import SparkSession
    from vmi_spark import VMISelector, VMISelectorModel
    from vmi_spark.spark.session import describe_jobs, is_connect, set_log_level

    spark = SparkSession.builder.remote("local[2]").getOrCreate()  # the job's session
    res["is_connect"] = is_connect(spark)
    res["set_log_level"] = set_log_level(spark, "ERROR")
    describe_jobs(spark, "vmi_spark test, connect")
    res["tags"] = sorted(spark.getTags())
    df = spark.read.parquet(data)
    feats = [c for c in df.columns if c != "y"]

    # ordinary columns; save, overwrite, load
    sel = VMISelector(inputCols=feats, **const["sel_args"])
    model = sel.fit(df)
    describe_jobs(spark, None)
    res["tags_cleared"] = sorted(spark.getTags())
    res["cols"] = {"selected": model.selectedFeatureNames, "indices": model.selectedFeatures,
                   "scores": model.scores, "blocks": model.blocks,
                   "transform": model.transform(df).columns}
    path = os.path.join(out, "model")
    model.write().save(path)
    model.write().overwrite().save(path)  # replaces an existing model
    loaded = VMISelectorModel.load(path)
    res["cols_loaded"] = {"selected": loaded.selectedFeatureNames, "scores": loaded.scores,
                          "same_uid": loaded.uid == model.uid, "k": loaded.getNumTopFeatures(),
                          "report": loaded.report == model.report,
                          "transform": loaded.transform(df).columns}
    path = os.path.join(out, "estimator")
    sel.write().save(path)
    sel.write().overwrite().save(path)
    est = VMISelector.load(path)
    res["est_loaded"] = {"params": {p.name: v for p, v in est.extractParamMap().items()},
                         "same_uid": est.uid == sel.uid}

    # a vector column in a Pipeline; PipelineModel and Pipeline save/load
    pipe = Pipeline(stages=[VectorAssembler(inputCols=const["numeric"], outputCol="features",
                                            handleInvalid="keep"),
                            VMISelector(**const["vec_args"])])
    pm = pipe.fit(df)

    def rows(m):
        return [list(r[0]) for r in m.transform(df).orderBy("x1").select("sel").limit(20).collect()]

    res["vec"] = {"selected": pm.stages[-1].selectedFeatureNames, "scores": pm.stages[-1].scores,
                  "rows": rows(pm)}
    path = os.path.join(out, "pipeline_model")
    pm.write().save(path)
    pm.write().overwrite().save(path)
    pm2 = PipelineModel.load(path)
    res["vec_loaded"] = {"selected": pm2.stages[-1].selectedFeatureNames,
                         "scores": pm2.stages[-1].scores, "rows": rows(pm2)}
    path = os.path.join(out, "pipeline")
    pipe.write().overwrite().save(path)
    stages = Pipeline.load(path).getStages()
    res["pipe_loaded"] = {"stages": [type(s).__name__ for s in stages],
                          "k": stages[-1].getNumTopFeatures(), "method": stages[-1].getMethod()}

    # row weights and stability runs (passes under Connect: masked views of the blocks)
    from pyspark.sql import functions as F
    weighted = df.withColumn("w", F.expr(const["weight_sql"]))
    wm = VMISelector(inputCols=const["numeric"], weightCol="w", **const["stab_args"]).fit(weighted)
    res["weighted"] = {"selected": wm.selectedFeatureNames, "scores": wm.scores,
                       "stability": wm.stability, "weights": wm.report["weights"],
                       "execution": wm.report["execution"]}
    with open(os.path.join(out, "connect.json"), "w") as fh:
        json.dump(res, fh)
    spark.stop()
''')


def _write_data(path: str) -> None:
    """The tree model plus a string column with nulls and a numeric column with NaNs."""
    from vmi_spark.synthetic import tree_model

    df = tree_model(ROWS, seed=1)
    rng = np.random.default_rng(2)
    df["c"] = np.where(df["y"] == 1, rng.choice(["a", "b", "c"], ROWS, p=[.5, .3, .2]),
                       rng.choice(["a", "b", "c"], ROWS))
    df.loc[::37, "c"] = None
    df.loc[::53, "x9"] = np.nan
    df.to_parquet(path)


def _child_env(repo: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE",
                        "SPARK_API_MODE", "PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET")}
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env["PYTHONPATH"] = os.pathsep.join([repo, *filter(None, [env.get("PYTHONPATH")])])
    env["SPARK_TESTING"] = "1"  # ephemeral port for the in-process Connect server
    return env


@pytest.fixture(scope="module")
def connect_run(tmp_path_factory):
    """Run the Connect side once; returns (data path, output dir, results, stderr)."""
    base = tmp_path_factory.mktemp("connect")
    data, out = str(base / "data.parquet"), base / "out"
    out.mkdir()
    _write_data(data)
    script = base / "connect_side.py"
    script.write_text(_CONNECT_SIDE)
    const = {"job_args": JOB_ARGS, "sel_args": SEL_ARGS, "vec_args": VEC_ARGS, "numeric": NUMERIC,
             "weight_sql": WEIGHT_SQL, "stab_args": STAB_ARGS}
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, str(script), data, str(out), json.dumps(const)],
                          env=_child_env(repo), cwd=str(base), capture_output=True, text=True,
                          timeout=900)
    result = out / "connect.json"
    if proc.returncode != 0 or not result.exists():
        pytest.fail(f"the Connect side failed (exit {proc.returncode}):\n{proc.stderr[-6000:]}")
    return data, out, json.loads(result.read_text()), proc.stderr


def _same_scores(a, b):
    assert len(a) == len(b)
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-9)


@needs_connect
def test_connect_session_helpers_and_round_trips(connect_run):
    # first in the file and without the classic `spark` fixture, so the Connect child
    # runs before this process starts a JVM of its own
    _, out, res, stderr = connect_run
    assert res["is_connect"] is True
    assert res["set_log_level"] is True  # the in-process server's SparkContext
    assert res["tags"] == ["vmi_spark: vmi_spark test_ connect"]
    assert res["tags_cleared"] == []
    assert res["job_rc"] == 0
    assert res["job_sc_rc"] == 0, res["job_sc_stderr"]
    report = json.loads((out / "job" / "selection.json").read_text())
    assert report["pruned"]["columns"] == [c for c in [*NUMERIC, "y", "c"]
                                           if c in {*report["selected"], "y"}]
    assert (out / "pruned" / "_SUCCESS").exists()
    assert res["job_bad_rc"] == 2
    assert "select_features: error: --input" in stderr and "does not exist" in stderr
    cols, loaded = res["cols"], res["cols_loaded"]
    assert loaded["selected"] == cols["selected"] and loaded["scores"] == cols["scores"]
    assert loaded["same_uid"] and loaded["report"] and loaded["k"] == SEL_ARGS["numTopFeatures"]
    assert loaded["transform"] == cols["transform"]
    params = res["est_loaded"]["params"]
    assert res["est_loaded"]["same_uid"]
    assert params["numTopFeatures"] == 3 and params["method"] == "vmi_pairwise"
    assert params["inputCols"] == [c for c in NUMERIC + ["c"]]
    assert res["vec_loaded"] == res["vec"]
    assert res["pipe_loaded"] == {"stages": ["VectorAssembler", "VMISelector"], "k": 3,
                                  "method": "cmim"}


@needs_connect
def test_connect_job_equals_classic(connect_run, spark, tmp_path):
    from vmi_spark.job import main

    data, out, _, _ = connect_run
    assert main(["--input", data, "--output", str(tmp_path / "job"), *JOB_ARGS], spark=spark) == 0
    local = json.loads((tmp_path / "job" / "selection.json").read_text())
    for run in ("job", "job_sc"):  # --remote local[2], --remote sc://localhost:port
        remote = json.loads((out / run / "selection.json").read_text())
        for key in ("features", "selected", "selected_indices", "blocks", "restarts",
                    "stopped_early", "num_rows", "rows_dropped", "rows_skipped", "columns",
                    "classes", "parameters"):
            assert remote[key] == local[key], (run, key)
        assert len(remote["selected"]) == K_JOB
        _same_scores(remote["scores"], local["scores"])
        _same_scores(remote["gains"], local["gains"])


@needs_connect
def test_connect_estimator_equals_classic(connect_run, spark):
    from pyspark.ml import Pipeline
    from pyspark.ml.feature import VectorAssembler

    from vmi_spark import VMISelector

    data, _, res, _ = connect_run
    df = spark.read.parquet(data)
    feats = [c for c in df.columns if c != "y"]
    model = VMISelector(inputCols=feats, **SEL_ARGS).fit(df)
    assert res["cols"]["selected"] == model.selectedFeatureNames
    assert res["cols"]["indices"] == model.selectedFeatures
    assert res["cols"]["blocks"] == model.blocks
    _same_scores(res["cols"]["scores"], model.scores)
    assert res["cols"]["transform"] == model.transform(df).columns

    pm = Pipeline(stages=[VectorAssembler(inputCols=NUMERIC, outputCol="features",
                                          handleInvalid="keep"),
                          VMISelector(**VEC_ARGS)]).fit(df)
    assert res["vec"]["selected"] == pm.stages[-1].selectedFeatureNames
    _same_scores(res["vec"]["scores"], pm.stages[-1].scores)
    rows = [list(r[0]) for r in pm.transform(df).orderBy("x1").select("sel").limit(20).collect()]
    assert res["vec"]["rows"] == rows


def test_session_helpers_classic(spark):
    assert not is_connect(spark)
    assert set_log_level(spark, "ERROR") is True
    describe_jobs(spark, "vmi_spark: step 1")
    assert spark.sparkContext.getLocalProperty("spark.job.description") == "vmi_spark: step 1"
    describe_jobs(spark, None)
    assert spark.sparkContext.getLocalProperty("spark.job.description") is None


def test_remote_urls():
    assert is_local_remote("local") and is_local_remote("local[2]") and is_local_remote("local[*]")
    assert not is_local_remote("sc://localhost:15002") and not is_local_remote("localhost")


def test_remote_address():
    assert remote_address("sc://localhost") == ("localhost", 15002)
    assert remote_address("sc://h.example:443/;token=x;use_ssl=true") == ("h.example", 443)
    with pytest.raises(ValueError):
        remote_address("local[2]")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def test_job_rejects_bad_remote(capsys, tmp_path):
    from vmi_spark.job import main

    assert main(["--remote", "localhost:15002"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("select_features: error: --remote must be")
    # nothing listens there: one line at once, not the client's ten minutes of retries
    port = _free_port()
    assert main(["--remote", f"sc://localhost:{port}", "--input", str(tmp_path / "in"),
                 "--label", "y", "--output", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    # the job's first progress line ("...; starting Spark"), then the one error line
    assert len(err) == 2 and " INFO vmi_spark: selecting " in err[0], err
    assert err[0].endswith("starting Spark")
    assert err[1].startswith(f"select_features: error: cannot reach the Spark Connect server at "
                             f"localhost:{port}")
    assert not (tmp_path / "out").exists()


@needs_connect
@pytest.mark.driver_auto  # the classic session chooses the execution as Connect's does
def test_connect_weights_and_stability_equal_classic(connect_run, spark):
    """weightCol and stabilityRuns under Connect give the classic session's selection,
    stability runs and index (a small table: in the driver, as in the classic session)."""
    from pyspark.sql import functions as F

    from vmi_spark import VMISelector

    data, _, res, _ = connect_run
    df = spark.read.parquet(data).withColumn("w", F.expr(WEIGHT_SQL))
    model = VMISelector(inputCols=NUMERIC, weightCol="w", **STAB_ARGS).fit(df)
    got = res["weighted"]
    assert got["execution"] == model.report["execution"]  # a small table: the driver, both
    assert got["selected"] == model.selectedFeatureNames
    _same_scores(got["scores"], model.scores)
    assert got["weights"] == model.report["weights"]
    for key in ("run_selections", "run_rows", "features", "index", "ci"):
        assert got["stability"][key] == model.stability[key], key
