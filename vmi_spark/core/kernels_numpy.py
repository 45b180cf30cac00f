"""The per-row loops of the bound in numpy: the reference implementation.

Every loop of :mod:`.kernels` has an implementation here (``name + "_np"``) and a
compiled one in :mod:`.kernels_numba` doing the same IEEE operations in the same order
(products and left-to-right sums, never a fused multiply-add), with :mod:`.explog`'s exp
and log, so both give the same integers bit for bit. These run wherever numba is not
installed (or ``VMI_SPARK_KERNELS=numpy``) and wherever a compiled loop cannot be
compiled; the tests compare the two on every run.
"""

from __future__ import annotations

import numpy as np

from . import explog, wide

#: fixed-point scale of per-row log contributions
SCALE = float(2**32)
#: floor for the mixture probability; only reached if a posterior underflows
TINY = 1e-300


def fixed(values: np.ndarray) -> np.ndarray:
    """rint(values * 2**32) as int64 (``values`` is overwritten)."""
    values *= SCALE
    return np.rint(values, out=values).astype(np.int64)


def fixed_log(values: np.ndarray) -> np.ndarray:
    """rint(2**32 log max(values, 1e-300)) as int64, the log :func:`.explog.tlog`
    (``values`` is overwritten)."""
    np.maximum(values, TINY, out=values)
    return fixed(explog.tlog(values))


def normalise(post: np.ndarray) -> None:
    """Divide each row by its sum, summing classes left to right (bitwise reproducible)."""
    total = post[:, 0].copy()
    for c in range(1, post.shape[1]):
        total += post[:, c]
    post /= total[:, None]



def row_posterior_np(pattern_post, ids, codes, rest, cond):
    """(L, n) posterior of every row: its pattern's, then ``rest`` folded in per row."""
    post = pattern_post.take(ids, axis=0)
    for f in rest:
        post *= cond[f].take(codes[f], axis=0)
        normalise(post)
    return np.ascontiguousarray(post.T)


def mix_log_sums_np(codes, cands, post, cond):
    """Per candidate i: sum_k rint(2**32 log max(sum_y r_k(y) p(x_i^k | y), TINY))."""
    out = np.zeros(len(cands), dtype=np.int64)
    for j, i in enumerate(cands):
        out[j] = fixed_log(_mixture(post, cond[i], codes[i])).sum()
    return out


def _mixture(post, cond_i, codes_i):
    """(n,) sum_y r_k(y) p(x_i^k | y) for each row k: the naive posterior ``post`` (L, n)
    against candidate i's table ``cond_i`` (A, L) at its codes ``codes_i``."""
    a = codes_i.astype(np.intp)
    mix = post[0] * cond_i[:, 0].take(a)
    for k in range(1, post.shape[0]):
        mix += post[k] * cond_i[:, k].take(a)
    return mix


def pattern_counts_np(codes, cands, ids, num, arity):
    """(C, arity, num) int64 counts of rows per (candidate i, x_i = a, pattern)."""
    cands = np.asarray(cands, dtype=np.intp)
    per = arity * num
    key = (np.arange(len(cands), dtype=np.intp)[:, None] * per
           + codes[cands].astype(np.intp) * num + np.asarray(ids, dtype=np.intp)[None, :])
    return np.bincount(key.ravel(), minlength=len(cands) * per).reshape(len(cands), arity, num)


def other_classes(y, num_classes):
    """(n, L-1) the classes of every row other than its own, in increasing order."""
    y = np.asarray(y, dtype=np.intp)
    j = np.arange(num_classes - 1, dtype=np.intp)
    return j[None, :] + (j[None, :] >= y[:, None])


def own_and_other_posteriors(post, y):
    """``post[k, y_k]`` (n,) and the row's other classes (n, L-1), in increasing order."""
    rows = np.arange(post.shape[0])
    y = np.asarray(y, dtype=np.intp)
    return post[rows, y], post[rows[:, None], other_classes(y, post.shape[1])]


def pair_posterior_np(post, log_ratio_f, y, m):
    """Multiply feature f's pairwise factor into the posterior and normalise it (in place):
    class c other than the row's own y_k by e^{log_ratio_f[k, c] / m} (c over the other
    classes, increasing), the own class by 1, then each row divided by its sum."""
    factor = np.ones_like(post)
    rows = np.arange(post.shape[0])[:, None]
    factor[rows, other_classes(y, post.shape[1])] = explog.exp(log_ratio_f / m)
    post *= factor
    normalise(post)


def pair_fold_np(log_ratio, table, codes, cf, y, targets):
    """log_ratio[i, k, j] += log p(x_i | x_f, c_j) - log p(x_i | x_f, y_k) for every row k,
    every class c_j other than y_k (increasing) and every target i (in place)."""
    num_classes = table.shape[-1]
    y = np.asarray(y, dtype=np.intp)
    oth = other_classes(y, num_classes)
    for i in targets:
        a = codes[i].astype(np.intp)
        t = table[i]
        own = t[a, cf, y]
        log_ratio[i] += t[a[:, None], cf[:, None], oth] - own[:, None]


def _own_mix_np(own, other, factor):
    """own + sum_j other[:, j] * factor[:, j], left to right."""
    mix = own.copy()
    for c in range(other.shape[1]):
        mix += other[:, c] * factor[:, c]
    return mix


def pair_scores_np(log_ratio, post, y, cands, m):
    """Per candidate: sum_k rint(-2**32 log max(r_k(y_k) + sum_c r_k(c) e^{d_k(c)}, TINY))
    with d = log_ratio[i] / m, the log of the pairwise Q's geometric mean of class c over that
    of the row's own class y_k (c over the other classes)."""
    out = np.zeros(len(cands), dtype=np.int64)
    own, other = own_and_other_posteriors(post, y)
    for j, i in enumerate(cands):
        factor = explog.exp(log_ratio[i] / m)
        mix = _own_mix_np(own, other, factor)
        np.maximum(mix, TINY, out=mix)
        out[j] = fixed(-explog.tlog(mix)).sum()
    return out


def pair_fold_scores_np(log_ratio, table, codes, cf, y, post, cands, m):
    """:func:`pair_fold_np` into the candidates' ratios (in place), then their
    :func:`pair_scores_np` with the block's ``m`` features (the one just folded included)."""
    pair_fold_np(log_ratio, table, codes, cf, y, cands)
    return pair_scores_np(log_ratio, post, y, cands, m)


def pair_cell_scores_np(log_ratio, post, codes, ids, y, cands, m, arity, num):
    """:func:`pair_scores_np` with the rows grouped by (``ids``, x_i, y): ``ids`` is their
    pattern of the block's features (``num`` patterns). Every (pattern, x_i, y) cell holds
    the same numbers in all its rows, so one row of it gives the cell's value, and the sum
    is the cell counts times them. The same integers as per row."""
    n, num_classes = post.shape
    cells = num * arity * num_classes
    rows = np.arange(n)
    y = np.asarray(y, dtype=np.intp)
    own, other = own_and_other_posteriors(post, y)
    out = np.zeros(len(cands), dtype=np.int64)
    for j, i in enumerate(cands):
        key = (ids * arity + codes[i]) * num_classes + y
        counts = np.bincount(key, minlength=cells)
        rep = np.full(cells, -1, dtype=np.intp)
        rep[key] = rows  # a row of every present cell (which one does not matter)
        present = np.flatnonzero(rep >= 0)
        at = rep[present]
        factor = explog.exp(log_ratio[i, at] / m)
        mix = _own_mix_np(own[at], other[at], factor)
        np.maximum(mix, TINY, out=mix)
        out[j] = int((counts[present] * fixed(-explog.tlog(mix))).sum())
    return out


def histograms_np(codes, key, per, cells, w=None):
    """``out[i, codes[i, k] * per + key[k]]`` summed over the rows k, for every feature i:
    (D, cells) int64 counts, or sums of the row weights ``w`` (exact in float64: a table
    weighs less than 2**53). The pair and feature counts are this with their keys."""
    num_features = codes.shape[0]
    idx = (np.arange(num_features, dtype=np.int64)[:, None] * cells
           + codes.astype(np.int64) * per + np.asarray(key, dtype=np.int64)[None, :])
    if w is None:
        flat = np.bincount(idx.ravel(), minlength=num_features * cells)
    else:
        weights = np.broadcast_to(np.asarray(w, dtype=np.float64), idx.shape)
        flat = np.bincount(idx.ravel(), weights=weights.ravel(),
                           minlength=num_features * cells).astype(np.int64)
    return flat.reshape(num_features, cells)


def pair_counts_np(codes, y, f, arity, num_classes):
    """``n(x_i = a, x_f = b, y)`` for every feature i: (D, A, A, L) int64."""
    key = codes[f].astype(np.int64) * num_classes + y
    out = histograms_np(codes, key, arity * num_classes, arity * arity * num_classes)
    return out.reshape(codes.shape[0], arity, arity, num_classes)


def feature_counts_np(codes, y, arity, num_classes):
    """``n(x_i = a, y)`` for every feature i: (D, A, L) int64."""
    return histograms_np(codes, y, num_classes, arity * num_classes).reshape(
        codes.shape[0], arity, num_classes)


# --------------------------------------------------------------------------- weighted rows
#
# With row weights (:mod:`.weights`) every loop above has a weighted twin: the same terms,
# each counted ``w_k`` times (an int64 weight), summed exactly as a wide (2, C) int64
# ``[hi, lo]`` (:mod:`.wide`: the terms' sums no longer fit int64). A row of weight w
# gives the integers of w copies of the row, bit for bit. Counts are sums of weights.


def mix_log_sums_w_np(codes, cands, post, cond, w):
    """:func:`mix_log_sums_np` with row weights ``w``: (2, C) wide sums of
    ``w_k rint(2**32 log max(sum_y r_k(y) p(x_i^k | y), TINY))``."""
    out = wide.zeros(len(cands))
    w = np.asarray(w, dtype=np.int64)[None, :]
    for j, i in enumerate(cands):
        out[:, j] = wide.limb_dot(w, fixed_log(_mixture(post, cond[i], codes[i]))[None, :])[:, 0]
    return out


def pattern_counts_w_np(codes, cands, ids, num, arity, w):
    """:func:`pattern_counts_np` with row weights: (C, arity, num) int64 sums of ``w``
    (exact in float64: a table's weight is below 2**53)."""
    cands = np.asarray(cands, dtype=np.intp)
    per = arity * num
    key = (np.arange(len(cands), dtype=np.intp)[:, None] * per
           + codes[cands].astype(np.intp) * num + np.asarray(ids, dtype=np.intp)[None, :])
    weights = np.broadcast_to(np.asarray(w, dtype=np.float64), key.shape)
    flat = np.bincount(key.ravel(), weights=weights.ravel(), minlength=len(cands) * per)
    return flat.astype(np.int64).reshape(len(cands), arity, num)


def pair_scores_w_np(log_ratio, post, y, cands, m, w):
    """:func:`pair_scores_np` with row weights ``w``: (2, C) wide sums."""
    out = wide.zeros(len(cands))
    w = np.asarray(w, dtype=np.int64)[None, :]
    own, other = own_and_other_posteriors(post, y)
    for j, i in enumerate(cands):
        factor = explog.exp(log_ratio[i] / m)
        mix = _own_mix_np(own, other, factor)
        np.maximum(mix, TINY, out=mix)
        out[:, j] = wide.limb_dot(w, fixed(-explog.tlog(mix))[None, :])[:, 0]
    return out


def pair_cell_scores_w_np(log_ratio, post, codes, ids, y, cands, m, arity, num, w):
    """:func:`pair_cell_scores_np` with row weights ``w``: a cell's term counted by the
    cell's total weight; (2, C) wide sums."""
    n, num_classes = post.shape
    cells = num * arity * num_classes
    rows = np.arange(n)
    y = np.asarray(y, dtype=np.intp)
    weights = np.asarray(w, dtype=np.float64)
    own, other = own_and_other_posteriors(post, y)
    out = wide.zeros(len(cands))
    for j, i in enumerate(cands):
        key = (ids * arity + codes[i]) * num_classes + y
        counts = np.bincount(key, weights=weights, minlength=cells).astype(np.int64)
        rep = np.full(cells, -1, dtype=np.intp)
        rep[key] = rows
        present = np.flatnonzero(rep >= 0)
        at = rep[present]
        factor = explog.exp(log_ratio[i, at] / m)
        mix = _own_mix_np(own[at], other[at], factor)
        np.maximum(mix, TINY, out=mix)
        out[:, j] = wide.limb_dot(counts[present][None, :],
                                  fixed(-explog.tlog(mix))[None, :])[:, 0]
    return out


def pair_counts_w_np(codes, y, f, arity, num_classes, w):
    """:func:`pair_counts_np` with row weights: (D, A, A, L) int64 sums of ``w``."""
    key = codes[f].astype(np.int64) * num_classes + y
    out = histograms_np(codes, key, arity * num_classes, arity * arity * num_classes, w)
    return out.reshape(codes.shape[0], arity, arity, num_classes)


def feature_counts_w_np(codes, y, arity, num_classes, w):
    """:func:`feature_counts_np` with row weights: (D, A, L) int64 sums of ``w``."""
    return histograms_np(codes, y, num_classes, arity * num_classes, w).reshape(
        codes.shape[0], arity, num_classes)
