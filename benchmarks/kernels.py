"""Baseline and prototype step kernels for the benchmarks (not used by the library).

* ``numpy_step``      - the plain single-threaded numpy VMI_naive step over all rows
                        (gather p(x_i | y) at every cell, dot with the per-row posterior,
                        log, mean); float64, no fixed point.
* ``score_vectorized``- prototype of ``bound.score_block`` (naive): the own-class term is
                        gathered from a precomputed log table (no log per cell for it),
                        the L=2 mixture is two multiply-adds on flat gathers; same
                        fixed-point sums.
* ``score_patterns``  - prototype "per-pattern counting": rows with the same posterior
                        (early steps of a block: at most A**m distinct posteriors) are
                        grouped; one bincount per feature gives n(g, x_i, y) and the log
                        terms are evaluated on the (G, A, L) table, rounded to fixed point
                        per entry and multiplied by the counts - the same integer as the
                        per-row fixed-point sum.
"""

from __future__ import annotations

import numpy as np

from vmi_spark.core.bound import SCALE, _TINY


def numpy_step(codes: np.ndarray, y: np.ndarray, post: np.ndarray, cond: np.ndarray,
               candidates: np.ndarray) -> np.ndarray:
    """Plain numpy naive step: mean over rows of log c_i(y) - log sum_y r(y) c_i(y)."""
    out = np.zeros(codes.shape[0])
    rows = np.arange(codes.shape[1])
    for i in np.flatnonzero(candidates):
        factor = cond[i][codes[i]]                   # (N, L) gather
        mix = (post * factor).sum(axis=1)            # dot with the posterior
        out[i] = np.mean(np.log(factor[rows, y]) - np.log(mix))
    return out


def _log_table(cond: np.ndarray) -> np.ndarray:
    out = np.full(cond.shape, -np.inf)
    np.log(cond, out=out, where=cond > 0)
    return out


def score_vectorized(codes: np.ndarray, y: np.ndarray, post: np.ndarray, cond: np.ndarray,
                     candidates: np.ndarray, logcond: np.ndarray | None = None) -> np.ndarray:
    """Naive step, fixed-point sums, L == 2, own-class log gathered from a log table."""
    num_features, n = codes.shape
    L = cond.shape[2]
    assert L == 2
    if logcond is None:
        logcond = _log_table(cond)
    out = np.zeros(num_features, dtype=np.int64)
    p0 = np.ascontiguousarray(post[:, 0])
    p1 = np.ascontiguousarray(post[:, 1])
    yi = y.astype(np.intp)
    for i in np.flatnonzero(candidates):
        ci = codes[i].astype(np.intp)
        c = cond[i]
        mix = p0 * c[ci, 0] + p1 * c[ci, 1]
        own = logcond[i].ravel()[ci * L + yi]
        vals = own - np.log(np.maximum(mix, _TINY))
        out[i] = int(np.rint(vals * SCALE).astype(np.int64).sum())
    return out


def posterior_groups(post: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
    """(G, inverse (n,), representative rows (G, L)) of the distinct posterior rows."""
    keys = np.ascontiguousarray(post).view(np.dtype((np.void, post.dtype.itemsize * post.shape[1])))
    uniq, inv = np.unique(keys.ravel(), return_inverse=True)
    reps = uniq.view(post.dtype).reshape(-1, post.shape[1])
    return len(uniq), inv.ravel(), reps


def score_patterns(codes: np.ndarray, y: np.ndarray, post: np.ndarray, cond: np.ndarray,
                   candidates: np.ndarray, groups=None) -> np.ndarray:
    """Naive step by counting (posterior group, x_i, y) triples; exact same integers."""
    num_features, n = codes.shape
    A, L = cond.shape[1], cond.shape[2]
    G, inv, reps = groups if groups is not None else posterior_groups(post)
    base = inv.astype(np.int64) * (A * L) + y.astype(np.int64)
    out = np.zeros(num_features, dtype=np.int64)
    rows_g = np.arange(G)
    for i in np.flatnonzero(candidates):
        cnt = np.bincount(base + codes[i].astype(np.int64) * L, minlength=G * A * L).reshape(G, A, L)
        c = cond[i]                                       # (A, L)
        # per (g, a): the mixture, computed as the per-row kernel does (einsum over L)
        fac = np.broadcast_to(c[None, :, :], (G, A, L)).reshape(G * A, L)
        pr = np.repeat(reps, A, axis=0)
        mixlog = np.log(np.maximum(np.einsum("nl,nl->n", pr, fac), _TINY)).reshape(G, A)
        with np.errstate(divide="ignore", invalid="ignore"):
            vals = np.log(c)[None, :, :] - mixlog[:, :, None]  # (G, A, L)
            fixed = np.rint(vals * SCALE)
        fixed = np.where(cnt > 0, fixed, 0.0).astype(np.int64)
        out[i] = int((fixed * cnt).sum())
    return out
