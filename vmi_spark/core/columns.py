"""How one column is coded: the column plan and the equal-frequency split rule.

Spark-free, shared by the Spark data layer (:mod:`vmi_spark.spark.plan`) and the
scikit-learn selector (:mod:`vmi_spark.sklearn`), so that both code a column the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["MAX_ARITY", "ColumnPlan", "equal_frequency_splits"]

#: most states a feature may have (codes are one byte)
MAX_ARITY = 256


@dataclass
class ColumnPlan:
    """How one feature column is coded."""

    name: str
    kind: str  # "category" | "bins" | "grid" (KDE) | "constant"
    values: list[Any] | None = None  # categories (sorted)
    splits: list[float] | None = None  # bin split points (sorted, unique)
    missing: bool = False  # a missing state exists (last code)
    dtype: str = "double"  # "double" | "string"

    @property
    def num_states(self) -> int:
        if self.kind == "category":
            base = len(self.values or [])
        elif self.kind in ("bins", "grid"):
            base = len(self.splits or []) + 1
        else:
            base = 1
        return max(base, 1) + (1 if self.missing else 0)

    def state_labels(self) -> list[str]:
        """Human-readable names of the states, in code order."""
        if self.kind == "category":
            labels = [str(v) for v in self.values or []] or ["(empty)"]
        elif self.kind in ("bins", "grid"):
            s = self.splits or []
            edges = [-math.inf, *s, math.inf]
            labels = [f"[{edges[i]:g}, {edges[i + 1]:g})" for i in range(len(s) + 1)]
        else:
            labels = ["(constant)"]
        if self.missing:
            labels.append("(missing)")
        return labels


def equal_frequency_splits(values: np.ndarray, num_bins: int) -> list[float]:
    """Split points giving ``num_bins`` (or fewer, on ties) equal-frequency bins."""
    v = np.sort(values[~np.isnan(values)])
    n = len(v)
    if n == 0:
        return []
    idx = (np.arange(1, num_bins) * n) // num_bins
    cand = np.unique(v[idx])
    return [float(s) for s in cand if s > v[0]]
