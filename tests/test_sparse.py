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


def test_spark_sparse_fit_equals_the_dense_path_and_transform_stays_sparse(spark, set_limits):
    """A sparse vector column read from its non-zeros selects as the dense path does on
    the same vectors densified (mrmr, bit for bit); transform gives sparse vectors of the
    selected elements in selection order, names kept."""
    from pyspark.ml.linalg import SparseVector

    from vmi_spark import VMISelector

    # the limits (vmi_spark.core.limits): vectors of 100 elements read sparsely
    set_limits(sparse_min_width=100)
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
    with pytest.raises(InputError, match="^weightCol is not supported for a wide sparse"):
        VMISelector(**args, weightCol="w").fit(weighted)


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


def _sparse_report(sdf, values: dict, **kwargs):
    """The sparse route's report of ``sdf`` (label ``y``, vectors ``features``) by the
    spec ``values`` (the sparse selection itself, whatever the vectors' width)."""
    from vmi_spark.params import Settings
    from vmi_spark.spark.sources.sparse_vectors import sparse_selection

    return sparse_selection(sdf, "y", "features", Settings.of(values, "ml"), **kwargs)


def test_spark_sparse_vmi_screened_equals_the_dense_path(spark):
    """vmi_naive on a sparse vector: screened by MIM from the sparse tables; with room for
    every element (the budget) the same selection and scores as the dense path."""
    from vmi_spark import VMISelector

    sdf, ddf = _spark_frames(spark, 240, 120, seed=9, partitions=2)
    got = _sparse_report(sdf, {"method": "vmi_naive", "num_features": 5})
    want = VMISelector(labelCol="y", method="vmi_naive", numTopFeatures=5).fit(ddf).report
    assert got["sparse"]["screened_elements"] == 120
    assert got["sparse"]["screened_bytes"] == 240 * 120
    assert got["selected_indices"] == want["selected_indices"]
    assert got["scores"] == want["scores"] and got["blocks"] == want["blocks"]


def test_spark_sparse_early_stop_is_noted_as_the_dense_path_notes_it(spark):
    """No K: the selection ends where the evidence does, well before the 50 it may take;
    the sparse path's report notes the early stop in the dense path's words (the same
    note, from the same function) and selects what the dense path does."""
    from vmi_spark import VMISelector

    sdf, ddf = _spark_frames(spark, 300, 200, seed=6, partitions=3)
    got = _sparse_report(sdf, {"method": "mrmr"})
    want = VMISelector(labelCol="y", method="mrmr").fit(ddf).report
    assert got["execution"] == "sparse" and want["execution"] != "sparse"
    assert got["selected"] == want["selected"] and len(got["selected"]) < 50
    assert got["stop_reason"] == want["stop_reason"] == "not_significant"
    stopped = [w for w in want["warnings"] if w.startswith("stopped early: ")]
    assert len(stopped) == 1 and stopped[0] == f"stopped early: {want['stopped_early']}"
    assert [w for w in got["warnings"] if w.startswith("stopped early")] == stopped


def test_spark_sparse_capped_k_is_reported_as_the_dense_path_reports_it(spark):
    """K above the vector's width is capped with a warning, and the sparse path's report
    keeps that warning in the dense path's words (the same note from the same policy),
    as every front end's report keeps what it warned of."""
    from vmi_spark import VMISelector

    sdf, ddf = _spark_frames(spark, 300, 120, seed=7, partitions=2)
    with pytest.warns(UserWarning, match="numTopFeatures 500 is more than the 120 features"):
        got = _sparse_report(sdf, {"method": "mim", "num_features": 500})
    want = VMISelector(labelCol="y", method="mim", numTopFeatures=500).fit(ddf).report
    assert got["execution"] == "sparse" and want["execution"] != "sparse"
    capped = "numTopFeatures 500 is more than the 120 features; selecting at most 120"
    assert capped in want["warnings"] and capped in got["warnings"]
    assert got["selected"] == want["selected"]


def test_sparse_row_hashes_and_half_samples_equal_the_dense_rows():
    """A stability run's rows from the non-zeros are the rows the dense path keeps: the
    hash of each row's full codes (numpy, here, over the densified codes) and the
    masked tables those rows count."""
    from vmi_spark.core.stability import HalfSample

    y, row, el, val, dense = _table(400, 30, seed=11)
    plan = _plan(400, el, val, 30)
    cut = 150
    first, second = row < cut, row >= cut
    chunks = [sparse.encode_chunk(plan, y[:cut], row[first], el[first], val[first]),
              sparse.encode_chunk(plan, y[cut:], row[second] - cut, el[second], val[second])]
    codes = _dense_codes(dense)
    keep = HalfSample(seed=3, run=1)
    want = keep.row_hashes(codes, y)
    got = np.concatenate([keep.sparse_row_hashes(plan.zero, c.y, c.row, c.element, c.code)
                          for c in chunks])
    assert np.array_equal(got, want)
    view = sparse.SparseBackend(plan, chunks, 3).masked(keep)
    mask = keep.keep(codes, y)
    assert 100 < mask.sum() < 300
    dense_view = InMemoryBackend(codes, y, arity=plan.arity, num_classes=3).masked(keep)
    assert np.array_equal(view.feature_counts(), dense_view.feature_counts())
    assert np.array_equal(view.pair_counts(4), dense_view.pair_counts(4))
    assert np.array_equal(view.label_counts(), np.bincount(y[mask], minlength=3))


def _leaky_frames(spark, rows: int, width: int, seed: int, partitions: int):
    """:func:`_spark_frames` with element 7 a copy of the label (y + 1: never zero), a leak
    the suspects must name."""
    from pyspark.ml.linalg import Vectors

    sdf, ddf = _spark_frames(spark, rows, width, seed, partitions)

    def leak(r):
        v = r.features
        if hasattr(v, "indices"):
            d = dict(zip(v.indices.tolist(), v.values.tolist()))
            d[7] = float(r.y + 1)
            return (r.y, Vectors.sparse(width, d))
        a = v.toArray().copy()
        a[7] = float(r.y + 1)
        return (r.y, Vectors.dense(a))
    return (spark.createDataFrame(sdf.rdd.map(leak), ["y", "features"]).repartition(partitions),
            spark.createDataFrame(ddf.rdd.map(leak), ["y", "features"]))


@pytest.mark.parametrize("method", ["mrmr", "vmi_naive"])
def test_spark_sparse_suspects_and_stability_equal_the_dense_path(spark, set_limits, method):
    """The one run (run.run_planned) on the sparse route: the same suspects (a planted
    leak), warnings, selection and stability section as the dense path on the same
    vectors densified (vmi_naive: screened, every element kept; its half-samples still
    hash every element's codes)."""
    from vmi_spark import VMISelector
    from vmi_spark.params import Settings
    from vmi_spark.spark.sources.sparse_vectors import sparse_route, sparse_selection

    sdf, ddf = _leaky_frames(spark, 240, 120, seed=13, partitions=3)
    args = dict(labelCol="y", method=method, numTopFeatures=4, stabilityRuns=3)
    settings = Settings.of({"method": method, "num_features": 4, "stability": 3}, "ml")
    assert not sparse_route(sdf, "features", settings)  # the default: 10,000 elements
    set_limits(sparse_min_width=100)
    assert sparse_route(sdf, "features", settings)
    with pytest.warns(UserWarning, match="possible leak: 'features\\[7\\]'"):
        got = sparse_selection(sdf, "y", "features", settings)
    want = VMISelector(**args).fit(ddf).report
    assert got["execution"] == "sparse" and want["execution"] != "sparse"
    assert got["selected"] == want["selected"] and got["scores"] == want["scores"]
    assert [s["feature"] for s in got["suspects"]] == ["features[7]"]
    assert got["suspects"] == want["suspects"]
    assert got["duplicates"] == want["duplicates"]
    assert got["warnings"] == want["warnings"]
    assert any(w.startswith("possible leak: 'features[7]'") for w in got["warnings"])
    checked = got["sparse"]["suspects"]  # what this path checks, said in the report
    assert checked["kinds"] == ["leak"]
    assert set(checked["not_applied"]) == {"identifier", "missing_leak"}
    assert checked["over"].startswith("every element" if method == "mrmr" else
                                      "the screened elements")

    def timeless(s):
        return {k: v for k, v in s.items() if k != "run_seconds"}
    assert timeless(got["stability"]) == timeless(want["stability"])
    assert got["stability"]["runs"] == 3 and len(set(got["stability"]["run_rows"])) > 1


def test_spark_sparse_checkpoint_resumes_and_refuses_another_input(spark, tmp_path):
    """A checkpointed sparse run stopped after its second step and run again continues
    from the checkpoint (noted) to the uninterrupted run's selection; a checkpoint of
    another input is refused in the dense path's words."""
    from vmi_spark.errors import InputError
    from vmi_spark.params import Settings
    from vmi_spark.spark.select import run_selection
    from vmi_spark.spark.sources.sparse_vectors import sparse_selection

    sdf, ddf = _spark_frames(spark, 300, 200, seed=6, partitions=3)
    values = {"method": "jmi", "num_features": 5, "report_candidates": 3}
    whole = _sparse_report(sdf, values)
    ckpt = str(tmp_path / "ckpt")
    settings = Settings.of({**values, "checkpoint_dir": ckpt}, "ml")

    class Stop(Exception):
        pass

    def stop_after_two(sel):
        if len(sel.selected) == 2:
            raise Stop
    with pytest.raises(Stop):
        sparse_selection(sdf, "y", "features", settings, on_step=stop_after_two)
    got = sparse_selection(sdf, "y", "features", settings)
    assert "resumed from the checkpoint after step 2" in got["warnings"]
    for key in ("selected", "scores", "gains", "candidates"):
        assert got[key] == whole[key], key
    # another input (the same vectors, one row less): refused, as the dense path refuses
    with pytest.raises(InputError) as err:
        sparse_selection(sdf.limit(299), "y", "features", settings)
    dense_dir = str(tmp_path / "dense")
    run_selection(ddf, "y", Settings.of({**values, "checkpoint_dir": dense_dir}, "ml"),
                  features_col="features")
    with pytest.raises(InputError) as dense_err:
        run_selection(ddf.limit(299), "y", Settings.of({**values, "checkpoint_dir": dense_dir},
                                                       "ml"), features_col="features")
    assert str(err.value) == str(dense_err.value).replace(dense_dir, ckpt)
    assert "written for a different input" in str(err.value)
