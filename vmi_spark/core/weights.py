"""Row weights: every count, table and step as a sum of integer weights.

A weight column (``weightCol``, ``--weight-col``, ``sample_weight``) gives each row a
non-negative weight, in Spark ML's convention: a row of weight w counts as w rows, a row
of weight 0 as no row at all. To keep every sum exact the weights become integers
(*units*) once, before anything is counted:

* if every weight is a whole number, a weight of w is w units: a table whose rows carry
  integer weights is, bit for bit, the same table with each row repeated that many times
  (the plan, every count, every step's sum, the selection and the scores);
* otherwise every weight is multiplied by :data:`FRACTION_SCALE` (1024) and rounded to the
  nearest integer (half to even): a precision of 1/1024 of a unit weight per row, relative
  error at most 2**-11 / w (0.05 % at w = 1). Selection is invariant to multiplying all
  weights by a constant, so weights much smaller than 1 (inclusion probabilities 1e-4 and
  below) are best scaled up first.

A row is present when its weight is more than half a unit of 1/1024 (``rint(w * 1024) >
0``), whatever the other rows hold: a positive weight below 2**-11 is rounded to 0 and the
row counts as absent (as do rows of weight 0; both are reported as ``rows_zero_weight``).
A weight that is null, NaN, negative or infinite is an error naming the weight column
(Spark ML refuses these too), as are a column whose weights are all 0 and a table whose
total weight reaches :data:`MAX_TOTAL_WEIGHT` units (2**42, 4.4e12: beyond it a count table
would no longer be exact in float64 with room to spare, and the step sums' limbs, :mod:`.wide`,
would overflow).

Where weights enter: the statistics pass counts present rows and their weight
(:class:`WeightStats`); the plan's rules use weighted counts (the label's and the grouped
categories' rows per value, the spike and quantile ranks of :mod:`.binning` through
``value_counts(values, weights)``); the chunks carry each row's units next to its codes,
and the kernels multiply every per-row fixed-point term by them (:mod:`.bound`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: units per unit weight when some weight is not a whole number (2**10)
FRACTION_SCALE = 1024
#: a table's total weight must stay below this many units (2**42)
MAX_TOTAL_WEIGHT = 1 << 42


def present(w: np.ndarray) -> np.ndarray:
    """Which rows count: a weight that rounds to at least one 1/1024 unit (NaN: False)."""
    w = np.asarray(w, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        return np.rint(w * FRACTION_SCALE) > 0


def units(w: np.ndarray, scale: int) -> np.ndarray:
    """int64 units of valid weights ``w`` at ``scale`` (1: whole numbers, as they are;
    :data:`FRACTION_SCALE`: rounded to 1/1024, half to even)."""
    w = np.asarray(w, dtype=np.float64)
    return (w if scale == 1 else np.rint(w * scale)).astype(np.int64)


def exact_sum(x: np.ndarray) -> int:
    """The exact sum of non-negative int64 values below 2**53 (int64 would overflow past
    2**63 in all): two int64 sums of 21-bit halves, joined as Python ints."""
    x = np.asarray(x, dtype=np.int64)
    return (int((x >> 21).sum()) << 21) + int((x & ((1 << 21) - 1)).sum())


@dataclass
class WeightStats:
    """What one pass learns of the weights of the rows it reads (:meth:`add`), merged over
    tasks (:meth:`merge`): the invalid ones (``null``, ``negative``, ``infinite``: null or
    NaN, below 0, +inf or above :data:`MAX_TOTAL_WEIGHT`), the rows present and absent,
    whether every present weight is a whole number, and the present rows' weight in 1/1024
    units (exact integers below 2**53)."""

    null: int = 0
    negative: int = 0
    infinite: int = 0
    present: int = 0
    absent: int = 0
    whole: bool = True
    fine_units: int = 0  # sum of rint(w * 1024) over the present rows

    def add(self, w: np.ndarray) -> np.ndarray:
        """Count the weights of one batch; returns the rows present (bool)."""
        w = np.asarray(w, dtype=np.float64)
        nan = np.isnan(w)
        self.null += int(nan.sum())
        with np.errstate(invalid="ignore"):
            neg = w < 0
            inf = w > MAX_TOTAL_WEIGHT
        self.negative += int(neg.sum())
        self.infinite += int(inf.sum())
        keep = present(w) & ~inf
        kept = w[keep]
        self.present += int(keep.sum())
        self.absent += int((~(keep | nan | neg | inf)).sum())
        if self.whole and kept.size and not np.array_equal(kept, np.floor(kept)):
            self.whole = False
        self.fine_units += exact_sum(np.rint(kept * FRACTION_SCALE).astype(np.int64))
        return keep

    def to_dict(self) -> dict:
        return {"null": self.null, "negative": self.negative, "infinite": self.infinite,
                "present": self.present, "absent": self.absent, "whole": self.whole,
                "fine_units": self.fine_units}

    @classmethod
    def merge(cls, parts: list[dict]) -> WeightStats:
        out = cls()
        for p in parts:
            out.null += int(p["null"])
            out.negative += int(p["negative"])
            out.infinite += int(p["infinite"])
            out.present += int(p["present"])
            out.absent += int(p["absent"])
            out.whole = out.whole and bool(p["whole"])
            out.fine_units += int(p["fine_units"])
        return out

    @property
    def scale(self) -> int:
        """Units per unit weight: 1 if every present weight is whole, else 1024."""
        return 1 if self.whole else FRACTION_SCALE

    @property
    def total_units(self) -> int:
        """The present rows' weight in units of :attr:`scale`."""
        return self.fine_units // FRACTION_SCALE if self.whole else self.fine_units

    def problem(self, column: str) -> str | None:
        """The one-line error these weights call for, a template naming the parameter as
        ``{weight_col}`` (:class:`vmi_spark.errors.ParameterError`); None: they are fine
        (or there were no rows at all)."""
        col = column.replace("{", "{{").replace("}", "}}")
        named = f"{{weight_col}} '{col}'" if column else "{weight_col}"
        for n, what in ((self.null, "null or NaN"), (self.negative, "negative"),
                        (self.infinite, f"infinite or above {MAX_TOTAL_WEIGHT:.3g}")):
            if n:
                return (f"{named} has {n} {what} value{'s' if n > 1 else ''}; "
                        "weights must be finite and non-negative")
        if self.present == 0 and self.absent:
            return (f"every weight of {named} is 0 (or below 2**-11, which "
                    "rounds to 0): no row is left with a non-zero weight")
        if self.total_units >= MAX_TOTAL_WEIGHT:
            return (f"the weights of {named} add up to "
                    f"{self.total_units / self.scale:.6g}, {MAX_TOTAL_WEIGHT:.3g} units or more "
                    "(the most that is counted exactly); divide them by a constant")
        return None


@dataclass(frozen=True)
class Weighting:
    """How a run's weights became units: the column, :attr:`WeightStats.scale` and the
    present rows' total weight (units) and count; ``absent`` rows of weight (rounded to) 0.
    Recorded in the plan and the report (``weights``)."""

    column: str
    scale: int
    total_units: int
    rows: int
    absent: int

    @property
    def total(self) -> float:
        """The total weight (in the column's own unit)."""
        return self.total_units / self.scale

    def report(self) -> dict:
        return {"column": self.column, "integer": self.scale == 1, "scale": self.scale,
                "total": self.total, "total_units": self.total_units, "rows": self.rows,
                "rows_zero_weight": self.absent}
