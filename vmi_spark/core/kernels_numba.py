"""The compiled per-row loops of :mod:`.kernels` (numba).

Each loop does the IEEE operations of its numpy twin in :mod:`.kernels_numpy`, in the same
order (products and left-to-right sums, never a fused multiply-add; every exp and log is
:mod:`.explog`'s), so the two give the same integers bit for bit; compiled, the per-row
exp and log loops vectorise. :mod:`.kernels` imports this module only when numba is
installed and ``VMI_SPARK_KERNELS`` is not ``numpy``, and guards every call: a loop numba
cannot compile on some machine falls back to its numpy twin.

Caching. numba compiles each loop once per signature and CPU type into its cache (the
package's ``__pycache__``, ``NUMBA_CACHE_DIR`` or its user cache, :data:`CACHE`); a later
process, the driver's or a Python worker's, loads the machine code instead of compiling
(``tests/test_kernels.py`` checks that a second process compiles and writes nothing).
numba looks for the cache directory in this order: ``NUMBA_CACHE_DIR`` when set, the
``__pycache__`` beside this file (where Python puts its bytecode), else numba's user-wide
cache (``$XDG_CACHE_HOME/numba``, by default ``~/.cache/numba``: a read-only install
writes its compiled loops there, a few MB; set ``NUMBA_CACHE_DIR`` to put them elsewhere).
This package sets none of them, and never lets numba's user-wide cache be a relative path
(an empty ``XDG_CACHE_HOME`` makes it ``numba/`` in the working directory:
:class:`_AbsoluteUserWide`). Where there is no writable cache directory the loops are
compiled in every process instead (``CACHE`` is False), and a cache entry that cannot be
read or written later (:class:`_SafeCache`) is compiled in the process with a warning:
a cache never fails a run. Everything a cached loop calls is a module global here, the
scalar exp, log and rint (:func:`.explog.compile_scalar`) and the inlined helpers: numba
keys a cached function by the pickled bytes of its closure, and a dispatcher pickles with
an id of its own process, so loops that closed over these (as they once did, nested in a
function) missed numba's cache in every process, were compiled again (0.5-0.7 s each, in
the driver and in every Python worker) and added a file to the cache each time. numba
keys a cached loop by its own bytecode and its file's time stamp, not by the modules it
takes code or constants from: :class:`_SafeCache` adds the sources of those
(:data:`INLINED_MODULES`: explog.py's exp, log and rint, logtable.py's table,
kernels_numpy.py's ``SCALE`` and ``TINY``) to the key, so that an edit of one of them is
compiled again instead of loading a loop built from the old code (a checkout that keeps
its ``__pycache__``); where one of those sources cannot be read there is no cache.
"""

from __future__ import annotations

import hashlib
import logging
import os

import numba
import numba.core.errors
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.core.caching import (
    CompileResultCacheImpl,
    FunctionCache,
    UserWideCacheLocator,
    ZipCacheLocator,
)
from numba.extending import intrinsic
from numba.misc.appdirs import AppDirs

from . import explog, kernels_numpy, logtable
from .kernels_numpy import SCALE, TINY, own_and_other_posteriors, pair_posterior_np

log = logging.getLogger("vmi_spark")

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


class _AbsoluteUserWide:
    """A numba cache locator that uses numba's user-wide cache directory only where it is
    an absolute path. numba takes ``$XDG_CACHE_HOME/numba``; with ``XDG_CACHE_HOME`` set
    but empty that is ``numba/`` relative to the working directory, which numba would
    create and fill wherever the job happens to run."""

    @classmethod
    def from_function(cls, py_func, py_file):
        if not os.path.isabs(AppDirs(appname="numba", appauthor=False).user_cache_dir):
            return None
        return super().from_function(py_func, py_file)  # type: ignore[misc]


class _UserWide(_AbsoluteUserWide, UserWideCacheLocator):
    """:class:`_AbsoluteUserWide` for an installed package."""


class _Zip(_AbsoluteUserWide, ZipCacheLocator):
    """:class:`_AbsoluteUserWide` for a package imported from a zip (Spark's py-files)."""


class _CacheImpl(CompileResultCacheImpl):
    """numba's cache of compiled functions, with the user-wide locators above."""

    _locator_classes = [_UserWide if c is UserWideCacheLocator else _Zip
                        if c is ZipCacheLocator else c
                        for c in CompileResultCacheImpl._locator_classes]


def _caches() -> bool:
    """Whether numba finds a writable cache directory for this file's loops, and the
    sources of what they inline are known (:data:`STAMP`)."""
    if STAMP is None:
        return False
    try:
        _SafeCache(_caches)
    except RuntimeError:  # no writable cache directory: compile in every process instead
        return False
    return True


#: the modules the compiled loops take code or constants from besides their own file
INLINED_MODULES = (explog, logtable, kernels_numpy)


def sources_stamp(modules) -> str | None:
    """The sha256 of the modules' sources (by their loaders: a file or Spark's zip of
    py-files), or None where one of them has no readable source."""
    h = hashlib.sha256()
    for module in modules:
        try:
            source = module.__loader__.get_source(module.__name__)
        except (ImportError, OSError):
            source = None
        if source is None:
            return None
        h.update(f"{module.__name__}\0{len(source)}\0{source}".encode())
    return h.hexdigest()


#: what the compiled loops inline from other modules (:data:`INLINED_MODULES`)
STAMP = sources_stamp(INLINED_MODULES)


class _SafeCache(FunctionCache):
    """numba's cache of one loop, except that a cache that cannot be read or written never
    fails a run: an entry that cannot be read (unreadable, truncated, not numba's) is
    compiled instead, and a loop whose compiled code cannot be saved (disk full, the
    directory gone or made read-only since :func:`_caches` looked) stops saving and runs
    the code just compiled. numba itself lets such an ``OSError`` or unpickling error out
    of the call (it swallows only Windows' sharing errors). Its locators never put the
    cache in the working directory (:class:`_CacheImpl`)."""

    _impl_class = _CacheImpl

    def _index_key(self, sig, codegen):
        """numba's key (the loop's bytecode and closure, the CPU, the signature) and the
        sources of what the loop inlines from other modules (:data:`STAMP`)."""
        return (*super()._index_key(sig, codegen), STAMP)

    def load_overload(self, sig, target_context):
        try:
            return super().load_overload(sig, target_context)
        except Exception as exc:  # noqa: BLE001 - any broken entry: compile instead
            if _numba_error(exc):
                raise
            _cache_failed("read", exc)
            return None

    def save_overload(self, sig, data):
        try:
            super().save_overload(sig, data)
        except Exception as exc:  # noqa: BLE001 - compiled and loaded all the same
            if _numba_error(exc):
                raise
            self.disable()
            _cache_failed("write", exc)


#: the compiled loops are cached (see the module's docstring)
CACHE = _caches()


def _numba_error(exc: BaseException) -> bool:
    """Whether ``exc`` is numba's own error (a failure to compile, not to cache)."""
    return isinstance(exc, numba.core.errors.NumbaError)


def _cache_failed(what: str, exc: BaseException) -> None:
    log.warning("vmi_spark: numba's cache could not %s a compiled loop (%s: %s); "
                "compiling it in this process instead", what, type(exc).__name__, exc)


def cache_safely(dispatcher):
    """A loop compiled with ``numba.njit`` (without ``cache``) given this module's cache:
    :class:`_SafeCache` where :data:`CACHE` (never the working directory, never a failed
    run), else none. Every cached loop of the package goes through here."""
    if CACHE:
        # what numba.njit(cache=True) does (Dispatcher.enable_caching), with the safe cache
        dispatcher._cache = _SafeCache(dispatcher.py_func)
    return dispatcher


def _jit(fn):
    """A loop: compiled without the GIL, with numpy's division semantics (no exception),
    cached where :data:`CACHE` (:func:`cache_safely`)."""
    return cache_safely(numba.njit(nogil=True, error_model="numpy")(fn))


#: helpers inlined into the loops that call them (numba's IR)
_inline = numba.njit(nogil=True, error_model="numpy", inline="always")
#: helpers the loops call
_plain = numba.njit(nogil=True, error_model="numpy")
#: the scalar exp and rint the loops call
_exp1, _, _fix = explog.compile_scalar(numba)
#: the step terms' log (:func:`.explog.tlog`)
_tlog1 = explog.compile_tlog(numba)


@intrinsic
def _prefetch(typingctx, a, q):
    """``_prefetch(a, q)``: ask the CPU to fetch the cache line of ``a[q]`` (a contiguous
    1-d array) ahead of its use (``llvm.prefetch``: read, kept in every cache level). A hint
    only: it changes no value, and an address outside the array would not fault (the
    callers keep ``q`` inside it all the same)."""
    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        ptr = builder.bitcast(builder.gep(ary.data, [args[1]]), ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [ptr.type, i32, i32, i32])
        fn = builder.module.declare_intrinsic("llvm.prefetch", [ptr.type], fnty)
        builder.call(fn, [ptr, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()
    return types.void(a, types.intp), codegen


# -------------------------------------------------------------------- helpers of the pairwise loops


# The pairwise score's terms, -rint(2**32 log max(own + sum_c other_c e^{d_c / m}, TINY))
# summed over a stretch of at most _STRETCH rows. Short loops over the stretch instead of
# one (division, exp, then mixture and log; with more than two classes the mixture in a
# loop of its own): the same operations on every value, but each loop's dependency chain
# is short enough for the core to overlap its rows (one loop with all four took about
# 1.5x as long). Inlined into the callers' loops (numba's IR): as
# calls, a pairwise step took about 8% longer.


@_inline
def _terms2(src, own, other, m, buf):
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
        t += _fix(-_tlog1(v if v > TINY else TINY) * SCALE)
    return t


@_inline
def _terms(src, own, other, m, weights, ebuf, buf):
    # src and other (w * others,): each row's ratios in a run, summed left to right;
    # each row's term counted weights[k] times. The mixture keeps a loop of its own
    # here: in the log's loop (as _terms2) it took 1.7-2.3x as long (3 and 5 classes)
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
        t += weights[k] * _fix(-_tlog1(buf[k]) * SCALE)
    return t


# The two-class fold of feature f into candidate i's sums: log_ratio[i, k] += d_i[x_i, x_f,
# y_k] with the table of differences d_i[a, b, y] = t_i[a, b, 1 - y] - t_i[a, b, y].


@_plain
def _fold_key2(cf, y):
    # each row's (x_f, y) as an offset into a row of d
    key = np.empty(cf.shape[0], dtype=np.int64)
    for k in range(cf.shape[0]):
        key[k] = np.int64(cf[k]) * 2 + y[k]
    return key


@_plain
def _fold_diffs2(t_i, d):
    arity = t_i.shape[0]
    for a in range(arity):
        for b in range(arity):
            for c in range(2):
                d[(a * arity + b) * 2 + c] = t_i[a, b, 1 - c] - t_i[a, b, c]


@_inline
def _fold_add2(src, a_i, key, d, arity):
    for k in range(src.shape[0]):
        src[k] += d[np.int64(a_i[k]) * (2 * arity) + key[k]]


# The score passes read each candidate's sums once, a stretch at a time, and spend long
# enough on a stretch (exp, log) that the hardware's prefetcher falls behind: the fused
# pass waited on memory for about a sixth of its time (a state of 400 MB at 250k x 200).
# _ahead() asks for the stretch _AHEAD rows after the one from row s of candidate j,
# in the next candidate's row once past the end of this one (flat: the C-contiguous
# state of n rows and ``others`` values a row per feature, as one row; last: its last
# index). Chunks of fewer rows than _AHEAD (wide tables) are not prefetched: each
# candidate's row is short, the rows of consecutive candidates follow each other, and
# the hardware keeps up (the prefetches cost 3-9% there). The callers test that, not
# _ahead(): inside it the test cost 2-13% at few rows (session 20, one-off timings).


@_inline
def _ahead(flat, cands, j, s, n, others, last):
    row = n * others
    p = (s + _AHEAD) * others
    if p >= row:
        if j + 1 >= cands.shape[0]:
            return
        j += 1
        p -= row
    base = cands[j] * row + p
    for q in range(0, _STRETCH * others, 8):  # a cache line of 64 bytes a prefetch
        _prefetch(flat, min(base + q, last))


# ---------------------------------------------------------------------------------- the naive bound


@_jit
def _row_posterior(pattern_post, ids, codes, rest, cond):
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


def row_posterior(pattern_post, ids, codes, rest, cond):
    return _row_posterior(np.ascontiguousarray(pattern_post), ids, codes,
                          np.asarray(rest, dtype=np.int64), cond)


@_jit
def _mix2(codes, cands, post, cond, out):
    n = codes.shape[1]
    p0 = post[0]
    p1 = post[1]
    # the candidate's two columns of p(x_i | y), contiguous: filled per candidate into
    # buffers made once (a chunk of a wide table has few rows a candidate)
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
            t += _fix(_tlog1(m) * SCALE)
        out[j] = t


@_jit
def _mix_any(codes, cands, post, cond, out):
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
            t += _fix(_tlog1(m) * SCALE)
        out[j] = t


def mix_log_sums(codes, cands, post, cond):
    cands = np.asarray(cands, dtype=np.int64)
    out = np.zeros(len(cands), dtype=np.int64)
    mix = _mix2 if post.shape[0] == 2 else _mix_any
    mix(codes, cands, np.ascontiguousarray(post), cond, out)
    return out


@_jit
def _pattern_counts(codes, cands, ids, num, arity):
    out = np.zeros((cands.shape[0], arity, num), dtype=np.int64)
    for j in range(cands.shape[0]):
        a = codes[cands[j]]
        o = out[j]
        for k in range(ids.shape[0]):
            o[a[k], ids[k]] += 1
    return out


def pattern_counts(codes, cands, ids, num, arity):
    return _pattern_counts(codes, np.asarray(cands, dtype=np.int64),
                           np.asarray(ids, dtype=np.int64), int(num), int(arity))


# ----------------------------------------------------------- the pairwise state: posterior and fold


@_jit
def _posterior_loop(post, log_ratio_f, y, m):
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
    _posterior_loop(post, np.ascontiguousarray(log_ratio_f).reshape(-1),
                    np.asarray(y, dtype=np.int64), float(m))


@_jit
def _pair_fold2(log_ratio, table, codes, cf, y, targets):
    # two classes; log_ratio is (D, n), so that a candidate's row is contiguous
    arity = table.shape[1]
    key = _fold_key2(cf, y)
    d = np.empty(arity * arity * 2)
    for i in targets:
        _fold_diffs2(table[i], d)
        _fold_add2(log_ratio[i], codes[i], key, d, arity)


@_jit
def _pair_fold_any(log_ratio, table, codes, cf, y, targets):
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


def pair_fold(log_ratio, table, codes, cf, y, targets):
    y = np.asarray(y, dtype=np.int64)
    targets = np.asarray(targets, dtype=np.int64)
    if log_ratio.shape[2] == 1 and table.shape[3] == 2 and log_ratio.flags.c_contiguous:
        _pair_fold2(log_ratio.reshape(log_ratio.shape[:2]), table, codes, cf, y, targets)
    else:
        _pair_fold_any(log_ratio, table, codes, cf, y, targets)


# ------------------------------------------------------------------------------ the pairwise scores


@_jit
def _pair_sum2(log_ratio, own, other, cands, m, out):
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
            if n >= _AHEAD:  # see _ahead()
                _ahead(flat, cands, j, s, n, 1, last)
            t += _terms2(src[s:e], own[s:e], other[s:e], m, buf)
        out[j] = t


@_jit
def _pair_sum(log_ratio, own, other, cands, m, out):
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
            if n >= _AHEAD:  # see _ahead()
                _ahead(flat, cands, j, s, n, others, last)
            t += _terms(src[s * others:e * others], own[s:e],
                        other[s * others:e * others], m, ones, ebuf, buf)
        out[j] = t


@_jit
def _pair_fold_sum2(log_ratio, table, codes, cf, y, cands, m, own, other, out):
    # _pair_fold2 and then _pair_sum2 for each candidate, a stretch of rows at a time: a
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
            if n >= _AHEAD:  # see _ahead()
                _ahead(flat, cands, j, s, n, 1, last)
            _fold_add2(src[s:e], a_i[s:e], key[s:e], d, arity)
            t += _terms2(src[s:e], own[s:e], other[s:e], m, buf)
        out[j] = t


@_jit
def _own_other2(post, y, own, other):
    # own_and_other_posteriors for two classes, without the index arrays
    for k in range(y.shape[0]):
        own[k] = post[k, y[k]]
        other[k] = post[k, 1 - y[k]]


def _own_and_other(post, y):
    if post.shape[1] != 2:
        own, other = own_and_other_posteriors(post, y)
        return own, np.ascontiguousarray(other).reshape(-1)
    own, other = np.empty(len(y)), np.empty(len(y))
    _own_other2(post, np.asarray(y, dtype=np.int64), own, other)
    return own, other


def pair_scores(log_ratio, post, y, cands, m):
    num_classes = post.shape[1]
    cands = np.asarray(cands, dtype=np.int64)
    out = np.zeros(len(cands), dtype=np.int64)
    own, other = _own_and_other(post, y)
    # contiguous (a copy only of a strided state, which is read only here): the loops
    # prefetch it as one row
    flat = np.ascontiguousarray(log_ratio.reshape(log_ratio.shape[0], -1))
    sums = _pair_sum2 if num_classes == 2 else _pair_sum
    sums(flat, own, other, cands, float(m), out)
    return out


def fused_fold_scores(log_ratio, table, codes, cf, y, post, cands, m):
    # two classes, a contiguous state (pair_fold_scores routes the rest): nothing is
    # written before both loops are compiled, so a NumbaError leaves the state as it was
    y = np.asarray(y, dtype=np.int64)
    cands = np.asarray(cands, dtype=np.int64)
    out = np.zeros(len(cands), dtype=np.int64)
    own, other = _own_and_other(post, y)
    _pair_fold_sum2(log_ratio.reshape(log_ratio.shape[:2]), table, codes, cf, y, cands,
                    float(m), own, other, out)
    return out


@_jit
def _cell_fill(log_ratio, codes, ids, y, cands, arity, counts, ratio):
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


@_jit
def _cell_sum(counts, ratio, own, other, m, out):
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
        _cell_fill(log_ratio, codes, ids, y, part, np.int64(arity), cn, lc)
        _cell_sum(cn, lc.reshape(len(part), -1), own_c, other_c.reshape(-1), float(m),
                  out[s:s + len(part)])
    return out


# -------------------------------------------------------------------------------------- pair counts


@_jit
def _histograms(codes, key, per, cells, ways):
    # out[i, codes[i, k] * per + key[k]] += 1 for every feature i and row k: one histogram
    # of ``cells`` cells per feature. ``ways`` (1, 4 or 8: count_ways) interleaved
    # histograms per feature, summed at the end: consecutive rows that hit the same cell
    # do not wait for each other's increment
    num_features, n = codes.shape
    out = np.zeros((num_features, cells), dtype=np.int64)
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
    return out


@_jit
def _pair_keys(cf, y, num_classes):
    key = np.empty(cf.shape[0], dtype=np.int64)
    for k in range(cf.shape[0]):
        key[k] = np.int64(cf[k]) * num_classes + y[k]
    return key


def pair_counts(codes, y, f, arity, num_classes):
    per = int(arity) * int(num_classes)
    key = _pair_keys(codes[int(f)], np.asarray(y, dtype=np.int64), int(num_classes))
    cells = int(arity) * per
    out = _histograms(codes, key, per, cells, count_ways(codes.shape[1], cells))
    return out.reshape((codes.shape[0], arity, arity, num_classes))


def feature_counts(codes, y, arity, num_classes):
    """``n(x_i = a, y)`` of every feature i: (D, A, L) int64 (:func:`_histograms` with the
    label as the key)."""
    cells = int(arity) * int(num_classes)
    out = _histograms(codes, np.asarray(y, dtype=np.int64), int(num_classes), cells,
                      count_ways(codes.shape[1], cells))
    return out.reshape((codes.shape[0], arity, num_classes))


# -------------------------------------------------------------------------------- weighted rows
#
# The weighted twins (:mod:`.kernels_numpy`'s ``*_w_np``): every term as in the loops above,
# counted w_k times and summed exactly in three 21-bit limbs (:mod:`.wide`), returned as
# (2, C) ``[hi, lo]``. Only tables with row weights (and stability runs over them) take
# these loops; the unweighted ones above are untouched.

_LIMB = 21
_LMASK = (1 << _LIMB) - 1


@_inline
def _acc(acc, w, t):
    # acc[0..2] += the limbs of w * t (w in [0, 2**42), |t| < 2**42): each product < 2**43
    wh = w >> _LIMB
    wl = w & _LMASK
    th = t >> _LIMB
    tl = t & _LMASK
    acc[2] += wh * th
    acc[1] += wh * tl + wl * th
    acc[0] += wl * tl


@_inline
def _to_wide(acc, out, j):
    # out[:, j] = the limbs as hi * 2**32 + lo, lo in [0, 2**32) (wide.limbs_to_wide)
    a0 = acc[0]
    a1 = acc[1] + (a0 >> _LIMB)
    a0 = a0 & _LMASK
    a2 = acc[2] + (a1 >> _LIMB)
    a1 = a1 & _LMASK
    out[1, j] = a0 + ((a1 & ((1 << 11) - 1)) << _LIMB)
    out[0, j] = (a2 << 10) + (a1 >> 11)


@_jit
def _mix_w(codes, cands, post, cond, w, out):
    n = codes.shape[1]
    num_classes = post.shape[0]
    acc = np.zeros(3, dtype=np.int64)
    for j in range(cands.shape[0]):
        i = cands[j]
        c = cond[i]
        a = codes[i]
        acc[:] = 0
        for k in range(n):
            v = a[k]
            m = post[0, k] * c[v, 0]
            for yy in range(1, num_classes):
                m += post[yy, k] * c[v, yy]
            m = m if m > TINY else TINY
            _acc(acc, w[k], _fix(_tlog1(m) * SCALE))
        _to_wide(acc, out, j)


def mix_log_sums_w(codes, cands, post, cond, w):
    cands = np.asarray(cands, dtype=np.int64)
    out = np.zeros((2, len(cands)), dtype=np.int64)
    _mix_w(codes, cands, np.ascontiguousarray(post), cond, np.asarray(w, dtype=np.int64), out)
    return out


@_jit
def _pattern_counts_w(codes, cands, ids, num, arity, w):
    out = np.zeros((cands.shape[0], arity, num), dtype=np.int64)
    for j in range(cands.shape[0]):
        a = codes[cands[j]]
        o = out[j]
        for k in range(ids.shape[0]):
            o[a[k], ids[k]] += w[k]
    return out


def pattern_counts_w(codes, cands, ids, num, arity, w):
    return _pattern_counts_w(codes, np.asarray(cands, dtype=np.int64),
                             np.asarray(ids, dtype=np.int64), int(num), int(arity),
                             np.asarray(w, dtype=np.int64))


@_jit
def _pair_sum_w(log_ratio, own, other, cands, m, w, out):
    # _pair_sum's terms (any number of classes; log_ratio (D, n * others)), each row's
    # counted w[k] times
    n = own.shape[0]
    others = other.shape[0] // n if n else 0
    ebuf = np.empty(max(1, others))
    acc = np.zeros(3, dtype=np.int64)
    for j in range(cands.shape[0]):
        src = log_ratio[cands[j]]
        acc[:] = 0
        for k in range(n):
            for c in range(others):
                ebuf[c] = _exp1(src[k * others + c] / m)
            v = own[k]
            for c in range(others):
                v += other[k * others + c] * ebuf[c]
            v = v if v > TINY else TINY
            _acc(acc, w[k], _fix(-_tlog1(v) * SCALE))
        _to_wide(acc, out, j)


def pair_scores_w(log_ratio, post, y, cands, m, w):
    cands = np.asarray(cands, dtype=np.int64)
    out = np.zeros((2, len(cands)), dtype=np.int64)
    own, other = own_and_other_posteriors(post, np.asarray(y, dtype=np.intp))
    flat = np.ascontiguousarray(log_ratio.reshape(log_ratio.shape[0], -1))
    _pair_sum_w(flat, own, np.ascontiguousarray(other).reshape(-1), cands, float(m),
                np.asarray(w, dtype=np.int64), out)
    return out


@_jit
def _cell_fill_w(log_ratio, codes, ids, y, cands, arity, w, counts, seen, ratio):
    # _cell_fill with the cells' total weights (``seen`` marks the cells a row fell in)
    n = ids.shape[0]
    num_classes = ratio.shape[2] + 1
    for j in range(cands.shape[0]):
        i = cands[j]
        src = log_ratio[i]
        ci = codes[i]
        cj = counts[j]
        sj = seen[j]
        lj = ratio[j]
        for k in range(n):
            cell = (ids[k] * arity + ci[k]) * num_classes + y[k]
            if not sj[cell]:
                sj[cell] = True
                for c in range(num_classes - 1):
                    lj[cell, c] = src[k, c]
            cj[cell] += w[k]


@_jit
def _cell_sum_w(counts, ratio, own, other, m, out, at):
    # every cell's term weighted by its total weight (a cell no row falls in weighs 0)
    cells = own.shape[0]
    others = other.shape[0] // cells if cells else 0
    ebuf = np.empty(max(1, others))
    acc = np.zeros(3, dtype=np.int64)
    for j in range(counts.shape[0]):
        cj = counts[j]
        lj = ratio[j]
        acc[:] = 0
        for q in range(cells):
            if cj[q] == 0:
                continue
            for c in range(others):
                ebuf[c] = _exp1(lj[q * others + c] / m)
            v = own[q]
            for c in range(others):
                v += other[q * others + c] * ebuf[c]
            v = v if v > TINY else TINY
            _acc(acc, cj[q], _fix(-_tlog1(v) * SCALE))
        _to_wide(acc, out, at + j)


def pair_cell_scores_w(log_ratio, post, codes, ids, y, cands, m, arity, num, w):
    n, num_classes = post.shape
    cells = num * arity * num_classes
    ids = np.asarray(ids, dtype=np.int64)
    y = np.asarray(y, dtype=np.int64)
    own, other = own_and_other_posteriors(post, y)
    rep = np.zeros(num * num_classes, dtype=np.int64)
    rep[ids * num_classes + y] = np.arange(n)
    cell = np.arange(cells)
    at = rep[(cell // (arity * num_classes)) * num_classes + cell % num_classes]
    own_c, other_c = own[at], np.ascontiguousarray(other[at])
    cands = np.asarray(cands, dtype=np.int64)
    w = np.asarray(w, dtype=np.int64)
    out = np.zeros((2, len(cands)), dtype=np.int64)
    step = max(1, _CHUNK_CELLS // cells)
    size = min(step, len(cands))
    counts = np.empty((size, cells), dtype=np.int64)
    seen = np.empty((size, cells), dtype=np.bool_)
    ratio = np.empty((size, cells, num_classes - 1))
    for s in range(0, len(cands), step):
        part = cands[s:s + step]
        cn, sn, lc = counts[:len(part)], seen[:len(part)], ratio[:len(part)]
        cn.fill(0)
        sn.fill(False)
        lc.fill(0.0)
        _cell_fill_w(log_ratio, codes, ids, y, part, np.int64(arity), w, cn, sn, lc)
        _cell_sum_w(cn, lc.reshape(len(part), -1), own_c, other_c.reshape(-1), float(m),
                    out, s)
    return out


@_jit
def _histograms_w(codes, key, per, cells, w):
    # :func:`_histograms` with each row counted w[k] times (int64 sums)
    num_features, n = codes.shape
    out = np.zeros((num_features, cells), dtype=np.int64)
    for i in range(num_features):
        ci = codes[i]
        oi = out[i]
        for k in range(n):
            oi[np.int64(ci[k]) * per + key[k]] += w[k]
    return out


def pair_counts_w(codes, y, f, arity, num_classes, w):
    per = int(arity) * int(num_classes)
    key = _pair_keys(codes[int(f)], np.asarray(y, dtype=np.int64), int(num_classes))
    out = _histograms_w(codes, key, per, int(arity) * per, np.asarray(w, dtype=np.int64))
    return out.reshape((codes.shape[0], arity, arity, num_classes))


def feature_counts_w(codes, y, arity, num_classes, w):
    """:func:`feature_counts` with row weights ``w`` (int64 sums of the weights)."""
    out = _histograms_w(codes, np.asarray(y, dtype=np.int64), int(num_classes),
                        int(arity) * int(num_classes), np.asarray(w, dtype=np.int64))
    return out.reshape((codes.shape[0], arity, num_classes))
