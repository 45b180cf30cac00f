"""The per-row loops of the bound: compiled with numba when it is installed.

Three loops dominate a ``vmi_naive`` pass: folding the block's features into the
per-row posterior, the per-row mixture ``sum_y r_k(y) p(x_i^k | y)`` of every
candidate and its rounded log, and counting rows per (pattern of x_S, x_i). Two
dominate a ``vmi_pairwise`` pass: adding log p(x_i | x_f, c) - log p(x_i | x_f, y_k)
for the classes c other than the row's own into every candidate's running sum, and
the per-row mixture ``r_k(y_k) + sum_c r_k(c) e^{d_c}`` of the geometric means' ratios
and its rounded log. Counting ``n(x_i, x_f, y)`` (pairwise and the classic criteria)
is an integer loop. Each has a numba and a numpy implementation doing the same IEEE
operations in the same order (products and left-to-right sums, never a fused
multiply-add), and every ``exp`` and ``log`` is :mod:`.explog`'s (the same operations
in numba and numpy, no libm), so both give the same integers bit for bit, on every
machine. Compiled, the per-row exp and log loops vectorise; the pairwise terms go through
short loops over a stretch of rows (division, exp, then the mixture and log; with more
than two classes the mixture in a loop of its own), and the feature just
chosen is folded into a candidate's sums in the pass that scores it
(:func:`pair_fold_scores`).
numba is an optional extra (``pip install vmi-spark[fast]``); ``VMI_SPARK_KERNELS=numpy``
forces the numpy loops.
"""

from __future__ import annotations

import os
import warnings

import numpy as np

from . import explog

#: fixed-point scale of per-row log contributions
SCALE = float(2**32)
#: floor for the mixture probability; only reached if a posterior underflows
TINY = 1e-300
#: (pattern, x_i, y) cells x candidates one compiled cell-scoring call fills at most
_CHUNK_CELLS = 1 << 16
#: rows per stretch of the pairwise score's loops (:func:`pair_scores`): its buffers stay
#: in the first-level cache
_STRETCH = 256
#: rows ahead of the stretch being scored that the fused pairwise pass prefetches
_AHEAD = 2 * _STRETCH


def count_ways(rows: int, cells: int) -> int:
    """Interleaved histograms of the pair count loop for ``rows`` rows and ``cells`` cells
    a feature: 8 where a feature has at least 64 rows a cell, 4 from 4 rows a cell, else 1.

    Several histograms let rows that hit one cell not wait for each other's increment
    (skewed columns, sorted labels), but each costs a clearing and a sum of ``cells`` per
    feature. One-off timings (session 20; 10k-65k rows, 18 to 131,072 cells, uniform and
    90-99% skewed codes): 8 were fastest or within 5% at 128 cells in 10k rows, 4 or 8 at
    1,210-2,178 (4 ahead when skewed, 1 when uniform), 1 or 2 at 131,072 cells in 65k rows
    (8 took 2-2.3x as long as 1 there).
    """
    if rows >= 64 * cells:
        return 8
    if rows >= 4 * cells:
        return 4
    return 1


def load_numba():
    """The numba module, or None when it is not installed or ``VMI_SPARK_KERNELS=numpy``."""
    if os.environ.get("VMI_SPARK_KERNELS", "").strip().lower() == "numpy":
        return None
    try:
        import numba
    except ImportError:
        return None
    return numba


#: the loops with a compiled and a numpy implementation (``name`` and ``name + "_np"``)
LOOPS = ("row_posterior", "mix_log_sums", "pattern_counts", "pair_fold", "pair_scores",
         "pair_cell_scores", "pair_counts", "pair_fold_scores", "pair_posterior")


def fixed(values: np.ndarray) -> np.ndarray:
    """rint(values * 2**32) as int64 (``values`` is overwritten)."""
    values *= SCALE
    return np.rint(values, out=values).astype(np.int64)


def fixed_log(values: np.ndarray) -> np.ndarray:
    """rint(2**32 log max(values, 1e-300)) as int64 (``values`` is overwritten)."""
    np.maximum(values, TINY, out=values)
    return fixed(explog.log(values))


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
        out[j] = fixed(-explog.log(mix)).sum()
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
        out[j] = int((counts[present] * fixed(-explog.log(mix))).sum())
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


#: the scalar exp, log and rint that the compiled loops call (explog.compile_scalar), set by
#: :func:`_compile`. Module globals, not closure variables of ``_compile``: numba keys a
#: cached function by the pickled bytes of its closure, and a dispatcher pickles with an id
#: of its own process, so loops that closed over these missed numba's cache in every
#: process, were compiled again (0.5-0.7 s each, in the driver and in every Python worker)
#: and added a file to the cache each time. numba does not notice an edit of explog.py in
#: a cached loop (only of this file); tests/test_kernels.py compares the compiled loops
#: with the numpy ones, which call explog directly, on every run.
_exp1 = _log1 = _fix = None
#: the pairwise terms of a stretch of rows (:func:`_compile`), module globals for the same reason
_terms2 = _terms = None
#: the two-class fold's parts (:func:`_compile`), module globals for the same reason
_fold_key2 = _fold_diffs2 = _fold_add2 = None
#: the prefetch of the pairwise state a stretch ahead (:func:`_compile`), the same
_ahead = None


def _prefetch_intrinsic(numba):
    """``prefetch(a, q)``: ask the CPU to fetch the cache line of ``a[q]`` (a contiguous 1-d
    array) ahead of its use (``llvm.prefetch``: read, kept in every cache level). A hint
    only: it changes no value, and an address outside the array would not fault (the
    callers keep ``q`` inside it all the same)."""
    from llvmlite import ir
    from numba.core import types
    from numba.extending import intrinsic

    @intrinsic
    def prefetch(typingctx, a, q):
        def codegen(context, builder, sig, args):
            ary = context.make_array(sig.args[0])(context, builder, args[0])
            ptr = builder.bitcast(builder.gep(ary.data, [args[1]]), ir.IntType(8).as_pointer())
            i32 = ir.IntType(32)
            fnty = ir.FunctionType(ir.VoidType(), [ptr.type, i32, i32, i32])
            fn = builder.module.declare_intrinsic("llvm.prefetch", [ptr.type], fnty)
            builder.call(fn, [ptr, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
            return context.get_dummy_value()
        return types.void(a, types.intp), codegen

    return prefetch


def _compile(numba, cache=True):
    global _exp1, _log1, _fix, _terms2, _terms, _fold_key2, _fold_diffs2, _fold_add2, _ahead
    jit = numba.njit(cache=cache, nogil=True, error_model="numpy")
    _exp1, _log1, _fix = explog.compile_scalar(numba)
    prefetch = _prefetch_intrinsic(numba)

    # The pairwise score's terms, -rint(2**32 log max(own + sum_c other_c e^{d_c / m}, TINY))
    # summed over a stretch of at most _STRETCH rows. Short loops over the stretch instead of
    # one (division, exp, then mixture and log; with more than two classes the mixture in a
    # loop of its own): the same operations on every value, but each loop's dependency chain
    # is short enough for the core to overlap its rows (one loop with all four took about
    # 1.5x as long). Inlined into the callers' loops (numba's IR): as
    # calls, a pairwise step took about 8% longer.

    @numba.njit(nogil=True, error_model="numpy", inline="always")
    def terms2(src, own, other, m, buf):
        # two classes: one ratio per row; the mixture in the log's loop (about 6% faster
        # than a loop of its own, session 20)
        w = src.shape[0]
        for k in range(w):
            buf[k] = src[k] / m
        for k in range(w):
            buf[k] = _exp1(buf[k])
        t = 0
        for k in range(w):
            v = own[k] + other[k] * buf[k]
            t += _fix(-_log1(v if v > TINY else TINY) * SCALE)
        return t

    @numba.njit(nogil=True, error_model="numpy", inline="always")
    def terms(src, own, other, m, weights, ebuf, buf):
        # src and other (w * others,): each row's ratios in a run, summed left to right;
        # each row's term counted weights[k] times. The mixture keeps a loop of its own
        # here: in the log's loop (as terms2) it took 1.7-2.3x as long (3 and 5 classes)
        w = own.shape[0]
        others = src.shape[0] // w if w else 0
        for q in range(w * others):
            ebuf[q] = src[q] / m
        for q in range(w * others):
            ebuf[q] = _exp1(ebuf[q])
        for k in range(w):
            v = own[k]
            for c in range(others):
                v += other[k * others + c] * ebuf[k * others + c]
            buf[k] = v if v > TINY else TINY
        t = 0
        for k in range(w):
            t += weights[k] * _fix(-_log1(buf[k]) * SCALE)
        return t

    # The two-class fold of feature f into candidate i's sums: log_ratio[i, k] += d_i[x_i, x_f,
    # y_k] with the table of differences d_i[a, b, y] = t_i[a, b, 1 - y] - t_i[a, b, y].

    @numba.njit(nogil=True, error_model="numpy")
    def fold_key2(cf, y):
        # each row's (x_f, y) as an offset into a row of d
        key = np.empty(cf.shape[0], dtype=np.int64)
        for k in range(cf.shape[0]):
            key[k] = np.int64(cf[k]) * 2 + y[k]
        return key

    @numba.njit(nogil=True, error_model="numpy")
    def fold_diffs2(t_i, d):
        arity = t_i.shape[0]
        for a in range(arity):
            for b in range(arity):
                for c in range(2):
                    d[(a * arity + b) * 2 + c] = t_i[a, b, 1 - c] - t_i[a, b, c]

    @numba.njit(nogil=True, error_model="numpy", inline="always")
    def fold_add2(src, a_i, key, d, arity):
        for k in range(src.shape[0]):
            src[k] += d[np.int64(a_i[k]) * (2 * arity) + key[k]]

    # The score passes read each candidate's sums once, a stretch at a time, and spend long
    # enough on a stretch (exp, log) that the hardware's prefetcher falls behind: the fused
    # pass waited on memory for about a sixth of its time (a state of 400 MB at 250k x 200).
    # ahead() asks for the stretch _AHEAD rows after the one from row s of candidate j,
    # in the next candidate's row once past the end of this one (flat: the C-contiguous
    # state of n rows and ``others`` values a row per feature, as one row; last: its last
    # index). Blocks of fewer rows than _AHEAD (wide tables) are not prefetched: each
    # candidate's row is short, the rows of consecutive candidates follow each other, and
    # the hardware keeps up (the prefetches cost 3-9% there). The callers test that, not
    # ahead(): inside it the test cost 2-13% at few rows (session 20, one-off timings).

    @numba.njit(nogil=True, error_model="numpy", inline="always")
    def ahead(flat, cands, j, s, n, others, last):
        row = n * others
        p = (s + _AHEAD) * others
        if p >= row:
            if j + 1 >= cands.shape[0]:
                return
            j += 1
            p -= row
        base = cands[j] * row + p
        for q in range(0, _STRETCH * others, 8):  # a cache line of 64 bytes a prefetch
            prefetch(flat, min(base + q, last))

    _terms2, _terms = terms2, terms
    _ahead = ahead
    _fold_key2, _fold_diffs2, _fold_add2 = fold_key2, fold_diffs2, fold_add2

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
    def mix2(codes, cands, post, cond, out):
        n = codes.shape[1]
        p0 = post[0]
        p1 = post[1]
        # the candidate's two columns of p(x_i | y), contiguous: filled per candidate into
        # buffers made once (a block of a wide table has few rows a candidate)
        arity = cond.shape[1]
        c0 = np.empty(arity)
        c1 = np.empty(arity)
        for j in range(cands.shape[0]):
            i = cands[j]
            for v in range(arity):
                c0[v] = cond[i, v, 0]
                c1[v] = cond[i, v, 1]
            a = codes[i]
            t = 0
            for k in range(n):
                v = a[k]
                m = p0[k] * c0[v]
                m += p1[k] * c1[v]
                m = m if m > TINY else TINY
                t += _fix(_log1(m) * SCALE)
            out[j] = t

    @jit
    def mix_any(codes, cands, post, cond, out):
        n = codes.shape[1]
        num_classes = post.shape[0]
        for j in range(cands.shape[0]):
            i = cands[j]
            c = cond[i]
            a = codes[i]
            t = 0
            for k in range(n):
                v = a[k]
                m = post[0, k] * c[v, 0]
                for y in range(1, num_classes):
                    m += post[y, k] * c[v, y]
                m = m if m > TINY else TINY
                t += _fix(_log1(m) * SCALE)
            out[j] = t

    @jit
    def pattern_counts(codes, cands, ids, num, arity):
        out = np.zeros((cands.shape[0], arity, num), dtype=np.int64)
        for j in range(cands.shape[0]):
            a = codes[cands[j]]
            o = out[j]
            for k in range(ids.shape[0]):
                o[a[k], ids[k]] += 1
        return out

    def mix_log_sums(codes, cands, post, cond):
        cands = np.asarray(cands, dtype=np.int64)
        out = np.zeros(len(cands), dtype=np.int64)
        mix = mix2 if post.shape[0] == 2 else mix_any
        mix(codes, cands, np.ascontiguousarray(post), cond, out)
        return out

    @jit
    def posterior_loop(post, log_ratio_f, y, m):
        # the exps first, in one loop that vectorises; then each row's product and sum
        n, num_classes = post.shape
        others = num_classes - 1
        e = np.empty(n * others)
        for q in range(n * others):
            e[q] = _exp1(log_ratio_f[q] / m)
        for k in range(n):
            yk = y[k]
            for j in range(others):
                c = j + 1 if j >= yk else j
                post[k, c] *= e[k * others + j]
            total = post[k, 0]
            for c in range(1, num_classes):
                total += post[k, c]
            for c in range(num_classes):
                post[k, c] /= total

    def pair_posterior(post, log_ratio_f, y, m):
        if not post.flags.c_contiguous:
            return pair_posterior_np(post, log_ratio_f, y, m)
        posterior_loop(post, np.ascontiguousarray(log_ratio_f).reshape(-1),
                       np.asarray(y, dtype=np.int64), float(m))

    @jit
    def pair_fold2(log_ratio, table, codes, cf, y, targets):
        # two classes; log_ratio is (D, n), so that a candidate's row is contiguous
        arity = table.shape[1]
        key = _fold_key2(cf, y)
        d = np.empty(arity * arity * 2)
        for i in targets:
            _fold_diffs2(table[i], d)
            _fold_add2(log_ratio[i], codes[i], key, d, arity)

    @jit
    def pair_fold_any(log_ratio, table, codes, cf, y, targets):
        n = codes.shape[1]
        others = log_ratio.shape[2]
        for i in targets:
            for k in range(n):
                a = codes[i, k]
                b = cf[k]
                yk = y[k]
                own = table[i, a, b, yk]
                for j in range(others):
                    c = j + 1 if j >= yk else j
                    log_ratio[i, k, j] += table[i, a, b, c] - own

    @jit
    def pair_sum2(log_ratio, own, other, cands, m, out):
        # two classes: one ratio per row (log_ratio is (D, n), other (n,))
        n = own.shape[0]
        buf = np.empty(min(n, _STRETCH))
        flat = log_ratio.reshape(-1)
        last = flat.shape[0] - 1
        for j in range(cands.shape[0]):
            src = log_ratio[cands[j]]
            t = 0
            for s in range(0, n, _STRETCH):
                e = min(n, s + _STRETCH)
                if n >= _AHEAD:  # see ahead()
                    _ahead(flat, cands, j, s, n, 1, last)
                t += _terms2(src[s:e], own[s:e], other[s:e], m, buf)
            out[j] = t

    @jit
    def pair_sum(log_ratio, own, other, cands, m, out):
        # log_ratio (D, n * others) and other (n * others,): each row's ratios in a run
        n = own.shape[0]
        others = other.shape[0] // n if n else 0
        ebuf = np.empty(min(n, _STRETCH) * others)
        buf = np.empty(min(n, _STRETCH))
        ones = np.ones(min(n, _STRETCH), dtype=np.int64)
        flat = log_ratio.reshape(-1)
        last = flat.shape[0] - 1
        for j in range(cands.shape[0]):
            src = log_ratio[cands[j]]
            t = 0
            for s in range(0, n, _STRETCH):
                e = min(n, s + _STRETCH)
                if n >= _AHEAD:  # see ahead()
                    _ahead(flat, cands, j, s, n, others, last)
                t += _terms(src[s * others:e * others], own[s:e],
                            other[s * others:e * others], m, ones, ebuf, buf)
            out[j] = t

    @jit
    def pair_fold_sum2(log_ratio, table, codes, cf, y, cands, m, own, other, out):
        # pair_fold2 and then pair_sum2 for each candidate, a stretch of rows at a time: a
        # stretch of the candidate's ratios is still in the cache when it is scored
        n = codes.shape[1]
        arity = table.shape[1]
        key = _fold_key2(cf, y)
        d = np.empty(arity * arity * 2)
        buf = np.empty(min(n, _STRETCH))
        flat = log_ratio.reshape(-1)
        last = flat.shape[0] - 1
        for j in range(cands.shape[0]):
            i = cands[j]
            _fold_diffs2(table[i], d)
            src = log_ratio[i]
            a_i = codes[i]
            t = 0
            for s in range(0, n, _STRETCH):
                e = min(n, s + _STRETCH)
                if n >= _AHEAD:  # see ahead()
                    _ahead(flat, cands, j, s, n, 1, last)
                _fold_add2(src[s:e], a_i[s:e], key[s:e], d, arity)
                t += _terms2(src[s:e], own[s:e], other[s:e], m, buf)
            out[j] = t

    @jit
    def own_other2(post, y, own, other):
        # own_and_other_posteriors for two classes, without the index arrays
        for k in range(y.shape[0]):
            own[k] = post[k, y[k]]
            other[k] = post[k, 1 - y[k]]

    def own_and_other(post, y):
        if post.shape[1] != 2:
            own, other = own_and_other_posteriors(post, y)
            return own, np.ascontiguousarray(other).reshape(-1)
        own, other = np.empty(len(y)), np.empty(len(y))
        own_other2(post, np.asarray(y, dtype=np.int64), own, other)
        return own, other

    def pair_scores(log_ratio, post, y, cands, m):
        num_classes = post.shape[1]
        cands = np.asarray(cands, dtype=np.int64)
        out = np.zeros(len(cands), dtype=np.int64)
        own, other = own_and_other(post, y)
        # contiguous (a copy only of a strided state, which is read only here): the loops
        # prefetch it as one row
        flat = np.ascontiguousarray(log_ratio.reshape(log_ratio.shape[0], -1))
        sums = pair_sum2 if num_classes == 2 else pair_sum
        sums(flat, own, other, cands, float(m), out)
        return out

    def fused_fold_scores(log_ratio, table, codes, cf, y, post, cands, m):
        # two classes, a contiguous state (pair_fold_scores routes the rest): nothing is
        # written before both loops are compiled, so a NumbaError leaves the state as it was
        y = np.asarray(y, dtype=np.int64)
        cands = np.asarray(cands, dtype=np.int64)
        out = np.zeros(len(cands), dtype=np.int64)
        own, other = own_and_other(post, y)
        pair_fold_sum2(log_ratio.reshape(log_ratio.shape[:2]), table, codes, cf, y, cands,
                       float(m), own, other, out)
        return out

    @jit
    def cell_fill(log_ratio, codes, ids, y, cands, arity, counts, ratio):
        n = ids.shape[0]
        num_classes = ratio.shape[2] + 1
        for j in range(cands.shape[0]):
            i = cands[j]
            src = log_ratio[i]
            ci = codes[i]
            cj = counts[j]
            lj = ratio[j]
            for k in range(n):
                cell = (ids[k] * arity + ci[k]) * num_classes + y[k]
                if cj[cell] == 0:  # the first row of the cell gives its values
                    for c in range(num_classes - 1):
                        lj[cell, c] = src[k, c]
                cj[cell] += 1

    @jit
    def cell_sum(counts, ratio, own, other, m, out):
        # ratio (candidates, cells * others), other (cells * others,): every cell's term,
        # weighted by its rows; a cell no row falls in has the ratio 0 and the count 0, so
        # it adds 0 (no branch, so the stretch's loops vectorise)
        cells = own.shape[0]
        others = other.shape[0] // cells if cells else 0
        ebuf = np.empty(min(cells, _STRETCH) * others)
        buf = np.empty(min(cells, _STRETCH))
        for j in range(counts.shape[0]):
            cj = counts[j]
            lj = ratio[j]
            t = 0
            for s in range(0, cells, _STRETCH):
                e = min(cells, s + _STRETCH)
                t += _terms(lj[s * others:e * others], own[s:e], other[s * others:e * others],
                            m, cj[s:e], ebuf, buf)
            out[j] = t

    def pair_cell_scores(log_ratio, post, codes, ids, y, cands, m, arity, num):
        n, num_classes = post.shape
        cells = num * arity * num_classes
        ids = np.asarray(ids, dtype=np.int64)
        y = np.asarray(y, dtype=np.int64)
        own, other = own_and_other_posteriors(post, y)
        # the posterior of a row is that of its (pattern, y): take one row of each
        rep = np.zeros(num * num_classes, dtype=np.int64)
        rep[ids * num_classes + y] = np.arange(n)
        cell = np.arange(cells)
        at = rep[(cell // (arity * num_classes)) * num_classes + cell % num_classes]
        own_c, other_c = own[at], np.ascontiguousarray(other[at])
        cands = np.asarray(cands, dtype=np.int64)
        out = np.zeros(len(cands), dtype=np.int64)
        step = max(1, _CHUNK_CELLS // cells)
        size = min(step, len(cands))
        counts = np.empty((size, cells), dtype=np.int64)
        ratio = np.empty((size, cells, num_classes - 1))
        for s in range(0, len(cands), step):
            part = cands[s:s + step]
            cn, lc = counts[:len(part)], ratio[:len(part)]
            cn.fill(0)
            lc.fill(0.0)
            cell_fill(log_ratio, codes, ids, y, part, np.int64(arity), cn, lc)
            cell_sum(cn, lc.reshape(len(part), -1), own_c, other_c.reshape(-1), float(m),
                     out[s:s + len(part)])
        return out

    @jit
    def pair_counts_loop(codes, y, f, arity, num_classes, ways):
        # ``ways`` (1, 4 or 8: count_ways) interleaved histograms per feature, summed at the
        # end: consecutive rows that hit the same cell do not wait for each other's increment
        num_features, n = codes.shape
        per = arity * num_classes
        cells = arity * per
        out = np.zeros((num_features, cells), dtype=np.int64)
        cf = codes[f]
        key = np.empty(n, dtype=np.int64)
        for k in range(n):
            key[k] = np.int64(cf[k]) * num_classes + y[k]
        h = np.zeros((ways, cells), dtype=np.int64)
        for i in range(num_features):
            ci = codes[i]
            h[:] = 0
            k = 0
            if ways == 8:
                while k + 8 <= n:
                    for u in range(8):
                        h[u, np.int64(ci[k + u]) * per + key[k + u]] += 1
                    k += 8
            elif ways == 4:
                while k + 4 <= n:
                    for u in range(4):
                        h[u, np.int64(ci[k + u]) * per + key[k + u]] += 1
                    k += 4
            while k < n:
                h[0, np.int64(ci[k]) * per + key[k]] += 1
                k += 1
            # the sums with constant trip counts (a loop over ``ways`` per cell cost up to
            # a fifth of the pass at a thousand cells)
            oi = out[i]
            if ways == 8:
                for c in range(cells):
                    t = h[0, c]
                    for u in range(1, 8):
                        t += h[u, c]
                    oi[c] = t
            elif ways == 4:
                for c in range(cells):
                    oi[c] = h[0, c] + h[1, c] + h[2, c] + h[3, c]
            else:
                oi[:] = h[0]
        return out.reshape((num_features, arity, arity, num_classes))

    def pair_counts(codes, y, f, arity, num_classes):
        return pair_counts_loop(codes, np.asarray(y, dtype=np.int64), int(f), int(arity),
                                int(num_classes),
                                count_ways(codes.shape[1], arity * arity * num_classes))

    def fold(log_ratio, table, codes, cf, y, targets):
        y = np.asarray(y, dtype=np.int64)
        targets = np.asarray(targets, dtype=np.int64)
        if log_ratio.shape[2] == 1 and table.shape[3] == 2 and log_ratio.flags.c_contiguous:
            pair_fold2(log_ratio.reshape(log_ratio.shape[:2]), table, codes, cf, y, targets)
        else:
            pair_fold_any(log_ratio, table, codes, cf, y, targets)

    def posterior(pattern_post, ids, codes, rest, cond):
        return row_posterior(np.ascontiguousarray(pattern_post), ids, codes,
                             np.asarray(rest, dtype=np.int64), cond)

    def counts(codes, cands, ids, num, arity):
        return pattern_counts(codes, np.asarray(cands, dtype=np.int64),
                              np.asarray(ids, dtype=np.int64), int(num), int(arity))

    return (posterior, mix_log_sums, counts, fold, pair_scores, pair_cell_scores, pair_counts,
            fused_fold_scores, pair_posterior)


def pair_fold_scores(log_ratio, table, codes, cf, y, post, cands, m):
    """Fold feature f's table into the candidates' ratios (in place, as :func:`pair_fold`;
    ``cands`` distinct) and return their :func:`pair_scores` with the block's ``m`` features.
    Compiled, two classes and a contiguous state go through one pass a stretch of rows at a
    time; otherwise the fold and then the score, each compiled loop guarded on its own (a
    loop that fails to compile falls back before it writes, so nothing is folded twice)."""
    if _fused_fold_scores is not None and post.shape[1] == 2 and log_ratio.flags.c_contiguous:
        return _fused_fold_scores(log_ratio, table, codes, cf, y, post, cands, m)
    pair_fold(log_ratio, table, codes, cf, y, cands)
    return pair_scores(log_ratio, post, y, cands, m)


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
_numba = load_numba()
if _numba is not None:
    from numba.core.errors import NumbaError as _NumbaError

    try:
        _fast = _compile(_numba)
    except RuntimeError:  # no writable cache directory: compile per process instead
        _fast = _compile(_numba, cache=False)
    (row_posterior, mix_log_sums, pattern_counts, pair_fold, pair_scores, pair_cell_scores,
     pair_counts, _fused_fold_scores, pair_posterior) = (_guarded(f, s) for f, s in zip(_fast, (
         row_posterior_np, mix_log_sums_np, pattern_counts_np, pair_fold_np, pair_scores_np,
         pair_cell_scores_np, pair_counts_np, pair_fold_scores_np, pair_posterior_np)))
    BACKEND = "numba"
else:
    (row_posterior, mix_log_sums, pattern_counts, pair_fold, pair_scores, pair_cell_scores,
     pair_counts, _fused_fold_scores, pair_posterior) = (
        row_posterior_np, mix_log_sums_np, pattern_counts_np, pair_fold_np, pair_scores_np,
        pair_cell_scores_np, pair_counts_np, None, pair_posterior_np)
    BACKEND = "numpy"
