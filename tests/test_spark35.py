"""The Spark 3.5 tier (issue 34): run by ``tests/run_tiers.sh spark35`` under a venv set
up like a Databricks 16.4 LTS runtime (PySpark 3.5.2, pandas 1.5.3, numpy 1.26.4, pyarrow
15.0.2; ``SPARK35_PINS`` there), never by the main tiers (marker ``spark35``).

* The install check: ``pip install`` of the plain wheel into that venv changes nothing but
  adds ``vmi_spark`` (pip's resolver, ``--dry-run``), and the same holds for an
  environment holding the libraries of each supported Databricks LTS runtime and
  serverless environment (:data:`RUNTIMES`), whose Python the wheel allows.
* The same runs as Spark 4's, bit for bit (``tests/spark_matrix.py``; the step computes
  Spark 4's side first, under the main venv, into ``VMI_SPARK4_DIR``): the job for every
  method, execution and reader, the estimator (save, load, Pipeline), the demo under
  ``spark-submit``, and a Spark Connect 3.5 client (the job, the estimator, serverless
  emulated: caching refused) against a Spark 4 Connect server (``VMI_SPARK4_PYTHON``), as
  Databricks serverless environments 1-3 run 3.5-based clients against newer servers.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import spark_matrix as sm

pytestmark = pytest.mark.spark35

ROOT = Path(__file__).resolve().parents[1]

#: Python version and the pins of the libraries in the plain wheel's dependency closure,
#: from each runtime's documented system environment (Databricks' own constraint files,
#: github.com/databricks/environments python/dbr/<version>/ and python/serverless/;
#: docs/support.md). 16.4 LTS and serverless 3 list no pandas there: their ML variant and
#: the 16.4 LTS release notes say 1.5.3.
RUNTIMES = {
    "14.3 LTS": ("3.10", {"numpy": "1.23.5", "pandas": "1.5.3", "pyarrow": "8.0.0",
                          "python-dateutil": "2.8.2", "pytz": "2022.7", "six": "1.16.0"}),
    "15.4 LTS": ("3.11", {"numpy": "1.23.5", "pandas": "1.5.3", "pyarrow": "14.0.1",
                          "python-dateutil": "2.8.2", "pytz": "2022.7", "six": "1.16.0",
                          "tzdata": "2022.1"}),
    "16.4 LTS": ("3.12", {"numpy": "1.26.4", "pandas": "1.5.3", "pyarrow": "15.0.2",
                          "python-dateutil": "2.9.0.post0", "pytz": "2024.1", "six": "1.16.0"}),
    "17.3 LTS": ("3.12", {"numpy": "2.1.3", "pandas": "2.2.3", "pyarrow": "19.0.1",
                          "python-dateutil": "2.9.0.post0", "pytz": "2024.1", "six": "1.16.0",
                          "tzdata": "2024.1"}),
    "serverless 1": ("3.10", {"numpy": "1.23.5", "pandas": "1.5.3", "pyarrow": "8.0.0",
                              "python-dateutil": "2.8.2", "pytz": "2022.7", "six": "1.16.0"}),
    "serverless 2": ("3.11", {"numpy": "1.23.5", "pandas": "1.5.3", "pyarrow": "14.0.1",
                              "python-dateutil": "2.8.2", "pytz": "2022.7", "tzdata": "2022.1"}),
    "serverless 3": ("3.12", {"numpy": "1.26.4", "pandas": "1.5.3", "pyarrow": "15.0.2",
                              "python-dateutil": "2.9.0.post0", "pytz": "2024.1",
                              "tzdata": "2024.1"}),
    "serverless 4": ("3.12", {"numpy": "2.1.3", "pandas": "2.2.3", "pyarrow": "19.0.1",
                              "python-dateutil": "2.9.0.post0", "pytz": "2024.1",
                              "tzdata": "2024.1"}),
    "serverless 5": ("3.12", {"numpy": "2.1.3", "pandas": "2.2.3", "pyarrow": "21.0.0",
                              "python-dateutil": "2.9.0.post0", "pytz": "2024.1", "six": "1.17.0",
                              "tzdata": "2024.1"}),
}


def _wheel() -> str:
    wheel = os.environ.get("VMI_WHEEL")
    if not wheel:
        pytest.skip("VMI_WHEEL (the built plain wheel) is set by tests/run_tiers.sh spark35")
    return wheel


def _pip_report(args: list[str], tmp_path: Path, python: Path | None = None
                ) -> tuple[int, dict, str]:
    """``pip install --dry-run --report`` with ``args`` (into the environment of ``python``,
    default this one): (exit status, report, stderr)."""
    report = tmp_path / "report.json"
    where = ["--python", str(python)] if python is not None else []
    # pip sees what the environment has: not this tree (the tests import vmi_spark from it
    # through PYTHONPATH, and an editable install leaves vmi_spark.egg-info there)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-m", "pip", *where, "install", "--dry-run", "--quiet",
                           "--disable-pip-version-check", "--report", str(report), *args],
                          capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    data = json.loads(report.read_text()) if proc.returncode == 0 else {}
    return proc.returncode, data, proc.stderr


def _installs(report: dict) -> dict[str, str]:
    return {i["metadata"]["name"].lower().replace("_", "-"): i["metadata"]["version"]
            for i in report.get("install", [])}


def test_venv_is_the_runtimes():
    """The tier runs what it says: PySpark 3.5 and the pinned libraries (``SPARK35_PINS``)."""
    from importlib.metadata import version

    import pyspark

    assert pyspark.__version__.startswith("3.5."), pyspark.__version__
    pins = dict(p.split("==") for p in os.environ.get("SPARK35_PINS", "").split())
    assert {"pyspark", "pandas", "numpy", "pyarrow"} <= set(pins), pins
    assert {name: version(name) for name in pins} == pins


def test_plain_wheel_adds_itself_and_changes_nothing(tmp_path):
    """``pip install vmi_spark`` (the plain wheel, as a runtime user installs it) into this
    venv would install vmi_spark alone: not one of the runtime's libraries changes."""
    rc, report, err = _pip_report([_wheel()], tmp_path)
    assert rc == 0, err[-3000:]
    assert _installs(report) == {"vmi-spark": "0.1.0"}


def _runtime_env(path: Path, pins: dict[str, str]) -> Path:
    """A Python environment (a venv without pip) in which the runtime's libraries are
    installed, as far as pip can tell: a ``.dist-info`` of each pinned version."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    site = next(path.glob("lib/python*/site-packages"))
    for name, ver in pins.items():
        info = site / f"{name.replace('-', '_')}-{ver}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {ver}\n")
        (info / "INSTALLER").write_text("runtime\n")
        (info / "RECORD").write_text("")
    return path / "bin" / "python"


def _install_into(python: Path, requirements: list[str], tmp_path: Path) -> dict[str, str]:
    """What ``pip install REQUIREMENTS`` would install into the environment of
    ``python`` (pip's resolver: requirements its installed libraries satisfy stay)."""
    rc, report, err = _pip_report(requirements, tmp_path, python)
    assert rc == 0, err[-3000:]
    return _installs(report)


def _requires_python(wheel: str) -> str:
    import zipfile

    with zipfile.ZipFile(wheel) as zf:
        meta = zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA")))
    return next(line.split(":", 1)[1].strip() for line in meta.decode().splitlines()
                if line.startswith("Requires-Python:"))


@pytest.mark.parametrize("runtime", list(RUNTIMES))
def test_plain_wheel_keeps_every_runtimes_libraries(runtime, tmp_path):
    """Installed where the runtime's libraries are (pip sees them as installed, as it does
    on the runtime), the plain wheel installs alone, and the runtime's Python is allowed.
    (The runtimes' Python 3.12 builds of pandas 1.5.3 are Databricks' own: PyPI has
    none, so the libraries cannot be downloaded for the check, only declared.)"""
    from packaging.specifiers import SpecifierSet

    python, pins = RUNTIMES[runtime]
    wheel = _wheel()
    assert python in SpecifierSet(_requires_python(wheel)), runtime
    env = _runtime_env(tmp_path / "runtime", pins)
    assert _install_into(env, [wheel], tmp_path) == {"vmi-spark": "0.1.0"}, runtime


def test_the_runtime_check_finds_a_change(tmp_path):
    """The check above can fail: the bounds before issue 34 (numpy >= 1.24, pandas >= 2,
    pyarrow >= 15) would have pip replace 14.3 LTS's numpy, pandas and pyarrow."""
    _, pins = RUNTIMES["14.3 LTS"]
    env = _runtime_env(tmp_path / "runtime", pins)
    got = _install_into(env, ["numpy>=1.24", "pandas>=2.0,<3", "pyarrow>=15"], tmp_path)
    assert {"numpy", "pandas", "pyarrow"} <= set(got), got
    assert all(got[k] != pins[k] for k in ("numpy", "pandas", "pyarrow")), got


@pytest.fixture(scope="module")
def spark4(tmp_path_factory):
    """Spark 4's side: ``VMI_SPARK4_DIR`` (data.parquet, spark4.json), or computed now
    with ``VMI_SPARK4_PYTHON`` (a Python with PySpark 4 and this package)."""
    base = os.environ.get("VMI_SPARK4_DIR")
    if not base:
        py = os.environ.get("VMI_SPARK4_PYTHON")
        if not py:
            pytest.skip("needs Spark 4's side: run tests/run_tiers.sh spark35")
        base = str(tmp_path_factory.mktemp("spark4"))
        env = {**os.environ, "PYSPARK_PYTHON": py, "PYTHONPATH": str(ROOT)}
        subprocess.run([py, str(ROOT / "tests" / "spark_matrix.py"), base], env=env,
                       check=True, timeout=1800, capture_output=True)
    with open(os.path.join(base, "spark4.json")) as fh:
        res = json.load(fh)
    assert res["spark"].startswith("4."), res["spark"]
    return base, res


@pytest.mark.parametrize("method", sm.METHODS)
def test_job_matrix_is_spark4s_bit_for_bit(spark, spark4, method, tmp_path):
    """The job on the Parquet input, every execution and both readers: the paths asked
    for ran, and every selection is Spark 4's to the bit."""
    base, res = spark4
    got = sm.job_runs(os.path.join(base, "data.parquet"), str(tmp_path), methods=(method,))
    for key, run in got.items():
        _, execution, reader = key.split("/")
        assert "rc" not in run, f"{key}: exit status {run.get('rc')}"
        assert (run["execution"], run["reader"]) == \
            (execution, "pyarrow" if reader == "auto" else "spark"), key
        assert sm.bits(run) == sm.bits(res["jobs"][key]), key
        assert run["warnings"] == res["jobs"][key]["warnings"], key
    assert len(got) == len(sm.EXECUTIONS) * len(sm.READERS)


def test_estimator_is_spark4s(spark, spark4, tmp_path):
    """VMISelector on 3.5: fit, save, overwrite, load, transform; its own save and load;
    a Pipeline over a vector column saved, loaded and applied: Spark 4's results."""
    base, res = spark4
    got = sm.estimator_runs(spark, os.path.join(base, "data.parquet"), str(tmp_path / "ml"))
    assert got == res["estimator"]
    assert got["columns"]["fitted"] and got["columns"]["uid"] and got["estimator"]["uid"]


def test_demo_under_spark_submit(spark4, tmp_path):
    """``spark-submit jobs/select_features.py`` (the README's first command) with 3.5's
    spark-submit prints Spark 4's demo selection and bounds."""
    _, res = spark4
    submit = Path(sys.executable).parent / "spark-submit"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([str(submit), "--master", "local[2]",
                           str(ROOT / "jobs" / "select_features.py")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = re.findall(r"^\s+(\d+)\s+(\S+)\s+([0-9.]+)\s+(\d+)$", proc.stdout, re.M)
    demo = res["demo"]
    assert [r[1] for r in rows] == demo["selected"]
    assert [r[2] for r in rows] == [f"{float.fromhex(s):.6f}" for s in demo["scores"]]
    assert [int(r[3]) for r in rows] == demo["blocks"]
    assert "WARNING" not in proc.stderr, proc.stderr[-2000:]  # no 3.5 library noise


# -- Spark Connect: a 3.5 client against a Spark 4 server ----------------------------------

_SERVER = textwrap.dedent('''
    import os, sys, time
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("vmi_spark connect server")
             .config("spark.ui.enabled", "false")
             .config("spark.plugins", "org.apache.spark.sql.connect.SparkConnectPlugin")
             .config("spark.connect.grpc.binding.address", "127.0.0.1")
             .config("spark.connect.grpc.binding.port", "0").getOrCreate())
    service = getattr(spark.sparkContext._jvm,
                      "org.apache.spark.sql.connect.service.SparkConnectService$")
    with open(sys.argv[1] + ".tmp", "w") as fh:
        fh.write(str(getattr(service, "MODULE$").localPort()))
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    while os.path.exists(sys.argv[1]):
        time.sleep(0.5)
    spark.stop()
''')

_CLIENT = textwrap.dedent('''
    import json, os, sys, warnings

    sys.path.insert(0, sys.argv[4])
    import spark_matrix as sm

    url, base, out = sys.argv[1], sys.argv[2], sys.argv[3]
    data = os.path.join(base, "data.parquet")
    res = {"jobs": sm.job_runs(data, os.path.join(out, "jobs"), methods=sm.METHODS[:3],
                               executions=("driver", "passes"), readers=("auto", "spark"),
                               extra=("--remote", url))}
    from pyspark.errors.exceptions.connect import AnalysisException
    from pyspark.ml import Pipeline
    from pyspark.ml.functions import array_to_vector
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from vmi_spark import VMISelector, VMISelectorModel

    spark = SparkSession.builder.remote(url).getOrCreate()
    res["client"] = type(spark).__module__
    df = spark.read.parquet(data)
    sel = VMISelector(inputCols=sm.FEATURES, labelCol="y", numTopFeatures=sm.K,
                      method="vmi_pairwise")
    model = sel.fit(df)
    path = os.path.join(out, "model")
    model.write().save(path)
    model.write().overwrite().save(path)
    loaded = VMISelectorModel.load(path)
    sel.write().save(os.path.join(out, "estimator"))
    again = VMISelector.load(os.path.join(out, "estimator"))
    # the vector column as VectorAssembler(handleInvalid="keep") makes it: 3.5's
    # VectorAssembler needs the JVM (none under Connect); array_to_vector does not
    cells = [F.coalesce(F.col(c).cast("double"), F.lit(float("nan"))) for c in sm.NUMERIC]
    vec = df.withColumn("v", array_to_vector(F.array(*cells)))
    pm = Pipeline(stages=[VMISelector(featuresCol="v", labelCol="y", numTopFeatures=3,
                                      method="cmim", outputCol="sel")]).fit(vec)
    res["estimator"] = {"selected": loaded.selectedFeatureNames,
                        "scores": sm.hexed(loaded.scores), "uid": loaded.uid == model.uid,
                        "transform": loaded.transform(df).columns,
                        "again": [again.getMethod(), again.uid == sel.uid],
                        "pipeline": [pm.stages[-1].selectedFeatureNames,
                                     sm.hexed(pm.stages[-1].scores)],
                        "pipeline_rows": pm.transform(vec).count()}

    # serverless, emulated: the client refuses to cache, as serverless compute does
    from pyspark.sql.connect.dataframe import DataFrame

    def refuse(self, *args, **kwargs):
        raise AnalysisException(  # 3.5's: a message, or an error class and parameters
            message="[NOT_SUPPORTED_WITH_SERVERLESS] PERSIST TABLE is not supported on "
                    "serverless compute. SQLSTATE: 0A000")

    for name in ("persist", "cache", "checkpoint", "localCheckpoint"):
        setattr(DataFrame, name, refuse)
    from vmi_spark.spark.select import run_selection

    staging = os.path.join(out, "staging")
    os.makedirs(staging)
    res["serverless"] = {}
    for name, kw in (("staged", {"staging_dir": staging}), ("recomputed", {})):
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            rep = run_selection(df, "y", num_features=sm.K, method="mrmr",
                                execution="passes", **kw).report()
        res["serverless"][name] = {**sm.selection(rep), "left": sorted(os.listdir(staging))}
    with open(os.path.join(out, "connect.json"), "w") as fh:
        json.dump(res, fh, default=lambda v: v.item())  # numpy scalars of a report()
''')


@pytest.fixture(scope="module")
def connect35(spark4, tmp_path_factory):
    """The client side's results (``_CLIENT`` in a fresh 3.5 interpreter) against a Spark 4
    Connect server on an ephemeral loopback port (``_SERVER`` under ``VMI_SPARK4_PYTHON``;
    no authentication token: the 3.5 client sends one only over TLS)."""
    py = os.environ.get("VMI_SPARK4_PYTHON")
    if not py:
        pytest.skip("needs VMI_SPARK4_PYTHON (Spark 4) for the Connect server")
    base, _ = spark4
    work = tmp_path_factory.mktemp("connect35")
    portfile = work / "port"
    env4 = {**os.environ, "PYSPARK_PYTHON": py, "PYTHONPATH": str(ROOT)}
    for key in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "PYSPARK_GATEWAY_PORT"):
        env4.pop(key, None)
    server = subprocess.Popen([py, "-c", _SERVER, str(portfile)], env=env4, cwd=work,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        import time

        deadline = time.monotonic() + 600
        while not portfile.exists():
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the Spark 4 Connect server did not start: "
                            f"{(server.stderr.read() if server.stderr else '')[-3000:]}")
            time.sleep(0.5)
        url = f"sc://127.0.0.1:{portfile.read_text().strip()}"
        env = {k: v for k, v in env4.items()}
        env.update(PYSPARK_PYTHON=sys.executable)
        out = work / "out"
        out.mkdir()
        proc = subprocess.run([sys.executable, "-c", _CLIENT, url, base, str(out),
                               str(ROOT / "tests")], env=env, cwd=work, capture_output=True,
                              text=True, timeout=1800)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
        return json.loads((out / "connect.json").read_text())
    finally:
        portfile.unlink(missing_ok=True)
        try:
            server.wait(timeout=120)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def test_connect_35_client_job_is_spark4s(connect35, spark4):
    """The job as a 3.5 Connect client (``--remote sc://...``): the driver and the passes,
    both readers asked for (under Connect Spark's reader reads), Spark 4's bits."""
    _, res = spark4
    assert connect35["client"].startswith("pyspark.sql.connect")
    for key, run in connect35["jobs"].items():
        method, execution, _ = key.split("/")
        assert "rc" not in run, f"{key}: exit status {run.get('rc')}"
        assert (run["execution"], run["reader"]) == (execution, "spark"), key
        assert sm.bits(run) == sm.bits(res["jobs"][f"{method}/passes/spark"]), key
    assert len(connect35["jobs"]) == 3 * 2 * 2


def test_connect_35_client_estimator_is_spark4s(connect35, spark4):
    """Fit, save, overwrite, load and transform under a 3.5 Connect client, the
    estimator's own save and load, a Pipeline over a vector column fit and applied:
    Spark 4's selections. (PySpark 3.5's Pipeline persistence and its VectorAssembler
    need the JVM: not under Connect.)"""
    _, res = spark4
    got, want = connect35["estimator"], res["estimator"]
    assert [got["selected"], got["scores"]] == [want["columns"]["selected"],
                                                 want["columns"]["scores"]]
    assert got["uid"] and got["transform"] == want["columns"]["transform"]
    assert got["again"] == ["vmi_pairwise", True]
    # array_to_vector gives no ML attributes: the elements are named v[i]
    names = [sm.NUMERIC[int(re.fullmatch(r"v\[(\d+)\]", n).group(1))]
             for n in got["pipeline"][0]]
    assert [names, got["pipeline"][1]] == [want["pipeline"]["selected"],
                                           want["pipeline"]["scores"]]
    assert got["pipeline_rows"] == sm.ROWS


def test_connect_35_client_serverless_is_spark4s(connect35, spark4):
    """Caching refused (serverless): a staging copy (removed after) or recomputation per
    pass, with the note saying which; Spark 4's bits."""
    _, res = spark4
    for name, how in (("staged", "staging"), ("recomputed", "recompute")):
        run = connect35["serverless"][name]
        assert run["storage"] == how and run["execution"] == "passes", name
        assert sm.bits(run) == sm.bits(res["jobs"]["mrmr/passes/spark"]), name
        assert run["left"] == [], name
        assert any("cannot cache" in w for w in run["warnings"]), run["warnings"]
