"""The report of a selection: one builder for Spark and for memory.

:func:`selection_report` gives the fields of the job's ``selection.json`` (the
estimator's ``model.report``, the scikit-learn selector's ``report()``) from the
encoding plan, the selection and the parameters, so that every front end describes a
selection in the same words. Spark-free.
"""

from __future__ import annotations

import math
from typing import Any

from .binning import json_float
from .encoding import ColumnPlan, EncodingPlan
from .greedy import Selection, report_fields
from .report_schema import SelectionReport
from .units import MEANINGS, show, show_state


def label_report(plan: EncodingPlan) -> dict[str, Any]:
    """How a continuous label was cut into classes: strategy, edges, spikes, class names."""
    return {"binning": "quantile", "edges": [json_float(e) for e in plan.label_edges or []],
            "spikes": [json_float(s) for s in plan.label_spikes or []],
            "state_names": [str(c) for c in plan.classes]}


def column_report(c: ColumnPlan, binning: str) -> dict[str, Any]:
    """How column ``c`` was coded, for the report: its kind, states and their names; for
    a binned column the strategy, the split points (``edges``: a value ``v`` gets state
    ``#{edges <= v}``) and the values that are a state of their own (``spikes``); for a
    temporal column what its numbers count (``unit``) and its edges as dates or times
    (``edges_shown``); for a category column that keeps only its most frequent values,
    ``other`` (one more state for every other value); ``constant`` for a column with one
    value (or none) besides missing ones, which can tell nothing about the label."""
    out: dict[str, Any] = {"name": c.name, "kind": c.kind, "states": c.num_states,
                           "missing_state": c.missing, "state_names": c.state_labels(),
                           "constant": c.num_states - (1 if c.missing else 0) <= 1}
    if c.unit is not None:
        out["unit"] = MEANINGS[c.unit]
    if c.kind == "category" and c.other:
        out["other"] = True
    if c.kind == "bins":
        edges = list(c.splits or [])
        # JSON has no infinities: an infinite edge or spike (a column holding inf) is a string
        out.update(binning=binning, edges=[json_float(e) for e in edges],
                   spikes=[json_float(s) for s in c.spikes or []])
        if c.unit is not None:
            out["edges_shown"] = [show(e, c.unit) for e in edges]
    return out


def json_parameters(params: dict[str, Any]) -> dict[str, Any]:
    """The parameters for JSON: a non-finite number (``restartTolerance`` ``-inf``) as a
    string (JSON has no infinities)."""
    return {k: (str(v) if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in params.items()}


def selection_report(plan: EncodingPlan, selection: Selection, params: dict[str, Any],
                     label_reason: str = "") -> SelectionReport:
    """The fields of ``selection.json`` every front end gives: the selection per step
    (:func:`vmi_spark.core.greedy.report_fields`), the rows, the label's classes and
    how the label was decided, the row weights (``weights``, weighted tables only:
    :meth:`vmi_spark.core.weights.Weighting.report`), the parameters and how every column
    was coded. The Spark front ends add how it ran (``execution``, ``reader``, ``storage``, times, warnings)."""
    out = report_fields(selection, plan.features)
    out.update({
        "label": plan.label,
        "num_rows": plan.num_rows,
        "rows_dropped": plan.rows_dropped,
        "rows_skipped": plan.rows_skipped,
        "num_classes": len(plan.classes),
        "classes": [show_state(c, "boolean" if plan.label_dtype == "boolean" else None)
                    for c in plan.classes],
        "label_type": plan.label_type,
        "label_decision": {"type": plan.label_type, "reason": label_reason},
        "parameters": json_parameters(params),
        "columns": [column_report(c, params.get("binning", "quantile")) for c in plan.columns],
    })
    if plan.label_type == "continuous":
        out["label_binning"] = label_report(plan)
    if plan.weights is not None:
        out["weights"] = dict(plan.weights)
    return out
