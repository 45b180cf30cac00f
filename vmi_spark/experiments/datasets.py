"""Loaders for the 17 benchmark datasets of Gao et al. (NIPS 2016), supplementary Table 4.

The files and their formats are described in ``<data_dir>/SOURCES.md``; the raw
files live in ``<data_dir>/raw/<name>/``. 16 of the 17 datasets are present;
Gisette is missing (see SOURCES.md), so :func:`load` raises ``FileNotFoundError``
for it and :func:`available` skips it with a note.

:func:`load` returns the *raw* values: ``X`` as a float64 (N, d) array, ``y`` as
int64 class codes 0..L-1 (the sorted distinct labels of the file), and an
``info`` dict (name, N, d, L, the paper's N/d/L, whether the data are already
discrete, the source files).

Discretisation
--------------
The paper says only "all data are discretized". The scheme used here
(:func:`discretize`) is:

* a column with at most ``max_states`` (default 5) distinct values is kept as
  it is and recoded to 0..k-1 in the order of its sorted values (this covers the
  microarray sets lung / colon / leukemia / lymphoma, already discretized to 3
  states by Ding & Peng, the categorical splice / krvskp / promoter, and the
  binary semeion pixels);
* any other column (continuous or many-valued: waveform, ionosphere, landsat,
  musk2, spambase, optdigits 0..16, multifeat, madelon) is cut into
  ``num_bins`` (default 5) **equal-frequency** bins: the split points are the
  empirical quantiles at 1/5, 2/5, ... of the column, duplicates removed (so a
  heavily tied column gets fewer bins), and a value v goes to bin
  ``searchsorted(splits, v, side="right")``. A constant column becomes all 0.

The bins depend on X only (never on y). :func:`discretize` can be fitted on a
training fold and applied to the test fold (``fit_discretizer`` /
``apply_discretizer``); the CV harness by default discretizes each dataset once,
label-free, on all rows (see :mod:`vmi_spark.experiments.cv`).
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: default location, relative to the repository root
DEFAULT_DATA_DIR = "../shared/datasets"

#: dataset name -> (N, d, L) actually found (SOURCES.md); the paper's Table 4 values differ only for lung (L=20)
SHAPES: dict[str, tuple[int, int, int]] = {
    "lung": (73, 325, 7),
    "colon": (62, 2000, 2),
    "leukemia": (72, 7070, 2),
    "lymphoma": (96, 4026, 9),
    "splice": (3175, 60, 3),
    "landsat": (6435, 36, 6),
    "waveform": (5000, 40, 3),
    "krvskp": (3196, 36, 2),
    "ionosphere": (351, 34, 2),
    "semeion": (1593, 256, 10),
    "multifeat": (2000, 649, 10),
    "optdigits": (3823, 64, 10),
    "musk2": (6598, 166, 2),
    "spambase": (4601, 57, 2),
    "promoter": (106, 57, 2),
    "gisette": (6000, 5000, 2),
    "madelon": (2000, 500, 2),
}
#: the paper's (N, d, L) (supplementary Table 4)
PAPER_SHAPES = dict(SHAPES, lung=(73, 325, 20))
#: paper order (Table 5 rows)
NAMES = list(SHAPES)
#: datasets whose raw values are already discrete (<= 5 states per column)
ALREADY_DISCRETE = {"lung", "colon", "leukemia", "lymphoma", "splice", "krvskp", "semeion", "promoter"}

MULTIFEAT_VIEWS = ["fourier", "factors", "karhunen", "pixel", "zernike", "morphological"]


def resolve_data_dir(data_dir: str | os.PathLike | None = None) -> Path:
    """``data_dir`` as a Path; relative paths are tried from the cwd, then from the repository root."""
    p = Path(data_dir if data_dir is not None else DEFAULT_DATA_DIR)
    if p.is_absolute() or p.exists():
        return p
    repo_root = Path(__file__).resolve().parents[2]
    alt = repo_root / p
    return alt if alt.exists() else p


def _read_tsv(path: Path):
    import pandas as pd

    return pd.read_csv(path, sep="\t", compression="infer")


def _loadmat(path: Path, xkey: str, ykey: str):
    from scipy.io import loadmat

    m = loadmat(path)
    return np.asarray(m[xkey], dtype=np.float64), np.asarray(m[ykey]).ravel()


def _raw(name: str, root: Path) -> tuple[np.ndarray, np.ndarray, list[str]]:
    d = root / "raw" / name
    if name == "lung":
        files = [d / "penglungEW.txt", d / "penglungEW_labels.txt"]
        X = np.loadtxt(files[0], dtype=np.float64)
        y = np.loadtxt(files[1]).ravel()
    elif name in ("colon", "leukemia", "lymphoma"):
        files = [d / f"{name}.mat"]
        X, y = _loadmat(files[0], "X", "Y")
    elif name in ("splice", "landsat", "waveform", "krvskp", "musk2"):
        files = [d / f"{name}.mat"]
        X, y = _loadmat(files[0], "X_data", "Y_labels")
    elif name in ("ionosphere", "spambase", "promoter"):
        fname = "molecular-biology_promoters.tsv.gz" if name == "promoter" else f"{name}.tsv.gz"
        files = [d / fname]
        df = _read_tsv(files[0])
        if name == "promoter":
            df = df.drop(columns=["instance"])
        y = df.pop("target").to_numpy()
        X = df.to_numpy(dtype=np.float64)
    elif name == "semeion":
        files = [d / "semeion.data.gz"]
        with gzip.open(files[0], "rt") as fh:
            a = np.loadtxt(fh, dtype=np.float64)
        X, y = a[:, :256], np.argmax(a[:, 256:266], axis=1)
    elif name == "optdigits":
        files = [d / "optdigits.tra"]
        a = np.loadtxt(files[0], delimiter=",", skiprows=1, dtype=np.float64)
        X, y = a[:, :64], a[:, 64]
    elif name == "multifeat":
        files = [d / f"mfeat-{v}.tsv.gz" for v in MULTIFEAT_VIEWS]
        views, y = [], None
        for f in files:
            df = _read_tsv(f)
            t = df.pop("target").to_numpy()
            t = t - t.min()  # 1..10 in every view except pixel (0..9)
            if y is None:
                y = t
            elif not np.array_equal(y, t):
                raise ValueError(f"{f.name}: rows not in the same order as the first view")
            views.append(df.to_numpy(dtype=np.float64))
        X = np.hstack(views)
    elif name == "madelon":
        files = [d / "madelon_train.data.gz", d / "madelon_train.labels"]
        with gzip.open(files[0], "rt") as fh:
            X = np.loadtxt(fh, dtype=np.float64)
        y = np.loadtxt(files[1]).ravel()
    elif name == "gisette":
        files = [d / "gisette_train.data", d / "gisette_train.labels"]
        if not files[0].exists():
            raise FileNotFoundError(f"gisette is not in {root} (missing from the dataset collection; see SOURCES.md)")
        X = np.loadtxt(files[0], dtype=np.float64)
        y = np.loadtxt(files[1]).ravel()
    else:
        raise KeyError(f"unknown dataset {name!r}; expected one of {NAMES}")
    for f in files:
        if not f.exists():
            raise FileNotFoundError(f)
    return X, y, [str(f) for f in files]


def _files(name: str, root: Path) -> list[Path]:
    d = root / "raw" / name
    return {
        "lung": [d / "penglungEW.txt", d / "penglungEW_labels.txt"],
        "multifeat": [d / f"mfeat-{v}.tsv.gz" for v in MULTIFEAT_VIEWS],
        "semeion": [d / "semeion.data.gz"],
        "optdigits": [d / "optdigits.tra"],
        "madelon": [d / "madelon_train.data.gz", d / "madelon_train.labels"],
        "gisette": [d / "gisette_train.data", d / "gisette_train.labels"],
        "promoter": [d / "molecular-biology_promoters.tsv.gz"],
        "ionosphere": [d / "ionosphere.tsv.gz"],
        "spambase": [d / "spambase.tsv.gz"],
    }.get(name, [d / f"{name}.mat"])


def available(data_dir: str | os.PathLike | None = None, verbose: bool = False) -> list[str]:
    """Names (in paper order) whose files exist under ``data_dir``; missing ones are skipped with a note."""
    root = resolve_data_dir(data_dir)
    out = []
    for name in NAMES:
        if all(f.exists() for f in _files(name, root)):
            out.append(name)
        elif verbose:
            print(f"note: dataset {name} is not available under {root} (skipped)")
    return out


def load(name: str, data_dir: str | os.PathLike | None = DEFAULT_DATA_DIR
         ) -> tuple[np.ndarray, np.ndarray, dict]:
    """Load one dataset: ``(X float64 (N, d), y int64 codes 0..L-1, info)``; X holds the raw values."""
    root = resolve_data_dir(data_dir)
    X, y_raw, files = _raw(name, root)
    classes, y = np.unique(y_raw, return_inverse=True)
    info = {
        "name": name,
        "N": X.shape[0], "d": X.shape[1], "L": len(classes),
        "expected": SHAPES[name], "paper": PAPER_SHAPES[name],
        "classes": classes.tolist(),
        "already_discrete": name in ALREADY_DISCRETE,
        "files": files,
    }
    return np.ascontiguousarray(X, dtype=np.float64), y.astype(np.int64), info


@dataclass
class Discretizer:
    """Per column: ``None`` = keep (recode by ``values``), else equal-frequency split points."""

    values: list[np.ndarray | None]
    splits: list[np.ndarray | None]

    @property
    def arity(self) -> int:
        n = [len(v) if v is not None else len(s) + 1 for v, s in zip(self.values, self.splits)]
        return max(n, default=1)


def fit_discretizer(X: np.ndarray, num_bins: int = 5, max_states: int = 5) -> Discretizer:
    """Fit the module's scheme on ``X`` (see the module docstring)."""
    values, splits = [], []
    n = X.shape[0]
    for j in range(X.shape[1]):
        col = X[:, j]
        u = np.unique(col)
        if len(u) <= max_states:
            values.append(u)
            splits.append(None)
        else:
            s = np.sort(col)
            idx = (np.arange(1, num_bins) * n) // num_bins
            # split between s[i-1] and s[i] for an equal-frequency cut; drop ties
            cuts = np.unique(s[idx])
            cuts = cuts[cuts > s[0]]
            values.append(None)
            splits.append(cuts)
    return Discretizer(values, splits)


def apply_discretizer(disc: Discretizer, X: np.ndarray) -> np.ndarray:
    """(N, d) uint8 codes. Unseen values of a kept column go to the nearest known state."""
    out = np.empty(X.shape, dtype=np.uint8)
    for j, (v, s) in enumerate(zip(disc.values, disc.splits)):
        col = X[:, j]
        if v is not None:
            idx = np.clip(np.searchsorted(v, col), 0, len(v) - 1)
            out[:, j] = idx
        else:
            # bin b holds splits[b-1] <= v < splits[b]
            out[:, j] = np.searchsorted(s, col, side="right")
    return out


def job_encode(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(N, d) uint8 codes by the job's default encoding (``numBins`` 10, ``maxCategories``
    32, spike-aware ``quantile`` binning, the state budget of the default
    ``biasCorrection``), made by the one planner every front end uses
    (:func:`vmi_spark.sklearn.plan_and_encode`): the codes :class:`vmi_spark.VMISelector`
    and :class:`vmi_spark.sklearn.VMIFeatureSelector` give these columns for label ``y``."""
    from ..sklearn import plan_and_encode

    _, codes = plan_and_encode(np.asarray(X, dtype=np.float64), y)
    return codes


ENCODINGS = {"paper": lambda X, y: discretize(X), "job": job_encode}


def discretize(X: np.ndarray, num_bins: int = 5, max_states: int = 5) -> np.ndarray:
    """Discretize ``X`` with the module's scheme, fitted on ``X`` itself: (N, d) uint8 codes."""
    return apply_discretizer(fit_discretizer(X, num_bins, max_states), X)
