"""The classic information-theoretic selectors the paper compares VMI against.

``mim``, ``mrmr``, ``jmi``, ``cmim``, ``cife`` and ``spec_cmi`` run on the same
backends as VMI and return the same :class:`~vmi_spark.core.greedy.Selection`.
All quantities are plug-in estimates in nats, computed on the driver from the
integer count tables the backend returns, so every result is a deterministic
function of the counts and does not depend on how the rows were partitioned.

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

Ties
----
Every information quantity is computed in the entropy form
``sum n log n`` with each sum taken over its terms *sorted*, so two features whose
count tables are equal up to a relabelling of their values get bit-identical
values and exact ties go to the lowest index. A sample that is exactly
independent (conditionally independent) gives exactly 0.0. For SPEC_CMI the
eigenvector entries are compared after rounding to 12 decimals (the eigensolver
does not preserve symmetry between identical features to the last bit).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

import numpy as np

from .greedy import Selection, StopSelection, check_replayed, restore_steps, top_candidates

MIM = "mim"
MRMR = "mrmr"
JMI = "jmi"
CMIM = "cmim"
CIFE = "cife"
SPEC_CMI = "spec_cmi"
CLASSIC_METHODS = (MIM, MRMR, JMI, CMIM, CIFE, SPEC_CMI)
GREEDY_METHODS = (MIM, MRMR, JMI, CMIM, CIFE)

#: byte budget of one bulk (len(fs), D, A, A, L) int64 pair-count array (SPEC_CMI)
PAIR_BLOCK_BYTES = 256 * 2**20
#: decimals the SPEC_CMI eigenvector entries are rounded to before ranking
SPEC_RANK_DECIMALS = 12


class ClassicBackend(Protocol):
    """The part of a backend the classic criteria use."""

    def feature_counts(self) -> np.ndarray:
        """(D, A, L) int64 counts n(x_i = a, y)."""

    def pair_counts(self, f: int) -> np.ndarray:
        """(D, A, A, L) int64 counts n(x_i = a, x_f = b, y)."""

    def pair_counts_many(self, fs: list[int]) -> np.ndarray:
        """(len(fs), D, A, A, L) int64 counts n(x_i = a, x_f = b, y) for every f in fs."""


# ---------------------------------------------------------------------------
# Information quantities from count tables
# ---------------------------------------------------------------------------

def _sorted_xlogx_sum(counts: np.ndarray) -> np.ndarray:
    """``sum n log n`` over all axes but the first, summing the terms in sorted order."""
    n = np.asarray(counts, dtype=np.float64).reshape(counts.shape[0], -1)
    logn = np.zeros_like(n)
    np.log(n, out=logn, where=n > 0)
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
    # exact independence test in integers (products stay below 2**63 for N < 3e9 rows)
    if counts.size and int(total.max(initial=0)) < 3_000_000_000:
        independent = np.all(counts * n_z[:, None, None, :]
                             == n_xz[:, :, None, :] * n_yz[:, None, :, :], axis=(1, 2, 3))
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
# Selection
# ---------------------------------------------------------------------------

def _best(values: np.ndarray) -> int:
    """Index of the largest finite value, ties to the lowest index."""
    return int(np.argmax(values))  # first maximum


def _record(result: Selection, best: int, value: float, t_step: float) -> float:
    result.selected.append(best)
    result.scores.append(value)
    result.gains.append(value)
    result.blocks.append(0)
    now = time.perf_counter()
    result.step_seconds.append(now - t_step)
    return now


def _select_greedy(backend: ClassicBackend, method: str, num_features: int,
                   report_candidates: int, on_step: Callable[[Selection], None] | None,
                   resume: Selection | None = None,
                   min_gain: float | None = None) -> Selection:
    t_step = time.perf_counter()
    counts = backend.feature_counts()
    num_cols = counts.shape[0]
    n_rows = int(counts[0].sum()) if num_cols else 0
    relevance = label_mutual_information(counts)
    result = Selection(method=method, num_rows=n_rows,
                       mutual_information=[float(v) for v in relevance])

    chosen = np.zeros(num_cols, dtype=bool)
    acc = np.zeros(num_cols)  # running sum (mRMR, JMI, CIFE)
    running_min = np.full(num_cols, np.inf)  # CMIM
    last: int | None = None

    def criterion(pair: np.ndarray | None, k: int) -> np.ndarray:
        """The criterion of every feature once ``pair`` (the tables against the feature
        selected last; None at the first step) is folded in; ``k`` = |S|."""
        nonlocal acc
        if pair is None or method == MIM:
            return relevance.copy()
        if method == MRMR:
            acc += pair_mutual_information(pair)
            return relevance - acc / k
        if method == JMI:
            acc += label_conditional_mutual_information(pair)
            return acc.copy()
        if method == CIFE:
            acc += pair_mutual_information(pair) - pair_conditional_mutual_information(pair)
            return relevance - acc
        np.minimum(running_min, label_conditional_mutual_information(pair), out=running_min)
        return running_min.copy()

    if resume is not None and resume.selected:
        # the saved steps are not trusted: replayed from one bulk count pass of the pair
        # tables (the same tables the steps counted one at a time), each choice, value and
        # candidate list checked
        saved = resume.selected
        step = _pair_block_size(num_cols, counts.shape[1], counts.shape[2])
        done = saved[:-1] if method != MIM else []
        pairs = (p for s0 in range(0, len(done), step)
                 for p in _bulk_pair_counts(backend, done[s0:s0 + step]))
        for t in range(len(saved)):
            values = criterion(next(pairs) if t and method != MIM else None, t)
            values[chosen] = -np.inf
            best = _best(values)
            stops = min_gain is not None and values[best] < min_gain
            cands = top_candidates(values, report_candidates) if report_candidates else None
            check_replayed(resume, t, None if stops else best, float(values[best]),
                           float(values[best]), 0, cands)
            chosen[best] = True
        restore_steps(result, resume)
        last = saved[-1]

    while len(result.selected) < num_features:
        if chosen.all():
            result.stopped_early = "no features left to select"
            result.stop_reason = "no_features_left"
            break
        if last is None or method == MIM:
            values = relevance.copy()
        else:
            pair = backend.pair_counts(last)  # the only pass over the rows this step
            values = criterion(pair, len(result.selected))  # |S|, including ``last``
        values[chosen] = -np.inf
        best = _best(values)
        if min_gain is not None and values[best] < min_gain:
            result.stop_reason = "threshold"
            result.stopped_early = (f"the best candidate's {method} criterion is "
                                    f"{values[best]:.6g} nats, below the threshold {min_gain:g}")
            break
        if report_candidates:
            result.candidates.append(top_candidates(values, report_candidates))
        chosen[best] = True
        last = best
        t_step = _record(result, best, float(values[best]), t_step)
        if on_step is not None:
            try:
                on_step(result)
            except StopSelection:
                result.stop_reason = "callback"
                break
    if result.stop_reason is None:
        result.stop_reason = "num_features"
    return result


def _pair_block_size(num_cols: int, arity: int, num_classes: int) -> int:
    """Features per bulk pair-count request, keeping the int64 array under the budget."""
    per_feature = max(1, num_cols * arity * arity * num_classes * 8)
    return max(1, min(num_cols, PAIR_BLOCK_BYTES // per_feature))


def _bulk_pair_counts(backend: ClassicBackend, fs: list[int]) -> np.ndarray:
    return np.asarray(backend.pair_counts_many(fs))


def spec_cmi_matrix(backend: ClassicBackend, counts: np.ndarray | None = None) -> np.ndarray:
    """The SPEC_CMI matrix Q (D x D): Q_ii = I(x_i; y), Q_ij = [I(x_i;y|x_j) + I(x_j;y|x_i)] / 2.

    ``counts`` is the backend's (D, A, L) ``feature_counts()`` if already at hand.
    The pair tables are requested in bulk, ``_pair_block_size`` features at a time.
    """
    if counts is None:
        counts = backend.feature_counts()
    num_cols, arity, num_classes = counts.shape
    relevance = label_mutual_information(counts)
    cond = np.zeros((num_cols, num_cols))  # cond[i, j] = I(x_i; y | x_j)
    step = _pair_block_size(num_cols, arity, num_classes)
    for start in range(0, num_cols, step):
        fs = list(range(start, min(start + step, num_cols)))
        block = _bulk_pair_counts(backend, fs)
        for k, f in enumerate(fs):
            cond[:, f] = label_conditional_mutual_information(block[k])
        del block
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


def _select_spec_cmi(backend: ClassicBackend, num_features: int, report_candidates: int,
                     on_step: Callable[[Selection], None] | None,
                     resume: Selection | None = None) -> Selection:
    t_step = time.perf_counter()
    counts = backend.feature_counts()
    num_cols = counts.shape[0]
    n_rows = int(counts[0].sum()) if num_cols else 0
    relevance = label_mutual_information(counts)
    result = Selection(method=SPEC_CMI, num_rows=n_rows,
                       mutual_information=[float(v) for v in relevance])
    v = dominant_eigenvector(spec_cmi_matrix(backend, counts))
    key = np.round(v, SPEC_RANK_DECIMALS)
    order = np.lexsort((np.arange(num_cols), -key))  # ties to the lowest index
    def candidates(selected: list[int]) -> list[tuple[int, float]]:
        rest = np.where(np.isin(np.arange(num_cols), selected), -np.inf, key)
        return [(i, float(v[i])) for i, _ in top_candidates(rest, report_candidates)]

    if resume is not None:  # the saved steps are the ranking's head, or refused
        for t in range(len(resume.selected)):
            best = int(order[t]) if t < num_cols else None
            check_replayed(resume, t, best, float(v[best]) if best is not None else 0.0,
                           float(v[best]) if best is not None else 0.0, 0,
                           candidates(resume.selected[:t]) if report_candidates else None)
        restore_steps(result, resume)
    for best in order[len(result.selected):max(num_features, 0)]:
        best = int(best)
        if report_candidates:
            result.candidates.append(candidates(result.selected))
        t_step = _record(result, best, float(v[best]), t_step)
        if on_step is not None:
            try:
                on_step(result)
            except StopSelection:
                result.stop_reason = "callback"
                return result
    if num_features > num_cols:
        result.stopped_early = "no features left to select"
        result.stop_reason = "no_features_left"
    else:
        result.stop_reason = "num_features"
    return result


def select_classic(
    backend: ClassicBackend,
    method: str,
    num_features: int,
    report_candidates: int = 0,
    on_step: Callable[[Selection], None] | None = None,
    resume: Selection | None = None,
    min_gain: float | None = None,
) -> Selection:
    """Select up to ``num_features`` features with a classic mutual-information criterion.

    Parameters
    ----------
    backend : Backend
        Supplies the count tables (``feature_counts``, ``pair_counts``, and for
        SPEC_CMI ``pair_counts_many``).
    method : {"mim", "mrmr", "jmi", "cmim", "cife", "spec_cmi"}
        The criterion (see the module docstring for the definitions).
    num_features : int
        How many features to select (K).
    report_candidates : int
        Also record the best ``report_candidates`` (feature, criterion) pairs per step.
    on_step : callable, optional
        Called with the running :class:`Selection` after every selected feature;
        raising :class:`StopSelection` ends the selection.
    resume : Selection, optional
        A selection saved after a completed step of the same run; its steps are replayed
        (the running sums from one bulk count pass of the pair tables; SPEC_CMI's
        ranking is computed anyway) and must come out the same, bit for bit, else
        :class:`~vmi_spark.core.greedy.ResumeMismatch`; the loop continues after its last
        step.
    min_gain : float, optional
        Stop when the best candidate's criterion value is below this (nats);
        ``num_features`` stays an upper bound. Not defined for SPEC_CMI, whose
        values are eigenvector entries. ``None`` (the default) never stops on it.

    Returns
    -------
    Selection
        ``scores`` (and ``gains``) hold each step's criterion value for the
        chosen feature (for SPEC_CMI its eigenvector entry); ``blocks`` is all 0.

    References
    ----------
    G. Brown, A. Pocock, M.-J. Zhao, M. Lujan. Conditional Likelihood Maximisation:
    A Unifying Framework for Information Theoretic Feature Selection. JMLR 13, 2012.
    F. Fleuret. Fast Binary Feature Selection with Conditional Mutual Information. JMLR 5, 2004.
    X. V. Nguyen, J. Chan, S. Romano, J. Bailey. Effective Global Approaches for Mutual
    Information Based Feature Selection. KDD 2014.
    """
    if method not in CLASSIC_METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {CLASSIC_METHODS}")
    if method == SPEC_CMI:
        if min_gain is not None:
            raise ValueError("a gain threshold is not defined for spec_cmi (its values are "
                             "eigenvector entries, not nats)")
        return _select_spec_cmi(backend, num_features, report_candidates, on_step, resume)
    return _select_greedy(backend, method, num_features, report_candidates, on_step, resume,
                          min_gain)
