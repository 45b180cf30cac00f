"""The Spark-free encoding plan (vmi_spark.core.encoding) against hand-computed codes."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from vmi_spark.core.encoding import (
    ColumnPlan,
    EncodingPlan,
    TopValues,
    binned_plan,
    categorical_plan,
    encode_column,
    encode_label,
    equal_frequency_splits,
    grouped_plan,
    top_values,
)


def test_split_rule_places_equal_frequency_points_by_rank():
    # 10 values, 4 bins: ranks floor(k * 10 / 4) = 2, 5, 7 of the sorted values
    v = np.array([9.0, 0.0, 8.0, 1.0, 7.0, 2.0, 6.0, 3.0, 5.0, 4.0, np.nan])
    assert equal_frequency_splits(v, 4) == [2.0, 5.0, 7.0]
    # ties collapse, and no split at the minimum (an empty first bin)
    assert equal_frequency_splits(np.array([1.0, 1.0, 1.0, 2.0]), 4) == [2.0]
    assert equal_frequency_splits(np.array([np.nan, np.nan]), 3) == []


def test_categorical_plan_decides_category_constant_or_bins():
    p = categorical_plan("c", "double", [3.0, 1.0], True, 2)
    assert p is not None and (p.kind, p.values, p.num_states) == ("category", [1.0, 3.0], 3)
    assert categorical_plan("c", "double", [3.0, 1.0, 2.0], False, 2) is None  # binned
    assert categorical_plan("c", "double", None, False, 2) is None  # above the cap
    empty = categorical_plan("c", "string", [], True, 2)
    assert empty is not None and (empty.kind, empty.num_states) == ("constant", 2)
    assert categorical_plan("s", "string", None, False, 2) is None  # grouped


def _slow_top(values: list, k: int) -> list:
    """The k most frequent of ``values``, ties to the smaller value: counted by hand."""
    counts = {v: values.count(v) for v in set(values)}
    return sorted(counts, key=lambda v: (-counts[v], v))[:k]


@pytest.mark.parametrize("seed", range(5))
def test_top_values_by_count_then_value(seed):
    rng = np.random.default_rng(seed)
    values = [f"v{int(x)}" for x in rng.zipf(1.6, 300) % 40]
    uniq = sorted(set(values))
    counts = [values.count(v) for v in uniq]
    for k in (0, 1, 3, 39, 100):
        top = top_values(uniq[::-1], counts[::-1], k)
        assert list(top.values) == _slow_top(values, k)
        assert list(top.counts) == [values.count(v) for v in top.values]
        assert (top.distinct, top.rows) == (len(uniq), len(values))


def test_grouped_plan_keeps_the_most_frequent_and_one_other_state():
    top = TopValues(("z", "a", "m", "b"), (9, 5, 5, 2), distinct=7, rows=22)
    p = grouped_plan("g", "string", top, True, 3, min_rows=1)  # 2 kept + (other)
    assert (p.kind, p.values, p.other, p.num_states) == ("category", ["a", "z"], True, 4)
    assert p.state_labels() == ["a", "z", "(other)", "(missing)"]
    arr = pa.array(["z", "q", None, "a", "m", "z"], pa.string())
    assert encode_column(arr, p).tolist() == [1, 2, 3, 0, 2, 1]
    # every value kept: no other state
    whole = grouped_plan("g", "string", TopValues(("a", "b"), (3, 1), 2, 4), False, 3, 1)
    assert (whole.values, whole.other, whole.num_states) == (["a", "b"], False, 2)
    # a value needs MIN_STATE_ROWS rows (10): fewer is the (other) state, an ID is one state
    few = grouped_plan("g", "string", TopValues(("z", "a", "m"), (30, 10, 9), 9, 52), False, 5)
    assert (few.values, few.other, few.num_states) == (["a", "z"], True, 3)
    ids = grouped_plan("id", "string", TopValues(("a", "b"), (1, 1), 400, 400), True, 32)
    assert (ids.values, ids.other, ids.num_states, ids.state_labels()) == \
        ([], True, 2, ["(other)", "(missing)"])
    assert EncodingPlan.from_json(EncodingPlan("y", [0, 1], "double", [p]).to_json()).columns[0] == p


def test_code_assignment_by_hand():
    bins = binned_plan("b", [2.0, 5.0], missing=True)
    v = pa.array([-1.0, 2.0, 4.9, 5.0, 9.0, float("nan"), None], pa.float64())
    # bin = #{splits <= v}; NaN and null take the missing state, the last code (3)
    assert encode_column(v, bins).tolist() == [0, 1, 1, 2, 2, 3, 3]
    cat = ColumnPlan("c", "category", values=["x", "y"], missing=True, dtype="string")
    assert encode_column(pa.array(["y", None, "x"], pa.string()), cat).tolist() == [1, 2, 0]
    const = ColumnPlan("k", "constant", missing=True)
    assert encode_column(pa.array([1.0, None, 1.0]), const).tolist() == [0, 1, 0]
    plan = EncodingPlan("y", ["no", "yes"], "string", [bins, cat])
    assert encode_label(pa.array(["yes", "no", "yes"]), plan).tolist() == [1, 0, 1]
    assert EncodingPlan.from_json(plan.to_json()) == plan
    assert plan.arity == 4 and plan.features == ["b", "c"]
