"""Chance-corrected gains (``biasCorrection``): the chance level, its test, and the greedy
loop against a slow naive Bayes bound written here from the raw columns."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chi2

from vmi_spark.core.criteria import chance_gains, chi2_quantile
from vmi_spark.core.greedy import select
from vmi_spark.core.inmemory import InMemoryBackend
from vmi_spark.sklearn import VMIFeatureSelector

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("df", [1, 2, 4, 9, 27, 81, 255])
@pytest.mark.parametrize("p", [0.5, 0.95, 0.99, 0.999, 0.99999])
def test_the_chi_square_quantile_is_wilson_hilferty(df, p):
    got = float(chi2_quantile(np.array([df]), p)[0])
    want = chi2.ppf(p, df)
    assert got == pytest.approx(want, rel=1e-9 if df <= 2 else 0.02 if p <= 0.999 else 0.05)
    assert float(chi2_quantile(np.array([0]), p)[0]) == 0.0


def test_the_chance_level_is_the_plug_in_bias_of_independent_columns():
    """(A - 1)(L - 1) / 2N, and Monte Carlo: the mean plug-in MI of independent columns."""
    assert chance_gains(np.array([1, 2, 10]), 3, 100).tolist() == [0.0, 2 / 200, 9 * 2 / 200]
    rng = np.random.default_rng(0)
    n, a, classes, reps = 2000, 6, 3, 400
    mis = []
    for _ in range(reps):
        x, y = rng.integers(0, a, n), rng.integers(0, classes, n)
        joint = np.zeros((a, classes))
        np.add.at(joint, (x, y), 1)
        p = joint / n
        outer = p.sum(1, keepdims=True) * p.sum(0, keepdims=True)
        nz = p > 0
        mis.append(float((p[nz] * np.log(p[nz] / outer[nz])).sum()))
    expected = float(chance_gains(np.array([a]), classes, n)[0])
    assert np.mean(mis) == pytest.approx(expected, rel=0.1)


def _slow_bound(codes: np.ndarray, y: np.ndarray, block: list[int]) -> float:
    """I_LB of a naive Bayes block, from the raw columns (float64, no fixed point)."""
    n = len(y)
    classes = np.unique(y)
    prior = np.array([(y == c).mean() for c in classes])
    logq = np.zeros((n, len(classes)))
    for j in block:
        for ci, c in enumerate(classes):
            values, counts = np.unique(codes[j][y == c], return_counts=True)
            table = dict(zip(values.tolist(), (counts / (y == c).sum()).tolist()))
            p = np.array([table.get(v, 0.0) for v in codes[j]])
            with np.errstate(divide="ignore"):
                logq[:, ci] += np.log(p)
    own = logq[np.arange(n), np.searchsorted(classes, y)]
    mix = np.log((np.exp(logq) * prior).sum(axis=1))
    return float((own - mix).mean())


def _slow_select(codes: np.ndarray, y: np.ndarray, k: int, level: float | None) -> tuple:
    """The greedy loop with chance-corrected gains, written out: features by corrected
    gain, a block restarted when no candidate's gain is significant (``level``) or beats
    chance."""
    d, n = codes.shape
    states = np.array([len(np.unique(c)) for c in codes])
    classes = len(np.unique(y))
    chance = (states - 1) * (classes - 1) / (2 * n)
    chosen: list[int] = []
    blocks: list[int] = []
    block: list[int] = []
    bound, index = 0.0, 0
    while len(chosen) < k:
        cands = [i for i in range(d) if i not in chosen]
        raw = {i: _slow_bound(codes, y, block + [i]) - bound for i in cands}
        gains = {i: raw[i] - chance[i] for i in cands}
        if block and level is not None:
            crit = chi2.ppf(1 - level / len(cands), (states - 1) * (classes - 1)) / (2 * n)
            gains = {i: g if raw[i] > crit[i] else -np.inf for i, g in gains.items()}
        if not block:  # a block starts with plug-in information, or the loop stops
            gains = {i: g if raw[i] > 0 else -np.inf for i, g in gains.items()}
        best = max(cands, key=lambda i: (gains[i], -i))
        if not block and gains[best] == -np.inf:
            break
        if block and not gains[best] > 0:
            block, bound, index = [], 0.0, index + 1
            continue
        block.append(best)
        bound += raw[best]
        chosen.append(best)
        blocks.append(index)
    return chosen, blocks


def _table(seed: int, n: int = 600):
    """Two informative columns of few states, a redundant copy of one, a noise column of
    many states (the largest plug-in MI by chance alone) and two noise columns."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    a = np.where(rng.random(n) < 0.25, rng.integers(0, 2, n), y)
    b = np.where(rng.random(n) < 0.35, rng.integers(0, 2, n), y)
    copy = a.copy()
    wide = rng.integers(0, 40, n)
    return np.stack([wide, a, rng.integers(0, 3, n), copy, b, rng.integers(0, 2, n)]), y


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("level", [None, 0.05])
def test_the_corrected_loop_against_a_slow_naive_bound(seed, level):
    codes, y = _table(seed)
    codes = codes.astype(np.uint8)
    got = select(InMemoryBackend(codes, y), "vmi_naive", 4, chance=True, significance=level)
    want = _slow_select(codes.astype(np.int64), y, 4, level)
    assert (got.selected, got.blocks) == want


def test_a_column_is_ranked_for_what_it_says_not_for_its_states():
    """A 30-state noise column (a category: at most maxCategories values) has a larger
    plug-in MI (its chance level, 29 / 2N nats) than a weakly informative two-state
    column; corrected, the informative one is first, and the report's score stays the
    plug-in MI."""
    rng = np.random.default_rng(3)
    n = 300
    y = rng.integers(0, 2, n)
    weak = np.where(rng.random(n) < 0.8, rng.integers(0, 2, n), y)
    X = np.stack([rng.integers(0, 30, n), weak], axis=1)
    plain = VMIFeatureSelector(n_features_to_select=1, bias_correction="none").fit(X, y)
    fixed = VMIFeatureSelector(n_features_to_select=1).fit(X, y)
    mi = fixed.mutual_information_
    assert mi[0] > mi[1]  # the noise column leads on plug-in MI, not beyond chance
    assert mi[1] - 1 / (2 * n) > mi[0] - 29 / (2 * n)
    assert plain.selected_features_.tolist() == [0]
    assert fixed.selected_features_.tolist() == [1]
    assert fixed.scores_[0] == mi[1]


def test_never_restarting_means_no_test():
    codes, y = _table(2)
    one = select(InMemoryBackend(codes.astype(np.uint8), y), "vmi_naive", 5,
                 restart_tolerance=-np.inf, chance=True, significance=0.05)
    assert one.restarts == 0 and len(one.selected) == 5


def test_a_new_block_starts_from_a_feature_with_information():
    """Corrected, a 3-state column independent of the label in the sample (plug-in MI 0)
    ranks above a 5-state one with a little information (its chance level is higher), but
    only a column with information starts a block; with none, the loop stops."""
    codes = np.array([[i % 3 for i in range(24)], [(i * 7) % 5 for i in range(24)]],
                     dtype=np.uint8)
    y = np.array([i % 2 for i in range(24)], dtype=np.uint8)
    fixed = select(InMemoryBackend(codes, y), "vmi_naive", 1, chance=True)
    assert fixed.mutual_information[0] == 0.0 < fixed.mutual_information[1]
    assert fixed.selected == [1] and fixed.stop_reason == "num_features"
    with pytest.warns(RuntimeWarning, match="no remaining feature has positive"):
        none = select(InMemoryBackend(codes[:1], y), "vmi_naive", 1, chance=True)
    assert none.selected == [] and none.stop_reason == "no_information"


@pytest.mark.parametrize("method", ["mim", "mrmr", "jmi", "cmim", "cife", "spec_cmi"])
def test_the_comparison_criteria_are_not_corrected(method):
    """chance / significance are the bound's: a comparison criterion selects the same
    features with them (mRMR's gains go negative here: each feature still once)."""
    rng = np.random.default_rng(8)
    y = rng.integers(0, 3, 180).astype(np.uint8)
    codes = rng.integers(0, 4, (7, 180)).astype(np.uint8)
    codes[1] = np.where(rng.random(180) < 0.7, y, codes[1])
    codes[2] = codes[1]  # a copy: redundant
    plain = select(InMemoryBackend(codes, y), method, 6)
    for level in (None, 0.05):
        got = select(InMemoryBackend(codes, y), method, 6, chance=True, significance=level)
        assert got.selected == plain.selected and got.scores == plain.scores
        assert len(set(got.selected)) == len(got.selected)


def test_the_registry_says_which_criteria_are_corrected():
    """Whether the loop corrects a criterion's gains is its registry entry's ``corrected``
    (the bound's two Q-distributions), not a test of ``vmi`` in the loop."""
    from dataclasses import replace

    from vmi_spark.core.criteria import CRITERIA, criterion

    assert {c.name for c in CRITERIA if c.corrected} == {"vmi_naive", "vmi_pairwise"}
    rng = np.random.default_rng(4)
    y = rng.integers(0, 2, 400)
    codes = rng.integers(0, 2, (6, 400)).astype(np.uint8)
    codes[5] = rng.integers(0, 12, 400)  # many states: a plug-in gain mostly from chance
    plain = select(InMemoryBackend(codes, y), "vmi_naive", 1)
    assert plain.selected == [5]  # the paper's uncorrected gains pick it
    uncorrected = replace(criterion("vmi_naive"), corrected=False)
    got = select(InMemoryBackend(codes, y), uncorrected, 1, chance=True)
    assert got.selected == plain.selected and got.scores == plain.scores
    assert select(InMemoryBackend(codes, y), "vmi_naive", 1, chance=True).selected != [5]
