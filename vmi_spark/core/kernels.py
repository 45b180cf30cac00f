"""The per-row loops of the bound: compiled with numba when it is installed.

Three loops dominate a ``vmi_naive`` pass: folding the block's features into the
per-row posterior, the per-row mixture ``sum_y r_k(y) p(x_i^k | y)`` of every
candidate and its rounded log, and counting rows per (pattern of x_S, x_i). Two
dominate a ``vmi_pairwise`` pass: adding log p(x_i | x_f, c) - log p(x_i | x_f, y_k)
for the classes c other than the row's own into every candidate's running sum, and
the per-row mixture ``r_k(y_k) + sum_c r_k(c) e^{d_c}`` of the geometric means' ratios
and its rounded log. Counting ``n(x_i, x_f, y)`` (pairwise and the classic criteria)
and ``n(x_i, y)`` (every criterion's first tables) are integer loops. Each has a numba and a numpy implementation doing the same IEEE
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

import importlib.util
import os
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from .kernels_numpy import (
    SCALE,
    TINY,
    feature_counts_np,
    feature_counts_w_np,
    fixed,
    fixed_log,
    mix_log_sums_np,
    mix_log_sums_w_np,
    normalise,
    other_classes,
    own_and_other_posteriors,
    pair_cell_scores_np,
    pair_cell_scores_w_np,
    pair_counts_np,
    pair_counts_w_np,
    pair_fold_np,
    pair_fold_scores_np,
    pair_posterior_np,
    pair_scores_np,
    pair_scores_w_np,
    pattern_counts_np,
    pattern_counts_w_np,
    row_posterior_np,
)

__all__ = ["SCALE", "TINY", "BACKEND", "LOOPS", "Loop", "Guarded", "backend", "using",
           "load_numba", "fixed", "fixed_log",
           "normalise", "other_classes", "own_and_other_posteriors", "row_posterior",
           "mix_log_sums", "pattern_counts", "pair_fold", "pair_scores", "pair_cell_scores",
           "pair_counts", "pair_fold_scores", "pair_posterior", "row_posterior_np",
           "mix_log_sums_np", "pattern_counts_np", "pair_fold_np", "pair_scores_np",
           "pair_cell_scores_np", "pair_counts_np", "pair_fold_scores_np", "pair_posterior_np",
           "mix_log_sums_w", "pattern_counts_w", "pair_scores_w", "pair_cell_scores_w",
           "pair_counts_w", "mix_log_sums_w_np", "pattern_counts_w_np", "pair_scores_w_np",
           "pair_cell_scores_w_np", "pair_counts_w_np", "feature_counts", "feature_counts_w",
           "feature_counts_np", "feature_counts_w_np"]


#: a per-row loop (its arguments are those of its numpy twin)
Loop = Callable[..., Any]


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
         "pair_cell_scores", "pair_counts", "pair_fold_scores", "pair_posterior",
         "mix_log_sums_w", "pattern_counts_w", "pair_scores_w", "pair_cell_scores_w",
         "pair_counts_w", "feature_counts", "feature_counts_w")


class Guarded:
    """A compiled loop and its numpy twin: calls :attr:`impl`, the compiled loop; if numba
    cannot compile it here (a ``NumbaError``), warns once and uses the numpy loop from then
    on, and :data:`BACKEND` says ``numpy``. The same integers either way.

    ``fast`` is the compiled loop, or its name in :mod:`.kernels_numba`: that module (and
    numba with it, about a third of a second) is then imported at the first call of any
    such loop, not when this module is (a process that never runs a loop, the job's
    driver under resident tasks, never imports numba). A numba that fails to import
    there is a failure to compile: the numpy loops, with one warning.
    """

    def __init__(self, fast: Loop | str, slow: Loop):
        #: the loop called: the compiled one, or the numpy one after a failure (None
        #: until a loop named by ``fast`` is loaded at its first call)
        self.impl: Loop | None = None if isinstance(fast, str) else fast
        self.name = fast if isinstance(fast, str) else None
        self.slow = slow

    def __call__(self, *args):
        global BACKEND
        try:
            impl = self.impl if self.impl is not None else self._load()
            return impl(*args)
        except Exception as exc:
            if not _numba_failure(exc):
                raise
            warnings.warn(f"vmi_spark: numba could not compile a kernel ({type(exc).__name__}); "
                          "using the numpy loops", RuntimeWarning, stacklevel=2)
            self.impl = self.slow
            BACKEND = "numpy"
            return self.slow(*args)

    def _load(self) -> Loop:
        self.impl = getattr(_compiled_loops(), str(self.name))
        return self.impl


class _NumbaUnusable(Exception):
    """numba is installed but its module or this package's compiled loops fail to import."""


def _numba_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is numba failing to compile (a ``NumbaError``, told by its class
    without importing numba) or to load (:class:`_NumbaUnusable`)."""
    return isinstance(exc, _NumbaUnusable) or any(
        c.__name__ == "NumbaError" and c.__module__.startswith("numba")
        for c in type(exc).__mro__)


def _compiled_loops():
    """:mod:`.kernels_numba`, imported at the first call of a compiled loop."""
    try:
        from . import kernels_numba
    except Exception as exc:  # noqa: BLE001 - a broken numba: the numpy loops instead
        raise _NumbaUnusable(f"{type(exc).__name__}: {exc}") from None
    return kernels_numba


def warm() -> threading.Thread | None:
    """Load the compiled loops' machinery on a daemon thread (returned; None without the
    compiled loops): the first compiled call of a process sets up numba's code generator,
    about half a second even when every loop is cached, which the scikit-learn selector
    overlaps with its planning and encoding instead of paying before its first step."""
    if BACKEND != "numba":
        return None
    thread = threading.Thread(target=_warm_loops, name="vmi_spark-warm-kernels", daemon=True)
    thread.start()
    return thread


def _warm_loops() -> None:
    try:
        feature_counts(np.zeros((1, 1), dtype=np.uint8), np.zeros(1, dtype=np.int64), 1, 1)
    except Exception:  # noqa: BLE001 - a loop that fails here fails (and says so) in the run
        pass


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


def _numba_installed() -> bool:
    """Whether the compiled loops are wanted and numba is installed (found, not imported)."""
    if os.environ.get("VMI_SPARK_KERNELS", "").strip().lower() == "numpy":
        return False
    return importlib.util.find_spec("numba") is not None


#: the compiled loops are used (numba installed and not turned off)
_COMPILED = _numba_installed()


def _loop(name: str, slow: Loop) -> Loop:
    """The loop ``name``: compiled (:class:`Guarded`, loaded at its first call) where numba
    is, else its numpy twin ``slow``."""
    return Guarded(name, slow) if _COMPILED else slow


row_posterior = _loop("row_posterior", row_posterior_np)
mix_log_sums = _loop("mix_log_sums", mix_log_sums_np)
pattern_counts = _loop("pattern_counts", pattern_counts_np)
pair_fold = _loop("pair_fold", pair_fold_np)
pair_scores = _loop("pair_scores", pair_scores_np)
pair_cell_scores = _loop("pair_cell_scores", pair_cell_scores_np)
pair_counts = _loop("pair_counts", pair_counts_np)
pair_posterior = _loop("pair_posterior", pair_posterior_np)
mix_log_sums_w = _loop("mix_log_sums_w", mix_log_sums_w_np)
pattern_counts_w = _loop("pattern_counts_w", pattern_counts_w_np)
pair_scores_w = _loop("pair_scores_w", pair_scores_w_np)
pair_cell_scores_w = _loop("pair_cell_scores_w", pair_cell_scores_w_np)
pair_counts_w = _loop("pair_counts_w", pair_counts_w_np)
feature_counts = _loop("feature_counts", feature_counts_np)
feature_counts_w = _loop("feature_counts_w", feature_counts_w_np)
#: the fused pairwise fold and score (two classes, compiled only; see pair_fold_scores)
_fused_fold_scores: Loop | None = (Guarded("fused_fold_scores", pair_fold_scores_np)
                                   if _COMPILED else None)
#: which loops run: ``numba`` (compiled) or ``numpy`` (set to ``numpy`` by a loop that
#: falls back)
BACKEND = "numba" if _COMPILED else "numpy"


def backend() -> str:
    """Which loops run now: ``"numba"`` (compiled) or ``"numpy"`` (:data:`BACKEND`)."""
    return BACKEND


@contextmanager
def using(loops: str | None = None) -> Iterator[None]:
    """Run the block with the ``loops`` given and put back which loops run on exit, also
    when a loop fell back to numpy inside it (the public seam of tests and benchmarks).

    ``"numpy"`` binds every loop of :data:`LOOPS` to its numpy twin (and turns the fused
    pairwise loop off); ``"numba"`` says the compiled loops run (only where numba is
    installed and not turned off); None keeps them as they are and only restores.

    Raises
    ------
    ValueError
        ``loops`` is none of these, or ``"numba"`` where the compiled loops are off.
    """
    if loops not in (None, "numpy", "numba"):
        raise ValueError(f"loops must be 'numpy', 'numba' or None, got {loops!r}")
    if loops == "numba" and not _COMPILED:
        raise ValueError("the compiled loops are off here (numba is not installed or "
                         "VMI_SPARK_KERNELS=numpy)")
    global BACKEND, _fused_fold_scores
    here = globals()
    before = {name: here[name] for name in (*LOOPS, "_fused_fold_scores", "BACKEND")}
    impls = {name: before[name].impl for name in LOOPS if isinstance(before[name], Guarded)}
    try:
        if loops == "numpy":
            here.update({name: here[name + "_np"] for name in LOOPS})
            _fused_fold_scores = None
        if loops is not None:
            BACKEND = loops
        yield
    finally:
        here.update(before)
        for name, impl in impls.items():
            before[name].impl = impl
