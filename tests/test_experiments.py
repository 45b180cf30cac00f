"""Tests of the experiment scaffolding (vmi_spark.experiments)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sklearn")
pytest.importorskip("scipy")

from vmi_spark.experiments import cv, paper, tree  # noqa: E402
from vmi_spark.experiments import datasets as D  # noqa: E402
from vmi_spark.experiments.__main__ import main  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DATA_DIR = REPO / ".." / "shared" / "datasets"
needs_data = pytest.mark.skipif(not (DATA_DIR / "raw").is_dir(), reason="../shared/datasets is absent")
# the eleven data sets under 200 KB each, copied into the repository (tests/data/README.md)
BUNDLED_DIR = Path(__file__).resolve().parent / "data" / "datasets"
BUNDLED = ["lung", "colon", "leukemia", "lymphoma", "splice", "landsat", "krvskp",
           "ionosphere", "semeion", "spambase", "promoter"]


@pytest.mark.parametrize("name", [n for n in D.NAMES if n != "gisette"])
def test_loader_shapes_match_sources(name):
    if (DATA_DIR / "raw").is_dir() and name in D.available(DATA_DIR):
        data_dir = DATA_DIR
    elif name in BUNDLED:
        data_dir = BUNDLED_DIR
    else:
        pytest.skip(f"{name} is not in tests/data and ../shared/datasets is absent")
    X, y, info = D.load(name, data_dir)
    n, d, L = D.SHAPES[name]
    assert X.shape == (n, d) and X.dtype == np.float64
    assert y.shape == (n,) and y.dtype == np.int64
    assert sorted(np.unique(y)) == list(range(L))
    assert (info["N"], info["d"], info["L"]) == (n, d, L)
    codes = D.discretize(X)
    assert codes.shape == (n, d) and codes.dtype == np.uint8
    assert codes.max() <= 4
    if name in D.ALREADY_DISCRETE:  # kept as they are, only recoded
        for j in range(0, d, max(1, d // 20)):
            assert len(np.unique(codes[:, j])) == len(np.unique(X[:, j]))


def test_available_lists_the_bundled_data_sets_in_paper_order():
    assert D.available(BUNDLED_DIR) == BUNDLED  # the order of D.NAMES (the paper's)
    with pytest.raises(FileNotFoundError):
        D.load("madelon", BUNDLED_DIR)


@needs_data
def test_available_skips_gisette():
    names = D.available(DATA_DIR)
    assert "gisette" not in names and len(names) == 16
    with pytest.raises(FileNotFoundError):
        D.load("gisette", DATA_DIR)


def test_discretize_equal_frequency():
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.normal(size=1000), rng.integers(0, 3, 1000) * 2.0 - 2, np.ones(1000)])
    c = D.discretize(X)
    assert np.bincount(c[:, 0]).tolist() == [200] * 5
    assert sorted(np.unique(c[:, 1])) == [0, 1, 2]
    assert np.all(c[:, 2] == 0)


def test_paper_table5_complete():
    assert len(paper.TABLE5) == 17 and set(paper.TABLE5) == set(D.NAMES)
    for row in paper.TABLE5.values():
        assert list(row) == paper.METHODS
    assert paper.TABLE5["lung"]["vmi_naive"] == (7.4, 3.6)
    assert paper.TABLE5["madelon"]["cife"] == (15.1, 2.7)
    for vmi in ("vmi_naive", "vmi_pairwise"):
        assert set(paper.WTL[vmi]) == set(paper.BASELINES)
        assert all(sum(v) == 17 for v in paper.WTL[vmi].values())


def test_exact_mi_matches_monte_carlo():
    exact = tree.exact_mi_table()
    for f in ("x1", "x2", "x4", "x8"):
        assert abs(exact[f] - tree.monte_carlo_mi(f, n=400_000, seed=1)) < 0.005
    # the paper's table is a 100,000-sample estimate of the same quantities
    assert np.allclose([exact[f] for f in tree.FEATURES], paper.SYNTHETIC_MI, atol=0.005)
    assert sorted(exact, key=lambda f: -exact[f])[:3] == ["x1", "x4", "x5"]


def test_spark_selector_matches_core_all_methods(spark):
    from vmi_spark.experiments.selectors import ALL_METHODS, core_selector, make_spark_selector

    rng = np.random.default_rng(3)
    y = rng.integers(0, 3, 200)
    codes = rng.integers(0, 5, (200, 7)).astype(np.uint8)
    codes[:, 4] = np.where(rng.random(200) < 0.8, y, 0)
    select = make_spark_selector(spark)
    for method in ALL_METHODS:
        assert select(codes, y, method, 3) == core_selector(codes, y, method, 3), method
    assert select.calls == len(ALL_METHODS) and select.spark() is spark
    assert select.plan_kinds <= {"category", "constant"}  # the codes are used as categories


def test_synthetic_on_spark(spark, tmp_path):
    rows = tree.run_selection_seeds(seeds=(0,), num_rows=2000, spark=spark, log=None)
    r = rows[0]
    assert set(r["vmi"]) == {"histogram", "kde"} and len(r["mim"]) == 9
    for v in r["vmi"].values():
        assert v["order"][0] == "x1" and len(v["blocks"]) == 9
    cont = tree.continuation(0, num_rows=2000, estimator="kde", spark=spark)
    assert cont["first_block_matches_spark"] and len(cont["cont_scores"]) == 9
    text = tree.report_markdown(rows, conts=[cont])
    assert "| seed |" in text and "new block at 4" in text
    png = tree.plot_bound([cont], str(tmp_path / "b.png"))
    assert Path(png).stat().st_size > 1000


def test_cv_evaluate_and_wtl_on_tiny_data():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 120)
    codes = rng.integers(0, 3, (120, 8)).astype(np.uint8)
    codes[:, 3] = np.where(rng.random(120) < 0.9, y, 1 - y)
    res = cv.evaluate("toy", codes, y, ["mim", "vmi_naive"], [1, 2], protocol="inside",
                      n_folds=2, log=None)
    assert res.fold_errors["mim"].shape == (2,) and res.k_errors["mim"].shape == (2, 2)
    back = cv.DatasetResult.from_json(res.to_json())
    assert np.allclose(back.fold_errors["mim"], res.fold_errors["mim"])
    assert res.mean_std("vmi_naive")[0] < 20
    assert cv.wtl(res, "vmi_naive", "mim") in "WTL"
    assert cv.k_grid(34) == list(range(10, 35)) and cv.k_grid(5) == [5]


def test_report_keeps_a_method_one_dataset_did_not_run():
    """A method missing from one dataset's run is "not run" in that row, not dropped
    from every row, and W/T/L counts only the datasets that ran both methods."""
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 120)
    codes = rng.integers(0, 3, (120, 6)).astype(np.uint8)
    codes[:, 2] = np.where(rng.random(120) < 0.9, y, 1 - y)
    full = cv.evaluate("promoter", codes, y, ["mim", "cife", "vmi_naive"], [1, 2],
                       protocol="once", n_folds=3, log=None)
    part = cv.evaluate("lung", codes, y, ["mim", "vmi_naive"], [1, 2], protocol="once",
                       n_folds=3, log=None)
    text = cv.report_markdown([full, part], ["mim", "cife", "vmi_naive"])
    rows = [ln for ln in text.splitlines() if ln.startswith("| Lung |")]
    assert "not run" in rows[0] and rows[0].count("|") == 8  # Dataset, N x d x L, folds, K + 3
    wtl_row = next(ln for ln in text.splitlines() if ln.startswith("| W/T/L VMI_naive | |"))
    cells = [c.strip() for c in wtl_row.split("|")[5:-1]]
    assert sum(map(int, cells[0].split("/"))) == 2 and sum(map(int, cells[1].split("/"))) == 1


def test_quick_cli_end_to_end(tmp_path):
    out = tmp_path / "report.md"
    js = tmp_path / "r.json"
    rc = main(["--data-dir", str(BUNDLED_DIR), "--quick", "--datasets", "promoter", "--folds", "2",
               "--methods", "mim,mrmr,vmi_naive,vmi_pairwise", "--no-synthetic", "--json", str(js),
               "--figures-dir", str(tmp_path), "--fig-datasets", "promoter", "--out", str(out)])
    assert rc == 0
    text = out.read_text()
    assert "## Average CV error rate (%), ours" in text
    header = "| Dataset | N x d x L | folds | K | mRMR | MIM | VMI_naive | VMI_pairwise |"
    assert header.replace("mRMR | MIM", "MIM | mRMR") in text
    assert "| Promoter | 106 x 57 x 2 | 2 | 2..10 (3) |" in text
    assert "| W/T/L VMI_naive |" in text and "| W/T/L VMI_pairwise |" in text
    assert "## Paper (supplementary Table 5), same rows" in text
    assert "## Error versus number of selected features" in text
    assert (tmp_path / "error_vs_k_promoter_inside.png").exists()
    import json

    saved = json.loads(js.read_text())["results"]
    assert [r["name"] for r in saved] == ["promoter"] and len(saved[0]["k_errors"]["mim"]) == 2


def test_job_encoding_is_the_selectors_plan():
    """``--encoding job`` codes each column as the fitted scikit-learn selector's plan does
    (the one planner), column by column through the plan's own encoder."""
    pytest.importorskip("sklearn")
    import warnings

    from vmi_spark.experiments.datasets import ENCODINGS
    from vmi_spark.sklearn import VMIFeatureSelector, encode_column

    rng = np.random.default_rng(5)
    n = 600
    y = rng.integers(0, 3, n)
    X = np.column_stack([rng.normal(size=n) + y, rng.integers(0, 4, n).astype(float),
                         np.where(rng.random(n) < 0.6, 0.0, rng.exponential(size=n))])
    codes = ENCODINGS["job"](X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sel = VMIFeatureSelector(n_features_to_select=1).fit(X, y)
    want = np.column_stack([encode_column(X[:, j], c) for j, c in enumerate(sel.columns_)])
    assert codes.shape == X.shape and codes.dtype == np.uint8
    np.testing.assert_array_equal(codes, want)
    assert [c.kind for c in sel.columns_] == ["bins", "category", "bins"]
