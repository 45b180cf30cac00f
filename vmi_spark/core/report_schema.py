"""The schema of a selection's report (the job's ``selection.json``, the estimator's
``model.report``, the scikit-learn selector's ``report()``), declared once.

Every writer builds a :class:`SelectionReport` and every reader takes one, so that a key
is spelled in one place and a misspelt key is a type error (``mypy``) rather than a
silent ``None``. ``total=False``: the keys a front end does not give are absent (the
scikit-learn selector has no ``execution``; only weighted tables have ``weights``).
Spark-free.
"""

from __future__ import annotations

from typing import Any, TypedDict


class SelectionReport(TypedDict, total=False):
    """The fields of a selection's report; see docs/usage.md ("Outputs")."""

    # the selection, step by step (core.greedy.report_fields)
    method: str
    features: list[str]  #: the candidates, in order (``selected_indices`` index them)
    selected: list[str]
    selected_indices: list[int]
    scores: list[float]
    gains: list[float]
    blocks: list[int]
    restarts: int
    stopped_early: str | None
    stop_reason: str | None
    step_seconds: list[float]
    suspects: list[dict[str, Any]]
    duplicates: list[dict[str, Any]]
    candidates: list[list[dict[str, Any]]]  #: with ``reportCandidates`` > 0
    # the rows, the label and the coding (core.summary.selection_report)
    label: str | None
    num_rows: int
    rows_dropped: int
    rows_skipped: int
    num_classes: int
    classes: list[str]
    label_type: str
    label_decision: dict[str, str]
    label_binning: dict[str, Any]  #: a continuous label's classes
    weights: dict[str, Any]  #: weighted tables
    parameters: dict[str, Any]
    columns: list[dict[str, Any]]
    # how it ran (the Spark front end, spark.select.SelectionRun.report)
    execution: str
    storage: str
    reader: str | None
    prepare_seconds: float
    phase_seconds: dict[str, float]
    total_seconds: float
    warnings: list[str]
    stability: dict[str, Any]  #: with ``stabilityRuns`` > 0
    sparse: dict[str, Any]  #: a wide sparse vector's non-zeros path
    features_col: str  #: the vector column whose elements are the features
    # the job's own (job.py)
    job_seconds: float
    input: str | None
    format: str | None
    read_options: dict[str, str]
    input_schema: Any
    input_rows: int
    changes: dict[str, Any]  #: with ``--previous``
    pruned: dict[str, Any]  #: with ``--write-selected`` or ``--output-table``
