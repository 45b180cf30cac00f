"""The compiled (numba) loops of the naive bound give the numpy loops' integers bit for bit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from vmi_spark.core import bound, kernels
from vmi_spark.core.bound import NAIVE, StepOps
from vmi_spark.core.inmemory import InMemoryBackend
from vmi_spark.core.tables import conditional

numba_only = pytest.mark.skipif(kernels.BACKEND != "numba", reason="numba is not installed")


def _case(seed, n, d, arity, num_classes, peaked=False):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, num_classes, n)
    codes = ((rng.integers(0, arity, (d, n)) + (rng.random((d, n)) < 0.5) * y) % arity)
    codes = codes.astype(np.uint8)
    if peaked:  # near-deterministic features: posteriors of 1e-200 and smaller
        codes[:4] = (y % arity).astype(np.uint8)
        codes[0, :5] = (codes[0, :5] + 1) % arity
    counts = InMemoryBackend(codes, y, arity, num_classes).feature_counts()
    return codes, y, counts


@numba_only
@pytest.mark.parametrize("num_classes", [2, 3])
@pytest.mark.parametrize("n", [1, 7, 5000, 70001])
def test_compiled_loops_equal_numpy_loops(num_classes, n):
    codes, y, counts = _case(n + num_classes, n, 9, 5, num_classes)
    codes = np.frombuffer(codes.tobytes(), dtype=np.uint8).reshape(codes.shape)  # read-only
    cond = conditional(counts)
    rng = np.random.default_rng(n)
    pattern_post = rng.random((6, num_classes))
    pattern_post /= pattern_post.sum(axis=1, keepdims=True)
    ids = rng.integers(0, 6, n).astype(np.intp)
    rest = (1, 4, 2)
    post = kernels.row_posterior(pattern_post, ids, codes, rest, cond)
    post_np = kernels.row_posterior_np(pattern_post, ids, codes, rest, cond)
    assert post.shape == (num_classes, n)
    assert np.array_equal(post.view(np.int64), post_np.view(np.int64))
    cands = np.array([0, 3, 5, 6, 7, 8])
    got = kernels.mix_log_sums(codes, cands, post, cond)
    assert np.array_equal(got, kernels.mix_log_sums_np(codes, cands, post_np, cond))
    got = kernels.pattern_counts(codes, cands, ids, 6, 5)
    assert got.shape == (len(cands), 5, 6)
    assert np.array_equal(got, kernels.pattern_counts_np(codes, cands, ids, 6, 5))
    for j, i in enumerate(cands):  # a plain count per (x_i, pattern)
        assert got[j].tolist() == [[int(((codes[i] == a) & (ids == p)).sum()) for p in range(6)]
                                   for a in range(5)]


def test_mix_log_sums_is_the_rounded_log_mixture():
    """Against a plain per-row float64 computation, rounded row by row."""
    codes, y, counts = _case(3, 4000, 6, 4, 2)
    cond = conditional(counts)
    rng = np.random.default_rng(0)
    post = rng.random((2, 4000))
    post /= post.sum(axis=0)
    got = kernels.mix_log_sums(codes, np.arange(6), post, cond)
    for i in range(6):
        mix = np.array([post[0, k] * cond[i, codes[i, k], 0] + post[1, k] * cond[i, codes[i, k], 1]
                        for k in range(4000)])
        # the step log (explog.tlog) rounds to the same integer as the C library's log
        # but on a few rows in a million, and then to the next one
        assert abs(got[i] - int(np.sum(np.rint(np.log(mix) * 2.0**32)))) <= 1


@pytest.mark.parametrize("m", [1, 3, 6])
@pytest.mark.parametrize("peaked", [False, True])
def test_naive_partials_same_with_numpy_loops(m, peaked):
    codes, y, counts = _case(m, 9000, 12, 4, 3, peaked=peaked)
    cond = conditional(counts)
    prior = counts[0].sum(axis=0) / counts[0].sum()
    cands = np.ones(12, bool)
    cands[:m] = False
    ops = StepOps(NAIVE, prior, cond, cands, tuple(range(m)))
    first = bound.naive_partials(codes, ops)
    ops = replace(ops, routes=bound.Routes(pattern_ratio=10**12))  # force the per-row loops
    rows = bound.naive_partials(codes, ops)
    with kernels.using("numpy"):
        assert kernels.backend() == "numpy" and kernels.mix_log_sums is kernels.mix_log_sums_np
        rows_np = bound.naive_partials(codes, ops)
    assert np.array_equal(first, rows) and np.array_equal(rows, rows_np)
    assert (first[~cands] == 0).all()


def test_naive_own_is_the_count_weighted_rounded_log():
    counts = np.array([[[3, 0], [1, 2]]])  # one feature, 2 states, 2 classes
    cond = np.array([[[0.75, 0.0], [0.25, 1.0]]])
    expected = 3 * round(np.log(0.75) * 2**32) + 1 * round(np.log(0.25) * 2**32) + 0
    assert bound.naive_own(counts, cond).tolist() == [expected]


def test_naive_bound_from_own_and_partials_matches_float64_definition():
    codes, y, counts = _case(11, 6000, 8, 4, 2)
    cond = conditional(counts)
    prior = counts[0].sum(axis=0) / 6000
    cands = np.ones(8, bool)
    cands[:3] = False
    ops = StepOps(NAIVE, prior, cond, cands, (0, 1, 2))
    total = (bound.naive_partials(codes, ops) + bound.naive_own(counts, cond)) / bound.SCALE
    post = np.tile(prior, (6000, 1))
    for f in range(3):
        post = post * cond[f][codes[f]]
        post /= post.sum(axis=1, keepdims=True)
    for i in range(3, 8):
        c = cond[i][codes[i]]
        ref = np.mean(np.log(c[np.arange(6000), y]) - np.log((post * c).sum(axis=1)))
        assert total[i] / 6000 == pytest.approx(ref, abs=1e-9)


def test_numpy_log_does_not_depend_on_position_or_stride():
    """Both paths take their logs with np.log on buffers of different shapes."""
    x = np.random.default_rng(5).random(40013) ** 40 + 1e-300
    full = np.log(x)
    for start in range(4):
        for stride in (1, 2, 3, 8):
            assert np.array_equal(np.log(x[start::stride]), full[start::stride])
    assert all(np.log(x[i:i + 1])[0] == full[i] for i in range(0, 40013, 1009))
    assert np.array_equal(np.log(x.reshape(-1, 1)).ravel(), full)


def test_environment_variable_forces_numpy_loops():
    code = "import vmi_spark.core.kernels as k; print(k.BACKEND)"
    env = dict(os.environ, VMI_SPARK_KERNELS="numpy")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "numpy"


@numba_only
def test_a_loop_numba_cannot_compile_falls_back_to_numpy():
    from numba.core.errors import TypingError

    def broken(*args):
        raise TypingError("no implementation for these types")

    call = kernels.Guarded(broken, kernels.pattern_counts_np)
    ids = np.array([0, 1, 1, 0], dtype=np.intp)
    codes = np.array([[2, 0, 2, 2]], dtype=np.uint8)
    with kernels.using("numba"):
        with pytest.warns(RuntimeWarning, match="numpy loops"):
            got = call(codes, [0], ids, 2, 3)
        assert got.tolist() == [[[0, 1], [0, 0], [2, 1]]]
        assert kernels.backend() == "numpy" and call.impl is kernels.pattern_counts_np
        assert call(codes, [0], ids, 2, 3).tolist() == got.tolist()  # no second warning
    assert kernels.backend() == "numba"  # put back by the seam


def test_the_loops_seam_binds_the_numpy_twins_and_puts_everything_back():
    before = {name: getattr(kernels, name) for name in (*kernels.LOOPS, "_fused_fold_scores")}
    backend = kernels.backend()
    with pytest.raises(RuntimeError, match="inside"), kernels.using("numpy"):
        assert kernels.backend() == "numpy" and kernels._fused_fold_scores is None
        assert all(getattr(kernels, n) is getattr(kernels, n + "_np") for n in kernels.LOOPS)
        raise RuntimeError("inside")
    assert kernels.backend() == backend
    assert all(getattr(kernels, n) is f for n, f in before.items())
    with pytest.raises(ValueError, match="'numpy', 'numba' or None"):
        with kernels.using("fast"):
            pass
    if backend == "numpy":  # numba is not installed or turned off: it cannot be asked for
        with pytest.raises(ValueError, match="compiled loops are off"):
            with kernels.using("numba"):
                pass


def test_a_numba_that_fails_to_load_falls_back_to_numpy(monkeypatch):
    """A named loop is loaded at its first call; a numba that cannot be imported then is
    a failure like one to compile: a warning, the numpy loop, the same counts."""
    def broken():
        raise kernels._NumbaUnusable("ImportError: numba's compiler is missing")

    monkeypatch.setattr(kernels, "_compiled_loops", broken)
    call = kernels.Guarded("feature_counts", kernels.feature_counts_np)
    assert call.impl is None
    codes, y = np.array([[1, 0, 1]], dtype=np.uint8), np.array([0, 1, 1])
    before = kernels.backend()
    with kernels.using():
        with pytest.warns(RuntimeWarning, match="numpy loops"):
            got = call(codes, y, 2, 2)
        assert got.tolist() == [[[0, 1], [1, 1]]]
        assert kernels.backend() == "numpy" and call.impl is kernels.feature_counts_np
    assert kernels.backend() == before


def test_an_error_that_is_not_numbas_is_raised():
    def wrong(*args):
        raise ValueError("a caller's mistake")

    call = kernels.Guarded(wrong, kernels.feature_counts_np)
    with pytest.raises(ValueError, match="a caller's mistake"):
        call(np.zeros((1, 2), np.uint8), np.zeros(2, int), 1, 1)
    assert call.impl is wrong


def _plain_pair_state(table, codes, fs, y):
    """Per row and class, sum_f log p(x_i | x_f, y) (D, n, L): the definition, one by one."""
    d, n = codes.shape
    num_classes = table.shape[-1]
    out = np.zeros((d, n, num_classes))
    for f in fs:
        for i in range(d):
            for k in range(n):
                out[i, k] += table[i, codes[i, k], codes[f, k]]
    return out


def _plain_pair_bound(full, post, y, m):
    """sum_k rint(2**32 (l(y_k) - log sum_c r(c) e^{l(c)})), l = full / m: the plain formula."""
    n = post.shape[0]
    lc = full / m
    mix = np.maximum((post * np.exp(lc)).sum(axis=1), 1e-300)
    return int(np.rint((lc[np.arange(n), y] - np.log(mix)) * 2.0**32).astype(np.int64).sum())


@numba_only
@pytest.mark.parametrize("num_classes", [2, 3])
@pytest.mark.parametrize("n", [1, 9, 400, 4001])
def test_compiled_pairwise_loops_equal_numpy_loops(num_classes, n):
    rng = np.random.default_rng(n * num_classes)
    d, arity, m = 7, 4, 3
    codes = rng.integers(0, arity, (d, n)).astype(np.uint8)
    y = rng.integers(0, num_classes, n)
    table = np.log(rng.random((d, arity, arity, num_classes)))
    table[rng.random(table.shape) < 0.1] = -np.inf  # log of an empty cell ...
    for f in (1, 4, 5):  # ... but never the own class of a row: the row itself was counted
        t = table[np.arange(d)[:, None], codes, codes[f][None, :], y[None, :]]
        table[np.arange(d)[:, None], codes, codes[f][None, :], y[None, :]] = np.where(
            np.isfinite(t), t, -2.0)
    targets = np.array([0, 2, 3, 6])
    a = np.zeros((d, n, num_classes - 1))
    b = a.copy()
    for f in (1, 4, 5):
        kernels.pair_fold(a, table, codes, codes[f], y, targets)
        kernels.pair_fold_np(b, table, codes, codes[f], y, targets)
    assert np.array_equal(a, b)
    assert not np.isnan(a).any() and not np.isposinf(a).any()
    # the ratios are the per-class sums minus the own class's sum
    full = _plain_pair_state(table, codes, (1, 4, 5), y)
    rows = np.arange(n)
    oth = kernels.other_classes(y, num_classes)
    expected = full[:, rows[:, None], oth] - full[:, rows, y][:, :, None]
    np.testing.assert_allclose(a[targets], expected[targets], rtol=1e-12, atol=1e-12)
    post = rng.random((n, num_classes))
    post /= post.sum(axis=1, keepdims=True)
    got = kernels.pair_scores(a, post, y, targets, m)
    assert np.array_equal(got, kernels.pair_scores_np(a, post, y, targets, m))
    for j, i in enumerate(targets):  # and against the plain formula on the per-class sums
        assert abs(_plain_pair_bound(full[i], post, y, m) - got[j]) <= n  # rounding per row


@pytest.mark.parametrize("num_classes", [2, 3, 5])
@pytest.mark.parametrize("n", [1, 255, 256, 257, 4001])
def test_fused_fold_and_score_is_the_fold_then_the_score(num_classes, n):
    """pair_fold_scores (a stretch of rows folded and then scored) leaves the candidates'
    ratios as pair_fold does and returns pair_scores' integers, compiled and numpy, on a
    contiguous state and on a strided one; the other features' ratios are untouched."""
    rng = np.random.default_rng(n * 10 + num_classes)
    d, arity, m, f = 7, 4, 3, 4
    codes = rng.integers(0, arity, (d, n)).astype(np.uint8)
    y = rng.integers(0, num_classes, n)
    table = np.log(rng.random((d, arity, arity, num_classes)))
    table[rng.random(table.shape) < 0.1] = -np.inf  # an empty cell of another class ...
    own = (np.arange(d)[:, None], codes, codes[f][None, :], y[None, :])
    table[own] = np.where(np.isfinite(table[own]), table[own], -2.0)  # ... never the own
    start = rng.normal(0.0, 3.0, (d, n, num_classes - 1))
    start[rng.random(start.shape) < 0.02] = -np.inf  # a class already ruled out
    post = rng.random((n, num_classes)) ** 6
    post[rng.random(n) < 0.05, 0] = 0.0  # mixtures down at the TINY floor
    post /= post.sum(axis=1, keepdims=True)
    cands = np.array([0, 2, 3, 6])
    want_state = start.copy()
    kernels.pair_fold_np(want_state, table, codes, codes[f], y, cands)
    want = kernels.pair_scores_np(want_state, post, y, cands, m)
    assert (want != 0).all()
    for fused in (kernels.pair_fold_scores, kernels.pair_fold_scores_np):
        state = start.copy()
        assert np.array_equal(fused(state, table, codes, codes[f], y, post, cands, m), want)
        assert np.array_equal(state, want_state)
        wide = np.zeros((d, n, num_classes))  # the same ratios, not contiguous
        strided = wide[:, :, :num_classes - 1]
        strided[:] = start
        assert np.array_equal(fused(strided, table, codes, codes[f], y, post, cands, m), want)
        assert np.array_equal(strided, want_state) and not wide[:, :, -1].any()
    assert np.array_equal(want_state[[1, 4, 5]], start[[1, 4, 5]])


@pytest.mark.parametrize("num_classes", [2, 3, 4])
@pytest.mark.parametrize("n", [1, 300, 4001])
def test_compiled_pairwise_posterior_equals_numpy_and_the_plain_product(num_classes, n):
    """pair_posterior: the other classes times e^{ratio / m}, then each row normalised; the
    compiled loop gives the numpy loop's bits, and both the plain normalised product's values."""
    rng = np.random.default_rng(n + num_classes)
    y = rng.integers(0, num_classes, n)
    post = rng.random((n, num_classes)) ** 4
    post /= post.sum(axis=1, keepdims=True)
    ratio = rng.normal(0.0, 4.0, (n, num_classes - 1))
    ratio[rng.random(ratio.shape) < 0.05] = -np.inf  # a class ruled out: its term becomes 0
    ratio[0, 0] = -np.inf
    m = 3
    plain = post.copy()
    rows = np.arange(n)[:, None]
    plain[rows, kernels.other_classes(y, num_classes)] *= np.exp(ratio / m)
    plain /= plain.sum(axis=1, keepdims=True)
    got, want = post.copy(), post.copy()
    kernels.pair_posterior(got, ratio, y, m)
    kernels.pair_posterior_np(want, ratio, y, m)
    assert np.array_equal(got, want)
    np.testing.assert_allclose(got, plain, rtol=1e-13, atol=1e-300)
    ruled = np.zeros(post.shape, dtype=bool)
    ruled[rows, kernels.other_classes(y, num_classes)] = np.isneginf(ratio)
    assert ruled.any() and (got[ruled] == 0).all() and (got[~ruled] > 0).all()


@numba_only
def test_a_loop_failing_after_the_fold_does_not_fold_twice():
    """A strided state: pair_fold_scores folds, then scores, each compiled loop guarded on
    its own. If the score's loop cannot compile, the numpy score runs on the state folded
    once (a guard around both would have run the numpy fold on it a second time)."""
    from numba.core.errors import TypingError

    rng = np.random.default_rng(3)
    d, n, arity, f, m = 5, 300, 3, 1, 2
    codes = rng.integers(0, arity, (d, n)).astype(np.uint8)
    y = rng.integers(0, 3, n)
    table = np.log(rng.random((d, arity, arity, 3)))
    post = rng.random((n, 3))
    post /= post.sum(axis=1, keepdims=True)
    start = rng.normal(0.0, 2.0, (d, n, 2))
    cands = np.array([0, 2, 4])
    want_state = start.copy()
    want = kernels.pair_fold_scores_np(want_state, table, codes, codes[f], y, post, cands, m)

    def fails(*args):
        raise TypingError("cannot compile here")

    wide = np.zeros((d, n, 3))
    state = wide[:, :, :2]
    state[:] = start
    with kernels.using(), pytest.warns(RuntimeWarning, match="numba could not compile"):
        kernels.pair_scores.impl = fails  # the compiled pair_scores, put back by the seam
        got = kernels.pair_fold_scores(state, table, codes, codes[f], y, post, cands, m)
    assert np.array_equal(got, want) and np.array_equal(state, want_state)


@pytest.mark.parametrize("n", [0, 5])
def test_pairwise_posterior_of_a_strided_or_empty_chunk(n):
    """pair_posterior on a posterior that is a strided view, and on no rows."""
    rng = np.random.default_rng(n)
    y = rng.integers(0, 2, n)
    wide = rng.random((n, 4)) + 0.1
    post = wide[:, ::2]  # not contiguous
    post /= post.sum(axis=1, keepdims=True)
    ratio = rng.normal(0.0, 1.0, (n, 1))
    want = post.copy()
    kernels.pair_posterior_np(want, ratio, y, 2)
    kernels.pair_posterior(post, ratio, y, 2)
    assert np.array_equal(post, want) and np.array_equal(wide[:, ::2], want)


def test_other_classes():
    assert kernels.other_classes(np.array([0, 1, 2]), 3).tolist() == [[1, 2], [0, 2], [0, 1]]
    assert kernels.other_classes(np.array([1, 0]), 2).tolist() == [[0], [1]]


@pytest.mark.parametrize("num_classes", [2, 3])
@pytest.mark.parametrize("n, num", [(1, 1), (50, 3), (6000, 16), (20000, 250)])
def test_cell_scores_equal_the_per_row_scores(num_classes, n, num):
    """Rows grouped by (pattern, x_i, y) give pair_scores' integers, compiled or numpy."""
    rng = np.random.default_rng(n + num)
    d, arity, m = 6, 5, 3
    codes = rng.integers(0, arity, (d, n)).astype(np.uint8)
    y = rng.integers(0, num_classes, n)
    ids = rng.integers(0, num, n).astype(np.intp)
    # every row's terms are its cell's: log_ratio[i, k] = v[i, ids[k], codes[i, k], y[k]]
    v = np.log(rng.random((d, num, arity, num_classes, num_classes - 1))) * 4
    v[rng.random(v.shape) < 0.05] = -700.0  # nearly impossible classes
    log_ratio = v[np.arange(d)[:, None], ids[None, :], codes.astype(np.intp), y[None, :]]
    # and its posterior that of its (pattern, y)
    pp = rng.random((num, num_classes, num_classes)) ** 8
    post = (pp / pp.sum(axis=2, keepdims=True))[ids, y]
    cands = np.array([0, 2, 3, 5])
    rows = kernels.pair_scores(log_ratio, post, y, cands, m)
    assert np.array_equal(rows, kernels.pair_scores_np(log_ratio, post, y, cands, m))
    cells = kernels.pair_cell_scores(log_ratio, post, codes, ids, y, cands, m, arity, num)
    assert np.array_equal(cells, rows)
    assert np.array_equal(kernels.pair_cell_scores_np(log_ratio, post, codes, ids, y, cands, m,
                                                      arity, num), rows)


@pytest.mark.parametrize("m", [2, 4])
def test_pairwise_partials_same_with_numpy_loops(m):
    from vmi_spark.core.bound import PAIRWISE, ChunkState, pair_counts, pairwise_partials
    from vmi_spark.core.tables import pair_conditional, safe_log

    codes, y, counts = _case(m + 20, 5000, 10, 4, 2, peaked=True)
    cond = conditional(counts)
    prior = counts[0].sum(axis=0) / counts[0].sum()
    tables = {f: safe_log(pair_conditional(pair_counts(codes, y, f, 4, 2))) for f in range(m)}
    cands = np.ones(10, bool)
    cands[:m] = False
    ops = StepOps(PAIRWISE, prior, cond, cands, tuple(range(m)), tables)
    fast = pairwise_partials(codes, y, ChunkState.initial(prior, 5000, 10), ops)
    with kernels.using("numpy"):
        slow = pairwise_partials(codes, y, ChunkState.initial(prior, 5000, 10), ops)
    assert np.array_equal(fast, slow) and (fast[:m] == 0).all()


_COUNT_ROWS = [0, 1, 7, 8, 9, 300, 301, 2000, 2003]


@pytest.mark.parametrize("n", _COUNT_ROWS)
@pytest.mark.parametrize("num_classes", [2, 3])
def test_pair_counts_against_a_plain_loop(n, num_classes):
    # n around the count loop's interleaved histograms (whole turns, remainders) and its
    # choice of one, four or eight of them (count_ways: all three occur, checked below)
    rng = np.random.default_rng(4 + n)
    codes = rng.integers(0, 3, (4, n)).astype(np.uint8)
    y = rng.integers(0, num_classes, n)
    expected = np.zeros((4, 3, 3, num_classes), dtype=np.int64)
    for i in range(4):
        for k in range(n):
            expected[i, codes[i, k], codes[2, k], y[k]] += 1
    assert np.array_equal(kernels.pair_counts(codes, y, 2, 3, num_classes), expected)
    assert np.array_equal(kernels.pair_counts_np(codes, y, 2, 3, num_classes), expected)
    assert np.array_equal(bound.pair_counts_many(codes, y, [2, 0], 3, num_classes)[0], expected)


@pytest.mark.parametrize("n", _COUNT_ROWS)
@pytest.mark.parametrize("num_classes", [2, 3])
def test_feature_counts_against_a_plain_loop(n, num_classes):
    # the same row counts as the pair counts' (whole turns of the interleaved histograms,
    # remainders; one, four and eight histograms: checked below), skewed codes included
    rng = np.random.default_rng(40 + n)
    codes = rng.integers(0, 3, (5, n)).astype(np.uint8)
    codes[4] = 2  # every row in one cell
    y = rng.integers(0, num_classes, n)
    expected = np.zeros((5, 3, num_classes), dtype=np.int64)
    for i in range(5):
        for k in range(n):
            expected[i, codes[i, k], y[k]] += 1
    assert np.array_equal(kernels.feature_counts(codes, y, 3, num_classes), expected)
    assert np.array_equal(kernels.feature_counts_np(codes, y, 3, num_classes), expected)
    assert np.array_equal(bound.feature_counts(codes, y, 3, num_classes), expected)
    w = rng.integers(0, 5, n)
    weighted = np.zeros((5, 3, num_classes), dtype=np.int64)
    for i in range(5):
        for k in range(n):
            weighted[i, codes[i, k], y[k]] += w[k]
    assert np.array_equal(kernels.feature_counts_w(codes, y, 3, num_classes, w), weighted)
    assert np.array_equal(kernels.feature_counts_w_np(codes, y, 3, num_classes, w), weighted)
    assert np.array_equal(bound.feature_counts(codes, y, 3, num_classes, w), weighted)


@numba_only  # the histograms are the compiled count loop's
@pytest.mark.parametrize("num_classes", [2, 3])
def test_the_pair_count_tests_meet_every_number_of_histograms(num_classes):
    from vmi_spark.core.kernels_numba import count_ways

    assert {count_ways(n, 9 * num_classes) for n in _COUNT_ROWS} == {1, 4, 8}
    assert {count_ways(n, 3 * num_classes) for n in _COUNT_ROWS} == {1, 4, 8}
    assert count_ways(64 * 10, 10) == 8 and count_ways(64 * 10 - 1, 10) == 4
    assert count_ways(4 * 10, 10) == 4 and count_ways(4 * 10 - 1, 10) == 1


# Every compiled loop on two and three classes: the naive and pairwise bounds (per-row and
# pattern kernels, per-row and per-cell pairwise scores) and the classic criteria's pair
# counts. Prints what it selected, so that two processes can be compared.
_EVERY_LOOP = """
import json
import numpy as np
from vmi_spark.core.greedy import select_classic, select_vmi
from vmi_spark.core.inmemory import InMemoryBackend
out = []
for num_classes in (2, 3):
    rng = np.random.default_rng(num_classes)
    n, d = 30_000, 12
    y = rng.integers(0, num_classes, n)
    codes = ((rng.integers(0, 6, (d, n)) + (rng.random((d, n)) < 0.5) * y) % 6).astype(np.uint8)
    for method in ("vmi_naive", "vmi_pairwise"):
        b = InMemoryBackend(codes, y, arity=6, num_classes=num_classes)
        out.append(list(select_vmi(b, method, 8).selected))
    b = InMemoryBackend(codes, y, arity=6, num_classes=num_classes)
    out.append(list(select_classic(b, "jmi", 4).selected))
print(json.dumps(out))
"""


@pytest.mark.system  # two fresh processes that compile and then load every loop
@numba_only
def test_a_second_process_loads_every_compiled_loop_from_the_cache(tmp_path):
    # numba keys a cached function by its closure's pickled bytes; a loop that closed over
    # another compiled function (a dispatcher pickles with an id of its process) missed
    # the cache in every process: compiled again and written again, one file per process
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), NUMBA_DEBUG_CACHE="1")
    env.pop("VMI_SPARK_KERNELS", None)

    def run():
        out = subprocess.run([sys.executable, "-c", _EVERY_LOOP], env=env, capture_output=True,
                             text=True, check=True, timeout=900)
        # a loop that fell back to numpy would give the same answers: only its warning says
        assert "could not compile" not in out.stderr, out.stderr
        lines = out.stdout.splitlines()
        saved = [line for line in lines if line.startswith("[cache] data saved")]
        return lines[-1], saved, sorted(p.name for p in tmp_path.rglob("*.nbc"))

    first, saved_first, files_first = run()
    second, saved_second, files_second = run()
    assert saved_first and files_first  # the first process compiled the loops and cached them
    assert saved_second == [], saved_second  # the second loaded every one of them
    assert files_second == files_first
    assert second == first  # and selected the same


_ONE_LOOP = """
import json
import numpy as np
from vmi_spark.core import kernels, kernels_numba
rng = np.random.default_rng(0)
codes = rng.integers(0, 4, (3, 500)).astype(np.uint8)
ids = rng.integers(0, 5, 500)
got = kernels.pattern_counts(codes, [0, 2], ids, 5, 4)
print(json.dumps([kernels.BACKEND, kernels_numba.CACHE, kernels_numba.__file__,
                  got.tolist() == kernels.pattern_counts_np(codes, [0, 2], ids, 5, 4).tolist()]))
"""


@pytest.mark.system  # a fresh process that compiles a loop
@numba_only
def test_without_a_cache_directory_the_loops_are_compiled_in_each_process(tmp_path):
    """No writable cache directory anywhere (the package's ``__pycache__`` is a file, no
    ``NUMBA_CACHE_DIR``, the user cache under a file): numba refuses to cache, and the loops
    are compiled without a cache instead of falling back to numpy."""
    import shutil
    from pathlib import Path

    pkg = tmp_path / "pkg"
    shutil.copytree(Path(kernels.__file__).parents[1], pkg / "vmi_spark",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (pkg / "vmi_spark" / "core" / "__pycache__").write_text("")
    (tmp_path / "file").write_text("")
    env = dict(os.environ, PYTHONPATH=str(pkg), PYTHONDONTWRITEBYTECODE="1",
               XDG_CACHE_HOME=str(tmp_path / "file" / "cache"), HOME=str(tmp_path / "file"))
    env.pop("NUMBA_CACHE_DIR", None)
    env.pop("VMI_SPARK_KERNELS", None)
    out = subprocess.run([sys.executable, "-c", _ONE_LOOP], env=env, capture_output=True,
                         text=True, check=True, timeout=600, cwd=tmp_path)
    assert "could not compile" not in out.stderr, out.stderr
    backend, cached, path, same = json.loads(out.stdout.splitlines()[-1])
    assert path.startswith(str(pkg))  # the copy ran
    assert (backend, cached, same) == ("numba", False, True)


@pytest.mark.system  # fresh processes that compile a loop
@numba_only
@pytest.mark.parametrize("broken", ["garbage", "directory"])
def test_a_broken_cache_never_fails_a_run(tmp_path, broken):
    """A cache entry numba cannot read (``garbage``: not its index) or neither read nor
    write (``directory``: a directory where its index goes): the loop is compiled in the
    process and gives its answer, with a warning; numba alone let the error out of the
    call and the run failed."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    env.pop("VMI_SPARK_KERNELS", None)

    def run():
        return subprocess.run([sys.executable, "-c", _ONE_LOOP], env=env, capture_output=True,
                              text=True, check=True, timeout=600)

    first = run()
    indexes = list(tmp_path.rglob("*.nbi"))
    assert indexes  # the first process cached the loop
    for index in indexes:
        index.unlink()
        if broken == "garbage":
            index.write_text("garbage\n")
        else:
            index.mkdir()
    again = run()
    assert "could not compile" not in again.stderr, again.stderr
    assert "numba's cache could not read" in again.stderr, again.stderr
    backend, cached, _, same = json.loads(again.stdout.splitlines()[-1])
    assert (backend, cached, same) == ("numba", True, True)
    assert again.stdout.splitlines()[-1] == first.stdout.splitlines()[-1]


@numba_only
def test_the_loops_cache_is_never_put_in_the_working_directory(tmp_path, monkeypatch):
    """numba's user-wide cache is ``$XDG_CACHE_HOME/numba``: with ``XDG_CACHE_HOME`` set but
    empty that is ``numba/`` in the working directory, which numba creates. The package's
    locator refuses it (the loops then compile in the process); an absolute
    ``XDG_CACHE_HOME`` is used as numba would."""
    from numba.core.caching import UserWideCacheLocator

    from vmi_spark.core import kernels_numba as kn

    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    fn, src = kn.count_ways, kn.__file__
    assert kn._UserWide.from_function(fn, src) is None
    assert list(work.iterdir()) == []
    assert kn._Zip.from_function(fn, src) is None  # not in a zip either way
    assert UserWideCacheLocator.from_function(fn, src) is not None  # numba's own ...
    assert (work / "numba").is_dir()  # ... fills the working directory
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    found = kn._UserWide.from_function(fn, src)
    assert found is not None
    assert found.get_cache_path().startswith(str(tmp_path / "cache" / "numba"))
    assert kn._UserWide in kn._CacheImpl._locator_classes
    assert UserWideCacheLocator not in kn._CacheImpl._locator_classes


@pytest.mark.system  # fresh processes that compile a loop
@numba_only
def test_an_edit_of_what_the_loops_inline_is_compiled_again(tmp_path):
    """numba keys a cached loop by its own file and bytecode; the loops also take explog's
    exp and log, logtable's table and kernels_numpy's constants. An edit of one of those
    (a checkout that keeps its cache) compiles the loops again; an edit elsewhere in the
    package loads them from the cache."""
    import shutil
    from pathlib import Path

    pkg = tmp_path / "pkg"
    shutil.copytree(Path(kernels.__file__).parents[1], pkg / "vmi_spark",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = dict(os.environ, PYTHONPATH=str(pkg), PYTHONDONTWRITEBYTECODE="1",
               NUMBA_CACHE_DIR=str(tmp_path / "cache"), NUMBA_DEBUG_CACHE="1")
    env.pop("VMI_SPARK_KERNELS", None)

    def saved_after(edit: str | None) -> list[str]:
        if edit:
            with open(pkg / "vmi_spark" / edit, "a") as f:
                f.write("\n# an edit\n")
        out = subprocess.run([sys.executable, "-c", _ONE_LOOP], env=env, capture_output=True,
                             text=True, check=True, timeout=600, cwd=tmp_path)
        backend, cached, path, same = json.loads(out.stdout.splitlines()[-1])
        assert path.startswith(str(pkg)) and (backend, cached, same) == ("numba", True, True)
        return [line for line in out.stdout.splitlines() if line.startswith("[cache] data saved")]

    assert saved_after(None)  # compiled and cached
    assert saved_after(None) == []  # loaded
    assert saved_after("report.py") == []  # not inlined: loaded
    for inlined in ("core/explog.py", "core/logtable.py", "core/kernels_numpy.py"):
        assert saved_after(inlined), inlined  # compiled again
        assert saved_after(None) == [], inlined  # and loaded after that


_HASH_LOOP = """
import json
import numpy as np
import pyarrow as pa
from vmi_spark.core import kernels_numba
from vmi_spark.spark.sources import sparkhash
values = np.random.default_rng(0).standard_normal(500)
seed = np.full(500, sparkhash.SEED, dtype=np.uint64)
got = sparkhash.hash_column(pa.array(values), seed)
want = sparkhash.hash_doubles(values, np.ones(500, dtype=bool), seed)
loop = sparkhash._hash_loop()
print(json.dumps([type(loop._cache).__name__, kernels_numba.CACHE, bool((got == want).all())]))
"""


@pytest.mark.system  # fresh processes that compile a loop
@numba_only
def test_the_sampling_hash_loop_is_cached_like_the_step_loops(tmp_path):
    """The bin-edge sample's compiled hash (spark/sources/sparkhash.py) uses the package's
    cache (never the working directory; an entry that cannot be read is compiled in the
    process with a warning), and equals the numpy hash either way."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))

    def run():
        return subprocess.run([sys.executable, "-c", _HASH_LOOP], env=env, capture_output=True,
                              text=True, check=True, timeout=600, cwd=tmp_path)

    first = run()
    assert json.loads(first.stdout.splitlines()[-1]) == ["_SafeCache", True, True]
    indexes = [p for p in tmp_path.rglob("*.nbi") if "sparkhash" in p.name]
    assert indexes  # the first process cached the hash loop
    for index in indexes:
        index.unlink()
        index.write_text("garbage\n")
    again = run()
    assert "numba's cache could not read" in again.stderr, again.stderr
    assert json.loads(again.stdout.splitlines()[-1]) == ["_SafeCache", True, True]
