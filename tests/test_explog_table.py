"""explog.tlog, the table-driven log: its table recomputed with mpmath, its error against
the correctly rounded log, and the numba version against the numpy one bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from vmi_spark.core import explog, kernels, logtable


def _inputs():
    rng = np.random.default_rng(46)
    return np.concatenate([np.exp(rng.uniform(-690, 690, 1500)), rng.uniform(0.5, 2, 1500),
                           1 + rng.uniform(-1e-3, 1e-3, 1000), rng.uniform(1e-300, 1, 1000),
                           [1.0, 2.0, 0.5, 0.6875, 1.375, np.nextafter(1.0, 0), 1e-300,
                            np.finfo(np.float64).tiny, np.finfo(np.float64).max]])


def test_the_table_is_recomputed_by_mpmath():
    mpmath = pytest.importorskip("mpmath")
    from mpmath.libmp import to_float

    want = []
    with mpmath.workprec(256):
        for i in range(128):
            bits = explog.TLOG_OFF + (i << explog.TLOG_SHIFT)
            mid = float(np.array([bits + (1 << 44)], dtype=np.int64).view(np.float64)[0])
            c = 1.0 if i in (79, 80) else mid  # the two stretches next to 1 take c = 1
            lc = mpmath.log(mpmath.mpf(c))
            hi = float(mpmath.nint(lc * 2**43) / 2**43)
            want.append((c, to_float((1 / mpmath.mpf(c))._mpf_, rnd="n"), hi,
                         to_float((lc - mpmath.mpf(hi))._mpf_, rnd="n")))
    assert np.array_equal(np.array(want), logtable.TABLE)


def test_within_one_ulp_of_the_correctly_rounded_log():
    mpmath = pytest.importorskip("mpmath")
    from mpmath.libmp import to_float

    x = _inputs()
    with mpmath.workprec(256):
        cr = np.array([to_float(mpmath.log(mpmath.mpf(float(v)))._mpf_, rnd="n") for v in x])
    got = explog.tlog(x)
    # sign-aware ulps: log changes sign at 1, so compare as signed magnitudes
    ulps = np.abs(np.abs(got).view(np.int64) - np.abs(cr).view(np.int64))
    assert np.array_equal(np.sign(got), np.sign(cr))
    assert ulps.max() <= 1
    assert np.count_nonzero(ulps) < x.size // 100
    assert explog.tlog(np.array([1.0]))[0] == 0.0


def test_out_of_domain_inputs_give_the_values_of_explog_log():
    # not meaningful (the callers floor at TINY) but the same bits as the fdlibm log,
    # except -0.0
    x = np.array([0.0, 5e-324, 1e-310, np.inf, -np.inf, np.nan, -1.0, -2.0])
    assert np.array_equal(explog.tlog(x).view(np.int64), explog.log(x).view(np.int64))


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
    x = np.concatenate([_inputs(), np.exp(rng.uniform(-700, 700, 20_000)),
                        [0.0, -0.0, 5e-324, np.inf, -np.inf, np.nan, -1.0]])
    assert np.array_equal(run(x).view(np.int64), explog.tlog(x).view(np.int64))
