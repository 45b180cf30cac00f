"""The per-row loops of the naive bound: compiled with numba when it is installed.

Three loops dominate a ``vmi_naive`` pass: folding the block's features into the
per-row posterior, the per-row mixture ``sum_y r_k(y) p(x_i^k | y)`` of every
candidate, and counting rows per (pattern of x_S, x_i). Two dominate a
``vmi_pairwise`` pass: adding log p(x_i | x_f, y) into every candidate's running
sum, and the per-row mixture of the geometric means (``np.exp`` is numpy's on
both paths too). Counting ``n(x_i, x_f, y)`` (pairwise and the classic criteria)
is an integer loop. Each has a numba and a
numpy implementation doing the same IEEE operations in the same order (products
and left-to-right sums, never a fused multiply-add), and every logarithm is taken
by numpy's ``np.log`` on a contiguous buffer on both paths, so both give the same
integers bit for bit. numba is an optional extra (``pip install vmi-spark[fast]``);
``VMI_SPARK_KERNELS=numpy`` forces the numpy loops.
"""

from __future__ import annotations

import os
import warnings

import numpy as np

#: fixed-point scale of per-row log contributions
SCALE = float(2**32)
#: floor for the mixture probability; only reached if a posterior underflows
TINY = 1e-300
#: cells (rows x candidates) one compiled call fills before the logs are taken
_CHUNK_CELLS = 1 << 16


def _load_numba():
    if os.environ.get("VMI_SPARK_KERNELS", "").strip().lower() == "numpy":
        return None
    try:
        import numba
    except ImportError:
        return None
    return numba


#: the loops with a compiled and a numpy implementation (``name`` and ``name + "_np"``)
LOOPS = ("row_posterior", "mix_log_sums", "pattern_counts", "pair_fold", "pair_scores",
         "pair_cell_scores",
         "pair_counts")


def fixed(values: np.ndarray) -> np.ndarray:
    """rint(values * 2**32) as int64 (``values`` is overwritten)."""
    values *= SCALE
    return np.rint(values, out=values).astype(np.int64)


def fixed_log(values: np.ndarray) -> np.ndarray:
    """rint(2**32 log max(values, 1e-300)) as int64 (``values`` is overwritten)."""
    np.maximum(values, TINY, out=values)
    np.log(values, out=values)
    return fixed(values)


def normalise(post: np.ndarray) -> None:
    """Divide each row by its sum, summing classes left to right (bitwise reproducible)."""
    total = post[:, 0].copy()
    for c in range(1, post.shape[1]):
        total += post[:, c]
    post /= total[:, None]


# ----------------------------------------------------------------------------- numpy


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
        a = codes[i].astype(np.intp)
        c = cond[i]
        mix = post[0] * c[:, 0].take(a)
        for k in range(1, post.shape[0]):
            mix += post[k] * c[:, k].take(a)
        out[j] = fixed_log(mix).sum()
    return out


def pattern_counts_np(codes_i, ids, num, arity):
    """(arity, num) int64 counts of rows per (x_i = a, pattern)."""
    key = codes_i.astype(np.intp) * num + ids
    return np.bincount(key, minlength=arity * num).reshape(arity, num)


def pair_fold_np(pair_log, table, codes, cf, targets):
    """pair_log[i] += log p(x_i | x_f, y) of every row, for every target i (in place)."""
    for i in targets:
        pair_log[i] += table[i][codes[i], cf]


def pair_scores_np(pair_log, post, y, cands, m):
    """Per candidate: sum_k rint(2**32 (l_k(y_k) - log max(sum_y r_k(y) e^{l_k(y)}, TINY)))
    with l = pair_log[i] / m, the log of the pairwise Q's geometric mean."""
    out = np.zeros(len(cands), dtype=np.int64)
    rows = np.arange(post.shape[0])
    for j, i in enumerate(cands):
        logc = pair_log[i] / m
        factor = np.exp(logc)
        mix = post[:, 0] * factor[:, 0]
        for k in range(1, post.shape[1]):
            mix += post[:, k] * factor[:, k]
        np.maximum(mix, TINY, out=mix)
        np.log(mix, out=mix)
        out[j] = fixed(logc[rows, y] - mix).sum()
    return out


def pair_cell_scores_np(pair_log, post, codes, ids, y, cands, m, arity, num):
    """:func:`pair_scores_np` with the rows grouped by ``ids`` (their pattern of the block's
    features, ``num`` patterns): every (pattern, x_i) cell holds the same numbers in all
    its rows, so one row of it gives the cell's values, and the sum is the cell counts
    n(cell, y) times them. The same integers as per row."""
    n, num_classes = post.shape
    cells = num * arity
    rows = np.arange(n)
    out = np.zeros(len(cands), dtype=np.int64)
    for j, i in enumerate(cands):
        key = ids * arity + codes[i]
        counts = np.bincount(key * num_classes + y, minlength=cells * num_classes)
        rep = np.full(cells, -1, dtype=np.intp)
        rep[key] = rows  # a row of every present cell (which one does not matter)
        present = np.flatnonzero(rep >= 0)
        at = rep[present]
        logc = pair_log[i, at] / m
        factor = np.exp(logc)
        mix = post[at, 0] * factor[:, 0]
        for k in range(1, num_classes):
            mix += post[at, k] * factor[:, k]
        np.maximum(mix, TINY, out=mix)
        np.log(mix, out=mix)
        vals = fixed(logc - mix[:, None])
        out[j] = int((counts.reshape(cells, num_classes)[present] * vals).sum())
    return out


def pair_counts_np(codes, y, f, arity, num_classes):
    """``n(x_i = a, x_f = b, y)`` for every feature i: (D, A, A, L) int64."""
    num_features = codes.shape[0]
    base = codes[f].astype(np.int64) * num_classes + y  # (n,)
    per = arity * arity * num_classes
    idx = (np.arange(num_features, dtype=np.int64)[:, None] * per
           + codes.astype(np.int64) * (arity * num_classes) + base[None, :])
    flat = np.bincount(idx.ravel(), minlength=num_features * per)
    return flat.reshape(num_features, arity, arity, num_classes)


# ----------------------------------------------------------------------------- numba


def _compile(numba, cache=True):
    jit = numba.njit(cache=cache, nogil=True)

    @jit
    def row_posterior(pattern_post, ids, codes, rest, cond):
        n = ids.shape[0]
        num_classes = pattern_post.shape[1]
        out = np.empty((num_classes, n))
        p = np.empty(num_classes)
        for k in range(n):
            for c in range(num_classes):
                p[c] = pattern_post[ids[k], c]
            for f in rest:
                a = codes[f, k]
                for c in range(num_classes):
                    p[c] *= cond[f, a, c]
                total = p[0]
                for c in range(1, num_classes):
                    total += p[c]
                for c in range(num_classes):
                    p[c] /= total
            for c in range(num_classes):
                out[c, k] = p[c]
        return out

    @jit
    def mix2(codes, cands, post, cond, buf):
        n = codes.shape[1]
        p0 = post[0]
        p1 = post[1]
        for j in range(cands.shape[0]):
            i = cands[j]
            c0 = cond[i, :, 0].copy()
            c1 = cond[i, :, 1].copy()
            a = codes[i]
            row = buf[j]
            for k in range(n):
                v = a[k]
                m = p0[k] * c0[v]
                m += p1[k] * c1[v]
                row[k] = m if m > TINY else TINY

    @jit
    def mix_any(codes, cands, post, cond, buf):
        n = codes.shape[1]
        num_classes = post.shape[0]
        for j in range(cands.shape[0]):
            i = cands[j]
            c = cond[i]
            a = codes[i]
            row = buf[j]
            for k in range(n):
                v = a[k]
                m = post[0, k] * c[v, 0]
                for y in range(1, num_classes):
                    m += post[y, k] * c[v, y]
                row[k] = m if m > TINY else TINY

    @jit
    def fixed_rows(buf, out):
        for j in range(buf.shape[0]):
            t = 0
            for v in buf[j]:
                t += np.int64(np.rint(v * SCALE))
            out[j] = t

    @jit
    def pattern_counts(codes_i, ids, num, arity):
        out = np.zeros((arity, num), dtype=np.int64)
        for k in range(ids.shape[0]):
            out[codes_i[k], ids[k]] += 1
        return out

    def mix_log_sums(codes, cands, post, cond):
        n = codes.shape[1]
        cands = np.asarray(cands, dtype=np.int64)
        out = np.zeros(len(cands), dtype=np.int64)
        step = max(1, _CHUNK_CELLS // max(n, 1))
        buf = np.empty((min(step, len(cands)), n))
        mix = mix2 if post.shape[0] == 2 else mix_any
        for s in range(0, len(cands), step):
            part = cands[s:s + step]
            view = buf[:len(part)]
            mix(codes, part, post, cond, view)
            np.log(view, out=view)
            fixed_rows(view, out[s:s + len(part)])
        return out

    @jit
    def pair_fold(pair_log, table, codes, cf, targets):
        n = codes.shape[1]
        num_classes = pair_log.shape[2]
        for i in targets:
            for k in range(n):
                a = codes[i, k]
                b = cf[k]
                for c in range(num_classes):
                    pair_log[i, k, c] += table[i, a, b, c]

    @jit
    def pair_div(pair_log, cands, m, out):
        for j in range(cands.shape[0]):
            src = pair_log[cands[j]]
            dst = out[j]
            for k in range(src.shape[0]):
                for c in range(src.shape[1]):
                    dst[k, c] = src[k, c] / m

    @jit
    def pair_mix(post, factor, out):
        num_classes = post.shape[1]
        for j in range(factor.shape[0]):
            f = factor[j]
            row = out[j]
            for k in range(post.shape[0]):
                v = post[k, 0] * f[k, 0]
                for c in range(1, num_classes):
                    v += post[k, c] * f[k, c]
                row[k] = v if v > TINY else TINY

    @jit
    def pair_fixed(logc, logmix, y, out):
        for j in range(logc.shape[0]):
            t = 0
            for k in range(logc.shape[1]):
                t += np.int64(np.rint((logc[j, k, y[k]] - logmix[j, k]) * SCALE))
            out[j] = t

    def pair_scores(pair_log, post, y, cands, m):
        n, num_classes = post.shape
        cands = np.asarray(cands, dtype=np.int64)
        out = np.zeros(len(cands), dtype=np.int64)
        step = max(1, _CHUNK_CELLS // max(n, 1))
        logc = np.empty((min(step, len(cands)), n, num_classes))
        factor = np.empty_like(logc)
        mix = np.empty((min(step, len(cands)), n))
        y = np.asarray(y, dtype=np.int64)
        post = np.ascontiguousarray(post)
        for s in range(0, len(cands), step):
            part = cands[s:s + step]
            lc, fc, mx = logc[:len(part)], factor[:len(part)], mix[:len(part)]
            pair_div(pair_log, part, np.int64(m), lc)
            np.exp(lc, out=fc)
            pair_mix(post, fc, mx)
            np.log(mx, out=mx)
            pair_fixed(lc, mx, y, out[s:s + len(part)])
        return out

    @jit
    def cell_fill(pair_log, codes, ids, y, cands, m, arity, counts, logc):
        n = ids.shape[0]
        num_classes = counts.shape[2]
        for j in range(cands.shape[0]):
            i = cands[j]
            src = pair_log[i]
            ci = codes[i]
            cj = counts[j]
            lj = logc[j]
            for k in range(n):
                cell = ids[k] * arity + ci[k]
                fresh = True
                for c in range(num_classes):
                    if cj[cell, c] != 0:
                        fresh = False
                cj[cell, y[k]] += 1
                if fresh:  # the first row of the cell gives its values
                    for c in range(num_classes):
                        lj[cell, c] = src[k, c] / m

    @jit
    def cell_fixed(counts, logc, logmix, out):
        for j in range(counts.shape[0]):
            t = 0
            for cell in range(counts.shape[1]):
                for c in range(counts.shape[2]):
                    n = counts[j, cell, c]
                    if n != 0:
                        t += n * np.int64(np.rint((logc[j, cell, c] - logmix[j, cell]) * SCALE))
            out[j] = t

    def pair_cell_scores(pair_log, post, codes, ids, y, cands, m, arity, num):
        n, num_classes = post.shape
        cells = num * arity
        rep_p = np.zeros(num, dtype=np.int64)
        rep_p[ids] = np.arange(n)  # a row of every pattern: its posterior is the pattern's
        post_cells = np.repeat(post[rep_p], arity, axis=0)  # cell = pattern * arity + x_i
        cands = np.asarray(cands, dtype=np.int64)
        ids = np.asarray(ids, dtype=np.int64)
        y = np.asarray(y, dtype=np.int64)
        out = np.zeros(len(cands), dtype=np.int64)
        step = max(1, _CHUNK_CELLS // cells)
        size = min(step, len(cands))
        counts = np.empty((size, cells, num_classes), dtype=np.int64)
        logc = np.empty((size, cells, num_classes))
        factor = np.empty_like(logc)
        mix = np.empty((size, cells))
        for s in range(0, len(cands), step):
            part = cands[s:s + step]
            cn, lc, fc, mx = (counts[:len(part)], logc[:len(part)], factor[:len(part)],
                              mix[:len(part)])
            cn.fill(0)
            lc.fill(0.0)
            cell_fill(pair_log, codes, ids, y, part, np.int64(m), np.int64(arity), cn, lc)
            np.exp(lc, out=fc)
            pair_mix(post_cells, fc, mx)
            np.log(mx, out=mx)
            cell_fixed(cn, lc, mx, out[s:s + len(part)])
        return out

    @jit
    def pair_counts_loop(codes, y, f, arity, num_classes):
        num_features, n = codes.shape
        out = np.zeros((num_features, arity, arity, num_classes), dtype=np.int64)
        cf = codes[f]
        for i in range(num_features):
            ci = codes[i]
            oi = out[i]
            for k in range(n):
                oi[ci[k], cf[k], y[k]] += 1
        return out

    def pair_counts(codes, y, f, arity, num_classes):
        return pair_counts_loop(codes, np.asarray(y, dtype=np.int64), int(f), int(arity),
                                int(num_classes))

    def fold(pair_log, table, codes, cf, targets):
        pair_fold(pair_log, table, codes, cf, np.asarray(targets, dtype=np.int64))

    def posterior(pattern_post, ids, codes, rest, cond):
        return row_posterior(np.ascontiguousarray(pattern_post), ids, codes,
                             np.asarray(rest, dtype=np.int64), cond)

    def counts(codes_i, ids, num, arity):
        return pattern_counts(codes_i, ids, int(num), int(arity))

    return posterior, mix_log_sums, counts, fold, pair_scores, pair_cell_scores, pair_counts


def _guarded(fast, slow):
    """Call the compiled loop; if numba cannot compile it here, use numpy from then on."""
    def call(*args):
        global BACKEND
        impl = _impl.get(fast, fast)
        try:
            return impl(*args)
        except _NumbaError as exc:
            warnings.warn(f"vmi_spark: numba could not compile a kernel ({type(exc).__name__}); "
                          "using the numpy loops", RuntimeWarning, stacklevel=2)
            _impl[fast] = slow
            BACKEND = "numpy"
            return slow(*args)
    return call


_impl: dict = {}
_numba = _load_numba()
if _numba is not None:
    from numba.core.errors import NumbaError as _NumbaError

    try:
        _fast = _compile(_numba)
    except RuntimeError:  # no writable cache directory: compile per process instead
        _fast = _compile(_numba, cache=False)
    (row_posterior, mix_log_sums, pattern_counts, pair_fold, pair_scores, pair_cell_scores,
     pair_counts) = (_guarded(f, s) for f, s in zip(_fast, (
         row_posterior_np, mix_log_sums_np, pattern_counts_np, pair_fold_np, pair_scores_np,
         pair_cell_scores_np, pair_counts_np)))
    BACKEND = "numba"
else:
    (row_posterior, mix_log_sums, pattern_counts, pair_fold, pair_scores, pair_cell_scores,
     pair_counts) = (row_posterior_np, mix_log_sums_np, pattern_counts_np, pair_fold_np,
                     pair_scores_np, pair_cell_scores_np, pair_counts_np)
    BACKEND = "numpy"
