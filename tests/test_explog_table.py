"""explog.tlog, the step loops' table-driven log: its table recomputed with mpmath, its
error against the correctly rounded log, its fixed-point values against fdlibm's and the
exact ones, and the numba version against the numpy one bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from vmi_spark.core import explog, kernels, logtable


def _inputs():
    rng = np.random.default_rng(46)
    edges = 1 + np.arange(257) / 256  # the stretches' edges and their neighbours
    return np.concatenate([np.exp(rng.uniform(-690, 0, 1500)), rng.uniform(0.5, 2, 1500),
                           1 + rng.uniform(-1e-3, 1e-3, 1000), rng.uniform(1e-300, 1, 1000),
                           edges, np.nextafter(edges, 0), np.nextafter(edges, 3),
                           [1.0, 2.0, 0.5, 1e-300, np.finfo(np.float64).tiny]])


def test_the_table_is_recomputed_by_mpmath():
    mpmath = pytest.importorskip("mpmath")
    from mpmath.libmp import to_float

    want = []
    with mpmath.workprec(256):
        for i in range(256):
            c = mpmath.mpf(1) + (mpmath.mpf(i) + 0.5) / 256
            want.append((to_float((1 / c)._mpf_, rnd="n"), to_float(mpmath.log(c)._mpf_, rnd="n")))
    assert np.array_equal(np.array(want), logtable.TABLE)


def _exact(x, mpmath):
    """log x and rint(2**32 log x), from mpmath at 256 bits."""
    with mpmath.workprec(256):
        logs = [mpmath.log(mpmath.mpf(float(v))) for v in x]
        return logs, np.array([int(mpmath.nint(v * 2**32)) for v in logs])


def test_error_against_the_correctly_rounded_log():
    mpmath = pytest.importorskip("mpmath")
    x = _inputs()
    logs, _ = _exact(x, mpmath)
    got = explog.tlog(x)
    with mpmath.workprec(256):
        err = np.array([float(abs(mpmath.mpf(float(g)) - v)) for g, v in zip(got, logs)])
    small = np.abs(got) < 16
    assert err[small].max() < 2.0**-46
    assert (err[~small] / np.spacing(np.abs(got[~small]))).max() < 1.05


def test_fixed_point_values_are_those_of_fdlibm_and_the_exact_ones_but_rarely():
    mpmath = pytest.importorskip("mpmath")
    x = _inputs()
    _, exact = _exact(x, mpmath)
    new = np.rint(explog.tlog(x) * 2**32).astype(np.int64)
    old = np.rint(explog.log(x) * 2**32).astype(np.int64)
    assert np.abs(new - exact).max() <= 1
    assert np.count_nonzero(new != exact) <= np.count_nonzero(old != exact) + 2
    rng = np.random.default_rng(48)
    many = np.maximum(np.concatenate([rng.uniform(0, 1, 1_000_000),
                                      np.exp(rng.uniform(-690, 0, 1_000_000))]), 1e-300)
    new = np.rint(explog.tlog(many) * 2**32)
    old = np.rint(explog.log(many) * 2**32)
    assert np.abs(new - old).max() <= 1
    assert 0 < np.count_nonzero(new != old) < 20  # about 1 to 5 in a million


@pytest.mark.skipif(kernels.BACKEND != "numba", reason="numba is not installed")
def test_compiled_version_equals_the_numpy_one_bit_for_bit():
    import numba

    tlog1 = explog.compile_tlog(numba)

    @numba.njit(error_model="numpy")
    def run(x):
        out = np.empty_like(x)
        for k in range(x.shape[0]):
            out[k] = tlog1(x[k])
        return out

    rng = np.random.default_rng(47)
    x = np.concatenate([_inputs(), np.exp(rng.uniform(-700, 700, 20_000))])
    assert np.array_equal(run(x).view(np.int64), explog.tlog(x).view(np.int64))
