"""exp and log for the per-row loops, in basic IEEE operations only.

The bound's per-row terms are rounded to integers (2**-32 nats) and summed, so the
result is exact only if every machine computes the same ``exp`` and ``log``. A libm or
numpy's own SIMD code may differ in the last bit between CPUs (numpy's float64 ``log``
takes an AVX-512 path where the CPU has one and the C library's elsewhere), and a
last-bit change moves a rounded term about once in a million rows. These functions are
fdlibm's algorithms (``e_exp.c``, ``e_log.c``: argument reduction and the same
polynomial coefficients) written with +, -, *, / and bit operations, which IEEE 754
rounds the same everywhere, and never a fused multiply-add. The numpy versions below
and the scalar numba versions (:func:`compile_scalar`) perform the same operations in
the same order, so they agree bit for bit; both are within one ulp of the C library
(tested). Compiled, the loops that use them vectorise (about 2 ns per value on an AVX2
core, against 5-6 ns for numpy's ``np.exp`` and ``np.log`` there).

Domain, as the bound uses them: ``log`` for normal positive finite x (the callers floor
their arguments at 1e-300); ``exp`` for x <= 709 (larger x is taken as 709; the bound's
arguments are below log N) and x < -708 gives 0.0 (including -inf), a change of at most
1e-307 absolute.

The step loops' log is :func:`tlog` (issue 46), table-driven and without division. Each
of its values is only ever turned into rint(2**32 tlog(x)) and summed as an integer, so
it needs a small absolute error, not the last bit of a double: x = 2**k z with z in
[1, 2), c = 1 + (i + 1/2) / 256 the centre of z's stretch (i its leading 8 mantissa bits,
c computed from them), r = (z - c) * (1/c) (z - c exact), and log x = (k ln2 + log c) +
(r + (k ln2_lo + r**2 (-1/2 + r (1/3 - r/4)))): Taylor's polynomial to r**4, |r| <=
2**-9. Two table values a log (:mod:`.logtable`: 1/c and log c, rounded to nearest), so two
gathers in a vectorised loop, against fdlibm's division. Its error against the correctly
rounded log is below 2**-46 for |log x| < 16 and within 1.05 ulps of the result beyond
(2**-43 at log 1e-300; fdlibm's: 2**-50 and 2**-45), so rint(2**32 tlog(x)) is that of
:func:`log` on all but 1 to 5 inputs in a million, and then 1 away (tested;
docs/performance.md). Same operations in numpy and numba (bit for bit, tested). Domain:
normal positive finite x (the callers floor at 1e-300); other inputs give meaningless
values.

References
----------
Sun Microsystems, fdlibm 5.3, ``e_exp.c`` and ``e_log.c`` (1993).
P. T. P. Tang, "Table-driven implementation of the logarithm function in IEEE
floating-point arithmetic", ACM TOMS 16(4), 378-400 (1990).
"""

from __future__ import annotations

import numpy as np

from .logtable import INVC as TLOG_INVC
from .logtable import LOGC as TLOG_LOGC

#: 1.5 * 2**52: for |v| < 2**51, v + SHIFT is v rounded to an integer (ties to even),
#: which is then the low bits of its representation
SHIFT = 6755399441055744.0
SHIFT_BITS = int(np.array([SHIFT]).view(np.int64)[0])
LN2_HI = 6.93147180369123816490e-01
LN2_LO = 1.90821492927058770002e-10
INV_LN2 = 1.44269504088896338700e+00
P1 = 1.66666666666666019037e-01
P2 = -2.77777777770155933842e-03
P3 = 6.61375632143793436117e-05
P4 = -1.65339022054652515390e-06
P5 = 4.13813679705723846039e-08
LG1 = 6.666666666666735130e-01
LG2 = 3.999999999940941908e-01
LG3 = 2.857142874366239149e-01
LG4 = 2.222219843214978396e-01
LG5 = 1.818357216161805012e-01
LG6 = 1.531383769920937332e-01
LG7 = 1.479819860511658591e-01
EXP_LO = -708.0
EXP_HI = 709.0
MANTISSA = (1 << 52) - 1
#: fdlibm's test: a mantissa above sqrt(2)'s is taken with the next exponent
SQRT2_ADJUST = 0x95F6400000000
BIT52 = 1 << 52
ONE_BITS = 0x3FF0000000000000


#: :func:`tlog`: the table index is the 8 leading mantissa bits
TLOG_SHIFT = 44
TLOG_MASK = 255
#: :func:`tlog`: the bits of c = 1 + (i + 1/2) / 256 below the exponent: the index bits
#: of z and the bit below them
TLOG_CBITS = MANTISSA & ~((1 << TLOG_SHIFT) - 1)
TLOG_HALF = 1 << (TLOG_SHIFT - 1)
#: log1p(r) - r = r**2 * (T2 + r * (T3 + r * T4)): Taylor's coefficients rounded to
#: nearest (|r| <= 2**-9: the dropped terms are below 2**-47)
T2, T3, T4 = (-1 / 2, 1 / 3, -1 / 4)


#: values per numpy chunk: the temporaries stay small (heap, cache) instead of fresh pages
CHUNK = 8192


def _chunked(fn, x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.size <= CHUNK:
        return fn(x)
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty_like(flat)
    for s in range(0, flat.size, CHUNK):
        out[s:s + CHUNK] = fn(flat[s:s + CHUNK])
    return out.reshape(x.shape)


def exp(x: np.ndarray) -> np.ndarray:
    """e**x elementwise (float64; see the module's domain). A new array."""
    return _chunked(_exp, x)


def log(x: np.ndarray) -> np.ndarray:
    """Natural log elementwise (float64, normal positive x). A new array."""
    return _chunked(_log, x)


def tlog(x: np.ndarray) -> np.ndarray:
    """Natural log elementwise by a table (float64, normal positive x; the step loops'
    log). A new array. See :func:`_tlog`."""
    return _chunked(_tlog, x)


def _horner(v: np.ndarray, coeffs) -> np.ndarray:
    """v * (a_n + v * (... + v * (a_1 + v * a_0))) for coeffs (a_0, ..., a_n), in place
    on one new array: the scalar versions' nesting, innermost first."""
    out = v * coeffs[0]
    for a in coeffs[1:]:
        out += a
        out *= v
    return out


def _exp(x: np.ndarray) -> np.ndarray:
    # in-place numpy steps; a + b and a * b are b + a and b * a in IEEE arithmetic, so each
    # line is the scalar version's operation (:func:`compile_scalar`)
    z = np.maximum(x, EXP_LO)
    np.minimum(z, EXP_HI, out=z)
    t0 = z * INV_LN2
    t0 += SHIFT
    kf = t0 - SHIFT
    k = t0.view(np.int64)
    k -= SHIFT_BITS                  # t0 is not used as a float again
    hi = kf * LN2_HI
    np.subtract(z, hi, out=hi)       # hi = z - kf * LN2_HI
    lo = kf
    lo *= LN2_LO                     # lo = kf * LN2_LO
    r = hi - lo
    t = r * r
    c = _horner(t, (P5, P4, P3, P2, P1))  # t * (P1 + t * (P2 + t * (P3 + t * (P4 + t * P5))))
    np.subtract(r, c, out=c)         # c = r - t * (...)
    r *= c                           # r * c
    c -= 2.0
    np.negative(c, out=c)            # 2.0 - c
    r /= c                           # (r * c) / (2.0 - c)
    np.subtract(lo, r, out=r)        # lo - (...)
    r -= hi                          # (...) - hi
    np.subtract(1.0, r, out=r)       # y = 1.0 - (...)
    y = r.view(np.int64)
    k <<= 52
    y += k
    out = y.view(np.float64)
    out[~(x >= EXP_LO)] = 0.0
    return out


def _log(x: np.ndarray) -> np.ndarray:
    bits = x.view(np.int64)
    mant = bits & MANTISSA
    i = mant + SQRT2_ADJUST
    i &= BIT52
    k = bits >> 52
    k -= 1023
    k += i >> 52
    i ^= ONE_BITS
    mant |= i
    f = mant.view(np.float64)
    f -= 1.0
    k += SHIFT_BITS
    dk = k.view(np.float64)
    dk -= SHIFT
    s = f + 2.0
    np.divide(f, s, out=s)           # s = f / (2.0 + f)
    z = s * s
    w = z * z
    t1 = _horner(w, (LG6, LG4, LG2))  # t1 = w * (LG2 + w * (LG4 + w * LG6))
    t2 = _horner(w, (LG7, LG5, LG3))  # t2 = z * (LG1 + w * (LG3 + w * (LG5 + w * LG7)))
    t2 += LG1
    t2 *= z
    t2 += t1                         # r = t2 + t1
    np.subtract(f, t2, out=t2)       # f - r
    t2 *= s                          # s * (f - r)
    t1 = dk * LN2_LO
    t2 -= t1                         # (...) - dk * LN2_LO
    t2 -= f                          # (...) - f
    dk *= LN2_HI
    dk -= t2                         # dk * LN2_HI - (...)
    return dk


def _tlog(x: np.ndarray) -> np.ndarray:
    """x = 2**k z, z in [1, 2); c the centre of z's stretch of 256 (from its leading
    mantissa bits); log x = (k ln2_hi + log c) + (r + (k ln2_lo + log1p(r) - r)) with
    r = (z - c) * (1/c), z - c exact, no division. The scalar version
    (:func:`compile_tlog`) does the same operations in the same order."""
    bits = x.view(np.int64)
    i = bits >> TLOG_SHIFT
    i &= TLOG_MASK
    k = bits >> 52
    k -= 1023
    z = bits & MANTISSA
    z |= ONE_BITS
    c = bits & TLOG_CBITS
    c |= ONE_BITS | TLOG_HALF
    r = z.view(np.float64)
    r -= c.view(np.float64)
    r *= TLOG_INVC.take(i)               # r = (z - c) * invc
    k += SHIFT_BITS
    dk = k.view(np.float64)
    dk -= SHIFT                          # k as a float64
    p = r * T4
    p += T3
    p *= r
    p += T2                              # T2 + r * (T3 + r * T4)
    p *= r * r                           # (r * r) * (...)
    lo = dk * LN2_LO
    lo += p                              # k * LN2_LO + p
    lo += r                              # r + (...)
    dk *= LN2_HI
    dk += TLOG_LOGC.take(i)              # k * LN2_HI + logc
    dk += lo
    return dk


def compile_scalar(numba):
    """Scalar numba versions ``(exp1, log1, fix)`` of :func:`exp`, :func:`log` and
    rint(v) as int64 for |v| < 2**51 (the same operations; LLVM inlines them into the loops)."""
    f2i, i2f = bitcasts(numba)
    jit = numba.njit(nogil=True, error_model="numpy")

    @jit
    def exp1(x):
        z = x if x > EXP_LO else EXP_LO
        z = z if z < EXP_HI else EXP_HI
        t0 = z * INV_LN2 + SHIFT
        kf = t0 - SHIFT
        k = f2i(t0) - SHIFT_BITS
        hi = z - kf * LN2_HI
        lo = kf * LN2_LO
        r = hi - lo
        t = r * r
        c = r - t * (P1 + t * (P2 + t * (P3 + t * (P4 + t * P5))))
        y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi)
        out = i2f(f2i(y) + (k << 52))
        return out if x >= EXP_LO else 0.0

    @jit
    def log1(x):
        bits = f2i(x)
        mant = bits & MANTISSA
        i = (mant + SQRT2_ADJUST) & BIT52
        k = (bits >> 52) - 1023 + (i >> 52)
        f = i2f(mant | (i ^ ONE_BITS)) - 1.0
        dk = i2f(k + SHIFT_BITS) - SHIFT
        s = f / (2.0 + f)
        z = s * s
        w = z * z
        t1 = w * (LG2 + w * (LG4 + w * LG6))
        t2 = z * (LG1 + w * (LG3 + w * (LG5 + w * LG7)))
        r = t2 + t1
        return dk * LN2_HI - ((s * (f - r) - dk * LN2_LO) - f)

    @jit
    def fix(v):
        return f2i(v + SHIFT) - SHIFT_BITS

    return exp1, log1, fix


def compile_tlog(numba):
    """The scalar numba version of :func:`tlog` (the same operations as :func:`_tlog`;
    LLVM inlines it into the loops)."""
    f2i, i2f = bitcasts(numba)
    invc_t, logc_t = TLOG_INVC, TLOG_LOGC

    @numba.njit(nogil=True, error_model="numpy")
    def tlog1(x):
        bits = f2i(x)
        i = (bits >> TLOG_SHIFT) & TLOG_MASK
        k = (bits >> 52) - 1023
        z = i2f((bits & MANTISSA) | ONE_BITS)
        c = i2f((bits & TLOG_CBITS) | (ONE_BITS | TLOG_HALF))
        r = (z - c) * invc_t[i]
        dk = i2f(k + SHIFT_BITS) - SHIFT
        p = (r * r) * (T2 + r * (T3 + r * T4))
        return (dk * LN2_HI + logc_t[i]) + (r + (dk * LN2_LO + p))

    return tlog1


def bitcasts(numba):
    """numba intrinsics ``(f2i, i2f)``: a float64's bits as int64, and back."""
    from llvmlite import ir
    from numba.core import types
    from numba.extending import intrinsic

    @intrinsic
    def f2i(typingctx, x):
        def codegen(context, builder, sig, args):
            return builder.bitcast(args[0], ir.IntType(64))
        return types.int64(types.float64), codegen

    @intrinsic
    def i2f(typingctx, x):
        def codegen(context, builder, sig, args):
            return builder.bitcast(args[0], ir.DoubleType())
        return types.float64(types.int64), codegen

    return f2i, i2f
