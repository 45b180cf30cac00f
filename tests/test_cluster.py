"""The job on a real Spark standalone cluster (master + 2 workers on 127.0.0.1).

The daemons are started with docker/start-master.sh and docker/start-worker.sh, the same
scripts the compose services run, via vmi_spark.testing.cluster.SparkCluster. The job is
run with spark-submit against the cluster and in local mode; the reports must agree
(the selection is designed to be bit-identical whatever the partitioning).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers import GATED_JOB, gate_env, resume, wait_until_paused
from vmi_spark.testing.cluster import SparkCluster, find_spark_class

ROOT = Path(__file__).resolve().parents[1]
SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"

pytestmark = pytest.mark.skipif(find_spark_class() is None or not SPARK_SUBMIT.exists(),
                                reason="spark-class / spark-submit not installed")


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """400 rows: 8 discrete columns, one continuous, binary label depending on three."""
    rng = np.random.default_rng(6)
    n = 400
    data = {f"x{i}": rng.integers(0, 2 + i % 3, n) for i in range(8)}
    data["c"] = rng.normal(size=n)
    logit = 1.5 * data["x0"] - 1.0 * data["x3"] + 1.2 * data["c"] + 0.8 * (data["x5"] == 1)
    data["y"] = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype("int64")
    path = tmp_path_factory.mktemp("cluster-data") / "t.parquet"
    pd.DataFrame(data).to_parquet(path, engine="pyarrow", index=False)
    return path


@pytest.fixture(scope="module")
def cluster():
    with SparkCluster(num_workers=2, cores=1, memory="1g", scripts_dir=ROOT / "docker",
                      timeout=150) as c:
        yield c


def _submit_cmd(master: str, table: Path, out: Path, method: str, k: int = 4,
                execution: str = "auto", job: Path = ROOT / "jobs" / "select_features.py"
                ) -> tuple[list, dict]:
    """spark-submit of the job; the cluster runs ask for ``resident`` (``auto`` would select
    these small tables in the driver), the local ones take ``auto``'s choice."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               PYTHONPATH=str(ROOT), SPARK_LOCAL_IP="127.0.0.1")
    cmd = [str(SPARK_SUBMIT), "--master", master, "--conf", "spark.ui.enabled=false",
           "--conf", "spark.executor.memory=1g", "--conf", "spark.driver.host=127.0.0.1",
           "--conf", "spark.sql.shuffle.partitions=4",
           # executors are started by the workers, not by spark-submit: give them the repo
           "--conf", f"spark.executorEnv.PYTHONPATH={ROOT}",
           str(job), "--input", str(table), "--label", "y",
           "--num-features", str(k), "--method", method, "--output", str(out), "--quiet",
           "--execution", execution]
    return cmd, env


def _submit(master: str, table: Path, out: Path, method: str, execution: str = "auto") -> dict:
    cmd, env = _submit_cmd(master, table, out, method, execution=execution)
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    return json.loads((out / "selection.json").read_text())


@pytest.mark.parametrize("method", ["vmi_naive", "vmi_pairwise"])
def test_cluster_report_equals_local(cluster, table, tmp_path, method):
    before = len(cluster.master_state().get("completedapps", []))
    remote = _submit(cluster.master_url, table, tmp_path / "cluster", method, "resident")
    state = cluster.master_state()
    assert len(state.get("completedapps", [])) == before + 1  # it really ran on the cluster
    assert state["aliveworkers"] == 2

    local = _submit("local[2]", table, tmp_path / "local", method)

    assert remote["method"] == local["method"] == method
    assert remote["execution"] == "resident" and local["execution"] == "driver"
    assert remote["num_rows"] == local["num_rows"] == 400
    assert len(remote["selected"]) == 4
    for key in ("features", "selected", "selected_indices", "blocks", "restarts",
                "stopped_early", "columns"):
        assert remote[key] == local[key], key
    np.testing.assert_allclose(remote["scores"], local["scores"], rtol=0, atol=1e-9)
    np.testing.assert_allclose(remote["gains"], local["gains"], rtol=0, atol=1e-9)


@pytest.fixture(scope="module")
def wide_table(tmp_path_factory):
    """12,000 rows x 30 columns: enough steps to lose a worker in the middle of them."""
    rng = np.random.default_rng(8)
    n = 12_000
    y = rng.integers(0, 2, n)
    data = {f"x{i}": (rng.integers(0, 4, n) + (rng.random(n) < 0.1 + 0.01 * i) * y) % 4
            for i in range(30)}
    data["y"] = y
    path = tmp_path_factory.mktemp("cluster-wide") / "t.parquet"
    pd.DataFrame(data).to_parquet(path, engine="pyarrow", index=False)
    return path


# vmi_pairwise only: its resident tasks hold the most (the codes and the per-row pairwise
# state) and must rebuild both; vmi_naive's tasks hold the codes, the same mechanism (each
# case is a cluster and two spark-submits, about 100 s of the CI's 20 minutes)
@pytest.mark.parametrize("method", ["vmi_pairwise"])
def test_losing_a_worker_mid_selection_gives_the_same_report(wide_table, tmp_path, method):
    """SIGKILL of a worker and its executors mid-run: Spark recomputes, the answer is unchanged."""
    k = 10
    with SparkCluster(num_workers=2, cores=1, memory="1g", scripts_dir=ROOT / "docker",
                      timeout=150) as c:
        cmd, env = _submit_cmd(c.master_url, wide_table, tmp_path / "cluster", method, k,
                               execution="resident", job=GATED_JOB)
        cmd += ["--checkpoint-dir", str(tmp_path / "ck")]  # the gate is after a checkpoint
        gate = tmp_path / "gate"
        proc = subprocess.Popen(cmd, env=gate_env(env, gate, 2), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        paused = wait_until_paused(proc, gate)
        if not paused:
            proc.kill()
        assert paused, "the run did not pause after step 2: " + proc.communicate()[0][-4000:]
        c.kill_worker(2)
        resume(gate)
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, out[-6000:]
        assert c.master_state()["aliveworkers"] == 1
    remote = json.loads((tmp_path / "cluster" / "selection.json").read_text())
    assert any("resident tasks were lost" in w for w in remote["warnings"]), remote["warnings"]
    cmd, env = _submit_cmd("local[2]", wide_table, tmp_path / "local", method, k)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    local = json.loads((tmp_path / "local" / "selection.json").read_text())
    for key in ("selected", "blocks", "restarts", "scores", "gains"):
        assert remote[key] == local[key], key
