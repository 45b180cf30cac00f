"""Stopping on a gain threshold (``selectionMode="gain"``) and the reported stop reason.

The expected selections come from the slow references of ``test_core_bound`` (the bound
from its definition, dictionary counts) and ``test_core_criteria`` (textbook criteria
re-evaluated over the whole selected set), driven here by a plain loop that applies the
threshold rule as documented: a block whose best gain is below the threshold restarts if
some remaining feature's mutual information reaches the threshold, otherwise the
selection stops.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_core_bound import AMBIGUOUS, EPS, METHODS, random_data, reference_of
from test_core_criteria import make_data, ref_argmax, ref_criterion

from vmi_spark.core.criteria import GREEDY_METHODS
from vmi_spark.core.greedy import STOP_REASONS, StopSelection, select_classic, select_vmi
from vmi_spark.core.inmemory import InMemoryBackend


def ref_vmi_gain_mode(ref, method, min_gain, tol, k_max):
    """Algorithm 1 with the threshold rule; returns the outcome and the closest decision."""
    selected, scores, blocks = [], [], []
    block, current, block_index, restarts = [], 0.0, 0, 0
    reason, closest = "num_features", math.inf
    mi = {i: ref.plugin_mi([i]) for i in range(ref.d)}
    while len(selected) < k_max:
        remaining = [i for i in range(ref.d) if i not in selected]
        if not remaining:
            reason = "no_features_left"
            break
        values = {i: ref.bound(block + [i], method) for i in remaining}
        top = max(values.values())
        best = min(i for i in remaining if values[i] >= top - EPS)
        gain = values[best] - current
        closest = min([closest, abs(gain - min_gain)]
                      + [top - v for v in values.values() if top - v > EPS])
        if block:
            closest = min(closest, abs(gain - tol))
            new_block = max(mi[i] for i in remaining)
            closest = min(closest, abs(new_block - min_gain))
            if gain <= tol or (gain < min_gain and new_block >= min_gain):
                block, current = [], 0.0
                block_index += 1
                restarts += 1
                continue
        if not block and gain <= 0.0:
            reason = "no_information"
            break
        if gain < min_gain:
            reason = "threshold"
            break
        block.append(best)
        current = values[best]
        selected.append(best)
        scores.append(current)
        blocks.append(block_index)
    return (selected, scores, blocks, restarts, reason), closest


CASES = [(1, 6, 50, 2, 2), (2, 8, 120, 3, 3), (5, 9, 300, 3, 4)]


@pytest.mark.parametrize("min_gain", [0.004, 0.02, 0.06])
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: "seed{}-D{}".format(*c[:2]))
def test_vmi_threshold_matches_slow_reference(case, method, min_gain):
    seed, d, n, classes, arity = case
    codes, y = random_data(seed, d, n, classes, arity)
    (sel, scores, blocks, restarts, reason), closest = ref_vmi_gain_mode(
        reference_of(codes, y), method, min_gain, 0.0, d)
    if closest <= AMBIGUOUS:
        pytest.skip(f"ambiguous case (closest decision {closest:.2g})")
    got = select_vmi(InMemoryBackend(codes, y, chunk_rows=37), method, d,
                     min_gain=min_gain)
    assert got.selected == sel
    assert got.blocks == blocks
    assert got.restarts == restarts
    assert got.stop_reason == reason
    np.testing.assert_allclose(got.scores, scores, rtol=0, atol=1e-9)
    if reason == "threshold":
        assert str(min_gain) in got.stopped_early


def test_vmi_threshold_cases_stop_on_the_threshold_and_restart():
    """Guard against a trivial design: the thresholds above must both stop and restart."""
    reasons, restarts = set(), 0
    for seed, d, n, classes, arity in CASES:
        codes, y = random_data(seed, d, n, classes, arity)
        for min_gain in (0.004, 0.02, 0.06):
            got = select_vmi(InMemoryBackend(codes, y), "vmi_naive", d,
                             min_gain=min_gain)
            reasons.add(got.stop_reason)
            restarts += got.restarts
    assert "threshold" in reasons
    assert restarts > 0


def test_vmi_zero_threshold_equals_the_plain_run():
    """With min_gain 0 the rule never fires before the restart rule does: same selection."""
    codes, y = random_data(2, 8, 120, 3, 3)
    for method in METHODS:
        plain = select_vmi(InMemoryBackend(codes, y), method, 8)
        zero = select_vmi(InMemoryBackend(codes, y), method, 8, min_gain=0.0)
        assert (zero.selected, zero.scores, zero.blocks) == (plain.selected, plain.scores,
                                                             plain.blocks)
        assert plain.stop_reason == zero.stop_reason == "num_features"


@pytest.mark.parametrize("method", GREEDY_METHODS)
@pytest.mark.parametrize("seed", [0, 1])
def test_classic_threshold_matches_reference(method, seed):
    X, y = make_data(seed)
    cols, labels = [tuple(c) for c in X], tuple(y)
    cache: dict = {}
    full, values_at = [], []
    while len(full) < len(cols):  # the reference's criterion value of every step
        values = {i: ref_criterion(method, cols, labels, i, full, cache)
                  for i in range(len(cols)) if i not in full}
        best = ref_argmax(values)
        full.append(best)
        values_at.append(values[best])
    # a threshold halfway between two consecutive step values, after the first drop
    drops = [t for t in range(1, len(values_at)) if values_at[t] < values_at[t - 1] - 1e-6]
    t = drops[0]
    min_gain = (values_at[t] + values_at[t - 1]) / 2
    expected = []
    for i, v in zip(full, values_at):
        if v < min_gain:
            break
        expected.append(i)
    got = select_classic(InMemoryBackend(X, y, chunk_rows=64), method, len(cols),
                         min_gain=min_gain)
    assert got.selected == expected
    assert got.stop_reason == "threshold"
    assert f"{min_gain:g}" in got.stopped_early


def test_stop_reasons_of_plain_runs():
    X, y = make_data(0)
    d = X.shape[0]
    backend = InMemoryBackend(X, y)
    assert select_classic(backend, "mrmr", 3).stop_reason == "num_features"
    assert select_classic(backend, "mim", d + 2).stop_reason == "no_features_left"
    assert select_classic(backend, "spec_cmi", 3).stop_reason == "num_features"
    assert select_classic(backend, "spec_cmi", d + 1).stop_reason == "no_features_left"

    def stop(_sel):
        raise StopSelection

    assert select_classic(backend, "jmi", 5, on_step=stop).stop_reason == "callback"
    codes, yy = random_data(1, 6, 50, 2, 2)
    assert select_vmi(InMemoryBackend(codes, yy), "vmi_naive", 4,
                      on_step=stop).stop_reason == "callback"
    assert set(STOP_REASONS) >= {"num_features", "threshold", "callback"}


def test_spec_cmi_refuses_a_threshold():
    X, y = make_data(0)
    with pytest.raises(ValueError, match="spec_cmi"):
        select_classic(InMemoryBackend(X, y), "spec_cmi", 3, min_gain=0.1)
