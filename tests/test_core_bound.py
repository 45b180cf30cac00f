"""Tests of the variational bound and the greedy selection (vmi_spark.core).

The expected values come from an independent, deliberately slow reference written in
this file straight from the paper's definitions (Gao, Ver Steeg & Galstyan, NIPS 2016):

    I_LB(x_S; y) = 1/N sum_k log[ q(x_S^k | y^k) / sum_y' p(y') q(x_S^k | y') ]   (Eq. lb_est)

with q(x_S | y) the auto-regressive product over the block's features in selection order
(Eq. v_auto), q(x_f | x_<f, y) = p(x_f | y) for the naive Bayes Q (Eq. v_distri) and the
geometric mean of p(x_f | x_j, y) over the earlier features j of the block for the
pairwise Q (Eq. v_pairwise_distri), plug-in probabilities from Python dictionaries of
counts (0/0 -> 0), and a plain greedy loop with the restart rule of Algorithm 1.
Nothing here uses the arrays or kernels of the code under test.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from vmi_spark.core.greedy import StopSelection, select_vmi
from vmi_spark.core.inmemory import InMemoryBackend

NAIVE = "vmi_naive"
PAIRWISE = "vmi_pairwise"
METHODS = (NAIVE, PAIRWISE)
LUNG_DIR = Path(__file__).parent / "data" / "lung"

#: decisions of the reference closer than this to a tie / the tolerance are "ambiguous"
AMBIGUOUS = 1e-9
#: float noise of the reference itself
EPS = 1e-12


# =========================================================================== reference


class Reference:
    """Plug-in probabilities from count dictionaries and the bound from its definition.

    ``rows`` is a list of tuples of feature values, ``labels`` a list of class values.
    """

    def __init__(self, rows, labels):
        self.rows = [tuple(int(v) for v in r) for r in rows]
        self.labels = [int(c) for c in labels]
        self.n = len(self.labels)
        self.d = len(self.rows[0])
        self.n_y = Counter(self.labels)
        self.classes = sorted(self.n_y)
        self.n_iy = Counter()
        self.n_ijy = Counter()
        for r, c in zip(self.rows, self.labels):
            for i in range(self.d):
                self.n_iy[i, r[i], c] += 1
                for j in range(self.d):
                    self.n_ijy[i, r[i], j, r[j], c] += 1

    def p_y(self, c):
        return self.n_y[c] / self.n

    def p1(self, i, a, c):
        """p(x_i = a | y = c)."""
        return self.n_iy[i, a, c] / self.n_y[c]

    def p2(self, i, a, j, b, c):
        """p(x_i = a | x_j = b, y = c); 0/0 -> 0."""
        den = self.n_iy[j, b, c]
        return self.n_ijy[i, a, j, b, c] / den if den else 0.0

    def q(self, block, row, c, method):
        """q(x_block | y = c) for one row, as the auto-regressive product."""
        prod = 1.0
        for t, f in enumerate(block):
            if method == NAIVE or t == 0:
                prod *= self.p1(f, row[f], c)
            else:
                g = 1.0
                for s in block[:t]:
                    g *= self.p2(f, row[f], s, row[s], c)
                prod *= g ** (1.0 / t)
        return prod

    def bound(self, block, method):
        total = 0.0
        for row, c in zip(self.rows, self.labels):
            num = self.q(block, row, c, method)
            den = sum(self.p_y(cc) * self.q(block, row, cc, method) for cc in self.classes)
            total += math.log(num / den)
        return total / self.n

    def plugin_mi(self, features):
        """Plug-in I(x_features; y) from the joint table of the given features."""
        joint = Counter((tuple(r[f] for f in features), c) for r, c in zip(self.rows, self.labels))
        n_x = Counter()
        for (x, _c), v in joint.items():
            n_x[x] += v
        return sum(v / self.n * math.log(v * self.n / (n_x[x] * self.n_y[c]))
                   for (x, c), v in joint.items())

    def greedy(self, method, num_features, tolerance):
        """Algorithm 1 with the restart rule, ties to the lowest index.

        Returns (selected, scores, blocks, restarts, stopped_early, closest) where
        ``closest`` is the smallest distance of any decision from being decided the
        other way (used to reject ambiguous test data).
        """
        selected, scores, blocks = [], [], []
        block, current, block_index, restarts = [], 0.0, 0, 0
        stopped = False
        closest = math.inf
        while len(selected) < num_features:
            remaining = [i for i in range(self.d) if i not in selected]
            if not remaining:
                break
            values = {i: self.bound(block + [i], method) for i in remaining}
            top = max(values.values())
            best = min(i for i in remaining if values[i] >= top - EPS)  # lowest index on ties
            for i in remaining:
                gap = top - values[i]
                if gap > EPS:
                    closest = min(closest, gap)
            gain = values[best] - current
            threshold = tolerance if block else 0.0
            if abs(gain - threshold) > EPS:
                closest = min(closest, abs(gain - threshold))
            if gain <= threshold + EPS:
                if block:  # restart: clear the block, keep the selected features
                    block, current = [], 0.0
                    block_index += 1
                    restarts += 1
                    continue
                stopped = True  # no remaining feature is informative on its own
                break
            block.append(best)
            current = values[best]
            selected.append(best)
            scores.append(current)
            blocks.append(block_index)
        return selected, scores, blocks, restarts, stopped, closest


def random_data(seed, d, n, classes, arity):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, size=n)
    # features loosely tied to y and to each other so blocks grow and then restart
    x = np.empty((d, n), dtype=np.int64)
    for i in range(d):
        noise = rng.integers(0, arity, size=n)
        keep = rng.random(n) < rng.uniform(0.0, 0.6)
        src = y if (i == 0 or rng.random() < 0.6) else x[rng.integers(0, i)]
        x[i] = np.where(keep, src % arity, noise)
    return x.astype(np.uint8), y


def run(codes, y, method, k, tol=0.0, chunk_rows=65536, **kw):
    backend = InMemoryBackend(codes, y, chunk_rows=chunk_rows)
    return select_vmi(backend, method, k, restart_tolerance=tol, **kw)


def reference_of(codes, y):
    return Reference(np.asarray(codes).T.tolist(), np.asarray(y).tolist())


def independent_mi(x, y):
    """Plug-in I(x; y) from numpy joint counts, via H(x) + H(y) - H(x, y)."""
    x = np.asarray(x, dtype=np.int64)
    y = np.asarray(y, dtype=np.int64)

    def h(v):
        _, c = np.unique(v, return_counts=True, axis=0)
        p = c / c.sum()
        return -float(np.sum(p * np.log(p)))

    if x.ndim == 1:
        x = x[:, None]
    return h(x) + h(y) - h(np.column_stack([x, y]))


# =========================================================================== (a) reference


RANDOM_CASES = [
    # seed, D, N, classes, arity
    (1, 6, 50, 2, 2),
    (2, 8, 120, 3, 3),
    (3, 7, 200, 4, 2),
    (4, 10, 80, 2, 4),
    (5, 9, 300, 3, 4),
    (6, 6, 150, 4, 3),
]


@pytest.mark.parametrize("tol", [0.0, 0.01])
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("case", RANDOM_CASES, ids=lambda c: "seed{}-D{}-N{}-L{}-A{}".format(*c))
def test_select_vmi_matches_slow_reference(case, method, tol):
    seed, d, n, classes, arity = case
    codes, y = random_data(seed, d, n, classes, arity)
    ref = reference_of(codes, y)
    sel, scores, blocks, restarts, stopped, closest = ref.greedy(method, d, tol)
    # the comparison is only meaningful if no decision is within rounding of a flip
    assert closest > AMBIGUOUS, f"ambiguous test data (closest decision {closest:.3g})"
    assert not stopped and len(sel) == d

    got = run(codes, y, method, d, tol)
    assert got.selected == sel
    assert got.blocks == blocks
    assert got.restarts == restarts
    assert got.stopped_early is None
    assert got.num_rows == n
    np.testing.assert_allclose(got.scores, scores, rtol=0, atol=1e-9)
    # gains: the first of a block is its bound, later ones the increment
    exp_gains = [s if (t == 0 or blocks[t] != blocks[t - 1]) else s - scores[t - 1]
                 for t, s in enumerate(scores)]
    np.testing.assert_allclose(got.gains, exp_gains, rtol=0, atol=1e-9)


def test_reference_cases_exercise_restarts_and_long_blocks():
    """Guard against a trivial random design: the cases above must restart and grow blocks."""
    restarts, longest = 0, 0
    for seed, d, n, classes, arity in RANDOM_CASES[:3]:
        codes, y = random_data(seed, d, n, classes, arity)
        for method in METHODS:
            for tol in (0.0, 0.01):
                _, _, blocks, r, _, _ = reference_of(codes, y).greedy(method, d, tol)
                restarts += r
                longest = max(longest, max(Counter(blocks).values()))
    assert restarts >= 6
    assert longest >= 3


@pytest.mark.parametrize("method", METHODS)
def test_reported_candidates_are_reference_bounds(method):
    codes, y = random_data(11, 7, 90, 3, 3)
    ref = reference_of(codes, y)
    got = run(codes, y, method, 7, 0.0, report_candidates=3)
    assert len(got.candidates) == len(got.selected)
    block = []
    for t, f in enumerate(got.selected):
        if t > 0 and got.blocks[t] != got.blocks[t - 1]:
            block = []
        cands = got.candidates[t]
        assert cands[0][0] == f
        assert cands[0][1] == pytest.approx(got.scores[t], abs=1e-12)
        values = [v for _, v in cands]
        assert values == sorted(values, reverse=True)
        for i, v in cands:
            assert i not in got.selected[:t]
            assert v == pytest.approx(ref.bound(block + [i], method), abs=1e-9)
        block.append(f)


# =========================================================================== (b) hand-computed

# Eight rows, two features, two classes (x0 ternary, x1 binary):
#
#   k :  1 2 3 | 4 5 6 7 8
#   x0:  0 0 1 | 1 1 0 2 2
#   x1:  0 0 1 | 0 0 1 1 0
#   y :  0 0 0 | 1 1 1 1 1          p(y) = (3/8, 5/8)
#
# p(x0|y=0) = (2/3, 1/3, 0)         p(x0|y=1) = (1/5, 2/5, 2/5)
# p(x1|y=0) = (2/3, 1/3)            p(x1|y=1) = (3/5, 2/5)
# p(x1|x0,y=0): x0=0 -> (1, 0), x0=1 -> (0, 1), x0=2 -> never seen: 0/0 -> (0, 0)
# p(x1|x0,y=1): x0=0 -> (0, 1), x0=1 -> (1, 0), x0=2 -> (1/2, 1/2)
#
# I(x0;y) = 1/4 log(16/9) + 1/8 log(8/9) + 1/8 log(8/15) + 1/4 log(16/15) + 1/4 log(8/5)
#         = 0.184178...
# I(x1;y) = 1/2 log(16/15) + 1/8 log(8/9) + 3/8 log(24/25) = 0.0022381...
#   (p(x1) = (5/8, 3/8); p(x1, y): (0,0)=2/8 (1,0)=1/8 (0,1)=3/8 (1,1)=2/8)
# so x0 is the first feature of the first block.
#
# Naive bound of (x0, x1), q(x|y) = p(x0|y) p(x1|y), row by row
#   rows 1,2 (0,0,y0): q|0 = 4/9, q|1 = 3/25, q(x) = 3/8*4/9 + 5/8*3/25 = 29/120 -> 160/87
#   row 3    (1,1,y0): q|0 = 1/9, q|1 = 4/25, q(x) = 1/24 + 1/10 = 17/120      -> 40/51
#   rows 4,5 (1,0,y1): q|0 = 2/9, q|1 = 6/25, q(x) = 1/12 + 3/20 = 7/30       -> 36/35
#   row 6    (0,1,y1): q|0 = 2/9, q|1 = 2/25, q(x) = 1/12 + 1/20 = 2/15       -> 3/5
#   row 7    (2,1,y1): q|0 = 0,   q|1 = 4/25, q(x) = 1/10                      -> 8/5
#   row 8    (2,0,y1): q|0 = 0,   q|1 = 6/25, q(x) = 3/20                      -> 8/5
#   I_LB = 1/8 [2 log(160/87) + log(40/51) + 2 log(36/35) + log(3/5) + 2 log(8/5)]
#        = 0.182639...  <  I(x0;y): the naive block would shrink -> restart at tolerance 0.
#
# Pairwise bound of (x0, x1), q(x|y) = p(x0|y) p(x1|x0,y) (exact for two features)
#   rows 1,2: q|0 = 2/3*1 = 2/3, q|1 = 1/5*0 = 0, q(x) = 1/4     -> 8/3
#   row 3   : q|0 = 1/3*1 = 1/3, q|1 = 2/5*0 = 0, q(x) = 1/8     -> 8/3
#   rows 4,5: q|0 = 1/3*0 = 0,   q|1 = 2/5*1,     q(x) = 1/4     -> 8/5
#   row 6   : q|0 = 0,           q|1 = 1/5*1,     q(x) = 1/8     -> 8/5
#   rows 7,8: q|0 = 0*(0/0 -> 0),q|1 = 2/5*1/2,   q(x) = 1/8     -> 8/5
#   I_LB = 1/8 [3 log(8/3) + 5 log(8/5)] = H(y) = 0.661563...  (y is a function of x0, x1)

TINY_X = np.array([[0, 0, 1, 1, 1, 0, 2, 2],
                   [0, 0, 1, 0, 0, 1, 1, 0]], dtype=np.uint8)
TINY_Y = np.array([0, 0, 0, 1, 1, 1, 1, 1])
TINY_I0 = (0.25 * math.log(16 / 9) + 0.125 * math.log(8 / 9) + 0.125 * math.log(8 / 15)
           + 0.25 * math.log(16 / 15) + 0.25 * math.log(8 / 5))
TINY_I1 = 0.5 * math.log(16 / 15) + 0.125 * math.log(8 / 9) + 0.375 * math.log(24 / 25)
TINY_NAIVE_01 = (2 * math.log(160 / 87) + math.log(40 / 51) + 2 * math.log(36 / 35)
                 + math.log(3 / 5) + 2 * math.log(8 / 5)) / 8
TINY_PAIR_01 = (3 * math.log(8 / 3) + 5 * math.log(8 / 5)) / 8


def test_hand_computed_constants():
    # the numbers in the comment above (guards the hand algebra, not the code)
    assert TINY_I0 == pytest.approx(0.184178, abs=5e-7)
    assert TINY_I1 == pytest.approx(0.0022381, abs=5e-8)
    assert TINY_NAIVE_01 == pytest.approx(0.182639, abs=5e-7)
    assert TINY_PAIR_01 == pytest.approx(-(3 / 8 * math.log(3 / 8) + 5 / 8 * math.log(5 / 8)),
                                         abs=1e-15)
    ref = reference_of(TINY_X, TINY_Y)
    assert ref.bound([0], NAIVE) == pytest.approx(TINY_I0, abs=1e-14)
    assert ref.bound([0, 1], NAIVE) == pytest.approx(TINY_NAIVE_01, abs=1e-14)
    assert ref.bound([0, 1], PAIRWISE) == pytest.approx(TINY_PAIR_01, abs=1e-14)


def test_hand_computed_naive_bound_no_restart():
    got = run(TINY_X, TINY_Y, NAIVE, 2, tol=-1.0)  # a tolerance of -1 keeps the block
    assert got.selected == [0, 1]
    assert got.blocks == [0, 0]
    assert got.scores[0] == pytest.approx(TINY_I0, abs=1e-12)
    assert got.scores[1] == pytest.approx(TINY_NAIVE_01, abs=1e-9)
    assert got.gains[1] == pytest.approx(TINY_NAIVE_01 - TINY_I0, abs=1e-9)
    assert got.gains[1] < 0


def test_hand_computed_naive_bound_restarts_at_tolerance_zero():
    # adding x1 lowers the naive bound, so the block is cleared and x1 starts block 1
    got = run(TINY_X, TINY_Y, NAIVE, 2, tol=0.0)
    assert got.selected == [0, 1]
    assert got.blocks == [0, 1]
    assert got.restarts == 1
    assert got.scores[0] == pytest.approx(TINY_I0, abs=1e-12)
    assert got.scores[1] == pytest.approx(TINY_I1, abs=1e-12)


def test_hand_computed_pairwise_bound():
    got = run(TINY_X, TINY_Y, PAIRWISE, 2, tol=0.0)
    assert got.selected == [0, 1]
    assert got.blocks == [0, 0]
    assert got.scores[0] == pytest.approx(TINY_I0, abs=1e-12)
    assert got.scores[1] == pytest.approx(TINY_PAIR_01, abs=1e-9)


def test_hand_computed_mutual_information_reported():
    got = run(TINY_X, TINY_Y, NAIVE, 1)
    np.testing.assert_allclose(got.mutual_information, [TINY_I0, TINY_I1], rtol=0, atol=1e-14)


# =========================================================================== (c) paper identities


@pytest.mark.parametrize("method", METHODS)
def test_one_feature_block_bound_is_plugin_mi(method):
    codes, y = random_data(21, 8, 97, 3, 3)
    ref = reference_of(codes, y)
    mis = [independent_mi(codes[i], y) for i in range(codes.shape[0])]
    for i, mi in enumerate(mis):
        # the definition of the bound agrees with I(x_i; y) for a single feature
        assert ref.bound([i], method) == pytest.approx(mi, abs=1e-12)
        got = run(codes[i:i + 1], y, method, 1)
        assert got.selected == [0]
        assert got.scores[0] == pytest.approx(mi, abs=1e-12)
    got = run(codes, y, method, 1)
    assert got.selected == [int(np.argmax(mis))]
    assert got.scores[0] == pytest.approx(max(mis), abs=1e-12)
    np.testing.assert_allclose(got.mutual_information, mis, rtol=0, atol=1e-12)


def factorial_design():
    """Within each class, rows = Cartesian product of per-feature value lists.

    The empirical joint within a class is then exactly the product of its marginals
    (x independent given y in the sample), every state of every feature occurs in every
    class (so no 0/0 appears in p(x_i | x_j, y)), and the marginals differ between
    classes so every feature adds information.
    """
    per_class = [
        # class 0, repeated once
        ([0, 0, 0, 1], [0, 1, 1], [0, 0, 1, 2, 2], 1),
        # class 1, repeated twice (unequal priors)
        ([0, 1, 1, 1], [0, 0, 1], [0, 1, 1, 1, 2], 2),
        # class 2
        ([0, 1], [0, 0, 0, 1], [2, 2, 1, 0], 1),
    ]
    rows, labels = [], []
    for c, (v0, v1, v2, rep) in enumerate(per_class):
        for _ in range(rep):
            for combo in itertools.product(v0, v1, v2):
                rows.append(combo)
                labels.append(c)
    codes = np.array(rows, dtype=np.uint8).T
    return codes, np.array(labels)


def test_factorial_design_is_conditionally_independent():
    codes, y = factorial_design()
    for c in np.unique(y):
        sub = codes[:, y == c]
        m = sub.shape[1]
        joint = Counter(map(tuple, sub.T))
        for combo in itertools.product(*[np.unique(codes[i]) for i in range(3)]):
            prod = m
            for i, a in enumerate(combo):
                prod *= np.count_nonzero(sub[i] == a) / m
            assert joint[combo] == pytest.approx(prod, abs=1e-9)
        for i in range(3):
            assert set(sub[i]) == set(codes[i])  # every state in every class


@pytest.mark.parametrize("tol", [0.0, -1.0])
def test_factorial_design_pairwise_equals_naive_and_full_bound_is_plugin_mi(tol):
    codes, y = factorial_design()
    d = codes.shape[0]
    naive = run(codes, y, NAIVE, d, tol)
    pair = run(codes, y, PAIRWISE, d, tol)
    assert naive.selected == pair.selected
    assert sorted(naive.selected) == list(range(d))
    assert naive.blocks == [0] * d and pair.blocks == [0] * d  # one block: gains > 0
    assert min(naive.gains) > 1e-3
    np.testing.assert_allclose(pair.scores, naive.scores, rtol=0, atol=1e-9)
    # Theorem (exact naive Bayes): the bound of the full set is the plug-in I(x; y)
    full_mi = independent_mi(codes.T, y)
    assert naive.scores[-1] == pytest.approx(full_mi, abs=1e-9)
    assert pair.scores[-1] == pytest.approx(full_mi, abs=1e-9)
    # and so is every prefix of the block
    ref = reference_of(codes, y)
    for t in range(1, d + 1):
        prefix = naive.selected[:t]
        mi = independent_mi(codes[prefix].T, y)
        assert naive.scores[t - 1] == pytest.approx(mi, abs=1e-9)
        assert ref.bound(prefix, PAIRWISE) == pytest.approx(mi, abs=1e-12)


@pytest.mark.parametrize("method", METHODS)
def test_bound_never_exceeds_plugin_mi_of_block(method):
    # I_LB = I_plugin - E_x KL(p(y|x) || q(y|x)) <= I_plugin(x_block; y) on the sample
    codes, y = random_data(31, 8, 150, 3, 3)
    got = run(codes, y, method, 8, tol=-1.0)  # one block of all features
    assert got.blocks == [0] * 8
    for t in range(8):
        mi = independent_mi(codes[got.selected[:t + 1]].T, y)
        assert got.scores[t] <= mi + 1e-9
    # naive Bayes is not exact on this data: the full bound is strictly below
    assert got.scores[-1] < independent_mi(codes.T, y) - 1e-3


def test_pairwise_two_feature_block_is_exact():
    # q(x_a, x_b | y) = p(x_a | y) p(x_b | x_a, y) = p(x_a, x_b | y): the bound equals
    # the plug-in I(x_a, x_b; y) for the second feature of every pairwise block
    codes, y = random_data(41, 9, 160, 4, 3)
    got = run(codes, y, PAIRWISE, 9, tol=0.0)
    checked = 0
    for t in range(1, len(got.selected)):
        if got.blocks[t] == got.blocks[t - 1] and (t < 2 or got.blocks[t - 2] != got.blocks[t]):
            pair = got.selected[t - 1:t + 1]
            assert got.scores[t] == pytest.approx(independent_mi(codes[pair].T, y), abs=1e-9)
            checked += 1
    assert checked >= 1


# =========================================================================== (d) partitions


@pytest.mark.parametrize("tol", [0.0, 0.01])
@pytest.mark.parametrize("method", METHODS)
def test_partition_independence(method, tol):
    codes, y = random_data(56, 10, 301, 3, 3)
    results = [run(codes, y, method, 10, tol, chunk_rows=b) for b in (7, 64, 65536)]
    base = results[0]
    assert base.restarts >= 1
    for other in results[1:]:
        assert other.selected == base.selected
        assert other.blocks == base.blocks
        assert other.scores == base.scores  # bit-identical, not approximately equal
        assert other.gains == base.gains
        assert other.mutual_information == base.mutual_information


def test_backend_can_be_reused():
    codes, y = random_data(52, 7, 90, 2, 3)
    backend = InMemoryBackend(codes, y, chunk_rows=16)
    first = select_vmi(backend, PAIRWISE, 7, restart_tolerance=0.01)
    second = select_vmi(backend, PAIRWISE, 7, restart_tolerance=0.01)
    assert first.selected == second.selected
    assert first.scores == second.scores


# =========================================================================== (e) stop early, ties


@pytest.mark.parametrize("method", METHODS)
def test_stop_early_after_constant_columns(method):
    # column 1 is informative and takes both states in both classes (so the pairwise
    # p(const | x1, y) is 1 for every (x1, y), no 0/0); columns 0, 2, 3 are constant
    y = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    x1 = np.array([0, 0, 0, 1, 0, 1, 1, 1])
    codes = np.stack([np.zeros(8), x1, np.zeros(8), np.ones(8)]).astype(np.uint8)
    with pytest.warns(RuntimeWarning):
        got = run(codes, y, method, 3, tol=0.0)
    assert got.selected == [1]
    assert got.scores[0] == pytest.approx(independent_mi(x1, y), abs=1e-12)
    assert got.restarts == 1  # the constant columns add exactly nothing to the block
    assert isinstance(got.stopped_early, str) and got.stopped_early


@pytest.mark.parametrize("method", METHODS)
def test_stop_early_labels_independent_of_all_features(method):
    # every class holds the same full factorial design: each feature's sample is
    # exactly independent of y although no column is constant
    base = list(itertools.product([0, 1, 1], [0, 1, 2], [2, 0]))
    rows = base * 3
    y = np.repeat([0, 1, 2], len(base))
    codes = np.array(rows, dtype=np.uint8).T
    with pytest.warns(RuntimeWarning):
        got = run(codes, y, method, 2)
    assert got.selected == [] and got.scores == []
    assert got.stopped_early
    assert got.mutual_information == [0.0, 0.0, 0.0]


def test_no_warning_when_all_requested_features_are_found():
    codes, y = random_data(61, 6, 80, 2, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = run(codes, y, NAIVE, 3)
    assert len(got.selected) == 3
    assert got.stopped_early is None


@pytest.mark.parametrize("method", METHODS)
def test_ties_go_to_lowest_index_for_duplicated_columns(method):
    codes, y = random_data(71, 6, 120, 3, 3)
    # the most informative column, stored twice: at index 4 and (copy) at index 1
    best = np.where(np.random.default_rng(0).random(120) < 0.9, y % 3, 0).astype(np.uint8)
    codes[4] = best
    codes[1] = best
    codes[5] = codes[2]  # another duplicated pair
    got = run(codes, y, method, 6, tol=0.0)
    assert got.selected[0] == 1
    assert got.selected.index(2) < got.selected.index(5)
    sel, scores, blocks, *_ = reference_of(codes, y).greedy(method, 6, 0.0)
    assert got.selected == sel
    assert got.blocks == blocks
    np.testing.assert_allclose(got.scores, scores, rtol=0, atol=1e-9)


@pytest.mark.parametrize("method", METHODS)
def test_stop_selection_callback(method):
    codes, y = random_data(81, 6, 60, 2, 3)
    seen = []

    def on_step(sel):
        seen.append(list(sel.selected))
        if len(sel.selected) == 2:
            raise StopSelection

    got = run(codes, y, method, 6, on_step=on_step)
    assert len(got.selected) == 2
    assert seen == [got.selected[:1], got.selected[:2]]


# =========================================================================== exact zeros and ties


def test_naive_zero_gain_triggers_restart():
    # x1 = (0,0,1 | 1,1,0) has p(x1|y) = (2/3, 1/3) in both classes: under the naive Q it
    # adds exactly nothing to any block (q(x1|y) does not depend on y), so Algorithm 1
    # (bound_new <= bound_old) clears the block; x1 then has I(x1; y) = 0 exactly and the
    # selection stops early with only x0 selected.
    x0 = [0, 0, 1, 1, 1, 0]
    x1 = [0, 0, 1, 0, 0, 1]
    y = np.array([0, 0, 0, 1, 1, 1])
    codes = np.array([x0, x1], dtype=np.uint8)
    ref = reference_of(codes, y)
    assert ref.bound([0, 1], NAIVE) == pytest.approx(ref.bound([0], NAIVE), abs=1e-15)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got = run(codes, y, NAIVE, 2, tol=0.0)
    assert got.selected == [0]
    assert got.restarts == 1
    assert got.stopped_early


@pytest.mark.parametrize("method", METHODS)
def test_ties_go_to_lowest_index_for_relabelled_columns(method):
    # column 1 is column 0 with its states renamed 0->1, 1->2, 2->0: every plug-in
    # quantity, hence every bound, is mathematically identical for the two columns
    x = np.array([2, 0, 2, 0, 1, 0, 0, 1, 0, 1, 0, 0])
    y = np.array([1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1])
    codes = np.stack([x, (x + 1) % 3]).astype(np.uint8)
    ref = reference_of(codes, y)
    assert ref.plugin_mi([0]) == pytest.approx(ref.plugin_mi([1]), abs=1e-15)
    got = run(codes, y, method, 1)
    assert got.selected == [0]


# =========================================================================== (f) lung data


def load_lung():
    x = np.loadtxt(LUNG_DIR / "penglungEW.txt")
    labels = np.loadtxt(LUNG_DIR / "penglungEW_labels.txt").astype(np.int64)
    # encode every column by its sorted unique values, labels likewise
    codes = np.stack([np.unique(col, return_inverse=True)[1] for col in x.T]).astype(np.uint8)
    y = np.unique(labels, return_inverse=True)[1]
    return x, codes, y


def test_lung_data_shape():
    x, codes, y = load_lung()
    assert x.shape == (73, 325)
    assert set(np.unique(x)) == {1.0, 3.0, 5.0}
    assert codes.shape == (325, 73)
    assert sorted(Counter(y.tolist()).values()) == sorted([6, 5, 5, 16, 7, 13, 21])


LUNG_FIRST_BLOCK = [22, 125, 243, 163, 93, 108, 33]
LUNG_FIRST_BOUNDS = [0.536068, 0.929746, 1.29322, 1.56056, 1.68928, 1.74789, 1.77936]


def test_lung_naive_first_block():
    _, codes, y = load_lung()
    got = run(codes, y, NAIVE, 8, tol=0.01)
    assert got.selected[:7] == LUNG_FIRST_BLOCK
    assert got.blocks == [0] * 7 + [1]  # the eighth feature starts a new block
    for s, expected in zip(got.scores[:7], LUNG_FIRST_BOUNDS):
        assert s == pytest.approx(expected, abs=5e-6)
    # first bound = plug-in I(x_22; y), the largest single-feature MI
    mis = [independent_mi(codes[i], y) for i in range(codes.shape[0])]
    assert int(np.argmax(mis)) == 22
    assert got.scores[0] == pytest.approx(mis[22], abs=1e-12)


def test_lung_naive_first_block_partition_independent():
    _, codes, y = load_lung()
    a = run(codes, y, NAIVE, 8, tol=0.01, chunk_rows=7)
    b = run(codes, y, NAIVE, 8, tol=0.01)
    assert a.selected == b.selected
    assert a.scores == b.scores


# =========================================================================== (g) engine paths


def _naive_ops(codes, y, block, candidates=None):
    from vmi_spark.core.bound import StepOps
    from vmi_spark.core.tables import conditional

    be = InMemoryBackend(codes, y)
    counts = be.feature_counts()
    prior = counts[0].sum(axis=0) / counts[0].sum()
    cand = np.ones(codes.shape[0], bool) if candidates is None else candidates
    cand[list(block)] = False
    return StepOps(NAIVE, prior, conditional(counts), cand, tuple(block))


@pytest.mark.parametrize("m", [1, 2, 3, 5])
def test_pattern_kernel_gives_the_same_integers_as_the_per_row_kernel(m):
    """Counting rows per pattern of x_S is an exact rewrite of the per-row sum."""
    from vmi_spark.core import bound

    rng = np.random.default_rng(m)
    n, d = 3000, 12
    y = rng.integers(0, 3, n)
    codes = ((rng.integers(0, 4, (d, n)) + (rng.random((d, n)) < 0.4) * y) % 4).astype(np.uint8)
    ops = _naive_ops(codes, y, list(range(m)))
    # per-row kernel forced: no pattern compression at all
    per_row = replace(ops, routes=bound.Routes(pattern_ratio=10**12))
    grouped = replace(ops, routes=bound.Routes(pattern_ratio=2))
    assert bound.naive_rows(codes, per_row, None)[0] is None  # the rows' posteriors
    assert (bound.naive_rows(codes, grouped, None)[0] is not None) == (m < 5)  # the patterns'
    rows = bound.naive_partials(codes, per_row)
    patterns = bound.naive_partials(codes, grouped)
    assert (rows == patterns).all()
    # and both, with the count term, agree with a float64 sum of the per-row log ratios
    cond = ops.cond
    counts = InMemoryBackend(codes, y).feature_counts()
    rows = rows + bound.naive_own(counts, cond)
    post = np.tile(ops.prior, (n, 1))
    for f in range(m):
        post = post * cond[f][codes[f]]
    post /= post.sum(axis=1, keepdims=True)
    for i in np.flatnonzero(ops.candidates):
        c = cond[i][codes[i]]
        ref = np.sum(np.log(c[np.arange(n), y]) - np.log((post * c).sum(axis=1)))
        assert rows[i] / bound.SCALE == pytest.approx(ref, abs=1e-9 * n)


@pytest.mark.parametrize("num_classes", [2, 3])
def test_pairwise_pattern_scores_give_the_per_row_integers(monkeypatch, num_classes):
    """Pairwise scoring per (pattern, x_i, y) cell, and the last feature folded in the pass
    that scores (kernels.pair_fold_scores), give the integers of the plain route (every
    feature folded, then every row scored by the numpy loop), over a selection path with a
    restart (a new block starts from the empty pattern), a step run twice, and a state two
    features behind."""
    from vmi_spark.core import bound, kernels
    from vmi_spark.core.bound import PAIRWISE, ChunkState, StepOps, pairwise_partials
    from vmi_spark.core.tables import conditional, pair_conditional, safe_log

    rng = np.random.default_rng(num_classes)
    n, d = 4000, 10
    y = rng.integers(0, num_classes, n)
    codes = ((rng.integers(0, 3, (d, n)) + (rng.random((d, n)) < 0.4) * y) % 3).astype(np.uint8)
    be = InMemoryBackend(codes, y)
    counts = be.feature_counts()
    prior = counts[0].sum(axis=0) / n
    tables = {f: safe_log(pair_conditional(be.pair_counts(f))) for f in range(d)}
    path = [(0,), (0, 3), (0, 3), (0, 3, 5, 7), (0, 3, 5, 7, 1), (2,), (2, 8), (2, 8, 9)]

    def ops_of(block, used, ratio=bound.PAIR_CELL_RATIO):
        cands = np.ones(d, bool)
        cands[list(used)] = False
        return StepOps(PAIRWISE, prior, conditional(counts), cands, block, tables,
                       routes=bound.Routes(pair_cell_ratio=ratio))

    expected, used = [], set()
    for block in path:  # the plain route, from a fresh state every step
        used.update(block)
        ops = ops_of(block, used)
        state = ChunkState.initial(prior, n, d)
        for f in block:
            bound.pairwise_add(codes, y, state, f, ops)
        out = np.zeros(d, dtype=np.int64)
        cands = np.flatnonzero(ops.candidates)
        out[cands] = kernels.pair_scores_np(state.log_ratio, state.posterior, y, cands, len(block))
        expected.append(out)
    routes = {}
    originals = {name: getattr(kernels, name) for name in ("pair_cell_scores", "pair_fold_scores")}
    for ratio, label in ((10**12, "rows"), (1, "patterns")):
        calls = dict.fromkeys(originals, 0)
        for name, fn in originals.items():
            def spy(*a, _fn=fn, _name=name, _calls=calls):
                _calls[_name] += 1
                return _fn(*a)
            monkeypatch.setattr(kernels, name, spy)
        state = ChunkState.initial(prior, n, d)
        used = set()
        for block, want in zip(path, expected):
            used.update(block)
            ops = ops_of(block, used, ratio)
            assert np.array_equal(pairwise_partials(codes, y, state, ops), want)
        routes[label] = calls
    # both routes were taken: the short blocks' cells are few, (3 states)^m patterns x 3 x L
    rows, patterns = routes["rows"], routes["patterns"]
    assert rows["pair_cell_scores"] == 0 and rows["pair_fold_scores"] == len(path) - 1
    assert patterns["pair_cell_scores"] >= 3


def test_a_block_past_the_cells_limit_is_not_grouped_again_when_extended(monkeypatch):
    """Once a block has more cells than the limit, its extensions are scored per row without
    block_patterns (their patterns only split further); another block, or another limit,
    is grouped again. The scores are the same integers either way."""
    from vmi_spark.core import bound
    from vmi_spark.core.bound import PAIRWISE, ChunkState, StepOps, pairwise_partials
    from vmi_spark.core.tables import conditional, pair_conditional, safe_log

    rng = np.random.default_rng(7)
    n, d = 2000, 9
    y = rng.integers(0, 2, n)
    codes = ((rng.integers(0, 2, (d, n)) + (rng.random((d, n)) < 0.3) * y) % 2).astype(np.uint8)
    be = InMemoryBackend(codes, y, 2, 2)
    counts = be.feature_counts()
    prior = counts[0].sum(axis=0) / n
    tables = {f: safe_log(pair_conditional(be.pair_counts(f))) for f in range(d)}
    path = [(0,), (0, 1), (0, 1, 2), (0, 1, 2, 3), (0, 1, 2, 3, 4), (5,), (5, 6)]
    grouped = []
    original = bound.block_patterns
    monkeypatch.setattr(bound, "block_patterns",
                        lambda c, b, *a: grouped.append(tuple(b)) or original(c, b, *a))

    def run(state, ratio):
        out = []
        for block in path:
            cands = np.ones(d, bool)
            cands[[f for b in path[:path.index(block) + 1] for f in b]] = False
            ops = StepOps(PAIRWISE, prior, conditional(counts), cands, block, tables,
                          routes=bound.Routes(pair_cell_ratio=ratio))
            out.append(pairwise_partials(codes, y, state, ops))
        return out

    # 2000 // 50 = 40 cells at most: (0, 1, 2) has 2^3 patterns x 2 x 2 = 32, one more 64
    kept = run(ChunkState.initial(prior, n, d), 50)
    assert grouped == [(0,), (0, 1), (0, 1, 2), (0, 1, 2, 3), (5,), (5, 6)]
    never = run(ChunkState.initial(prior, n, d), 10**12)  # never grouped: every row scored
    assert all(np.array_equal(a, b) for a, b in zip(kept, never))
    # a state that noted a block under another limit groups the rows again
    state = ChunkState.initial(prior, n, d)
    state.many_cells = (7, (0,))
    grouped.clear()
    cands = np.ones(d, bool)
    cands[[0, 1]] = False
    pairwise_partials(codes, y, state, StepOps(PAIRWISE, prior, conditional(counts), cands,
                                               (0, 1), tables,
                                               routes=bound.Routes(pair_cell_ratio=50)))
    assert grouped == [(0, 1)] and state.many_cells == (7, (0,))


def test_pattern_kernel_is_used_for_short_blocks_and_rows_for_long_ones():
    from vmi_spark.core import bound

    rng = np.random.default_rng(0)
    n = 4096
    codes = rng.integers(0, 4, (10, n)).astype(np.uint8)
    ids, post, rest = bound.naive_posterior(codes, (0, 1), np.full((10, 4, 2), 0.25),
                                            np.array([0.5, 0.5]), n // 4)
    assert post.shape == (16, 2) and rest == ()
    # ids index the observed patterns of (x_0, x_1) one to one
    pairs = codes[0].astype(int) * 4 + codes[1]
    assert len(np.unique(ids)) == len(np.unique(pairs)) == 16
    assert all(len(np.unique(pairs[ids == p])) == 1 for p in range(16))
    _, post, rest = bound.naive_posterior(codes, tuple(range(8)), np.full((10, 4, 2), 0.25),
                                          np.array([0.5, 0.5]), n // 4)
    assert rest and post.shape[0] <= n // 4


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("stop_after", [1, 3, 5, 8])
def test_resume_from_a_saved_step_gives_the_uninterrupted_result(method, stop_after):
    """A run resumed after step k ends exactly like a run that was never stopped."""
    _, codes, y = load_lung()
    full = run(codes, y, method, 10, tol=0.01)
    assert full.restarts >= 1  # the resumes below cross a restart

    def stop(sel):
        if len(sel.selected) == stop_after:
            raise StopSelection

    part = select_vmi(InMemoryBackend(codes, y), method, 10, 0.01, on_step=stop)
    assert len(part.selected) == stop_after
    resumed = select_vmi(InMemoryBackend(codes, y), method, 10, 0.01, resume=part)
    assert resumed.selected == full.selected
    assert resumed.blocks == full.blocks
    assert resumed.scores == full.scores
    assert resumed.gains == full.gains
    assert resumed.restarts == full.restarts


def test_pairwise_state_rebuilt_mid_block_matches(monkeypatch):
    """A pairwise backend whose state is dropped mid-block rebuilds it to the same sums."""
    _, codes, y = load_lung()
    full = run(codes, y, PAIRWISE, 8, tol=0.01)
    be = InMemoryBackend(codes, y)
    original = be.run
    calls = {"n": 0}

    def flaky(ops):
        calls["n"] += 1
        if calls["n"] % 3 == 0:
            be.states.reset()  # as if the state had been lost
        return original(ops)

    be.run = flaky
    got = select_vmi(be, PAIRWISE, 8, 0.01)
    assert got.selected == full.selected and got.scores == full.scores


@pytest.mark.parametrize("method", METHODS)
def test_chunks_mapped_on_threads_give_the_same_integers(method):
    """``InMemoryBackend(map=pool.map)`` (the driver execution's threads) sums the same
    per-chunk integers as the chunks taken in turn, and the slow reference agrees."""
    from concurrent.futures import ThreadPoolExecutor

    codes, y = random_data(5, 9, 300, 3, 4)
    ref = reference_of(codes, y)
    sel, scores, *_ = ref.greedy(method, 9, 0.0)
    plain = select_vmi(InMemoryBackend(codes, y, chunk_rows=37), method, 9)
    with ThreadPoolExecutor(3) as pool:
        threaded = select_vmi(InMemoryBackend(codes, y, chunk_rows=37, map=pool.map),
                              method, 9)
    assert threaded.selected == plain.selected == sel
    assert threaded.scores == plain.scores
    np.testing.assert_allclose(threaded.scores, scores, rtol=0, atol=1e-9)


def test_count_passes_are_mapped_over_the_chunks_and_sum_every_row():
    """feature_counts, pair_counts and pair_counts_many go through the backend's ``map`` (the
    driver execution's threads), one call per chunk, and count every row once: against a
    plain count over the whole table."""
    from concurrent.futures import ThreadPoolExecutor

    codes, y = random_data(8, 6, 500, 2, 3)
    calls = []
    with ThreadPoolExecutor(2) as pool:
        def spy(fn, items):
            items = list(items)
            calls.append(len(items))
            return pool.map(fn, items)

        be = InMemoryBackend(codes, y, 3, 2, chunk_rows=64, map=spy)
        single = be.feature_counts()
        pair = be.pair_counts(4)
        many = be.pair_counts_many([4, 1])
    assert calls == [8, 8, 8]  # 500 rows in chunks of 64
    for i in range(6):
        for a in range(3):
            for c in range(2):
                assert single[i, a, c] == np.sum((codes[i] == a) & (y == c))
                for b in range(3):
                    want = np.sum((codes[i] == a) & (codes[4] == b) & (y == c))
                    assert pair[i, a, b, c] == many[0, i, a, b, c] == want
                    assert many[1, i, a, b, c] == np.sum((codes[i] == a) & (codes[1] == b)
                                                         & (y == c))


@pytest.mark.parametrize("num_classes", [2, 3])
def test_naive_state_folds_on_to_the_stateless_integers(num_classes):
    """A step that folds only its new features into the kept posterior (``NaiveState``)
    gives the integers of the step that rebuilds the posterior from all of them, over a
    selection path with a restart, a repeated block and a block that is not an extension;
    the kept posterior is a plain per-row product of the block's tables, normalised."""
    from vmi_spark.core import bound

    rng = np.random.default_rng(num_classes)
    n, d = 4000, 14
    y = rng.integers(0, num_classes, n)
    codes = ((rng.integers(0, 5, (d, n)) + (rng.random((d, n)) < 0.4) * y) % 5).astype(np.uint8)
    path = [(0,), (0, 3), (0, 3, 7), (0, 3, 7, 1), (0, 3, 7, 1, 9), (0, 3, 7, 1, 9),
            (2,), (2, 5), (2, 5, 11), (2, 5, 11, 4), (2, 6, 11, 4), (2, 6, 11, 4, 13)]
    state = bound.NaiveState()
    per_row = 0
    for block in path:
        ops = _naive_ops(codes, y, list(block))
        kept = bound.naive_partials(codes, ops, state)
        assert np.array_equal(kept, bound.naive_partials(codes, ops)), block
        if state.block == block:  # the per-row kernel ran: its posterior is kept
            per_row += 1
            post = np.tile(ops.prior, (n, 1))
            for f in block:
                post = post * ops.cond[f][codes[f]]
                post /= post.sum(axis=1, keepdims=True)
            np.testing.assert_allclose(state.rows.T, post, rtol=1e-12)
    assert per_row >= 6  # long blocks leave the pattern kernel and fold on
    assert state.nbytes == 8 * n * num_classes
    # the numpy loops fold on to the same integers
    from vmi_spark.core import kernels

    state_np = bound.NaiveState()
    with kernels.using("numpy"):
        for block in path:
            ops = _naive_ops(codes, y, list(block))
            assert np.array_equal(bound.naive_partials(codes, ops, state_np),
                                  bound.naive_partials(codes, ops)), block


def test_in_memory_backend_keeps_the_naive_posterior_between_steps():
    """The in-memory (and driver) backend keeps each chunk's naive posterior and gives the
    selection of a backend that rebuilds it every step; close() forgets it."""
    from vmi_spark.core import bound

    codes, y = random_data(7, 12, 3000, 3, 5)
    be = InMemoryBackend(codes, y, chunk_rows=700)
    kept = select_vmi(be, NAIVE, 10, 0.0)
    assert any(s.block for s in be.kept_states("naive"))
    be.close()
    assert not any(s.block for s in be.kept_states("naive"))

    class Stateless(InMemoryBackend):
        def run(self, ops):
            self.close()
            return super().run(ops)

    rebuilt = select_vmi(Stateless(codes, y, chunk_rows=700), NAIVE, 10, 0.0)
    assert kept.selected == rebuilt.selected and kept.scores == rebuilt.scores
    assert bound.NaiveState().nbytes == 0


def test_naive_state_is_rebuilt_under_other_tables():
    """The kept posterior belongs to the tables it was computed with: the same block under
    another conditional (an equal copy included) is recomputed, not folded on."""
    from vmi_spark.core import bound
    from vmi_spark.core.bound import StepOps

    codes, y = random_data(3, 10, 2500, 2, 5)
    ops = _naive_ops(codes, y, [0, 1, 2, 3, 4, 5])
    state = bound.NaiveState()
    bound.naive_partials(codes, ops, state)
    assert state.block == ops.block and state.holds(ops)
    other = ops.cond + 1e-3
    other /= other.sum(axis=1, keepdims=True)
    ops2 = StepOps(NAIVE, ops.prior, other, ops.candidates, ops.block + (6,))
    assert not state.holds(ops2)
    assert np.array_equal(bound.naive_partials(codes, ops2, state), bound.naive_partials(codes, ops2))
    assert not state.holds(StepOps(NAIVE, ops.prior, other.copy(), ops.candidates, ops.block))


@pytest.mark.parametrize("chunk_cells", [1, 37, 1 << 20])
def test_pattern_kernel_in_candidate_chunks_gives_the_per_row_integers(chunk_cells):
    """The pattern kernel scores candidates a chunk of table cells at a time (one candidate
    per chunk at the smallest): the integers of the per-row kernel, for a wide chunk of a
    few hundred rows as a 30,000-column table's chunks are."""
    from vmi_spark.core import bound

    rng = np.random.default_rng(chunk_cells)
    n, d = 300, 400
    y = rng.integers(0, 2, n)
    codes = ((rng.integers(0, 8, (d, n)) + (rng.random((d, n)) < 0.4) * y) % 8).astype(np.uint8)
    ops = _naive_ops(codes, y, [5])
    chunked = replace(ops, routes=bound.Routes(pattern_ratio=1, pattern_chunk_cells=chunk_cells))
    assert bound.naive_rows(codes, chunked, None)[0] is not None  # the pattern kernel's route
    patterns = bound.naive_partials(codes, chunked)
    # per-row kernel forced
    rows = bound.naive_partials(codes, replace(ops, routes=bound.Routes(pattern_ratio=10**12)))
    assert np.array_equal(rows, patterns)
    assert (patterns[ops.candidates] != 0).all() and (patterns[~ops.candidates] == 0).all()
