"""The criterion interface and its registry (``vmi_spark.core.criterion``, ``.criteria``).

A criterion written here, against the public interface only, runs through the same loop
as the built-in methods (``vmi_spark.core.greedy.select``) and gives what a slow
computation from the raw columns gives; every registered criterion starts where its
definition says it starts. The references count with Python dictionaries and share no
code with the package.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from vmi_spark import params
from vmi_spark.core import criteria
from vmi_spark.core.criterion import BaseScorer, Criterion
from vmi_spark.core.greedy import StopSelection, select
from vmi_spark.core.inmemory import InMemoryBackend


def plugin_mi(x, y) -> float:
    """Plug-in I(x; y) in nats from dictionary counts."""
    n = len(y)
    nx, ny, nxy = Counter(x), Counter(y), Counter(zip(x, y))
    return sum(c / n * math.log(c * n / (nx[a] * ny[b])) for (a, b), c in nxy.items())


def spec_first(codes, y) -> int:
    """The largest entry of the SPEC_CMI eigenvector, from dictionary counts and numpy's
    general eigensolver."""
    cols = [tuple(c) for c in codes]
    y = tuple(y)

    def cmi(a, b):  # I(x_a; y | x_b)
        n = len(y)
        return sum(c / n * plugin_mi([r[0] for r in rows], [r[1] for r in rows])
                   for v, c in Counter(cols[b]).items()
                   for rows in [[(cols[a][k], y[k]) for k in range(n) if cols[b][k] == v]])

    d = len(cols)
    q = np.array([[plugin_mi(cols[i], y) if i == j else (cmi(i, j) + cmi(j, i)) / 2
                   for j in range(d)] for i in range(d)])
    vals, vecs = np.linalg.eig(q)
    v = np.real(vecs[:, int(np.argmax(np.real(vals)))])
    return int(np.argmax(v if v.sum() > 0 else -v))


def data(seed: int, d: int = 7, n: int = 400):
    """Features informative to different degrees, with one clear best."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    noise = rng.random((d, n)) < np.linspace(0.1, 0.9, d)[rng.permutation(d)][:, None]
    codes = np.where(noise, rng.integers(0, 3, (d, n)), (y + np.arange(d)[:, None]) % 3)
    return codes.astype(np.uint8), y.astype(np.int64)


# ------------------------------------------------------------------ a criterion of a test


class _PlainMIMScorer(BaseScorer):
    def __init__(self, backend):
        counts = backend.feature_counts()  # (D, A, L): n(x_i = a, y)
        self.num_rows = int(counts[0].sum())
        p = counts / self.num_rows
        px, py = p.sum(axis=2, keepdims=True), p.sum(axis=1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(p > 0, p * np.log(p / (px * py)), 0.0)
        self.relevance = terms.sum(axis=(1, 2))

    def gains(self, candidates, block, label):
        return self.relevance


class PlainMIM(Criterion):
    """MIM written against the public interface: the plug-in I(x_i; y) from the counts."""

    def start(self, backend, conditional_fn=None):
        return _PlainMIMScorer(backend)


@pytest.fixture
def plain_mim():
    entry = criteria.register(PlainMIM(name="plain_mim", description="MIM, in a test"))
    try:
        yield entry
    finally:
        criteria.unregister("plain_mim")


@pytest.mark.parametrize("seed", range(4))
def test_a_criterion_of_a_test_runs_through_the_loop(plain_mim, seed):
    codes, y = data(seed)
    ref = [plugin_mi(tuple(c), tuple(y)) for c in codes]
    order = sorted(range(len(ref)), key=lambda i: (-ref[i], i))
    assert all(ref[a] - ref[b] > 1e-9 for a, b in zip(order, order[1:]))  # no near ties
    by_name = select(InMemoryBackend(codes, y, chunk_rows=64), "plain_mim", 5,
                     report_candidates=2)
    by_object = select(InMemoryBackend(codes, y), plain_mim, 5)
    for sel in (by_name, by_object):
        assert sel.method == "plain_mim"
        assert sel.selected == order[:5]
        np.testing.assert_allclose(sel.scores, [ref[i] for i in order[:5]], rtol=0, atol=1e-12)
        assert sel.gains == sel.scores and sel.blocks == [0] * 5 and sel.restarts == 0
        assert sel.stop_reason == "num_features" and sel.num_rows == len(y)
    assert [c[0][0] for c in by_name.candidates] == order[:5]
    # the loop's gain threshold and callback work for it as for the built-in criteria
    cut = (ref[order[2]] + ref[order[3]]) / 2
    stopped = select(InMemoryBackend(codes, y), "plain_mim", 7, min_gain=cut)
    assert stopped.selected == order[:3] and stopped.stop_reason == "threshold"
    assert "plain_mim criterion" in stopped.stopped_early

    def stop(sel):
        raise StopSelection

    assert select(InMemoryBackend(codes, y), plain_mim, 5, on_step=stop).selected == \
        order[:1]


def test_the_registry_refuses_a_taken_name_and_keeps_the_built_in_criteria(plain_mim):
    assert criteria.criterion("plain_mim") is plain_mim
    assert criteria.registered()[-1] is plain_mim
    with pytest.raises(ValueError, match="registered already"):
        criteria.register(PlainMIM(name="mrmr", description="another"))
    with pytest.raises(ValueError, match="built-in"):
        criteria.unregister("mrmr")
    # the front ends' methods are the built-in criteria, the same objects
    assert params.METHODS == criteria.CRITERIA
    assert all(params.method(c.name) is c for c in criteria.CRITERIA)
    assert "plain_mim" not in params.METHOD_NAMES


def test_unknown_methods_and_arguments_a_criterion_does_not_take():
    codes, y = data(0)
    backend = InMemoryBackend(codes, y)
    with pytest.raises(ValueError, match="unknown method 'mifs'"):
        select(backend, "mifs", 2)
    with pytest.raises(ValueError, match="not defined for spec_cmi"):
        select(backend, "spec_cmi", 2, min_gain=0.1)
    for name in ("vmi_pairwise", "mrmr", "spec_cmi"):
        with pytest.raises(ValueError, match="supported for vmi_naive only"):
            select(backend, name, 2, conditional_fn=lambda counts: counts)


# ------------------------------------------------------------------ every registered one


@pytest.mark.parametrize("entry", criteria.CRITERIA, ids=lambda c: c.name)
@pytest.mark.parametrize("seed", range(3))
def test_every_criterion_starts_with_its_definition(entry, seed):
    """The first feature is argmax I(x_i; y) (the first step of every greedy criterion and
    of a block of the bound), or for a criterion of all the pair tables at once (SPEC_CMI)
    the largest entry of its eigenvector; a greedy first step's score is that I(x_i; y)."""
    codes, y = data(seed)
    ref = [plugin_mi(tuple(c), tuple(y)) for c in codes]
    best = int(np.argmax(ref))
    assert sorted(ref)[-1] - sorted(ref)[-2] > 1e-6  # a clear best
    sel = select(InMemoryBackend(codes, y), entry.name, 1)
    assert sel.method == entry.name and len(sel.selected) == 1
    np.testing.assert_allclose(sel.mutual_information, ref, rtol=0, atol=1e-12)
    if entry.all_pair_tables:
        assert sel.selected == [spec_first(codes, y)]
    else:
        assert sel.selected == [best]
        assert sel.scores[0] == pytest.approx(ref[best], abs=1e-12)
    assert entry.nats == (entry.unit == "nats")
    assert params.method(entry.name).description == entry.description


def test_attributes_say_what_the_steps_ask_for_and_keep():
    by = {c.name: c for c in criteria.CRITERIA}
    assert [c.name for c in criteria.CRITERIA if c.vmi] == ["vmi_naive", "vmi_pairwise"]
    assert [c.name for c in criteria.CRITERIA if c.kde] == ["vmi_naive"]
    assert [c.name for c in criteria.CRITERIA if not c.nats] == ["spec_cmi"]
    assert {c.name for c in criteria.CRITERIA if c.pair_tables_per_step} == \
        {"vmi_pairwise", "mrmr", "jmi", "cmim", "cife"}
    # per-row state the executors keep from step to step: the pairwise running sums
    assert by["vmi_pairwise"].row_state_bytes(10, 3) == 8 * 10 * 3
    assert all(c.row_state_bytes(10, 3) == 0 for c in criteria.CRITERIA
               if c.name != "vmi_pairwise")


def test_a_new_running_criterion_is_one_entry():
    """MIFS with beta = 1 (Battiti 1994; Brown et al. 2012): I(x_i; y) - sum_j I(x_i; x_j),
    declared as one :class:`~vmi_spark.core.criteria.RunningCriterion`, against the
    textbook rule re-evaluated over the whole selected set."""
    mifs = criteria.RunningCriterion(name="mifs", description="MIFS, beta = 1",
                                     term=criteria.pair_mutual_information,
                                     value=lambda relevance, running, size: relevance - running)
    assert mifs.pair_tables_per_step
    for seed in range(3):
        codes, y = data(seed, d=8)
        cols = [tuple(c) for c in codes]
        selected: list[int] = []
        while len(selected) < 6:
            values = {i: plugin_mi(cols[i], tuple(y)) - sum(plugin_mi(cols[i], cols[j])
                                                          for j in selected)
                      for i in range(len(cols)) if i not in selected}
            top = max(values.values())
            assert sorted(values.values())[-2:][0] < top - 1e-9 or len(values) == 1
            selected.append(min(i for i, v in values.items() if v == top))
        got = select(InMemoryBackend(codes, y, chunk_rows=100), mifs, 6)
        assert got.selected == selected
