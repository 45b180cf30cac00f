"""The in-memory answer's start (issue 46 item 3): the same codes and selections whatever the
layout of ``X``, and the count tables counted once."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sklearn")

from vmi_spark.core.inmemory import InMemoryBackend, ThreadedBackend  # noqa: E402
from vmi_spark.sklearn import VMIFeatureSelector, _feature_major  # noqa: E402


def _table(n: int = 6000, d: int = 12, seed: int = 0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    X = rng.integers(0, 5, (n, d)).astype(np.int32)
    X[:, 3] = (X[:, 3] + y * (rng.random(n) < 0.6)) % 5
    X[:, 7] = np.where(rng.random(n) < 0.7, y * 2, X[:, 7])
    return X, y


@pytest.mark.parametrize("keep", [None, [0, 3, 4, 7, 11]])
@pytest.mark.parametrize("layout", ["C", "F", "rows_stepped", "columns_stepped", "int64", "uint8"])
def test_feature_major_gives_each_column_as_it_is(keep, layout):
    X, _ = _table(n=5000)  # more rows than a stretch, not a multiple of one
    X = {"C": X, "F": np.asfortranarray(X), "rows_stepped": X[::2],
         "columns_stepped": np.repeat(X, 2, axis=1)[:, ::2], "int64": X.astype(np.int64),
         "uint8": X.astype(np.uint8)}[layout]
    cols = list(range(X.shape[1])) if keep is None else keep
    got = _feature_major(X, cols)
    if layout == "F":
        assert got is None  # its columns are contiguous already
        return
    assert got.dtype == X.dtype and got.flags.c_contiguous
    assert np.array_equal(got, X[:, cols].T)


def test_feature_major_leaves_other_inputs_alone():
    X, _ = _table(n=100)
    assert _feature_major(X.astype(np.float64), list(range(12))) is None
    assert _feature_major(X.astype(bool), list(range(12))) is None
    assert _feature_major(X.tolist(), list(range(12))) is None


def _fitted(X, y, **params):
    s = VMIFeatureSelector(n_features_to_select=5, **params).fit(X, y)
    return (s.selected_features_.tolist(), [v.hex() for v in s.scores_],
            [v.hex() for v in s.gains_], [v.hex() for v in s.mutual_information_])


@pytest.mark.parametrize("params", [{}, {"method": "vmi_pairwise"}, {"method": "jmi"},
                                    {"exclude": ["x2", "x7"]}])
def test_the_same_selection_and_scores_whatever_the_layout_of_x(params):
    X, y = _table()
    want = _fitted(np.asfortranarray(X), y, **params)  # columns read as they are
    assert _fitted(X, y, **params) == want
    assert _fitted(X.astype(np.int64), y, **params) == want
    assert _fitted(np.ascontiguousarray(np.repeat(X, 2, axis=0)[::2]), y, **params) == want


@pytest.mark.parametrize("backend", [InMemoryBackend, ThreadedBackend])
@pytest.mark.parametrize("weighted", [False, True])
def test_feature_counts_are_counted_once_and_handed_out_as_copies(backend, weighted):
    X, y = _table(n=9000)
    codes = np.ascontiguousarray(X.T.astype(np.uint8))
    w = np.random.default_rng(1).integers(1, 4, len(y)) if weighted else None
    b = backend(codes, y, w=w)
    first = b.feature_counts()
    first[:] = -1  # a caller's change stays its own
    again = b.feature_counts()
    fresh = backend(codes, y, w=w).feature_counts()
    assert np.array_equal(again, fresh) and again.dtype == fresh.dtype
    assert again is not b.feature_counts()
    b.close()
    assert np.array_equal(b.feature_counts(), fresh)  # the rows stay after close
