"""The sparse path's count tables and selections (vmi_spark.core.sparse), Spark-free:
against a plain numpy computation on the densified matrix written here, and the
comparison criteria's selections against the dense in-memory backend."""

from __future__ import annotations

import numpy as np
import pytest

from vmi_spark.core import sparse
from vmi_spark.core.greedy import select
from vmi_spark.core.inmemory import InMemoryBackend


def _table(rows: int, width: int, seed: int, nnz: int = 6):
    """A sparse count-valued table (power-law element frequencies, two planted elements
    that carry the label) as (y, row, element, value) and its dense matrix."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, rows)
    p = 1.0 / np.arange(1, width + 1)
    p /= p.sum()
    row, el, val = [], [], []
    for r in range(rows):
        idx = np.unique(rng.choice(width, rng.integers(1, nnz + 1), p=p))
        idx = idx[(idx != 5) & (idx != 9)]
        v = rng.integers(1, 4, len(idx)).astype(float)
        if y[r] == 1 or rng.random() < 0.1:
            idx, v = np.append(idx, 5), np.append(v, 1.0)
        if y[r] == 2 and rng.random() < 0.8:
            idx, v = np.append(idx, 9), np.append(v, 2.0 + (r % 2))
        row += [r] * len(idx)
        el += list(idx)
        val += list(v)
    row, el, val = np.array(row), np.array(el), np.array(val)
    dense = np.zeros((rows, width))
    dense[row, el] = val
    return y, row, el, val, dense


def _plan(rows, el, val, width, max_categories=32, num_bins=10):
    return sparse.element_plan(width, rows, sparse.value_cells(el, val), max_categories,
                               num_bins)


def _dense_codes(dense: np.ndarray, max_categories: int = 32) -> np.ndarray:
    """(D, N) codes as the dense path codes a column of few values: its sorted values."""
    codes = np.zeros(dense.shape[::-1], dtype=np.uint8)
    for i in range(dense.shape[1]):
        vals = np.unique(dense[:, i])
        assert len(vals) <= max_categories
        codes[i] = np.searchsorted(vals, dense[:, i])
    return codes


def _spark_frames(spark, rows: int, width: int, seed: int, partitions: int):
    """:func:`_table` as a Spark DataFrame of sparse vectors (``partitions`` partitions)
    and one of the same vectors densified, each with the label ``y`` and ``features``."""
    from pyspark.ml.linalg import Vectors

    y, row, el, val, dense = _table(rows, width, seed=seed)
    sdf = spark.createDataFrame(
        [(int(y[r]), Vectors.sparse(width, {int(i): float(v) for i, v in
                                            zip(el[row == r], val[row == r])}))
         for r in range(rows)], ["y", "features"]).repartition(partitions)
    ddf = spark.createDataFrame([(int(y[r]), Vectors.dense(dense[r])) for r in range(rows)],
                                ["y", "features"])
    return sdf, ddf


def test_feature_and_pair_tables_equal_numpy_counts():
    y, row, el, val, dense = _table(300, 40, seed=1)
    plan = _plan(300, el, val, 40)
    # two chunks, cut unevenly: the tables do not depend on the cut
    cut = 117
    first, second = row < cut, row >= cut
    chunks = [sparse.encode_chunk(plan, y[:cut], row[first], el[first], val[first]),
              sparse.encode_chunk(plan, y[cut:], row[second] - cut, el[second], val[second])]
    backend = sparse.SparseBackend(plan, chunks, 3)
    codes = _dense_codes(dense)
    a = plan.arity
    want = np.zeros((40, a, 3), dtype=np.int64)
    for i in range(40):
        for r in range(300):
            want[i, codes[i, r], y[r]] += 1
    assert np.array_equal(backend.feature_counts(), want)
    for f in (0, 5, 9, 39):
        pair = np.zeros((40, a, a, 3), dtype=np.int64)
        for i in range(40):
            np.add.at(pair[i], (codes[i], codes[f], y), 1)
        assert np.array_equal(backend.pair_counts(f), pair), f


def test_merge_cells_is_exact_in_any_order():
    rng = np.random.default_rng(3)
    parts = [sparse._cells(rng.integers(0, 50, 200)) for _ in range(5)]
    ids, cnt = sparse.merge_cells(parts)
    again = sparse.merge_cells([sparse.merge_cells(parts[3:]), *parts[:3]])
    want = np.bincount(np.concatenate([np.repeat(p[0], p[1]) for p in parts]), minlength=50)
    assert np.array_equal(again[0], ids) and np.array_equal(again[1], cnt)
    assert np.array_equal(np.bincount(ids, weights=cnt, minlength=50).astype(int), want)


def test_continuous_element_binned_from_its_nonzeros_with_zero_its_own_state():
    rng = np.random.default_rng(4)
    rows = 500
    r = np.flatnonzero(rng.random(rows) < 0.4)
    v = rng.normal(size=len(r)) + 0.5
    v[v == 0] = 1.0
    plan = _plan(rows, np.zeros(len(r), int), v, 1, num_bins=5)
    assert plan.categories[0] is None and plan.zero[0] == 0
    chunk = sparse.encode_chunk(plan, np.zeros(rows, int), r, np.zeros(len(r), int), v)
    counts = sparse.SparseBackend(plan, [chunk], 1).feature_counts()[0, :, 0]
    assert counts[0] == rows - len(r)  # the zeros, every one
    # the non-zeros in 4 bins of about equal counts, ordered by value
    assert counts[1:].sum() == len(r) and len(counts) == 5
    assert counts[1:5].min() >= len(r) // 4 - 2
    edges = plan.edges[0]
    assert np.array_equal(np.searchsorted(edges, np.sort(v), side="right"),
                          np.repeat(np.arange(4), counts[1:5]))


@pytest.mark.parametrize("method", ["mim", "mrmr", "jmi", "cmim", "cife"])
def test_selection_bit_identical_to_dense_backend(method):
    y, row, el, val, dense = _table(400, 300, seed=2)
    plan = _plan(400, el, val, 300)
    chunk = sparse.encode_chunk(plan, y, row, el, val)
    got = select(sparse.SparseBackend(plan, [chunk], 3), method, 8, report_candidates=3)
    want = select(InMemoryBackend(_dense_codes(dense), y, arity=plan.arity, num_classes=3),
                  method, 8, report_candidates=3)
    assert got.selected == want.selected
    assert got.scores == want.scores and got.gains == want.gains
    assert got.candidates == want.candidates
    assert got.mutual_information == want.mutual_information
    assert {5, 9} <= set(got.selected[:3])  # the planted elements come first


def test_the_bound_is_refused_on_the_sparse_tables():
    y, row, el, val, _ = _table(50, 10, seed=5)
    plan = _plan(50, el, val, 10)
    backend = sparse.SparseBackend(plan, [sparse.encode_chunk(plan, y, row, el, val)], 3)
    with pytest.raises(NotImplementedError, match="dense codes"):
        select(backend, "vmi_pairwise", 3)


def test_spark_sparse_fit_equals_the_dense_path_and_transform_stays_sparse(spark, monkeypatch):
    """A sparse vector column read from its non-zeros selects as the dense path does on
    the same vectors densified (mrmr, bit for bit); transform gives sparse vectors of the
    selected elements in selection order, names kept."""
    from pyspark.ml.linalg import SparseVector

    from vmi_spark import VMISelector
    from vmi_spark.spark.sources import sparse_vectors

    monkeypatch.setattr(sparse_vectors, "SPARSE_MIN_WIDTH", 100)
    sdf, ddf = _spark_frames(spark, 300, 200, seed=6, partitions=3)
    args = dict(labelCol="y", method="mrmr", numTopFeatures=6, outputCol="picked")
    got = VMISelector(**args).fit(sdf)
    want = VMISelector(**args).fit(ddf)
    assert got.report["execution"] == "sparse" and want.report["execution"] != "sparse"
    assert got.selectedFeatures == want.selectedFeatures
    assert got.scores == want.scores
    assert got.report["gains"] == want.report["gains"]
    out = got.transform(sdf.limit(20)).select("features", "picked").collect()
    sel = got.selectedFeatures
    for r in out:
        assert isinstance(r.picked, SparseVector) and r.picked.size == len(sel)
        assert np.array_equal(r.picked.toArray(), r.features.toArray()[sel])
    meta = got.transform(sdf).schema["picked"].metadata["ml_attr"]
    names = [a["name"] for a in sorted(meta["attrs"]["numeric"], key=lambda a: a["idx"])]
    assert names == [f"features[{i}]" for i in sel]
    # what the non-zeros path does not do is refused in one line, never ignored
    from vmi_spark.errors import InputError

    weighted = sdf.withColumn("w", sdf.y * 0 + 1.0)
    for extra, name in (({"weightCol": "w"}, "weightCol"), ({"stabilityRuns": 2},
                                                             "stabilityRuns")):
        with pytest.raises(InputError, match=f"^{name} is not supported for a wide sparse"):
            VMISelector(**args, **extra).fit(weighted)


@pytest.mark.parametrize("method", ["spec_cmi"])
def test_sparse_selection_refuses_spec_cmi_in_one_line_before_reading(method):
    """Refused before any row is read (no DataFrame is touched: None here), naming the
    parameter to change."""
    pytest.importorskip("pyspark")
    from vmi_spark.errors import ParameterError
    from vmi_spark.params import Settings
    from vmi_spark.spark.sources.sparse_vectors import sparse_selection

    with pytest.raises(ParameterError) as err:
        sparse_selection(None, "y", "features", Settings.of({"method": method}, "ml"))
    assert str(err.value).startswith(f"method '{method}' needs every pair")
    assert "\n" not in str(err.value) and "mrmr" in str(err.value)


def test_screened_dense_codes_equal_the_densified_codes():
    y, row, el, val, dense = _table(200, 60, seed=8)
    plan = _plan(200, el, val, 60)
    chunk = sparse.encode_chunk(plan, y, row, el, val)
    rel = np.arange(60, dtype=float) % 7
    keep = sparse.screened(rel, 200, budget=200 * 10)
    want = np.lexsort((np.arange(60), -rel))[:10]
    assert np.array_equal(keep, np.sort(want))
    assert np.array_equal(sparse.chunk_dense_codes(plan, chunk, keep), _dense_codes(dense)[keep])


def test_spark_sparse_vmi_screened_equals_the_dense_path(spark, monkeypatch):
    """vmi_naive on a sparse vector: screened by MIM from the sparse tables; with room for
    every element (the budget) the same selection and scores as the dense path."""
    from vmi_spark import VMISelector
    from vmi_spark.spark.sources import sparse_vectors

    monkeypatch.setattr(sparse_vectors, "SPARSE_MIN_WIDTH", 100)
    sdf, ddf = _spark_frames(spark, 240, 120, seed=9, partitions=2)
    args = dict(labelCol="y", method="vmi_naive", numTopFeatures=5)
    got = VMISelector(**args).fit(sdf)
    want = VMISelector(**args).fit(ddf)
    assert got.report["sparse"]["screened_elements"] == 120
    assert got.report["sparse"]["screened_bytes"] == 240 * 120
    assert got.selectedFeatures == want.selectedFeatures
    assert got.scores == want.scores and got.blocks == want.blocks


def test_spark_sparse_early_stop_is_noted_as_the_dense_path_notes_it(spark, monkeypatch):
    """No K: the selection ends where the evidence does, well before the 50 it may take;
    the sparse path's report notes the early stop in the dense path's words (the same
    note, from the same function) and selects what the dense path does."""
    from vmi_spark import VMISelector
    from vmi_spark.spark.sources import sparse_vectors

    monkeypatch.setattr(sparse_vectors, "SPARSE_MIN_WIDTH", 100)
    sdf, ddf = _spark_frames(spark, 300, 200, seed=6, partitions=3)
    got = VMISelector(labelCol="y", method="mrmr").fit(sdf).report
    want = VMISelector(labelCol="y", method="mrmr").fit(ddf).report
    assert got["execution"] == "sparse" and want["execution"] != "sparse"
    assert got["selected"] == want["selected"] and len(got["selected"]) < 50
    assert got["stop_reason"] == want["stop_reason"] == "not_significant"
    stopped = [w for w in want["warnings"] if w.startswith("stopped early: ")]
    assert len(stopped) == 1 and stopped[0] == f"stopped early: {want['stopped_early']}"
    assert [w for w in got["warnings"] if w.startswith("stopped early")] == stopped


def test_spark_sparse_capped_k_is_reported_as_the_dense_path_reports_it(spark, monkeypatch):
    """K above the vector's width is capped with a warning, and the sparse path's report
    keeps that warning in the dense path's words (the same note from the same policy),
    as every front end's report keeps what it warned of."""
    from vmi_spark import VMISelector
    from vmi_spark.spark.sources import sparse_vectors

    monkeypatch.setattr(sparse_vectors, "SPARSE_MIN_WIDTH", 100)
    sdf, ddf = _spark_frames(spark, 300, 120, seed=7, partitions=2)
    with pytest.warns(UserWarning, match="numTopFeatures 500 is more than the 120 features"):
        got = VMISelector(labelCol="y", method="mim", numTopFeatures=500).fit(sdf).report
    want = VMISelector(labelCol="y", method="mim", numTopFeatures=500).fit(ddf).report
    assert got["execution"] == "sparse" and want["execution"] != "sparse"
    capped = "numTopFeatures 500 is more than the 120 features; selecting at most 120"
    assert capped in want["warnings"] and capped in got["warnings"]
    assert got["selected"] == want["selected"]
