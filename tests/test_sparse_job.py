"""The job's ``--features`` on a wide sparse vector column (issue 47): the estimator's route
(the non-zeros path), its report naming the elements, against the estimator's answer and
the job's dense path on the same vectors densified; the plan's estimate of memory and time
(its arithmetic against a hand computation, in the log and the report) and its refusal in
one line naming the parameter to change, before a row is read; the sparse path's label
checks are the planning's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_sparse import _table

from vmi_spark.core import sparse as sp

ROOT = Path(__file__).resolve().parents[1]
WIDTH = 10_000  # the real threshold: no patching of SPARSE_MIN_WIDTH


def test_estimate_arithmetic_by_hand():
    """The estimate's formulas, computed here by hand for D = 2^18, N = 10^5, Z = 3.3M,
    A = 3, L = 2, K = 10, P = 4 partitions on 2 cores."""
    base = 200 * 2**20  # a Python process before any table: 209,715,200
    est = sp.estimate(262_144, 100_000, 3_300_000, 3, 2, 10, "mrmr", 4, 2)
    # cached codes: 9 bytes a non-zero + 4 a row
    assert est.chunk_bytes == 9 * 3_300_000 + 4 * 100_000 == 30_100_000
    # one worker's partition of 825,000 non-zeros: the base and the larger of its reading
    # (18 bytes a code, 72 a distinct value cell, before reading min(825,000, D A =
    # 786,432), a batch of 8,192 rows of 33 non-zeros at 1000 + 200 * 33 bytes) and a
    # step's task (100 bytes a code)
    assert est.task_bytes == base + max(18 * 825_000 + 72 * 786_432 + 8_192 * 7_600,
                                        100 * 825_000) == base + 133_732_304
    # before reading, the first pass's results: 24 * min(3.3M, 4 * 262,144 * 3 = 3,145,728)
    assert est.result_bytes == 75_497_472
    # the driver: the base; the (D, A, L) table 8 * 1,572,864 = 12,582,912; 8 pair tables
    # of 8 * 4,718,592 bytes = 301,989,888; the results held: 75,497,472
    assert est.driver_bytes == base + 12_582_912 + 301_989_888 + 75_497_472 == 599_785_472
    # reading: 2 passes of (100us * 1e5 + 8us * 3.3e6) = 2 * 36.4 s on one core, 36.4 on 2
    assert est.read_seconds == pytest.approx(36.4)
    # 10 steps of 1.1us * 3.3e6 / 2 + 200ns * 4,718,592 = 1.815 + 0.9437184 s
    assert est.step_seconds == pytest.approx(10 * (1.815 + 0.9437184))
    # after the first pass, from each partition's (non-zeros, distinct values): the table
    # jobs' 16 * 4 * min(825,000, 200,000 * L 2 * A 3) = 52.8M beat the first pass's
    # 24 * 4 * 200,000 = 19.2M; the partitions' small C_p bound the results tighter
    parts = [(825_000, 200_000)] * 4
    after = sp.estimate(262_144, 100_000, 3_300_000, 3, 2, 10, "mrmr", 4, 2, cells=parts)
    assert after.result_bytes == 16 * 4 * 825_000 == 52_800_000
    # the reading's 18 * 825,000 + 72 * 200,000 + 8,192 * 7,600 = 91,509,200 beats the
    # step's 100 * 825,000 = 82.5M
    assert after.task_bytes == base + 14_850_000 + 14_400_000 + 62_259_200
    assert after.driver_bytes == base + 12_582_912 + 301_989_888 + 52_800_000
    few = sp.estimate(262_144, 100_000, 3_300_000, 3, 2, 10, "mrmr", 4, 2,
                      cells=[(825_000, 50_000)] * 4)
    assert few.result_bytes == max(24 * 200_000, 16 * 4 * 300_000) == 19_200_000
    mim_after = sp.estimate(262_144, 100_000, 3_300_000, 3, 2, 10, "mim", 4, 2, cells=parts)
    assert mim_after.result_bytes == max(24 * 800_000, 16 * 4 * 400_000) == 25_600_000
    # mim counts no pair table: one job for the (D, A, L) table
    mim = sp.estimate(262_144, 100_000, 3_300_000, 3, 2, 10, "mim", 4, 2)
    assert mim.driver_bytes == base + 12_582_912 + 75_497_472
    assert mim.step_seconds == pytest.approx(1.815 + 200e-9 * 1_572_864)
    # the bound on the screened 256 MiB / 1e5 = 2,684 elements: their codes thrice
    vmi = sp.estimate(262_144, 100_000, 3_300_000, 3, 2, 10, "vmi_naive", 4, 2)
    assert vmi.screened == (256 << 20) // 100_000 == 2_684
    assert vmi.driver_bytes == base + 12_582_912 + 75_497_472 + 3 * 2_684 * 100_000
    assert vmi.step_seconds == pytest.approx(1.815 + 200e-9 * 1_572_864
                                             + 10 * 10e-9 * 2_684 * 100_000)


def test_check_estimate_refuses_in_one_line_naming_the_parameter():
    import vmi_spark.params  # noqa: F401 - the parameters' names in each front end
    from vmi_spark.errors import InputError, ParameterError

    est = sp.estimate(262_144, 100_000, 3_300_000, 3, 2, 10, "mrmr", 4, 2)
    sp.check_estimate(est, est.driver_bytes, est.result_bytes, 2 * est.result_bytes)  # fits
    with pytest.raises(ParameterError) as err:
        sp.check_estimate(est, est.driver_bytes - 1, None, None)
    assert err.value.key == "max_categories"
    text = err.value.phrase("cli")
    assert "\n" not in text and "lower --max-categories" in text and "572.0 MiB" in text
    assert "262,144 x 3 x 3 x 2 pair tables" in text
    with pytest.raises(InputError, match="raise spark.driver.maxResultSize$"):
        sp.check_estimate(est, None, est.result_bytes - 1, None)
    with pytest.raises(InputError, match=r"raise spark.driver.memory \(--driver-memory\)$"):
        sp.check_estimate(est, None, None, 2 * est.result_bytes - 2)


def _frames(spark, tmp_path):
    """The same rows as a sparse and as a dense vector column, written as Parquet."""
    from pyspark.ml.linalg import Vectors

    y, row, el, val, dense = _table(300, WIDTH, seed=11)
    sparse_rows = [(int(y[r]), Vectors.sparse(WIDTH, {int(i): float(v) for i, v in
                                                      zip(el[row == r], val[row == r])}))
                   for r in range(300)]
    sdf = spark.createDataFrame(sparse_rows, ["y", "features"]).repartition(3)
    spath = str(tmp_path / "sparse.parquet")
    sdf.write.parquet(spath)
    dpath = str(tmp_path / "dense.parquet")
    spark.createDataFrame([(int(y[r]), Vectors.dense(dense[r])) for r in range(300)],
                          ["y", "features"]).write.parquet(dpath)
    return spath, dpath, int(len(el))


def test_job_features_sparse_vector_takes_the_estimators_route(spark, tmp_path, capsys):
    """``--features features`` on a 10,000-element sparse vector: the non-zeros path, the
    estimator's selection and scores, the dense path's on the same vectors densified,
    the elements named in selection.json and report.md, the estimate in the log and the
    report."""
    from vmi_spark import VMISelector
    from vmi_spark.job import main

    spath, dpath, nnz = _frames(spark, tmp_path)
    common = ["--label", "y", "--features", "features", "--method", "mrmr",
              "--num-features", "6"]
    assert main(["--input", spath, *common, "--output", str(tmp_path / "s")],
                spark=spark) == 0
    logged = [ln for ln in capsys.readouterr().err.splitlines() if "sparse plan" in ln]
    assert main(["--input", dpath, *common, "--output", str(tmp_path / "d")],
                spark=spark) == 0
    got = json.loads((tmp_path / "s" / "selection.json").read_text())
    dense = json.loads((tmp_path / "d" / "selection.json").read_text())
    model = VMISelector(labelCol="y", method="mrmr", numTopFeatures=6).fit(
        spark.read.parquet(spath))
    assert got["execution"] == "sparse" and dense["execution"] != "sparse"
    assert got["selected"] == model.report["selected"] == dense["selected"]
    assert got["selected"] == [f"features[{i}]" for i in model.selectedFeatures]
    assert got["scores"] == model.scores == dense["scores"]
    assert {"features[5]", "features[9]"} <= set(got["selected"][:3])
    # the estimate: before reading from the footers (exact rows and non-zeros), then exact
    est = got["sparse"]["estimate"]
    assert est["before_reading"]["from"] == "the Parquet footers"
    assert est["before_reading"]["rows"] == 300 and est["before_reading"]["non_zeros"] == nnz
    after = est["after_first_pass"]
    assert (after["rows"], after["non_zeros"], after["width"]) == (300, nnz, WIDTH)
    parts = [tuple(c) for c in est["partition_cells"]]
    assert sum(z for z, _ in parts) == nnz and len(parts) == after["partitions"]
    want = sp.estimate(WIDTH, 300, nnz, got["sparse"]["states"], 3, 6, "mrmr",
                       after["partitions"], after["cores"], cells=parts)
    assert after == want.fields()
    assert len(logged) == 2 and "INFO vmi_spark: sparse plan (from the Parquet footers): " \
        f"mrmr on 300 rows x 10,000 elements, {nnz:,} non-zeros" in logged[0]
    report_md = (tmp_path / "s" / "report.md").read_text()
    assert "| 1 | features[" in report_md and "## Sparse input" in report_md
    assert "bytes in the driver's Python" in report_md


def test_job_refuses_what_the_sparse_route_does_not_do(spark, tmp_path, capsys):
    from vmi_spark.job import main

    spath, _, _ = _frames(spark, tmp_path)
    base = ["--input", spath, "--label", "y", "--features", "features", "--num-features", "3"]
    cases = [(["--exclude", "features[5]"], "--exclude is not supported for a wide sparse"),
             (["--estimator", "kde"], "--estimator is not supported for a wide sparse"),
             (["--write-selected", str(tmp_path / "w")], "--write-selected drops unselected")]
    for i, (extra, start) in enumerate(cases):
        assert main([*base, *extra, "--output", str(tmp_path / f"o{i}")], spark=spark) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"select_features: error: {start}") and "\n" not in err
        assert not (tmp_path / f"o{i}").exists()


def test_job_refuses_before_reading_when_the_driver_cannot_hold_the_tables(
        spark, tmp_path, capsys, set_limits):
    """The estimate before reading exceeds the driver's memory: exit 2, one line naming
    --max-categories, and no pass over the rows (no estimate from the first pass)."""
    from vmi_spark.job import main

    spath, _, _ = _frames(spark, tmp_path)
    # the limits (vmi_spark.core.limits): a driver of 1 MiB
    set_limits(driver_available_bytes=1 << 20)
    assert main(["--input", spath, "--label", "y", "--features", "features", "--method",
                 "jmi", "--output", str(tmp_path / "o")], spark=spark) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert "sparse plan (from the Parquet footers): jmi on 300 rows" in lines[0]
    err = lines[-1]
    assert len(lines) == 2 and err.startswith("select_features: error: a sparse jmi selection needs about ")
    assert not any("from the first pass" in ln for ln in lines)
    assert err.endswith("lower --max-categories (the states A of an element; elements of "
                        "more values are cut into --num-bins) or choose --method mim")
    assert "\n" not in err and not (tmp_path / "o").exists()


def test_spark_submit_refuses_past_max_result_size(spark, tmp_path):
    """A cold spark-submit whose tables' task results cannot fit
    spark.driver.maxResultSize: exit 2, one line, no traceback, no output."""
    submit = Path(sys.executable).parent / "spark-submit"
    if not submit.exists():
        pytest.skip("spark-submit not on the virtual environment's path")
    spath, _, _ = _frames(spark, tmp_path)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    out = tmp_path / "o"
    proc = subprocess.run(
        [str(submit), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
         "--conf", "spark.ui.showConsoleProgress=false",
         "--conf", "spark.driver.maxResultSize=16k", str(ROOT / "jobs" / "select_features.py"),
         "--input", spath, "--label", "y", "--features", "features", "--num-features", "3",
         "--output", str(out), "--quiet"],
        capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    both = proc.stderr + proc.stdout  # the job prints to stderr; spark-submit may move it
    lines = [ln for ln in both.splitlines() if "select_features: error:" in ln]
    assert len(lines) == 1 and lines[0].endswith("raise spark.driver.maxResultSize"), \
        proc.stderr[-3000:] + proc.stdout[-3000:]
    assert "Traceback" not in both and not out.exists()


@pytest.mark.parametrize("labels, planned", [
    ([1] * 40, "single"), (list(range(40)), "continuous")])
def test_sparse_label_checks_are_the_plannings(spark, labels, planned):
    """One class: planning.label_classes's own line; a numeric label of 40 values: the
    planning's decision (continuous), refused naming labelType."""
    from pyspark.ml.linalg import Vectors

    from vmi_spark import VMISelector
    from vmi_spark.core.planning import INTEGER, LabelDecision, label_classes
    from vmi_spark.errors import InputError, ParameterError

    df = spark.createDataFrame([(y, Vectors.sparse(WIDTH, [r % 50, 100 + r % 7], [1.0, 2.0]))
                                for r, y in enumerate(labels)], ["y", "features"])
    with pytest.raises(InputError) as err:
        VMISelector(labelCol="y", method="mim", numTopFeatures=2).fit(df)
    if planned == "single":
        with pytest.raises(InputError) as want:
            label_classes("y", LabelDecision("categorical", ""), [1], INTEGER, 1000)
        assert str(err.value) == str(want.value)
    else:
        assert isinstance(err.value, ParameterError) and err.value.key == "label_type"
        assert str(err.value).endswith("set labelType categorical")
        model = VMISelector(labelCol="y", method="mim", numTopFeatures=2,
                            labelType="categorical").fit(df)
        assert model.report["num_classes"] == 40


def test_batched_reading_gives_the_whole_partitions_counts_and_codes():
    """The workers' batches (here 7 rows) give the value cells and the codes of the
    partition read whole (Spark-free: the worker functions called here)."""
    pytest.importorskip("pyspark")
    from types import SimpleNamespace

    from pyspark.ml.linalg import Vectors

    from vmi_spark.spark.sources import sparse_vectors as sv

    y, row, el, val, _ = _table(60, 40, seed=12)
    rows = [(int(y[r]), Vectors.sparse(40, {int(i): float(v) for i, v in
                                            zip(el[row == r], val[row == r])}))
            for r in range(60)]
    rows[3] = (None, rows[3][1])  # an unlabelled row: not counted, not coded
    whole = sv.partition_stats(iter(rows))[0]
    plan = sp.element_plan(40, 59, whole[4], 32, 10)
    bc = SimpleNamespace(value=plan)
    want = next(sv.encoder(bc, [0, 1, 2])(iter(rows)))
    got = sv.partition_stats(iter(rows), batch_rows=7)[0]
    assert got[0] == whole[0] and got[5] == whole[5] == 1 and got[6] == whole[6]
    for a, b in zip(got[4], whole[4]):
        assert np.array_equal(a, b)
    chunk = next(sv.encoder(bc, [0, 1, 2], batch_rows=7)(iter(rows)))
    for f in ("y", "row", "element", "code"):
        assert np.array_equal(getattr(chunk, f), getattr(want, f)), f
    assert chunk.num_rows == 59 and chunk.row.max() == 58


def test_job_sparse_stability_and_checkpoint_as_the_dense_job(spark, tmp_path):
    """``--stability`` and ``--checkpoint-dir`` on a 10,000-element sparse vector (the
    real threshold): the job writes the dense job's stability section, suspects and
    selection on the same vectors densified (and ``stability.png``), and a second run
    over the same checkpoint resumes from it to the same selection."""
    from vmi_spark.job import main

    spath, dpath, _ = _frames(spark, tmp_path)
    common = ["--label", "y", "--features", "features", "--method", "mrmr",
              "--num-features", "4", "--stability", "2"]
    ckpt = str(tmp_path / "ckpt")
    assert main(["--input", spath, *common, "--checkpoint-dir", ckpt,
                 "--output", str(tmp_path / "s")], spark=spark) == 0
    assert main(["--input", dpath, *common, "--output", str(tmp_path / "d")],
                spark=spark) == 0
    got = json.loads((tmp_path / "s" / "selection.json").read_text())
    dense = json.loads((tmp_path / "d" / "selection.json").read_text())
    assert got["execution"] == "sparse" and dense["execution"] != "sparse"
    assert got["selected"] == dense["selected"] and got["suspects"] == dense["suspects"]
    for s in (got, dense):
        del s["stability"]["run_seconds"]
    assert got["stability"] == dense["stability"] and got["stability"]["runs"] == 2
    assert (tmp_path / "s" / "stability.png").is_file()
    assert "| suspects checked | leak over every element |" in \
        (tmp_path / "s" / "report.md").read_text()
    assert (Path(ckpt) / "vmi_checkpoint.json").is_file()
    assert main(["--input", spath, *common, "--checkpoint-dir", ckpt,
                 "--output", str(tmp_path / "s2")], spark=spark) == 0
    again = json.loads((tmp_path / "s2" / "selection.json").read_text())
    assert "resumed from the checkpoint after step 4" in again["warnings"]
    assert again["selected"] == got["selected"] and again["scores"] == got["scores"]
