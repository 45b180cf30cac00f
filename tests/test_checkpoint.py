"""Resumable runs (--checkpoint-dir): a killed run resumes to the uninterrupted result."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from helpers import random_discrete
from vmi_spark.checkpoint import FILE_NAME
from vmi_spark.errors import InputError
from vmi_spark.spark.select import run_selection

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def frame(spark):
    pdf = random_discrete(5, n=600, d=14, states=4, classes=3)
    pdf["noise"] = np.random.default_rng(1).normal(size=len(pdf))
    return spark.createDataFrame(pdf).repartition(3)


class Killed(Exception):
    pass


def _kill_after(k):
    def on_step(sel):
        if len(sel.selected) == k:
            raise Killed
    return on_step


@pytest.mark.parametrize("method", ["vmi_naive", "vmi_pairwise", "mrmr"])
def test_resumed_run_equals_uninterrupted_run(frame, tmp_path, method):
    full = run_selection(frame, "y", method=method, num_features=8).selection
    ckpt = tmp_path / "ck"
    with pytest.raises(Killed):
        run_selection(frame, "y", method=method, num_features=8, checkpoint_dir=str(ckpt),
                      on_step=_kill_after(4))
    saved = json.loads((ckpt / FILE_NAME).read_text())
    assert saved["selected"] == full.selected[:4]
    steps = []
    run = run_selection(frame, "y", method=method, num_features=8, checkpoint_dir=str(ckpt),
                        on_step=lambda sel: steps.append(len(sel.selected)))
    assert steps == [5, 6, 7, 8]  # only the missing steps ran
    got = run.selection
    assert (got.selected, got.scores, got.gains, got.blocks, got.restarts) == (
        full.selected, full.scores, full.gains, full.blocks, full.restarts)
    assert any("resumed from the checkpoint after step 4" in w for w in run.warnings)


def test_checkpoint_of_another_run_is_refused(frame, spark, tmp_path):
    ckpt = str(tmp_path / "ck")
    run_selection(frame, "y", num_features=3, checkpoint_dir=ckpt)
    with pytest.raises(InputError, match="different input or different parameters"):
        run_selection(frame, "y", num_features=3, num_bins=4, checkpoint_dir=ckpt)
    with pytest.raises(InputError, match="different input or different parameters"):
        run_selection(frame, "y", num_features=3, method="vmi_pairwise", checkpoint_dir=ckpt)
    other = frame.limit(500)
    with pytest.raises(InputError, match="different input or different parameters"):
        run_selection(other, "y", num_features=3, checkpoint_dir=ckpt)


def test_corrupt_checkpoint_is_a_clear_error_not_code(frame, tmp_path):
    ckpt = tmp_path / "ck"
    ckpt.mkdir()
    # a pickle payload: must be rejected as unreadable JSON, never executed
    (ckpt / FILE_NAME).write_bytes(b"cos\nsystem\n(S'touch " + str(tmp_path / "pwned").encode()
                                   + b"'\ntR.")
    with pytest.raises(InputError, match="cannot read the checkpoint"):
        run_selection(frame, "y", num_features=3, checkpoint_dir=str(ckpt))
    assert not (tmp_path / "pwned").exists()


def test_kill_9_of_spark_submit_then_rerun_resumes(spark, tmp_path):
    """kill -9 of the driver mid-selection; the same command again ends with the same report."""
    spark_submit = Path(sys.executable).parent / "spark-submit"
    if not spark_submit.exists():
        pytest.skip("spark-submit not on the virtual environment's path")
    pdf = random_discrete(7, n=3000, d=24, states=4, classes=2)
    data = tmp_path / "t.parquet"
    pdf.to_parquet(data)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               PYTHONPATH=str(ROOT))
    ckpt, out = tmp_path / "ck", tmp_path / "out"
    cmd = [str(spark_submit), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
           str(ROOT / "jobs" / "select_features.py"), "--input", str(data), "--label", "y",
           "--method", "vmi_pairwise", "--num-features", "12", "--output", str(out),
           "--checkpoint-dir", str(ckpt), "--quiet"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    done_before = 0
    try:
        deadline = time.time() + 400
        while time.time() < deadline and proc.poll() is None:
            f = ckpt / FILE_NAME
            if f.exists():
                done_before = len(json.loads(f.read_text())["selected"])
                if done_before >= 2:
                    break
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the driver and its Python child, no cleanup
        proc.wait()
    assert 2 <= done_before < 12, "the run was not caught mid-selection"
    assert not (out / "selection.json").exists()  # nothing written by the killed run
    rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=400)
    assert rerun.returncode == 0, rerun.stdout[-2000:] + rerun.stderr[-2000:]
    rep = json.loads((out / "selection.json").read_text())
    full = run_selection(spark.createDataFrame(pdf), "y", method="vmi_pairwise",
                         num_features=12).report()
    assert rep["selected"] == full["selected"]
    assert rep["blocks"] == full["blocks"]
    assert rep["scores"] == full["scores"]
    assert any("resumed from the checkpoint" in w for w in rep["warnings"])
