"""Issue 43: the label rule, the state budget, stopping on the evidence and the suspect
features (leaks, identifiers), each against an independent computation written here."""

from __future__ import annotations

import math
import warnings
from itertools import combinations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from scipy.stats import chi2

from vmi_spark.core import rows as R
from vmi_spark.core import suspects as S
from vmi_spark.core.planning import FLOATING, INTEGER, STRING, decide_label, state_budget
from vmi_spark.sklearn import VMIFeatureSelector


# ---------------------------------------------------------------- the label rule
@pytest.mark.parametrize("values,vtype,kind", [
    (list(range(116)), INTEGER, "continuous"),          # a weight in whole units
    ([float(v) for v in range(29)], FLOATING, "continuous"),  # an exam score
    (list(range(1, 11)), INTEGER, "categorical"),       # ten class codes
    ([0.5, 1.0, 1.5], FLOATING, "categorical"),         # three values, not whole
    (["a", "b"], STRING, "categorical"),
    (None, INTEGER, "continuous"),                      # more than maxClasses values
])
def test_a_numeric_label_with_more_values_than_label_bins_is_continuous(values, vtype, kind):
    d = decide_label("auto", values, 27_000, vtype, 1000, "ml", label_bins=10)
    assert d.kind == kind
    if kind == "continuous" and values is not None:
        assert f"{len(values)} distinct values, more than labelBins (10)" in d.reason
        assert "labelType to categorical" in d.reason  # how to override it


def test_label_bins_sets_the_line():
    assert decide_label("auto", list(range(12)), 500, INTEGER, 1000, label_bins=12).kind == \
        "categorical"
    assert decide_label("auto", list(range(13)), 500, INTEGER, 1000, label_bins=12).kind == \
        "continuous"


# ---------------------------------------------------------------- the state budget
@pytest.mark.parametrize("rows,classes", [(400, None), (442, None), (73, 7), (10_000, None),
                                          (60, 2), (1_000_000, 3)])
def test_the_state_budget_keeps_five_rows_a_cell(rows, classes):
    b = state_budget(rows, classes, 10, 32, 10)
    # independent: the largest L <= 10 with L * L * 5 <= N (at least 2) for a continuous
    # label, then the largest A with A * L * 5 <= N (at least 2)
    if classes is None:
        want_l = max(2, max([n for n in range(1, 11) if n * n * 5 <= rows], default=1))
    else:
        want_l = 10
    lab = want_l if classes is None else classes
    want_a = max(2, max([a for a in range(1, 256) if a * lab * 5 <= rows], default=1))
    assert (b.label_bins, b.states) == (want_l, want_a)
    assert b.bound == (want_l < 10 or want_a < 10)


def test_a_small_table_bins_a_many_valued_integer_column():
    """The issue's case: 400 rows, a continuous label, an integer column of 16 values
    (noise): it keeps at most floor(400 / (5 * 8)) = 10 states, not 16, and the label 8
    classes; a note says why."""
    rng = np.random.default_rng(0)
    n = 400
    x = pd.DataFrame({"noise16": rng.integers(0, 16, n), "real": rng.normal(size=n)})
    y = x["real"] * 2 + rng.normal(size=n)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sel = VMIFeatureSelector(n_features_to_select=1).fit(x, y)
    assert len(sel.classes_) == 8
    assert sel.plan_.columns[0].num_states <= 10
    assert any("5 rows a cell" in str(w.message) for w in caught)
    assert list(sel.selected_features_) == [1]
    # the paper's plug-in algorithm codes the states asked for
    raw = VMIFeatureSelector(n_features_to_select=1, bias_correction="none").fit(x, y)
    assert raw.plan_.columns[0].num_states == 16 and len(raw.classes_) == 10


# ---------------------------------------------------------------- stopping on the evidence
def _g_test_p(x: np.ndarray, y: np.ndarray) -> float:
    """The G-test's p-value of independence of two small-integer columns (scipy's chi2)."""
    table = np.zeros((x.max() + 1, y.max() + 1))
    np.add.at(table, (x, y), 1)
    table = table[table.sum(axis=1) > 0][:, table.sum(axis=0) > 0]
    expect = table.sum(axis=1, keepdims=True) * table.sum(axis=0, keepdims=True) / table.sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        g = 2 * np.nansum(np.where(table > 0, table * np.log(table / expect), 0.0))
    dof = (table.shape[0] - 1) * (table.shape[1] - 1)
    return float(chi2.sf(g, dof))


def _informative(n: int, d_noise: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    real = np.stack([np.where(rng.random(n) < p, y, rng.integers(0, 2, n))
                     for p in (0.6, 0.4, 0.25)], axis=1)
    noise = rng.integers(0, 3, (n, d_noise))
    return np.concatenate([real, noise], axis=1), y


@pytest.mark.parametrize("method", ["vmi_naive", "vmi_pairwise", "mim", "mrmr", "jmi"])
def test_no_k_stops_where_no_feature_is_significant(method):
    x, y = _informative(2000, 20, 1)
    sel = VMIFeatureSelector(method=method).fit(x, y)
    assert sel.stop_reason_ == "not_significant"
    d = x.shape[1]
    for j in range(d):  # every feature the rule let start a block is significant on its own
        if method not in ("vmi_naive", "vmi_pairwise") or j == sel.selected_features_[0]:
            if j in sel.selected_features_:
                assert _g_test_p(x[:, j], y) < 0.05 / d
    assert set(sel.selected_features_[:3].tolist()) <= {0, 1, 2}
    assert not set(sel.selected_features_.tolist()) & set(range(3, d)) or \
        method in ("vmi_naive", "vmi_pairwise")  # a block may grow by a significant gain
    # an explicit K still gives K
    assert len(VMIFeatureSelector(n_features_to_select=8, method=method).fit(x, y)
               .selected_features_) == 8


def test_no_k_takes_nothing_from_noise():
    rng = np.random.default_rng(2)
    x, y = rng.integers(0, 4, (400, 30)), rng.integers(0, 2, 400)
    sel = VMIFeatureSelector().fit(x, y)
    assert len(sel.selected_features_) <= 1  # at most the one chance win at 5%
    assert sel.stop_reason_ == "not_significant"


def test_gain_mode_keeps_a_small_real_effect_on_many_rows():
    """A planted effect of about 0.004 nats on 50,000 rows is kept by the gain mode
    without a threshold (the old default 0.01 nats dropped it); on 400 rows the same
    columns are noise and nothing is kept."""
    rng = np.random.default_rng(3)
    n = 50_000
    y = rng.integers(0, 2, n)
    real = np.where(rng.random(n) < 0.09, y, rng.integers(0, 2, n))
    x = np.stack([real, rng.integers(0, 2, n), rng.integers(0, 2, n)], axis=1)
    p1 = np.bincount(real * 2 + y, minlength=4) / n
    mi = sum(p * math.log(p / (p1[2 * a:2 * a + 2].sum() * p1[b::2].sum()))
             for a in (0, 1) for b in (0, 1) for p in [p1[2 * a + b]])
    assert 0.002 < mi < 0.006
    sel = VMIFeatureSelector(selection_mode="gain").fit(x, y)
    assert sel.selected_features_.tolist() == [0]
    small = VMIFeatureSelector(selection_mode="gain").fit(x[:400] * 0 + rng.integers(0, 2, (400, 3)),
                                                          y[:400])
    assert len(small.selected_features_) == 0 or small.stop_reason_ == "not_significant"


# ---------------------------------------------------------------- suspects
def _shares_by_hand(table: np.ndarray) -> float:
    """Chance-corrected I(x; y) / min(H(x), H(y)) of one (A, L) table, by loops."""
    n = table.sum()
    px, py = table.sum(axis=1) / n, table.sum(axis=0) / n
    mi = sum(table[a, b] / n * math.log(table[a, b] / n / (px[a] * py[b]))
             for a in range(table.shape[0]) for b in range(table.shape[1]) if table[a, b])
    h = lambda p: -sum(q * math.log(q) for q in p if q > 0)  # noqa: E731
    states, classes = int((px > 0).sum()), int((py > 0).sum())
    return (mi - (states - 1) * (classes - 1) / (2 * n)) / min(h(px), h(py))


def test_leak_share_matches_a_hand_computation():
    rng = np.random.default_rng(4)
    y = rng.integers(0, 3, 600)
    x = rng.integers(0, 4, (5, 600))
    x[2] = y  # a feature that determines the label
    x[4] = np.where(rng.random(600) < 0.5, y, x[4])
    counts = np.zeros((5, 4, 3), dtype=np.int64)
    for i in range(5):
        np.add.at(counts[i], (x[i], y), 1)
    shares, _ = S._shares(counts.astype(float))
    for i in range(5):
        assert shares[i] == pytest.approx(_shares_by_hand(counts[i].astype(float)), rel=1e-9)
    assert [s.index for s in S.leak_suspects(counts, list("abcde"))] == [2]


def test_discordance_counts_pairs_like_a_double_loop():
    rng = np.random.default_rng(5)
    t = rng.integers(0, 5, (4, 6))
    rows = [(a, b) for a in range(4) for b in range(6) for _ in range(t[a, b])]
    c = sum(1 for (a1, b1), (a2, b2) in combinations(rows, 2) if (a1 - a2) * (b1 - b2) > 0)
    d = sum(1 for (a1, b1), (a2, b2) in combinations(rows, 2) if (a1 - a2) * (b1 - b2) < 0)
    assert S.discordance(t) == (c, d)


def _planted(n: int = 2000, seed: int = 6) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=n), rng.normal(size=n)
    y = (a + 0.5 * b + rng.normal(size=n) > 0).astype(int)
    df = pd.DataFrame({"a": a, "b": b, "noise": rng.normal(size=n)})
    df["leak"] = np.where(rng.random(n) < 0.01, 1 - y, y)             # the label, 1% off
    df["death_date"] = np.where(y == 1, rng.integers(0, 500, n) + 20_000.5, np.nan)
    df["customer_id"] = rng.permutation(n) + 10_000                    # a key, any order
    df["uuid"] = [f"u{v}" for v in rng.permutation(10 * n)[:n]]        # a string key
    return df, y


def test_planted_leaks_and_identifiers_are_named_and_identifiers_left_out():
    df, y = _planted()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sel = VMIFeatureSelector(n_features_to_select=5).fit(df, y)
    found = {s["feature"]: s for s in sel.report()["suspects"]}
    assert {k: v["kind"] for k, v in found.items()} == {
        "leak": "leak", "death_date": "leak", "customer_id": "identifier",
        "uuid": "identifier"}
    assert not found["leak"]["dropped"] and found["customer_id"]["dropped"]
    chosen = set(np.asarray(sel.feature_names_in_)[sel.selected_features_])
    assert {"customer_id", "uuid"}.isdisjoint(chosen)
    text = " ".join(str(w.message) for w in caught)
    assert "possible leak: 'leak' carries" in text and "identifier: 'uuid' has" in text
    every = VMIFeatureSelector(n_features_to_select=3, drop_suspects="all").fit(df, y)
    assert set(np.asarray(every.feature_names_in_)[every.selected_features_]) == \
        {"a", "b", "noise"}
    kept = VMIFeatureSelector(n_features_to_select=7, drop_suspects="none").fit(df, y)
    # every column a candidate: the uuid (one state, '(other)') has no information at all
    assert set(np.asarray(kept.feature_names_in_)[kept.selected_features_]) == \
        set(df.columns) - {"uuid"}


def test_missing_values_that_mark_a_class_are_a_leak():
    rng = np.random.default_rng(7)
    n = 1500
    y = rng.integers(0, 3, n)
    x = pd.DataFrame({"a": rng.normal(size=n) + y,
                      "closed_on": np.where(y == 2, rng.normal(size=n), np.nan)})
    sel = VMIFeatureSelector(n_features_to_select=1, drop_suspects="none").fit(x, y)
    kinds = {s["feature"]: s["kind"] for s in sel.report()["suspects"]}
    assert kinds == {"closed_on": "missing_leak"}


def test_a_rank_and_a_quartile_of_a_continuous_label_are_leaks():
    rng = np.random.default_rng(8)
    n = 3000
    x = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n)})
    y = x["a"] + rng.normal(size=n)
    x["rank"] = y.rank()
    x["quartile"] = pd.qcut(y, 4, labels=False)
    sel = VMIFeatureSelector(n_features_to_select=2).fit(x, y)
    kinds = {s["feature"]: s["kind"] for s in sel.report()["suspects"]}
    assert kinds == {"rank": "leak", "quartile": "leak"}


def test_real_tables_raise_no_suspect():
    """The bundled scikit-learn tables: no column of theirs is a leak or an identifier."""
    from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris, load_wine

    for load in (load_iris, load_wine, load_breast_cancer, load_diabetes):
        X, y = load(return_X_y=True, as_frame=True)
        sel = VMIFeatureSelector(n_features_to_select=2).fit(X, y)
        assert sel.report()["suspects"] == [], load.__name__


# ---------------------------------------------------------------- the distinct sketch
def test_distinct_sketch_estimates_and_merges_in_any_order():
    rng = np.random.default_rng(9)
    values = rng.integers(0, 40_000, 30_000).astype(np.float64)
    parts = [R._sketch(None, pa.array(v), None) for v in np.array_split(values, 7)]
    exact = len(np.unique(values))
    est = R.distinct_estimate(_merge(parts))
    assert est is not None and abs(est - exact) / exact < 0.15
    assert np.array_equal(_merge(parts), _merge(parts[::-1]))
    assert R._sketch(None, pa.array([1.5, 2.0] * 20), None) is False  # not whole numbers
    assert R._sketch(None, pa.array(np.zeros(100)), None) is False  # repeats: not a key


def _merge(parts):
    out = None
    for p in parts:
        out = R.merge_sketches(out, p)
    return out


# ---------------------------------------------------------------- every front end alike
def test_estimator_and_job_name_the_same_suspects_and_stop_alike(spark, tmp_path):
    """The Spark estimator and the job find the suspects and stop where the in-memory
    selector does (no K given: on the evidence), and report.md names the suspects."""
    import json

    from vmi_spark import VMISelector
    from vmi_spark.job import main

    df, y = _planted(1200, seed=11)
    df = df.drop(columns=["uuid"])
    sk = VMIFeatureSelector().fit(df, y)
    pdf = df.assign(y=y)
    pdf.to_parquet(tmp_path / "in.parquet")
    model = VMISelector(inputCols=list(df.columns), labelCol="y").fit(
        spark.createDataFrame(pdf))
    assert model.selectedFeatures == list(sk.selected_features_)
    assert model.report["suspects"] == sk.report()["suspects"]
    assert model.report["stop_reason"] == sk.stop_reason_ == "not_significant"
    out = tmp_path / "out"
    assert main(["--input", str(tmp_path / "in.parquet"), "--label", "y", "--output", str(out),
                 "--quiet"], spark=spark) == 0
    rep = json.loads((out / "selection.json").read_text())
    assert rep["suspects"] == sk.report()["suspects"]
    assert rep["selected_indices"] == list(sk.selected_features_)
    md = (out / "report.md").read_text()
    assert "## Suspect features" in md and "| customer_id | identifier |" in md
    assert "| leak | leak |" in md


def test_a_column_and_its_copy_are_selected_once():
    """A month as a string and the same month as a number, and a charge that is a fixed
    multiple of a duration: the same columns once coded. The copy is named and never
    selected after its original (the bound would count it twice)."""
    rng = np.random.default_rng(12)
    n = 3000
    month = rng.integers(1, 13, n)
    minutes = rng.gamma(3.0, 60.0, n)
    y = ((month > 6) ^ (minutes > 150) ^ (rng.random(n) < 0.1)).astype(int)
    x = pd.DataFrame({"month": month, "month_name": [f"m{m:02d}" for m in month],
                      "minutes": minutes, "charge": minutes * 0.17,
                      "noise": rng.normal(size=n)})
    copies = S.copy_groups(*_counts_and_pairs(x, y))
    assert copies == {0: [1], 1: [0], 2: [3], 3: [2]}
    sel = VMIFeatureSelector(n_features_to_select=3).fit(x, y)
    chosen = list(np.asarray(x.columns)[sel.selected_features_])
    assert len({"month", "month_name"} & set(chosen)) <= 1
    assert len({"minutes", "charge"} & set(chosen)) <= 1
    dup = {d["feature"]: d["copies"] for d in sel.report()["duplicates"]}
    assert all(dup[f] == [{"month": "month_name", "month_name": "month", "minutes": "charge",
                            "charge": "minutes"}[f]] for f in dup) and dup
    paper = VMIFeatureSelector(n_features_to_select=3, bias_correction="none").fit(x, y)
    assert paper.report()["duplicates"] == []


def _counts_and_pairs(x: pd.DataFrame, y: np.ndarray):
    """(D, A, L) counts and a pair-count function of the columns as the selector codes
    them (its own plan), tabulated here with numpy."""
    from vmi_spark.core.bound import feature_counts, pair_counts

    sel = VMIFeatureSelector(n_features_to_select=1, bias_correction="none").fit(x, y)
    from vmi_spark.sklearn import _plan_and_code  # the selector's own coding

    planned, codes, yc, _ = _plan_and_code(x, x.to_numpy(dtype=object), np.asarray(y),
                                           list(x.columns), list(range(x.shape[1])),
                                           sel.settings_, None)
    a, lab = planned.plan.arity, len(planned.plan.classes)
    return feature_counts(codes, yc, a, lab), lambda f: pair_counts(codes, yc, f, a, lab)


@pytest.mark.parametrize("style, name", [("cli", "--drop-suspects"), ("ml", "dropSuspects"),
                                         ("sklearn", "drop_suspects")])
def test_a_dropped_suspect_names_the_parameter_as_the_front_end_spells_it(style, name):
    from vmi_spark.core.suspects import Suspect, suspect_notes

    odd = Suspect("id {x}", 0, "identifier", 1.0, "'id {x}' has 93 distinct values in 93 rows")
    leak = Suspect("rank", 1, "leak", 0.95, "'rank' carries 95% of the label's information")
    dropped, kept = suspect_notes([odd, leak], [0], style)
    assert dropped == (f"identifier: 'id {{x}}' has 93 distinct values in 93 rows; left out "
                       f"of the selection ({name})")
    assert kept == "possible leak: 'rank' carries 95% of the label's information; still a candidate"


def test_the_job_says_when_it_selected_fewer_than_asked(spark, tmp_path, capsys):
    """The console's last lines name the features in selection.json and, when a given K
    was not reached, why (before, only report.md and selection.json said it)."""
    import json

    from vmi_spark.job import main

    rng = np.random.default_rng(4)
    y = rng.integers(0, 2, 800)
    x = (y + (rng.random(800) < 0.2)) % 2 * 3.0 + rng.integers(0, 2, 800)
    pd.DataFrame({"x": x, "x_copy": x * 2.0, "z": rng.integers(0, 3, 800) + y,
                  "y": y}).to_parquet(tmp_path / "in.parquet")
    out = tmp_path / "out"
    assert main(["--input", str(tmp_path / "in.parquet"), "--label", "y", "--output", str(out),
                 "--num-features", "3", "--drop-suspects", "none"], spark=spark) == 0
    rep = json.loads((out / "selection.json").read_text())
    assert len(rep["selected"]) == 2 and rep["stop_reason"] == "no_features_left"
    err = capsys.readouterr().err.splitlines()
    assert f"selected 2 feature(s): {', '.join(rep['selected'])}" in err[-2]
    assert err[-1].endswith("WARNING vmi_spark: stopped early: no features left to select "
                            "(2 of the 3 features asked for)")
    out2 = tmp_path / "out2"
    assert main(["--input", str(tmp_path / "in.parquet"), "--label", "y", "--output", str(out2),
                 "--selection-mode", "gain", "--selection-threshold", "100"], spark=spark) == 0
    assert json.loads((out2 / "selection.json").read_text())["selected"] == []
    err = capsys.readouterr().err.splitlines()
    assert err[-2].endswith("selected 0 feature(s): none")
    assert "WARNING vmi_spark: no feature selected: the best candidate has a one-feature " \
        "bound (mutual information) of " in err[-1] and err[-1].endswith("below the threshold 100")
