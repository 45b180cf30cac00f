"""The selection methods as criteria, and their registry.

Every method is a :class:`~.criterion.Criterion` registered here, and
:func:`vmi_spark.core.greedy.select` runs each one through the same greedy loop:

* ``vmi_naive`` and ``vmi_pairwise`` (:class:`BoundCriterion`): the variational lower
  bound I_LB of the paper with the naive Bayes or the pairwise Q-distribution; a step
  scores every candidate by one pass over the rows (``backend.run(StepOps)``), and the
  features are chosen in blocks with the restart rule (Gao et al. 2016, Algorithm 1).
* The comparison criteria ``mim``, ``mrmr``, ``jmi``, ``cmim``, ``cife``
  (:class:`RunningCriterion`) and ``spec_cmi`` (:class:`SpecCMI`). All quantities are
  plug-in estimates in nats, computed on the driver from the integer count tables the
  backend returns, so every result is a deterministic function of the counts and does
  not depend on how the rows were partitioned.

Greedy criteria (Brown et al., JMLR 2012, Table 1, with S the selected set; the
first feature is always argmax I(x_i; y)):

=======  ==============================================================
mim      I(x_i; y)
mrmr     I(x_i; y) - 1/|S| sum_{j in S} I(x_i; x_j)
jmi      sum_{j in S} [I(x_i; y) - I(x_i; x_j) + I(x_i; x_j | y)]
         = sum_{j in S} I(x_i; y | x_j)
cife     I(x_i; y) - sum_{j in S} [I(x_i; x_j) - I(x_i; x_j | y)]
cmim     min_{j in S} I(x_i; y | x_j)                 (Fleuret 2004)
=======  ==============================================================

Each step needs only the (x_i, x_last, y) count table of every candidate i
against the feature just selected: one ``backend.pair_counts(last)`` per step,
folded into O(D) running sums (mRMR, JMI, CIFE) or a running minimum (CMIM) on
the driver. MIM needs only ``backend.feature_counts()``.

SPEC_CMI (Nguyen, Chan, Romano & Bailey, KDD 2014) ranks the features by the
dominant eigenvector of the D x D matrix Q with Q_ii = I(x_i; y) and
Q_ij = [I(x_i; y | x_j) + I(x_j; y | x_i)] / 2; all pair tables are fetched in
bulk with ``backend.pair_counts_many(fs)`` over blocks of features.

Adding a criterion is one entry in :data:`CRITERIA` (an instance of one of these
classes, or of a new :class:`~.criterion.Criterion` subclass) and its tests; at run
time :func:`register` adds one.

Ties
----
Every information quantity is computed in the entropy form
``sum n log n`` with each sum taken over its terms *sorted*, so two features whose
count tables are equal up to a relabelling of their values get bit-identical
values and exact ties go to the lowest index. A sample that is exactly
independent (conditionally independent) gives exactly 0.0. For SPEC_CMI the
eigenvector entries are compared after rounding to 12 decimals (the eigensolver
does not preserve symmetry between identical features to the last bit).

References
----------
S. Gao, G. Ver Steeg, A. Galstyan. Variational Information Maximization for Feature
Selection. NIPS 2016.
G. Brown, A. Pocock, M.-J. Zhao, M. Lujan. Conditional Likelihood Maximisation: A
Unifying Framework for Information Theoretic Feature Selection. JMLR 13, 2012.
F. Fleuret. Fast Binary Feature Selection with Conditional Mutual Information. JMLR 5,
2004.
X. V. Nguyen, J. Chan, S. Romano, J. Bailey. Effective Global Approaches for Mutual
Information Based Feature Selection. KDD 2014.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from . import explog
from .bound import NAIVE, PAIRWISE, SCALE, StepOps, naive_own
from .criterion import Backend, BaseScorer, Criterion, Scorer
from .tables import (
    conditional,
    mutual_information,
    pair_conditional,
    products_equal,
    safe_log,
)

MIM = "mim"
MRMR = "mrmr"
JMI = "jmi"
CMIM = "cmim"
CIFE = "cife"
SPEC_CMI = "spec_cmi"

#: byte budget of one bulk (len(fs), D, A, A, L) int64 pair-count array (SPEC_CMI, and
#: the running folds of a resumed selection's replayed steps)
PAIR_BLOCK_BYTES = 256 * 2**20
#: decimals the SPEC_CMI eigenvector entries are rounded to, ranked and reported
SPEC_RANK_DECIMALS = 12


# ---------------------------------------------------------------------------
# Information quantities from count tables
# ---------------------------------------------------------------------------

def _sorted_xlogx_sum(counts: np.ndarray) -> np.ndarray:
    """``sum n log n`` over all axes but the first, summing the terms in sorted order."""
    n = np.asarray(counts, dtype=np.float64).reshape(counts.shape[0], -1)
    logn = np.zeros_like(n)
    pos = n > 0
    logn[pos] = explog.log(n[pos])  # the same bits with every numpy (not np.log)
    terms = np.sort(n * logn, axis=1)
    return terms.sum(axis=1)


def conditional_mutual_information(counts: np.ndarray) -> np.ndarray:
    """Plug-in I(X; Y | Z) in nats for every leading index, from ``counts[d, x, y, z]``.

    Computed as ``[sum n_xyz log n_xyz + sum n_z log n_z - sum n_xz log n_xz
    - sum n_yz log n_yz] / N``; a table that is exactly conditionally independent
    (``n_xyz n_z == n_xz n_yz`` in every cell) gives exactly 0.0, and rounding
    residues below zero are clipped to 0.0. With a singleton Z axis this is I(X; Y).
    """
    counts = np.asarray(counts, dtype=np.int64)
    n_xz = counts.sum(axis=2)  # (D, X, Z)
    n_yz = counts.sum(axis=1)  # (D, Y, Z)
    n_z = n_xz.sum(axis=1)  # (D, Z)
    total = n_z.sum(axis=1)  # (D,)
    s = (_sorted_xlogx_sum(counts) + _sorted_xlogx_sum(n_z)
         - _sorted_xlogx_sum(n_xz) - _sorted_xlogx_sum(n_yz))
    cmi = np.maximum(s / np.maximum(total, 1), 0.0)
    # exact independence test in integers (products_equal: past int64 with row weights)
    if counts.size:
        independent = np.all(products_equal(counts, n_z[:, None, None, :],
                                            n_xz[:, :, None, :], n_yz[:, None, :, :]),
                             axis=(1, 2, 3))
        cmi[independent] = 0.0
    return cmi


def label_mutual_information(counts: np.ndarray) -> np.ndarray:
    """I(x_i; y) for every feature from ``counts[i, a, y]`` (D, A, L)."""
    counts = np.asarray(counts)
    return conditional_mutual_information(counts[..., None])


def pair_mutual_information(pair: np.ndarray) -> np.ndarray:
    """I(x_i; x_j) for every i against one j, from ``pair[i, a, b, y]`` (D, A, A, L)."""
    pair = np.asarray(pair)
    return conditional_mutual_information(pair.sum(axis=3)[..., None])


def pair_conditional_mutual_information(pair: np.ndarray) -> np.ndarray:
    """I(x_i; x_j | y) for every i against one j, from ``pair[i, a, b, y]`` (D, A, A, L)."""
    return conditional_mutual_information(pair)


def label_conditional_mutual_information(pair: np.ndarray) -> np.ndarray:
    """I(x_i; y | x_j) for every i against one j, from ``pair[i, a, b, y]`` (D, A, A, L)."""
    pair = np.asarray(pair)
    return conditional_mutual_information(pair.transpose(0, 1, 3, 2))


# ---------------------------------------------------------------------------
# Pair tables in bulk
# ---------------------------------------------------------------------------

def _pair_block_size(num_cols: int, arity: int, num_classes: int, budget: int) -> int:
    """Features per bulk pair-count request, keeping the int64 array under ``budget`` bytes."""
    per_feature = max(1, num_cols * arity * arity * num_classes * 8)
    return max(1, min(num_cols, budget // per_feature))


def bulk_pair_counts(backend: Backend, fs: Sequence[int], shape: tuple[int, ...],
                     budget: int = PAIR_BLOCK_BYTES) -> Iterator[tuple[list[int], np.ndarray]]:
    """The pair tables of the features ``fs`` in bulk requests of at most ``budget`` bytes
    (:data:`PAIR_BLOCK_BYTES`): ``(part, tables)`` in order, ``tables`` the
    (len(part), D, A, A, L) counts of the features ``part`` (``shape`` is the (D, A, L)
    shape of the feature counts). Nothing here holds a request's array once it is yielded.
    """
    step = _pair_block_size(shape[0], shape[1], shape[2], budget)
    for start in range(0, len(fs), step):
        part = list(fs[start:start + step])
        yield part, np.asarray(backend.pair_counts_many(part))


def spec_cmi_matrix(backend: Backend, counts: np.ndarray | None = None,
                    budget: int = PAIR_BLOCK_BYTES) -> np.ndarray:
    """The SPEC_CMI matrix Q (D x D): Q_ii = I(x_i; y), Q_ij = [I(x_i;y|x_j) + I(x_j;y|x_i)] / 2.

    ``counts`` is the backend's (D, A, L) ``feature_counts()`` if already at hand.
    The pair tables are requested in bulk (:func:`bulk_pair_counts`, ``budget`` bytes a
    request).
    """
    if counts is None:
        counts = backend.feature_counts()
    num_cols = counts.shape[0]
    relevance = label_mutual_information(counts)
    cond = np.zeros((num_cols, num_cols))  # cond[i, j] = I(x_i; y | x_j)
    for fs, tables in bulk_pair_counts(backend, range(num_cols), counts.shape, budget):
        for k, f in enumerate(fs):
            cond[:, f] = label_conditional_mutual_information(tables[k])
        del tables  # one bulk array in memory at a time
    q = (cond + cond.T) / 2.0
    q[np.diag_indices(num_cols)] = relevance
    return q


def dominant_eigenvector(q: np.ndarray) -> np.ndarray:
    """Unit eigenvector of the largest eigenvalue of symmetric ``q``, signed to a positive sum."""
    if q.shape[0] == 0:
        return np.zeros(0)
    if not np.any(q):  # no feature carries information: every direction is dominant
        return np.full(q.shape[0], 1.0 / np.sqrt(q.shape[0]))
    _, vecs = np.linalg.eigh(q)
    v = vecs[:, -1].copy()
    total = v.sum()
    if total < 0 or (total == 0 and v[np.flatnonzero(v)[:1]].sum() < 0):
        v = -v
    return v


# ---------------------------------------------------------------------------
# The variational bound (vmi_naive, vmi_pairwise)
# ---------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class BoundCriterion(Criterion):
    """The variational lower bound I_LB(x_S; y) with a Q-distribution.

    A step scores every candidate i by the bound's increment I_LB(S + i) - I_LB(S) of the
    current block S, one pass over the rows (:meth:`Backend.run` of a
    :class:`~.bound.StepOps`, exact fixed-point sums); the first feature of a block by its
    mutual information with the label (the one-feature bound). The loop clears a block by
    the restart rule (:func:`vmi_spark.core.greedy.select`).

    References
    ----------
    S. Gao, G. Ver Steeg, A. Galstyan. Variational Information Maximization for Feature
    Selection. NIPS 2016, Eq. 9-12 and Algorithm 1.
    """

    vmi: bool = True
    corrected: bool = True

    def start(self, backend: Backend,
              conditional_fn: Callable[[np.ndarray], np.ndarray] | None = None) -> Scorer:
        return BoundScorer(self, backend, conditional_fn)

    def own_terms(self, counts: np.ndarray, cond: np.ndarray) -> np.ndarray:
        """(D,) int64 the part of every increment that the counts give (added to every pass)."""
        return np.zeros(counts.shape[0], dtype=np.int64)

    def below_threshold(self, gain: float, min_gain: float, in_block: bool) -> str:
        what = ("raises the bound by" if in_block
                else "has a one-feature bound (mutual information) of")
        tail = " and no new block would start above it" if in_block else ""
        return (f"the best candidate {what} {gain:.6g} nats, below the threshold "
                f"{min_gain:g}{tail}")


@dataclass(frozen=True, kw_only=True)
class NaiveBound(BoundCriterion):
    """I_LB with the naive Bayes Q: q(x_S | y) = prod_j p(x_j | y).

    Its first term, sum_k log p(x_i^k | y_k), depends on the counts only
    (:func:`~.bound.naive_own`); a pass sums the mixture terms.
    """

    def own_terms(self, counts: np.ndarray, cond: np.ndarray) -> np.ndarray:
        return naive_own(counts, cond)


@dataclass(frozen=True, kw_only=True)
class PairwiseBound(BoundCriterion):
    """I_LB with the pairwise Q: the geometric mean of p(x_i | x_j, y) over the block's j.

    Each chosen feature's pair tables log p(x_i | x_f, y) go to the passes, and the
    executors keep per-row running sums (8 bytes a row, feature and class).
    """

    pair_tables_per_step: bool = True

    def row_state_bytes(self, num_features: int, num_classes: int) -> int:
        return 8 * num_features * num_classes


def chi2_quantile(df: np.ndarray, p: float) -> np.ndarray:
    """The ``p`` quantile of the chi-square distribution with ``df`` degrees of freedom
    (0 where ``df`` is 0): exact for 1 and 2 degrees of freedom (the square of a normal
    quantile; -2 log(1 - p)), else the Wilson-Hilferty cube-root normal approximation
    (within 1% at p up to 0.999 and 5% at 1 - 1e-5 from 3 degrees of freedom on).

    References
    ----------
    E. B. Wilson, M. M. Hilferty. The distribution of chi-square. PNAS 17(12), 1931.
    """
    df = np.asarray(df, dtype=np.float64)
    z = NormalDist().inv_cdf(p)
    k = np.maximum(df, 1.0)
    q = k * np.maximum(1.0 - 2.0 / (9.0 * k) + z * np.sqrt(2.0 / (9.0 * k)), 0.0) ** 3
    q = np.where(df == 1, NormalDist().inv_cdf((1.0 + p) / 2.0) ** 2, q)
    q = np.where(df == 2, -2.0 * np.log1p(-p), q)
    return np.where(df > 0, q, 0.0)


def chance_gains(states: np.ndarray, classes: int, rows: int,
                 p: float | None = None) -> np.ndarray:
    """(D,) the expected plug-in gain of a feature independent of the label: (A_i - 1)(L -
    1) / 2N nats for ``states`` A_i, ``classes`` L and ``rows`` N.

    Twice N times the plug-in mutual information of two independent variables is the
    G statistic, chi-square with (A - 1)(L - 1) degrees of freedom, so its expectation is
    (A - 1)(L - 1) / 2N: Miller's first-order bias of the plug-in estimate. A step of the
    naive Bayes bound adds the class-conditional table of the new feature, (A_i - 1)(L - 1)
    parameters more than a feature independent of the label: the same expectation by
    Wilks' theorem. Subtracting it ranks features for what they say about the label, not
    for how many states they have, and lets the restart rule see when no candidate beats
    chance (a plug-in gain is never negative).

    References
    ----------
    G. A. Miller. Note on the bias of information estimates. In Information Theory in
    Psychology, 1955, 95-100.
    S. S. Wilks. The large-sample distribution of the likelihood ratio for testing
    composite hypotheses. Annals of Mathematical Statistics 9(1), 1938.
    N. X. Vinh, J. Chan, J. Bailey. Reconsidering mutual information based feature
    selection: a statistical significance view. AAAI 2014.
    """
    df = (np.maximum(states, 1) - 1) * max(classes - 1, 0)
    if p is not None:  # the G-test's critical value at level 1 - p
        return chi2_quantile(df, p) / (2.0 * max(rows, 1))
    return df / (2.0 * max(rows, 1))


def significant_relevance(counts: np.ndarray, relevance: np.ndarray, level: float
                          ) -> np.ndarray:
    """(D,) bool: the features whose plug-in I(x_i; y) is significant at ``level`` by the
    G-test, Bonferroni over the D features.

    2N I(x_i; y) is chi-square with (A_i - 1)(L - 1) degrees of freedom for a feature
    independent of the label (:func:`chance_gains`); a feature is significant when its
    information exceeds the critical value at 1 - ``level`` / D. ``counts`` are the
    (D, A, L) tables n(x_i = a, y = l) the relevance was computed from.

    References
    ----------
    N. X. Vinh, J. Chan, J. Bailey. Reconsidering mutual information based feature
    selection: a statistical significance view. AAAI 2014.
    """
    d = len(relevance)
    if d == 0:
        return np.zeros(0, dtype=bool)
    rows = int(counts[0].sum())
    states = (counts.sum(axis=2) > 0).sum(axis=1)
    classes = int((counts[0].sum(axis=0) > 0).sum())
    critical = chance_gains(states, classes, rows, 1.0 - level / d)
    return np.asarray(relevance > critical) & (states > 1)


class BoundScorer(BaseScorer):
    """A selection's bound: p(y), p(x_i | y), the counts' terms and the block's pair tables."""

    def __init__(self, criterion: BoundCriterion, backend: Backend,
                 conditional_fn: Callable[[np.ndarray], np.ndarray] | None):
        counts = backend.feature_counts()
        self.criterion, self.backend = criterion, backend
        self.num_rows = int(counts[0].sum())
        self.prior = counts[0].sum(axis=0) / self.num_rows
        self.cond = conditional(counts) if conditional_fn is None else conditional_fn(counts)
        # the naive bound's first term depends only on the counts: added to every pass
        self.own = criterion.own_terms(counts, self.cond)
        self.tables: dict[int, np.ndarray] = {}
        self.states = (counts.sum(axis=2) > 0).sum(axis=1)  # non-empty states per feature
        self.classes = int((counts[0].sum(axis=0) > 0).sum()) if len(counts) else 0
        if conditional_fn is None:
            self.relevance = mutual_information(counts)
        else:  # the one-feature bound under the given table: I_LB of block {i} for every i
            self.relevance = self._increments(np.ones(counts.shape[0], dtype=bool), (),
                                              f"{criterion.name} relevance")

    def _increments(self, candidates: np.ndarray, block: Sequence[int],
                    label: str) -> np.ndarray:
        ops = StepOps(method=self.criterion.name, prior=self.prior, cond=self.cond,
                      candidates=candidates, block=tuple(block), pair_log_tables=self.tables,
                      label=label)
        return (self.backend.run(ops) + self.own).astype(np.float64) / SCALE / self.num_rows

    def gains(self, candidates: np.ndarray, block: Sequence[int], label: str) -> np.ndarray:
        return self._increments(candidates, block, label) if block else self.relevance

    def chance(self, block: Sequence[int], p: float | None = None) -> np.ndarray:
        """The gain a feature that says nothing about the label reaches by chance
        (:func:`chance_gains`): with A_i states, L classes and N rows, (A_i - 1)(L - 1) /
        2N nats for the first feature of a block and for a naive Bayes step; for a
        pairwise step, whose tables condition on each feature of the block, that times
        the block's mean number of states."""
        if block and self.criterion.pair_tables_per_step:
            scale = float(np.mean(self.states[list(block)]))
            df = (np.maximum(self.states, 1) - 1) * max(self.classes - 1, 0) * scale
            if p is None:
                return df / (2.0 * max(self.num_rows, 1))
            return chi2_quantile(df, p) / (2.0 * max(self.num_rows, 1))
        return chance_gains(self.states, self.classes, self.num_rows, p)

    def chose(self, f: int) -> None:
        if self.criterion.pair_tables_per_step:
            self.tables[f] = safe_log(pair_conditional(self.backend.pair_counts(f)))

    def restart(self) -> None:
        self.tables = {}


# ---------------------------------------------------------------------------
# The greedy comparison criteria (mim, mrmr, jmi, cmim, cife)
# ---------------------------------------------------------------------------

def _relevance(relevance: np.ndarray, running: np.ndarray, size: int) -> np.ndarray:
    """I(x_i; y)"""
    return relevance


def _mean_redundancy(relevance: np.ndarray, running: np.ndarray, size: int) -> np.ndarray:
    """I(x_i; y) - (1/|S|) sum_j I(x_i; x_j)"""
    return relevance - running / size


def _running(relevance: np.ndarray, running: np.ndarray, size: int) -> np.ndarray:
    """the running sum or minimum itself"""
    return running


def _redundancy(relevance: np.ndarray, running: np.ndarray, size: int) -> np.ndarray:
    """I(x_i; y) - sum_j [I(x_i; x_j) - I(x_i; x_j | y)]"""
    return relevance - running


def _cife_term(pair: np.ndarray) -> np.ndarray:
    """I(x_i; x_j) - I(x_i; x_j | y)"""
    return pair_mutual_information(pair) - pair_conditional_mutual_information(pair)


@dataclass(frozen=True, kw_only=True)
class RunningCriterion(Criterion):
    """A criterion of the relevance I(x_i; y) and one running fold over the selected set.

    Each selected feature j adds ``term(pair_j)`` (a (D,) array from its (D, A, A, L)
    pair table) into a running (D,) array with ``fold`` (``np.add``: a sum, from 0;
    ``np.minimum``: a minimum, from +inf); a step's values are
    ``value(relevance, running, |S|)``. Without a term the values are the relevance
    (MIM) and no pair table is counted. The first feature is always argmax I(x_i; y).

    References
    ----------
    G. Brown, A. Pocock, M.-J. Zhao, M. Lujan. Conditional Likelihood Maximisation: A
    Unifying Framework for Information Theoretic Feature Selection. JMLR 13, 2012.
    F. Fleuret. Fast Binary Feature Selection with Conditional Mutual Information. JMLR 5,
    2004 (CMIM).
    """

    term: Callable[[np.ndarray], np.ndarray] | None = None
    fold: np.ufunc = np.add
    initial: float = 0.0
    value: Callable[[np.ndarray, np.ndarray, int], np.ndarray] = _relevance

    def __post_init__(self) -> None:
        object.__setattr__(self, "pair_tables_per_step", self.term is not None)

    def start(self, backend: Backend,
              conditional_fn: Callable[[np.ndarray], np.ndarray] | None = None) -> Scorer:
        return RunningScorer(self, backend)


class RunningScorer(BaseScorer):
    """The relevance, the running fold, |S| folded, and the chosen feature not folded yet
    (its pair table is counted when the next step needs it; in a replay, taken from the
    bulk counts of the saved features)."""

    def __init__(self, criterion: RunningCriterion, backend: Backend):
        counts = backend.feature_counts()
        self.criterion, self.backend, self.shape = criterion, backend, counts.shape
        self.num_rows = int(counts[0].sum()) if counts.shape[0] else 0
        self.relevance = label_mutual_information(counts)
        self.running = np.full(counts.shape[0], criterion.initial)
        self.size = 0
        self.last: int | None = None
        self._replayed: Iterator[tuple[int, np.ndarray]] | None = None

    def _fold(self, pair: np.ndarray) -> None:
        term = self.criterion.term
        assert term is not None
        self.criterion.fold(self.running, term(pair), out=self.running)
        self.size += 1

    def gains(self, candidates: np.ndarray, block: Sequence[int], label: str) -> np.ndarray:
        if self.last is None or self.criterion.term is None:
            return self.relevance
        self._fold(self._pair(self.last))
        self.last = None
        return self.criterion.value(self.relevance, self.running, self.size)

    def _pair(self, f: int) -> np.ndarray:
        """The pair table of ``f``: the next of a replay's bulk counts when it is ``f``'s
        (the replay checked the choice), else one pass over the rows (the step's only)."""
        if self._replayed is not None:
            g, pair = next(self._replayed, (None, None))
            if g == f and pair is not None:
                return pair
            self._replayed = None  # past the saved steps
        return self.backend.pair_counts(f)

    def chose(self, f: int) -> None:
        self.last = f

    def replay(self, selected: Sequence[int]) -> None:
        # the saved features' pair tables but the last's (the next new step counts that
        # one), in bulk requests made as the replay reaches them
        if self.criterion.term is not None and len(selected) > 1:
            self._replayed = _tables(self.backend, list(selected[:-1]), self.shape)


def _tables(backend: Backend, fs: list[int], shape: tuple[int, ...]
            ) -> Iterator[tuple[int, np.ndarray]]:
    """``(f, table)`` for every feature of ``fs`` in order, from :func:`bulk_pair_counts`."""
    for part, pairs in bulk_pair_counts(backend, fs, shape):
        for k, f in enumerate(part):
            yield f, pairs[k]
        del pairs  # one bulk array in memory at a time


# ---------------------------------------------------------------------------
# SPEC_CMI
# ---------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class SpecCMI(Criterion):
    """Features ranked by the dominant eigenvector of the SPEC_CMI matrix
    (:func:`spec_cmi_matrix`); the top K entries are selected. The sign is fixed so that
    the vector sums positive; ties in the ranking (:data:`SPEC_RANK_DECIMALS` decimals) go
    to the lowest index. The values are eigenvector entries, not nats.

    References
    ----------
    X. V. Nguyen, J. Chan, S. Romano, J. Bailey. Effective Global Approaches for Mutual
    Information Based Feature Selection. KDD 2014.
    """

    all_pair_tables: bool = True
    unit: str = "eigenvector entries"

    def driver_bytes(self, num_features: int) -> int:
        """Three D x D float64 matrices at once: the conditional informations, their
        symmetric mean and ``eigh``'s eigenvectors (:func:`spec_cmi_matrix`,
        :func:`dominant_eigenvector`)."""
        return 3 * 8 * num_features * num_features

    def start(self, backend: Backend,
              conditional_fn: Callable[[np.ndarray], np.ndarray] | None = None) -> Scorer:
        return SpecScorer(backend)


class SpecScorer(BaseScorer):
    """The eigenvector (the values) and its rounded entries (the ranking key)."""

    def __init__(self, backend: Backend):
        counts = backend.feature_counts()
        self.num_rows = int(counts[0].sum()) if counts.shape[0] else 0
        self.relevance = label_mutual_information(counts)
        self.vector = dominant_eigenvector(spec_cmi_matrix(backend, counts))
        self.key = np.round(self.vector, SPEC_RANK_DECIMALS)

    def gains(self, candidates: np.ndarray, block: Sequence[int], label: str) -> np.ndarray:
        return self.key

    def values(self, gains: np.ndarray) -> np.ndarray:
        # ranked and reported rounded: LAPACK's eigenvector differs in the last bits between
        # builds (numpy 1.26 and 2.x give other bits), the rounded entries do not
        return self.key


# ---------------------------------------------------------------------------
# The registry
# ---------------------------------------------------------------------------

#: every built-in criterion, in the order the front ends list them: the two
#: Q-distributions of the bound, then the paper's comparison criteria
CRITERIA: tuple[Criterion, ...] = (
    NaiveBound(name=NAIVE, description="VMI bound, naive Bayes Q-distribution", kde=True),
    PairwiseBound(name=PAIRWISE, description="VMI bound, pairwise Q-distribution"),
    RunningCriterion(name=MIM, description="mutual information maximisation, I(x_i; y)"),
    RunningCriterion(name=MRMR, description="max-relevance min-redundancy",
                     term=pair_mutual_information, value=_mean_redundancy),
    RunningCriterion(name=JMI, description="joint mutual information",
                     term=label_conditional_mutual_information, value=_running),
    RunningCriterion(name=CMIM, description="conditional mutual information maximisation",
                     term=label_conditional_mutual_information, fold=np.minimum,
                     initial=np.inf, value=_running),
    RunningCriterion(name=CIFE, description="conditional infomax feature extraction",
                     term=_cife_term, value=_redundancy),
    SpecCMI(name=SPEC_CMI, description="spectral relaxation of the CMI objective"),
)
#: the comparison criteria's names
CLASSIC_METHODS = tuple(c.name for c in CRITERIA if not c.vmi)
#: the comparison criteria chosen greedily, step by step (not all at once)
GREEDY_METHODS = tuple(c.name for c in CRITERIA if not c.vmi and not c.all_pair_tables)

_REGISTRY: dict[str, Criterion] = {c.name: c for c in CRITERIA}


def criterion(name: str) -> Criterion:
    """The registered criterion ``name`` (``KeyError`` if there is none)."""
    return _REGISTRY[name]


def registered() -> tuple[Criterion, ...]:
    """Every registered criterion: :data:`CRITERIA`, then those added by :func:`register`."""
    return tuple(_REGISTRY.values())


def register(entry: Criterion) -> Criterion:
    """Add ``entry`` to the registry under its name (``ValueError`` if the name is taken);
    returns it. The front ends' method lists (:mod:`vmi_spark.params`) are the built-in
    :data:`CRITERIA`."""
    if entry.name in _REGISTRY:
        raise ValueError(f"a criterion named {entry.name!r} is registered already")
    _REGISTRY[entry.name] = entry
    return entry


def unregister(name: str) -> None:
    """Remove a criterion added by :func:`register` (the built-in ones stay)."""
    if any(c.name == name for c in CRITERIA):
        raise ValueError(f"{name!r} is a built-in criterion")
    del _REGISTRY[name]


def corrected(params: Mapping[str, Any]) -> bool:
    """Whether a selection with these parameters (spec keys) corrects its gains for
    chance: ``biasCorrection`` other than ``none``, the histogram estimator and a method
    whose gains are corrected (the bound). Such a selection also sizes its tables for
    the rows (:func:`vmi_spark.core.planning.state_budget`) and selects one of a column's
    copies (:func:`vmi_spark.core.suspects.copy_groups`)."""
    return params.get("bias_correction", "significance") != "none" and \
        params.get("estimator", "histogram") == "histogram" and \
        criterion(params.get("method", "vmi_naive")).corrected
