"""The classic selectors (MIM, mRMR, JMI, CMIM, CIFE, SPEC_CMI) against plain references.

The references below share no code with ``vmi_spark.core.criteria``: every
information quantity is a dict-counted plug-in estimate from the raw columns,
and every greedy step re-evaluates the textbook criterion over the whole
selected set (no running sums).
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from vmi_spark.core import criteria
from vmi_spark.core.bound import pair_counts, pair_counts_many
from vmi_spark.core.criteria import (
    CLASSIC_METHODS,
    GREEDY_METHODS,
    conditional_mutual_information,
    label_conditional_mutual_information,
    label_mutual_information,
    pair_conditional_mutual_information,
    pair_mutual_information,
)
from vmi_spark.core.greedy import StopSelection, select_classic
from vmi_spark.core.inmemory import InMemoryBackend

CHUNK_ROWS = (5, 64, 65536)
SEEDS = (0, 1, 2, 3)
TIE = 1e-12  # the references treat values this close as a tie (-> lowest index)


# ---------------------------------------------------------------------------
# plain references
# ---------------------------------------------------------------------------

def ref_entropy(*cols) -> float:
    n = len(cols[0])
    h = 0.0
    for c in Counter(zip(*cols)).values():
        p = c / n
        h -= p * math.log(p)
    return h


def ref_mi(x, y) -> float:
    return ref_entropy(x) + ref_entropy(y) - ref_entropy(x, y)


def ref_cmi(x, y, z) -> float:
    """I(x; y | z)."""
    return ref_entropy(x, z) + ref_entropy(y, z) - ref_entropy(x, y, z) - ref_entropy(z)


def ref_criterion(method, cols, y, i, selected, cache):
    def mi(a, b):
        key = ("mi", min(a, b), max(a, b))
        if key not in cache:
            cache[key] = ref_mi(cols[a], cols[b])
        return cache[key]

    def cmi_y(a, b):  # I(x_a; x_b | y)
        key = ("cmi_y", min(a, b), max(a, b))
        if key not in cache:
            cache[key] = ref_cmi(cols[a], cols[b], y)
        return cache[key]

    def rel_given(a, b):  # I(x_a; y | x_b)
        key = ("rel", a, b)
        if key not in cache:
            cache[key] = ref_cmi(cols[a], y, cols[b])
        return cache[key]

    rel = cache.setdefault(("rel", i), ref_mi(cols[i], y))
    if not selected or method == "mim":
        return rel
    if method == "mrmr":
        return rel - sum(mi(i, j) for j in selected) / len(selected)
    if method == "jmi":
        return sum(rel - mi(i, j) + cmi_y(i, j) for j in selected)
    if method == "cife":
        return rel - sum(mi(i, j) - cmi_y(i, j) for j in selected)
    if method == "cmim":
        return min(rel_given(i, j) for j in selected)
    raise ValueError(method)


def ref_argmax(values: dict[int, float]) -> int:
    top = max(values.values())
    return min(i for i, v in values.items() if v >= top - TIE)


def ref_greedy(method, X, y, k):
    cols = [tuple(c) for c in X]
    y = tuple(y)
    cache: dict = {}
    selected, scores = [], []
    for _ in range(min(k, len(cols))):
        values = {i: ref_criterion(method, cols, y, i, selected, cache)
                  for i in range(len(cols)) if i not in selected}
        best = ref_argmax(values)
        selected.append(best)
        scores.append(values[best])
    return selected, scores


def ref_spec_cmi(X, y, k):
    cols = [tuple(c) for c in X]
    y = tuple(y)
    d = len(cols)
    q = np.empty((d, d))
    for i in range(d):
        for j in range(d):
            q[i, j] = (ref_mi(cols[i], y) if i == j
                       else (ref_cmi(cols[i], y, cols[j]) + ref_cmi(cols[j], y, cols[i])) / 2)
    vals, vecs = np.linalg.eig(q)  # the general (non-symmetric) solver, unlike the code
    v = np.real(vecs[:, int(np.argmax(np.real(vals)))])
    v = v / np.linalg.norm(v)
    if v.sum() < 0:
        v = -v
    remaining = dict(enumerate(v))
    selected = []
    while remaining and len(selected) < k:
        best = min(i for i, x in remaining.items() if x >= max(remaining.values()) - 1e-10)
        selected.append(best)
        del remaining[best]
    return selected, [float(v[i]) for i in selected]


# ---------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------

def make_data(seed: int):
    """Random discrete data with structure: informative, redundant, XOR, relabelled copy, constant."""
    rng = np.random.default_rng(seed)
    arity, classes, n, d = [(2, 2, 120, 14), (3, 3, 150, 13), (4, 2, 90, 12), (3, 4, 200, 15)][seed % 4]
    X = rng.integers(0, arity, size=(d, n))
    # label driven by a few features plus noise
    score = X[0] + (X[1] ^ X[2]) % arity + (X[3] > 0)
    y = np.where(rng.random(n) < 0.25, rng.integers(0, classes, n), score % classes)
    X[4] = np.where(rng.random(n) < 0.2, rng.integers(0, arity, n), X[0])  # noisy copy of x0
    perm = rng.permutation(arity)
    X[5] = perm[X[3]]  # relabelled exact copy of x3: exact ties everywhere
    X[6] = 0  # constant column
    return X.astype(np.uint8), y.astype(np.int64)


def run(X, y, method, k, chunk_rows, **kw):
    return select_classic(InMemoryBackend(X, y, chunk_rows=chunk_rows), method, k, **kw)


# ---------------------------------------------------------------------------
# information quantities
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("seed", SEEDS)
def test_information_quantities_match_plain_estimates(seed):
    X, y = make_data(seed)
    backend = InMemoryBackend(X, y)
    cols = [tuple(c) for c in X]
    rel = label_mutual_information(backend.feature_counts())
    np.testing.assert_allclose(rel, [ref_mi(c, tuple(y)) for c in cols], rtol=0, atol=1e-12)
    for j in (0, 3, X.shape[0] - 1):
        table = backend.pair_counts(j)
        np.testing.assert_allclose(pair_mutual_information(table),
                                   [ref_mi(c, cols[j]) for c in cols], rtol=0, atol=1e-12)
        np.testing.assert_allclose(pair_conditional_mutual_information(table),
                                   [ref_cmi(c, cols[j], tuple(y)) for c in cols],
                                   rtol=0, atol=1e-12)
        np.testing.assert_allclose(label_conditional_mutual_information(table),
                                   [ref_cmi(c, tuple(y), cols[j]) for c in cols],
                                   rtol=0, atol=1e-12)


def test_exactly_independent_samples_give_exact_zero():
    # full factorial design: x0, x1, y mutually independent in the sample
    a, b, c = np.meshgrid(np.arange(3), np.arange(2), np.arange(4), indexing="ij")
    X = np.stack([a.ravel(), b.ravel(), np.zeros(a.size, dtype=int)]).astype(np.uint8)
    y = c.ravel()
    backend = InMemoryBackend(X, y)
    assert np.all(label_mutual_information(backend.feature_counts()) == 0.0)
    table = backend.pair_counts(1)
    assert pair_mutual_information(table)[0] == 0.0
    assert pair_conditional_mutual_information(table)[0] == 0.0
    assert np.all(label_conditional_mutual_information(table) == 0.0)
    # a dependent table is strictly positive
    assert conditional_mutual_information(np.array([[[[5], [0]], [[0], [5]]]]))[0] > 0


def test_relabelled_features_tie_exactly():
    X, y = make_data(1)
    backend = InMemoryBackend(X, y)
    rel = label_mutual_information(backend.feature_counts())
    assert rel[3] == rel[5]
    for j in (0, 1, 2):
        table = backend.pair_counts(j)
        for fn in (pair_mutual_information, pair_conditional_mutual_information,
                   label_conditional_mutual_information):
            v = fn(table)
            assert v[3] == v[5]


@pytest.mark.parametrize("seed", (0, 1, 4))
def test_relabelled_features_tie_exactly_with_many_cells(seed):
    """With 6 values and 5 classes a naive sum over the cells differs in the last bits
    between a feature and its relabelled copy (for these seeds); the ranking must not."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 6, 5000)
    y = (x + rng.integers(0, 3, 5000)) % 5
    X = np.stack([x, rng.permutation(6)[x], rng.integers(0, 6, 5000)]).astype(np.uint8)
    backend = InMemoryBackend(X, y)
    rel = label_mutual_information(backend.feature_counts())
    assert rel[0] == rel[1]
    table = backend.pair_counts(2)
    for fn in (pair_mutual_information, pair_conditional_mutual_information,
               label_conditional_mutual_information):
        v = fn(table)
        assert v[0] == v[1]
    for method in ("mim", "spec_cmi"):
        assert select_classic(backend, method, 2).selected == [0, 1]


def test_pair_counts_many_matches_pair_counts():
    X, y = make_data(2)
    arity, classes = int(X.max()) + 1, int(y.max()) + 1
    fs = [3, 0, 7, 3]
    many = pair_counts_many(X, y, fs, arity, classes)
    assert many.shape == (len(fs), X.shape[0], arity, arity, classes)
    assert many.dtype == np.int64
    for k, f in enumerate(fs):
        np.testing.assert_array_equal(many[k], pair_counts(X, y, f, arity, classes))
    assert pair_counts_many(X, y, [], arity, classes).shape[0] == 0
    for rows in CHUNK_ROWS:
        backend = InMemoryBackend(X, y, chunk_rows=rows)
        np.testing.assert_array_equal(backend.pair_counts_many(fs), many)


# ---------------------------------------------------------------------------
# selections
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("method", GREEDY_METHODS)
@pytest.mark.parametrize("seed", SEEDS)
def test_greedy_criteria_match_reference(method, seed):
    X, y = make_data(seed)
    k = 8
    want_sel, want_scores = ref_greedy(method, X, y, k)
    results = [run(X, y, method, k, rows) for rows in CHUNK_ROWS]
    for res in results:
        assert res.method == method
        assert res.selected == want_sel
        np.testing.assert_allclose(res.scores, want_scores, rtol=0, atol=1e-9)
        assert res.gains == res.scores
        assert res.blocks == [0] * k
        assert res.num_rows == X.shape[1]
        # partition independence: bit-identical for every block size
        assert res.scores == results[0].scores
        assert res.selected == results[0].selected


@pytest.mark.parametrize("seed", SEEDS)
def test_spec_cmi_matches_reference(seed):
    X, y = make_data(seed)
    k = 8
    want_sel, want_scores = ref_spec_cmi(X, y, k)
    results = [run(X, y, "spec_cmi", k, rows) for rows in CHUNK_ROWS]
    # a tiny byte budget: one feature per bulk request; the same matrix
    backend = CountingBackend(InMemoryBackend(X, y, chunk_rows=64))
    one = criteria.spec_cmi_matrix(backend, budget=1)
    assert np.array_equal(one, criteria.spec_cmi_matrix(InMemoryBackend(X, y, chunk_rows=64)))
    assert [arg for name, arg in backend.calls if name == "pair_counts_many"] == [
        [f] for f in range(X.shape[0])]
    for res in results:
        assert res.selected == want_sel
        np.testing.assert_allclose(res.scores, want_scores, rtol=0, atol=1e-9)
        assert res.blocks == [0] * k
        assert res.scores == results[0].scores


def test_methods_disagree_on_the_test_data():
    """Guard against a vacuous suite: the criteria really do pick different sets here."""
    X, y = make_data(1)
    picks = {m: tuple(run(X, y, m, 6, 64).selected) for m in CLASSIC_METHODS}
    assert len(set(picks.values())) >= 4
    # the relabelled copy (5) of x3 is never picked right after x3 by a redundancy-aware rule
    for m in ("mrmr", "jmi", "cmim"):
        sel = list(picks[m])
        if 3 in sel and 5 in sel:
            assert abs(sel.index(3) - sel.index(5)) > 1


class CountingBackend:
    def __init__(self, inner):
        self.inner = inner
        self.calls: list[tuple[str, object]] = []

    def feature_counts(self):
        self.calls.append(("feature_counts", None))
        return self.inner.feature_counts()

    def pair_counts(self, f):
        self.calls.append(("pair_counts", f))
        return self.inner.pair_counts(f)

    def pair_counts_many(self, fs):
        self.calls.append(("pair_counts_many", list(fs)))
        return self.inner.pair_counts_many(fs)


@pytest.mark.parametrize("method", GREEDY_METHODS)
def test_greedy_uses_one_pair_pass_per_step(method):
    X, y = make_data(0)
    backend = CountingBackend(InMemoryBackend(X, y, chunk_rows=16))
    res = select_classic(backend, method, 6)
    pairs = [arg for name, arg in backend.calls if name == "pair_counts"]
    assert [name for name, _ in backend.calls].count("feature_counts") == 1
    assert not any(name == "pair_counts_many" for name, _ in backend.calls)
    if method == "mim":
        assert pairs == []
    else:
        assert pairs == res.selected[:-1]


def test_spec_cmi_uses_bulk_pair_counts():
    X, y = make_data(3)
    d, arity, classes = X.shape[0], int(X.max()) + 1, int(y.max()) + 1
    backend = CountingBackend(InMemoryBackend(X, y))
    select_classic(backend, "spec_cmi", 5)  # the default budget: one request here
    assert [arg for name, arg in backend.calls if name.startswith("pair_counts")] == [
        list(range(d))]
    backend = CountingBackend(InMemoryBackend(X, y))
    criteria.spec_cmi_matrix(backend, budget=4 * d * arity * arity * classes * 8)
    bulk = [arg for name, arg in backend.calls if name == "pair_counts_many"]
    assert not any(name == "pair_counts" for name, _ in backend.calls)
    assert [len(fs) for fs in bulk] == [4] * (d // 4) + ([d % 4] if d % 4 else [])
    assert sorted(f for fs in bulk for f in fs) == list(range(d))


@pytest.mark.parametrize("method", CLASSIC_METHODS)
def test_report_candidates_and_on_step(method):
    X, y = make_data(2)
    seen = []

    def on_step(sel):
        seen.append(list(sel.selected))
        if len(sel.selected) == 3:
            raise StopSelection

    res = run(X, y, method, 8, 64, report_candidates=4, on_step=on_step)
    assert len(res.selected) == 3
    assert seen == [res.selected[:1], res.selected[:2], res.selected[:3]]
    assert len(res.candidates) == 3
    for step, cands in enumerate(res.candidates):
        assert len(cands) == 4
        assert cands[0] == (res.selected[step], res.scores[step])
        assert all(i not in res.selected[:step] for i, _ in cands)
        assert [v for _, v in cands] == sorted((v for _, v in cands), reverse=True)
    full = run(X, y, method, 8, 64)
    assert full.selected[:3] == res.selected and full.candidates == []


@pytest.mark.parametrize("method", CLASSIC_METHODS)
def test_more_features_than_columns(method):
    X, y = make_data(0)
    res = run(X, y, method, X.shape[0] + 3, 64)
    assert sorted(res.selected) == list(range(X.shape[0]))
    assert res.stopped_early == "no features left to select"


def test_uninformative_data_ties_to_lowest_index():
    X = np.zeros((4, 10), dtype=np.uint8)
    y = np.arange(10) % 2
    for method in CLASSIC_METHODS:
        res = run(X, y, method, 4, 64)
        assert res.selected == [0, 1, 2, 3], method
        assert len(set(res.scores)) == 1, method


def test_unknown_method():
    X, y = make_data(0)
    with pytest.raises(ValueError):
        run(X, y, "mifs", 3, 64)


# ---------------------------------------------------------------------------
# the lung data
# ---------------------------------------------------------------------------

def _lung_dir() -> Path | None:
    here = Path(__file__).parent / "data" / "lung"
    for d in (here, Path("/work/shared/datasets/raw/lung")):
        if (d / "penglungEW.txt").exists() and (d / "penglungEW_labels.txt").exists():
            return d
    return None


def load_lung():
    d = _lung_dir()
    if d is None:
        pytest.skip("lung data not available")
    raw = np.loadtxt(d / "penglungEW.txt")
    labels = np.loadtxt(d / "penglungEW_labels.txt")
    codes = np.stack([np.searchsorted(np.unique(col), col) for col in raw.T]).astype(np.uint8)
    y = np.searchsorted(np.unique(labels), labels).astype(np.int64)
    return codes, y


LUNG_MRMR = [22, 125, 243, 132, 242, 29, 150, 166, 18, 269]


def test_lung_mrmr_first_ten():
    X, y = load_lung()
    assert X.shape == (325, 73)
    for rows in (7, 65536):
        assert run(X, y, "mrmr", 10, rows).selected == LUNG_MRMR


def test_lung_mrmr_is_the_mean_form():
    """The expected order needs the 1/|S| mean: the sum form (MIFS with beta=1) differs."""
    X, y = load_lung()
    cols = [tuple(c) for c in X]
    yt = tuple(y)
    rel = [ref_mi(c, yt) for c in cols]
    selected = [int(np.argmax(rel))]
    red = np.zeros(len(cols))
    while len(selected) < 4:
        red += [ref_mi(c, cols[selected[-1]]) for c in cols]
        values = {i: rel[i] - red[i] for i in range(len(cols)) if i not in selected}
        selected.append(ref_argmax(values))
    assert selected != LUNG_MRMR[:4]


@pytest.mark.parametrize("method", GREEDY_METHODS)
def test_lung_greedy_matches_reference(method):
    X, y = load_lung()
    k = 5
    want_sel, want_scores = ref_greedy(method, X, y, k)
    res = run(X, y, method, k, 16)
    assert res.selected == want_sel
    np.testing.assert_allclose(res.scores, want_scores, rtol=0, atol=1e-9)


# ---------------------------------------------------------------------------
# optional cross-check with scikit-feature (skfeature-chappers)
# ---------------------------------------------------------------------------
# skfeature works in bits (log base 2), so its criterion values are ours / ln 2.
# Only MIM, CIFE and CMIM are compared: in skfeature-chappers 1.2.1, LCSI.lcsi
# ignores ``function_name``, so its MRMR runs with beta = 0.8 (a fixed weight
# on the *sum* of redundancies, i.e. MIFS) instead of the mean 1/|S|, and its
# JMI with beta = 0.8, gamma = 0.5 instead of 1/|S| each (the original
# jundongl/scikit-feature set beta = gamma = 1/|S| for those). Its CMIM is
# I(f;y) - max_j [I(f;f_j) - I(f;f_j|y)] = min_j I(f;y|f_j), the same as ours.

@pytest.mark.parametrize("seed", (0, 3))
def test_cross_check_skfeature(seed):
    pytest.importorskip("skfeature")
    from skfeature.function.information_theoretical_based import CMIM, LCSI

    X, y = make_data(seed)
    X = X[[i for i in range(X.shape[0]) if i not in (5, 6)]]  # no exact ties: float order differs
    data = X.T.astype(int)
    k = 6
    # (the MIM/CIFE wrappers' mode="index" returns a rank transform of the order,
    # so LCSI is called directly with the wrappers' beta, gamma)
    theirs = {
        "mim": LCSI.lcsi(data, y, mode="index", beta=0, gamma=0, n_selected_features=k),
        "cife": LCSI.lcsi(data, y, mode="index", beta=1, gamma=1, n_selected_features=k),
        "cmim": CMIM.cmim(data, y, mode="index", n_selected_features=k),
    }
    for method, order in theirs.items():
        assert run(X, y, method, k, 64).selected == [int(i) for i in order][:k], method
    _, j_cife, _ = LCSI.lcsi(data, y, beta=1, gamma=1, n_selected_features=k)
    np.testing.assert_allclose(np.array(run(X, y, "cife", k, 64).scores) / math.log(2), j_cife,
                               rtol=0, atol=1e-9)


@pytest.mark.parametrize("method", ["mim", "mrmr", "jmi", "cmim", "cife", "spec_cmi"])
@pytest.mark.parametrize("stop_after", [1, 2, 5])
def test_resume_from_a_saved_step_gives_the_uninterrupted_result(method, stop_after):
    from vmi_spark.core.greedy import StopSelection

    rng = np.random.default_rng(stop_after)
    y = rng.integers(0, 3, 400)
    codes = ((rng.integers(0, 3, (9, 400)) + (rng.random((9, 400)) < 0.5) * y) % 3).astype(np.uint8)
    full = select_classic(InMemoryBackend(codes, y), method, 7)

    def stop(sel):
        if len(sel.selected) == stop_after:
            raise StopSelection

    part = select_classic(InMemoryBackend(codes, y), method, 7, on_step=stop)
    assert len(part.selected) == stop_after
    resumed = select_classic(InMemoryBackend(codes, y), method, 7, resume=part)
    assert resumed.selected == full.selected
    assert resumed.scores == full.scores
