"""exp and log in basic IEEE operations: against the C library, and numba against numpy."""

import numpy as np
import pytest

from vmi_spark.core import explog, kernels


def _ulps(a, b):
    return np.abs(a.view(np.int64) - b.view(np.int64))


def _exp_inputs():
    rng = np.random.default_rng(0)
    return np.concatenate([rng.uniform(-708, 709, 200_000), rng.normal(0, 3, 200_000),
                           rng.uniform(-1e-9, 1e-9, 10_000),
                           [0.0, -0.0, 1.0, -1.0, np.log(2) / 2, -np.log(2) / 2, -708.0, 709.0]])


def _log_inputs():
    rng = np.random.default_rng(1)
    return np.concatenate([np.exp(rng.uniform(-690, 690, 200_000)), rng.uniform(0.5, 2, 200_000),
                           1 + rng.uniform(-1e-9, 1e-9, 10_000),
                           [1.0, 2.0, 0.5, np.sqrt(2), np.nextafter(np.sqrt(2), 2), 1e-300, 1e300,
                            np.finfo(np.float64).tiny, np.finfo(np.float64).max]])


def test_exp_within_one_ulp_of_the_c_library():
    x = _exp_inputs()
    assert _ulps(explog.exp(x), np.exp(x)).max() <= 1


def test_log_within_one_ulp_of_the_c_library():
    x = _log_inputs()
    assert _ulps(explog.log(x), np.log(x)).max() <= 1


def test_exact_values_and_the_domain_edges():
    assert explog.exp(np.array([0.0]))[0] == 1.0
    assert explog.log(np.array([1.0]))[0] == 0.0
    assert explog.log(np.array([2.0]))[0] == np.log(2.0)
    # below -708 (and -inf) exp is 0; above 709 it is exp(709)
    got = explog.exp(np.array([-np.inf, -708.5, -1e5, 710.0]))
    assert got[:3].tolist() == [0.0, 0.0, 0.0]
    assert got[3] == explog.exp(np.array([709.0]))[0]


@pytest.mark.skipif(kernels.BACKEND != "numba", reason="numba is not installed")
def test_compiled_scalars_equal_the_numpy_versions_bit_for_bit():
    import numba

    exp1, log1, fix = explog.compile_scalar(numba)

    @numba.njit(error_model="numpy")
    def run(x, y, v):
        a = np.empty_like(x)
        b = np.empty_like(y)
        c = np.empty(v.shape[0], dtype=np.int64)
        for k in range(x.shape[0]):
            a[k] = exp1(x[k])
        for k in range(y.shape[0]):
            b[k] = log1(y[k])
        for k in range(v.shape[0]):
            c[k] = fix(v[k])
        return a, b, c

    x = np.concatenate([_exp_inputs(), [-np.inf, -709.0, 800.0]])
    y = _log_inputs()
    rng = np.random.default_rng(2)
    v = np.concatenate([rng.uniform(-3e12, 3e12, 100_000), np.arange(-8, 8) + 0.5, [2.0**50]])
    a, b, c = run(x, y, v)
    assert np.array_equal(a.view(np.int64), explog.exp(x).view(np.int64))
    assert np.array_equal(b.view(np.int64), explog.log(y).view(np.int64))
    assert np.array_equal(c, np.rint(v).astype(np.int64))  # ties to even, as np.rint
