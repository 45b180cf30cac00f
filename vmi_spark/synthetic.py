"""The paper's synthetic tree model (supplementary "Generating Synthetic Data").

y ~ Bernoulli(0.5); x1 ~ N(y, 1), x2 ~ N(y/1.5, 1), x3 ~ N(y/2.25, 1);
x4, x5 ~ N(x1, 1); x6, x7 ~ N(x2, 1); x8, x9 ~ N(x3, 1).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

FEATURES = [f"x{i}" for i in range(1, 10)]
#: I(x_i; y) as printed in the paper's table (N = 100,000 samples)
PAPER_MI = [0.111, 0.052, 0.022, 0.058, 0.058, 0.025, 0.029, 0.012, 0.013]


def tree_model(num_rows: int = 5000, seed: int = 0) -> pd.DataFrame:
    """Draw ``num_rows`` samples of the tree model as a DataFrame (x1..x9, y)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, size=num_rows)
    x1 = rng.normal(y, 1.0)
    x2 = rng.normal(y / 1.5, 1.0)
    x3 = rng.normal(y / 2.25, 1.0)
    cols = {"x1": x1, "x2": x2, "x3": x3,
            "x4": rng.normal(x1, 1.0), "x5": rng.normal(x1, 1.0),
            "x6": rng.normal(x2, 1.0), "x7": rng.normal(x2, 1.0),
            "x8": rng.normal(x3, 1.0), "x9": rng.normal(x3, 1.0)}
    out = pd.DataFrame(cols)
    out["y"] = y.astype(np.int32)
    return out
