"""How values and counts are shown to a user (issue 44 item 9): classes and category
states of integer and boolean columns as ``0; 1`` and ``false; true`` (not ``0.0; 1.0``),
weighted counts as ``62,625.4 weighted rows`` (not ``62625.40234375 rows``), a string
column that became one state said so (not "its 0 most frequent ... are states of their
own"), and scikit-learn's wording checks. Each expected text is written out here from
the data, not taken from the code under test."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from vmi_spark.report import render_markdown
from vmi_spark.sklearn import VMIFeatureSelector


def _fit(X, y, w=None, **kw):
    """The fitted selector and the messages of the warnings it raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sel = VMIFeatureSelector(**kw).fit(X, y, sample_weight=w)
    return sel, [str(m.message) for m in caught]


def _table(n: int = 400, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"flag": rng.random(n) < 0.5, "level": rng.integers(0, 3, n),
                         "x": rng.random(n)})


@pytest.mark.parametrize("kind", ["int", "bool", "str"])
def test_classes_and_states_of_whole_numbers_and_booleans(kind):
    X = _table()
    code = (X["flag"].astype(int) + X["level"]) % 2
    y = {"int": code, "bool": code == 1, "str": code.map({0: "no", 1: "yes"})}[kind]
    rep = VMIFeatureSelector(n_features_to_select=2).fit(X, y).report()
    shown = {"int": ["0", "1"], "bool": ["false", "true"], "str": ["no", "yes"]}[kind]
    assert rep["classes"] == shown
    cols = {c["name"]: c for c in rep["columns"]}
    assert cols["flag"]["state_names"] == ["false", "true"]
    assert cols["level"]["state_names"] == [str(v) for v in sorted(set(X["level"]))]
    md = render_markdown(rep)
    assert "Classes: " + ", ".join(f"`{c}`" for c in shown) + "." in md
    if "flag" in rep["selected"]:
        assert "| flag | category |  | false; true |" in md
    assert "`0.0`" not in md and "0.0; 1.0" not in md


def test_a_one_class_label_is_refused_in_its_own_words():
    X = _table(n=30)
    for y, shown in ((np.zeros(30, dtype=int), "0"), (np.ones(30, dtype=bool), "true"),
                     (np.array(["a"] * 30), "'a'")):
        with pytest.raises(ValueError) as exc:
            VMIFeatureSelector().fit(X, y)
        assert str(exc.value) == (f"label column 'y' has one class ({shown}); feature "
                                  "selection needs at least two")


def test_check_estimator_wording_checks():
    """check_fit2d_1sample wants 'one class' (or '1 sample'); check_all_zero_sample_weights
    _error 'non-zero'; both as scikit-learn runs them."""
    from sklearn.utils.estimator_checks import (
        check_all_zero_sample_weights_error,
        check_fit2d_1sample,
    )

    check_fit2d_1sample("VMIFeatureSelector", VMIFeatureSelector())
    check_all_zero_sample_weights_error("VMIFeatureSelector", VMIFeatureSelector())


def test_a_string_column_that_became_one_state():
    """Every value rarer than a state needs (10 rows): the note says they are one state;
    one value frequent enough: 'its most frequent value ... is a state of its own'."""
    n = 400
    X = _table(n)
    X["ids"] = [f"id{i}" for i in range(n)]  # 400 values, one row each
    X["city"] = ["paris" if i % 2 else f"c{i}" for i in range(n)]  # paris in 200 rows
    y = (X["flag"].astype(int) + X["level"]) % 2
    _, notes = _fit(X, y, n_features_to_select=2, max_categories=5)
    ids = [m for m in notes if m.startswith("string column 'ids'")]
    assert ids == ["string column 'ids' has 400 distinct values, none in at least 10 rows: "
                   "all of them (400 rows) are one state '(other)'"], notes
    city = [m for m in notes if m.startswith("string column 'city'")]
    assert city == ["string column 'city' has 201 distinct values: its most frequent value "
                    "(of at least 10 rows) is a state of its own, the other 200 (200 rows) "
                    "one state '(other)'"], notes
    assert not any("its 0 most frequent" in m for m in notes)


def test_weighted_counts_are_rounded_and_named():
    """Fractional weights (multiples of 1/1024, so that their sum is exact): the note of a
    grouped string column counts its weight as weighted rows, with thousands separators
    and one decimal."""
    from vmi_spark.core.units import count_text

    n = 400
    rng = np.random.default_rng(3)
    w = rng.integers(2 * 1024, 4 * 1024, n) / 1024  # each below 10, about 1,200 in all
    X = _table(n)
    X["ids"] = [f"id{i}" for i in range(n)]
    y = (X["flag"].astype(int) + X["level"]) % 2
    _, notes = _fit(X, y, n_features_to_select=2, max_categories=5, w=w)
    total = float(w.sum())
    assert total != round(total, 1)  # a fraction the old message printed in full
    whole, frac = divmod(round(total * 10), 10)
    shown = f"{whole:,}.{frac} weighted rows"
    ids = [m for m in notes if m.startswith("string column 'ids'")]
    assert ids == [f"string column 'ids' has 400 distinct values, none in at least 10 "
                   f"weighted rows: all of them ({shown}) are one state '(other)'"], notes
    assert count_text(62625.40234375, True) == "62,625.4 weighted rows"
    assert count_text(62625.0, True) == "62,625 weighted rows"
    assert count_text(1200) == "1,200 rows"


def test_thin_classes_note_counts_weighted_rows_on_spark(spark):
    """The Spark selection's note on a categorical label with thin classes printed the
    total weight as `1003.0869140625 rows`."""
    from vmi_spark.spark.select import run_selection

    n, classes = 240, 120
    rng = np.random.default_rng(5)
    w = rng.integers(4 * 1024, 4 * 1024 + 512, n) / 1024
    pdf = pd.DataFrame({"y": np.arange(n) % classes, "a": rng.integers(0, 3, n),
                        "b": rng.integers(0, 4, n), "w": w})
    run = run_selection(spark.createDataFrame(pdf), "y", features=["a", "b"], weight_col="w",
                        num_features=1, label_type="categorical")
    total = float(w.sum())
    whole, frac = divmod(round(total * 10), 10)
    assert total < 10 * classes and total != round(total, 1)
    note = [m for m in run.report()["warnings"] if "classes in" in m]
    assert len(note) == 1, run.report()["warnings"]
    assert note[0].startswith(f"label 'y' has {classes} classes in {whole:,}.{frac} weighted "
                              "rows, fewer than 10 rows a class: it looks like a regression "
                              "target"), note
