"""Stability runs and ``--previous`` on Spark (issue 36).

The stability runs draw their half-samples over the cached blocks (no second read) and give
the in-memory runs on the same rows, bit for bit, for passes, resident tasks and the driver,
with and without row weights. The job writes them into selection.json, report.md and
stability.png, takes ``--weight-col``, and compares with ``--previous`` (exit 3 with
``--fail-on-change`` when the selected set changed; an unusable previous output is a
warning).
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from vmi_spark.job import main
from vmi_spark.sklearn import VMIFeatureSelector

K, RUNS, SEED = 3, 4, 11


def _table(seed: int = 1, n: int = 600) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    out = {f"x{j}": (y * (j < 3) + rng.integers(0, 3, n) * (rng.random(n) < 0.6)) % 3
           for j in range(6)}
    out["cont"] = rng.normal(size=n) + y
    out["w"] = rng.integers(0, 3, n).astype(np.int64)
    out["y"] = y
    return pd.DataFrame(out)


FEATURES = [f"x{j}" for j in range(6)] + ["cont"]


def _reference(weighted: bool) -> dict:
    t = _table()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sel = VMIFeatureSelector(n_features_to_select=K, stability=RUNS, stability_seed=SEED,
                                 method="vmi_pairwise").fit(
            t[FEATURES], t["y"].to_numpy(), sample_weight=t["w"].to_numpy() if weighted else None)
    return sel.stability_


@pytest.fixture(scope="module")
def parquet(spark, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("stability") / "t.parquet")
    spark.createDataFrame(_table()).repartition(2).write.parquet(path)
    return path


def _same(got: dict, want: dict) -> None:
    for key in ("runs", "seed", "fraction", "run_selections", "run_rows", "features", "index",
                "variance", "ci"):
        assert got[key] == want[key], key


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("execution", ["passes", "resident"])
def test_stability_runs_are_the_in_memory_runs(spark, parquet, execution, weighted):
    from vmi_spark.spark.select import run_selection

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = run_selection(spark.read.parquet(parquet), "y", features=FEATURES,
                               weight_col="w" if weighted else None, num_features=K,
                               method="vmi_pairwise", execution=execution, stability=RUNS,
                               stability_seed=SEED).report()
    assert report["execution"] == execution
    _same(report["stability"], _reference(weighted))
    assert "stability" in report["phase_seconds"]


@pytest.mark.driver_auto
def test_stability_runs_in_the_driver(spark, parquet):
    from vmi_spark import VMISelector

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = VMISelector(inputCols=FEATURES, labelCol="y", weightCol="w", numTopFeatures=K,
                            method="vmi_pairwise", stabilityRuns=RUNS,
                            stabilitySeed=SEED).fit(spark.read.parquet(parquet))
    assert model.report["execution"] == "driver"
    _same(model.stability, _reference(True))


def _job(spark, capsys, *argv):
    rc = main(list(argv), spark=spark)
    return rc, capsys.readouterr()


def test_job_weights_stability_and_previous(spark, parquet, capsys, tmp_path):
    week1, week2 = tmp_path / "w1", tmp_path / "w2"
    args = ["--input", parquet, "--label", "y", "--features", ",".join(FEATURES),
            "--num-features", str(K), "--method", "vmi_pairwise"]
    rc, _ = _job(spark, capsys, *args, "--output", str(week1), "--weight-col", "w",
                 "--stability", str(RUNS), "--stability-seed", str(SEED))
    assert rc == 0
    first = json.loads((week1 / "selection.json").read_text())
    _same(first["stability"], _reference(True))
    assert first["weights"]["column"] == "w" and first["input_rows"] == 600
    assert [c["name"] for c in first["input_schema"]["columns"]] == [*FEATURES[:6], "cont", "w",
                                                                     "y"]
    text = (week1 / "report.md").read_text()
    assert "## Stability" in text and "total weight (column `w`)" in text
    pytest.importorskip("matplotlib")
    assert (week1 / "stability.png").read_bytes()[:4] == b"\x89PNG"

    # the same week again: no change, exit 0 even with --fail-on-change
    rc, _ = _job(spark, capsys, *args, "--output", str(week2), "--weight-col", "w",
                 "--previous", str(week1), "--fail-on-change")
    assert rc == 0
    ch = json.loads((week2 / "selection.json").read_text())["changes"]
    assert ch["compared"] and not ch["selected_changed"] and ch["jaccard"] == 1.0
    assert ch["schema_changed"] is False and ch["rows_changed"] is False
    assert all(m["move"] == 0 for m in ch["rank_moves"])

    # without the weights the selection changes: reported, and exit 3 with --fail-on-change
    week3 = tmp_path / "w3"
    rc, cap = _job(spark, capsys, *args, "--features", "x3,x4,x5,cont", "--output", str(week3),
                   "--previous", str(week1), "--fail-on-change")
    assert rc == 3, cap.err
    assert "exit status 3 (--fail-on-change)" in cap.err
    report = json.loads((week3 / "selection.json").read_text())  # written before exit 3
    ch = report["changes"]
    before, now = set(first["selected"]), set(report["selected"])
    assert ch["selected_changed"] and set(ch["entered"]) == now - before
    assert set(ch["left"]) == before - now
    assert ch["jaccard"] == len(before & now) / len(before | now)
    assert "## Changes since the previous run" in (week3 / "report.md").read_text()


def test_an_unusable_previous_output_is_a_warning(spark, parquet, capsys, tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "selection.json").write_text('{"selected": ["x0", 3], "features": ["x0"]}')
    out = tmp_path / "out"
    rc, cap = _job(spark, capsys, "--input", parquet, "--label", "y", "--features", "x0,x1",
                   "--num-features", "1", "--output", str(out), "--previous", str(bad),
                   "--fail-on-change")
    assert rc == 0
    assert "--previous '" in cap.err and "not compared: 'selected' is not a list of names" \
        in cap.err
    ch = json.loads((out / "selection.json").read_text())["changes"]
    assert ch == {"previous": str(bad), "compared": False,
                  "reason": "'selected' is not a list of names"}
