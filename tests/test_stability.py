"""Stability selection in the numpy core and the scikit-learn selector (issue 36).

The index and its interval against the paper's formulas computed here in exact rational
arithmetic, and a hand-computed example; the half-samples are a function of each encoded
row alone (any blocking, weights kept with their row); the runs are the in-memory
selections on those rows.
"""

from __future__ import annotations

import warnings
from fractions import Fraction
from statistics import NormalDist

import numpy as np
import pytest

from vmi_spark.core.greedy import select
from vmi_spark.core.inmemory import InMemoryBackend
from vmi_spark.core.stability import HalfSample, nogueira, run_stability, summarize
from vmi_spark.sklearn import VMIFeatureSelector


def _paper(z: list[list[int]]) -> tuple[Fraction, Fraction]:
    """Nogueira, Sechidis & Brown (JMLR 2018): Phi_hat (Definition 4) and its variance
    estimate (Section 5), written out term by term in fractions."""
    m, d = len(z), len(z[0])
    p = [Fraction(sum(z[i][f] for i in range(m)), m) for f in range(d)]
    k = [sum(row) for row in z]
    kbar = Fraction(sum(k), m)
    s2 = [Fraction(m, m - 1) * p[f] * (1 - p[f]) for f in range(d)]
    denom = (kbar / d) * (1 - kbar / d)
    phi = 1 - (sum(s2) / d) / denom
    per = []
    for i in range(m):
        term = (Fraction(sum(z[i][f] * p[f] for f in range(d)), d) - k[i] * kbar / d**2
                + phi / 2 * (2 * kbar * k[i] / d**2 - Fraction(k[i], d) - kbar / d + 1))
        per.append(term / denom)
    mean = sum(per) / m
    return phi, Fraction(4, m**2) * sum((x - mean) ** 2 for x in per)


def test_index_of_a_hand_computed_example():
    """Two runs, d = 3: p = (1, 1/2, 1/2), k = 2, s^2 = 2 p (1 - p) = (0, 1/2, 1/2),
    mean 1/3, (k/d)(1 - k/d) = 2/9: Phi = 1 - (1/3) / (2/9) = -1/2; each run's phi_i is
    the same, so the variance is 0."""
    got = nogueira(np.array([[1, 1, 0], [1, 0, 1]]))
    assert got["index"] == pytest.approx(-0.5, abs=1e-15)
    assert got["variance"] == pytest.approx(0.0, abs=1e-15)
    same = nogueira(np.array([[1, 0, 1, 0]] * 5))
    assert same["index"] == pytest.approx(1.0) and same["ci"] == pytest.approx([1.0, 1.0])


@pytest.mark.parametrize("seed", range(6))
def test_index_and_interval_against_the_papers_formulas(seed):
    rng = np.random.default_rng(seed)
    m, d = int(rng.integers(2, 30)), int(rng.integers(3, 25))
    z = (rng.random((m, d)) < rng.uniform(0.1, 0.8, d)).astype(int)
    z[0, 0], z[1, -1] = 1, 0  # neither empty nor full
    phi, var = _paper(z.tolist())
    got = nogueira(z)
    assert got["index"] == pytest.approx(float(phi), abs=1e-12)
    assert got["variance"] == pytest.approx(float(var), abs=1e-12)
    half = NormalDist().inv_cdf(0.975) * float(var) ** 0.5
    assert got["ci"] == pytest.approx([float(phi) - half, float(phi) + half], abs=1e-12)
    assert got["alpha"] == 0.05


def test_index_is_undefined_without_two_runs_or_with_every_feature():
    assert nogueira(np.ones((1, 4)))["index"] is None
    assert nogueira(np.ones((3, 4)))["index"] is None  # k = d
    assert nogueira(np.zeros((3, 4)))["index"] is None  # k = 0


def _table(seed=0, n=2000, d=7):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    codes = rng.integers(0, 4, (d, n))
    codes[0] = (y * 2 + (rng.random(n) < 0.1)) % 4
    codes[1] = (y + rng.integers(0, 2, n) * (rng.random(n) < 0.4)) % 4
    return codes.astype(np.uint8), y


def test_half_samples_depend_on_each_row_alone():
    codes, y = _table()
    keep = HalfSample(3, 1).keep(codes, y)
    # any blocking: the rows of each chunk on their own
    parts = np.concatenate([HalfSample(3, 1).keep(np.ascontiguousarray(codes[:, s:s + 333]),
                                                  y[s:s + 333]) for s in range(0, 2000, 333)])
    assert np.array_equal(keep, parts)
    # a row's decision is its content's: shuffled rows keep their decisions
    order = np.random.default_rng(1).permutation(2000)
    assert np.array_equal(HalfSample(3, 1).keep(codes[:, order], y[order]), keep[order])
    # about half, other runs and seeds draw other rows
    assert 0.4 < keep.mean() < 0.6
    assert not np.array_equal(keep, HalfSample(3, 2).keep(codes, y))
    assert not np.array_equal(keep, HalfSample(4, 1).keep(codes, y))
    assert 0.15 < HalfSample(3, 1, 0.2).keep(codes, y).mean() < 0.25
    assert HalfSample.from_dict(HalfSample(3, 1, 0.2).to_dict()) == HalfSample(3, 1, 0.2)
    for bad in ({"seed": -1, "run": 0, "fraction": 0.5}, {"seed": 1, "run": 0, "fraction": 1.0},
                {"seed": 1.5, "run": 0, "fraction": 0.5}, []):
        with pytest.raises(ValueError):
            HalfSample.from_dict(bad)


def test_the_runs_are_the_selections_on_the_kept_rows():
    codes, y = _table(2)
    backend = InMemoryBackend(codes, y, 4, 2, chunk_rows=256)
    runs = run_stability(backend, lambda b: select(b, "vmi_naive", 3), 5, seed=9)
    for b in range(5):
        m = HalfSample(9, b).keep(codes, y)
        want = select(InMemoryBackend(codes[:, m], y[m], 4, 2), "vmi_naive", 3)
        assert runs.selections[b] == want.selected
        assert runs.rows[b] == int(m.sum())
    summary = summarize(runs, [f"f{i}" for i in range(7)], [0, 1, 2])
    z = np.zeros((5, 7), int)
    for b, sel in enumerate(runs.selections):
        z[b, sel] = 1
    assert [f["feature"] for f in summary["features"]][:2] == ["f0", "f1"]
    freq = {f["feature"]: f["frequency"] for f in summary["features"]}
    assert freq == {f"f{i}": float(z[:, i].mean()) for i in range(7)}
    assert summary["index"] == nogueira(z)["index"]
    assert summary["selected_frequency"]["f0"] == 1.0


def test_weighted_rows_draw_the_repeated_tables_subsamples():
    codes, y = _table(3, n=600)
    w = np.random.default_rng(3).integers(1, 4, 600)
    rep = np.repeat(np.arange(600), w)

    def runs(backend):
        return run_stability(backend, lambda b: select(b, "vmi_pairwise", 3), 4, seed=2)

    a = runs(InMemoryBackend(codes, y, 4, 2, w=w))
    b = runs(InMemoryBackend(codes[:, rep], y[rep], 4, 2))
    assert a.selections == b.selections and a.rows == b.rows


def test_sklearn_stability_report_and_plot(tmp_path):
    from vmi_spark.report import plot_stability, render_markdown

    codes, y = _table(4, n=1500)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sel = VMIFeatureSelector(n_features_to_select=3, stability=6, stability_seed=5).fit(
            codes.T, y)
    st = sel.stability_
    assert st["runs"] == 6 and st["seed"] == 5 and st["fraction"] == 0.5
    assert len(st["run_selections"]) == 6 and all(len(r) == 3 for r in st["run_selections"])
    report = sel.report()
    text = render_markdown(report)
    assert "## Stability" in text and "Stability index (Nogueira et al., JMLR 2018)" in text
    pytest.importorskip("matplotlib")
    plot_stability(report, tmp_path / "stability.png")
    assert (tmp_path / "stability.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_one_run_is_refused():
    with pytest.raises(ValueError, match="stability must be 0 .none. or at least 2"):
        VMIFeatureSelector(stability=1).fit(np.zeros((10, 2)), np.arange(10) % 2)
